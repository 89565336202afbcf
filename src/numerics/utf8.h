// UTF-8 validation for file headers (safetensors JSON, npy v3 dict).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace gpudiag::numerics {

/// The offset of the first byte that is not part of well-formed UTF-8
/// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF);
/// nullopt when all of `s` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view s);

}  // namespace gpudiag::numerics
