// NVML's fields through a table of synthetic functions (the library cannot
// load without a driver), and the absent library: "unknown" values with the
// loader's reason, never an error.
#include "world/nvml.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gpudiag {
namespace {

/// A GPU as the fake NVML reports it.
struct FakeGpu {
  int persistence = 1, ecc = 1, ecc_pending = 1;
  unsigned sm = 1980, sm_max = 1980, mem = 2619, mem_max = 2619;
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  int ecc_rc = 0, init_rc = 0;
  int inits = 0, shutdowns = 0;
};
FakeGpu g;
int kDevice;  // the handle's address

NvmlLibrary fake() {
  NvmlLibrary l;
  l.loaded = true;
  auto& a = l.api;
  a.init = [] { return ++g.inits, g.init_rc; };
  a.shutdown = [] { return ++g.shutdowns, 0; };
  a.handle_by_bus_id = [](const char* bus, void** dev) {
    if (std::strcmp(bus, "0000:1B:00.0") != 0) return 6;  // NVML_ERROR_NOT_FOUND
    *dev = &kDevice;
    return 0;
  };
  a.persistence_mode = [](void*, int* m) { return *m = g.persistence, 0; };
  a.ecc_mode = [](void*, int* c, int* p) {
    *c = g.ecc;
    *p = g.ecc_pending;
    return g.ecc_rc;
  };
  a.clock = [](void*, int t, unsigned* v) { return *v = t == kNvmlClockSm ? g.sm : g.mem, 0; };
  a.max_clock = [](void*, int t, unsigned* v) {
    return *v = t == kNvmlClockSm ? g.sm_max : g.mem_max, 0;
  };
  a.remapped_rows = [](void*, unsigned* c, unsigned* u, unsigned* p, unsigned* f) {
    *c = g.corr, *u = g.unc, *p = g.pending, *f = g.failure;
    return 0;
  };
  return l;
}

TEST(Nvml, FieldsOfAHealthyGpu) {
  g = {};
  auto f = read_nvml_fields(fake(), "0000:1B:00.0");
  EXPECT_EQ(f["gpu.nvml"], "loaded");
  EXPECT_EQ(f["gpu.persistence"], "enabled");
  EXPECT_EQ(f["gpu.ecc"], "enabled");
  EXPECT_EQ(f["gpu.clock.sm"], "1980");
  EXPECT_EQ(f["gpu.clock.sm_max"], "1980");
  EXPECT_EQ(f["gpu.clock.mem_max"], "2619");
  EXPECT_EQ(f["gpu.remapped_rows"], "0 correctable, 0 uncorrectable");
  EXPECT_EQ(g.inits, g.shutdowns);  // every init is matched
}

TEST(Nvml, PendingStatesAndUnsupportedCalls) {
  g = {};
  g.persistence = 0;
  g.ecc = 0;  // disabled now, enabled after the next reset
  g.pending = 1;
  g.unc = 2;
  auto f = read_nvml_fields(fake(), "0000:1B:00.0");
  EXPECT_EQ(f["gpu.persistence"], "disabled");
  EXPECT_EQ(f["gpu.ecc"], "disabled (enabled after reset)");
  EXPECT_EQ(f["gpu.remapped_rows"], "0 correctable, 2 uncorrectable, pending");
  g = {};
  g.ecc_rc = kNvmlNotSupported;  // a GPU without ECC
  EXPECT_EQ(read_nvml_fields(fake(), "0000:1B:00.0")["gpu.ecc"], "not supported");
  auto no_rows = fake();
  no_rows.api.remapped_rows = nullptr;  // before Ampere
  EXPECT_EQ(read_nvml_fields(no_rows, "0000:1B:00.0")["gpu.remapped_rows"], "not supported");
}

TEST(Nvml, FailuresAreUnknownWithTheReason) {
  g = {};
  auto f = read_nvml_fields(fake(), "0000:99:00.0");
  EXPECT_EQ(f["gpu.ecc"], "unknown");
  EXPECT_EQ(f["gpu.nvml"], "no GPU at bus id 0000:99:00.0 (NVML error 6)");
  EXPECT_EQ(g.inits, g.shutdowns);
  g.init_rc = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  f = read_nvml_fields(fake(), "0000:1B:00.0");
  EXPECT_EQ(f["gpu.persistence"], "unknown");
  EXPECT_EQ(f["gpu.nvml"], "nvmlInit failed (NVML error 9)");
}

TEST(Nvml, AbsentLibraryIsUnknownNeverAnError) {
  const NvmlLibrary missing = open_nvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(missing.loaded);
  EXPECT_NE(missing.why.find("libnvidia-ml.so.1"), std::string::npos) << missing.why;
  auto f = read_nvml_fields(missing, "0000:1B:00.0");
  EXPECT_EQ(f["gpu.persistence"], "unknown");
  EXPECT_EQ(f["gpu.clock.sm_max"], "unknown");
  EXPECT_EQ(f["gpu.nvml"].rfind("not loaded: ", 0), 0u) << f["gpu.nvml"];
  // A library that is not NVML (here libc) is refused, not half-used.
  const NvmlLibrary wrong = open_nvml("libc.so.6");
  EXPECT_FALSE(wrong.loaded);
  EXPECT_NE(wrong.why.find("lacks an NVML function"), std::string::npos) << wrong.why;
  // This machine's own search: whatever it finds, it returns.
  EXPECT_NO_THROW(load_nvml());
}

}  // namespace
}  // namespace gpudiag
