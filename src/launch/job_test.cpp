#include "launch/job.h"

#include <gtest/gtest.h>

#include <map>

namespace gpudiag::launch {
namespace {

std::map<std::string, std::string> as_map(const Env& env) {
  return {env.all().begin(), env.all().end()};
}

LaunchOptions two_nodes() {
  LaunchOptions o;
  o.nproc_per_node = 4;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "10.0.0.1";
  o.command = {"check"};
  return o;
}

TEST(RankEnvironment, SetsTorchrunVariablesForEachRank) {
  auto job = resolve_job(two_nodes(), Env());
  auto env = as_map(rank_environment(Env(), job, 2));
  EXPECT_EQ(env["RANK"], "6");
  EXPECT_EQ(env["LOCAL_RANK"], "2");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["GPUDIAG_TOKEN"], job.token);
  EXPECT_EQ(env["GPUDIAG_LAUNCH_ID"], job.launch_id);
  EXPECT_FALSE(job.launch_id.empty());
}

TEST(RankEnvironment, OverridesStaleValuesAndDropsAgentVariables) {
  Env parent({{"RANK", "17"},
              {"PATH", "/usr/bin"},
              {"TORCHELASTIC_USE_AGENT_STORE", "True"},
              {"ROLE_RANK", "3"}});
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {"check"};
  auto job = resolve_job(o, parent);
  auto env = as_map(rank_environment(parent, job, 1));
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["PATH"], "/usr/bin");
  EXPECT_EQ(env.count("TORCHELASTIC_USE_AGENT_STORE"), 0u);
  EXPECT_EQ(env.count("ROLE_RANK"), 0u);
}

TEST(ResolveJob, OneNodeGetsAFreePortAndARandomToken) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {"check"};
  auto a = resolve_job(o, Env());
  auto b = resolve_job(o, Env());
  EXPECT_EQ(a.master_addr, "127.0.0.1");
  EXPECT_GT(a.master_port, 0);
  EXPECT_LE(a.master_port, 65535);
  EXPECT_EQ(a.token.size(), 32u);
  EXPECT_NE(a.token, b.token);
  EXPECT_NE(a.launch_id, b.launch_id);
}

TEST(ResolveJob, NodesAgreeOnTheTokenWithoutTalking) {
  using Vars = std::map<std::string, std::string>;
  auto o = two_nodes();
  Env slurm(Vars{{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}});
  auto node1 = resolve_job(o, slurm);
  o.node_rank = 0;
  auto node0 = resolve_job(o, slurm);
  EXPECT_EQ(node1.token, "slurm-77.3");
  EXPECT_EQ(node0.token, node1.token);
  // Without SLURM or torchrun, the fixed name every by-hand rank uses.
  EXPECT_EQ(resolve_job(o, Env()).token, resolve_job(two_nodes(), Env()).token);
}

TEST(ResolveJob, ExportedTokenWins) {
  using Vars = std::map<std::string, std::string>;
  Env env(Vars{{"GPUDIAG_TOKEN", "s3cret"}, {"SLURM_JOB_ID", "77"}});
  EXPECT_EQ(resolve_job(two_nodes(), env).token, "s3cret");
  LaunchOptions one;
  one.command = {"check"};
  EXPECT_EQ(resolve_job(one, env).token, "s3cret");
  // An empty one counts as unset; on one node the token is then random even under SLURM.
  Env empty(Vars{{"GPUDIAG_TOKEN", ""}, {"SLURM_JOB_ID", "77"}});
  EXPECT_EQ(resolve_job(two_nodes(), empty).token, "slurm-77");
  EXPECT_EQ(resolve_job(one, empty).token.size(), 32u);
}

TEST(RankEnvironment, ExtraVariablesReachEveryRankButCannotOverrideRanks) {
  auto job = resolve_job(two_nodes(), Env());
  job.extra_env = {{"GPUDIAG_STORE", "launcher"}, {"RANK", "999"}};
  auto env = as_map(rank_environment(Env(), job, 0));
  EXPECT_EQ(env["GPUDIAG_STORE"], "launcher");
  EXPECT_EQ(env["RANK"], "4");
}

// A torch program's children on the second node: torchrun's error file is
// per local rank (torch/distributed/elastic/agent/server/local_elastic_agent.py
// names attempt_K/<local rank>/error.json), and the launcher reads it back by
// local rank; a name by global rank leaves every node after the first with
// "wrote no error file".
TEST(RankEnvironment, TorchErrorFileIsNamedByLocalRankOnEveryNode) {
  auto job = resolve_job(two_nodes(), Env());
  job.torch_children = true;
  job.error_dir = "/run/job/attempt_0";
  for (int local = 0; local < 4; ++local) {
    auto env = as_map(rank_environment(Env(), job, local));
    EXPECT_EQ(env["RANK"], std::to_string(4 + local));
    EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"],
              "/run/job/attempt_0/" + std::to_string(local) + "/error.json");
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(4 + local));
  }
}

TEST(ResolveJob, GivenPortIsKept) {
  auto o = two_nodes();
  EXPECT_FALSE(resolve_job(o, Env()).port_given);
  o.master_port = 12345;
  auto job = resolve_job(o, Env());
  EXPECT_EQ(job.master_port, 12345);
  EXPECT_TRUE(job.port_given);
}

TEST(ResolveJob, ARendezvousMeetsAtItsEndpointUnderItsId) {
  LaunchOptions o;
  o.nproc_per_node = 2, o.nnodes = 2, o.command = {"check"};
  o.rdzv_endpoint = "node0:1234";
  o.rdzv_id = "job42";
  auto job = resolve_job(o, Env());
  EXPECT_TRUE(job.rendezvous);
  EXPECT_EQ(job.node_rank, -1);  // assigned at the rendezvous
  EXPECT_EQ(job.master_addr, "node0");
  EXPECT_EQ(job.master_port, 1234);
  EXPECT_EQ(job.token, "rdzv-job42");
  EXPECT_EQ(
      resolve_job(o, Env(std::map<std::string, std::string>{{"GPUDIAG_TOKEN", "mine"}})).token,
      "mine");
  o.rdzv_endpoint = "node0";
  EXPECT_EQ(resolve_job(o, Env()).master_port, 29400);
  o.rdzv_endpoint.clear(), o.master_addr = "node1";  // no --node-rank: meet at the master
  job = resolve_job(o, Env());
  EXPECT_TRUE(job.rendezvous);
  EXPECT_EQ(job.master_port, 29500);
}

TEST(RankEnvironment, TellsTheRestartCount) {
  LaunchOptions o;
  o.command = {"check"}, o.max_restarts = 3;
  auto job = resolve_job(o, Env());
  job.restart_count = 2;
  auto env = as_map(rank_environment(
      Env(std::map<std::string, std::string>{{"TORCHELASTIC_RESTART_COUNT", "9"}}), job, 0));
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
}

}  // namespace
}  // namespace gpudiag::launch
