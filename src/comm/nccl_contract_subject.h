// What the NCCL contract suite (nccl_contract_test.cpp) runs against: the
// model (nccl_model.h) at 1, 2 and 4 ranks here, or with
// GPUDIAG_NCCL_CONTRACT=real a real libnccl.so.2 on a GPU, one process per
// rank (RANK and WORLD_SIZE, as `gpudiag launch` sets them; the NCCL unique
// id of each communicator passes through files in GPUDIAG_CONTRACT_DIR;
// GPUDIAG_CONTRACT_DEVICE picks the GPU, 0 by default). Every rank runs the
// same tests in the same order, so their NCCL calls match.
#pragma once

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
  /// The other ranks will not take part in what this rank does next (the
  /// model's peers_absent; on real NCCL the test's other ranks skip it).
  virtual void peers_absent(bool absent) = 0;
};

struct ContractParam {
  std::string name;  ///< "model1", "model2", "model4", "real"
  bool real = false;
  int size = 1;
};

/// How GoogleTest prints a subject: its name.
inline void PrintTo(const ContractParam& p, std::ostream* os) { *os << p.name; }

/// The subjects of this run: the model's three sizes, or the real one.
std::vector<ContractParam> contract_params();
std::unique_ptr<ContractSubject> make_contract_subject(const ContractParam& p);

}  // namespace gpudiag
