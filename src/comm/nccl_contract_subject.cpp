// The NCCL contract suite's subjects (nccl_contract_subject.h): the model,
// and real NCCL through load_nccl() and the CUDA runtime (gpu/cuda.h).
#include "comm/nccl_contract_subject.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "comm/nccl_model.h"
#include "comm/nccl_roots.h"
#include "gpu/cuda.h"

namespace gpudiag {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

class ModelSubject : public ContractSubject {
 public:
  ModelSubject(const ContractParam& p, const EnvVars& env)
      : model_(options(p, env)), size_(p.size) {}
  const NcclApi& nccl() override { return model_.nccl(); }
  const CudaOps& cuda() override { return model_.cuda(); }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  bool real() const override { return false; }
  void* stream() override { return model_.stream(); }
  void* device(std::size_t bytes) override {
    blocks_.emplace_back(bytes, '\0');
    return blocks_.back().data();
  }
  nccl_abi::UniqueId unique_id(const std::string&) override {
    nccl_abi::UniqueId id{};
    model_.nccl().GetUniqueId(&id);
    return id;
  }
  std::vector<nccl_abi::UniqueId> unique_ids(const std::string&, int nid) override {
    // The model stands for every rank's NCCL: it makes them all.
    std::vector<nccl_abi::UniqueId> ids(static_cast<std::size_t>(std::max(nid, 0)));
    for (auto& id : ids) model_.nccl().GetUniqueId(&id);
    return ids;
  }
  void peers_use_ids(const std::vector<nccl_abi::UniqueId>& ids) override {
    model_.set_peer_ids(ids);
  }
  void peers_absent(bool absent) override { model_.set_peers_absent(absent); }

 private:
  static NcclModel::Options options(const ContractParam& p, const EnvVars& env) {
    NcclModel::Options o;
    o.nranks = p.size;
    o.version = p.version;
    o.env = env;
    o.seed = 7u + static_cast<unsigned>(p.size);
    return o;
  }
  NcclModel model_;
  int size_;
  std::vector<std::string> blocks_;
};

class RealSubject : public ContractSubject {
 public:
  RealSubject() : rank_(env_int("RANK", 0)), size_(env_int("WORLD_SIZE", 1)) {
    const NcclLibrary& lib = load_nccl();
    if (!lib.usable()) throw std::runtime_error("no usable NCCL: " + lib.error);
    api_ = lib.api;
    set_device(env_int("GPUDIAG_CONTRACT_DEVICE", 0));
    stream_ = std::make_unique<Stream>();
    const char* dir = std::getenv("GPUDIAG_CONTRACT_DIR");
    dir_ = dir ? dir : "";
    if (size_ > 1 && dir_.empty())
      throw std::runtime_error("GPUDIAG_CONTRACT_DIR must name a folder all ranks share");
  }
  const NcclApi& nccl() override { return *api_; }
  const CudaOps& cuda() override { return cuda_ops(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool real() const override { return true; }
  void* stream() override { return stream_->handle(); }
  void* device(std::size_t bytes) override {
    buffers_.push_back(std::make_unique<DeviceBuffer>(bytes));
    return buffers_.back()->get();
  }
  nccl_abi::UniqueId unique_id(const std::string& key) override {
    return shared_id(key, 0);
  }
  std::vector<nccl_abi::UniqueId> unique_ids(const std::string& key, int nid) override {
    std::vector<nccl_abi::UniqueId> ids;
    for (int i = 0; i < nid; ++i)
      ids.push_back(shared_id(key + "_" + std::to_string(i), nccl_root_first_rank(i, size_, nid)));
    return ids;
  }
  void peers_use_ids(const std::vector<nccl_abi::UniqueId>&) override {}
  void peers_absent(bool) override {}

 private:
  /// An id `maker` makes and every rank reads, through a file in the shared folder.
  nccl_abi::UniqueId shared_id(const std::string& key, int maker) {
    nccl_abi::UniqueId id{};
    if (size_ == 1) {
      api_->GetUniqueId(&id);
      return id;
    }
    const std::string path = dir_ + "/" + key + ".id";
    if (rank_ == maker) {
      if (api_->GetUniqueId(&id) != nccl_abi::kSuccess)
        throw std::runtime_error("ncclGetUniqueId failed");
      const std::string tmp = path + ".tmp";
      std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof id.internal);
      if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw std::runtime_error("cannot write " + path);
      return id;
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in && in.read(id.internal, sizeof id.internal)) return id;
      if (std::chrono::steady_clock::now() > give_up)
        throw std::runtime_error("rank " + std::to_string(maker) + " never wrote " + path);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  const NcclApi* api_ = nullptr;
  int rank_, size_;
  std::string dir_;
  std::unique_ptr<Stream> stream_;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
};

}  // namespace

std::vector<ContractParam> contract_params() {
  const char* which = std::getenv("GPUDIAG_NCCL_CONTRACT");
  if (which && std::strcmp(which, "real") == 0)
    return {{"real", true, env_int("WORLD_SIZE", 1)}};
  return {{"model1", false, 1},
          {"model2", false, 2},
          {"model4", false, 4},
          {"model2_nccl2_18", false, 2, 21803},
          {"model2_nccl2_22", false, 2, 22203}};
}

std::unique_ptr<ContractSubject> make_contract_subject(const ContractParam& p, const EnvVars& env) {
  if (!p.real) return std::make_unique<ModelSubject>(p, env);
  // The variables the suite's tests set must be as the test asks: set to
  // its value, or unset when it does not name them.
  EnvVars names = env;
  names.emplace("NCCL_COMM_BLOCKING", "");
  names.emplace("NCCL_COMM_ID", "");
  for (const auto& [name, unused] : names) {
    const char* v = std::getenv(name.c_str());
    const auto want = env.find(name);
    if (want == env.end() ? v != nullptr : !v || want->second != v) return nullptr;
  }
  return std::make_unique<RealSubject>();
}

}  // namespace gpudiag
