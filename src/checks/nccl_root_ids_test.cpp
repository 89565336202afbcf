// The bootstrap roots' ids on their way to every rank (nccl_root_ids.h): the
// judge copies them from the table into its review, the tree's root merges
// its groups', the digest carries the review, and each rank assembles them
// in root order or names the root it lacks. Every value a review carries
// comes from another process: hostile ones are dropped, never thrown on.
#include "checks/nccl_root_ids.h"

#include <gtest/gtest.h>

#include <map>

#include "checks/tree_review.h"
#include "checks/verdict.h"
#include "comm/nccl_model.h"
#include "comm/nccl_roots.h"
#include "plane/checkpoint_digest.h"
#include "util/error.h"

namespace gpudiag {
namespace {

std::string id_of(int rank) {
  std::string hex = std::to_string(rank);
  return hex + std::string(256 - hex.size(), 'a');
}

RankRecord nccl_record(int rank, int world, int roots) {
  RankRecord r;
  r.rank = rank;
  r.world_size = world;
  r.host = "n" + std::to_string(rank / 8);
  r.local_rank = rank % 8;
  r.backend = "nccl";
  r.nccl_roots = roots;
  if (nccl_root_made_by(rank, world, roots) >= 0) r.nccl_id = id_of(rank);
  return r;
}

std::vector<std::optional<RankRecord>> table(int world, int roots) {
  std::vector<std::optional<RankRecord>> t;
  for (int r = 0; r < world; ++r) t.push_back(nccl_record(r, world, roots));
  return t;
}

TEST(NcclRootIds, TheJudgeCopiesTheIdsNcclsRulePlaces) {
  auto t = table(16, 4);  // roots made by 0, 4, 8, 12
  // A record claiming an id it does not make, and one off the NCCL backend.
  t[5]->nccl_id = id_of(5);
  t[9]->backend = "host/tcp";
  t[9]->nccl_id = id_of(9);
  const auto ids = root_ids_in(t);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], (NcclRootId{4, 4, id_of(4)}));
  EXPECT_EQ(ids[1].rank, 8);
  EXPECT_EQ(ids[2].rank, 12);
  EXPECT_TRUE(root_ids_in(table(16, 1)).empty()) << "one root: rank 0's record carries it";
}

TEST(NcclRootIds, EveryRankAssemblesThemInRootOrder) {
  const auto t = table(17, 5);  // 4 4 3 3 3: made by 0, 4, 8, 11, 14
  const auto review = decode_review(encode_review(review_table(t, nullptr, {}, true)));
  const auto ids = nccl_init_ids(*t[16], t[0], review.nccl_ids);
  EXPECT_EQ(ids, (std::vector<std::string>{id_of(0), id_of(4), id_of(8), id_of(11), id_of(14)}));
  // One root: rank 0's id alone, whatever a review carries.
  const auto one = table(17, 1);
  EXPECT_EQ(nccl_init_ids(*one[3], one[0], review.nccl_ids), std::vector<std::string>{id_of(0)});
}

TEST(NcclRootIds, AMissingOrMalformedIdNamesItsRootAndRank) {
  const auto t = table(16, 4);
  auto ids = root_ids_in(t);
  auto fails = [&](const std::vector<NcclRootId>& shared, const std::optional<RankRecord>& rank0,
                   const RankRecord& me) {
    try {
      nccl_init_ids(me, rank0, shared);
    } catch (const Error& e) {
      return e.one_line();
    }
    return std::string("(no error)");
  };
  auto without = ids;
  without.erase(without.begin() + 1);
  EXPECT_NE(fails(without, t[0], *t[3]).find("root 2 of 4 (made by rank 8) did not come"),
            std::string::npos)
      << fails(without, t[0], *t[3]);
  auto bad = ids;
  bad[0].id = "zz" + bad[0].id.substr(2);
  EXPECT_NE(fails(bad, t[0], *t[3]).find("root 1 of 4 (made by rank 4) arrived malformed"),
            std::string::npos);
  auto other = ids;
  other[2].roots = 8;
  EXPECT_NE(fails(other, t[0], *t[3]).find("was made for ncclCommInitRankScalable with 8 roots"),
            std::string::npos);
  EXPECT_NE(fails(ids, std::nullopt, *t[3]).find("rank 0's record"), std::string::npos);
  // Rank 0 plans one root, this rank four: said before NCCL would hang.
  const auto one = table(16, 1);
  EXPECT_NE(fails(ids, one[0], *t[3]).find("rank 0 plans NCCL's init as ncclCommInitRankConfig"),
            std::string::npos)
      << fails(ids, one[0], *t[3]);
}

// A review's ids come from another process: entries that are not [rank,
// roots, "id"] in range are dropped, a rank kept once, at most 64.
TEST(NcclRootIds, HostileEntriesInAReviewAreDropped) {
  nlohmann::json j = nlohmann::json::parse(encode_review(CheckpointReview{}));
  auto entries = nlohmann::json::array();
  entries.push_back("not an entry");
  entries.push_back({4, 4});
  entries.push_back({"4", 4, id_of(4)});
  entries.push_back({0, 4, id_of(0)});                    // root 0 comes from rank 0's record
  entries.push_back({4, 1, id_of(4)});                    // one root has no others
  entries.push_back({4, 65, id_of(4)});                   // above 64 roots
  entries.push_back({4, 4, std::string(100000, 'a')});    // longer than an id
  entries.push_back({-7, 4, id_of(4)});
  entries.push_back({4, 4, id_of(4)});
  entries.push_back({4, 4, id_of(5)});                    // rank 4 again: the first kept
  for (int r = 0; r < 200; ++r) entries.push_back({100 + r, 64, id_of(r)});
  j["nccl_ids"] = entries;
  const auto review = decode_review(j.dump());
  ASSERT_EQ(review.nccl_ids.size(), static_cast<std::size_t>(kMaxNcclRoots));
  EXPECT_EQ(review.nccl_ids[0], (NcclRootId{4, 4, id_of(4)}));
  j["nccl_ids"] = "not a list";
  EXPECT_TRUE(decode_review(j.dump()).nccl_ids.empty());
}

// The digest carries the review: at 64 roots (the most) it stays far under
// the digest's 64 KiB for the review, and the ids add about 270 bytes a root
// to what every rank reads at the exchange, whatever the job's size.
TEST(NcclRootIds, TheDigestCarriesThemAndGrowsByTheIdsOnly) {
  std::size_t last = 0;
  for (int world : {4096, 131072}) {
    std::vector<std::optional<RankRecord>> roots_only;
    for (int i = 0; i < kMaxNcclRoots; ++i)
      roots_only.push_back(nccl_record(nccl_root_first_rank(i, world, 64), world, 64));
    CheckpointReview with = review_table(roots_only, nullptr, {}, true);
    ASSERT_EQ(with.nccl_ids.size(), 63u);
    CheckpointReview without = with;
    without.nccl_ids.clear();
    const std::string d = encode_digest({}, {}, std::nullopt, encode_review(with), {});
    const std::size_t extra = d.size() - encode_digest({}, {}, std::nullopt,
                                                       encode_review(without), {}).size();
    EXPECT_LE(extra, 63u * 280) << world;
    EXPECT_LT(encode_review(with).size(), kMaxDigestReview / 3);
    if (last) EXPECT_LE(extra, last + 63u * 3) << "grows with the job only by the ranks' digits";
    last = extra;
    Gathered g;
    g.records.resize(world);
    g.notes.resize(world);
    ASSERT_TRUE(decode_digest(d, 5, world, g));
    EXPECT_EQ(decode_review(g.review).nccl_ids, with.nccl_ids);
  }
}

// The tree: each group's judge copies its roots' ids into its review, the
// root merges them; a record that should carry one and cannot be read is
// named as such.
TEST(NcclRootIds, TheTreesRootMergesEveryGroupsIds) {
  const int world = 32, roots = 4;  // made by 0, 8, 16, 24
  auto part = [&](int from, int to) {
    std::map<int, std::string> records;
    for (int r = from; r < to; ++r) records[r] = encode(nccl_record(r, world, roots));
    return records;
  };
  CheckTreeReviewer a, b, root;
  const std::string first = a.review("exchange", part(0, 16), {}, {});
  auto second_records = part(16, 32);
  second_records[24] = "{not a record";
  const std::string second = b.review("exchange", second_records, {}, {});
  const auto merged = decode_review(root.merge("exchange", {{second, 16, 31}, {first, 0, 15}}));
  ASSERT_EQ(merged.nccl_ids.size(), 2u);  // rank 24's record could not be read
  EXPECT_EQ(merged.nccl_ids[0].rank, 8);
  EXPECT_EQ(merged.nccl_ids[1].rank, 16);
  ASSERT_EQ(merged.failures.size(), 1u);
  EXPECT_NE(merged.failures[0].second.find(
                "rank 24's record could not be read (it carries the NCCL unique id of bootstrap "
                "root 3 of 4)"),
            std::string::npos)
      << merged.failures[0].second;
}

// The device phase's part: the plan into the record, and an id only on the
// ranks NCCL's rule has make one (the model's NCCL stands for the library).
TEST(NcclRootIds, TheRanksNcclsRuleNamesMakeTheIds) {
  auto record_after = [](int rank, int version, const Env& env) {
    NcclModel::Options o;
    o.nranks = 16;
    o.version = version;
    NcclModel model(o);
    NcclLibrary lib;
    lib.api = &model.nccl();
    lib.version = version;
    RankRecord me;
    me.rank = rank;
    me.world_size = 16;
    make_nccl_root_id(me, lib, env, 4);
    return me;
  };
  const Env none;
  for (int rank : {0, 4, 8, 12}) {
    const auto me = record_after(rank, 22809, none);
    EXPECT_EQ(me.nccl_roots, 4);
    EXPECT_TRUE(is_unique_id_hex(me.nccl_id)) << rank;
  }
  EXPECT_TRUE(record_after(5, 22809, none).nccl_id.empty());
  // NCCL 2.22 (no ncclCommInitRankScalable), or NCCL_COMM_ID: one root, rank 0's id alone.
  Env comm_id;
  comm_id.set("NCCL_COMM_ID", "10.0.0.1:29500");
  for (const auto& [version, env] : {std::pair{22203, none}, std::pair{22809, comm_id}}) {
    EXPECT_EQ(record_after(4, version, env).nccl_roots, 1);
    EXPECT_TRUE(record_after(4, version, env).nccl_id.empty());
    EXPECT_FALSE(record_after(0, version, env).nccl_id.empty());
  }
}

TEST(NcclRootIds, RanksThatPlanOtherRootsAreAConflictAtTheExchange) {
  auto t = table(8, 2);
  t[5]->nccl_roots = 1;  // another NCCL, or another GPUDIAG_NCCL_ROOTS
  const auto conflicts = exchange_conflicts(t);
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_NE(conflicts[0].find("NCCL bootstrap roots differ between ranks"), std::string::npos)
      << conflicts[0];
  EXPECT_NE(conflicts[0].find("rank 5 plan ncclCommInitRankConfig with one root"),
            std::string::npos)
      << conflicts[0];
  EXPECT_TRUE(exchange_conflicts(table(8, 2)).empty());
}

}  // namespace
}  // namespace gpudiag
