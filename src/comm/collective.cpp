// Names, sizes and parsing of the bench's collectives (collective.h).
#include "comm/collective.h"

#include <algorithm>
#include <cctype>

#include "util/strings.h"

namespace gpudiag {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::all_reduce: return "all_reduce";
    case Coll::all_gather: return "all_gather";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::broadcast: return "broadcast";
    case Coll::reduce: return "reduce";
    case Coll::alltoall: return "alltoall";
    case Coll::sendrecv: return "sendrecv";
  }
  return "?";
}

const char* dtype_name(DType t) {
  static const char* names[] = {"int8",   "uint8", "int32", "uint32", "int64",
                                "uint64", "half",  "float", "double", "bfloat16"};
  return names[static_cast<int>(t)];
}

const char* redop_name(RedOp op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[static_cast<int>(op)];
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::int8: case DType::uint8: return 1;
    case DType::half: case DType::bfloat16: return 2;
    case DType::int32: case DType::uint32: case DType::float32: return 4;
    case DType::int64: case DType::uint64: case DType::float64: return 8;
  }
  return 1;
}

bool is_floating(DType t) {
  return t == DType::half || t == DType::float32 || t == DType::float64 || t == DType::bfloat16;
}

bool coll_reduces(Coll c) {
  return c == Coll::all_reduce || c == Coll::reduce_scatter || c == Coll::reduce;
}

bool coll_has_root(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }

namespace {

std::string lower_no_dashes(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<Coll> parse_coll(std::string_view s) {
  std::string k = lower_no_dashes(s);
  if (k.size() > 4 && k.ends_with("perf")) k.resize(k.size() - 4);
  for (Coll c : kAllColls)
    if (lower_no_dashes(coll_name(c)) == k) return c;
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view s) {
  const std::string k = lower_no_dashes(s);
  for (DType t : kAllDTypes)
    if (k == dtype_name(t)) return t;
  struct Alias {
    const char* name;
    DType type;
  };
  static const Alias aliases[] = {
      {"char", DType::int8},        {"int", DType::int32},       {"float32", DType::float32},
      {"fp32", DType::float32},     {"float16", DType::half},    {"fp16", DType::half},
      {"bf16", DType::bfloat16},    {"float64", DType::float64}, {"fp64", DType::float64},
  };
  for (const auto& a : aliases)
    if (k == a.name) return a.type;
  return std::nullopt;
}

std::optional<RedOp> parse_redop(std::string_view s) {
  const std::string k = lower_no_dashes(s);
  for (RedOp op : kAllRedOps)
    if (k == redop_name(op)) return op;
  return std::nullopt;
}

int nccl_dtype(DType t) { return static_cast<int>(t); }  // ncclInt8 = 0 ... ncclBfloat16 = 9
int nccl_redop(RedOp op) { return static_cast<int>(op); }  // ncclSum = 0 ... ncclAvg = 4

std::string describe_call(const CollCall& c) {
  static const char* calls[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                "Reduce",    "AlltoAll",  "SendRecv"};
  std::string out = std::string(calls[static_cast<int>(c.coll)]) + " of " +
                    human_bytes(c.count * dtype_size(c.type)) + " " + dtype_name(c.type);
  if (c.coll == Coll::sendrecv && c.peer >= 0) out += " with rank " + std::to_string(c.peer);
  return out;
}

}  // namespace gpudiag
