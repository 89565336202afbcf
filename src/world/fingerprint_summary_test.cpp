// Groups' summaries of fingerprints (fingerprint_summary.h): built from a
// table, through their JSON and back, merged across groups and compared as
// a flat job is; bounded however many fields and values a group holds; and
// read back defensively, however hostile the JSON.
#include "world/fingerprint_summary.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace gpudiag {
namespace fingerprint_summary_test {  // named: the unity build puts this folder's tests in one unit

Fingerprint base() {
  Fingerprint f;
  f.fields = {{"kernel", "6.1.0"},
              {"gpu.driver", "535.104.05"},
              {"nccl.version", "2.21.5"},
              {"plugin.net", "not found"},
              {"env.NCCL_DEBUG", "WARN"},
              {"gpu.persistence", "enabled"},
              {"host", "ignored: not compared"}};
  return f;
}

/// Ranks [first, first + n), 8 a host "simnode<rank / 8>", each with f(rank).
struct Group {
  std::vector<Fingerprint> prints;
  std::vector<RankPrint> view;
  Group(int first, int n, const std::function<void(int, Fingerprint&)>& f = {}) {
    prints.resize(n, base());
    for (int i = 0; i < n; ++i) {
      const int r = first + i;
      if (f) f(r, prints[i]);
      view.push_back({r, "simnode" + std::to_string(r / 8), &prints[i]});
    }
  }
  FingerprintSummary summary() const { return summarize_fingerprints(view); }
};

const SummaryField* field(const FingerprintSummary& s, const std::string& name) {
  for (const auto& f : s.fields)
    if (f.field == name) return &f;
  return nullptr;
}

/// The summary as its parent reads it: through JSON text.
std::optional<FingerprintSummary> sent(const FingerprintSummary& s, int first, int last) {
  return decode_summary(nlohmann::json::parse(summary_json(s).dump()), first, last);
}

TEST(FingerprintSummary, ValuesWithTheirRanksAndHosts) {
  Group g(0, 64, [](int r, Fingerprint& f) {
    if (r / 8 == 5) f.fields["gpu.driver"] = "550.54.15";
  });
  const auto s = g.summary();
  EXPECT_EQ(s.rank_count, 64);
  EXPECT_EQ(s.host_count, 8);
  EXPECT_EQ(s.ranks, (RankRanges{{0, 63}}));
  EXPECT_TRUE(s.complete());
  EXPECT_EQ(field(s, "host"), nullptr);  // not compared
  const auto* d = field(s, "gpu.driver");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->values.size(), 2u);
  EXPECT_EQ(d->values[0].value, "535.104.05");
  EXPECT_EQ(d->values[0].ranges, (RankRanges{{0, 39}, {48, 63}}));
  EXPECT_EQ(d->values[0].ranks, 56);
  EXPECT_EQ(d->values[0].host_count, 7);
  EXPECT_EQ(d->values[0].hosts.size(), kSummaryHosts);
  EXPECT_EQ(d->values[1].value, "550.54.15");
  EXPECT_EQ(d->values[1].ranges, (RankRanges{{40, 47}}));
  EXPECT_EQ(d->values[1].hosts, (std::vector<std::string>{"simnode5"}));
  EXPECT_TRUE(differs_within(s, "gpu.driver"));
  EXPECT_FALSE(differs_within(s, "kernel"));
}

TEST(FingerprintSummary, TheJsonRoundTripKeepsEverything) {
  Group g(128, 128, [](int r, Fingerprint& f) {
    if (r % 3 == 0) f.fields["env.NCCL_ALGO"] = "Ring";
  });
  const auto s = g.summary();
  const auto back = sent(s, 128, 255);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ranks, s.ranks);
  EXPECT_EQ(back->rank_count, s.rank_count);
  ASSERT_EQ(back->fields.size(), s.fields.size());
  for (std::size_t i = 0; i < s.fields.size(); ++i) {
    EXPECT_EQ(back->fields[i].field, s.fields[i].field);
    ASSERT_EQ(back->fields[i].values.size(), s.fields[i].values.size());
    for (std::size_t v = 0; v < s.fields[i].values.size(); ++v) {
      EXPECT_EQ(back->fields[i].values[v].value, s.fields[i].values[v].value);
      EXPECT_EQ(back->fields[i].values[v].ranges, s.fields[i].values[v].ranges);
      EXPECT_EQ(back->fields[i].values[v].ranks, s.fields[i].values[v].ranks);
    }
  }
  // Scattered holders: ranges cut at the cap, every rank still counted.
  const auto* algo = field(*back, "env.NCCL_ALGO");
  ASSERT_NE(algo, nullptr);
  ASSERT_EQ(algo->values.size(), 2u);
  EXPECT_EQ(algo->values[0].value, "unset");  // rank 128's
  EXPECT_EQ(algo->values[1].ranges.size(), kSummaryRanges);
  EXPECT_EQ(algo->values[1].ranges.front(), std::make_pair(129, 129));
  EXPECT_EQ(algo->values[1].ranks, 43);  // 129, 132, ..., 255
  EXPECT_EQ(algo->values[0].ranks, 85);
  // ... and read by a parent that believes the sender for other ranks: refused.
  EXPECT_FALSE(sent(s, 0, 127));
}

TEST(FingerprintSummary, GroupsThatAgreeWithinDifferAcross) {
  // Two groups of 64, each uniform; the second on another driver and with
  // NCCL_ALGO set (the first never saw the field: unset on its ranks).
  Group a(0, 64), b(64, 64, [](int, Fingerprint&f) {
    f.fields["gpu.driver"] = "550.54.15";
    f.fields["env.NCCL_ALGO"] = "Tree";
  });
  const auto job =
      compare_summary(merge_summaries({*sent(a.summary(), 0, 63), *sent(b.summary(), 64, 127)}));
  EXPECT_EQ(job.ranks, 128);
  EXPECT_EQ(job.hosts, 16);
  ASSERT_EQ(job.differences.size(), 2u);
  EXPECT_EQ(difference_line(job.differences[0]),
            "NCCL_ALGO differs between ranks: ranks 0-63 [simnode0,simnode1,simnode2 +5 hosts]: "
            "unset; ranks 64-127 [simnode10,simnode11,simnode12 +5 hosts]: NCCL_ALGO=Tree");
  EXPECT_EQ(difference_line(job.differences[1]),
            "the GPU driver differs between hosts: ranks 0-63 [simnode0,simnode1,simnode2 +5 "
            "hosts]: 535.104.05; ranks 64-127 [simnode10,simnode11,simnode12 +5 hosts]: 550.54.15");
  EXPECT_FALSE(job.differences[1].broken);
  EXPECT_FALSE(job.differences[1].remedy.empty());
}

TEST(FingerprintSummary, OneNodeOfSixteenGroupsIsNamedAsDrift) {
  // 16 groups of 1,024 ranks (128 nodes of 8); node 517 on another driver.
  std::vector<FingerprintSummary> parts;
  for (int g = 0; g < 16; ++g) {
    Group group(g * 1024, 1024, [](int r, Fingerprint& f) {
      if (r / 8 == 517) f.fields["gpu.driver"] = "550.54.15";
    });
    parts.push_back(*sent(group.summary(), g * 1024, g * 1024 + 1023));
  }
  const auto job = compare_summary(merge_summaries(parts));
  ASSERT_EQ(job.differences.size(), 1u);
  const auto drift = drift_lines(job.differences[0]);
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0],
            "simnode517 (ranks 4136-4143): the GPU driver is 550.54.15, not 535.104.05 as on "
            "16376 other ranks");
  const auto text = render_fingerprint(comparison_json(job));
  EXPECT_NE(text.find("\ndrift: simnode517 (ranks 4136-4143): the GPU driver is 550.54.15"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ranks 0-4135,4144-16383 [simnode0,simnode1,simnode10 +2044 hosts]"),
            std::string::npos)
      << text;
}

TEST(FingerprintSummary, SilentUnknownsAndIncompletePartsAreNotDefaults) {
  // The first group cut fields: a field it does not list is not "unset" there.
  Group a(0, 8), b(8, 8, [](int, Fingerprint&f) { f.fields["env.NCCL_IB_HCA"] = "mlx5"; });
  auto sa = *sent(a.summary(), 0, 7);
  sa.more_fields = 1;
  auto job = compare_summary(merge_summaries({sa, *sent(b.summary(), 8, 15)}));
  EXPECT_TRUE(job.differences.empty());
  // A GPU whose persistence mode could not be read says nothing.
  Group c(16, 8, [](int, Fingerprint& f) { f.fields["gpu.persistence"] = "unknown"; });
  job = compare_summary(merge_summaries({*sent(a.summary(), 0, 7), *sent(c.summary(), 16, 23)}));
  EXPECT_TRUE(job.differences.empty());
}

TEST(FingerprintLikeForLike, ANicOnlyOneHostHasIsNotDriftButAnotherMtuOnASharedNicIs) {
  // Eight hosts of eight ranks, each with an interface of its own name (a
  // namespace's veth end, a host-named bond) and a shared eth0; host 3's
  // eth0 runs another MTU. Flat, and across two groups merged.
  auto nics = [](int r, Fingerprint& f) {
    f.fields["nic.own-" + std::to_string(r / 8) + ".mtu"] = "1500";
    f.fields["nic.eth0.mtu"] = r / 8 == 3 ? "1500" : "9000";
    f.fields["rdma.ports"] = "1";
    f.fields["ib.mlx5_0/1"] = "ACTIVE, 200 Gb/sec (4X HDR), InfiniBand";
  };
  Group all(0, 64, nics), a(0, 32, nics), b(32, 32, nics);
  const auto flat = compare_fingerprints(all.view);
  const auto merged =
      compare_summary(merge_summaries({*sent(a.summary(), 0, 31), *sent(b.summary(), 32, 63)}));
  for (const auto* job : {&flat, &merged}) {
    ASSERT_EQ(job->differences.size(), 1u) << render_fingerprint(comparison_json(*job));
    EXPECT_EQ(job->differences[0].field, "nic.eth0.mtu");
    const auto drift = drift_lines(job->differences[0]);
    ASSERT_EQ(drift.size(), 1u);
    EXPECT_EQ(drift[0].rfind("simnode3 (ranks 24-31): nic.eth0.mtu is 1500, not 9000", 0), 0u)
        << drift[0];
  }
}

TEST(FingerprintLikeForLike, AHostMissingAnRdmaPortTheOthersHaveIsNamed) {
  // Host 5 lost mlx5_1: its other port agrees, and the count names it.
  Group g(0, 64, [](int r, Fingerprint& f) {
    f.fields["ib.mlx5_0/1"] = "ACTIVE, 200 Gb/sec (4X HDR), InfiniBand";
    if (r / 8 != 5) f.fields["ib.mlx5_1/1"] = "ACTIVE, 200 Gb/sec (4X HDR), InfiniBand";
    f.fields["rdma.ports"] = r / 8 == 5 ? "1" : "2";
  });
  const auto job = compare_fingerprints(g.view);
  ASSERT_EQ(job.differences.size(), 1u);
  EXPECT_EQ(job.differences[0].field, "rdma.ports");
  const auto drift = drift_lines(job.differences[0]);
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].rfind("simnode5 (ranks 40-47): the number of RDMA ports is 1, not 2", 0), 0u)
      << drift[0];
}

TEST(FingerprintSummary, BoundedWhateverTheGroupHolds) {
  // 1,000 fields of 256-byte values, each different on every node; NCCL's
  // version among them with 20 values.
  Group g(0, 1024, [](int r, Fingerprint& f) {
    for (int k = 0; k < 1000; ++k)
      f.fields["env.X_" + std::to_string(k)] = std::string(250, 'a') + std::to_string(r / 8);
    f.fields["nccl.version"] = "2." + std::to_string(r % 20);
  });
  const auto s = g.summary();
  EXPECT_EQ(s.fields.size(), kSummaryFields);
  const auto j = summary_json(s);
  EXPECT_LE(j.dump().size(), kMaxSummaryBytes);
  const auto back = decode_summary(j, 0, 1023);
  ASSERT_TRUE(back);
  EXPECT_GT(back->more_fields, 700);
  EXPECT_FALSE(back->complete());
  const auto* nccl = field(*back, "nccl.version");  // kept before the settings
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(nccl->values.size(), kSummaryValues);
  EXPECT_EQ(nccl->more_values, 12);
  long long listed = 0;
  for (const auto& v : nccl->values) listed += v.ranks;
  EXPECT_EQ(listed + nccl->more_ranks, 1024);
  const auto job = compare_summary(merge_summaries({*back}));
  ASSERT_FALSE(job.differences.empty());
  EXPECT_EQ(job.differences[0].field, "nccl.version");  // broken first
  EXPECT_NE(difference_line(job.differences[0], 16).find("(12 more values, not listed)"),
            std::string::npos);
}

TEST(FingerprintSummary, HostileJsonIsRefusedNeverThrown) {
  Group g(0, 16, [](int r, Fingerprint& f) { f.fields["gpu.driver"] = r < 8 ? "1" : "2"; });
  const auto good = summary_json(g.summary());
  ASSERT_TRUE(decode_summary(good, 0, 15));
  auto with = [&](const std::function<void(nlohmann::json&)>& change) {
    auto j = good;
    change(j);
    return decode_summary(j, 0, 15);
  };
  const auto& fields = good.at("fields");
  ASSERT_TRUE(fields.is_array());
  std::size_t driver = 0;
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (fields[i].at("f") == "gpu.driver") driver = i;
  const std::vector<std::pair<const char*, std::function<void(nlohmann::json&)>>> cases = {
      {"not an object", [](auto& j) { j = nlohmann::json::array(); }},
      {"a rank outside the sender's",
       [](auto& j) {
         j["ranks"] = {{0, 16}};
       }},
      {"a negative rank",
       [](auto& j) {
         j["ranks"] = {{-1, 3}};
       }},
      {"ranges out of order",
       [](auto& j) {
         j["ranks"] = {{8, 15}, {0, 7}};
       }},
      {"overlapping ranges",
       [](auto& j) {
         j["ranks"] = {{0, 8}, {8, 15}};
       }},
      {"a range backwards",
       [](auto& j) {
         j["ranks"] = {{7, 0}};
       }},
      {"a range of three",
       [](auto& j) {
         j["ranks"] = {{0, 1, 2}};
       }},
      {"a count past the ranks", [](auto& j) { j["n"] = 17; }},
      {"a count below the listed", [](auto& j) { j["n"] = 3; }},
      {"a count that is text", [](auto& j) { j["n"] = "16"; }},
      {"a huge count", [](auto& j) { j["mf"] = 1LL << 40; }},
      {"too many hosts",
       [](auto& j) {
         j["hosts"] = {"a", "b", "c", "d", "e"};
       }},
      {"a control byte", [&](auto& j) { j["fields"][driver]["vals"][0]["v"] = "1\n2"; }},
      {"a field not compared", [&](auto& j) { j["fields"][driver]["f"] = "host"; }},
      {"an empty field name", [&](auto& j) { j["fields"][driver]["f"] = ""; }},
      {"a field twice", [&](auto& j) { j["fields"].push_back(j["fields"][driver]); }},
      {"a value twice",
       [&](auto& j) { j["fields"][driver]["vals"][1]["v"] = j["fields"][driver]["vals"][0]["v"]; }},
      {"no values", [&](auto& j) { j["fields"][driver]["vals"] = nlohmann::json::array(); }},
      {"a value's ranks elsewhere",
       [&](auto& j) {
         j["fields"][driver]["vals"][0]["r"] = {{0, 99}};
       }},
      {"too many values",
       [&](auto& j) {
         auto& v = j["fields"][driver]["vals"];
         for (int i = 0; i < 9; ++i)
           v.push_back({{"v", std::to_string(10 + i)},
                        {"r", {{i, i}}},
                        {"n", 1},
                        {"h", nlohmann::json::array()},
                        {"hn", 0}});
       }},
      {"hosts past the ranks", [&](auto& j) { j["fields"][driver]["vals"][0]["hn"] = 9; }},
      {"a long value",
       [&](auto& j) {
         j["fields"][driver]["vals"][0]["v"] = std::string(kMaxValueChars + 1, 'v');
       }},
  };
  for (const auto& [what, change] : cases) EXPECT_FALSE(with(change)) << what;
  // Random damage anywhere: refused or read, never a crash or a throw.
  std::mt19937 rng(37);
  const std::string text = good.dump();
  for (int i = 0; i < 2000; ++i) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = "0123456789[]{},\"-ax"[rng() % 19];
    auto j = nlohmann::json::parse(t, nullptr, false);
    if (j.is_discarded()) continue;
    auto s = decode_summary(j, 0, 15);
    if (s) EXPECT_LE(s->rank_count, 16);
  }
}

}  // namespace
}  // namespace gpudiag
