// collective_checks.h: each collective's result downloaded from the
// workspace (host or device memory) and compared element by element.
#include "checks/collective_checks.h"

#include <vector>

#include "checks/verify.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

float* CollectiveChecks::all_reduce(std::uint64_t bytes) const {
  const ExpectedSum expected(size);
  const std::size_t n = bytes / sizeof(float);
  std::vector<float> host(n);
  fill_contribution(host.data(), n, rank);
  float* buf = workspace.allocate(n);
  workspace.upload(buf, host.data(), n);
  comm.all_reduce_sum(buf, n, Deadline::after_seconds(timeout_s));
  workspace.download(host.data(), buf, n);
  if (auto m = verify_sum(host.data(), n, expected))
    throw Error(ExitCode::broken,
                "all-reduce of " + human_bytes(bytes) + " returned wrong values at " +
                    std::to_string(m->count) + " of " + std::to_string(n) +
                    " elements (first: element " + std::to_string(m->first_index) + " = " +
                    std::to_string(m->got) + ", expected " + std::to_string(m->expected) + ")" +
                    (m->explanation.empty() ? "" : ": " + m->explanation),
                "run again with --nccl-debug info; suspect the transport between the ranks");
  return buf;
}

void CollectiveChecks::all_gather_and_broadcast(std::uint64_t bytes) const {
  const int n = size;
  const std::size_t per = bytes / sizeof(float);
  std::vector<float> host(per * n, -1.0f);
  fill_contribution(host.data() + rank * per, per, rank);
  float* buf = workspace.allocate(per * n);
  workspace.upload(buf, host.data(), per * n);
  comm.all_gather(buf, per, Deadline::after_seconds(timeout_s));
  workspace.download(host.data(), buf, per * n);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < per; ++i)
      if (host[r * per + i] != contribution(r, i))
        throw Error(ExitCode::broken,
                    "all-gather returned wrong values in the slot of rank " + std::to_string(r) +
                        " (element " + std::to_string(i) + ")",
                    "suspect the transport between this rank and rank " + std::to_string(r));
  const int root = n - 1;
  const std::size_t count = bytes * 4 / sizeof(float);
  std::vector<float> b(count, 0.0f);
  if (rank == root) fill_contribution(b.data(), count, root);
  float* bbuf = workspace.allocate(count);
  workspace.upload(bbuf, b.data(), count);
  comm.broadcast(bbuf, count, root, Deadline::after_seconds(timeout_s));
  workspace.download(b.data(), bbuf, count);
  for (std::size_t i = 0; i < count; ++i)
    if (b[i] != contribution(root, i))
      throw Error(ExitCode::broken,
                  "broadcast from rank " + std::to_string(root) +
                      " returned wrong values at element " + std::to_string(i),
                  "suspect the transport between this rank and rank " + std::to_string(root));
  workspace.release(buf);
  workspace.release(bbuf);
}

}  // namespace gpudiag
