/* gpudiag's scanner as a C library (libgpudiag_scan.so): the statistics
 * `gpudiag scan` computes for one tensor (abs min and max, and counts of nan,
 * +inf, -inf, zeros, subnormals and |x| >= 1e2, 1e3, 1e4), for a buffer on
 * the host or, in builds with CUDA, in device memory on a given stream; and
 * the replica checksums that compare data-parallel replicas' parameters, for
 * a batch of tensors at once. The CLI's scanners run the same code. Every function is safe to call from
 * several threads; one that fails returns -1 and leaves a one-line reason for
 * gpudiag_scan_last_error() in the calling thread. Contract: docs/scan-abi.md. */
#ifndef GPUDIAG_SCAN_H
#define GPUDIAG_SCAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPUDIAG_SCAN_API __attribute__((visibility("default")))
#else
#define GPUDIAG_SCAN_API
#endif

/* Bumped when a function or the struct below changes incompatibly. */
#define GPUDIAG_SCAN_ABI_VERSION 1

/* Element types, in safetensors' terms. */
enum gpudiag_dtype {
  GPUDIAG_F64 = 0,
  GPUDIAG_F32 = 1,
  GPUDIAG_F16 = 2,
  GPUDIAG_BF16 = 3,
  GPUDIAG_F8_E4M3 = 4, /* float8_e4m3fn: no infinities */
  GPUDIAG_F8_E5M2 = 5,
  GPUDIAG_I64 = 6,
  GPUDIAG_I32 = 7,
  GPUDIAG_I16 = 8,
  GPUDIAG_I8 = 9,
  GPUDIAG_U64 = 10,
  GPUDIAG_U32 = 11,
  GPUDIAG_U16 = 12,
  GPUDIAG_U8 = 13,
  GPUDIAG_BOOL = 14
};

typedef struct gpudiag_scan_stats {
  uint64_t count;    /* elements scanned */
  double abs_min;    /* NaN when nan > 0; as the framework's x.abs().min() */
  double abs_max;    /* NaN when nan > 0 */
  uint64_t nan, pos_inf, neg_inf;
  uint64_t zero;      /* +0 and -0 */
  uint64_t subnormal; /* floats: nonzero with the smallest exponent */
  uint64_t ge_1e2, ge_1e3, ge_1e4; /* |x| >= 100, 1000, 10000 (inf counts, nan not) */
} gpudiag_scan_stats;

/* GPUDIAG_SCAN_ABI_VERSION of the library loaded (compare with the header's). */
GPUDIAG_SCAN_API int gpudiag_scan_abi_version(void);
/* "gpudiag 0.1.0 (scan ABI 1, cpu avx2, cuda)": the build, for logs. */
GPUDIAG_SCAN_API const char* gpudiag_scan_version(void);
/* The dtype named `name` ("BF16", "bf16", "float16", "f8_e4m3", ...), or -1. */
GPUDIAG_SCAN_API int gpudiag_scan_dtype(const char* name);

/* `count` little-endian elements of `dtype` at `data` (any alignment), on the
 * host: 0 and *out filled, or -1. Large buffers use every core. */
GPUDIAG_SCAN_API int gpudiag_scan_host(const void* data, uint64_t count, int dtype, gpudiag_scan_stats* out);

/* The same for `count` elements in device memory of CUDA device `device`,
 * scanned on `stream` (a cudaStream_t, NULL for the default stream) after
 * what is already queued there; the call returns once the result is on the
 * host (waited for with a deadline). -1 in a build without CUDA. */
GPUDIAG_SCAN_API int gpudiag_scan_device(const void* data, uint64_t count, int dtype, void* stream, int device,
                        gpudiag_scan_stats* out);

/* One tensor of a batch: `count` elements of `dtype` at `data`. */
typedef struct gpudiag_scan_tensor {
  const void* data;
  uint64_t count;
  int32_t dtype;
  int32_t reserved; /* 0 */
} gpudiag_scan_tensor;

/* Replica checksums of `n` tensors: one 64-bit checksum of each tensor's
 * bytes into checksums[i] (equal bytes, equal checksums, on the CPU and the
 * GPU alike; docs/formats.md gives the algorithm), and, when `stats` is not
 * NULL, each tensor's statistics into stats[i] in the same call. `device` -1:
 * host memory, every core, statistics and checksum in one pass over it;
 * `device` >= 0: memory of that CUDA device, on `stream` after what is
 * already queued there, one kernel launch for the whole batch, returning once
 * the results are on the host (waited for with a deadline), with the device
 * rules of gpudiag_scan_device (-1 in a build without CUDA). 0, or -1. */
GPUDIAG_SCAN_API int gpudiag_scan_checksums(const gpudiag_scan_tensor* tensors, uint64_t n, int device,
                                            void* stream, uint64_t* checksums, gpudiag_scan_stats* stats);

/* Why the last call that returned -1 in this thread failed. */
GPUDIAG_SCAN_API const char* gpudiag_scan_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUDIAG_SCAN_H */
