#include "rendezvous/job_token.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

using Vars = std::map<std::string, std::string>;

TEST(JobToken, ExplicitTokenWins) {
  Env env(Vars{{"GPUDIAG_TOKEN", "abc"}, {"SLURM_JOB_ID", "12"}, {"TORCHELASTIC_RUN_ID", "r"}});
  EXPECT_EQ(job_token(env).value, "abc");
  EXPECT_EQ(job_token(env).source, "GPUDIAG_TOKEN");
}

TEST(JobToken, SlurmJobAndStep) {
  EXPECT_EQ(job_token(Env(Vars{{"SLURM_JOB_ID", "12"}, {"SLURM_STEP_ID", "3"}})).value,
            "slurm-12.3");
  EXPECT_EQ(job_token(Env(Vars{{"SLURM_JOB_ID", "12"}})).value, "slurm-12");
  // An empty GPUDIAG_TOKEN counts as unset.
  EXPECT_EQ(job_token(Env(Vars{{"GPUDIAG_TOKEN", ""}, {"SLURM_JOB_ID", "9"}})).value, "slurm-9");
}

TEST(JobToken, TorchElasticRunIdThenDefault) {
  EXPECT_EQ(job_token(Env(Vars{{"TORCHELASTIC_RUN_ID", "none"}})).value, "torchelastic-none");
  EXPECT_EQ(job_token(Env()).value, "gpudiag-by-hand");
}

}  // namespace
}  // namespace gpudiag
