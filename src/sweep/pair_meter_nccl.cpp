// The sweep's NCCL meter (pair_meter.h): one stream and a device workspace
// for the rank's GPU (selected and tested by the caller), and per pair a
// two-rank NCCL communicator, created non-blocking with the deadline and
// aborted on failure (nccl_init.cpp), destroyed when the pair is done.
#include "comm/nccl.h"
#include "gpu/cuda.h"
#include "gpu/cuda_ops.h"
#include "sweep/pair_meter.h"
#include "util/error.h"

namespace gpudiag::sweep {

namespace {

struct DeviceContext {
  Stream stream;
  DeviceBuffer scratch{sizeof(float)};
};

class NcclPairMeter : public PairMeter {
 public:
  explicit NcclPairMeter(std::string lib) : lib_(std::move(lib)) {
    const NcclLibrary& nccl = load_nccl(lib_);
    if (!nccl.usable()) throw Error(ExitCode::broken, nccl.error);
    api_ = nccl.api;
    device_ = std::make_shared<DeviceContext>();
    const CudaOps& ops = cuda_ops();
    const int e = ops.memset_async(device_->scratch.get(), 0, sizeof(float), device_->stream.handle());
    if (e != CudaOps::kSuccess)
      throw Error(ExitCode::broken, "cudaMemsetAsync failed: " + cuda_error_text(ops, e));
    wait_stream(ops, device_->stream.handle(), "clearing the sweep's scratch float",
                Deadline::after_seconds(30));
    workspace_ = make_device_workspace(ops, device_->stream.handle(), device_);
  }
  std::string name() const override { return "nccl"; }
  std::string endpoint() const override { return {}; }
  std::string make_pair_id() override { return nccl_make_unique_id(*api_); }
  std::unique_ptr<Communicator> connect(const PairPeer& me, const PairPeer& other, int,
                                        Deadline deadline) override {
    const bool lower = me.rank < other.rank;
    const std::string& id = lower ? me.pair_id : other.pair_id;
    if (id.empty()) throw Error(ExitCode::broken, "no NCCL id for the pair with " + other.label);
    NcclContext ctx;
    ctx.nccl = api_;
    ctx.cuda = &cuda_ops();
    ctx.stream = device_->stream.handle();
    ctx.scratch = static_cast<float*>(device_->scratch.get());
    ctx.owner = device_;
    return make_nccl_communicator(ctx, id, lower ? 0 : 1, 2, deadline, {});
  }
  Workspace& workspace() override { return *workspace_; }

 private:
  std::string lib_;
  const NcclApi* api_ = nullptr;
  std::shared_ptr<DeviceContext> device_;
  std::unique_ptr<Workspace> workspace_;
};

}  // namespace

std::unique_ptr<PairMeter> make_nccl_pair_meter(const std::string& nccl_lib) {
  return std::make_unique<NcclPairMeter>(nccl_lib);
}

}  // namespace gpudiag::sweep
