// The collectives `gpudiag bench` measures, in nccl-tests' terms: the seven
// operations, the element types and the reductions, with the names
// nccl-tests prints and the enum values NCCL's ABI gives them.
//
// One CollCall is one call as NCCL takes it; `count` is nccl-tests'
// "paramcount", so the buffers hold (per rank, in elements):
//   all_reduce      send count,       recv count
//   all_gather      send count,       recv count * n   (rank r's block at r * count)
//   reduce_scatter  send count * n,   recv count       (rank r gets block r reduced)
//   broadcast       send count (root), recv count
//   reduce          send count,       recv count (meaningful on root only)
//   alltoall        send count * n,   recv count * n   (block p goes to rank p;
//                                                      block p of recv came from p)
//   sendrecv        send count to rank r+1, recv count from rank r-1 (mod n)
// In place means nccl-tests' offsets: recv == send for all_reduce, broadcast,
// reduce, alltoall and sendrecv; send == recv + r * count for all_gather;
// recv == send + r * count for reduce_scatter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

enum class Coll : std::uint8_t {
  all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv
};
/// nccl-tests' type list order; `half` is IEEE binary16.
enum class DType : std::uint8_t {
  int8, uint8, int32, uint32, int64, uint64, half, float32, float64, bfloat16
};
enum class RedOp : std::uint8_t { sum, prod, max, min, avg };

inline constexpr Coll kAllColls[] = {Coll::all_reduce, Coll::all_gather, Coll::reduce_scatter,
                                     Coll::broadcast,  Coll::reduce,     Coll::alltoall,
                                     Coll::sendrecv};
inline constexpr DType kAllDTypes[] = {DType::int8,  DType::uint8,   DType::int32,
                                       DType::uint32, DType::int64,  DType::uint64,
                                       DType::half,  DType::float32, DType::float64,
                                       DType::bfloat16};
inline constexpr RedOp kAllRedOps[] = {RedOp::sum, RedOp::prod, RedOp::max, RedOp::min,
                                       RedOp::avg};

/// "all_reduce", "all_gather", ...
const char* coll_name(Coll c);
/// nccl-tests' type names: "int8" "uint8" "int32" "uint32" "int64" "uint64"
/// "half" "float" "double" "bfloat16".
const char* dtype_name(DType t);
/// "sum" "prod" "max" "min" "avg".
const char* redop_name(RedOp op);
std::size_t dtype_size(DType t);
bool is_floating(DType t);
/// Whether the operation reduces (takes a RedOp) / takes a root.
bool coll_reduces(Coll c);
bool coll_has_root(Coll c);

/// "all_reduce", "allreduce", "all_reduce_perf" (nccl-tests' binary names) ...
std::optional<Coll> parse_coll(std::string_view s);
/// nccl-tests' names plus "char" "int" "float32" "float16" "fp16" "bf16"
/// "fp32" "float64" "fp64" "int32_t"-free spellings.
std::optional<DType> parse_dtype(std::string_view s);
std::optional<RedOp> parse_redop(std::string_view s);

/// ncclDataType_t / ncclRedOp_t values (stable in NCCL's ABI since 2.0;
/// bfloat16 since 2.10, ncclAvg since 2.10).
int nccl_dtype(DType t);
int nccl_redop(RedOp op);

struct CollCall {
  Coll coll = Coll::all_reduce;
  DType type = DType::float32;
  RedOp op = RedOp::sum;
  int root = 0;
  const void* send = nullptr;  ///< workspace memory
  void* recv = nullptr;        ///< workspace memory
  std::size_t count = 0;       ///< see the table above
  /// sendrecv only: with a rank here, send to and receive from that rank (the
  /// link test's pair) instead of the ring's next and previous.
  int peer = -1;
};

/// "AllGather of 1 MiB float" style name of a call, for messages (a pair's
/// sendrecv adds " with rank N").
std::string describe_call(const CollCall& c);

}  // namespace gpudiag
