// The C ABI of gpudiag/scan.h over the numerics scanners: argument checks,
// the dtype table, and every exception turned into -1 and a thread-local
// one-line reason. Replica checksums go to scan_host (CPU) or
// scan_device_tensors (one launch per batch on a GPU).
#include "gpudiag/scan.h"

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "numerics/scan/dtype.h"
#include "numerics/scan/scan_kernels.h"
#include "numerics/scan/scanner.h"
#include "util/error.h"

namespace {

using gpudiag::numerics::DType;

thread_local std::string last_error;

int fail(std::string why) {
  last_error = std::move(why);
  return -1;
}

bool to_dtype(int dtype, DType& out) {
  if (dtype < 0 || dtype >= static_cast<int>(std::size(gpudiag::numerics::kAllDTypes))) return false;
  out = gpudiag::numerics::kAllDTypes[dtype];
  return static_cast<int>(out) == dtype;
}

void fill(const gpudiag::numerics::TensorStats& s, gpudiag_scan_stats* out) {
  *out = {s.count,   s.abs_min,   s.abs_max, s.nan,    s.pos_inf, s.neg_inf,
          s.zero,    s.subnormal, s.ge_1e2,  s.ge_1e3, s.ge_1e4};
}

/// Checks the common arguments; returns 0, or -1 with the reason set.
int check_args(const void* data, std::uint64_t count, int dtype, gpudiag_scan_stats* out,
               DType& t) {
  if (!out) return fail("out is NULL");
  if (!to_dtype(dtype, t)) return fail("unknown dtype " + std::to_string(dtype));
  if (!data && count > 0) return fail("data is NULL with a count of " + std::to_string(count));
  if (count > (std::uint64_t{1} << 56) / gpudiag::numerics::dtype_size(t))
    return fail("a count of " + std::to_string(count) + " elements is not a buffer");
  return 0;
}

}  // namespace

extern "C" {

int gpudiag_scan_abi_version(void) { return GPUDIAG_SCAN_ABI_VERSION; }

const char* gpudiag_scan_version(void) {
  static const std::string v = std::string("gpudiag ") + GPUDIAG_VERSION_STRING + " (scan ABI " +
                               std::to_string(GPUDIAG_SCAN_ABI_VERSION) + ", cpu " +
                               gpudiag::numerics::scan_kernel_isa() +
#ifdef GPUDIAG_SCAN_WITH_CUDA
                               ", cuda)";
#else
                               ", no cuda)";
#endif
  return v.c_str();
}

int gpudiag_scan_dtype(const char* name) {
  if (!name) return -1;
  auto t = gpudiag::numerics::dtype_from_user(name);
  return t ? static_cast<int>(*t) : -1;
}

int gpudiag_scan_host(const void* data, uint64_t count, int dtype, gpudiag_scan_stats* out) {
  DType t;
  if (check_args(data, count, dtype, out, t) != 0) return -1;
  try {
    static const auto scanner = gpudiag::numerics::make_cpu_scanner(0);
    const gpudiag::numerics::TensorView v{t, gpudiag::numerics::ByteOrder::little,
                                          static_cast<const std::uint8_t*>(data), count};
    fill(scanner->scan({&v, 1})[0], out);
    return 0;
  } catch (const gpudiag::Error& e) {
    return fail(e.one_line());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

int gpudiag_scan_device(const void* data, uint64_t count, int dtype, void* stream, int device,
                        gpudiag_scan_stats* out) {
  DType t;
  if (check_args(data, count, dtype, out, t) != 0) return -1;
  if (device < 0) return fail("device " + std::to_string(device) + " is not a CUDA device ordinal");
  try {
    fill(gpudiag::numerics::scan_device_buffer(data, count, t, stream, device), out);
    return 0;
  } catch (const gpudiag::Error& e) {
    return fail(e.one_line());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

int gpudiag_scan_checksums(const gpudiag_scan_tensor* tensors, uint64_t n, int device, void* stream,
                           uint64_t* checksums, gpudiag_scan_stats* stats) {
  if (!checksums) return fail("checksums is NULL");
  if (!tensors && n > 0) return fail("tensors is NULL with n of " + std::to_string(n));
  if (device < -1) return fail("device " + std::to_string(device) + " is neither -1 (host) nor a CUDA device ordinal");
  if (n > (std::uint64_t{1} << 32) - 1) return fail("a batch of " + std::to_string(n) + " tensors is too large");
  try {
    std::vector<gpudiag::numerics::TensorView> views(n);
    gpudiag_scan_stats unused;
    for (std::uint64_t i = 0; i < n; ++i) {
      DType t;
      if (check_args(tensors[i].data, tensors[i].count, tensors[i].dtype, stats ? stats : &unused, t) != 0)
        return fail("tensor " + std::to_string(i) + ": " + last_error);
      views[i] = {t, gpudiag::numerics::ByteOrder::little,
                  static_cast<const std::uint8_t*>(tensors[i].data), tensors[i].count};
    }
    std::vector<gpudiag::numerics::TensorStats> s(stats ? n : 0);
    if (device < 0)
      gpudiag::numerics::scan_host(views, 0, stats ? s.data() : nullptr, checksums);
    else
      gpudiag::numerics::scan_device_tensors(views, stream, device, stats ? s.data() : nullptr,
                                             checksums);
    for (std::size_t i = 0; i < s.size(); ++i) fill(s[i], stats + i);
    return 0;
  } catch (const gpudiag::Error& e) {
    return fail(e.one_line());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

const char* gpudiag_scan_last_error(void) { return last_error.c_str(); }

}  // extern "C"
