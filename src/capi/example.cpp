// Scans a buffer through libgpudiag_scan.so as a user's C++ program would:
// build with `-I<gpudiag>/src/capi -L<build> -lgpudiag_scan`, run, and it
// prints the statistics of a float buffer with one inf in it.
#include <gpudiag/scan.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  if (gpudiag_scan_abi_version() != GPUDIAG_SCAN_ABI_VERSION) {
    std::fprintf(stderr, "libgpudiag_scan ABI %d, header %d\n", gpudiag_scan_abi_version(),
                 GPUDIAG_SCAN_ABI_VERSION);
    return 2;
  }
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(i) - 100.0f;
  x[7] = INFINITY;
  gpudiag_scan_stats s;
  if (gpudiag_scan_host(x.data(), x.size(), GPUDIAG_F32, &s) != 0) {
    std::fprintf(stderr, "scan failed: %s\n", gpudiag_scan_last_error());
    return 1;
  }
  std::printf("%s\ncount %llu abs_min %g abs_max %g nan %llu +inf %llu ge_1e2 %llu\n",
              gpudiag_scan_version(), static_cast<unsigned long long>(s.count), s.abs_min,
              s.abs_max, static_cast<unsigned long long>(s.nan),
              static_cast<unsigned long long>(s.pos_inf), static_cast<unsigned long long>(s.ge_1e2));
  return 0;
}
