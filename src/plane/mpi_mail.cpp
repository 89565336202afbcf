// See mpi_mail.h.
#include "plane/mpi_mail.h"

#include <mpi.h>

#include <algorithm>

#include "store/store_limits.h"

namespace gpudiag {

struct MpiMail::Sent {
  MPI_Request req;
  std::unique_ptr<std::string> buf;
};

MpiMail::MpiMail() = default;

MpiMail::~MpiMail() {
  reap();
  for (auto& s : inflight_) {
    MPI_Request_free(&s->req);
    s->buf.release();
  }
}

void MpiMail::send(const std::string& bytes, int dest, int tag) {
  reap();
  bytes_ += bytes.size();
  auto s = std::make_unique<Sent>();
  s->buf = std::make_unique<std::string>(bytes);
  MPI_Isend(s->buf->data(), static_cast<int>(s->buf->size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD,
            &s->req);
  inflight_.push_back(std::move(s));
}

std::optional<std::string> MpiMail::try_recv(int source, int tag, bool count, int* from) {
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return std::nullopt;
  int len = 0;
  MPI_Get_count(&st, MPI_CHAR, &len);
  std::string buf(static_cast<std::size_t>(len), '\0');
  MPI_Recv(buf.data(), len, MPI_CHAR, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (count) bytes_ += buf.size();
  if (from) *from = st.MPI_SOURCE;
  return buf;
}

/// Drops the sends that completed.
void MpiMail::reap() {
  std::erase_if(inflight_, [](auto& s) {
    int done = 0;
    MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

std::pair<std::vector<int>, std::string> split_need(const std::string& m, int size) {
  auto nl = m.find('\n');
  if (nl == std::string::npos) return {{}, m};
  std::vector<int> need;
  std::size_t at = 0;
  while (at < nl && need.size() < 4096) {
    auto comma = std::min(m.find(',', at), nl);
    auto r = storelimits::parse_bounded(m.substr(at, comma - at), 0, size - 1);
    if (r) need.push_back(static_cast<int>(*r));
    at = comma + 1;
  }
  return {need, m.substr(nl + 1)};
}

std::string need_line(const std::vector<int>& need) {
  std::string s;
  for (int r : need) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

}  // namespace gpudiag
