// The CUDA scanner's pread reader (cuda_scanner_impl.h): tensors' bytes are
// read with pread (staged_reads.h) into a ring of three 64 MiB pinned
// staging buffers and copied from there to the device.
//
// Reads are decoupled from chunks: each chunk's buffer is cut into parts of
// kPartBytes (split_at_parts), and the parts of all chunks are one queue of
// work taken in order by up to kMaxReaders threads, so a reader that finishes
// a part takes the next one, in this chunk or the next, and as many reads are
// in flight as there are readers. The feeding thread (the caller) queues the
// copy of each part as soon as it is read, then the chunk's table and kernel
// once all its parts are copied. A reader reuses part p of a pinned buffer
// once the chunk that used the buffer before is queued and the copy of part
// p, recorded on its own event, is done: the ring never waits for a whole
// chunk's copy to refill a part.
#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "numerics/scan/cuda_scanner_impl.h"

namespace gpudiag::numerics::cuda_scan {

namespace {

/// Shared between the feeding thread and the readers.
struct Progress {
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::vector<std::uint32_t>> ready;  ///< per chunk: parts read, not yet copied
  std::vector<char> queued;                       ///< per chunk: every copy queued
  std::exception_ptr error;
  bool abort = false;
};

std::string seconds_text() { return std::to_string(static_cast<int>(kWaitSeconds)) + " s"; }

}  // namespace

void CudaScanner::run_pread(const std::vector<Chunk>& chunks, const StagingFiles& files,
                            std::size_t first) {
  const std::size_t n = chunks.size();
  if (n == 0) return;
  std::vector<std::vector<std::vector<StagedRead>>> parts(n);
  std::vector<std::size_t> start(n + 1, 0);  // the first work item of each chunk
  for (std::size_t k = 0; k < n; ++k) {
    parts[k] = split_at_parts(chunks[k].reads, chunks[k].bytes, kPartBytes);
    start[k + 1] = start[k] + parts[k].size();
  }
  Progress pr;
  pr.ready.resize(n);
  pr.queued.assign(n, 0);

  // A reader's wait before filling part p of chunk k: the chunk that used the
  // pinned buffer last must be queued, then that part's copy done. False: aborted.
  auto wait_part = [&](std::size_t k, std::size_t p) {
    if (k < kRing.host_slots) return true;  // earlier scans' copies finished with them
    const std::size_t before = k - kRing.host_slots;
    {
      std::unique_lock lock(pr.m);
      const auto deadline = Deadline::after_seconds(kWaitSeconds);
      if (!pr.cv.wait_until(lock, deadline.when(), [&] { return pr.abort || pr.queued[before]; }))
        throw TimeoutError("CUDA scanner: chunk " + std::to_string(before) +
                           " was not queued within " + seconds_text());
      if (pr.abort) return false;
    }
    wait_event(part_copied_[kRing.host_slot(first + k)][p]->get(), gpu_,
               "a 4 MiB part's copy to the device", hung_);
    return true;
  };
  std::atomic<std::size_t> next{0};
  auto reader = [&] {
    try {
      set_device(device_);  // its event queries run in this scanner's device context
      for (std::size_t i; (i = next.fetch_add(1)) < start[n];) {
        const std::size_t k = static_cast<std::size_t>(
            std::upper_bound(start.begin(), start.end(), i) - start.begin() - 1);
        const std::size_t p = i - start[k];
        if (!wait_part(k, p)) return;
        files.fill(parts[k][p], staging_[kRing.host_slot(first + k)]->get<std::uint8_t>());
        std::lock_guard lock(pr.m);
        pr.ready[k].push_back(static_cast<std::uint32_t>(p));
        pr.cv.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(pr.m);
      if (!pr.error) pr.error = std::current_exception();
      pr.abort = true;
      pr.cv.notify_all();
    }
  };

  // The feeding thread: each chunk's parts copied as they are read, in
  // whatever order they finish, then its table and kernel.
  auto feed = [&](std::size_t k) {
    const std::size_t g = first + k, hs = kRing.host_slot(g);
    std::uint8_t* dev = begin_chunk(g);
    const auto* host = staging_[hs]->get<std::uint8_t>();
    for (std::size_t copied = 0; copied < parts[k].size();) {
      std::vector<std::uint32_t> ready;
      {
        std::unique_lock lock(pr.m);
        const auto deadline = Deadline::after_seconds(kWaitSeconds);
        if (!pr.cv.wait_until(lock, deadline.when(),
                              [&] { return pr.abort || !pr.ready[k].empty(); }))
          throw TimeoutError("CUDA scanner: reading a part of chunk " + std::to_string(k) +
                                 " (up to 4 MiB) did not finish within " + seconds_text(),
                             "check the file system, or scan on the CPU with --device cpu");
        if (pr.error) std::rethrow_exception(pr.error);
        if (pr.abort) throw Error(ExitCode::device, "CUDA scanner: the readers stopped");
        ready.swap(pr.ready[k]);
      }
      for (std::uint32_t p : ready) {
        const std::uint64_t at = std::uint64_t{p} * kPartBytes;
        const std::uint64_t bytes = std::min<std::uint64_t>(kPartBytes, chunks[k].bytes - at);
        check(cudaMemcpyAsync(dev + at, host + at, bytes, cudaMemcpyHostToDevice, copy()), gpu_,
              "cudaMemcpyAsync(part of a chunk to the device)");
        check(cudaEventRecord(part_copied_[hs][p]->get(), copy()), gpu_, "cudaEventRecord");
      }
      copied += ready.size();
    }
    finish_chunk(g, chunks[k].pieces);
    std::lock_guard lock(pr.m);
    pr.queued[k] = 1;
    pr.cv.notify_all();
  };

  std::vector<std::jthread> readers;
  const auto n_readers = std::min<std::size_t>(
      {kMaxReaders, start[n], std::max(1u, std::thread::hardware_concurrency())});
  try {
    for (std::size_t r = 0; r < n_readers; ++r) readers.emplace_back(reader);
    for (std::size_t k = 0; k < n; ++k) feed(k);
  } catch (...) {
    {
      std::lock_guard lock(pr.m);
      pr.abort = true;
      pr.cv.notify_all();
    }
    readers.clear();  // joins: each reader stops at its next wait
    throw;
  }
}

}  // namespace gpudiag::numerics::cuda_scan
