// The job's settings, read once: what each variable gives, and that a
// malformed setting stops only a job that uses it (with its one-line error).
#include "settings/job_settings.h"

#include <gtest/gtest.h>

#include <map>

namespace gpudiag {
namespace {

using Vars = std::map<std::string, std::string>;

Vars ranks(int n, Vars more = {}) {
  Vars v{{"RANK", "0"}, {"WORLD_SIZE", std::to_string(n)}, {"LOCAL_RANK", "0"},
         {"LOCAL_WORLD_SIZE", std::to_string(n)}};
  for (auto& [k, x] : more) v[k] = x;
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.one_line();
  }
  return "no error";
}

TEST(JobSettings, AMalformedTreeSettingIsReadButRefusedOnlyWhenUsed) {
  auto s = read_job_settings(Env(ranks(2, {{"GPUDIAG_TREE", "sometimes"}})), 10);
  EXPECT_FALSE(s.tree.ok());
  EXPECT_NE(error_of([&] { s.tree.get(); }).find("GPUDIAG_TREE='sometimes' is not auto, on or off"),
            std::string::npos);
  // The rest of the job's settings are there.
  EXPECT_EQ(s.world.size, 2);
  EXPECT_EQ(s.timeout_s, 10);
}

TEST(JobSettings, TreeSettingsFromTheirVariables) {
  auto t = read_job_settings(Env(ranks(2, {{"GPUDIAG_TREE", "on"},
                                           {"GPUDIAG_TREE_GROUP_NODES", "4"},
                                           {"GPUDIAG_TREE_PORT", "4000"},
                                           {"GPUDIAG_TREE_LEADER", "launch"},
                                           {"GPUDIAG_MPI_NODE_SIZE", "2"}})),
                             10)
               .tree.get();
  EXPECT_EQ(t.mode, TreeSettings::Mode::on);
  EXPECT_EQ(t.group_nodes, 4);
  EXPECT_EQ(t.node_port, 4000);
  EXPECT_TRUE(t.launch_leads);
  EXPECT_EQ(t.mpi_node_size, 2);
  auto d = read_tree_settings(Env());
  EXPECT_EQ(d.mode, TreeSettings::Mode::automatic);
  EXPECT_EQ(d.group_nodes, 0);
  EXPECT_EQ(d.node_port, 0);
  EXPECT_FALSE(d.launch_leads);
  for (const char* bad : {"1", "4097", "x"})
    EXPECT_NE(error_of([&] { read_tree_settings(Env(Vars{{"GPUDIAG_TREE_GROUP_NODES", bad}})); })
                  .find("is not a number of nodes (2-4096)"),
              std::string::npos)
        << bad;
  EXPECT_NE(error_of([&] { read_tree_settings(Env(Vars{{"GPUDIAG_TREE_PORT", "65535"}})); })
                .find("GPUDIAG_TREE_PORT='65535' is not a port"),
            std::string::npos);
}

TEST(JobSettings, AMissingStoreAddressStopsOnlyAStoreJob) {
  auto s = read_job_settings(Env(ranks(2)), 10);
  EXPECT_FALSE(s.store.address.ok());
  EXPECT_NE(error_of([&] { s.store.address.get(); }).find("MASTER_ADDR is not set"),
            std::string::npos);
  auto m = read_job_settings(Env(ranks(2, {{"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29511"}})), 10);
  EXPECT_EQ(m.store.address.get().host, "10.1.2.3");
  EXPECT_EQ(m.store.address.get().port, 29511);
  EXPECT_EQ(m.store.server, StoreSettings::Server::rank0);
}

TEST(JobSettings, WhoServesTheStore) {
  auto torch = read_job_settings(
      Env(ranks(2, {{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RUN_ID", "r7"},
                    {"TORCHELASTIC_RESTART_COUNT", "2"}})),
      10);
  EXPECT_EQ(torch.store.server, StoreSettings::Server::torch_agent);
  EXPECT_EQ(torch.store.torch_prefix, "gpudiag/r7/2/");
  EXPECT_FALSE(torch.store.torch_by_launch);
  EXPECT_EQ(torch.store.token.value, "torchelastic-r7");
  auto by_launch = read_job_settings(
      Env(ranks(2, {{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"GPUDIAG_LAUNCH_ID", "ab"}})), 10);
  EXPECT_TRUE(by_launch.store.torch_by_launch);
  auto launcher = read_job_settings(Env(ranks(2, {{"GPUDIAG_STORE", "launcher"}})), 10);
  EXPECT_EQ(launcher.store.server, StoreSettings::Server::launcher);
}

TEST(JobSettings, AnUnreadableSecretFileStopsOnlyAJobThatProvesASecret) {
  auto s = read_job_settings(Env(ranks(2, {{"GPUDIAG_SECRET_FILE", "/nonexistent/secret"}})), 10);
  EXPECT_FALSE(s.store.secret.ok());
  EXPECT_NE(error_of([&] { s.store.secret.get(); }).find("/nonexistent/secret cannot be read"),
            std::string::npos);
  auto none = read_job_settings(Env(ranks(2)), 10);
  ASSERT_TRUE(none.store.secret.ok());
  EXPECT_FALSE(none.store.secret.get().has_value());
}

TEST(JobSettings, TheRingAddressIsGivenOrTheHostsName) {
  EXPECT_EQ(read_job_settings(Env(ranks(2, {{"GPUDIAG_HOST_ADDR", "10.9.8.7"}})), 10).ring_address,
            "10.9.8.7");
  auto s = read_job_settings(Env(ranks(2)), 10);
  EXPECT_EQ(s.ring_address, s.host);
}

TEST(JobSettings, TheHistoryFolderIsTheOptionElseTheEnvironment) {
  const Env env(std::map<std::string, std::string>{{"GPUDIAG_HISTORY", "/shared/h"}});
  EXPECT_EQ(read_history_dir(env, ""), "/shared/h");
  EXPECT_EQ(read_history_dir(env, "/mine"), "/mine");
  EXPECT_EQ(read_history_dir(Env(), ""), "");
  EXPECT_EQ(read_history_dir(Env(std::map<std::string, std::string>{{"GPUDIAG_HISTORY", ""}}), ""), "");
}

TEST(Checked, ADefaultIsRefusedAsUnread) {
  Checked<int> c;
  EXPECT_FALSE(c.ok());
  EXPECT_NE(error_of([&] { c.get(); }).find("used before it was read"), std::string::npos);
  EXPECT_EQ(Checked<int>(3).get(), 3);
}

}  // namespace
}  // namespace gpudiag
