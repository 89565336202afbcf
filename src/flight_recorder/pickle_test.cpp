// The pickle decoder: torch's writer's layout decodes; every refusal of pickle.h is refused
// with its reason, and no input of a few bytes can make it build more than the limits allow.
#include "flight_recorder/pickle.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace gpudiag::fr {
namespace {

using namespace std::string_literals;

std::string u32(std::uint32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[k] = static_cast<char>(v >> (8 * k));
  return s;
}
std::string u64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k) s[k] = static_cast<char>(v >> (8 * k));
  return s;
}
std::string str(const std::string& s) {
  return "X" + u32(static_cast<std::uint32_t>(s.size())) + s;
}

/// What Pickler::pushIValue writes for {"version": "2.10", "pg_status": {"0": {"last": 3}},
/// "entries": [{"process_group": ("0", "default_pg"), "collective_seq_id": 7, "t": 2^40,
/// "neg": -2, "ms": 0.5, "s": None, "p2p": False, "r": True, "sizes": [[1024]]}, <the same
/// process_group by BINGET>]}: strs memoized with BINPUT, a repeat by BINGET.
std::string torch_like() {
  std::string p = "\x80\x02}("s + str("version") + "q\x00"s + str("2.10") + "q\x01";
  p += str("pg_status") + "q\x02}(" + str("0") + "q\x03}(" + str("last") + "q\x04K\x03uu";
  p += str("entries") + "q\x05](}(" + str("process_group") + "q\x06" + "h\x03" + str("default_pg") +
       "q\x07\x86q\x08";  // TUPLE2, memoized: shared below
  p += str("collective_seq_id") + "q\x09K\x07";
  p += str("t") + "q\x0a\x8a\x08" + u64(std::uint64_t{1} << 40);  // LONG1
  p += str("neg") + "q\x0b\x8a\x01\xfe"s;                         // -2
  p += str("ms") + "q\x0cG\x3f\xe0\x00\x00\x00\x00\x00\x00"s;     // 0.5
  p += str("s") + "q\x0dN" + str("p2p") + "q\x0e\x89" + str("r") + "q\x0f\x88";
  p += str("sizes") +
       "q\x10]]M\x00\x04"s
       "aa"
       "u";  // [[1024]]: BININT2, APPEND, APPEND
  p += "}(" + str("process_group") + "h\x08" + "ue" + "u.";
  return p;
}

TEST(FrPickle, TorchLayoutDecodes) {
  int proto = 0;
  Value v = decode_pickle(torch_like(), Limits{}, &proto);
  EXPECT_EQ(proto, 2);
  ASSERT_TRUE(v.is_dict());
  EXPECT_EQ(v.get("version")->str(), "2.10");
  EXPECT_EQ(v.get("pg_status")->get("0")->get("last")->i, 3);
  const auto& entries = v.get("entries")->items();
  ASSERT_EQ(entries.size(), 2u);
  const Value& e = entries[0];
  EXPECT_EQ(e.get("process_group")->kind, Value::Kind::tuple);
  EXPECT_EQ(e.get("process_group")->items()[0].str(), "0");
  EXPECT_EQ(e.get("process_group")->items()[1].str(), "default_pg");
  EXPECT_EQ(e.get("collective_seq_id")->i, 7);
  EXPECT_EQ(e.get("t")->i, std::int64_t{1} << 40);
  EXPECT_EQ(e.get("neg")->i, -2);
  EXPECT_DOUBLE_EQ(e.get("ms")->d, 0.5);
  EXPECT_EQ(e.get("s")->kind, Value::Kind::none);
  EXPECT_FALSE(e.get("p2p")->b);
  EXPECT_TRUE(e.get("r")->b);
  EXPECT_EQ(e.get("sizes")->items()[0].items()[0].i, 1024);
  // The second entry's process_group is the first's, by reference.
  EXPECT_EQ(entries[1].get("process_group")->items()[1].str(), "default_pg");
}

TEST(FrPickle, Protocol4And5Forms) {
  // FRAME, SHORT_BINUNICODE, MEMOIZE, BINUNICODE8, SHORT_BINBYTES, BINBYTES8, BININT, DICT.
  std::string p = "\x80\x05\x95"s + u64(40) + "(\x8c\x01k\x94\x8d"s + u64(2) + "ab" +
                  "\x8c\x01"
                  "b"
                  "C\x02xy"
                  "\x8c\x01n"
                  "J" +
                  u32(0xfffffffe) + "h\x00\x8e"s + u64(1) + "z" + "d.";
  Value v = decode_pickle(p, Limits{});
  ASSERT_TRUE(v.is_dict());
  EXPECT_EQ(v.get("b")->kind, Value::Kind::bytes);
  EXPECT_EQ(v.get("b")->str(), "xy");
  EXPECT_EQ(v.get("n")->i, -2);
  // The memoized key "k" used again (MEMOIZE, BINGET): the last value wins, as in Python.
  EXPECT_EQ(v.get("k")->str(), "z");
  EXPECT_EQ(v.get("k")->kind, Value::Kind::bytes);
}

void expect_refused(const std::string& p, const std::string& words, bool truncated = false) {
  try {
    decode_pickle(p, Limits{});
    ADD_FAILURE() << "decoded: " << words;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(e.truncated(), truncated) << e.what();
  }
}

TEST(FrPickle, RefusesEveryOpcodeThatLoadsAnObject) {
  expect_refused("\x80\x02}cos\nsystem\nq\x00."s, "GLOBAL os.system");
  expect_refused("\x80\x02iposix\nsystem\n.", "INST posix.system");
  for (char op : {'\x93', 'R', 'b', 'o', '\x81', '\x92', '\x82', '\x83', '\x84', 'P', 'Q'}) {
    std::string p = "\x80\x02N"s + op + "\x00\x00\x00\x00."s;
    expect_refused(p, "it loads a Python object");
  }
  expect_refused("\x80\x02N\x93.", "STACK_GLOBAL");
  expect_refused("\x80\x02NR.", "REDUCE");
  expect_refused("\x80\x02Nb.", "BUILD");
  expect_refused("\x80\x02(o.", "OBJ");
  expect_refused("\x80\x02N\x81.", "NEWOBJ");
}

TEST(FrPickle, RefusesWhatNoDumpHolds) {
  expect_refused("\x80\x04\x8f.", "a set");
  expect_refused("\x80\x04(\x91.", "a set");
  expect_refused("\x80\x05\x97.", "out-of-band buffer");
  expect_refused("\x80\x02N2.", "DUP");
  expect_refused("\x80\x02I1\n.", "text opcode of protocol 0");
  expect_refused("\x80\x02\xff.", "unknown opcode 0xff");
}

TEST(FrPickle, RefusesOtherProtocolsAndBrokenStreams) {
  expect_refused("", "empty");
  expect_refused("(dp0\n.", "not a pickle of protocol 2 to 5");
  expect_refused("\x80\x01N.", "pickle protocol 1, not 2 to 5");
  expect_refused("\x80\x06N.", "pickle protocol 6");
  expect_refused("\x80\x02\x80\x02N.", "a second PROTO");
  expect_refused("\x80\x02NN.", "STOP with 2 values");
  expect_refused("\x80\x02(N.", "1 MARKs");
  expect_refused(
      "\x80\x02"
      "a.",
      "the stack is empty");
  expect_refused("\x80\x02Ne.", "no MARK to close");
  expect_refused("\x80\x02h\x05.", "memo slot 5, never stored");
  expect_refused("\x80\x02\x8a\x09\x01\x01\x01\x01\x01\x01\x01\x01\x01.", "wider than 64 bits");
  expect_refused("\x80\x02}]Ns.", "a dict key that is a list");
  expect_refused("\x80\x02]NNs.", "adds items to a list, not a dict");
}

TEST(FrPickle, EveryCutOfAValidPickleIsTruncated) {
  const std::string whole = torch_like();
  for (std::size_t n = 2; n < whole.size(); ++n) {
    try {
      decode_pickle(whole.substr(0, n), Limits{});
      ADD_FAILURE() << "a pickle cut at " << n << " decoded";
    } catch (const FormatError& e) {
      EXPECT_TRUE(e.truncated()) << n << ": " << e.what();
    }
  }
}

TEST(FrPickle, LengthFieldOf2To60IsCorruptNotTruncated) {
  expect_refused("\x80\x04\x8d"s + u64(std::uint64_t{1} << 60) + "2.10.",
                 "needs 1152921504606846976 more bytes");
  expect_refused("\x80\x04\x95"s + u64(std::uint64_t{1} << 60) + "N.", "corrupt");
  expect_refused("\x80\x02X" + u32(100) + "ab.", "truncated", true);
}

TEST(FrPickle, DepthBombIsRefused) {
  std::string p = "\x80\x02" + std::string(10000, ']') + std::string(9999, 'a') + ".";
  expect_refused(p, "nested deeper than 64 levels");
  // 64 levels decode.
  std::string ok = "\x80\x02" + std::string(64, ']') + std::string(63, 'a') + ".";
  EXPECT_EQ(decode_pickle(ok, Limits{}).height(), 64u);
}

TEST(FrPickle, MemoExpansionBombIsRefused) {
  // L0 = [0]; Lk = [Lk-1, Lk-1]: 2^64 values in a few hundred bytes, by reference.
  std::string p =
      "\x80\x02]q\x00K\x00"s
      "a0"s;
  for (int k = 1; k <= 64; ++k) {
    p += "]q"s + static_cast<char>(k) + "(h" + static_cast<char>(k - 1) + "h" +
         static_cast<char>(k - 1) + "e";
    if (k < 64) p += "0";
  }
  expect_refused(p + ".", "more than 4194304 values");
  // Below the limit the same sharing decodes, and its weight counts every path.
  Limits small;
  std::string q =
      "\x80\x02]q\x00K\x00"s
      "a0]q\x01(h\x00h\x00"s
      "e.";
  EXPECT_EQ(decode_pickle(q, small).weight(), 5u);
}

TEST(FrPickle, ContainerChangedAfterASecondReferenceIsRefused) {
  // l = []; l.append(l): the only way to a structure that holds itself.
  expect_refused(
      "\x80\x02]q\x00h\x00"s
      "a.",
      "changed after it was referenced again");
  expect_refused("\x80\x02}q\x00(K\x01h\x00u."s, "changed after it was referenced again");
}

TEST(FrPickle, BytesAfterStopAreIgnored) {
  EXPECT_EQ(decode_pickle("\x80\x02K\x05.trailing junk", Limits{}).i, 5);
}

TEST(FrPickle, ValueLimitCountsEveryValue) {
  Limits tiny;
  tiny.max_values = 10;
  std::string p = "\x80\x02](" + std::string(20, 'N') + "e.";
  try {
    decode_pickle(p, tiny);
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 10 values"), std::string::npos);
  }
}

TEST(FrPickle, EveryNewMemoSlotCountsAgainstTheValueLimit) {
  // One None memoized again and again: each MEMOIZE fills a new slot, and a file of them
  // once filled gigabytes of memo without a value more than the None.
  Limits tiny;
  tiny.max_values = 10;
  auto refused = [&](const std::string& p) {
    try {
      decode_pickle(p, tiny);
      ADD_FAILURE() << "decoded";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("more than 10 values"), std::string::npos) << e.what();
    }
  };
  refused("\x80\x04N" + std::string(20, '\x94') + ".");
  std::string binput = "\x80\x02N", long_binput = binput, put = binput;
  for (int k = 0; k < 20; ++k) {
    binput += "q"s + static_cast<char>(k);
    long_binput += "r" + u32(static_cast<std::uint32_t>(k) << 16);
    put += "p" + std::to_string(k) + "\n";
  }
  refused(binput + ".");
  refused(long_binput + ".");
  refused(put + ".");
  // A slot written again costs nothing new: the None and one slot, 20 times over.
  std::string again = "\x80\x02N";
  for (int k = 0; k < 20; ++k) again += "q\x00"s;
  EXPECT_EQ(decode_pickle(again + ".", tiny).kind, Value::Kind::none);
}

TEST(FrPickle, ItemsMoveFromTheStackIntoTheirContainer) {
  // APPENDS and SETITEMS in batches, LIST, TUPLE, DICT, TUPLE1-3, APPEND and SETITEM: each
  // takes exactly the values above its MARK (or its one or two), in order.
  auto k = [](int n) { return "K"s + static_cast<char>(n); };                   // BININT1
  std::string p = "\x80\x02](" + k(1) + k(2) + "e(" + k(3) + "e" + k(4) + "a";  // [1, 2] [3] 4
  p += "(" + k(5) + k(6) + "la(" + k(7) + k(8) + "ta";                          // [5, 6] (7, 8)
  p += "(" + str("k") + k(10) + "da" + k(9) + k(10) + k(11) + '\x87' + "a";  // {k: 10} (9, 10, 11)
  p += "}" + str("a") + k(12) + "s(" + str("b") + k(13) + str("c") + k(14) + "ua.";  // {a: 12, ..}
  Value v = decode_pickle(p, Limits{});
  const auto& items = v.items();
  ASSERT_EQ(items.size(), 9u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(items[k].i, k + 1);
  EXPECT_EQ(items[4].kind, Value::Kind::list);
  EXPECT_EQ(items[4].items()[1].i, 6);
  EXPECT_EQ(items[5].kind, Value::Kind::tuple);
  EXPECT_EQ(items[5].items()[1].i, 8);
  EXPECT_EQ(items[6].get("k")->i, 10);
  EXPECT_EQ(items[7].items()[2].i, 11);
  EXPECT_EQ(items[8].get("a")->i, 12);
  EXPECT_EQ(items[8].get("c")->i, 14);
  EXPECT_EQ(v.weight(), 1u + 4 + 3 + 3 + 3 + 4 + 7);
  // A MARK is a floor: APPEND, TUPLE2 and SETITEM cannot reach below it.
  expect_refused("\x80\x02](" + k(1) + "a.", "the stack is empty");
  expect_refused("\x80\x02" + k(1) + "(" + k(2) + "\x86.", "the stack is empty");
  expect_refused("\x80\x02}(" + k(1) + k(2) + "s.", "the stack is empty");
  expect_refused("\x80\x02(" + k(1) + "e.", "the stack is empty");
}

}  // namespace
}  // namespace gpudiag::fr
