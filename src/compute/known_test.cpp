// The known checksums: an exact key's entry judges one rank alone (a match
// agrees, a difference breaks it with the entry's key in the line), it is the
// reference against a majority of peers, a model, driver or kernel version
// not listed judges nothing, and a table out of shape (malformed, oversized,
// nested, hostile) is refused whole with one line. The compiled-in table
// reads, and its host entry matches the CPU arithmetic of this build.
#include "compute/known.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "compute/arith.h"
#include "compute/math.h"

namespace gpudiag {
namespace {

const char* kKnownTestTable = R"({"schema": "gpudiag-compute-checksums/1", "about": "test",
  "sources": {"run": "a run"},
  "entries": [
    {"device": "gpu", "model": "NVIDIA H200", "driver": "550.54.15", "kernel": 1,
     "checksums": {"bf16 GEMM": "00000000000000aa", "fp32 GEMM": "00000000000000ff"}, "source": "run"},
    {"device": "host", "model": "*", "driver": "*", "kernel": 1,
     "checksums": {"bf16 GEMM": "0000000000000001"}, "source": "run"}]})";

ComputeRecord known_gpu(const std::string& bf16, const std::string& model = "NVIDIA H200",
                        const std::string& driver = "550.54.15", int kernel = 1) {
  ComputeRecord r;
  r.model = model;
  r.device = "gpu";
  r.driver = driver;
  r.kernel = kernel;
  r.parts = {{"bf16 GEMM", bf16, 1e12, 0.01, 2}, {"fp32 GEMM", "00000000000000ff", 1e12, 0.01, 2}};
  return r;
}

ComputeTallies known_tally(const std::vector<ComputeRecord>& rs) {
  ComputeTallies t;
  for (const auto& r : rs) tally_compute(t, r);
  bound_compute(t);
  return t;
}

TEST(KnownChecksums, AnExactMatchAgreesWithOneRank) {
  const auto t = parse_known_checksums(kKnownTestTable);
  ASSERT_EQ(t.error, "");
  auto r = known_gpu("00000000000000aa");
  r.judged = "alone";
  judge_known(t, known_tally({r}), r);
  EXPECT_EQ(r.known, "matches");
  EXPECT_EQ(r.judged, "agrees");
  EXPECT_FALSE(r.failed());
}

TEST(KnownChecksums, AMismatchBreaksOneRankAlone) {
  const auto t = parse_known_checksums(kKnownTestTable);
  auto r = known_gpu("00000000000000bb");
  r.judged = "alone";
  judge_known(t, known_tally({r}), r);
  EXPECT_EQ(r.known, "differs");
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(
      r.finding,
      "compute result differs from the known checksum of NVIDIA H200 (driver 550.54.15, kernel v1) "
      "(bf16 GEMM, checksum 00000000000000bb, known 00000000000000aa)");
}

TEST(KnownChecksums, TheTableIsTheReferenceAgainstTheMajority) {
  const auto t = parse_known_checksums(kKnownTestTable);
  const auto bad = known_gpu("00000000000000bb"), good = known_gpu("00000000000000aa");
  const auto tallies = known_tally({bad, bad, good});
  auto g = good;
  g.judged = "differs";  // the majority's verdict
  judge_known(t, tallies, g);
  EXPECT_EQ(g.judged, "agrees");
  auto b = bad;
  judge_known(t, tallies, b);
  EXPECT_EQ(b.judged, "differs");
  EXPECT_NE(b.finding.find("; 1 of 3 GPUs of its model give the known one"), std::string::npos)
      << b.finding;
  // Every rank agrees with the others but not with the table: said plainly, and broken.
  auto all = bad;
  judge_known(t, known_tally({bad, bad, bad}), all);
  EXPECT_EQ(all.judged, "differs");
  EXPECT_NE(
      all.finding.find(
          "; all 3 GPUs of its model give this same checksum: either the known entry is wrong"),
      std::string::npos)
      << all.finding;
}

TEST(KnownChecksums, RankZerosLineSaysAMatch) {
  const auto t = parse_known_checksums(kKnownTestTable);
  auto r = known_gpu("00000000000000aa");
  r.seconds = 1.5;
  r.tflops = 400;
  judge_known(t, known_tally({r}), r);
  const std::string line = compute_summary({{0, "rank 0 [n-0]", &r}}, true, "");
  EXPECT_EQ(line,
            "compute: bf16 and fp32 GEMM on 1 rank (NVIDIA H200, median 400.0 TFLOP/s), 1.50 s, "
            "matching the "
            "known checksums\n");
  auto b = known_gpu("00000000000000bb");
  judge_known(t, known_tally({b}), b);
  EXPECT_NE(compute_summary({{0, "rank 0 [n-0]", &b}}, true, "")
                .find("; rank 0 differs from the known checksums"),
            std::string::npos);
}

TEST(KnownChecksums, AnUnlistedModelDriverOrKernelGetsNoVerdict) {
  const auto t = parse_known_checksums(kKnownTestTable);
  for (auto r : {known_gpu("00000000000000bb", "NVIDIA H100 80GB HBM3"),
                 known_gpu("00000000000000bb", "NVIDIA H200", "550.54.14"),
                 known_gpu("00000000000000bb", "NVIDIA H200", ""),
                 known_gpu("00000000000000bb", "NVIDIA H200", "550.54.15", 2),
                 known_gpu("00000000000000bb", "NVIDIA H200 ")}) {
    r.judged = "alone";
    judge_known(t, known_tally({r}), r);
    EXPECT_EQ(r.known, "") << r.model << " " << r.driver << " " << r.kernel;
    EXPECT_EQ(r.judged, "alone");
  }
  // A GPU never takes the host's "*" entry, and an unstable rank keeps its own verdict.
  auto h = known_gpu("0000000000000002", "CPU X", "*");
  judge_known(t, {}, h);
  EXPECT_EQ(h.known, "");
  h.device = "host";
  h.judged = "unstable";
  judge_known(t, {}, h);
  EXPECT_EQ(h.judged, "unstable");
  h.judged = "";
  judge_known(t, {}, h);
  EXPECT_EQ(h.known, "differs");
  EXPECT_NE(h.finding.find("of CPU X (host backend, kernel v1)"), std::string::npos) << h.finding;
}

TEST(KnownChecksums, ATableOutOfShapeIsRefusedWithOneLine) {
  const std::string entry =
      R"({"device": "gpu", "model": "M", "driver": "1.2", "kernel": 1, "checksums": {"bf16 GEMM": "00000000000000aa"}, "source": "run"})";
  auto table = [](const std::string& entries) {
    return R"({"schema": "gpudiag-compute-checksums/1", "sources": {"run": "x"}, "entries": [)" +
           entries + "]}";
  };
  ASSERT_EQ(parse_known_checksums(table(entry)).error, "");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string e = entry;
    e.replace(e.find(from), from.size(), to);
    return table(e);
  };
  const std::vector<std::string> bad = {
      "",
      "not json",
      "[]",
      "{\"schema\": \"gpudiag-compute-checksums/2\", \"sources\": {}, \"entries\": []}",
      with("\"00000000000000aa\"", "\"00000000000000AA\""),
      with("\"00000000000000aa\"", "\"aa\""),
      with("\"00000000000000aa\"", "12"),
      with("bf16 GEMM", "int8 GEMM"),
      with("\"kernel\": 1", "\"kernel\": 0"),
      with("\"kernel\": 1", "\"kernel\": \"1\""),
      with("\"kernel\": 1", "\"kernel\": 1e300"),
      with("\"model\": \"M\"", "\"model\": \"*\""),
      with("\"device\": \"gpu\"", "\"device\": \"tpu\""),
      with("\"model\": \"M\"", "\"model\": \"M\\u001b[2J\""),
      with("\"model\": \"M\"", "\"model\": \"\""),
      with("\"model\": \"M\"", "\"model\": \"" + std::string(300, 'x') + "\""),
      with("\"run\"}", "\"other\"}"),
      with("\"driver\": \"1.2\", ", ""),
      table(entry + "," + entry),
      table(entry + ", 7"),
      table(std::string(100000, '[') + std::string(100000, ']')),
      table(entry) + std::string(kMaxKnownBytes, ' ')};
  for (const auto& text : bad) {
    const auto t = parse_known_checksums(text);
    EXPECT_TRUE(t.entries.empty()) << text.substr(0, 200);
    EXPECT_EQ(t.error.rfind("data/compute-checksums.json: ", 0), 0u) << text.substr(0, 200);
    EXPECT_EQ(t.error.find('\n'), std::string::npos);
    EXPECT_NE(t.error.find("no known checksums are used"), std::string::npos) << t.error;
  }
  // A refused table judges nothing.
  auto r = known_gpu("00000000000000bb", "M", "1.2");
  r.judged = "alone";
  judge_known(parse_known_checksums(with("bf16 GEMM", "int8 GEMM")), {}, r);
  EXPECT_EQ(r.judged, "alone");
}

TEST(KnownChecksums, TheCompiledInTableHoldsThisBuildsHostArithmetic) {
  const auto& t = known_checksums();
  ASSERT_EQ(t.error, "");
  ComputeRecord r;
  r.model = "CPU any";
  r.device = "host";
  r.kernel = compute::kComputeKernelVersion;
  for (auto p : {compute::Precision::bf16, compute::Precision::fp16, compute::Precision::fp32}) {
    const auto c = compute::cpu_gemm(p, 64);  // kHostComputeN
    r.parts.push_back({std::string(compute::precision_name(p)) + " GEMM",
                       compute::hex64(compute::checksum(c.data(), c.size())), 1, 1, 2});
  }
  judge_known(t, {}, r);
  EXPECT_EQ(r.known, "matches") << r.finding;
}

TEST(KnownChecksums, TheDriverReleaseIsReadBounded) {
  const std::string path = ::testing::TempDir() + "nvidia-version";
  auto write = [&](const std::string& s) { std::ofstream(path) << s; };
  write(
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  "
      "(dvs-builder@U16)\n");
  EXPECT_EQ(nvidia_driver_release(path), "580.65.06");
  write(
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n");
  EXPECT_EQ(nvidia_driver_release(path), "550.54.15");
  write(std::string(100000, 'x') + " 550.54.15\n");
  EXPECT_EQ(nvidia_driver_release(path), "");
  write("no version here\n");
  EXPECT_EQ(nvidia_driver_release(path), "");
  EXPECT_EQ(nvidia_driver_release(path + ".absent"), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpudiag
