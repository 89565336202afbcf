// MpiPlane: checkpoints over MPI point-to-point, gathered at rank 0.
//
// Collectives cannot time out and cannot say who is missing, so a checkpoint
// is: every rank sends its record to rank 0 (tag = checkpoint sequence
// number); rank 0 receives with MPI_Iprobe until all arrived or the deadline
// passed, then sends the table (JSON array, null for the missing) to every
// rank, the missing ones included so a late rank learns it was late. Ranks
// other than 0 wait for the table a little past the deadline, giving rank 0
// time to decide. Messages are small, so sends complete eagerly even when the
// receiver is stuck; sends still in flight at the end are freed, never waited
// on.
#include <mpi.h>

#include <nlohmann/json.hpp>
#include <memory>
#include <thread>
#include <utility>

#include "comm/mpi.h"
#include "rendezvous/plane.h"

namespace gpudiag {

namespace {

constexpr int kTagFailure = 6999;
constexpr int kTagBase = 7000;
constexpr auto kRootGrace = std::chrono::seconds(5);

/// Receives one message from `source` with `tag` if one is waiting.
std::optional<std::string> try_recv(int source, int tag) {
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return std::nullopt;
  int len = 0;
  MPI_Get_count(&st, MPI_CHAR, &len);
  std::string buf(static_cast<std::size_t>(len), '\0');
  MPI_Recv(buf.data(), len, MPI_CHAR, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return buf;
}

class MpiPlane : public Plane {
 public:
  explicit MpiPlane(MpiSession& s) : rank_(s.rank()), size_(s.size()) {}
  ~MpiPlane() override {
    reap();
    // A send to a stuck peer may never complete: free the request and leave its
    // buffer allocated, since MPI may still read it.
    for (auto& [req, buf] : inflight_) {
      MPI_Request_free(&req);
      buf.release();
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return "MPI"; }

  void announce_failure(const std::string& why) override {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) send_async(why, r, kTagFailure);
  }

  std::optional<std::string> peer_failure() override {
    if (!failure_)
      if (auto m = try_recv(MPI_ANY_SOURCE, kTagFailure)) failure_ = std::move(m);
    return failure_;
  }

  Gathered gather_all(const std::string&, const std::string& mine, Deadline deadline) override {
    const int tag = kTagBase + seq_++;
    return rank_ == 0 ? gather_at_root(mine, tag, deadline) : gather_as_leaf(mine, tag, deadline);
  }

 private:
  Gathered gather_at_root(const std::string& mine, int tag, Deadline deadline) {
    Gathered g;
    g.records.resize(size_);
    g.records[0] = mine;
    int pending = size_ - 1;
    while (pending > 0 && !deadline.expired()) {
      bool got = false;
      for (int r = 1; r < size_; ++r) {
        if (g.records[r]) continue;
        if (auto m = try_recv(r, tag)) {
          g.records[r] = std::move(m);
          --pending;
          got = true;
        }
      }
      if (!got) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    nlohmann::json table = nlohmann::json::array();
    for (const auto& rec : g.records)
      table.push_back(rec ? nlohmann::json(*rec) : nlohmann::json(nullptr));
    auto bytes = table.dump();
    for (int r = 1; r < size_; ++r) send_async(bytes, r, tag);
    return g;
  }

  Gathered gather_as_leaf(const std::string& mine, int tag, Deadline deadline) {
    send_async(mine, 0, tag);
    auto until = Deadline::at(deadline.when() + kRootGrace);
    while (!until.expired()) {
      if (auto m = try_recv(0, tag)) {
        Gathered g;
        for (const auto& v : nlohmann::json::parse(*m))
          g.records.push_back(v.is_null() ? std::nullopt
                                          : std::optional<std::string>(v.get<std::string>()));
        return g;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // Rank 0 never answered: all we know is our own record.
    Gathered g;
    g.records.resize(size_);
    g.records[rank_] = mine;
    return g;
  }

  void send_async(const std::string& bytes, int dest, int tag) {
    reap();
    auto buf = std::make_unique<std::string>(bytes);
    MPI_Request req;
    MPI_Isend(buf->data(), static_cast<int>(buf->size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD,
              &req);
    inflight_.emplace_back(req, std::move(buf));
  }

  /// Drops the sends that completed.
  void reap() {
    std::erase_if(inflight_, [](auto& p) {
      int done = 0;
      MPI_Test(&p.first, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
  }

  int rank_, size_;
  int seq_ = 0;
  std::optional<std::string> failure_;
  std::vector<std::pair<MPI_Request, std::unique_ptr<std::string>>> inflight_;
};

}  // namespace

std::unique_ptr<Plane> make_mpi_plane(MpiSession& session) {
  return std::make_unique<MpiPlane>(session);
}

}  // namespace gpudiag
