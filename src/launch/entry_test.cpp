// torchrun's entry forms and the child error file read as a stranger's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/entry.h"
#include "launch/error_file.h"
#include "util/error.h"

namespace gpudiag::launch {
namespace {

const std::vector<std::string> kSubs{"check", "bench", "launch"};

Env path_env() {
  Env e;
  e.set("PATH", "/usr/bin:/bin");
  e.set("PYTHON_EXEC", "/bin/sh");  // any executable stands in for python here
  return e;
}

TEST(LaunchEntry, ScriptModuleProgramAndSubcommand) {
  LaunchOptions o;
  o.command = {"check", "--size", "1MiB"};
  resolve_entry(o, kSubs, path_env());
  EXPECT_FALSE(o.no_gpudiag);
  EXPECT_FALSE(o.torch_children);

  const auto script = std::filesystem::temp_directory_path() / "gpudiag-entry-test.py";
  std::ofstream(script) << "print(1)\n";
  o = {};
  o.command = {script.string(), "--lr", "3"};
  resolve_entry(o, kSubs, path_env());
  EXPECT_EQ(o.command, (std::vector<std::string>{"/bin/sh", "-u", script.string(), "--lr", "3"}));
  EXPECT_TRUE(o.no_gpudiag && o.torch_children);
  std::filesystem::remove(script);

  o = {};
  o.module = true;
  o.command = {"pkg.train", "--x"};
  resolve_entry(o, kSubs, path_env());
  EXPECT_EQ(o.command, (std::vector<std::string>{"/bin/sh", "-u", "-m", "pkg.train", "--x"}));

  o = {};
  o.no_python = true;
  o.command = {"hostname"};
  resolve_entry(o, kSubs, path_env());
  EXPECT_EQ(o.command, (std::vector<std::string>{"hostname"}));
  EXPECT_TRUE(o.no_gpudiag && o.torch_children);

  o = {};
  o.command = {"nosuch.py"};
  try {
    resolve_entry(o, kSubs, path_env());
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("neither a file nor a gpudiag subcommand"), std::string::npos);
  }
}

// The interpreter a torch program's ranks run: PYTHON_EXEC, else torchrun's
// own (its shebang), else the first python3 on PATH with torch, else the
// first python3. A pyenv-like shim first on PATH (no torch) is passed over.
TEST(LaunchEntry, ThePythonThatHasTorchIsChosen) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("gpudiag-py-" + std::to_string(::getpid()));
  fs::create_directories(d / "shims");
  fs::create_directories(d / "fake");
  auto script = [](const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
    fs::permissions(p, fs::perms::owner_all);
  };
  script(d / "shims" / "python3", "#!/bin/sh\nexit 1\n");
  std::string why;
  Env e;
  e.set("PYTHON_EXEC", "/bin/sh");
  e.set("PATH", (d / "shims").string() + ":/usr/bin");
  EXPECT_EQ(python_interpreter(e, &why), "/bin/sh");
  EXPECT_EQ(why, "PYTHON_EXEC");
  e.set("PYTHON_EXEC", "");  // empty counts as unset
  script(d / "fake" / "torchrun", "#!/bin/sh\n");
  e.set("PATH", (d / "shims").string() + ":" + (d / "fake").string());
  EXPECT_EQ(python_interpreter(e, &why), "/bin/sh");  // torchrun's shebang
  EXPECT_EQ(why, "the interpreter of torchrun on PATH");
  fs::remove(d / "fake" / "torchrun");
  EXPECT_EQ(python_interpreter(e, &why), (d / "shims" / "python3").string());
  EXPECT_EQ(why, "the first python3 on PATH (none has torch)");
  if (!torch_version_for("/usr/bin/python3").empty()) {  // Debian's python3-torch
    e.set("PATH", (d / "shims").string() + ":" + (d / "fake").string() + ":/usr/bin");
    fs::remove(d / "fake");
    const std::string p = python_interpreter(e, &why);
    EXPECT_TRUE(p == "/usr/bin/python3" || p.rfind("/usr/bin/python3", 0) == 0) << p << ", " << why;
  }
  fs::remove_all(d);
}

TEST(LaunchEntry, AsyncErrorVariableFollowsTorchsVersion) {
  EXPECT_EQ(async_error_variable("1.13.0a0"), "NCCL_ASYNC_ERROR_HANDLING");
  EXPECT_EQ(async_error_variable("2.1.2+cu121"), "NCCL_ASYNC_ERROR_HANDLING");
  EXPECT_EQ(async_error_variable("2.2.0"), "TORCH_NCCL_ASYNC_ERROR_HANDLING");
  EXPECT_EQ(async_error_variable("2.11.0+cu130"), "TORCH_NCCL_ASYNC_ERROR_HANDLING");
  EXPECT_EQ(async_error_variable(""), "NCCL_ASYNC_ERROR_HANDLING");
}

class ChildErrorFile : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gpudiag-errfile-" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  }
};

TEST_F(ChildErrorFile, TorchsShapeIsRead) {
  auto p = write("e.json",
                 R"({"message": {"message": "ValueError: bad\u001b[2J", "extraInfo": {"py_callstack": )"
                 R"("Traceback:\n  File \"a.py\", line 3, in f\n    x()\n  File \"t.py\", line 9, in main\n    raise\n", "timestamp": "1764100000"}}})");
  auto e = read_child_error(p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "ValueError: bad\\x1b[2J");  // the escape is shown, not obeyed
  EXPECT_EQ(e->where, "File \"t.py\", line 9, in main");
  EXPECT_EQ(e->timestamp, 1764100000);
  e = read_child_error(write("s.json", R"({"message": "RuntimeError: x"})"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "RuntimeError: x");
}

TEST_F(ChildErrorFile, AbsentJunkHugeAndLinkedFiles) {
  EXPECT_FALSE(read_child_error((dir / "none.json").string()));
  for (const std::string text : {"", "not json", "[1,2]", R"({"message": 5})",
                                 R"({"message": {"message": 5}})"}) {
    auto e = read_child_error(write("j.json", text));
    ASSERT_TRUE(e) << text;
    EXPECT_EQ(e->message, "(the error file is not torch's error JSON)") << text;
  }
  auto big = read_child_error(write("big.json", std::string(kMaxErrorFile + 10, ' ')));
  ASSERT_TRUE(big);
  EXPECT_NE(big->message.find("larger than 1 MiB"), std::string::npos);
  std::filesystem::create_symlink("/etc/passwd", dir / "link.json");
  auto linked = read_child_error((dir / "link.json").string());
  ASSERT_TRUE(linked);
  EXPECT_NE(linked->message.find("cannot be opened"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::launch
