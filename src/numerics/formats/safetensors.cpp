// Safetensors parsing and validation (see safetensors.h for the rules).
//
// The JSON header is parsed with nlohmann/json, after a streaming (SAX) pass
// that rejects duplicate keys (nlohmann would silently keep the last) and
// nesting deeper than any valid header needs, so a hostile header cannot make
// the parser recurse or allocate beyond a small multiple of its own size.
#include "numerics/formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "numerics/formats/quote.h"
#include "util/text.h"
#include "util/error.h"

namespace gpudiag::numerics {

namespace {

constexpr const char* kRemedy = "the file is not a valid safetensors file; write it again";

using json = nlohmann::json;

/// Thrown by the parser callback; turned into a UsageError by the caller.
struct HeaderProblem {
  std::string what;
};

std::uint64_t read_le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// nlohmann's messages start with "[json.exception.parse_error.101] "; keep
/// the useful part on one line.
std::string one_line_json_error(const std::string& msg) {
  std::string out = msg;
  if (!out.empty() && out[0] == '[') {
    auto close = out.find("] ");
    if (close != std::string::npos) out = out.substr(close + 2);
  }
  for (auto& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  return out;
}

/// A first, streaming pass over the header: rejects duplicate keys (the DOM
/// parser would silently keep the last) and nesting deeper than any valid
/// header needs, before anything is built.
class HeaderChecker : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    enter();
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second)
      throw HeaderProblem{"header has the key " + quote(k) + " twice"};
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    enter();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw HeaderProblem{"header is not valid JSON: " + one_line_json_error(e.what())};
  }

 private:
  void enter() {
    if (++depth_ > 4)
      throw HeaderProblem{"header JSON is nested deeper than a safetensors header can be"};
  }
  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;  // one set per open object
};

json parse_header_json(std::string_view text) {
  HeaderChecker checker;
  json::sax_parse(text.begin(), text.end(), &checker);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw HeaderProblem{"header is not valid JSON: " + one_line_json_error(e.what())};
  }
}

std::uint64_t as_u64(const json& v, const std::string& what) {
  if (!v.is_number_unsigned()) throw HeaderProblem{what + " is not a non-negative integer"};
  return v.get<std::uint64_t>();
}

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

struct TensorEntry {
  TensorInfo info;
  std::uint64_t begin = 0, end = 0;
};

TensorEntry parse_entry(const std::string& name, const json& v) {
  const std::string where = "tensor " + quote(name);
  if (!v.is_object())
    throw HeaderProblem{where + ": expected an object with dtype, shape, data_offsets"};
  TensorEntry e;
  e.info.name = clean_text(name);  // a stranger's bytes: escaped once, here (util/text.h)
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) throw HeaderProblem{where + ": missing \"dtype\""};
  auto type = dtype_from_safetensors(dt->get_ref<const std::string&>());
  if (!type)
    throw HeaderProblem{
        where + ": unknown dtype " + quote(dt->get<std::string>()) +
        " (known: F64 F32 F16 BF16 F8_E4M3 F8_E5M2 I64 I32 I16 I8 U64 U32 U16 U8 BOOL)"};
  e.info.dtype = *type;
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array())
    throw HeaderProblem{where + ": missing \"shape\" array"};
  std::uint64_t count = 1;
  for (const auto& d : *shape) {
    const std::uint64_t dim = as_u64(d, where + ": a shape entry");
    e.info.shape.push_back(dim);
    if (mul_overflows(count, dim, &count))
      throw HeaderProblem{where + ": the element count (product of the shape) overflows 64 bits"};
  }
  e.info.count = count;
  auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2)
    throw HeaderProblem{where + ": missing \"data_offsets\" [begin, end]"};
  e.begin = as_u64((*offsets)[0], where + ": data_offsets[0]");
  e.end = as_u64((*offsets)[1], where + ": data_offsets[1]");
  if (e.end < e.begin) throw HeaderProblem{where + ": data_offsets end is before begin"};
  std::uint64_t nbytes = 0;
  if (mul_overflows(count, dtype_size(*type), &nbytes))
    throw HeaderProblem{where + ": the byte size (count x dtype size) overflows 64 bits"};
  if (e.end - e.begin != nbytes)
    throw HeaderProblem{where + ": data_offsets span " + std::to_string(e.end - e.begin) +
                        " bytes but shape x dtype needs " + std::to_string(nbytes)};
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& v) {
  if (!v.is_object()) throw HeaderProblem{"\"__metadata__\" is not an object"};
  std::map<std::string, std::string> out;
  for (const auto& [k, val] : v.items()) {
    if (!val.is_string())
      throw HeaderProblem{"\"__metadata__\" value of " + quote(k) + " is not a string"};
    out.emplace(k, val.get<std::string>());
  }
  return out;
}

SafetensorsFile parse(Bytes file) {
  if (file.size() < 8)
    throw HeaderProblem{"file is " + std::to_string(file.size()) +
                        " bytes, too short for a safetensors header"};
  const std::uint64_t n = read_le64(file.data());
  if (n > kMaxSafetensorsHeader)
    throw HeaderProblem{"header length " + std::to_string(n) + " is larger than the " +
                        std::to_string(kMaxSafetensorsHeader) + "-byte limit"};
  if (n > file.size() - 8)
    throw HeaderProblem{"header length " + std::to_string(n) + " runs past the end of the " +
                        std::to_string(file.size()) + "-byte file (truncated?)"};
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), n);
  if (auto bad = first_invalid_utf8(text))
    throw HeaderProblem{"header is not valid UTF-8 (byte " + std::to_string(8 + *bad) + ")"};
  if (text.empty() || text[0] != '{') throw HeaderProblem{"header does not start with '{'"};
  const json header = parse_header_json(text);
  if (!header.is_object()) throw HeaderProblem{"header is not a JSON object"};

  SafetensorsFile out;
  std::vector<TensorEntry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__")
      out.metadata = parse_metadata(value);
    else
      entries.push_back(parse_entry(key, value));
  }
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.info.name < b.info.name;
  });
  const std::uint64_t data_size = file.size() - 8 - n;
  const std::uint8_t* data = file.data() + 8 + n;
  std::uint64_t expected = 0;
  for (auto& e : entries) {
    if (e.begin != expected)
      throw HeaderProblem{"tensor " + quote(e.info.name) + " starts at data offset " +
                          std::to_string(e.begin) + " but the previous tensor ends at " +
                          std::to_string(expected) +
                          (e.begin < expected ? " (overlap)" : " (gap)")};
    if (e.end > data_size)
      throw HeaderProblem{"tensor " + quote(e.info.name) + " ends at data offset " +
                          std::to_string(e.end) + ", past the end of the " +
                          std::to_string(data_size) + "-byte data area (truncated?)"};
    e.info.data = Bytes(data + e.begin, e.end - e.begin);
    expected = e.end;
  }
  if (expected != data_size)
    throw HeaderProblem{"the tensors cover " + std::to_string(expected) + " bytes of the " +
                        std::to_string(data_size) + "-byte data area"};
  out.tensors.reserve(entries.size());
  for (auto& e : entries) out.tensors.push_back(std::move(e.info));
  return out;
}

}  // namespace

SafetensorsFile parse_safetensors(Bytes file, const std::string& name) {
  try {
    return parse(file);
  } catch (const HeaderProblem& p) {
    throw UsageError(name + ": " + p.what, kRemedy);
  }
}

}  // namespace gpudiag::numerics
