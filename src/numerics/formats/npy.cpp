#include "numerics/formats/npy.h"

#include <cstring>
#include <string_view>

#include "numerics/formats/npy_header.h"
#include "numerics/formats/quote.h"
#include "util/text.h"
#include "util/error.h"

namespace gpudiag::numerics {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

struct Descr {
  char kind = 0;  ///< numpy kind character: f i u b V ...
  std::size_t itemsize = 0;
  ByteOrder order = ByteOrder::little;
};

Descr split_descr(const std::string& d) {
  Descr out;
  std::size_t i = 0;
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    out.order = d[0] == '>' ? ByteOrder::big : ByteOrder::little;
    i = 1;
  }
  if (i >= d.size()) throw NpyHeaderError("'descr' " + quote(d) + " is not a numpy type string");
  out.kind = d[i++];
  if (out.kind == 'O')
    throw NpyHeaderError("object arrays are not supported (they hold Python objects, not numbers)");
  std::size_t size = 0;
  if (i == d.size() || d.size() - i > 6)
    throw NpyHeaderError("'descr' " + quote(d) + " is not a numpy type string");
  for (; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9')
      throw NpyHeaderError("'descr' " + quote(d) + " is not a numpy type string");
    size = size * 10 + static_cast<std::size_t>(d[i] - '0');
  }
  out.itemsize = size;
  return out;
}

std::optional<DType> numeric_dtype(const Descr& d) {
  switch (d.kind) {
    case 'f':
      if (d.itemsize == 2) return DType::F16;
      if (d.itemsize == 4) return DType::F32;
      if (d.itemsize == 8) return DType::F64;
      break;
    case 'i':
      if (d.itemsize == 1) return DType::I8;
      if (d.itemsize == 2) return DType::I16;
      if (d.itemsize == 4) return DType::I32;
      if (d.itemsize == 8) return DType::I64;
      break;
    case 'u':
      if (d.itemsize == 1) return DType::U8;
      if (d.itemsize == 2) return DType::U16;
      if (d.itemsize == 4) return DType::U32;
      if (d.itemsize == 8) return DType::U64;
      break;
    case 'b':
      if (d.itemsize == 1) return DType::BOOL;
      break;
    default:
      break;
  }
  return std::nullopt;
}

/// The dtype the file's elements are scanned as; sets *applied when the
/// override was used.
DType choose_dtype(const std::string& descr, const Descr& d, std::optional<DType> override_type,
                   bool* applied) {
  const bool raw = d.kind == 'V' || d.kind == 'i' || d.kind == 'u';
  if (override_type && raw) {
    if (dtype_size(*override_type) != d.itemsize)
      throw NpyHeaderError("--dtype " + std::string(dtype_name(*override_type)) + " has " +
                               std::to_string(dtype_size(*override_type)) +
                               "-byte elements but the file stores " + std::to_string(d.itemsize) +
                               "-byte elements (descr " + quote(descr) + ")",
                           "pass a --dtype with the file's item size, or none");
    *applied = true;
    return *override_type;
  }
  if (d.kind == 'V')
    throw NpyHeaderError("stores raw " + std::to_string(d.itemsize) + "-byte elements (descr " +
                             quote(descr) + ") of unknown type",
                         "say what they are with --dtype (bf16, f16, f8_e4m3, f8_e5m2, ...)");
  if (auto t = numeric_dtype(d)) return *t;
  throw NpyHeaderError(
      "unsupported element type (descr " + quote(descr) +
      "); supported: float16/32/64, int8-64, uint8-64, bool, and raw void with --dtype");
}

NpyArray parse(Bytes file, std::optional<DType> override_type) {
  if (file.size() < kMagicLen + 2 || std::memcmp(file.data(), kMagic, kMagicLen) != 0)
    throw NpyHeaderError("not a .npy file (no \\x93NUMPY magic)");
  const int major = file[6], minor = file[7];
  if (major < 1 || major > 3 || minor != 0)
    throw NpyHeaderError("unsupported .npy format version " + std::to_string(major) + "." +
                         std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = kMagicLen + 2 + len_bytes;
  if (file.size() < prefix) throw NpyHeaderError("file is too short for a .npy header length");
  std::size_t hlen = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) hlen |= std::size_t{file[8 + i]} << (8 * i);
  if (hlen > kMaxNpyHeader)
    throw NpyHeaderError("header length " + std::to_string(hlen) + " is larger than the " +
                         std::to_string(kMaxNpyHeader) + "-byte limit");
  if (hlen > file.size() - prefix)
    throw NpyHeaderError("header length " + std::to_string(hlen) + " runs past the end of the " +
                         std::to_string(file.size()) + "-byte file (truncated?)");
  const std::string_view text(reinterpret_cast<const char*>(file.data() + prefix), hlen);
  if (major == 3) {
    if (auto bad = first_invalid_utf8(text))
      throw NpyHeaderError("header is not valid UTF-8 (byte " + std::to_string(prefix + *bad) +
                           ")");
  }
  const NpyHeader h = parse_npy_header(text);
  const Descr d = split_descr(h.descr);

  NpyArray out;
  out.descr = h.descr;
  out.fortran_order = h.fortran_order;
  TensorInfo& t = out.tensor;
  t.dtype = choose_dtype(h.descr, d, override_type, &out.override_applied);
  t.order = d.order;
  t.shape = h.shape;
  std::uint64_t count = 1;
  for (auto dim : h.shape)
    if (__builtin_mul_overflow(count, dim, &count))
      throw NpyHeaderError("the element count (product of the shape) overflows 64 bits");
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(count, std::uint64_t{d.itemsize}, &nbytes))
    throw NpyHeaderError("the byte size (count x item size) overflows 64 bits");
  const std::uint64_t available = file.size() - prefix - hlen;
  if (nbytes != available)
    throw NpyHeaderError("the shape and dtype need " + std::to_string(nbytes) +
                         " data bytes but the file has " + std::to_string(available) +
                         (nbytes > available ? " (truncated?)" : " (trailing bytes)"));
  t.count = count;
  t.data = Bytes(file.data() + prefix + hlen, nbytes);
  return out;
}

}  // namespace

bool looks_like_npy(Bytes file) {
  return file.size() >= kMagicLen && std::memcmp(file.data(), kMagic, kMagicLen) == 0;
}

NpyArray parse_npy(Bytes file, const std::string& name, std::optional<DType> dtype_override) {
  try {
    NpyArray a = parse(file, dtype_override);
    a.tensor.name = clean_text(name);
    return a;
  } catch (const NpyHeaderError& e) {
    throw UsageError(name + ": " + e.what(),
                     e.remedy.empty()
                         ? "the file is not a valid .npy array; save it again with numpy.save"
                         : e.remedy);
  }
}

}  // namespace gpudiag::numerics
