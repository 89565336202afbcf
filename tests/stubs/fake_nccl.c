/* Stand-ins for libnccl.so.2, built only for the tests of gpudiag's NCCL
 * loader: the loader must name an NCCL that is too old, one that is not an
 * NCCL at all, and report the path and version of one that loads. Built four
 * ways (tests/CMakeLists.txt):
 *   FAKE_NCCL_VERSION=21300            an NCCL older than 2.14
 *   FAKE_NCCL_VERSION=22809 + FULL     every entry point gpudiag needs; each
 *                                      call fails with ncclSystemError
 *   ... + SCALABLE                     and ncclCommInitRankScalable (2.23+),
 *                                      which gpudiag binds when it is there
 *   (no FAKE_NCCL_VERSION)             a library with no ncclGetVersion */
#include <stddef.h>

#ifdef FAKE_NCCL_VERSION
int ncclGetVersion(int* v) {
  *v = FAKE_NCCL_VERSION;
  return 0;
}
#else
int not_nccl(void) { return 0; }
#endif

#ifdef FAKE_NCCL_FULL
#define FAIL_WITH_SYSTEM_ERROR(name) \
  int name() { return 2; }
FAIL_WITH_SYSTEM_ERROR(ncclGetUniqueId)
FAIL_WITH_SYSTEM_ERROR(ncclCommInitRankConfig)
FAIL_WITH_SYSTEM_ERROR(ncclCommGetAsyncError)
FAIL_WITH_SYSTEM_ERROR(ncclCommFinalize)
FAIL_WITH_SYSTEM_ERROR(ncclCommDestroy)
FAIL_WITH_SYSTEM_ERROR(ncclCommAbort)
FAIL_WITH_SYSTEM_ERROR(ncclCommUserRank)
FAIL_WITH_SYSTEM_ERROR(ncclAllReduce)
FAIL_WITH_SYSTEM_ERROR(ncclAllGather)
FAIL_WITH_SYSTEM_ERROR(ncclBroadcast)
FAIL_WITH_SYSTEM_ERROR(ncclReduceScatter)
FAIL_WITH_SYSTEM_ERROR(ncclReduce)
FAIL_WITH_SYSTEM_ERROR(ncclSend)
FAIL_WITH_SYSTEM_ERROR(ncclRecv)
FAIL_WITH_SYSTEM_ERROR(ncclGroupStart)
FAIL_WITH_SYSTEM_ERROR(ncclGroupEnd)
#ifdef FAKE_NCCL_SCALABLE
FAIL_WITH_SYSTEM_ERROR(ncclCommInitRankScalable)
#endif
const char* ncclGetErrorString(int r) { return r == 2 ? "unhandled system error (fake)" : "fake"; }
const char* ncclGetLastError(void* comm) { return "fake NCCL for gpudiag's tests"; }
#endif
