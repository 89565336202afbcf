// The CUDA scanner: the same statistics as the CPU scanner, computed on the
// GPU. Tensors are cut into 64 MiB pieces; the host copies each piece into a
// pinned staging buffer (two, so it stages the next while the GPU works), and
// one stream copies it in, folds every element into a small DevStats with a
// grid-stride kernel and cub::BlockReduce, merges the blocks with
// cub::DeviceReduce::Reduce and copies the DevStats into pinned memory. All of
// that is asynchronous, so the one wait per piece polls the stream against a
// deadline: a hung GPU ends the scan with a TimeoutError, and a CUDA error
// with Error(broken). The host decodes DevStats with the CPU path's dtype
// tables, so the two agree bit for bit (cuda_scanner_test.cpp checks that).
// The device is the user's --gpu or the local rank's (scan_gpu.h).
//
// Order keys: min/max are taken over unsigned 64-bit keys that order like
// the value being compared: a float's sign-cleared bit pattern, an unsigned
// integer itself, a signed integer with its sign bit flipped.
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_reduce.cuh>
#include <limits>
#include <thread>
#include <type_traits>

#include "gpu/cuda.h"
#include "numerics/scan_gpu.h"
#include "numerics/scanner.h"
#include "util/deadline.h"
#include "util/env.h"
#include "util/error.h"

namespace gpudiag::numerics {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;
constexpr std::size_t kChunkBytes = std::size_t{64} << 20;
constexpr double kChunkTimeoutSeconds = 120;
constexpr double kThresholds[3] = {1e2, 1e3, 1e4};

struct DevStats {
  std::uint64_t lo, hi, nan, pos_inf, neg_inf, zero, subnormal, ge[3];
};

__host__ __device__ DevStats identity() { return {~std::uint64_t{0}, 0, 0, 0, 0, 0, 0, {0, 0, 0}}; }

struct MergeStats {
  __host__ __device__ DevStats operator()(const DevStats& a, const DevStats& b) const {
    DevStats m;
    m.lo = a.lo < b.lo ? a.lo : b.lo;
    m.hi = a.hi > b.hi ? a.hi : b.hi;
    m.nan = a.nan + b.nan;
    m.pos_inf = a.pos_inf + b.pos_inf;
    m.neg_inf = a.neg_inf + b.neg_inf;
    m.zero = a.zero + b.zero;
    m.subnormal = a.subnormal + b.subnormal;
    for (int k = 0; k < 3; ++k) m.ge[k] = a.ge[k] + b.ge[k];
    return m;
  }
};

/// Per-dtype constants, as bit patterns of the element type (floats) or as
/// "magnitude above" limits (integers: |x| >= t  <=>  |x| > t - 1).
struct Params {
  std::uint64_t abs_mask, nan_above, inf, neg_inf, min_normal_minus_1, threshold[3];
  bool has_inf;
};

template <class U>
__device__ U swap_bytes(U v) {
  if constexpr (sizeof(U) == 2) return static_cast<U>((v >> 8) | (v << 8));
  if constexpr (sizeof(U) == 4) return static_cast<U>(__byte_perm(v, 0, 0x0123));
  if constexpr (sizeof(U) == 8) {
    const auto lo = static_cast<std::uint32_t>(v), hi = static_cast<std::uint32_t>(v >> 32);
    return (static_cast<std::uint64_t>(__byte_perm(lo, 0, 0x0123)) << 32) |
           __byte_perm(hi, 0, 0x0123);
  }
  return v;
}

template <class U, DKind K>
__device__ void fold(DevStats& s, U v, const Params& p) {
  if constexpr (K == DKind::floating) {
    const U a = static_cast<U>(v & static_cast<U>(p.abs_mask));
    s.lo = a < s.lo ? a : s.lo;
    s.hi = a > s.hi ? a : s.hi;
    s.nan += a > p.nan_above;
    if (p.has_inf) {
      s.pos_inf += v == static_cast<U>(p.inf);
      s.neg_inf += v == static_cast<U>(p.neg_inf);
    }
    s.zero += a == 0;
    s.subnormal += static_cast<U>(a - 1) < static_cast<U>(p.min_normal_minus_1);
    for (int k = 0; k < 3; ++k) s.ge[k] += a >= p.threshold[k];
  } else if constexpr (K == DKind::boolean) {
    const std::uint64_t b = v != 0;
    s.lo = b < s.lo ? b : s.lo;
    s.hi = b > s.hi ? b : s.hi;
    s.zero += b == 0;
  } else {
    U mag = v;
    std::uint64_t key = v;
    if constexpr (K == DKind::signed_int) {
      using S = std::make_signed_t<U>;
      const S sv = static_cast<S>(v);
      if (sv < 0) mag = static_cast<U>(U{0} - v);
      const S a = static_cast<S>(mag);  // the framework's abs: wraps the most negative value
      key = static_cast<std::uint64_t>(static_cast<long long>(a)) ^ (std::uint64_t{1} << 63);
    }
    s.lo = key < s.lo ? key : s.lo;
    s.hi = key > s.hi ? key : s.hi;
    s.zero += v == 0;
    for (int k = 0; k < 3; ++k) s.ge[k] += mag > p.threshold[k];
  }
}

template <class U, DKind K>
__global__ void __launch_bounds__(kThreads)
    scan_kernel(const U* x, std::size_t n, Params p, bool swap, DevStats* partial) {
  DevStats s = identity();
  for (std::size_t i = blockIdx.x * std::size_t{kThreads} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * kThreads) {
    U v = x[i];
    if (swap) v = swap_bytes(v);
    fold<U, K>(s, v, p);
  }
  using BlockReduce = cub::BlockReduce<DevStats, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const DevStats r = BlockReduce(temp).Reduce(s, MergeStats());
  if (threadIdx.x == 0) partial[blockIdx.x] = r;
}

/// A CUDA call failed while the scanner ran: the GPU (or its driver) is
/// broken, not the input, so the exit status is 1 and the remedy points at the
/// device, with the CPU scanner as the way around it.
void check(cudaError_t e, const std::string& gpu, const char* what) {
  if (e != cudaSuccess)
    throw Error(ExitCode::broken,
                "CUDA scanner on " + gpu + ": " + what + " failed: " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")",
                "check the GPU with nvidia-smi and dmesg (Xid, ECC errors), or scan on the CPU "
                "with --device cpu");
}

/// Page-locked host memory, freed on destruction. Copies between it and the
/// device are truly asynchronous, so the stream wait's deadline bounds them;
/// a copy to or from pageable memory can block inside the driver instead.
class PinnedBuffer {
 public:
  PinnedBuffer(std::size_t bytes, const std::string& gpu) {
    check(cudaMallocHost(&ptr_, bytes), gpu,
          ("cudaMallocHost(" + std::to_string(bytes >> 10) + " KiB)").c_str());
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

Params params_for(DType t) {
  Params p{};
  if (is_float(t)) {
    const FloatFormat& f = float_format(t);
    p.abs_mask = f.sign_mask - 1;
    p.nan_above = f.nan_above();
    p.inf = f.inf;
    p.neg_inf = f.inf | f.sign_mask;
    p.min_normal_minus_1 = f.min_normal - 1;
    p.has_inf = f.has_inf;
    for (int k = 0; k < 3; ++k) p.threshold[k] = float_threshold_bits(t, kThresholds[k]);
    return p;
  }
  const int bits = static_cast<int>(dtype_size(t)) * 8;
  const double max =
      bits == 64 ? 18446744073709551615.0 : static_cast<double>((std::uint64_t{1} << bits) - 1);
  for (int k = 0; k < 3; ++k)
    p.threshold[k] = kThresholds[k] - 1 >= max ? static_cast<std::uint64_t>(max)
                                               : static_cast<std::uint64_t>(kThresholds[k] - 1);
  return p;
}

TensorStats decode(const DevStats& d, DType t, std::uint64_t count) {
  TensorStats s;
  s.count = count;
  s.nan = d.nan, s.pos_inf = d.pos_inf, s.neg_inf = d.neg_inf, s.zero = d.zero;
  s.subnormal = d.subnormal, s.ge_1e2 = d.ge[0], s.ge_1e3 = d.ge[1], s.ge_1e4 = d.ge[2];
  switch (dtype_kind(t)) {
    case DKind::floating:
      // NaN patterns are above every threshold pattern: take them back out.
      s.ge_1e2 -= s.nan, s.ge_1e3 -= s.nan, s.ge_1e4 -= s.nan;
      if (s.nan > 0) {
        s.abs_min = s.abs_max = std::numeric_limits<double>::quiet_NaN();
      } else {
        s.abs_min = float_bits_to_double(t, d.lo);
        s.abs_max = float_bits_to_double(t, d.hi);
      }
      break;
    case DKind::signed_int:
      s.abs_min = static_cast<double>(static_cast<long long>(d.lo ^ (std::uint64_t{1} << 63)));
      s.abs_max = static_cast<double>(static_cast<long long>(d.hi ^ (std::uint64_t{1} << 63)));
      break;
    default:
      s.abs_min = static_cast<double>(d.lo);
      s.abs_max = static_cast<double>(d.hi);
  }
  return s;
}

/// One chunk of one tensor: the unit that goes to the GPU and back.
struct Piece {
  std::size_t tensor;
  std::uint64_t begin, count;
};

class CudaScanner final : public Scanner {
 public:
  explicit CudaScanner(int device)
      : device_(device),
        info_((set_device(device), gpu_info(device))),
        gpu_(info_.name + " (device " + std::to_string(device) + ")"),
        stream_(std::make_unique<Stream>()),
        chunk_(std::make_unique<DeviceBuffer>(kChunkBytes)),
        partial_(std::make_unique<DeviceBuffer>(kMaxBlocks * sizeof(DevStats))),
        result_(std::make_unique<DeviceBuffer>(sizeof(DevStats))),
        staging_{std::make_unique<PinnedBuffer>(kChunkBytes, gpu_),
                 std::make_unique<PinnedBuffer>(kChunkBytes, gpu_)},
        result_host_(std::make_unique<PinnedBuffer>(sizeof(DevStats), gpu_)) {
    // A build without code for this GPU's architecture fails here, at
    // creation, where --device auto can still fall back to the CPU.
    cudaFuncAttributes attr;
    check(cudaFuncGetAttributes(&attr, scan_kernel<std::uint8_t, DKind::boolean>), gpu_,
          "finding the scan kernel for this GPU's architecture (rebuild with its "
          "CMAKE_CUDA_ARCHITECTURES)");
    std::size_t temp = 0;
    check(cub::DeviceReduce::Reduce(nullptr, temp, partials(), results(), kMaxBlocks, MergeStats(),
                                    identity(), stream()),
          gpu_, "cub::DeviceReduce::Reduce (temp size)");
    temp_ = std::make_unique<DeviceBuffer>(temp);
  }

  ~CudaScanner() override {
    if (!hung_) return;
    // Work is still queued on a GPU that stopped answering, and freeing
    // device or pinned memory waits for it: that would hang the exit this
    // scanner's deadline exists for. Leave it all to the process's end.
    for (auto* p : {&chunk_, &partial_, &result_, &temp_}) (void)p->release();
    for (auto* p : {&staging_[0], &staging_[1], &result_host_}) (void)p->release();
    (void)stream_.release();
  }

  /// Pieces go out one at a time; while the GPU scans piece k, the host
  /// copies piece k + 1 into the other pinned staging buffer (the one piece
  /// k - 1 came from, whose transfer finished before piece k was queued).
  std::vector<TensorStats> scan(std::span<const TensorView> tensors) override {
    set_device(device_);
    std::vector<Piece> pieces;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::uint64_t per_chunk = kChunkBytes / dtype_size(tensors[i].dtype);
      for (std::uint64_t b = 0; b < tensors[i].count; b += per_chunk)
        pieces.push_back({i, b, std::min(per_chunk, tensors[i].count - b)});
    }
    std::vector<TensorStats> out(tensors.size());
    if (!pieces.empty()) stage(tensors, pieces[0], 0);
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      const Piece& p = pieces[k];
      const TensorView& v = tensors[p.tensor];
      enqueue(v, p.count, k % 2);
      if (k + 1 < pieces.size()) stage(tensors, pieces[k + 1], (k + 1) % 2);
      wait();
      const DevStats r = *static_cast<const DevStats*>(result_host_->get());
      out[p.tensor] = merge(out[p.tensor], decode(r, v.dtype, p.count));
    }
    return out;
  }

  std::string describe() const override {
    return "cuda (" + info_.name + ", device " + std::to_string(device_) + ")";
  }

 private:
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_->handle()); }
  DevStats* partials() const { return static_cast<DevStats*>(partial_->get()); }
  DevStats* results() const { return static_cast<DevStats*>(result_->get()); }

  /// Copies a piece from wherever the tensor lives (often a memory-mapped
  /// file) into pinned staging buffer `slot`, on the CPU.
  void stage(std::span<const TensorView> tensors, const Piece& p, std::size_t slot) {
    const TensorView& v = tensors[p.tensor];
    const std::size_t es = dtype_size(v.dtype);
    std::memcpy(staging_[slot]->get(), v.data + p.begin * es, p.count * es);
  }

  /// Queues the piece in staging buffer `slot`: copy in, scan, reduce, copy
  /// the DevStats out. Nothing here blocks; wait() does, with a deadline.
  void enqueue(const TensorView& v, std::uint64_t n, std::size_t slot) {
    check(cudaMemcpyAsync(chunk_->get(), staging_[slot]->get(), n * dtype_size(v.dtype),
                          cudaMemcpyHostToDevice, stream()),
          gpu_, "cudaMemcpyAsync(tensor chunk to the device)");
    reduce_into_host(chunk_->get(), v.dtype, n, v.order == ByteOrder::big, stream());
  }

 public:
  /// Statistics of `n` elements of `t` already on this scanner's device at
  /// `x`, computed on the caller's `stream` (so they see what was queued on
  /// it before) and waited for with the deadline. One call at a time.
  TensorStats scan_resident(const void* x, std::uint64_t n, DType t, cudaStream_t s) {
    set_device(device_);
    if (n == 0) return {};
    reduce_into_host(x, t, n, false, s);
    wait(s);
    return decode(*static_cast<const DevStats*>(result_host_->get()), t, n);
  }

 private:
  /// Queues on `s`: the kernel over `n` elements at `x`, the block merge, and
  /// the copy of the result into pinned host memory.
  void reduce_into_host(const void* x, DType t, std::uint64_t n, bool swap, cudaStream_t s) {
    const int blocks =
        static_cast<int>(std::min<std::uint64_t>(kMaxBlocks, (n + kThreads - 1) / kThreads));
    launch(x, t, n, swap, blocks, s);
    check(cudaGetLastError(), gpu_, "scan kernel launch");
    std::size_t temp = temp_->bytes();
    check(cub::DeviceReduce::Reduce(temp_->get(), temp, partials(), results(), blocks, MergeStats(),
                                    identity(), s),
          gpu_, "cub::DeviceReduce::Reduce");
    check(cudaMemcpyAsync(result_host_->get(), results(), sizeof(DevStats), cudaMemcpyDeviceToHost,
                          s),
          gpu_, "cudaMemcpyAsync(result to the host)");
  }

  void launch(const void* x, DType t, std::uint64_t n, bool swap, int blocks, cudaStream_t s) {
    const Params p = params_for(t);
    DevStats* partial = partials();
    auto go = [&]<class U, DKind K>() {
      scan_kernel<U, K><<<blocks, kThreads, 0, s>>>(static_cast<const U*>(x), n, p, swap, partial);
    };
    switch (t) {
      case DType::F64:
        return go.template operator()<std::uint64_t, DKind::floating>();
      case DType::F32:
        return go.template operator()<std::uint32_t, DKind::floating>();
      case DType::F16:
      case DType::BF16:
        return go.template operator()<std::uint16_t, DKind::floating>();
      case DType::F8_E4M3:
      case DType::F8_E5M2:
        return go.template operator()<std::uint8_t, DKind::floating>();
      case DType::I64:
        return go.template operator()<std::uint64_t, DKind::signed_int>();
      case DType::I32:
        return go.template operator()<std::uint32_t, DKind::signed_int>();
      case DType::I16:
        return go.template operator()<std::uint16_t, DKind::signed_int>();
      case DType::I8:
        return go.template operator()<std::uint8_t, DKind::signed_int>();
      case DType::U64:
        return go.template operator()<std::uint64_t, DKind::unsigned_int>();
      case DType::U32:
        return go.template operator()<std::uint32_t, DKind::unsigned_int>();
      case DType::U16:
        return go.template operator()<std::uint16_t, DKind::unsigned_int>();
      case DType::U8:
        return go.template operator()<std::uint8_t, DKind::unsigned_int>();
      case DType::BOOL:
        return go.template operator()<std::uint8_t, DKind::boolean>();
    }
  }

  /// Polls the stream against a deadline instead of an unbounded sync. A
  /// CUDA error (a faulted kernel, an Xid) is Error(broken); the deadline
  /// passing is a TimeoutError, and the scanner then leaks its buffers
  /// rather than free them into the hung device (see the destructor).
  void wait() { wait(stream()); }
  void wait(cudaStream_t s) {
    const auto deadline = Deadline::after_seconds(kChunkTimeoutSeconds);
    for (;;) {
      const cudaError_t e = cudaStreamQuery(s);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) check(e, gpu_, "scanning a chunk (copy, kernel or reduction)");
      if (deadline.expired()) {
        hung_ = true;
        throw TimeoutError("CUDA scanner: a chunk of up to 64 MiB did not finish within " +
                               std::to_string(static_cast<int>(kChunkTimeoutSeconds)) + " s on " +
                               gpu_,
                           "the GPU may be hung: check nvidia-smi and dmesg for Xid errors, or "
                           "scan on the CPU with --device cpu");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int device_;
  GpuInfo info_;
  std::string gpu_;  ///< "NVIDIA H100 80GB HBM3 (device 0)", for errors
  // Held by pointer so a hung scanner can leak them (see the destructor).
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<DeviceBuffer> chunk_, partial_, result_, temp_;
  std::unique_ptr<PinnedBuffer> staging_[2];
  std::unique_ptr<PinnedBuffer> result_host_;
  bool hung_ = false;
};

}  // namespace

TensorStats scan_device_buffer(const void* data, std::uint64_t count, DType dtype, void* stream,
                               int device) {
  // One scanner (its device buffers) per device, made on first use; calls on
  // one device take turns on its buffers.
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudaScanner>> scanners;
  std::lock_guard<std::mutex> lock(mutex);
  auto& s = scanners[device];
  if (!s) s = std::make_unique<CudaScanner>(device);
  return s->scan_resident(data, count, dtype, static_cast<cudaStream_t>(stream));
}

std::unique_ptr<Scanner> make_cuda_scanner(std::string* why_not, int ordinal) {
  const CudaStatus status = probe_cuda();
  if (!status.usable) {
    if (why_not) *why_not = status.error.empty() ? "no usable CUDA device" : status.error;
    return nullptr;
  }
  // A bad --gpu is the user's to fix, not a reason to fall back: it throws.
  const int device = choose_scan_gpu(ordinal, status.device_count, Env::from_process()).ordinal;
  try {
    return std::make_unique<CudaScanner>(device);
  } catch (const Error& e) {
    if (why_not) *why_not = e.one_line();
    return nullptr;
  }
}

}  // namespace gpudiag::numerics
