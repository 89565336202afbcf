// Finding and loading libnccl at run time (see nccl_api.h).
//
// The search stops at the first place that names a library: an explicit
// path that does not load is an error, not a reason to pick another NCCL
// behind the user's back. The loaded file's path comes from dladdr() on one
// of its symbols, so "the loader's search path" still reports which file
// that was.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "comm/nccl_api.h"

namespace gpudiag {

namespace {

constexpr const char* kSoname = "libnccl.so.2";
constexpr const char* kWhereToGet =
    "install NCCL 2.14 or newer and put its lib folder on LD_LIBRARY_PATH, or pass --nccl-lib "
    "PATH (or set GPUDIAG_NCCL_LIB), e.g. the libnccl.so.2 under your PyTorch's "
    "site-packages/nvidia/nccl/lib";

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

std::string resolved(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

template <class F>
bool bind(void* lib, const char* name, F& slot, std::string& missing) {
  void* s = dlsym(lib, name);
  if (!s) {
    if (!missing.empty()) missing += ", ";
    missing += name;
    return false;
  }
  slot = reinterpret_cast<F>(s);
  return true;
}

NcclLibrary load_from(void* lib, NcclLibrary out) {
  auto api = std::make_unique<NcclApi>();
  std::string missing;
  // ncclGetVersion first: an old library is named by its version, not by
  // the entry points it lacks.
  if (bind(lib, "ncclGetVersion", api->GetVersion, missing)) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(api->GetVersion), &info) && info.dli_fname)
      out.path = resolved(info.dli_fname);
    int v = 0;
    if (api->GetVersion(&v) == nccl_abi::kSuccess) out.version = v;
  }
  const std::string where = out.path.empty() ? std::string(kSoname) : out.path;
  if (!missing.empty() || out.version <= 0) {
    out.error = where + " (" + out.how + ") is not a usable NCCL: it has no ncclGetVersion; " +
                kWhereToGet;
    return out;
  }
  if (out.version < nccl_abi::kMinVersion) {
    out.error = "NCCL " + nccl_version_string(out.version) + " at " + where + " (" + out.how +
                ") is older than 2.14, which gpudiag needs (non-blocking ncclCommInitRankConfig, "
                "ncclCommFinalize); " + kWhereToGet;
    return out;
  }
  bind(lib, "ncclGetUniqueId", api->GetUniqueId, missing);
  bind(lib, "ncclCommInitRankConfig", api->CommInitRankConfig, missing);
  bind(lib, "ncclCommGetAsyncError", api->CommGetAsyncError, missing);
  bind(lib, "ncclCommFinalize", api->CommFinalize, missing);
  bind(lib, "ncclCommDestroy", api->CommDestroy, missing);
  bind(lib, "ncclCommAbort", api->CommAbort, missing);
  bind(lib, "ncclCommUserRank", api->CommUserRank, missing);
  bind(lib, "ncclAllReduce", api->AllReduce, missing);
  bind(lib, "ncclAllGather", api->AllGather, missing);
  bind(lib, "ncclBroadcast", api->Broadcast, missing);
  bind(lib, "ncclReduceScatter", api->ReduceScatter, missing);
  bind(lib, "ncclReduce", api->Reduce, missing);
  bind(lib, "ncclSend", api->Send, missing);
  bind(lib, "ncclRecv", api->Recv, missing);
  bind(lib, "ncclGroupStart", api->GroupStart, missing);
  bind(lib, "ncclGroupEnd", api->GroupEnd, missing);
  bind(lib, "ncclGetErrorString", api->GetErrorString, missing);
  bind(lib, "ncclGetLastError", api->GetLastError, missing);
  if (void* a2a = dlsym(lib, "ncclAlltoAll"))  // optional: NCCL 2.28 and later
    api->AlltoAll = reinterpret_cast<decltype(api->AlltoAll)>(a2a);
  // Optional: NCCL 2.23 and later; without it the check uses one bootstrap
  // root (comm/nccl_roots.h), and `gpudiag info` says it is absent.
  if (void* s = dlsym(lib, "ncclCommInitRankScalable"))
    api->CommInitRankScalable = reinterpret_cast<decltype(api->CommInitRankScalable)>(s);
  if (!missing.empty()) {
    out.error = "NCCL " + nccl_version_string(out.version) + " at " + where + " lacks " + missing +
                "; " + kWhereToGet;
    return out;
  }
  out.api = api.release();  // lives as long as the library: for the process
  return out;
}

}  // namespace

NcclLibrary find_nccl(const std::string& explicit_path, const std::string& env_path) {
  NcclLibrary out;
  std::string file;
  if (!explicit_path.empty()) {
    out.how = "--nccl-lib";
    file = explicit_path;
  } else if (!env_path.empty()) {
    out.how = "GPUDIAG_NCCL_LIB";
    file = env_path;
  } else {
    out.how = "the loader's search path";
  }
  // RTLD_LOCAL: NCCL's symbols serve this table only, never another library.
  void* lib = dlopen(file.empty() ? kSoname : file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (file.empty())
      out.error = std::string(kSoname) + " not found (LD_LIBRARY_PATH and the ld.so cache searched): " +
                  kWhereToGet;
    else
      out.error = out.how + " " + file + " could not be loaded (" + dl_error() + "); " +
                  "point it at a libnccl.so.2 of NCCL 2.14 or newer";
    out.path = file;
    return out;
  }
  return load_from(lib, out);
}

const NcclLibrary& load_nccl(const std::string& explicit_path) {
  static std::once_flag once;
  static NcclLibrary lib;
  static std::string first_path;
  std::call_once(once, [&] {
    const char* env = std::getenv("GPUDIAG_NCCL_LIB");
    first_path = explicit_path;
    lib = find_nccl(explicit_path, env ? env : "");
  });
  if (explicit_path != first_path && !explicit_path.empty()) {
    static NcclLibrary conflict;
    conflict = {};
    conflict.error = "NCCL was already loaded from " + lib.path + "; --nccl-lib " + explicit_path +
                     " cannot replace it in the same process";
    return conflict;
  }
  return lib;
}

std::string nccl_version_string(int code) {
  if (code <= 0) return "none";
  // Since 2.9 the code is major*10000 + minor*100 + patch; before, major*1000 + minor*100 + patch.
  bool modern = code >= 10000;
  int major = modern ? code / 10000 : code / 1000;
  int minor = modern ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace gpudiag
