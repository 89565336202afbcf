// Quoting untrusted text (tensor names, header keys) for one-line messages.
#pragma once

#include <string>
#include <string_view>

namespace gpudiag::numerics {

/// `s` in double quotes with control characters, quotes and backslashes
/// escaped, cut to `max_len` characters with "..." so a hostile name cannot
/// break a one-line error message or flood the terminal.
std::string quote(std::string_view s, std::size_t max_len = 120);

}  // namespace gpudiag::numerics
