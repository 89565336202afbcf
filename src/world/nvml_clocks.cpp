// The SM clock and the clocks-event reasons of one GPU (nvml_clocks.h).
#include "world/nvml_clocks.h"

#include <cstdio>

#include "util/strings.h"

namespace gpudiag {

namespace {

/// nvml.h's clocks-event reason bits (the table atop nvml_clocks.h).
constexpr std::pair<unsigned long long, const char*> kReasons[] = {
    {0x1, "GPU idle"},
    {0x2, "application clocks setting"},
    {0x4, "SW power cap"},
    {0x8, "HW slowdown"},
    {0x10, "sync boost"},
    {0x20, "SW thermal slowdown"},
    {0x40, "HW thermal slowdown"},
    {0x80, "HW power brake"},
    {0x100, "display clock setting"},
};

std::string nvml_error(const char* call, int rc) {
  return std::string(call) + " failed (NVML error " + std::to_string(rc) + ")";
}

}  // namespace

GpuClocks read_gpu_clocks(const NvmlLibrary& lib, const std::string& bus_id) {
  GpuClocks c;
  if (!lib.loaded) {
    c.why = "NVML not loaded: " + lib.why;
    return c;
  }
  const NvmlApi& a = lib.api;
  if (int rc = a.init(); rc != kNvmlSuccess) {
    c.why = nvml_error("nvmlInit", rc);
    return c;
  }
  void* dev = nullptr;
  if (int rc = a.handle_by_bus_id(bus_id.c_str(), &dev); rc != kNvmlSuccess || !dev) {
    c.why = "NVML finds no GPU at bus id " + bus_id + " (NVML error " + std::to_string(rc) + ")";
    a.shutdown();
    return c;
  }
  std::vector<std::string> why;
  unsigned mhz = 0;
  if (int rc = a.clock(dev, kNvmlClockSm, &mhz); rc == kNvmlSuccess && mhz < 100000)
    c.sm_mhz = static_cast<int>(mhz);
  else
    why.push_back(nvml_error("nvmlDeviceGetClockInfo", rc));
  if (int rc = a.max_clock(dev, kNvmlClockSm, &mhz); rc == kNvmlSuccess && mhz < 100000)
    c.sm_max_mhz = static_cast<int>(mhz);
  else
    why.push_back(nvml_error("nvmlDeviceGetMaxClockInfo", rc));
  unsigned long long mask = 0;
  if (!a.clock_events)
    why.push_back("no nvmlDeviceGetCurrentClocksEventReasons in this driver");
  else if (int rc = a.clock_events(dev, &mask); rc == kNvmlSuccess)
    c.events = static_cast<long long>(mask & 0x7fffffffffffffffull);
  else
    why.push_back(nvml_error("nvmlDeviceGetCurrentClocksEventReasons", rc));
  c.why = join(why, "; ");
  a.shutdown();
  return c;
}

std::vector<std::string> clock_event_names(unsigned long long mask) {
  std::vector<std::string> out;
  for (int bit = 0; bit < 64; ++bit) {
    const unsigned long long b = 1ull << bit;
    if (!(mask & b)) continue;
    const char* name = nullptr;
    for (const auto& [v, n] : kReasons)
      if (v == b) name = n;
    if (name) {
      out.emplace_back(name);
    } else {
      char s[32];
      std::snprintf(s, sizeof s, "reason 0x%llx", b);
      out.emplace_back(s);
    }
  }
  return out;
}

std::string clocks_text(const GpuClocks& c) {
  if (c.sm_mhz < 0 && c.sm_max_mhz < 0 && c.events < 0)
    return "clocks unknown" + (c.why.empty() ? std::string() : " (" + c.why + ")");
  auto mhz = [](int v) { return v < 0 ? std::string("?") : std::to_string(v); };
  std::string s = "SM clock " + mhz(c.sm_mhz) + "/" + mhz(c.sm_max_mhz) + " MHz";
  if (c.events < 0)
    s += ", throttle reasons unknown";
  else if (c.events == 0)
    s += ", no throttle reason";
  else
    s += ", throttled: " + join(clock_event_names(static_cast<unsigned long long>(c.events)), ", ");
  return s;
}

}  // namespace gpudiag
