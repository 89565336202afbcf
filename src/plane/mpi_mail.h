// Point-to-point messages for the MPI control planes (mpi_plane.cpp,
// mpi_tree_plane.cpp): sends that never block (a peer that is stuck must not
// hold the sender), receives polled with MPI_Iprobe against a deadline, and
// the bytes both ways counted for the planes' bytes_moved(). Sends still in
// flight when the mail goes away are freed, never waited on; their buffers
// are left allocated, since MPI may still read them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

class MpiMail {
 public:
  MpiMail();
  ~MpiMail();
  MpiMail(const MpiMail&) = delete;
  MpiMail& operator=(const MpiMail&) = delete;

  void send(const std::string& bytes, int dest, int tag);
  /// One message from `source` (or MPI_ANY_SOURCE) with `tag`, if one is
  /// waiting; counted unless `count` is false. `from`, when given, gets the
  /// sender's rank.
  std::optional<std::string> try_recv(int source, int tag, bool count = true, int* from = nullptr);
  std::uint64_t bytes() const { return bytes_; }

 private:
  void reap();
  std::uint64_t bytes_ = 0;
  struct Sent;
  std::vector<std::unique_ptr<Sent>> inflight_;
};

/// A rank's message to its judge, "0,5\n<record>": the ranks whose records it
/// needs (at most 4096, each within [0, size)), then its record.
std::pair<std::vector<int>, std::string> split_need(const std::string& m, int size);

/// The need line of such a message: "0,5".
std::string need_line(const std::vector<int>& need);

}  // namespace gpudiag
