// comm/mpi.h over a real MPI library. The collectives of collective.h are in
// mpi_collectives.cpp; the polling both share is here.
#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <exception>
#include <thread>

#include "comm/mpi.h"
#include "comm/mpi_collectives.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

void check_mpi(int rc, const CallName& what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(ExitCode::broken, what() + " failed: " + std::string(msg, len));
}

void start_pair(MPI_Request (&reqs)[2], void* in, const void* out, int count, MPI_Datatype type,
                int from, int to, int tag, const CallName& what) {
  check_mpi(MPI_Irecv(in, count, type, from, tag, MPI_COMM_WORLD, &reqs[0]), what);
  if (int rc = MPI_Isend(out, count, type, to, tag, MPI_COMM_WORLD, &reqs[1]); rc != MPI_SUCCESS) {
    reqs[1] = MPI_REQUEST_NULL;
    MPI_Cancel(&reqs[0]);
    int done = 0;
    MPI_Test(&reqs[0], &done, MPI_STATUS_IGNORE);  // cancelled, unless it already matched
    check_mpi(rc, what);
  }
}

void wait_request(MPI_Request& req, const CallName& what, Deadline deadline,
                  const AbortCheck& abort_check) {
  constexpr int kSpinPolls = 2000;
  int done = 0, polls = 0;
  while (true) {
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (abort_check)
      if (auto why = abort_check()) throw Error(ExitCode::broken, what() + " abandoned: " + *why);
    if (deadline.expired())
      throw TimeoutError(what() + " did not complete in time", "a peer is stuck or gone");
    // Non-blocking collectives progress only inside MPI calls, so test again at
    // once, yielding so oversubscribed ranks sharing a core still get to run;
    // a wait that goes on (a peer still busy, or stuck) backs off to short
    // sleeps instead of taking a whole core from the ranks doing the work.
    if (++polls < kSpinPolls)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// A receive that already matched, or a send, which Open MPI does not cancel,
// stays pending after MPI_Cancel.
void wait_pair(MPI_Request (&reqs)[2], const CallName& what, Deadline deadline,
               const AbortCheck& abort_check) {
  try {
    wait_request(reqs[0], what, deadline, abort_check);
    wait_request(reqs[1], what, deadline, abort_check);
  } catch (...) {
    for (auto& req : reqs)
      if (req != MPI_REQUEST_NULL) MPI_Cancel(&req);
    auto until = Deadline::after(std::chrono::seconds(1));
    int done = 0;
    while (!done && !until.expired()) {
      MPI_Testall(2, reqs, &done, MPI_STATUSES_IGNORE);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!done) throw PendingRequests{std::current_exception()};
    throw;
  }
}

namespace {

class MpiHostCommunicator : public Communicator {
 public:
  std::string name() const override { return "host/mpi"; }
  bool buffers_in_flight() const override { return in_flight_ || colls_.buffers_in_flight(); }
  void run(const CollCall& call, Deadline deadline) override {
    colls_.run(call, deadline, abort_check_);
  }
  void all_reduce_sum(float* data, std::size_t count, Deadline deadline) override {
    MPI_Request req;
    run_one(
        MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD, &req),
        req, [&] { return "MPI_Iallreduce of " + human_bytes(count * sizeof(float)); }, deadline);
  }
  void all_gather(float* data, std::size_t count, Deadline deadline) override {
    MPI_Request req;
    run_one(
        MPI_Iallgather(MPI_IN_PLACE, 0, MPI_FLOAT, data, static_cast<int>(count), MPI_FLOAT,
                       MPI_COMM_WORLD, &req),
        req, [] { return std::string("MPI_Iallgather"); }, deadline);
  }
  void broadcast(float* data, std::size_t count, int root, Deadline deadline) override {
    MPI_Request req;
    run_one(
        MPI_Ibcast(data, static_cast<int>(count), MPI_FLOAT, root, MPI_COMM_WORLD, &req), req,
        [] { return std::string("MPI_Ibcast"); }, deadline);
  }
  void barrier(Deadline deadline) override {
    MPI_Request req;
    run_one(
        MPI_Ibarrier(MPI_COMM_WORLD, &req), req, [] { return std::string("MPI_Ibarrier"); },
        deadline);
  }
  void send_recv(int peer, const float* out, float* in, std::size_t count,
                 Deadline deadline) override {
    constexpr int kLinkTag = 7301;
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    try {
      start_pair(reqs, in, out, static_cast<int>(count), MPI_FLOAT, peer, peer, kLinkTag,
                 [&] { return "MPI_Isend/MPI_Irecv with rank " + std::to_string(peer); });
    } catch (...) {
      if (reqs[0] != MPI_REQUEST_NULL) in_flight_ = true;  // the receive may still land in `in`
      throw;
    }
    try {
      wait_pair(reqs,
                "MPI_Isend/MPI_Irecv of " + human_bytes(count * sizeof(float)) + " with rank " +
                    std::to_string(peer),
                deadline, abort_check_);
    } catch (const PendingRequests& p) {
      in_flight_ = true;
      std::rethrow_exception(p.error);
    }
  }

 private:
  /// Checks that the collective `rc` came from started, and waits for it;
  /// `what` names it, built only for a message. One that fails or times out
  /// cannot be cancelled: MPI may still write its buffer (in_flight_).
  void run_one(int rc, MPI_Request& req, const CallName& what, Deadline deadline) {
    check_mpi(rc, what);
    try {
      wait_request(req, what, deadline, abort_check_);
    } catch (...) {
      in_flight_ = true;
      throw;
    }
  }

  MpiCollectives colls_;  ///< after MPI_Init: it creates its user ops
  bool in_flight_ = false;
};

}  // namespace

bool built_with_mpi() { return true; }

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, len);
  auto nl = s.find_first_of("\n,");
  return std::string(trim(s.substr(0, nl)));
}

MpiSession::MpiSession() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    throw Error(ExitCode::broken, "MPI_Init_thread failed",
                "check that mpirun/srun --mpi=pmix started this process");
  // Errors come back as codes so they can be reported instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  if (!abandoned_) MPI_Finalize();
}

bool MpiSession::barrier_within(Deadline deadline) {
  MPI_Request req;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) return false;
  try {
    wait_request(req, "MPI_Ibarrier", deadline, {});
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::unique_ptr<Communicator> make_mpi_host_communicator(MpiSession&) {
  return std::make_unique<MpiHostCommunicator>();
}

}  // namespace gpudiag
