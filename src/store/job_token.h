// The job token and the job secret: what they are (both are read from the
// environment once, by settings/job_settings.h read_job_token and
// read_job_secret, in the order below).
//
// The token keeps the ranks of one job from joining another job's store when
// two jobs share a host and a MASTER_PORT (a stale launcher, two by-hand runs,
// a port reused across SLURM jobs). It is not a secret, only a name every rank
// of a job derives the same way:
//
//   1. GPUDIAG_TOKEN, when set and non-empty (`gpudiag launch` exports a
//      random one to its children);
//   2. "slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID>" under SLURM (the step is left
//      out when SLURM_STEP_ID is unset);
//   3. "torchelastic-<TORCHELASTIC_RUN_ID>" under torchrun;
//   4. "gpudiag-by-hand" otherwise, so ranks started by hand meet as long as
//      nobody else uses the same MASTER_ADDR:MASTER_PORT.
//
// The secret is what keeps a local user of a shared node (who can compute the
// token) out of the store: every connection proves it knows it with an HMAC
// challenge-response at the handshake (storewire::client_proof). It comes from
//
//   1. GPUDIAG_SECRET, when set and non-empty (`gpudiag launch` exports one to
//      its children: the one it was given, or a random one on a single node);
//   2. GPUDIAG_SECRET_FILE: a file only its owner may read (refused when its
//      group or others have any access), its content without the trailing
//      newline;
//   3. none: the store is unauthenticated (said once, by rank 0).
//
// SLURM offers its tasks nothing that only the job's processes can read, so
// under SLURM the secret comes from the same variable or file (srun passes the
// batch script's environment to every task).
#pragma once

#include <optional>
#include <string>


namespace gpudiag {

struct JobToken {
  std::string value;
  /// Where it came from, for messages: "GPUDIAG_TOKEN", "SLURM_JOB_ID=123", ...
  std::string source;
};

struct JobSecret {
  std::string key;     ///< the HMAC key: the variable's or file's bytes
  std::string source;  ///< "GPUDIAG_SECRET", "--secret-file /path", ...
};

/// The longest secret taken (a file or variable larger than this is refused).
inline constexpr std::size_t kMaxSecretBytes = 4096;

/// Reads a secret file (`how` names it in messages: "--secret-file",
/// "GPUDIAG_SECRET_FILE"). Throws UsageError, in one line, when the file is
/// not a regular file, its group or others may access it, or it is empty.
JobSecret read_secret_file(const std::string& path, const std::string& how);

/// 32 random bytes from OpenSSL's RAND_bytes, hex-encoded (64 characters).
std::string random_secret();

}  // namespace gpudiag
