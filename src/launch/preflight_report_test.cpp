// --preflight's reading of the check's JSON report: a real gpudiag-check/1
// document (tests/fixtures/launch/preflight_check_host.json, written by
// `gpudiag launch --standalone --nproc-per-node 2 -- check --json FILE` on the
// host backend) judges nothing slow; variants of it edited within the
// schema (a rank's compute verdict `slow` with its rate judged, the bus
// bandwidth's WARN) are slow in the check's numbers; an unjudged rate, and a
// missing, oversized, malformed or foreign document, are not counted; and
// preflight_fault() turns the slowness into the node's fault, or under
// --preflight-slow warn into a line only.
#include "launch/preflight_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launch/preflight.h"

namespace gpudiag::launch {
namespace preflight_report_test {

using nlohmann::json;

json host_document() {
  const auto path = std::filesystem::path(__FILE__).parent_path() /
                    "../../tests/fixtures/launch/preflight_check_host.json";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = json::parse(text.str(), nullptr, false);
  EXPECT_TRUE(doc.is_object()) << path;
  return doc.is_object() ? doc : json::object();
}

/// The host document as if on three GPUs of one model whose rates were judged.
json judged_document(double t0, double t1, double t2) {
  json doc = host_document();
  doc["compute"]["rates_judged"] = true;
  auto& ranks = doc["ranks"];
  ranks.push_back(ranks[1]);
  ranks[2]["rank"] = 2;
  ranks[2]["local_rank"] = 2;
  const double rates[] = {t0, t1, t2};
  for (int r = 0; r < 3; ++r) {
    auto& c = ranks[r]["compute"];
    c["rate_judged"] = true;
    c["model"] = "NVIDIA H200";
    c["device"] = "gpu";
    c["tflops"] = rates[r];
  }
  return doc;
}

TEST(PreflightReport, TheHostBackendsRealDocumentJudgesNothingSlow) {
  const json doc = host_document();
  ASSERT_EQ(doc.value("schema", ""), "gpudiag-check/1");
  ASSERT_EQ(doc["compute"]["rates_judged"], false);
  ASSERT_EQ(doc["expected_busbw"]["verdict"], "not applicable");
  const auto r = preflight_report_from_text(doc.dump());
  EXPECT_TRUE(r.judged);
  EXPECT_EQ(r.not_judged, "");
  EXPECT_TRUE(r.slow.empty());
}

TEST(PreflightReport, AnUnjudgedRateIsNeverSlow) {
  json doc = host_document();  // rates_judged false: the host backend, or ranks over CPUs
  doc["ranks"][1]["compute"]["verdict"] = "slow";
  doc["ranks"][1]["compute"]["tflops"] = 0.00001;
  EXPECT_TRUE(preflight_report_from_text(doc.dump()).slow.empty());
  json rank_unjudged = judged_document(400, 410, 180);
  rank_unjudged["ranks"][2]["compute"]["verdict"] = "slow";
  rank_unjudged["ranks"][2]["compute"]["rate_judged"] = false;
  EXPECT_TRUE(preflight_report_from_text(rank_unjudged.dump()).slow.empty());
}

TEST(PreflightReport, ARankTheCheckJudgedSlowIsSaidInItsNumbers) {
  json healthy = judged_document(400, 410, 395);
  EXPECT_TRUE(preflight_report_from_text(healthy.dump()).slow.empty());
  json doc = judged_document(400, 410, 180);
  doc["ranks"][2]["compute"]["verdict"] = "slow";
  doc["compute"]["slow"] = 1;
  const auto r = preflight_report_from_text(doc.dump());
  EXPECT_TRUE(r.judged);
  ASSERT_EQ(r.slow.size(), 1u);
  EXPECT_EQ(r.slow[0],
            "compute SLOW rank 2 [vm-2]: 180.0 TFLOP/s, 45% of the median of its model, "
            "NVIDIA H200 (400.0 TFLOP/s)");
}

TEST(PreflightReport, TheBusBandwidthsWarnIsSlowItsPassAndNoVerdictAreNot) {
  json doc = host_document();
  doc["expected_busbw"] = {{"verdict", "WARN"},
                           {"measured_gbps", 120.04},
                           {"expected_gbps", 195.0},
                           {"percent", 62},
                           {"basis", "h100-sxm, NVLink, 1 node"},
                           {"text", "..."}};
  const auto r = preflight_report_from_text(doc.dump());
  ASSERT_EQ(r.slow.size(), 1u);
  EXPECT_EQ(r.slow[0],
            "all-reduce busbw 120.0 GB/s, WARN below 80% of 195.0 GB/s (62%; h100-sxm, NVLink, "
            "1 node)");
  for (const char* verdict : {"PASS", "none", "no verdict", "not applicable"}) {
    doc["expected_busbw"]["verdict"] = verdict;
    EXPECT_TRUE(preflight_report_from_text(doc.dump()).slow.empty()) << verdict;
  }
  doc["expected_busbw"] = {{"verdict", "WARN"}, {"measured_gbps", "fast"}};  // odd fields
  ASSERT_EQ(preflight_report_from_text(doc.dump()).slow.size(), 1u);
  EXPECT_EQ(preflight_report_from_text(doc.dump()).slow[0],
            "all-reduce busbw ? GB/s, WARN below 80% of ? GB/s");
}

TEST(PreflightReport, ManySlowRanksAreCountedPastFour) {
  json doc = judged_document(400, 400, 400);
  auto& ranks = doc["ranks"];
  for (int r = 3; r < 12; ++r) {
    ranks.push_back(ranks[1]);
    ranks[r]["rank"] = r;
    ranks[r]["compute"]["tflops"] = r < 6 ? 400.0 : 100.0;
    ranks[r]["compute"]["verdict"] = r < 6 ? "ok" : "slow";
  }
  const auto r = preflight_report_from_text(doc.dump());
  ASSERT_EQ(r.slow.size(), 5u);
  EXPECT_EQ(r.slow[4], "and 2 more");
}

TEST(PreflightReport, AMalformedOrOversizedOrForeignDocumentIsNotJudged) {
  const std::string text = host_document().dump();
  const std::string bad[] = {
      "",
      text.substr(0, text.size() / 2),
      "[1, 2]",
      R"({"schema": "gpudiag-bench/2", "compute": {"rates_judged": true}})",
      std::string(100000, '[') + std::string(100000, ']'),
      text + std::string(kPreflightReportMax, ' '),
  };
  for (const auto& t : bad) {
    const auto r = preflight_report_from_text(t);
    EXPECT_FALSE(r.judged) << t.substr(0, 60);
    EXPECT_NE(r.not_judged, "") << t.substr(0, 60);
    EXPECT_TRUE(r.slow.empty());
  }
}

TEST(PreflightReport, TheFileIsReadBoundedAndNeverThroughALink) {
  char dir[] = "/tmp/gpudiag-preflight-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  EXPECT_FALSE(read_preflight_report(d + "/check.json").judged);  // never written
  json doc = judged_document(400, 410, 180);
  doc["ranks"][2]["compute"]["verdict"] = "slow";
  std::ofstream(d + "/check.json") << doc.dump(2);
  const auto r = read_preflight_report(d + "/check.json");
  EXPECT_TRUE(r.judged);
  EXPECT_EQ(r.slow.size(), 1u);
  std::filesystem::create_symlink(d + "/check.json", d + "/link.json");
  EXPECT_FALSE(read_preflight_report(d + "/link.json").judged);
  std::ofstream(d + "/big.json") << doc.dump() << std::string(kPreflightReportMax, ' ');
  EXPECT_FALSE(read_preflight_report(d + "/big.json").judged);
  EXPECT_FALSE(read_preflight_report(d).judged);  // a folder
  std::filesystem::remove_all(d);
}

PreflightRun passed(PreflightReport report) {
  PreflightRun run;
  run.status = ExitStatus::exited(0);
  run.seconds = 3.2;
  run.launch_line = "2/2 ranks OK";
  run.report = std::move(report);
  return run;
}

TEST(PreflightSlowVerdict, ASlowNodeIsAtFaultOrUnderWarnSaidAndAdmitted) {
  const PreflightReport slow{true, "", {"compute SLOW rank 2 [vm-2]: 180.0 TFLOP/s, 45% of ..."}};
  const auto v = preflight_fault(passed(slow));
  EXPECT_EQ(v.fault, "preflight: slow: compute SLOW rank 2 [vm-2]: 180.0 TFLOP/s, 45% of ...");
  EXPECT_EQ(v.line, v.fault);
  const auto w = preflight_fault(passed(slow), PreflightSlow::warn);
  EXPECT_EQ(w.fault, "");
  EXPECT_EQ(w.line,
            "preflight: this node passed gpudiag check but is slow: compute SLOW rank 2 [vm-2]: "
            "180.0 TFLOP/s, 45% of ... (--preflight-slow warn: not counted against the node)");
  const PreflightReport many{true, "", std::vector<std::string>(8, std::string(100, 'x'))};
  EXPECT_LE(preflight_fault(passed(many)).fault.size(), 400u);  // the store keeps 400
}

TEST(PreflightSlowVerdict, NothingJudgedSlowIsNoFault) {
  EXPECT_EQ(preflight_fault(passed({true, "", {}})).fault, "");
  const auto v = preflight_fault(passed({false, "its report is not JSON", {}}));
  EXPECT_EQ(v.fault, "");
  EXPECT_EQ(v.line,
            "preflight: this node passed gpudiag check (2/2 ranks OK, 3.2 s); its speed not "
            "judged: its report is not JSON");
  // A broken node stays broken in the check's words, whatever its report.
  auto broken = passed({true, "", {"all-reduce busbw 1.0 GB/s, WARN below 80% of 2.0 GB/s"}});
  broken.status = ExitStatus::exited(1);
  EXPECT_EQ(preflight_fault(broken).fault,
            "preflight: gpudiag check found this node broken (2/2 ranks OK)");
}

TEST(PreflightSlowVerdict, TheCheckWritesItsReportWhereThePreflightReadsIt) {
  const auto args = preflight_arguments(2, 30, "/tmp/gpudiag-preflight-x/check.json");
  ASSERT_GE(args.size(), 2u);
  EXPECT_EQ(args[args.size() - 2], "--json");
  EXPECT_EQ(args.back(), "/tmp/gpudiag-preflight-x/check.json");
  EXPECT_EQ(preflight_arguments(2, 30).back(), "30");
}

}  // namespace preflight_report_test
}  // namespace gpudiag::launch
