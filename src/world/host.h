// This machine's name as the status lines show it.
#pragma once

#include <string>

namespace gpudiag {

/// gethostname(), cut at the first '.' like `hostname -s`.
std::string short_hostname();

}  // namespace gpudiag
