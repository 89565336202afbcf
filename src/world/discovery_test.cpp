#include "world/discovery.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace gpudiag {
namespace {

World from(std::map<std::string, std::string> vars) { return discover_world(Env(vars)); }

TEST(Discovery, NoLauncherIsRankZeroOfOne) {
  auto w = from({{"HOME", "/root"}});
  EXPECT_EQ(w.launcher, Launcher::none);
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
  EXPECT_FALSE(w.mpi_launched());
}

TEST(Discovery, Torchrun) {
  auto w = from({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                 {"TORCHELASTIC_RUN_ID", "abc"}});
  EXPECT_EQ(w.launcher, Launcher::torchrun);
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.size, 8);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 4);
  EXPECT_TRUE(w.warnings.empty());
}

TEST(Discovery, GpudiagLaunch) {
  auto w = from({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "4"},
                 {"GPUDIAG_LAUNCH_ID", "x"}});
  EXPECT_EQ(w.launcher, Launcher::gpudiag_launch);
  EXPECT_EQ(w.rank, 2);
}

TEST(Discovery, OpenMpi) {
  auto w = from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(w.launcher, Launcher::open_mpi);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_TRUE(w.mpi_launched());
}

TEST(Discovery, Mvapich) {
  auto w = from({{"MV2_COMM_WORLD_RANK", "1"}, {"MV2_COMM_WORLD_SIZE", "2"},
                 {"MV2_COMM_WORLD_LOCAL_RANK", "1"}, {"MV2_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(w.launcher, Launcher::mvapich);
  EXPECT_EQ(w.rank, 1);
}

TEST(Discovery, Hydra) {
  auto w = from({{"PMI_RANK", "6"}, {"PMI_SIZE", "7"}, {"MPI_LOCALRANKID", "0"},
                 {"MPI_LOCALNRANKS", "1"}});
  EXPECT_EQ(w.launcher, Launcher::hydra);
  EXPECT_EQ(w.rank, 6);
  EXPECT_EQ(w.local_size, 1);
}

TEST(Discovery, SlurmStepWithUniformTasksPerNode) {
  auto w = from({{"SLURM_JOB_ID", "12"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "3"},
                 {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "2"}});
  EXPECT_EQ(w.launcher, Launcher::slurm);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_FALSE(w.mpi_launched());
}

TEST(Discovery, SlurmStepLayoutPicksThisNode) {
  auto w = from({{"SLURM_STEP_ID", "1"}, {"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"},
                 {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "3"},
                 {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}});
  EXPECT_EQ(w.local_size, 1);
}

TEST(Discovery, SlurmWithPmixCanInitialiseMpi) {
  auto w = from({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "1"}, {"PMIX_RANK", "1"}});
  EXPECT_TRUE(w.pmix);
  EXPECT_TRUE(w.mpi_launched());
}

TEST(Discovery, SbatchScriptItselfIsNotASrunStep) {
  // The batch script has SLURM_PROCID=0 and SLURM_NTASKS of the whole allocation.
  auto w = from({{"SLURM_JOB_ID", "12"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"},
                 {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(w.launcher, Launcher::none);
}

TEST(Discovery, MpirunInsideSbatchUsesOpenMpi) {
  auto w = from({{"SLURM_JOB_ID", "12"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"},
                 {"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}});
  EXPECT_EQ(w.launcher, Launcher::open_mpi);
  EXPECT_EQ(w.rank, 5);
  EXPECT_TRUE(w.warnings.empty());
}

TEST(Discovery, TorchrunInsideSrunWinsWithoutWarning) {
  auto w = from({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "0"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "4"}, {"TORCHELASTIC_RUN_ID", "j"}});
  EXPECT_EQ(w.launcher, Launcher::torchrun);
  EXPECT_EQ(w.rank, 5);
  EXPECT_TRUE(w.warnings.empty());
}

TEST(Discovery, StaleRankUnderMpirunLosesAndWarnsNamingBoth) {
  auto w = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "3"},
                 {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(w.launcher, Launcher::open_mpi);
  EXPECT_EQ(w.rank, 3);
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_NE(w.warnings[0].find("rank 3/4"), std::string::npos) << w.warnings[0];
  EXPECT_NE(w.warnings[0].find("rank 0/2"), std::string::npos) << w.warnings[0];
  EXPECT_NE(w.warnings[0].find("GPUDIAG_RANK_SOURCE=env"), std::string::npos) << w.warnings[0];
}

TEST(Discovery, AgreeingByHandSetIsNoWarning) {
  auto w = from({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                 {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_TRUE(w.warnings.empty());
}

TEST(Discovery, ForcedSourceOverridesOrder) {
  auto w = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
                 {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"GPUDIAG_RANK_SOURCE", "env"}});
  EXPECT_EQ(w.launcher, Launcher::by_hand);
  EXPECT_EQ(w.size, 2);
  EXPECT_THROW(from({{"GPUDIAG_RANK_SOURCE", "slurm"}}), UsageError);
}

TEST(Discovery, ByHand) {
  auto w = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(w.launcher, Launcher::by_hand);
  EXPECT_EQ(w.local_size, -1);
}

TEST(Discovery, HalfASetIsAnErrorNamingTheMissingVariable) {
  try {
    from({{"RANK", "1"}});
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("WORLD_SIZE"), std::string::npos) << e.what();
  }
  EXPECT_THROW(from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "x"}}),
               UsageError);  // torchrun always sets LOCAL_RANK
  EXPECT_THROW(from({{"OMPI_COMM_WORLD_RANK", "1"}}), UsageError);
}

TEST(Discovery, NonNumericAndOutOfRangeAreErrors) {
  EXPECT_THROW(from({{"RANK", "one"}, {"WORLD_SIZE", "2"}}), UsageError);
  EXPECT_THROW(from({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), UsageError);
  EXPECT_THROW(from({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), UsageError);
  EXPECT_THROW(from({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), UsageError);
  EXPECT_THROW(from({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
               UsageError);
  EXPECT_THROW(from({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                     {"SLURM_LOCALID", "0"}, {"PMIX_RANK", "0"}}),
               UsageError);
}

TEST(SlurmTasksPerNode, Expands) {
  EXPECT_EQ(expand_slurm_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_slurm_tasks_per_node("4"), (std::vector<int>{4}));
  EXPECT_TRUE(expand_slurm_tasks_per_node("2(x").empty());
  EXPECT_TRUE(expand_slurm_tasks_per_node("a").empty());
}

}  // namespace
}  // namespace gpudiag
