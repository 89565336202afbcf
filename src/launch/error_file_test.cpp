// Reading a child's error file (error_file.h): the `at` line is the user's
// innermost frame; a ReplicaDivergence's message names the wrong replica,
// none when no majority named one, and other messages are left alone.
#include "launch/error_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

namespace gpudiag::launch {
namespace {

/// The `at` line of an error file holding `stack` as torch's @record writes it.
std::string at_line(const std::string& stack) {
  char dir[] = "/tmp/gpudiag-error-file-XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/error.json";
  nlohmann::json doc = {{"message",
                         {{"message", "KeyError: 'X'"},
                          {"extraInfo", {{"py_callstack", stack}, {"timestamp", "1764100000"}}}}}};
  std::ofstream(path) << doc.dump();
  const auto e = read_child_error(path);
  ::unlink(path.c_str());
  ::rmdir(dir);
  return e ? e->where : "(none)";
}

TEST(ChildErrorAt, IsTheUsersInnermostFrameNotTheLibrarysOrGpudiags) {
  // os.environ["X"] raises inside the frozen os module.
  EXPECT_EQ(at_line("Traceback (most recent call last):\n"
                    "  File \"/home/u/train.py\", line 52, in <module>\n    main()\n"
                    "  File \"/home/u/train.py\", line 39, in main\n    x = os.environ[\"X\"]\n"
                    "  File \"<frozen os>\", line 679, in __getitem__\n"
                    "KeyError: 'X'\n"),
            "File \"/home/u/train.py\", line 39, in main");
  // ReplicaCheck raises in gpudiag's script, called from torch's optimizer hook.
  EXPECT_EQ(at_line("Traceback (most recent call last):\n"
                    "  File \"/home/u/run.py\", line 80, in train\n    check.step(step)\n"
                    "  File \"/opt/gpudiag/share/gpudiag/scripts/replica_check.py\", line 222, in step\n"
                    "    raise ReplicaDivergence(found[0], step, culprit, names)\n"
                    "  File \"/usr/lib/python3.11/contextlib.py\", line 81, in inner\n"
                    "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/module.py\", line 9, in f\n"
                    "  File \"/venv/lib/python3.10/site-packages/x/y.py\", line 3, in g\n"),
            "File \"/home/u/run.py\", line 80, in train");
  // A chained exception: the frames of the one raised, not the one handled.
  EXPECT_EQ(at_line("Traceback (most recent call last):\n"
                    "  File \"/home/u/a.py\", line 5, in load\n"
                    "FileNotFoundError: x\n\nDuring handling of the above exception, another "
                    "exception occurred:\n\nTraceback (most recent call last):\n"
                    "  File \"/home/u/b.py\", line 7, in main\n"
                    "  File \"<frozen os>\", line 679, in __getitem__\n"),
            "File \"/home/u/b.py\", line 7, in main");
}

TEST(ChildErrorAt, FallsBackToTheLastFrameWhenNoneIsTheUsers) {
  EXPECT_EQ(at_line("Traceback (most recent call last):\n"
                    "  File \"/usr/lib/python3.11/runpy.py\", line 198, in _run_module_as_main\n"
                    "  File \"<frozen os>\", line 679, in __getitem__\n"),
            "File \"<frozen os>\", line 679, in __getitem__");
  // A user's own lib/python folder without a version is the user's.
  EXPECT_EQ(at_line("Traceback (most recent call last):\n"
                    "  File \"/home/u/lib/python/train.py\", line 4, in main\n"
                    "  File \"/usr/lib/python3.11/os.py\", line 679, in __getitem__\n"),
            "File \"/home/u/lib/python/train.py\", line 4, in main");
}

TEST(ReplicaDivergence, NamesTheRankTheMajorityBlames) {
  const auto d = replica_divergence(
      "ReplicaDivergence: replicas diverged at step 20: rank 2 differs from ranks 0-1,3 in 1 of 6 "
      "tensors: fc1.weight (1 bit in 1 of 4096 elements, largest |difference| 2.50e-01)");
  EXPECT_TRUE(d.diverged);
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(replica_divergence("replicas diverged at step 7: rank 13 differs from rank 0 (so does "
                               "rank 14) in 2 of 2 tensors: a, b")
                .rank,
            13);
}

TEST(ReplicaDivergence, WithoutAMajorityNoRankAndOtherErrorsAreNotOne) {
  const auto tie = replica_divergence(
      "ReplicaDivergence: replicas diverged at step 3: rank 0 vs rank 1, no majority says which is "
      "wrong, in 1 of 2 tensors: weight");
  EXPECT_TRUE(tie.diverged);
  EXPECT_EQ(tie.rank, -1);
  EXPECT_FALSE(replica_divergence("ValueError: step 2 went wrong on rank 1").diverged);
  EXPECT_EQ(replica_divergence("replicas diverged at step 9: rank 99999999999 differs from").rank,
            -1);
}

}  // namespace
}  // namespace gpudiag::launch
