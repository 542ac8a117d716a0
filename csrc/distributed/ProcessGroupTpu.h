// tpu_dist: the c10d backend for tpu tensors.
//
// One process drives one device (torchrun's model). Collectives run on a
// host transport, another c10d Backend (Gloo, which ships with PyTorch),
// on host views of the tpu tensors: where device memory is host memory (the
// CPU plugin) inputs are read in place and a result's host block becomes
// the tpu tensor's buffer; elsewhere each input is read to the host once and
// each result written back. Either way a result lands in every alias of a
// view. A device transport (StableHLO collectives run by the plugin across
// processes) is a second Transport behind the same class.
//
// Before each collective the ranks swap a small descriptor of what they
// pass (op, dtype, shape, root, reduce op), so a mismatch is an error on
// every rank naming the op, the shapes and the ranks, never a wrong result
// or a hang (TORCH_TPU_DIST_CHECK=0 skips it).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_tpu {

// Process-wide counters for the metrics report.
struct DistStats {
  std::atomic<int64_t> collectives{0};
  std::atomic<int64_t> staged_bytes{0};  // copied device -> host and back
  std::atomic<int64_t> zero_copy_bytes{0};  // read in place, or results lent to the device
  std::atomic<int64_t> staging_ns{0};    // time in those copies
  std::atomic<int64_t> compute_wait_ns{0};  // waiting for the device to compute an input
  std::atomic<int64_t> transport_ns{0};  // time waiting on the transport
  std::atomic<int64_t> checks{0};        // descriptor swaps
};
DistStats& dist_stats();
void reset_dist_stats();

// Host memory the transport works in, 64-byte aligned. Where the device
// works in host memory (the CPU plugin) a block holding a result becomes
// the tpu tensor's buffer instead of being copied into one, and is |lent|
// until that buffer dies; then it serves the next collective.
struct HostBlock {
  at::Tensor bytes;  // uint8
  std::atomic<bool> lent{false};
};

// A result to move into a tpu tensor once the transport is done: |host|,
// which is |block|'s memory when it has one.
struct WriteBack {
  at::Tensor dst;
  at::Tensor host;
  std::shared_ptr<HostBlock> block;
};

// A finished or pending collective. wait() waits for the transport, then
// writes the host results into their tpu destinations (on the caller's
// thread: the device runtime is driven from there).
class TpuWork : public c10d::Work {
 public:
  TpuWork(int rank, c10d::OpType type, std::string name,
          c10::intrusive_ptr<c10d::Work> host_work, std::vector<WriteBack> write_back,
          std::vector<at::Tensor> outputs);
  bool isCompleted() override;
  bool isSuccess() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::string name_;
  c10::intrusive_ptr<c10d::Work> host_work_;
  std::vector<WriteBack> write_back_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupTpu : public c10d::Backend {
 public:
  // |host| runs the collectives on host tensors (a ProcessGroupGloo over
  // the same ranks).
  ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
                  std::chrono::milliseconds timeout);
  ~ProcessGroupTpu() override;

  const std::string getBackendName() const override { return "tpu_dist"; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  // Every op runs when issued, so a coalesced batch is its ops in order.
  void startCoalescing() override {}
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  c10::intrusive_ptr<c10d::Backend> host() const { return host_; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(
      std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(
      std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(
      std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

 private:
  struct Call;      // one collective being staged (ProcessGroupTpu.cpp)
  struct HostPool;  // staging buffers reused across collectives

  // Swaps |mine| with every rank and throws on all of them if the fields
  // the op needs equal differ.
  void check_agreement(const Call& call);
  c10::intrusive_ptr<c10d::Work> finish(Call& call, c10::intrusive_ptr<c10d::Work> host_work,
                                        bool defer = false);
  // The Work of a batch of ops that already ran one by one.
  c10::intrusive_ptr<c10d::Work> batch_done(const char* op, std::vector<at::Tensor> outputs);
  // Runs |run| on each (output, input) pair: the coalesced forms.
  c10::intrusive_ptr<c10d::Work> each_pair(const char* op, std::vector<at::Tensor>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const std::function<void(at::Tensor&, at::Tensor&)>& run);

  c10::intrusive_ptr<c10d::Backend> host_;
  std::chrono::milliseconds timeout_;
  bool check_;
  std::unique_ptr<HostPool> pool_;
};

}  // namespace torch_tpu
