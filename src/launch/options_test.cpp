#include "launch/options.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace gpudiag::launch {
namespace {

const std::vector<std::string> kSubcommands{"check", "launch", "bench", "scan", "info"};

LaunchOptions good() {
  LaunchOptions o;
  o.nproc_per_node = 4;
  o.command = {"check", "--timeout", "5"};
  return o;
}

std::string error_of(const LaunchOptions& o) {
  try {
    validate(o, kSubcommands);
  } catch (const UsageError& e) {
    return e.one_line();
  }
  return "";
}

TEST(ValidateOptions, AcceptsAGoodJob) {
  EXPECT_EQ(error_of(good()), "");
  auto o = good();
  o.nnodes = 2, o.node_rank = 1, o.master_addr = "node0", o.master_port = 29500;
  EXPECT_EQ(error_of(o), "");
}

TEST(ValidateOptions, RejectsCountsAndRanksOutOfRange) {
  auto o = good();
  o.nproc_per_node = 0;
  EXPECT_NE(error_of(o).find("--nproc-per-node must be between 1 and 1024, got 0"),
            std::string::npos);
  o = good(), o.nnodes = 0;
  EXPECT_NE(error_of(o).find("--nnodes"), std::string::npos);
  o = good(), o.nnodes = 2, o.master_addr = "n0", o.node_rank = 2;
  EXPECT_NE(error_of(o).find("--node-rank 2 is outside [0, 2)"), std::string::npos);
  o = good(), o.node_rank = -1;
  EXPECT_NE(error_of(o).find("--node-rank -1"), std::string::npos);
}

TEST(ValidateOptions, RejectsBadPortsAndMissingMaster) {
  auto o = good();
  o.master_port = 70000;
  EXPECT_NE(error_of(o).find("--master-port 70000 is not a TCP port"), std::string::npos);
  o.master_port = 0;
  EXPECT_NE(error_of(o).find("--master-port 0"), std::string::npos);
  o = good(), o.nnodes = 2;
  EXPECT_NE(error_of(o).find("--nnodes 2 needs --master-addr"), std::string::npos);
  o = good(), o.grace_s = -1;
  EXPECT_NE(error_of(o).find("must not be negative"), std::string::npos);
}

TEST(ValidateOptions, RejectsMissingOrUnknownCommands) {
  auto o = good();
  o.command.clear();
  EXPECT_NE(error_of(o).find("no command after '--'"), std::string::npos);
  o.command = {"chek"};
  EXPECT_NE(error_of(o).find("'chek' is not a gpudiag subcommand (did you mean 'check'?)"),
            std::string::npos);
  o.command = {"launch", "--", "check"};
  EXPECT_NE(error_of(o).find("cannot run inside 'launch'"), std::string::npos);
  o.command = {"hostname"};
  o.no_gpudiag = true;
  EXPECT_EQ(error_of(o), "");
}

TEST(ValidateOptions, ErrorsAreOneLine) {
  auto o = good();
  o.command = {"xyz"};
  auto message = error_of(o);
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::launch
