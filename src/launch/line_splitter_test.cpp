#include "launch/line_splitter.h"

#include <gtest/gtest.h>

#include <string>

namespace gpudiag::launch {
namespace {

TEST(LineSplitter, PrefixesEachCompleteLine) {
  LineSplitter s("[rank3]: ");
  std::string out;
  s.feed("one\ntwo\n", out);
  EXPECT_EQ(out, "[rank3]: one\n[rank3]: two\n");
  EXPECT_EQ(s.pending(), 0u);
}

TEST(LineSplitter, HoldsAPartialLineUntilItsNewline) {
  LineSplitter s("[r]: ");
  std::string out;
  s.feed("hel", out);
  EXPECT_EQ(out, "");
  EXPECT_EQ(s.pending(), 3u);
  s.feed("lo wo", out);
  EXPECT_EQ(out, "");
  s.feed("rld\nnext", out);
  EXPECT_EQ(out, "[r]: hello world\n");
  EXPECT_EQ(s.pending(), 4u);
}

TEST(LineSplitter, ByteByByteGivesTheSameLines) {
  const std::string text = "alpha\n\nbeta gamma\ndelta\n";
  LineSplitter whole("> "), bytes("> ");
  std::string a, b;
  whole.feed(text, a);
  for (char c : text) bytes.feed(std::string_view(&c, 1), b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, "> alpha\n> \n> beta gamma\n> delta\n");
}

TEST(LineSplitter, FinishFlushesTheTailWithANewline) {
  LineSplitter s("[rank0]: ");
  std::string out;
  s.feed("done\nno newline at the end", out);
  s.finish(out);
  EXPECT_EQ(out, "[rank0]: done\n[rank0]: no newline at the end\n");
  s.finish(out);  // nothing left: nothing more
  EXPECT_EQ(out, "[rank0]: done\n[rank0]: no newline at the end\n");
}

TEST(LineSplitter, EmptyPrefixPassesLinesThrough) {
  LineSplitter s("");
  std::string out;
  s.feed("a\nb", out);
  s.finish(out);
  EXPECT_EQ(out, "a\nb\n");
}

TEST(LineSplitter, GpudiagJsonLinesGoOutWithoutThePrefix) {
  LineSplitter s("[rank1]: ");
  std::string out;
  s.feed("text\n{\"schema\":\"gpudiag-info/1\",\"rank\":1}\n{\"other\":1}\n", out);
  EXPECT_EQ(out,
            "[rank1]: text\n{\"schema\":\"gpudiag-info/1\",\"rank\":1}\n[rank1]: {\"other\":1}\n");
}

TEST(LineSplitter, CutsOverlongLinesAtTheLimit) {
  LineSplitter s("p:", 4);
  std::string out;
  s.feed("abcdefghij\n", out);
  EXPECT_EQ(out, "p:abcd\np:efgh\np:ij\n");
}

TEST(LineSplitter, ALineOfExactlyTheLimitIsOneLine) {
  LineSplitter s("p:", 4);
  std::string out;
  s.feed("abcd", out);  // pending == limit, newline not seen yet
  EXPECT_EQ(out, "");
  s.feed("\nxy\n", out);
  EXPECT_EQ(out, "p:abcd\np:xy\n");
}

TEST(LineSplitter, CutsAPendingTailThatGrowsPastTheLimit) {
  LineSplitter s("", 5);
  std::string out;
  s.feed("abc", out);
  s.feed("defg", out);
  EXPECT_EQ(out, "abcde\n");
  EXPECT_EQ(s.pending(), 2u);
}

TEST(RankPrefix, LooksLikeTorchrun) { EXPECT_EQ(rank_prefix(12), "[rank12]: "); }

}  // namespace
}  // namespace gpudiag::launch
