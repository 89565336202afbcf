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
  // Fabric info (NVML_GPU_FABRIC_STATE_*, health mask as nvml.h defines it).
  int fabric_rc = kNvmlNotSupported;
  unsigned char state = kFabricNotSupported, uuid_byte = 0;
  int status = 0;
  unsigned clique = 0, health = 0, version_seen = 0;
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
  // nvmlDeviceGetGpuFabricInfoV checks the version the caller set, as NVML
  // does for versioned structures (NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 25).
  a.fabric_info_v = [](void*, void* p) {
    auto* i = static_cast<NvmlFabricInfoV2*>(p);
    g.version_seen = i->version;
    if (i->version != kNvmlFabricInfoV2) return 25;
    if (g.fabric_rc != 0) return g.fabric_rc;
    std::memset(i->cluster_uuid, g.uuid_byte, sizeof i->cluster_uuid);
    i->status = g.status, i->clique_id = g.clique, i->state = g.state, i->health_mask = g.health;
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

TEST(Nvml, NvlinkDomainAndFabricHealth) {
  g = {};  // an HGX GPU: no multi-node NVLink
  auto f = read_nvml_fields(fake(), "0000:1B:00.0");
  EXPECT_EQ(f["gpu.nvlink_domain"], "none");
  EXPECT_EQ(g.version_seen, sizeof(NvmlFabricInfoV2) | (2u << 24));
  g = {};  // an NVL72 tray, registered, full bandwidth
  g.fabric_rc = 0, g.state = kFabricCompleted, g.uuid_byte = 0xab, g.clique = 7, g.health = 2;
  f = read_nvml_fields(fake(), "0000:1B:00.0");
  EXPECT_EQ(f["gpu.nvlink_domain"], "abababababababababababababababab/7");
  EXPECT_EQ(f["gpu.nvlink_bw"], "full");
  g.health = 1;  // NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE
  EXPECT_EQ(read_nvml_fields(fake(), "0000:1B:00.0")["gpu.nvlink_bw"], "degraded");
  g.uuid_byte = 0;  // completed with a zero UUID: no domain (ncclTopoCheckMNNVL)
  EXPECT_EQ(read_nvml_fields(fake(), "0000:1B:00.0")["gpu.nvlink_domain"], "none");
  g.state = kFabricInProgress;
  EXPECT_EQ(read_nvml_fields(fake(), "0000:1B:00.0")["gpu.nvlink_domain"], "registering");
  g.state = kFabricCompleted, g.status = 999;  // NVML_ERROR_UNKNOWN
  EXPECT_EQ(read_nvml_fields(fake(), "0000:1B:00.0")["gpu.nvlink_domain"],
            "failed (NVML error 999)");
  // A driver before the versioned call: the v1 structure, no health.
  auto v1 = fake();
  v1.api.fabric_info_v = nullptr;
  v1.api.fabric_info = [](void*, void* p) {
    auto* i = static_cast<NvmlFabricInfoV1*>(p);
    std::memset(i->cluster_uuid, 0x01, sizeof i->cluster_uuid);
    i->status = 0, i->clique_id = 3, i->state = kFabricCompleted;
    return 0;
  };
  f = read_nvml_fields(v1, "0000:1B:00.0");
  EXPECT_EQ(f["gpu.nvlink_domain"], "01010101010101010101010101010101/3");
  EXPECT_EQ(f["gpu.nvlink_bw"], "not reported");
  v1.api.fabric_info = nullptr;  // a driver before 525
  EXPECT_EQ(read_nvml_fields(v1, "0000:1B:00.0")["gpu.nvlink_domain"], "not reported");
  EXPECT_EQ(g.inits, g.shutdowns);
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
