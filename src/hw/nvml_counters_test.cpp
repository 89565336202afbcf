// NVML's counters read through a table of functions that answer as NVML's
// header documents them (nvml.h: nvmlDeviceGetNvLinkState returns
// NVML_ERROR_NOT_SUPPORTED (3) for a link the device does not have;
// nvmlDeviceGetPciInfo_v3 writes busId as "00000000:3B:00.0"; counters are
// unsigned long long): a healthy 4-GPU board finds nothing, over two reads
// too; rows pending, a link down, an uncorrected error during the window and
// clocks held down by the hardware are found, each on its GPU; a PCIe node
// without NVLink, and one whose NVML is absent, judge nothing.
#include "hw/nvml_counters.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "hw/evidence.h"
#include "world/nvlink_topology.h"

namespace gpudiag::hw {
namespace {

struct FakeGpu {
  unsigned long long ecc_volatile = 0, ecc_aggregate = 0, replay = 0, clock_events = 0;
  unsigned rows_pending = 0, rows_failed = 0;
  int links = 18, links_up = 18;  ///< links the board has; how many are active
};
FakeGpu g_gpus[4];
unsigned g_count = 4;

FakeGpu& gpu(void* dev) { return *static_cast<FakeGpu*>(dev); }
int ok() { return kNvmlSuccess; }

NvmlLibrary fake_nvml() {
  NvmlLibrary l;
  l.loaded = true;
  auto& a = l.api;
  a.init = [] { return ok(); };
  a.shutdown = [] { return ok(); };
  a.device_count = [](unsigned* n) { return *n = g_count, ok(); };
  a.handle_by_index = [](unsigned i, void** dev) {
    if (i >= g_count) return 2;  // NVML_ERROR_INVALID_ARGUMENT
    return *dev = &g_gpus[i], ok();
  };
  a.pci_info = [](void* dev, NvmlPciInfo* p) {
    const int i = static_cast<int>(static_cast<FakeGpu*>(dev) - g_gpus);
    std::snprintf(p->bus_id, sizeof p->bus_id, "00000000:%02X:00.0", 0x18 + 0x20 * i);
    return ok();
  };
  a.total_ecc = [](void* dev, int type, int counter, unsigned long long* n) {
    if (type != kNvmlUncorrected) return kNvmlNotSupported;
    return *n = counter == kNvmlVolatile ? gpu(dev).ecc_volatile : gpu(dev).ecc_aggregate, ok();
  };
  a.remapped_rows = [](void* dev, unsigned* c, unsigned* u, unsigned* p, unsigned* f) {
    *c = *u = 0, *p = gpu(dev).rows_pending, *f = gpu(dev).rows_failed;
    return ok();
  };
  a.nvlink_state = [](void* dev, unsigned link, int* active) {
    if (static_cast<int>(link) >= gpu(dev).links) return kNvmlNotSupported;
    return *active = static_cast<int>(link) < gpu(dev).links_up ? kNvmlEnabled : 0, ok();
  };
  a.nvlink_errors = [](void* dev, unsigned link, int counter, unsigned long long* n) {
    return *n = (counter == 0 && link == 0) ? gpu(dev).replay : 0, ok();
  };
  a.clock_events = [](void* dev, unsigned long long* mask) {
    return *mask = gpu(dev).clock_events, ok();
  };
  return l;
}

struct NvmlCounters : ::testing::Test {
  void SetUp() override {
    for (auto& g : g_gpus) g = FakeGpu{};
    g_count = 4;
  }
  NvmlLibrary lib = fake_nvml();
  HwSources src() const {
    return {.kmsg = "/nonexistent/kmsg", .root = "/nonexistent", .sysfs = false, .nvml = true,
            .nvml_lib = &lib};
  }
};

TEST_F(NvmlCounters, AHealthyBoardFindsNothingOverAWindow) {
  g_gpus[1].ecc_aggregate = 3;          // errors of the GPU's past: not today's
  g_gpus[2].clock_events = 0x1 | 0x4;   // idle, software power cap: normal
  const auto start = collect_hw_evidence(src());
  ASSERT_TRUE(start.nvml.read);
  ASSERT_EQ(start.nvml.gpus.size(), 4u);
  EXPECT_EQ(start.nvml.gpus[1].device, "0000:38:00");
  EXPECT_EQ(start.nvml.gpus[0].links_up, 18);
  EXPECT_TRUE(start.findings.empty());
  const auto end = collect_hw_changes(src(), start);
  EXPECT_TRUE(end.findings.empty());
  EXPECT_EQ(unfit_reason(end, 0), "");
}

TEST_F(NvmlCounters, StatesThatOnlyAResetClearsMakeTheNodeUnfit) {
  g_gpus[2].rows_pending = 1;
  g_gpus[3].links_up = 12;
  const auto e = collect_hw_evidence(src());
  const auto unfit = unfit_findings(e, std::nullopt);
  ASSERT_EQ(unfit.size(), 2u);
  EXPECT_EQ(unfit[0].device, "0000:58:00");
  EXPECT_EQ(unfit[0].action, Action::reset_gpu);
  EXPECT_EQ(unfit[1].what, "NVLink down: 12 of 18 links up");
  EXPECT_EQ(unfit[1].device, "0000:78:00");
  EXPECT_NE(unfit_reason(e, std::nullopt).find("GPU memory rows waiting to be remapped on 0000:58:00"),
            std::string::npos);
}

TEST_F(NvmlCounters, AnUncorrectedErrorDuringTheWindowSaysResetTheGpu) {
  g_gpus[0].ecc_volatile = 2;  // before the window: only its change counts
  const auto start = collect_hw_evidence(src());
  EXPECT_EQ(unfit_reason(collect_hw_changes(src(), start), 0), "");
  g_gpus[0].ecc_volatile = 3;
  g_gpus[1].replay = 40;
  const auto end = collect_hw_changes(src(), start);
  const auto unfit = unfit_findings(end, 0);
  ASSERT_EQ(unfit.size(), 1u);
  EXPECT_EQ(unfit[0].device, "0000:18:00");
  EXPECT_EQ(unfit[0].action, Action::reset_gpu);
  EXPECT_EQ(unfit[0].message, "volatile uncorrected ECC count 2 -> 3");
  // NVLink replays that grew are worth knowing, never a failure.
  EXPECT_EQ(finding_counts(end).at("notice/none"), 1);
}

TEST_F(NvmlCounters, ClocksHeldDownByTheHardwareAreANotice) {
  g_gpus[1].clock_events = 0x40 | 0x8;
  const auto e = collect_hw_evidence(src());
  ASSERT_EQ(e.findings.size(), 1u);
  EXPECT_EQ(e.findings[0].what, "GPU clocks held down (HW slowdown, HW thermal slowdown)");
  EXPECT_EQ(e.findings[0].cls, FindingClass::notice);
  EXPECT_EQ(unfit_reason(e, 0), "");
}

TEST_F(NvmlCounters, NodesWithoutNVLinkOrWithPairedBridgesJudgeNoLinks) {
  for (auto& g : g_gpus) g.links = g.links_up = 0;  // PCIe cards: no link at all
  EXPECT_TRUE(collect_hw_evidence(src()).findings.empty());
  // Two cards bridged, two not: a card without a bridge is not a fault.
  g_gpus[0].links = g_gpus[0].links_up = 4;
  g_gpus[1].links = g_gpus[1].links_up = 4;
  g_gpus[2].links = g_gpus[3].links = 4;
  g_gpus[2].links_up = g_gpus[3].links_up = 0;
  EXPECT_TRUE(collect_hw_evidence(src()).findings.empty());
  // A board whose other three GPUs have every link up: all down is a fault.
  for (auto& g : g_gpus) g.links = g.links_up = 18;
  g_gpus[3].links_up = 0;
  const auto e = collect_hw_evidence(src());
  ASSERT_EQ(e.findings.size(), 1u);
  EXPECT_EQ(e.findings[0].what, "NVLink down: 0 of 18 links up");
}

TEST_F(NvmlCounters, WithoutNVMLNothingIsJudgedAndInfoSaysWhy) {
  NvmlLibrary absent;
  absent.why = "libnvidia-ml.so.1: cannot open shared object file";
  auto s = src();
  s.nvml_lib = &absent;
  const auto e = collect_hw_evidence(s);
  EXPECT_FALSE(e.nvml.read);
  EXPECT_TRUE(e.findings.empty());
  const auto lines = hw_evidence_lines(hw_evidence_json(e));
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "GPU counters (NVML): not read: libnvidia-ml.so.1: cannot open shared object file"),
            lines.end());
}

TEST(NvmlBusId, NvmlsFormIsTheKernelLogs) {
  EXPECT_EQ(kernel_bus_id("00000000:3B:00.0"), "0000:3b:00");
  EXPECT_EQ(kernel_bus_id("0000:3b:00.0"), "0000:3b:00");
  EXPECT_EQ(kernel_bus_id("bogus"), "bogus");
}

TEST(NvmlLines, AStrangersJsonNeverThrows) {
  for (const char* text : {R"({"read":true,"gpus":[1,{"device":5},{"device":"x","nvlinks_known":"a"}]})",
                           R"({"read":"yes"})", R"([])", R"({"read":false,"why":7})"})
    EXPECT_NO_THROW(nvml_lines(nlohmann::json::parse(text)));
}

}  // namespace
}  // namespace gpudiag::hw
