// host/tcp's run() for every collective, type and reduction, over real
// loopback sockets with ranks as threads, checked bit for bit against a host
// reference built with reduce_into(). Values are chosen so every order of
// reduction gives the same bits (small integers, powers of two), so the
// reference's order need not match the ring's.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <sstream>

#include "comm/host_reduce.h"
#include "comm/tcp_ring.h"
#include "comm/tcp_ring_testing.h"
#include "util/error.h"

namespace gpudiag {
namespace {

using testing_ring::on_ring;

using Bytes = std::vector<char>;

void put(char* buf, std::size_t i, DType t, long v, double f) {
  auto store = [&]<class T>(T x) { std::memcpy(buf + i * sizeof(T), &x, sizeof(T)); };
  switch (t) {
    case DType::int8:
      return store(static_cast<std::int8_t>(v));
    case DType::uint8:
      return store(static_cast<std::uint8_t>(v));
    case DType::int32:
      return store(static_cast<std::int32_t>(v));
    case DType::uint32:
      return store(static_cast<std::uint32_t>(v));
    case DType::int64:
      return store(static_cast<std::int64_t>(v));
    case DType::uint64:
      return store(static_cast<std::uint64_t>(v));
    case DType::half:
      return store(float_to_half(static_cast<float>(f)));
    case DType::float32:
      return store(static_cast<float>(f));
    case DType::float64:
      return store(f);
    case DType::bfloat16:
      return store(float_to_bf16(static_cast<float>(f)));
  }
}

/// Rank r's element i: integers wrap in sums and products (any order gives
/// the same wrapped bits); floats stay small integers or powers of two.
Bytes contribution(DType t, RedOp op, int r, std::size_t count) {
  Bytes b(count * dtype_size(t));
  static const double pow2[] = {1, -2, 0.5, -1, 2};
  for (std::size_t i = 0; i < count; ++i) {
    const long k = static_cast<long>((r * 37 + i * 11) % 120);
    const double f = static_cast<double>(static_cast<long>((r * 5 + i * 3) % 17) - 8);
    if (op == RedOp::prod)
      put(b.data(), i, t, static_cast<long>((r + i) % 3 + 1), pow2[(r + i) % 5]);
    else
      put(b.data(), i, t, k, f);
  }
  return b;
}

/// The reduction of `parts` (in rank order) as one rank computes it.
Bytes reference(const std::vector<Bytes>& parts, DType t, RedOp op) {
  Bytes out = parts[0];
  for (std::size_t r = 1; r < parts.size(); ++r)
    reduce_into(out.data(), parts[r].data(), out.size() / dtype_size(t), t, op);
  if (op == RedOp::avg)
    finish_avg(out.data(), out.size() / dtype_size(t), t, static_cast<int>(parts.size()));
  return out;
}

Bytes slice(const Bytes& b, std::size_t at, std::size_t len) {
  return Bytes(b.begin() + at, b.begin() + at + len);
}

struct Case {
  CollCall call;
  bool in_place = false;
  std::vector<Bytes> send, recv;  // per rank; in place, recv is the one buffer
  std::vector<Bytes> expect;      // per rank: what recv (or the buffer) must hold

  std::string name() const {
    std::ostringstream s;
    s << coll_name(call.coll) << " " << dtype_name(call.type) << " " << redop_name(call.op)
      << " root " << call.root << " count " << call.count << (in_place ? " in place" : "");
    return s.str();
  }
};

/// Buffers and expected results for one call on n ranks, in nccl-tests' layout.
Case make_case(int n, Coll coll, DType t, RedOp op, int root, bool in_place, std::size_t count) {
  Case c;
  c.call = {coll, t, op, root, nullptr, nullptr, count};
  c.in_place = in_place;
  const std::size_t e = dtype_size(t), b = count * e;
  const bool wide_send = coll == Coll::reduce_scatter || coll == Coll::alltoall;
  const bool wide_recv = coll == Coll::all_gather || coll == Coll::alltoall;
  for (int r = 0; r < n; ++r) {
    c.send.push_back(contribution(t, op, r, wide_send ? count * n : count));
    c.recv.push_back(Bytes(wide_recv ? b * n : b, '\x5a'));
  }
  for (int r = 0; r < n; ++r) {
    Bytes want = c.recv[r];  // untouched unless set below
    switch (coll) {
      case Coll::all_reduce:
        want = reference(c.send, t, op);
        break;
      case Coll::reduce:
        if (r == root)
          want = reference(c.send, t, op);
        else if (in_place)
          want = c.send[r];
        break;
      case Coll::reduce_scatter: {
        std::vector<Bytes> parts;
        for (int p = 0; p < n; ++p) parts.push_back(slice(c.send[p], r * b, b));
        want = reference(parts, t, op);
        break;
      }
      case Coll::all_gather:
        for (int p = 0; p < n; ++p) std::memcpy(want.data() + p * b, c.send[p].data(), b);
        break;
      case Coll::broadcast:
        want = c.send[root];
        break;
      case Coll::alltoall:
        for (int p = 0; p < n; ++p) std::memcpy(want.data() + p * b, c.send[p].data() + r * b, b);
        break;
      case Coll::sendrecv:
        want = c.send[(r + n - 1) % n];
        break;
    }
    c.expect.push_back(want);
  }
  if (in_place)  // the one buffer holds the send data where nccl-tests puts it
    for (int r = 0; r < n; ++r) {
      if (coll == Coll::all_gather)
        std::memcpy(c.recv[r].data() + r * b, c.send[r].data(), b);
      else
        c.recv[r] = c.send[r];
    }
  return c;
}

CollCall call_for(Case& c, int r) {
  CollCall call = c.call;
  const std::size_t b = call.count * dtype_size(call.type);
  char* buf = c.recv[r].data();
  if (!c.in_place) {
    call.send = c.send[r].data(), call.recv = buf;
  } else if (call.coll == Coll::all_gather) {
    call.send = buf + r * b, call.recv = buf;
  } else if (call.coll == Coll::reduce_scatter) {
    call.send = buf, call.recv = buf + r * b;
  } else {
    call.send = call.recv = buf;
  }
  return call;
}

/// What rank r's call left where the result belongs (reduce_scatter in place:
/// block r of the buffer).
Bytes result_of(Case& c, int r) {
  if (c.in_place && c.call.coll == Coll::reduce_scatter) {
    const std::size_t b = c.call.count * dtype_size(c.call.type);
    return slice(c.recv[r], r * b, b);
  }
  return c.recv[r];
}

void run_and_check(int n, std::vector<Case>& cases) {
  on_ring(n, [&](Communicator& comm, int r) {
    for (auto& c : cases) comm.run(call_for(c, r), Deadline::after(std::chrono::seconds(60)));
  });
  for (auto& c : cases)
    for (int r = 0; r < n; ++r) {
      const Bytes got = result_of(c, r);
      ASSERT_EQ(got.size(), c.expect[r].size()) << c.name();
      if (got == c.expect[r]) continue;
      std::size_t i = 0;
      const std::size_t e = dtype_size(c.call.type);
      while (std::memcmp(got.data() + i * e, c.expect[r].data() + i * e, e) == 0) ++i;
      ADD_FAILURE() << c.name() << " on " << n << " ranks: rank " << r << " element " << i << " is "
                    << element_as_double(got.data(), i, c.call.type) << ", expected "
                    << element_as_double(c.expect[r].data(), i, c.call.type);
    }
}

class TcpCollectives : public ::testing::TestWithParam<int> {};

// Every collective, the listed types, every reduction, in and out of place;
// 37 elements divide by none of the world sizes, 1 is fewer than the ranks.
TEST_P(TcpCollectives, EveryCollTypeAndOpIsExact) {
  const int n = GetParam();
  const DType types[] = {DType::int8, DType::uint8,    DType::int32,   DType::int64,
                         DType::half, DType::bfloat16, DType::float32, DType::float64};
  std::vector<Case> cases;
  for (std::size_t count : {std::size_t{37}, std::size_t{1}})
    for (Coll coll : kAllColls)
      for (DType t : types)
        for (RedOp op : kAllRedOps) {
          if (!coll_reduces(coll) && op != RedOp::sum) continue;
          for (int root = 0; root < (coll_has_root(coll) ? n : 1); ++root)
            for (bool in_place : {false, true})
              cases.push_back(make_case(n, coll, t, op, root, in_place, count));
        }
  run_and_check(n, cases);
}

// Larger buffers: many recv() calls per step, elements split across them.
TEST_P(TcpCollectives, LargeBuffersStreamExactly) {
  const int n = GetParam();
  std::vector<Case> cases;
  for (Coll coll : kAllColls)
    for (DType t : {DType::half, DType::float64})
      for (RedOp op : {RedOp::sum, RedOp::avg})
        for (bool in_place : {false, true})
          if (coll_reduces(coll) || op == RedOp::sum)
            cases.push_back(make_case(n, coll, t, op, n - 1, in_place, 100003));
  run_and_check(n, cases);
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpCollectives, ::testing::Values(2, 3, 4, 5));

// Partial sums reuse their scratch slots: reduce forwards 1 MiB chunks, a
// reduce-scatter of 7 ranks has more steps than slots; an all-reduce past
// the halving threshold takes the ring in a power-of-two world.
TEST(TcpCollectivesScratch, SlotsAreReusedSafely) {
  std::vector<Case> cases;
  cases.push_back(make_case(4, Coll::reduce, DType::float32, RedOp::avg, 2, false, 3'000'001));
  cases.push_back(make_case(4, Coll::reduce, DType::int32, RedOp::max, 0, true, 2'500'000));
  cases.push_back(make_case(4, Coll::all_reduce, DType::int64, RedOp::prod, 0, true, 2'300'001));
  run_and_check(4, cases);
  std::vector<Case> seven;
  seven.push_back(make_case(7, Coll::reduce_scatter, DType::int32, RedOp::sum, 0, false, 10007));
  seven.push_back(make_case(7, Coll::reduce_scatter, DType::bfloat16, RedOp::avg, 0, true, 999));
  seven.push_back(make_case(7, Coll::reduce, DType::float64, RedOp::min, 3, false, 400'000));
  run_and_check(7, seven);
}

// In place, an alltoall's or sendrecv's outgoing block is where the incoming
// one lands; with blocks larger than the sockets' buffers the two overlap in
// time. (Symmetric peers on loopback send ahead of what they receive, so an
// overwrite is possible here rather than certain.)
TEST(TcpCollectivesStaging, InPlaceBlocksLargerThanSocketBuffers) {
  std::vector<Case> cases;
  cases.push_back(make_case(2, Coll::alltoall, DType::int32, RedOp::sum, 0, true, 4 << 20));
  cases.push_back(make_case(2, Coll::sendrecv, DType::float32, RedOp::sum, 0, true, 4 << 20));
  run_and_check(2, cases);
}

TEST(TcpCollectivesRoot, OutOfRangeRootIsAUsageError) {
  on_ring(2, [&](Communicator& comm, int) {
    float x = 0;
    EXPECT_THROW(comm.run({Coll::broadcast, DType::float32, RedOp::sum, 2, &x, &x, 1},
                          Deadline::after(std::chrono::seconds(5))),
                 UsageError);
  });
}

}  // namespace
}  // namespace gpudiag
