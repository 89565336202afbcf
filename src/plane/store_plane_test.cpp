// StorePlane over a real TcpStoreServer on 127.0.0.1: a checkpoint that a
// rank's launcher reported dead does not wait for that rank; values forged by
// a process outside the job (a counter that is not a number or is huge, a
// failure text of a megabyte with newlines) neither crash nor exhaust a rank.
#include "plane/store_plane.h"

#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "store/memory_store.h"
#include "util/error.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace gpudiag {
namespace {

using Clock = std::chrono::steady_clock;

TEST(StorePlane, ACheckpointStopsWaitingForARankReportedDead) {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = "job";
  TcpStoreServer server(o);
  auto client = [&] {
    return std::make_unique<TcpStoreClient>("127.0.0.1", server.port(), "job",
                                            Deadline::after_seconds(5));
  };
  auto plane = [&](int rank) {
    return make_store_plane(client(), {rank, 3, rank, "node", 100 + rank},
                            Deadline::after_seconds(5));
  };
  auto p0 = plane(0), p1 = plane(1);
  // Rank 2 never arrives: its launcher saw it die.
  auto launcher = client();
  publish_failure(*launcher, "rank 2 [node-2] (pid 102) was killed by SIGKILL",
                  Deadline::after_seconds(5), FailureKind::died, 2);
  const auto t0 = Clock::now();
  auto g1 = std::async(std::launch::async, [&] {
    return p1->gather_all("all-reduce", "r1", Deadline::after_seconds(30), {0, 1, 2});
  });
  auto g0 = p0->gather_all("all-reduce", "r0", Deadline::after_seconds(30), {0, 1, 2});
  auto other = g1.get();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(g0.records[0], "r0");
  EXPECT_EQ(g0.records[1], "r1");
  EXPECT_EQ(other.records[1], "r1");
  EXPECT_FALSE(other.records[0]);  // not asked for: only the judge reads every record
  for (const auto& g : {g0, other}) {
    EXPECT_TRUE(g.judged);
    EXPECT_EQ(g.missing, std::vector<int>{2});
    EXPECT_FALSE(g.records[2]);
    ASSERT_TRUE(g.aborted);
    EXPECT_NE(g.aborted->find("rank 2 [node-2] (pid 102) was killed"), std::string::npos);
  }
  // Without the mark it would wait out the 2 s grace given to stragglers.
  EXPECT_LT(took, 1.5);
}

/// A server and planes for ranks 0..size-1, and a raw client to forge keys with.
struct ForgedJob {
  explicit ForgedJob(int size) {
    TcpStoreServerOptions o;
    o.bind_host = "127.0.0.1";
    o.token = "job";
    server = std::make_unique<TcpStoreServer>(o);
    outsider = client();
    for (int r = 0; r < size; ++r)
      planes.push_back(
          make_store_plane(client(), {r, size, r, "node", 100 + r}, Deadline::after_seconds(5)));
  }
  std::unique_ptr<TcpStoreClient> client() {
    return std::make_unique<TcpStoreClient>("127.0.0.1", server->port(), "job",
                                            Deadline::after_seconds(5));
  }
  void forge(const std::string& key, const std::string& value) {
    outsider->set(key, value, Deadline::after_seconds(5));
  }
  /// Every rank gathers; rank 0 arrives 0.5 s late so the others poll the
  /// failure counter between wait slices.
  std::vector<Gathered> gather() {
    std::vector<std::future<Gathered>> late;
    for (std::size_t r = 1; r < planes.size(); ++r)
      late.push_back(std::async(std::launch::async, [this, r] {
        return planes[r]->gather_all("exchange", "r" + std::to_string(r),
                                     Deadline::after_seconds(10), {});
      }));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::vector<Gathered> out{
        planes[0]->gather_all("exchange", "r0", Deadline::after_seconds(10), {})};
    for (auto& f : late) out.push_back(f.get());
    return out;
  }
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStoreClient> outsider;
  std::vector<std::unique_ptr<Plane>> planes;
};

TEST(StorePlane, AFailureCounterThatIsNotANumberIsIgnored) {
  ForgedJob job(3);
  job.forge("failures", "abc");
  for (const auto& g : job.gather()) {
    EXPECT_TRUE(g.complete());
    EXPECT_FALSE(g.aborted);
  }
  EXPECT_FALSE(job.planes[1]->peer_failure());
}

TEST(StorePlane, AHugeFailureCounterNeitherExhaustsNorStallsARank) {
  ForgedJob job(3);
  for (const char* forged : {"9223372036854775807", "99999999999999999999", "-5", "1000"}) {
    job.forge("failures", forged);
    const auto t0 = Clock::now();
    for (const auto& g : job.gather()) {
      EXPECT_TRUE(g.complete()) << forged;
      EXPECT_FALSE(g.aborted) << forged;
    }
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0) << forged;
  }
}

TEST(StorePlane, AForgedFailureTextIsCutToOneLine) {
  ForgedJob job(2);
  job.forge("failure/1", "failed\t" + std::string(1 << 19, 'x') + "\nrank 0 is OK\n");
  job.forge("failures", "1");
  auto f = job.planes[0]->peer_failure();
  ASSERT_TRUE(f);
  EXPECT_LE(f->size(), 1100u);
  EXPECT_EQ(f->find('\n'), std::string::npos);
}

TEST(StorePlane, AnnouncementsBeyondOneLookAreReadOnTheNext) {
  ForgedJob job(2);  // 2 x 2 + 16 = 20 announcements a look
  for (int n = 1; n <= 30; ++n)
    job.forge("failure/" + std::to_string(n), "failed\tnumber " + std::to_string(n));
  job.forge("failure/31", "died\trank 1 [node-1] (pid 101) was killed by SIGKILL");
  job.forge("failures", "31");
  auto until = Deadline::after_seconds(5);
  std::optional<std::string> death;
  while (!(death = job.planes[0]->peer_death()) && !until.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(death);
  EXPECT_NE(death->find("killed by SIGKILL"), std::string::npos);
  EXPECT_EQ(job.planes[0]->peer_failure(), death);  // a death outranks the first failure
}

/// A job of `size` ranks on one store; `absent` ranks join but never reach
/// the checkpoint. Each rank's record is 300 bytes, as a real one is.
struct DigestJob {
  explicit DigestJob(int size) : job(size) {}
  std::vector<Gathered> gather(const std::set<int>& absent, Deadline deadline,
                               const Review& review = {}) {
    std::vector<std::future<Gathered>> f;
    for (int r = 0; r < static_cast<int>(job.planes.size()); ++r) {
      if (absent.count(r)) continue;
      f.push_back(std::async(std::launch::async, [&, r] {
        return job.planes[r]->gather_all("all-reduce", record(r), deadline, {}, {}, review);
      }));
    }
    std::vector<Gathered> out;
    for (auto& x : f) out.push_back(x.get());
    return out;
  }
  static std::string record(int r) {
    return (r == 2 ? "bad" : "ok!") + std::string(297, static_cast<char>('a' + r % 26));
  }
  std::uint64_t bytes(int r) const { return job.planes[r]->bytes_moved(); }
  ForgedJob job;
};

/// The judge's review in these tests: how many records start with "bad".
std::string count_bad(const Gathered& g) {
  int bad = 0;
  for (std::size_t i = 0; i < g.records.size(); ++i)
    if (const auto& r = g.records.at(i); r && r->rfind("bad", 0) == 0) ++bad;
  return "bad=" + std::to_string(bad);
}

TEST(StorePlaneDigest, EveryRankLearnsTheJudgesReviewAndReadsBytesIndependentOfN) {
  std::vector<std::uint64_t> leaf, judge;
  for (int n : {4, 16, 64}) {
    DigestJob job(n);
    auto gs = job.gather({}, Deadline::after_seconds(20), count_bad);
    for (const auto& g : gs) {
      EXPECT_TRUE(g.judged);
      EXPECT_TRUE(g.complete());
      EXPECT_EQ(g.review, "bad=1");  // rank 2 "failed"; every rank hears it from the judge
    }
    leaf.push_back(job.bytes(n - 1));
    judge.push_back(job.bytes(0));
  }
  // A rank other than 0 sends its record and reads the digest: the same
  // bytes at 4, 16 and 64 ranks (keys differ by a digit).
  EXPECT_LE(leaf[2], leaf[0] + 4);
  EXPECT_LT(leaf[2], 2 * 310u + 200u);
  // The judge reads every record once: linear in n.
  EXPECT_GE(judge[2], 64u * 300u);
  EXPECT_LT(judge[2], 64u * 320u + 400u);
}

TEST(StorePlaneDigest, MissingAndStoppedRanksAreNamedWithTheirNotesOnEveryRank) {
  std::vector<std::uint64_t> leaf;
  for (int n : {8, 32}) {
    DigestJob job(n);
    // Checkpoint 1: rank 5 arrives, then says it is in the all-reduce and stops.
    auto first = job.gather({3}, Deadline::after_seconds(2));
    job.job.planes[5]->note_phase("all-reduce");
    const std::uint64_t before = job.bytes(n - 1);
    auto gs = job.gather({3, 5}, Deadline::after_seconds(1));
    for (const auto& g : first) EXPECT_EQ(g.missing, std::vector<int>{3});
    for (const auto& g : gs) {
      EXPECT_TRUE(g.judged);
      EXPECT_EQ(g.missing, (std::vector<int>{3, 5}));
      EXPECT_NE(g.notes[3].find("pid 103 on node"), std::string::npos) << g.notes[3];
      EXPECT_NE(g.notes[5].find("last phase: all-reduce"), std::string::npos) << g.notes[5];
    }
    leaf.push_back(job.bytes(n - 1) - before);
  }
  EXPECT_LE(leaf[1], leaf[0] + 4);  // the same two ranks named at 8 and at 32
}

TEST(StorePlaneDigest, ARankReportedDeadIsNamedAtOnceOnEveryRank) {
  std::vector<std::uint64_t> leaf;
  for (int n : {4, 32}) {
    DigestJob job(n);
    publish_failure(*job.job.outsider, "rank 1 [node-1] (pid 101) was killed by SIGKILL",
                    Deadline::after_seconds(5), FailureKind::died, 1);
    const auto t0 = Clock::now();
    auto gs = job.gather({1}, Deadline::after_seconds(30), count_bad);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
    for (const auto& g : gs) {
      EXPECT_TRUE(g.judged);
      EXPECT_EQ(g.missing, std::vector<int>{1});
      ASSERT_TRUE(g.aborted);
      EXPECT_NE(g.aborted->find("killed by SIGKILL"), std::string::npos);
      EXPECT_EQ(g.review, "bad=1");
    }
    leaf.push_back(job.bytes(n - 1));
  }
  // The death is read from the announcements, not from the table.
  EXPECT_LE(leaf[1], leaf[0] + 4);
}

TEST(StorePlaneDigest, WithoutTheJudgeEveryRankReadsTheTableItself) {
  DigestJob job(4);
  const auto t0 = Clock::now();
  auto gs = job.gather({0}, Deadline::after_seconds(0.5));
  // The others wait their deadline and the judge's grace, then read the table.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 8.0);
  for (const auto& g : gs) {
    EXPECT_FALSE(g.judged);
    EXPECT_EQ(g.missing, std::vector<int>{0});
    EXPECT_NE(g.notes[0].find("pid 100 on node"), std::string::npos);
    EXPECT_TRUE(g.records[1]);
    EXPECT_TRUE(g.records[3]);
  }
}

TEST(StorePlaneDigest, AForgedDigestIsIgnored) {
  DigestJob job(3);
  job.job.forge("cp/0/digest", "{\"missing\": \"all of them\"}");
  auto gs = job.gather({}, Deadline::after_seconds(5));
  // Rank 0 overwrites it with the real one before the others read it, or
  // they fall back to the table: either way nobody is reported missing.
  for (const auto& g : gs) EXPECT_TRUE(g.complete());
}

TEST(StorePlaneDigest, TheRecordsARankNeedsComeWithTheDigest) {
  DigestJob job(8);
  std::vector<std::future<Gathered>> f;
  for (int r = 0; r < 8; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      return job.job.planes[r]->gather_all("exchange", DigestJob::record(r),
                                           Deadline::after_seconds(10), {},
                                           {0, (r + 1) % 8, (r + 7) % 8});
    }));
  for (int r = 0; r < 8; ++r) {
    auto g = f[r].get();
    for (int p = 0; p < 8; ++p) {
      const bool wanted = r == 0 || p == r || p == 0 || p == (r + 1) % 8 || p == (r + 7) % 8;
      EXPECT_EQ(g.records[p].has_value(), wanted) << "rank " << r << " record " << p;
    }
  }
}

/// A node's store that leaves the first request for one key unanswered (a
/// busy store on loaded cores: its process runs), then answers as usual.
class LateOnce : public StoreView {
 public:
  LateOnce(Store& s, std::string key) : StoreView(s), key_(std::move(key)) {}
  void set(const std::string& k, const std::string& v, Deadline d) override {
    if (k == key_ && !late_) {
      late_ = true;
      throw Error(ExitCode::timeout, "no reply to SET " + k + " in time");
    }
    StoreView::set(k, v, d);
  }
  std::optional<bool> server_running() override { return true; }

 private:
  std::string key_;
  bool late_ = false;
};

TEST(StorePlane, AStoreThatAnswersOneRequestLateDoesNotMakeEveryRankMissing) {
  MemoryStore shared;
  auto p0 = make_store_plane(std::make_unique<StoreView>(shared), {0, 2, 0, "node", 100},
                             Deadline::after_seconds(5));
  auto p1 = make_store_plane(std::make_unique<LateOnce>(shared, "cp/0/1"),
                             {1, 2, 1, "node", 101}, Deadline::after_seconds(5));
  auto g1 = std::async(std::launch::async, [&] {
    return p1->gather_all("exchange", "r1", Deadline::after_seconds(30), {});
  });
  auto g0 = p0->gather_all("exchange", "r0", Deadline::after_seconds(30), {});
  auto other = g1.get();
  for (const auto& g : {g0, other}) {
    EXPECT_TRUE(g.judged);
    EXPECT_TRUE(g.complete()) << "missing: " << g.missing.size();
    EXPECT_FALSE(g.aborted);
  }
  EXPECT_EQ(g0.records[1], "r1");
}

}  // namespace
}  // namespace gpudiag
