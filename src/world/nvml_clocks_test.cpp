// The SM clock and throttle reasons through a table of functions that answer
// as NVML's header documents them (nvml.h: nvmlDeviceGetClockInfo and
// nvmlDeviceGetMaxClockInfo take an nvmlClockType_t, NVML_CLOCK_SM = 1, and
// write MHz; nvmlDeviceGetCurrentClocksEventReasons writes an unsigned long
// long mask of nvmlClocksEventReason* bits; a GPU not found by bus id is
// NVML_ERROR_NOT_FOUND, 6; a call the GPU lacks NVML_ERROR_NOT_SUPPORTED, 3),
// the decoding of every reason bit, and the text without NVML.
#include "world/nvml_clocks.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gpudiag {
namespace nvml_clocks_test {

struct Fake {
  unsigned sm = 1005, sm_max = 1980, mem = 2619;
  unsigned long long events = 0x48;
  int events_rc = 0, clock_rc = 0;
  int inits = 0, shutdowns = 0;
  int last_type = -1;
};
Fake f;
int kDevice;

NvmlLibrary fake() {
  f = Fake{};
  NvmlLibrary l;
  l.loaded = true;
  auto& a = l.api;
  a.init = [] { return ++f.inits, 0; };
  a.shutdown = [] { return ++f.shutdowns, 0; };
  a.handle_by_bus_id = [](const char* bus, void** dev) {
    if (std::strcmp(bus, "0000:1B:00.0") != 0) return 6;  // NVML_ERROR_NOT_FOUND
    *dev = &kDevice;
    return 0;
  };
  // Only the SM clock (type 1) is asked for; the memory clock (2) differs, so
  // a wrong type shows in the figures.
  a.clock = [](void*, int t, unsigned* v) {
    f.last_type = t;
    return f.clock_rc ? f.clock_rc : (*v = t == kNvmlClockSm ? f.sm : f.mem, 0);
  };
  a.max_clock = [](void*, int t, unsigned* v) { return *v = t == kNvmlClockSm ? f.sm_max : f.mem, 0; };
  a.clock_events = [](void*, unsigned long long* m) { return f.events_rc ? f.events_rc : (*m = f.events, 0); };
  return l;
}

TEST(NvmlClocks, ReadsTheSmClockItsMaximumAndTheReasons) {
  const auto lib = fake();
  const auto c = read_gpu_clocks(lib, "0000:1B:00.0");
  EXPECT_EQ(c.sm_mhz, 1005);
  EXPECT_EQ(c.sm_max_mhz, 1980);
  EXPECT_EQ(c.events, 0x48);
  EXPECT_EQ(c.why, "");
  EXPECT_EQ(f.last_type, kNvmlClockSm);
  EXPECT_EQ(f.inits, 1);
  EXPECT_EQ(f.shutdowns, 1);
  EXPECT_EQ(clocks_text(c), "SM clock 1005/1980 MHz, throttled: HW slowdown, HW thermal slowdown");
}

TEST(NvmlClocks, AFullSpeedGpuHasNoReason) {
  auto lib = fake();
  f.sm = 1980;
  f.events = 0;
  EXPECT_EQ(clocks_text(read_gpu_clocks(lib, "0000:1B:00.0")), "SM clock 1980/1980 MHz, no throttle reason");
}

TEST(NvmlClocks, EveryReasonBitIsNamed) {
  EXPECT_EQ(clock_event_names(0x1), std::vector<std::string>{"GPU idle"});
  EXPECT_EQ(clock_event_names(0x2), std::vector<std::string>{"application clocks setting"});
  EXPECT_EQ(clock_event_names(0x4), std::vector<std::string>{"SW power cap"});
  EXPECT_EQ(clock_event_names(0x8), std::vector<std::string>{"HW slowdown"});
  EXPECT_EQ(clock_event_names(0x10), std::vector<std::string>{"sync boost"});
  EXPECT_EQ(clock_event_names(0x20), std::vector<std::string>{"SW thermal slowdown"});
  EXPECT_EQ(clock_event_names(0x40), std::vector<std::string>{"HW thermal slowdown"});
  EXPECT_EQ(clock_event_names(0x80), std::vector<std::string>{"HW power brake"});
  EXPECT_EQ(clock_event_names(0x100), std::vector<std::string>{"display clock setting"});
  EXPECT_EQ(clock_event_names(0x204), (std::vector<std::string>{"SW power cap", "reason 0x200"}));
  EXPECT_TRUE(clock_event_names(0).empty());
}

TEST(NvmlClocks, WithoutNvmlTheClocksAreUnknownAndSaySo) {
  NvmlLibrary absent;
  absent.why = "libnvidia-ml.so.1: cannot open shared object file";
  const auto c = read_gpu_clocks(absent, "0000:1B:00.0");
  EXPECT_EQ(c.sm_mhz, -1);
  EXPECT_EQ(c.events, -1);
  EXPECT_EQ(clocks_text(c),
            "clocks unknown (NVML not loaded: libnvidia-ml.so.1: cannot open shared object file)");
  EXPECT_EQ(clocks_text(GpuClocks{}), "clocks unknown");
}

TEST(NvmlClocks, AGpuNvmlCannotFindOrACallItLacksIsUnknown) {
  auto lib = fake();
  auto c = read_gpu_clocks(lib, "0000:99:00.0");
  EXPECT_NE(clocks_text(c).find("clocks unknown (NVML finds no GPU at bus id 0000:99:00.0 (NVML error 6))"),
            std::string::npos)
      << clocks_text(c);
  EXPECT_EQ(f.shutdowns, 1);
  f.events_rc = 3;  // NVML_ERROR_NOT_SUPPORTED
  c = read_gpu_clocks(lib, "0000:1B:00.0");
  EXPECT_EQ(clocks_text(c), "SM clock 1005/1980 MHz, throttle reasons unknown");
  lib.api.clock_events = nullptr;  // a driver with neither name
  f.clock_rc = 3;
  c = read_gpu_clocks(lib, "0000:1B:00.0");
  EXPECT_EQ(clocks_text(c), "SM clock ?/1980 MHz, throttle reasons unknown");
  EXPECT_NE(c.why.find("no nvmlDeviceGetCurrentClocksEventReasons"), std::string::npos) << c.why;
}

}  // namespace nvml_clocks_test
}  // namespace gpudiag
