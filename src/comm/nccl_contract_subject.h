// What the NCCL contract suite (nccl_contract_test.cpp) runs against: the
// model (nccl_model.h) at 1, 2 and 4 ranks here, or with
// GPUDIAG_NCCL_CONTRACT=real a real libnccl.so.2 on a GPU, one process per
// rank (RANK and WORLD_SIZE, as `gpudiag launch` sets them; the NCCL unique
// id of each communicator passes through files in GPUDIAG_CONTRACT_DIR;
// GPUDIAG_CONTRACT_DEVICE picks the GPU, 0 by default). Every rank runs the
// same tests in the same order, so their NCCL calls match. The model runs as
// NCCL 2.28 at 1, 2 and 4 ranks and as 2.18 and 2.22 at 2 ranks (rules that
// changed between versions are stated per version).
//
// A test about NCCL's environment asks for a subject with those variables:
// the model is given them (never the process's environment); real NCCL reads
// the process's and caches some at its first init (src/include/param.h
// NCCL_PARAM), so such a test runs on real NCCL only in a process started
// with them (scripts/gpu-check.sh does) and is skipped otherwise.
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "comm/nccl_api.h"
#include "gpu/cuda_ops.h"

namespace gpudiag {

class ContractSubject {
 public:
  virtual ~ContractSubject() = default;
  virtual const NcclApi& nccl() = 0;
  virtual const CudaOps& cuda() = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool real() const = 0;
  virtual void* stream() = 0;
  /// `bytes` of device memory (zeroed), kept until the subject goes.
  virtual void* device(std::size_t bytes) = 0;
  /// The same id on every rank for the same `key` (rank 0 makes it).
  virtual nccl_abi::UniqueId unique_id(const std::string& key) = 0;
  /// The same `nid` ids on every rank for the same `key`, in root order: id i
  /// made by the rank NCCL's guide names for it (comm/nccl_roots.h,
  /// nccl_root_first_rank), as gpudiag's check makes them.
  virtual std::vector<nccl_abi::UniqueId> unique_ids(const std::string& key, int nid) = 0;
  /// The ids the other ranks pass to their next init, when a test has them
  /// pass other ids than rank 0 (the model's set_peer_ids; on real NCCL the
  /// test's other ranks pass them themselves).
  virtual void peers_use_ids(const std::vector<nccl_abi::UniqueId>& ids) = 0;
  /// The other ranks will not take part in what this rank does next (the
  /// model's peers_absent; on real NCCL the test's other ranks skip it).
  virtual void peers_absent(bool absent) = 0;
};

struct ContractParam {
  std::string name;  ///< "model1", "model2", "model4", "model2_nccl2_22", "real"
  bool real = false;
  int size = 1;
  int version = 22809;  ///< the model's NCCL
};

using EnvVars = std::map<std::string, std::string>;

/// How GoogleTest prints a subject: its name.
inline void PrintTo(const ContractParam& p, std::ostream* os) { *os << p.name; }

/// The subjects of this run: the model's sizes and versions, or the real one.
std::vector<ContractParam> contract_params();
/// The subject, its NCCL seeing `env`. Real NCCL: null when the process's
/// environment differs from `env` (the caller skips).
std::unique_ptr<ContractSubject> make_contract_subject(const ContractParam& p,
                                                       const EnvVars& env = {});

}  // namespace gpudiag
