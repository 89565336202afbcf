// StorePlane over a real TcpStoreServer on 127.0.0.1: a checkpoint that a
// rank's launcher reported dead does not wait for that rank; values forged by
// a process outside the job (a counter that is not a number or is huge, a
// failure text of a megabyte with newlines) neither crash nor exhaust a rank.
#include "rendezvous/store_plane.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "rendezvous/tcp_store_client.h"
#include "rendezvous/tcp_store_server.h"

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
  for (const auto& g : {g0, other}) {
    EXPECT_EQ(g.records[0], "r0");
    EXPECT_EQ(g.records[1], "r1");
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

}  // namespace
}  // namespace gpudiag
