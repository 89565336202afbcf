// The secret-name rule: which variables output never shows.
#include "util/secret.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

TEST(SecretNames, TheJobSecretAndCommonCredentialsAreHidden) {
  for (const char* n : {"GPUDIAG_SECRET", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "WANDB_API_KEY",
                        "DB_PASSWORD", "my_passwd", "GOOGLE_APPLICATION_CREDENTIALS",
                        "SSH_PRIVATE_KEY_PATH", "gpudiag_secret"})
    EXPECT_TRUE(is_secret_name(n)) << n;
  for (const char* n : {"GPUDIAG_SECRET_FILE", "NCCL_IB_PKEY", "NCCL_SOCKET_IFNAME", "MASTER_ADDR",
                        "CUDA_VISIBLE_DEVICES", "KEY", "RANK"})
    EXPECT_FALSE(is_secret_name(n)) << n;
  EXPECT_EQ(hidden_value("abc"), "(set, 3 bytes, not shown)");
}

}  // namespace
}  // namespace gpudiag
