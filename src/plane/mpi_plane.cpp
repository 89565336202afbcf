// MpiPlane: checkpoints over MPI point-to-point, gathered at rank 0.
//
// Collectives cannot time out and cannot say who is missing, so a checkpoint
// is: every rank sends its record to rank 0 (tag = checkpoint sequence
// number), prefixed by the ranks whose records it needs ("0,5\n<record>");
// rank 0, the judge, receives with MPI_Iprobe until all arrived or the
// deadline passed, reviews the table, then sends each rank a digest: the
// missing ranks, the review, and the records that rank asked for (JSON), the
// missing ranks included so a late rank learns it was late. A digest does not
// grow with the job, so a checkpoint moves O(n) bytes. Ranks other than 0 wait
// for it a little past the deadline, giving rank 0 time to decide; when it
// never comes they know only their own record and report everyone missing.
// Messages go through MpiMail (mpi_mail.h): sends never block.
#include <mpi.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>

#include "comm/mpi.h"
#include "plane/mpi_mail.h"
#include "plane/plane.h"

namespace gpudiag {

namespace {

constexpr int kTagFailure = 6999;
constexpr int kTagBase = 7000;
constexpr auto kRootGrace = std::chrono::seconds(5);

class MpiPlane : public Plane {
 public:
  explicit MpiPlane(MpiSession& s) : rank_(s.rank()), size_(s.size()) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return "MPI"; }

  void announce_failure(const std::string& why) override {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) mail_.send(why, r, kTagFailure);
  }

  std::optional<std::string> peer_failure() override {
    if (!failure_)
      if (auto m = mail_.try_recv(MPI_ANY_SOURCE, kTagFailure, false)) failure_ = std::move(m);
    return failure_;
  }

  Gathered gather_all(const std::string&, const std::string& mine, Deadline deadline,
                      const std::vector<int>& wait_for, const std::vector<int>& need,
                      const Review& review) override {
    const int tag = kTagBase + seq_++;
    return rank_ == 0 ? gather_at_root(mine, tag, deadline, wait_for, review)
                      : gather_as_leaf(mine, tag, deadline, need);
  }

  std::uint64_t bytes_moved() const override { return mail_.bytes(); }

 private:
  Gathered gather_at_root(const std::string& mine, int tag, Deadline deadline,
                          const std::vector<int>& wait_for, const Review& review) {
    Gathered g;
    g.records.resize(size_);
    g.notes.resize(size_);
    g.records[0] = mine;
    std::vector<std::vector<int>> needs(size_);
    std::vector<bool> needed(size_, wait_for.empty());
    for (int r : wait_for) needed[r] = true;
    auto pending = [&] {
      for (int r = 1; r < size_; ++r)
        if (needed[r] && !g.records[r]) return true;
      return false;
    };
    while (pending() && !deadline.expired()) {
      bool got = false;
      for (int r = 1; r < size_; ++r) {
        if (g.records[r]) continue;
        if (auto m = mail_.try_recv(r, tag)) {
          auto [need, record] = split_need(*m, size_);
          g.records[r] = std::move(record);
          needs[r] = std::move(need);
          got = true;
        }
      }
      if (!got) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    g.find_missing();
    g.judged = true;
    if (review) g.review = review(g);
    nlohmann::json digest;
    digest["missing"] = g.missing;
    digest["review"] = g.review;
    for (int r = 1; r < size_; ++r) {
      nlohmann::json records = nlohmann::json::object();
      for (int n : needs[r])
        if (g.records[n]) records[std::to_string(n)] = *g.records[n];
      digest["records"] = std::move(records);
      mail_.send(digest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), r, tag);
    }
    return g;
  }

  Gathered gather_as_leaf(const std::string& mine, int tag, Deadline deadline,
                          const std::vector<int>& need) {
    mail_.send(need_line(need) + "\n" + mine, 0, tag);
    Gathered g;
    g.records.resize(size_);
    g.notes.resize(size_);
    g.records[rank_] = mine;
    auto until = Deadline::at(deadline.when() + kRootGrace);
    while (!until.expired()) {
      if (auto m = mail_.try_recv(0, tag)) {
        auto j = nlohmann::json::parse(*m);
        for (int r : j.at("missing").get<std::vector<int>>())
          if (r >= 0 && r < size_ && r != rank_) g.missing.push_back(r);
        for (const auto& [k, v] : j.at("records").items()) {
          const int r = std::atoi(k.c_str());
          if (r >= 0 && r < size_ && r != rank_) g.records[r] = v.get<std::string>();
        }
        g.review = j.at("review").get<std::string>();
        g.judged = true;
        return g;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // Rank 0 never answered: all we know is our own record.
    g.find_missing();
    return g;
  }

  int rank_, size_;
  int seq_ = 0;
  std::optional<std::string> failure_;
  MpiMail mail_;  ///< checkpoint bytes sent and received
};

}  // namespace

std::unique_ptr<Plane> make_mpi_plane(MpiSession& session) {
  return std::make_unique<MpiPlane>(session);
}

}  // namespace gpudiag
