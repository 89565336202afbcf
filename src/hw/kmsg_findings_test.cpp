// Kernel-log records in /dev/kmsg's format, written from the shapes the
// NVIDIA driver, the PCIe AER driver, EDAC, the machine-check handler and
// NIC drivers print, classified into findings; informational lines, virtual
// interfaces and user-space records must make none, workload Xids must never
// make a node unfit, and the Xid table must load with its sources cited.
#include "hw/kmsg_findings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hw/evidence.h"
#include "hw/xid_table.h"

namespace gpudiag::hw {
namespace {

/// The kernel's record for `message` at `sec` seconds after boot.
std::string hw_rec(double sec, const std::string& message, int pri = 4) {
  static int seq = 0;
  return std::to_string(pri) + "," + std::to_string(seq++) + "," +
         std::to_string(static_cast<long long>(sec * 1e6)) + ",-;" + message + "\n";
}

const char* const kHwHealthy[] = {
    "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-115)",
    "EDAC MC: Ver: 3.0.0",
    "EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0: DEV 0000:3a:0a.0 (INTERRUPT)",
    "EDAC skx: ECC is enabled",
    "mce: CPU0: Thermal monitoring enabled (TM1)",
    "MCE: In-kernel MCE decoding enabled.",
    "pcieport 0000:00:01.0: AER: enabled with IRQ 121",
    "nvidia-nvlink: Nvlink Core is being initialized, major device number 511",
    "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.127.05",
    "nvidia 0000:3b:00.0: enabling device (0000 -> 0002)",
    "mlx5_core 0000:3b:00.0: firmware version: 28.39.1002",
    "mlx5_core 0000:3b:00.0 ens1f0np0: Link up",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ens1f0np0: link becomes ready",
    "veth3f2a1b0: Link is Down",
    "docker0: Link is Down",
    "br-5a1c2e: port 1(veth3f2a1b0) entered disabled state",
    "cni0: Link is Down",
    "lo: Link is Down",
    "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
    "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x12 offset:0x0 grain:32 syndrome:0x0)",
    "mce: [Hardware Error]: Machine check events logged",
    "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
    "NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics Exception: ESR 0x50dd30=0x1c000000",
    "NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS",
    "NVRM: Xid (PCI:0000:3b:00): 43, pid=4242, name=python3, Ch 00000008",
    "NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 00000008",
    "NVRM: Xid (PCI:0000:3b:00): 94, pid=4242, name=python3, Contained: CBU (0x1). RST: No, D-RST: No",
};

std::vector<Finding> hw_classify(const std::vector<std::string>& lines, int facility = 0) {
  KmsgClassifier c;
  double t = 1;
  for (const auto& l : lines) {
    KmsgRecord r;
    std::string line = hw_rec(t++, l, facility * 8 + 4);
    line.pop_back();  // its newline
    EXPECT_TRUE(parse_kmsg_line(line, r));
    r.message = l;  // as written (the header parse is tested in kmsg_test.cpp)
    c.add(r);
  }
  return c.findings();
}

const Finding* hw_find(const std::vector<Finding>& fs, const std::string& kind, int xid = -1) {
  for (const auto& f : fs)
    if (f.kind == kind && (xid < 0 || f.xid == xid)) return &f;
  return nullptr;
}

TEST(HwFindings, TheXidTableLoadsWithEveryRowCited) {
  const auto& t = xid_table();
  for (int xid : {13, 31, 43, 45}) {
    ASSERT_TRUE(t.count(xid)) << xid;
    EXPECT_EQ(t.at(xid).cls, FindingClass::workload) << xid;
  }
  for (int xid : {46, 48, 61, 62, 64, 74, 79, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158, 160, 162}) {
    ASSERT_TRUE(t.count(xid)) << xid;
    EXPECT_EQ(t.at(xid).cls, FindingClass::node) << xid;
    EXPECT_TRUE(t.at(xid).sticky) << xid;
  }
  // The catalogue's IGNORE and RESTART_APP rows leave the node fit.
  for (int xid : {63, 92, 94, 121, 145, 150}) {
    ASSERT_TRUE(t.count(xid)) << xid;
    EXPECT_EQ(t.at(xid).cls, FindingClass::notice) << xid;
  }
  EXPECT_EQ(t.at(79).action, Action::reboot);
  EXPECT_EQ(t.at(160).action, Action::reboot);  // the catalogue's RESTART_BM
  EXPECT_EQ(t.at(162).action, Action::reset_gpu);
  EXPECT_EQ(t.at(48).action, Action::reset_gpu);
  EXPECT_EQ(t.at(94).action, Action::restart_app);
  EXPECT_EQ(t.at(13).action, Action::restart_app);
  EXPECT_TRUE(t.at(154).from_message);
  EXPECT_THROW(parse_xid_table(R"({"sources": {}, "xids": [{"xid": 1, "name": "x", "class": "node",
               "action": "reboot", "source": "nowhere"}]})"), std::runtime_error);
}

TEST(HwFindings, AHealthyLogAndWorkloadXidsMakeNoNodeUnfit) {
  const auto fs = hw_classify(std::vector<std::string>(std::begin(kHwHealthy), std::end(kHwHealthy)));
  for (const auto& f : fs) {
    EXPECT_NE(f.cls, FindingClass::node) << f.what << " [" << f.message << "]";
    EXPECT_FALSE(makes_unfit(f, 0)) << f.what;
  }
  const Finding* x13 = hw_find(fs, "xid", 13);
  ASSERT_TRUE(x13);
  EXPECT_EQ(x13->what, "Xid 13 (graphics engine exception)");
  EXPECT_EQ(x13->device, "0000:3b:00");
  EXPECT_EQ(x13->cls, FindingClass::workload);
  EXPECT_EQ(x13->message.rfind("Graphics Exception", 0), 0u);  // pid= and name= dropped
  EXPECT_FALSE(hw_find(fs, "nic-link"));                        // virtual interfaces, and up lines
  // The informational lines alone make no finding at all.
  const auto info = hw_classify(std::vector<std::string>(std::begin(kHwHealthy), std::begin(kHwHealthy) + 18));
  for (const auto& f : info) ADD_FAILURE() << "finding from an informational line: " << f.what << " [" << f.message << "]";
}

TEST(HwFindings, NodeFaultsAreFoundWithTheirActions) {
  const auto fs = hw_classify({
      "NVRM: GPU at PCI:0000:3b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae",
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
      "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
      "NVRM: Xid (PCI:0000:5e:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 0.",
      "NVRM: Xid (PCI:0000:86:00): 119, pid=1, name=x, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
      "NVRM: _kgspLogXid119: ********************************* GSP Timeout **********************************",
      "NVRM: Xid (PCI:0000:af:00): 154, pid=1, name=x, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
      "NVRM: Xid (PCI:0000:af:00): 999, pid=1, name=x, something new",
      "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 44 sourcetrack TCEN0 crumbstore ECC DBE Error",
      "pcieport 0000:00:03.1: AER: Uncorrected (Fatal) error received: 0000:41:00.0",
      "mlx5_core 0000:41:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
      "nvidia 0000:5e:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Transaction Layer, (Completer ID)",
      "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_Ha#0_Chan#2_DIMM#0 (channel:2 slot:0 page:0x1f offset:0x0)",
      "mce: [Hardware Error]: CPU 12: Machine Check: 0 Bank 7: be00000000800400",
      "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: 8c00004000010090",
      "mlx5_core 0000:3b:00.1 ens1f1np1: Link down",
      "ixgbe 0000:01:00.0 eth0: NIC Link is Down",
      "ixgbe 0000:01:00.0 eth0: NIC Link is Up 10 Gbps, Flow Control: RX/TX",
  });
  const Finding* x79 = hw_find(fs, "xid", 79);
  ASSERT_TRUE(x79);
  EXPECT_EQ(x79->device, "0000:3b:00");
  EXPECT_EQ(x79->cls, FindingClass::node);
  EXPECT_TRUE(x79->sticky);
  EXPECT_EQ(finding_line(*x79, 0), "Xid 79 (GPU fallen off the bus) on 0000:3b:00 at " + clock_time(x79->usec, 0) +
                                       ": reboot the node");
  EXPECT_FALSE(hw_find(fs, "gpu-off-bus"));  // said by the Xid 79 already
  EXPECT_FALSE(hw_find(fs, "gsp"));          // said by the Xid 119 already
  EXPECT_EQ(hw_find(fs, "xid", 48)->action, Action::reset_gpu);
  EXPECT_EQ(hw_find(fs, "xid", 119)->action, Action::reset_gpu);
  EXPECT_EQ(hw_find(fs, "xid", 154)->action, Action::reboot);
  EXPECT_EQ(hw_find(fs, "xid", 999)->cls, FindingClass::notice);  // unknown: looked up, never fails a node
  EXPECT_EQ(hw_find(fs, "sxid")->cls, FindingClass::node);
  int aer_fatal = 0, aer_nonfatal = 0, mce_uc = 0, mce_ce = 0;
  for (const auto& f : fs) {
    aer_fatal += f.what == "PCIe fatal error" && f.device == "0000:41:00.0";
    aer_nonfatal += f.what == "PCIe uncorrected non-fatal error" && !f.sticky;
    mce_uc += f.what == "machine check: uncorrected error";
    mce_ce += f.what == "machine check: corrected errors";
  }
  EXPECT_EQ(aer_fatal, 1);
  EXPECT_EQ(aer_nonfatal, 1);
  EXPECT_EQ(mce_uc, 1);  // bit 61 (UC) of be00...; 8c00... has it clear
  EXPECT_EQ(mce_ce, 1);
  EXPECT_EQ(hw_find(fs, "host-memory")->action, Action::drain);
  int links = 0;
  for (const auto& f : fs)
    if (f.kind == "nic-link") {
      ++links;
      EXPECT_FALSE(f.sticky);
      EXPECT_EQ(f.action, Action::check_cable);
      if (f.device == "eth0") EXPECT_NE(f.message.find("(up again 1.0 s later)"), std::string::npos);
    }
  EXPECT_EQ(links, 2);  // ens1f1np1 and eth0
}

TEST(HwFindings, LinkFlapsCountOnlyWithinTheWindowStickyFaultsAlways) {
  const auto fs = hw_classify({"ixgbe 0000:01:00.0 eth0: NIC Link is Down",
                               "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus."});
  const Finding* link = hw_find(fs, "nic-link");
  const Finding* x79 = hw_find(fs, "xid", 79);
  ASSERT_TRUE(link && x79);
  EXPECT_FALSE(makes_unfit(*link, std::nullopt));          // no window: info
  EXPECT_FALSE(makes_unfit(*link, link->usec + 1));        // before the job
  EXPECT_TRUE(makes_unfit(*link, link->usec));             // within it
  EXPECT_TRUE(makes_unfit(*x79, std::nullopt));
  EXPECT_TRUE(makes_unfit(*x79, x79->usec + 1'000'000'000));
}

TEST(HwFindings, UserSpaceRecordsAreNotTheKernels) {
  // A process that writes to /dev/kmsg gets a facility of its own: its
  // "Xid" is not the driver's.
  EXPECT_TRUE(hw_classify({"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus."}, 1).empty());
}

TEST(HwFindings, RepeatedRecordsAreOneFindingWithACount) {
  std::vector<std::string> lines(5000, "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, Graphics Exception");
  const auto fs = hw_classify(lines);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].count, 5000u);
  EXPECT_GT(fs[0].last_usec, fs[0].usec);
}

TEST(HwEvidence, AKernelLogFileGivesTheVerdictLineAndJson) {
  const auto path = std::filesystem::temp_directory_path() / ("gpudiag-hw-ev-" + std::to_string(getpid()));
  std::ofstream(path) << hw_rec(12, "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, Graphics Exception")
                      << hw_rec(15, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.");
  HwSources src;
  src.kmsg = path.string();
  src.sysfs = false;
  src.nvml = false;
  const auto e = collect_hw_evidence(src);
  std::filesystem::remove(path);
  EXPECT_TRUE(e.unreadable.empty());
  const std::string reason = unfit_reason(e, usec_since_boot());
  EXPECT_EQ(reason, "Xid 79 (GPU fallen off the bus) on 0000:3b:00 at " + clock_time(15'000'000, e.boot_epoch_s) +
                        ": reboot the node");
  const auto j = hw_evidence_json(e);
  EXPECT_EQ(j["verdict"], "unfit");
  ASSERT_EQ(j["findings"].size(), 2u);
  EXPECT_EQ(j["findings"][1]["xid"], 79);
  EXPECT_EQ(j["findings"][1]["action"], "reboot");
  const auto lines = hw_evidence_lines(j);
  EXPECT_EQ(lines[0], "node UNFIT: 1 finding to act on (kernel log: 2 records read)");
  EXPECT_EQ(lines[1].rfind("workload, the node is fine: Xid 13", 0), 0u);
  EXPECT_EQ(lines[2].rfind("node: " + reason, 0), 0u);
  src.kmsg = "/nonexistent/kmsg";
  const auto none = collect_hw_evidence(src);
  ASSERT_EQ(none.unreadable.size(), 1u);
  // Unread, the log's silence is not "none".
  EXPECT_EQ(hw_evidence_lines(hw_evidence_json(none)),
            (std::vector<std::string>{"not known (the kernel log was not read)", none.unreadable[0]}));
}

}  // namespace
}  // namespace gpudiag::hw
