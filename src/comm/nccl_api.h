// NCCL as gpudiag reaches it: a table of entry points loaded at run time.
//
// The binary never links libnccl: a diagnostic must start on the node whose
// NCCL is missing or wrong, and users need to test the NCCL their training
// job uses (often the one inside their PyTorch). load_nccl() finds the
// library (--nccl-lib, then GPUDIAG_NCCL_LIB, then the dynamic loader's own
// search: LD_LIBRARY_PATH, the ld.so cache), dlopen()s it, checks that it is
// 2.14 or newer (ncclCommInitRankConfig with a non-blocking config, and
// ncclCommFinalize, arrived in 2.14) and fills NcclApi by dlsym(); the entry
// points of later versions (ncclCommInitRankScalable 2.23, ncclAlltoAll 2.28)
// are optional and null where the library lacks them.
//
// The few ABI facts used are declared here instead of including nccl.h, so
// any CUDA build has the NCCL backend and the table can be faked in unit
// tests: ncclResult_t values, ncclDataType_t (ncclInt8 = 0 ... ncclFloat32 = 7
// ... ncclBfloat16 = 9) and ncclRedOp_t (ncclSum = 0 ... ncclAvg = 4), the 128-byte
// unique id, and the 2.14 layout of ncclConfig_t, which every later NCCL
// accepts (it copies `size` bytes and defaults the fields newer than
// `version`).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace gpudiag {

namespace nccl_abi {
struct Comm;  ///< opaque ncclComm
using CommHandle = Comm*;
/// ncclResult_t
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};
inline constexpr int kFloat32 = 7;  ///< ncclFloat32
inline constexpr int kSum = 0;      ///< ncclSum
inline constexpr int kMinVersion = 21400;
/// ncclCommInitRankScalable (several bootstrap roots) arrived in 2.23.
inline constexpr int kScalableVersion = 22300;
struct UniqueId {
  char internal[128];
};
/// ncclConfig_t as NCCL 2.14 declared it (size, magic, version, blocking).
struct Config {
  std::size_t size = sizeof(Config);
  unsigned int magic = 0xcafebeef;
  unsigned int version = kMinVersion;
  int blocking = 1;
};
}  // namespace nccl_abi

/// The NCCL entry points gpudiag calls; a stream is a cudaStream_t as void*.
struct NcclApi {
  using R = nccl_abi::Result;
  using C = nccl_abi::CommHandle;
  R (*GetVersion)(int*) = nullptr;
  R (*GetUniqueId)(nccl_abi::UniqueId*) = nullptr;
  R (*CommInitRankConfig)(C*, int, nccl_abi::UniqueId, int, nccl_abi::Config*) = nullptr;
  R (*CommGetAsyncError)(C, R*) = nullptr;
  R (*CommFinalize)(C) = nullptr;
  R (*CommDestroy)(C) = nullptr;
  R (*CommAbort)(C) = nullptr;
  R (*CommUserRank)(C, int*) = nullptr;
  R (*AllReduce)(const void*, void*, std::size_t, int, int, C, void*) = nullptr;
  R (*AllGather)(const void*, void*, std::size_t, int, C, void*) = nullptr;
  R (*Broadcast)(const void*, void*, std::size_t, int, int, C, void*) = nullptr;
  R (*ReduceScatter)(const void*, void*, std::size_t, int, int, C, void*) = nullptr;
  R (*Reduce)(const void*, void*, std::size_t, int, int, int, C, void*) = nullptr;
  R (*Send)(const void*, std::size_t, int, int, C, void*) = nullptr;
  R (*Recv)(void*, std::size_t, int, int, C, void*) = nullptr;
  R (*GroupStart)() = nullptr;
  R (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(R) = nullptr;
  const char* (*GetLastError)(C) = nullptr;
  /// ncclAlltoAll, from NCCL 2.28 (null before: alltoall is then a group of
  /// sends and receives, as nccl-tests' alltoall_perf does there too).
  R (*AlltoAll)(const void*, void*, std::size_t, int, C, void*) = nullptr;
  /// ncclCommInitRankScalable(newcomm, nranks, myrank, nId, commIds, config),
  /// from NCCL 2.23 (null before: one bootstrap root, ncclCommInitRankConfig).
  R (*CommInitRankScalable)(C*, int, int, int, nccl_abi::UniqueId*, nccl_abi::Config*) = nullptr;
};

/// The outcome of looking for libnccl; `api` is set only when it is usable.
struct NcclLibrary {
  const NcclApi* api = nullptr;
  std::string path;     ///< the file loaded (resolved), or the one that was wrong
  int version = 0;      ///< ncclGetVersion(), 0 when unknown
  std::string how;      ///< "--nccl-lib", "GPUDIAG_NCCL_LIB", "the loader's search path"
  std::string error;    ///< why not usable (one line, with what to do)
  bool usable() const { return api != nullptr; }
};

/// Loads NCCL once per process (later calls return the first outcome; a
/// different `explicit_path` than the first call's is an error). `explicit_path`
/// is --nccl-lib ("" = none); GPUDIAG_NCCL_LIB is read from the environment.
const NcclLibrary& load_nccl(const std::string& explicit_path = {});

/// The same search, uncached, for tests: `env_path` stands for GPUDIAG_NCCL_LIB.
/// The library stays loaded for the life of the process.
NcclLibrary find_nccl(const std::string& explicit_path, const std::string& env_path);

/// 22809 -> "2.28.9"; 0 -> "none".
std::string nccl_version_string(int code);

}  // namespace gpudiag
