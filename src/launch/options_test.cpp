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

TEST(TorchrunSyntax, NprocPerNodeTakesCountsAndWords) {
  EXPECT_EQ(parse_nproc("4", 0, 2), 4);
  EXPECT_EQ(parse_nproc("cpu", 8, 2), 2);
  EXPECT_EQ(parse_nproc("gpu", 8, 2), 8);
  EXPECT_EQ(parse_nproc("auto", 8, 2), 8);
  EXPECT_EQ(parse_nproc("auto", 0, 2), 2);
  auto error = [](const std::string& text, int gpus) {
    try {
      parse_nproc(text, gpus, 2);
    } catch (const UsageError& e) {
      return e.one_line();
    }
    return std::string();
  };
  EXPECT_NE(error("gpu", 0).find("no GPU is visible"), std::string::npos);
  EXPECT_NE(error("gpus", 0).find("'gpus' is not a number, gpu, cpu or auto"), std::string::npos);
  EXPECT_EQ(parse_nproc("0", 0, 2), 0);  // validate() says it is out of range
  EXPECT_NE(error("1e3", 0).find("is not a number"), std::string::npos);
  EXPECT_NE(error("99999999999", 0).find("is not a whole number"), std::string::npos);
}

TEST(TorchrunSyntax, NnodesIsACountOrARange) {
  LaunchOptions o;
  parse_nnodes("3", o);
  EXPECT_EQ(o.nnodes, 3);
  EXPECT_EQ(min_nodes(o), 3);
  parse_nnodes("1:4", o);
  EXPECT_EQ(o.nnodes, 4);
  EXPECT_EQ(min_nodes(o), 1);
  parse_nnodes("2:2", o);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.min_nodes, 0);
  EXPECT_THROW(parse_nnodes("3:1", o), UsageError);
  EXPECT_THROW(parse_nnodes("a:2", o), UsageError);
  EXPECT_THROW(parse_nnodes("0:2", o), UsageError);
  EXPECT_THROW(parse_nnodes("", o), UsageError);
}

TEST(TorchrunSyntax, TeeAndRedirectsTakeAValueOrAMap) {
  EXPECT_EQ(parse_std_spec("--tee", "3", 2), (std::vector<int>{3, 3}));
  EXPECT_EQ(parse_std_spec("--tee", "0:1,2:2", 3), (std::vector<int>{1, 0, 2}));
  EXPECT_THROW(parse_std_spec("--tee", "4", 2), UsageError);
  EXPECT_THROW(parse_std_spec("--tee", "0:5", 2), UsageError);
  EXPECT_THROW(parse_std_spec("--redirects", "2:1", 2), UsageError);
  EXPECT_THROW(parse_std_spec("--redirects", "x", 2), UsageError);
}

TEST(TorchrunSyntax, EndpointsAndRdzvConf) {
  EXPECT_EQ(parse_endpoint("node0:1234"), (std::pair<std::string, int>{"node0", 1234}));
  EXPECT_EQ(parse_endpoint("node0"), (std::pair<std::string, int>{"node0", 29400}));
  EXPECT_EQ(parse_endpoint("[::1]:5"), (std::pair<std::string, int>{"::1", 5}));
  EXPECT_THROW(parse_endpoint(":5"), UsageError);
  EXPECT_THROW(parse_endpoint("node0:99999"), UsageError);
  EXPECT_THROW(parse_endpoint("node0:x"), UsageError);
  LaunchOptions o;
  parse_rdzv_conf("join_timeout=30,last_call_timeout=0.5,read_timeout=60", o);
  EXPECT_EQ(o.join_timeout_s, 30);
  EXPECT_EQ(o.last_call_s, 0.5);
  EXPECT_THROW(parse_rdzv_conf("join_timeout=-1", o), UsageError);
  EXPECT_THROW(parse_rdzv_conf("colour=blue", o), UsageError);
}

TEST(TorchrunSyntax, HowTheNodesMeet) {
  auto o = good();
  EXPECT_EQ(meeting(o), Meeting::alone);
  o.standalone = true;
  EXPECT_EQ(meeting(o), Meeting::alone);
  o = good(), o.nnodes = 2, o.node_rank = 1, o.master_addr = "n0";
  EXPECT_EQ(meeting(o), Meeting::by_hand);
  o.node_rank.reset();
  EXPECT_EQ(meeting(o), Meeting::rendezvous);  // nobody numbered the nodes
  o = good(), o.rdzv_endpoint = "n0:5";
  EXPECT_EQ(meeting(o), Meeting::rendezvous);
  o = good(), o.nnodes = 3, o.min_nodes = 1, o.master_addr = "n0";
  EXPECT_EQ(meeting(o), Meeting::rendezvous);
  o = good(), o.nnodes = 2, o.node_rank = 0, o.rdzv_backend = "static", o.master_addr = "n0";
  EXPECT_EQ(meeting(o), Meeting::by_hand);
}

TEST(ValidateOptions, RejectsContradictoryRendezvousOptions) {
  auto o = good();
  o.standalone = true, o.nnodes = 2;
  EXPECT_NE(error_of(o).find("--standalone runs one node"), std::string::npos);
  o = good(), o.standalone = true, o.rdzv_endpoint = "n0:1";
  EXPECT_NE(error_of(o).find("contradicts it"), std::string::npos);
  o = good(), o.rdzv_backend = "etcd";
  EXPECT_NE(error_of(o).find("--rdzv-backend 'etcd' is not supported"), std::string::npos);
  o = good(), o.rdzv_backend = "static", o.nnodes = 2, o.master_addr = "n0";
  EXPECT_NE(error_of(o).find("static needs --node-rank"), std::string::npos);
  o = good(), o.rdzv_id = "a b";
  EXPECT_NE(error_of(o).find("--rdzv-id 'a b'"), std::string::npos);
  o = good(), o.rdzv_endpoint = "n0:1", o.nnodes = 2;
  EXPECT_EQ(error_of(o), "");  // no --master-addr needed: the endpoint is the meeting place
  o = good(), o.max_restarts = -1;
  EXPECT_NE(error_of(o).find("--max-restarts must be between"), std::string::npos);
  o = good(), o.max_restarts = 1, o.rdzv_endpoint = "n0:1", o.nnodes = 2;
  EXPECT_NE(error_of(o).find("one node only"), std::string::npos);
  o.no_gpudiag = true, o.command = {"true"};
  EXPECT_EQ(error_of(o), "");
}

}  // namespace
}  // namespace gpudiag::launch
