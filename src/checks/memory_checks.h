// The check's memory phase: a pattern written and read back, in GPU memory
// (on the device, then a slice copied to the host over PCIe) or in host
// memory for the host backends. Each throws an Error that says what read
// back wrong and what to look at.
#pragma once

#include <cstdint>
#include <string>

namespace gpudiag {

/// `bytes` of the current GPU's memory: written and checked on the device,
/// then up to 16 MiB copied back and checked on the host.
void test_device_memory(std::uint64_t bytes, int rank);

/// `bytes` of host memory on `host`, refused up front when /proc/meminfo
/// says less is available (the OOM killer would answer instead of a status line).
void test_host_memory(std::uint64_t bytes, int rank, const std::string& host);

}  // namespace gpudiag
