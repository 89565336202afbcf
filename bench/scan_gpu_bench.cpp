// The CUDA scanner against the copies that bound it, on one GPU, for
// bench/scan_speed.py (built as build/scan_gpu_bench in CUDA builds):
//   - device:   scan_device_buffer on N MiB already on the GPU vs what the
//               memory can read: twice the rate of a device-to-device copy of
//               the same bytes (it reads and writes each byte), timed between
//               two CUDA events (target >= 85%);
//   - pipeline: the scanner on a file in the page cache vs cudaMemcpy from
//               pinned host memory (target >= 80%), with each file reader
//               --reader asks for: "windows" (read-only windows of the
//               mapping registered and copied from by DMA), "pread" (reader
//               threads into pinned buffers, then a copy), or "both" (the
//               default), side by side; each reports the path that really
//               ran (windows falls back to pread where registering fails).
// Prints one JSON object: pipeline_gbps and pipeline_vs_h2d are the first
// reader's, pipeline_<reader>_gbps, <reader>_vs_h2d and <reader>_path each's.
// Exit 2 with a line when no GPU is usable.
// Usage: scan_gpu_bench [--mib 1024] [--file-mib 1024] [--dir /dev/shm] [--repeat 5]
//                       [--reader windows|pread|both]
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cuda.h"
#include "numerics/formats/mapped_file.h"
#include "numerics/scan/scanner.h"

using namespace gpudiag;
using namespace gpudiag::numerics;

namespace {

template <class F>
double median_seconds(int repeat, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<std::uint16_t> fp16_data(std::size_t n) {
  std::vector<std::uint16_t> v(n);
  std::mt19937 rng(1);
  // Normal-ish fp16 patterns: random sign and mantissa, exponents around 1.
  for (auto& x : v) x = static_cast<std::uint16_t>((rng() & 0x83FF) | ((13 + rng() % 4) << 10));
  v[7] = 0x7C00;  // one inf, as the file bench has
  return v;
}

void sync_or_die(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "scan_gpu_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 1024, file_mib = 1024;
  int repeat = 5;
  std::string dir = "/dev/shm", reader = "both";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--reader") reader = argv[i + 1];
    if (a == "--mib") mib = std::stoul(argv[i + 1]);
    if (a == "--file-mib") file_mib = std::stoul(argv[i + 1]);
    if (a == "--repeat") repeat = std::stoi(argv[i + 1]);
    if (a == "--dir") dir = argv[i + 1];
  }
  std::vector<std::pair<std::string, FileReader>> readers;
  if (reader == "windows" || reader == "both") readers.emplace_back("windows", FileReader::windows);
  if (reader == "pread" || reader == "both") readers.emplace_back("pread", FileReader::pread);
  if (readers.empty())
    return std::fprintf(stderr, "scan_gpu_bench: --reader %s: give windows, pread or both\n",
                        reader.c_str()),
           2;
  const CudaStatus st = probe_cuda();
  if (!st.usable) {
    std::printf("{\"gpu\": null, \"why\": \"no GPU\"}\n");
    std::fprintf(stderr, "scan_gpu_bench: no GPU: %s\n", st.error.c_str());
    return 2;
  }
  set_device(0);
  const std::string name = gpu_info(0).name;

  // Device-resident: the kernel vs a device-to-device copy of the same bytes.
  const std::size_t bytes = mib << 20;
  const auto host = fp16_data(bytes / 2);
  DeviceBuffer src(bytes), dst(bytes);
  copy_to_device(src.get(), host.data(), bytes);
  (void)scan_device_buffer(src.get(), bytes / 2, DType::F16, nullptr, 0);  // warm
  const double kernel_s = median_seconds(
      repeat, [&] { (void)scan_device_buffer(src.get(), bytes / 2, DType::F16, nullptr, 0); });
  // A device-to-device cudaMemcpy returns before the copy is done (CUDA's
  // "API synchronization behavior"): timed on the device between events.
  std::vector<double> d2d;
  cudaEvent_t e0, e1;
  sync_or_die(cudaEventCreate(&e0), "cudaEventCreate");
  sync_or_die(cudaEventCreate(&e1), "cudaEventCreate");
  for (int i = 0; i <= repeat; ++i) {  // the first is a warm-up
    sync_or_die(cudaEventRecord(e0), "cudaEventRecord");
    sync_or_die(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice), "D2D");
    sync_or_die(cudaEventRecord(e1), "cudaEventRecord");
    sync_or_die(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float ms = 0;
    sync_or_die(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    if (i > 0) d2d.push_back(ms / 1e3);
  }
  std::sort(d2d.begin(), d2d.end());
  const double d2d_s = d2d[d2d.size() / 2];

  // Pipeline: a file in the page cache through the scanner vs pinned H2D copies.
  const std::size_t fbytes = file_mib << 20;
  std::string path = dir + "/gpudiag-scan-bench-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return std::perror("mkstemp"), 1;
  for (std::size_t off = 0; off < fbytes; off += bytes) {
    const std::size_t n = std::min(bytes, fbytes - off);
    if (::write(fd, host.data(), n) != static_cast<ssize_t>(n)) return std::perror("write"), 1;
  }
  ::close(fd);
  double h2d_s = 0;
  struct Run {
    std::string name, path;
    double seconds = 0;
  };
  std::vector<Run> runs;
  {
    MappedFile m(path);
    const TensorView v{DType::F16, ByteOrder::little, m.bytes().data(), fbytes / 2};
    for (const auto& [rname, r] : readers) {
      std::string why;
      auto cuda = make_cuda_scanner(&why, 0, r);
      if (!cuda) return std::fprintf(stderr, "scan_gpu_bench: %s\n", why.c_str()), 1;
      (void)cuda->scan({&v, 1});  // warm
      const double s = median_seconds(repeat, [&] { (void)cuda->scan({&v, 1}); });
      runs.push_back({rname, cuda->reader(), s});
    }
    void* pinned = nullptr;
    const std::size_t piece = std::size_t{64} << 20;
    sync_or_die(cudaHostAlloc(&pinned, piece, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(pinned, 1, piece);
    h2d_s = median_seconds(repeat, [&] {
      for (std::size_t off = 0; off < fbytes; off += piece)
        sync_or_die(cudaMemcpy(static_cast<char*>(src.get()) + (off % bytes), pinned,
                               std::min({piece, fbytes - off, bytes - off % bytes}),
                               cudaMemcpyHostToDevice),
                    "cudaMemcpy H2D");
    });
    cudaFreeHost(pinned);
  }
  ::unlink(path.c_str());
  const double k = bytes / kernel_s / 1e9, c = bytes / d2d_s / 1e9, r = 2 * c;
  const double h = fbytes / h2d_s / 1e9, p = fbytes / runs[0].seconds / 1e9;
  std::printf(
      "{\"gpu\": \"%s\", \"device_mib\": %zu, \"kernel_gbps\": %.2f, \"d2d_memcpy_gbps\": %.2f, "
      "\"read_gbps\": %.2f, \"kernel_vs_read\": %.3f, \"file_mib\": %zu, \"pipeline_gbps\": %.2f, "
      "\"pinned_h2d_gbps\": %.2f, \"pipeline_vs_h2d\": %.3f, \"pipeline_reader\": \"%s\"",
      name.c_str(), mib, k, c, r, k / r, file_mib, p, h, p / h, runs[0].name.c_str());
  for (const Run& run : runs) {
    const double g = fbytes / run.seconds / 1e9;
    std::string how;  // the scanner's own words, made safe for a JSON string
    for (char ch : run.path) how += (ch == '"' || ch == '\\') ? '\'' : ch;
    std::printf(", \"pipeline_%s_gbps\": %.2f, \"%s_vs_h2d\": %.3f, \"%s_path\": \"%s\"",
                run.name.c_str(), g, run.name.c_str(), g / h, run.name.c_str(), how.c_str());
  }
  std::printf("}\n");
  return 0;
}
