// The CUDA scanner's windows reader (cuda_scanner_impl.h): tensors in large
// file mappings are copied to the device straight from the page cache. The
// mapping is already there (readers parse from it); windows of it, planned by
// plan_windows (window_plan.h), are page-locked with cudaHostRegister and the
// copy engine reads them by DMA, so each byte crosses host memory once
// (against three times for pread into a pinned buffer and a copy from it).
//
// The mapping is read-only (PROT_READ), which cudaHostRegister accepts only
// with cudaHostRegisterReadOnly, a flag this toolkit must define and the
// device must support (cudaDevAttrHostRegisterReadOnlySupported), besides
// registration itself (cudaDevAttrHostRegisterSupported). Where any of those
// is missing, the scanner uses the pread reader and says why.
//
// Two threads: a registrar registers the plan's windows in order, window i
// once windows up to i - kLiveWindows are unregistered (each after the copy
// of the last chunk reading it, seen on that chunk's event), so at most
// kLiveWindows x 128 MiB of the page cache is locked at once; the feeding
// thread (the caller) queues each chunk's copies, table and kernel once the
// chunk's windows are registered. Registering pins pages, which costs CPU
// time, so it runs ahead of the copies on its own thread. A registration that
// fails ends this scan with RegistrationFailed, after its queued copies
// drained and its windows are unregistered; the scanner then reads with pread.
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "numerics/scan/cuda_scanner_impl.h"
#include "util/strings.h"

namespace gpudiag::numerics::cuda_scan {

namespace {

struct WindowProgress {
  std::mutex m;
  std::condition_variable cv;
  std::size_t registered = 0;  ///< windows [0, registered) were registered
  std::vector<char> queued;    ///< per chunk: its copies are queued
  std::vector<char> live;      ///< per window: registered, not yet unregistered
  std::exception_ptr error;
  std::string failed;  ///< why a registration failed
  bool abort = false;
};

unsigned register_flags(int device) {
#ifdef cudaHostRegisterReadOnly
  int can_map = 0;
  (void)cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, device);
  return cudaHostRegisterReadOnly | (can_map ? cudaHostRegisterMapped : 0u);
#else
  (void)device;
  return 0;
#endif
}

}  // namespace

std::string CudaScanner::windows_unsupported() const {
#if !defined(cudaHostRegisterReadOnly) || CUDART_VERSION < 11010
  return "this CUDA toolkit has no cudaHostRegisterReadOnly";
#else
  int supported = 0, read_only = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterSupported, device_) != cudaSuccess ||
      cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, device_) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return "the driver did not say whether " + gpu_ + " can register host memory";
  }
  if (!supported) return gpu_ + " cannot register host memory (cudaDevAttrHostRegisterSupported 0)";
  if (!read_only)
    return gpu_ + " cannot register read-only host memory (cudaDevAttrHostRegisterReadOnlySupported 0)";
  return {};
#endif
}

void CudaScanner::run_windows(const WindowPlan& plan, std::span<const MappedRange> mappings,
                              std::size_t first) {
  WindowProgress st;
  st.queued.assign(plan.chunks.size(), 0);
  st.live.assign(plan.windows.size(), 0);
  const unsigned flags = register_flags(device_);
  auto host = [&](const HostWindow& w) {
    return const_cast<std::uint8_t*>(mappings[w.mapping].base + w.begin);
  };
  std::size_t retired = 0;  // the registrar's: windows [0, retired) were unregistered
  // Unregisters windows up to `last` in order, each after the copy of the
  // last chunk reading it. False: aborted.
  auto retire_through = [&](std::size_t last) {
    for (; retired <= last; ++retired) {
      const std::size_t c = plan.windows[retired].retire_after;
      {
        std::unique_lock lock(st.m);
        const auto deadline = Deadline::after_seconds(kWaitSeconds);
        if (!st.cv.wait_until(lock, deadline.when(), [&] { return st.abort || st.queued[c]; }))
          throw TimeoutError("CUDA scanner: chunk " + std::to_string(first + c) +
                             " was not queued within " + std::to_string(int(kWaitSeconds)) + " s");
        if (st.abort) return false;
      }
      // Chunk c's event, or a later chunk's on the same stream: done either way.
      wait_event(copied_[kRing.host_slot(first + c)]->get(), gpu_,
                 "a chunk's copy from a registered window", hung_);
      check(cudaHostUnregister(host(plan.windows[retired])), gpu_, "cudaHostUnregister");
      std::lock_guard lock(st.m);
      st.live[retired] = 0;
    }
    return true;
  };
  auto registrar = [&] {
    try {
      set_device(device_);
      for (std::size_t i = 0; i < plan.windows.size(); ++i) {
        if (i >= kLiveWindows && !retire_through(i - kLiveWindows)) return;
        const HostWindow& w = plan.windows[i];
        const cudaError_t e = cudaHostRegister(host(w), w.end - w.begin, flags);
        std::lock_guard lock(st.m);
        if (e != cudaSuccess) {
          (void)cudaGetLastError();  // not sticky: clear it for the pread scan
          st.failed = std::string("registering ") + human_bytes(w.end - w.begin) +
                      " of a file mapping with cudaHostRegister(read-only) failed: " +
                      cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
          st.abort = true;
          st.cv.notify_all();
          return;
        }
        st.live[i] = 1;
        st.registered = i + 1;
        st.cv.notify_all();
      }
      if (!plan.windows.empty()) retire_through(plan.windows.size() - 1);
    } catch (...) {
      std::lock_guard lock(st.m);
      if (!st.error) st.error = std::current_exception();
      st.abort = true;
      st.cv.notify_all();
    }
  };

  auto feed = [&](std::size_t k) {
    const WindowChunk& c = plan.chunks[k];
    {
      std::unique_lock lock(st.m);
      const auto deadline = Deadline::after_seconds(kWaitSeconds);
      if (!st.cv.wait_until(lock, deadline.when(),
                            [&] { return st.abort || st.registered >= c.windows_through; }))
        throw TimeoutError("CUDA scanner: registering a window of a file mapping did not finish "
                           "within " + std::to_string(int(kWaitSeconds)) + " s",
                           "scan on the CPU with --device cpu");
      if (st.error) std::rethrow_exception(st.error);
      if (!st.failed.empty()) throw RegistrationFailed{st.failed};
      if (st.abort) throw Error(ExitCode::device, "CUDA scanner: the window registrar stopped");
    }
    const std::size_t g = first + k;
    std::uint8_t* dev = begin_chunk(g);
    for (const WindowCopy& cp : c.copies) {
      const HostWindow& w = plan.windows[cp.window];
      check(cudaMemcpyAsync(dev + cp.dst_offset, mappings[w.mapping].base + cp.offset, cp.bytes,
                            cudaMemcpyHostToDevice, copy()),
            gpu_, "cudaMemcpyAsync(from a registered window to the device)");
    }
    finish_chunk(g, c.pieces);
    std::lock_guard lock(st.m);
    st.queued[k] = 1;
    st.cv.notify_all();
  };

  std::jthread thread(registrar);
  try {
    for (std::size_t k = 0; k < plan.chunks.size(); ++k) feed(k);
    thread.join();
    if (st.error) std::rethrow_exception(st.error);
  } catch (...) {
    {
      std::lock_guard lock(st.m);
      st.abort = true;
      st.cv.notify_all();
    }
    if (thread.joinable()) thread.join();
    // Windows still registered: unregister them once the copies reading
    // them are done; a hung GPU keeps them (unregistering could block).
    drain();
    if (!hung_)
      for (std::size_t i = 0; i < plan.windows.size(); ++i)
        if (st.live[i]) (void)cudaHostUnregister(host(plan.windows[i]));
    throw;
  }
}

}  // namespace gpudiag::numerics::cuda_scan
