// The host/mpi collectives under a real mpirun (ctest label "mpi"; also
// `mpirun -np N gpudiag_mpi_coll_test` by hand). Every rank runs every Coll
// for every DType and RedOp, out of place and in place with nccl-tests'
// offsets, at a few counts and roots, and compares its buffers byte for byte
// with a reference built from every rank's input (each rank can generate any
// rank's) with reduce_into(). A count above the slice limit is also run with
// the limit lowered to 5 elements, which takes the path of counts above
// INT_MAX. Inputs are chosen so that no sum or product rounds (small integers,
// powers of two), so the order MPI reduces in does not matter.
//
// `--large COLL` instead runs one in-place uint8 sum of INT_MAX + 7 elements
// (more than 2 GiB a rank) and checks elements around the slice boundary.
//
// Last, a call past its deadline must throw TimeoutError naming the call and
// the rank, and leave buffers_in_flight() true.
//
// Exits 0 when every rank matched; otherwise 1, each rank printing its first
// failing cases ("all_reduce half prod in place, count 13, on rank 1 of 3:
// element 4 is 2, expected 4").
#include "comm/mpi_collectives.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "comm/host_reduce.h"
#include "comm/mpi.h"
#include "util/error.h"

namespace gpudiag {
namespace {

using Bytes = std::vector<unsigned char>;

struct Case {
  Coll coll;
  DType type;
  RedOp op;
  bool in_place;
  std::size_t count;
  int root;
  std::size_t max_count;  ///< MpiCollectives' slice limit
};

struct World {
  int rank, size;
};

std::string describe(const Case& k, World w) {
  std::string s = std::string(coll_name(k.coll)) + " " + dtype_name(k.type);
  if (coll_reduces(k.coll)) s += std::string(" ") + redop_name(k.op);
  s += k.in_place ? " in place" : " out of place";
  s += ", count " + std::to_string(k.count);
  if (coll_has_root(k.coll)) s += ", root " + std::to_string(k.root);
  if (k.max_count != MpiCollectives::kMaxCount)
    s += ", in slices of " + std::to_string(k.max_count);
  return s + ", on rank " + std::to_string(w.rank) + " of " + std::to_string(w.size);
}

/// Element `i` of rank `rank`'s send buffer.
void put(void* buf, std::size_t at, DType t, RedOp op, int rank, std::size_t i) {
  std::uint64_t h = (static_cast<std::uint64_t>(rank) + 1) * 0x9e3779b97f4a7c15ull + i;
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  auto* p = static_cast<unsigned char*>(buf) + at * dtype_size(t);
  auto store = [&](auto v) { std::memcpy(p, &v, sizeof v); };
  // Integers span their type, so sums and products wrap; negatives too.
  const auto x = static_cast<std::int64_t>(h % 251) - 125;
  float f = static_cast<float>(static_cast<int>(h % 17) - 8);
  if (op == RedOp::prod) f = (h & 8 ? -1.0f : 1.0f) * static_cast<float>(1 << (h % 3)) / 2;
  switch (t) {
    case DType::int8:
      return store(static_cast<std::int8_t>(x));
    case DType::uint8:
      return store(static_cast<std::uint8_t>(x));
    case DType::int32:
      return store(static_cast<std::int32_t>(x * 40'000'000));
    case DType::uint32:
      return store(static_cast<std::uint32_t>(x * 40'000'000));
    case DType::int64:
      return store(static_cast<std::int64_t>(x * (std::int64_t{1} << 56)));
    case DType::uint64:
      return store(static_cast<std::uint64_t>(x * (std::int64_t{1} << 56)));
    case DType::half:
      return store(float_to_half(f));
    case DType::float32:
      return store(f);
    case DType::float64:
      return store(static_cast<double>(f));
    case DType::bfloat16:
      return store(float_to_bf16(f));
  }
}

Bytes input(const Case& k, int rank, std::size_t elems) {
  Bytes b(elems * dtype_size(k.type));
  for (std::size_t i = 0; i < elems; ++i) put(b.data(), i, k.type, k.op, rank, i);
  return b;
}

/// Elements in this rank's send and recv buffers (collective.h's table).
std::pair<std::size_t, std::size_t> sizes(Coll c, std::size_t count, std::size_t n) {
  switch (c) {
    case Coll::all_gather:
      return {count, n * count};
    case Coll::reduce_scatter:
      return {n * count, count};
    case Coll::alltoall:
      return {n * count, n * count};
    default:
      return {count, count};
  }
}

/// What recv should hold on `w.rank`; nullopt where the call leaves it alone.
std::optional<Bytes> reference(const Case& k, World w) {
  const std::size_t es = dtype_size(k.type), c = k.count, n = w.size;
  const std::size_t send_elems = sizes(k.coll, c, n).first;
  std::vector<Bytes> in;
  for (int p = 0; p < w.size; ++p) in.push_back(input(k, p, send_elems));
  auto block = [&](int p, std::size_t b) {
    return Bytes(in[p].begin() + b * c * es, in[p].begin() + (b + 1) * c * es);
  };
  auto reduced = [&](std::size_t b) {
    Bytes acc = block(0, b);
    for (int p = 1; p < w.size; ++p) reduce_into(acc.data(), block(p, b).data(), c, k.type, k.op);
    if (k.op == RedOp::avg) finish_avg(acc.data(), c, k.type, w.size);
    return acc;
  };
  Bytes out;
  switch (k.coll) {
    case Coll::all_reduce:
      return reduced(0);
    case Coll::reduce:
      if (w.rank != k.root) return std::nullopt;
      return reduced(0);
    case Coll::reduce_scatter:
      return reduced(w.rank);
    case Coll::broadcast:
      return in[k.root];
    case Coll::sendrecv:
      return in[(w.rank - 1 + w.size) % w.size];
    case Coll::all_gather:
      for (int p = 0; p < w.size; ++p) out.insert(out.end(), in[p].begin(), in[p].end());
      return out;
    case Coll::alltoall:
      for (int p = 0; p < w.size; ++p) {
        Bytes b = block(p, w.rank);
        out.insert(out.end(), b.begin(), b.end());
      }
      return out;
  }
  return std::nullopt;
}

/// "" when `got` == `want`, else the first differing element.
std::string compare(const char* what, const Bytes& got, const Bytes& want, DType t) {
  if (got == want) return {};
  const std::size_t es = dtype_size(t);
  for (std::size_t i = 0; i * es < got.size(); ++i)
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0)
      return std::string(what) + " element " + std::to_string(i) + " is " +
             std::to_string(element_as_double(got.data(), i, t)) + ", expected " +
             std::to_string(element_as_double(want.data(), i, t));
  return std::string(what) + " differs";
}

constexpr unsigned char kUntouched = 0xa5;

/// Runs one case; "" when every byte is as expected.
std::string run_case(const Case& k, World w, MpiCollectives& colls) {
  const std::size_t es = dtype_size(k.type), n = w.size, r = w.rank;
  const auto [send_elems, recv_elems] = sizes(k.coll, k.count, n);
  const Bytes mine = input(k, w.rank, send_elems);
  const auto want = reference(k, w);
  const auto deadline = Deadline::after(std::chrono::seconds(60));

  CollCall call{k.coll, k.type, k.op, k.root, nullptr, nullptr, k.count};
  if (!k.in_place) {
    Bytes send = mine, recv(recv_elems * es, kUntouched);
    call.send = send.data();
    call.recv = recv.data();
    colls.run(call, deadline, {}, k.max_count);
    std::string err = compare("send", send, mine, k.type);
    if (err.empty())
      err = compare("recv", recv, want ? *want : Bytes(recv.size(), kUntouched), k.type);
    return err;
  }
  // nccl-tests' in-place offsets: one buffer holding both.
  Bytes buf = mine;
  std::size_t recv_at = 0;
  if (k.coll == Coll::all_gather) {
    buf.assign(recv_elems * es, kUntouched);
    std::memcpy(buf.data() + r * k.count * es, mine.data(), mine.size());
    call.send = buf.data() + r * k.count * es;
    call.recv = buf.data();
  } else {
    if (k.coll == Coll::reduce_scatter) recv_at = r * k.count * es;
    call.send = buf.data();
    call.recv = buf.data() + recv_at;
  }
  Bytes expect = buf;
  if (want) std::memcpy(expect.data() + recv_at, want->data(), want->size());
  colls.run(call, deadline, {}, k.max_count);
  return compare("buffer", buf, expect, k.type);
}

std::vector<Case> all_cases(World w) {
  std::vector<Case> cases;
  for (Coll coll : kAllColls)
    for (DType type : kAllDTypes)
      for (RedOp op : kAllRedOps) {
        if (!coll_reduces(coll) && op != RedOp::sum) continue;
        std::vector<int> roots = {0};
        if (coll_has_root(coll) && w.size > 1) roots.push_back(w.size - 1);
        for (int root : roots) {
          for (bool in_place : {false, true}) {
            for (std::size_t count : {0, 1, 13, 1000})
              cases.push_back({coll, type, op, in_place, count, root, MpiCollectives::kMaxCount});
            cases.push_back({coll, type, op, in_place, 13, root, 5});
          }
        }
      }
  return cases;
}

/// One in-place uint8 sum of INT_MAX + 7 elements; checks elements around
/// each slice boundary and at both ends.
std::string run_large(Coll coll, World w, MpiCollectives& colls) {
  const std::size_t count = MpiCollectives::kMaxCount + 7, n = w.size, r = w.rank;
  const auto [send_elems, recv_elems] = sizes(coll, count, n);
  Case k{coll, DType::uint8, RedOp::sum, true, count, 0, MpiCollectives::kMaxCount};
  std::vector<std::uint8_t> buf(std::max(send_elems, recv_elems));
  const std::size_t own = coll == Coll::all_gather ? r * count : 0;
  for (std::size_t i = 0; i < send_elems; ++i) put(buf.data(), own + i, k.type, k.op, w.rank, i);
  CollCall call{coll, k.type, k.op, 0, buf.data() + own, buf.data(), count};
  if (coll == Coll::reduce_scatter) call.recv = buf.data() + r * count;
  colls.run(call, Deadline::after(std::chrono::minutes(10)), {});
  const std::size_t probes[] = {0, 1, count - 9, count - 8, count - 7, count - 6, count - 1};
  for (std::size_t b = 0; b < recv_elems / count; ++b)
    for (std::size_t i : probes) {
      // Rank p's send element j that lands at recv element b * count + i.
      auto expect_at = [&](int p) {
        std::uint8_t v;
        std::size_t j = i;
        if (coll == Coll::all_gather) p = static_cast<int>(b);
        if (coll == Coll::alltoall) p = static_cast<int>(b), j = r * count + i;
        if (coll == Coll::reduce_scatter) j = r * count + i;
        if (coll == Coll::sendrecv) p = static_cast<int>((r + n - 1) % n);
        if (coll == Coll::broadcast) p = 0;
        put(&v, 0, k.type, k.op, p, j);
        return v;
      };
      std::uint8_t want = expect_at(0);
      if (coll_reduces(coll))
        for (int p = 1; p < w.size; ++p) want = static_cast<std::uint8_t>(want + expect_at(p));
      const std::uint8_t got = static_cast<const std::uint8_t*>(call.recv)[b * count + i];
      if (got != want)
        return describe(k, w) + ": element " + std::to_string(b * count + i) + " is " +
               std::to_string(got) + ", expected " + std::to_string(want);
    }
  return {};
}

/// A call past its deadline: a TimeoutError naming the call and the rank, and
/// the buffers left to MPI. Every rank starts the same call, so MPI still
/// completes it (the barrier after it progresses it); `keep` outlives MPI.
std::string run_timeout(World w, Communicator& comm, std::vector<float>& keep) {
  keep.assign(std::size_t{16} << 20, 1.0f);  // 64 MiB: not done at the first test
  const CollCall call{Coll::all_reduce, DType::float32, RedOp::sum, 0,
                      keep.data(),      keep.data(),    keep.size()};
  try {
    comm.run(call, Deadline::after(std::chrono::milliseconds(0)));
  } catch (const TimeoutError& e) {
    const std::string msg = e.what(), rank = "on rank " + std::to_string(w.rank);
    if (msg.find("MPI_Iallreduce for AllReduce") == std::string::npos ||
        msg.find(rank) == std::string::npos)
      return "timeout message does not name the call and " + rank + ": " + msg;
    if (!comm.buffers_in_flight()) return "buffers_in_flight() is false after a timeout";
    return {};
  }
  return "no TimeoutError from a call past its deadline";
}

int run_all(int argc, char** argv) {
  std::vector<float> keep;  // declared before the session: MPI may write it until finalize
  MpiSession session;
  const World w{session.rank(), session.size()};
  auto comm = make_mpi_host_communicator(session);
  MpiCollectives colls;
  std::vector<std::string> failures;
  std::size_t ran = 0;

  if (argc == 3 && std::string(argv[1]) == "--large") {
    const auto coll = parse_coll(argv[2]);
    if (!coll) throw UsageError(std::string("unknown collective ") + argv[2]);
    if (auto err = run_large(*coll, w, colls); !err.empty()) failures.push_back(err);
    ++ran;
  } else {
    for (const Case& k : all_cases(w)) {
      if (auto err = run_case(k, w, colls); !err.empty())
        failures.push_back(describe(k, w) + ": " + err);
      ++ran;
    }
    // The communicator's own entry point, once per collective.
    for (Coll coll : kAllColls) {
      Case k{coll, DType::float32, RedOp::sum, false, 100, 0, MpiCollectives::kMaxCount};
      const auto [send_elems, recv_elems] = sizes(coll, k.count, w.size);
      Bytes send = input(k, w.rank, send_elems), recv(recv_elems * 4, kUntouched);
      comm->run({coll, k.type, k.op, 0, send.data(), recv.data(), k.count},
                Deadline::after(std::chrono::seconds(60)));
      if (auto want = reference(k, w); want && recv != *want)
        failures.push_back(describe(k, w) + " through Communicator::run: recv differs");
      ++ran;
    }
    if (w.size > 1) {  // alone, MPI completes the call at once
      if (auto err = run_timeout(w, *comm, keep); !err.empty())
        failures.push_back("past its deadline, on rank " + std::to_string(w.rank) + ": " + err);
      comm->barrier(Deadline::after(std::chrono::seconds(60)));
      ++ran;
    }
  }

  for (std::size_t i = 0; i < failures.size() && i < 20; ++i)
    std::fprintf(stderr, "FAIL %s\n", failures[i].c_str());
  float bad = failures.empty() ? 0.0f : 1.0f;
  comm->all_reduce_sum(&bad, 1, Deadline::after(std::chrono::seconds(60)));
  if (w.rank == 0)
    std::printf(
        "%zu cases on %d ranks: %s\n", ran, w.size,
        bad == 0 ? "all match" : (std::to_string(static_cast<int>(bad)) + " ranks failed").c_str());
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpudiag

int main(int argc, char** argv) {
  try {
    return gpudiag::run_all(argc, argv);
  } catch (const gpudiag::Error& e) {
    std::fprintf(stderr, "gpudiag_mpi_coll_test: %s\n", e.one_line().c_str());
    // The other ranks may be waiting in a collective this rank left.
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
}
