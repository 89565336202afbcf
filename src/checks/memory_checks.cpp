// The memory phase (memory_checks.h): each rank writes pattern_word(i, seed)
// with a seed of its own, so memory shared by mistake between ranks shows.
#include "checks/memory_checks.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <new>
#include <vector>

#include "gpu/cuda.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

std::uint32_t seed_of(int rank) { return static_cast<std::uint32_t>(0x9e3779b9u * (rank + 1)); }

/// MemAvailable from /proc/meminfo in bytes; 0 when unknown.
std::uint64_t available_host_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace

void test_device_memory(std::uint64_t bytes, int rank) {
  const std::size_t words = bytes / 4;
  DeviceBuffer mem(words * 4);
  const auto seed = seed_of(rank);
  if (auto bad = fill_and_verify_pattern(mem.get(), words, seed))
    throw Error(ExitCode::broken,
                std::to_string(bad) + " of " + std::to_string(words) +
                    " words of GPU memory read back wrong",
                "check ECC errors with nvidia-smi -q -d ECC and dmesg for Xid errors");
  // Read a slice back over PCIe and check it on the host as well.
  std::vector<std::uint32_t> host(std::min<std::size_t>(words, 4u << 20));
  copy_to_host(host.data(), mem.get(), host.size() * 4);
  for (std::size_t i = 0; i < host.size(); ++i)
    if (host[i] != pattern_word(i, seed))
      throw Error(ExitCode::broken,
                  "GPU memory copied to the host differs at word " + std::to_string(i),
                  "check the PCIe link (nvidia-smi -q -d PCIE) and dmesg");
}

void test_host_memory(std::uint64_t bytes, int rank, const std::string& host) {
  const std::size_t words = bytes / 4;
  if (const std::uint64_t avail = available_host_memory(); avail && bytes > avail)
    throw Error(ExitCode::broken,
                "--mem " + human_bytes(bytes) + " is more than the " + human_bytes(avail) +
                    " of memory available on " + host,
                "lower --mem");
  std::unique_ptr<std::uint32_t[]> mem;
  try {
    mem.reset(new std::uint32_t[words]);
  } catch (const std::bad_alloc&) {
    throw Error(ExitCode::broken,
                "could not allocate --mem " + human_bytes(bytes) + " of host memory on " + host,
                "lower --mem");
  }
  const auto seed = seed_of(rank);
  for (std::size_t i = 0; i < words; ++i) mem[i] = pattern_word(i, seed);
  for (std::size_t i = 0; i < words; ++i)
    if (mem[i] != pattern_word(i, seed))
      throw Error(ExitCode::broken, "host memory read back wrong at word " + std::to_string(i));
}

}  // namespace gpudiag
