// Which environment variables hold secrets, and what is shown in their place.
// gpudiag's job secret (GPUDIAG_SECRET) proves a rank belongs to the job; once
// printed (by `info`, into a job's log, into a record) it proves nothing. The
// rule is by name, so other credentials that reach a rank's environment
// (a TOKEN, a PASSWORD, a KEY of a cloud SDK) are kept out of output too.
#pragma once

#include <string>
#include <string_view>

namespace gpudiag {

/// True for GPUDIAG_SECRET and any name holding SECRET, TOKEN, PASSWORD,
/// PASSWD, CREDENTIAL, PRIVATE or ending in _KEY (case-insensitive).
/// GPUDIAG_SECRET_FILE names a file, not a secret, and is shown.
bool is_secret_name(std::string_view name);

/// What output shows for a secret's value: "(set, 32 bytes, not shown)".
std::string hidden_value(std::string_view value);

}  // namespace gpudiag
