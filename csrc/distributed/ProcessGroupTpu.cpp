#include "distributed/ProcessGroupTpu.h"

#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "aten/TensorRef.h"

namespace torch_tpu {

namespace {

DistStats stats;

using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

std::string dtype_name(c10::ScalarType t) {
  return "torch." + std::string(c10::getDtypeNames(t).first);
}

std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << c10::getDtypeNames(t.scalar_type()).first << t.sizes();
  return s.str();
}

const char* reduce_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0);
}

// TORCH_TPU_DIST_ZERO_COPY=0 copies every staged tensor (to compare, or
// to rule the zero-copy paths out when chasing a problem).
bool zero_copy() {
  static const bool on = !env_off("TORCH_TPU_DIST_ZERO_COPY");
  return on;
}

void block_returned(void* ctx) {
  auto* block = static_cast<std::shared_ptr<HostBlock>*>(ctx);
  (*block)->lent = false;
  delete block;
}

// Moves each result into its tpu tensor: a block the device can take as
// the tensor's memory is lent to it, anything else is copied.
void write_back(std::vector<WriteBack>& results) {
  auto t0 = Clock::now();
  bool copied = false;
  for (auto& r : results) {
    if (r.dst.is_same(r.host)) continue;
    const int64_t n = static_cast<int64_t>(r.host.nbytes());
    const bool whole_block = r.block && r.host.data_ptr() == r.block->bytes.data_ptr() &&
                             r.host.is_contiguous();
    if (zero_copy() && whole_block && n > 0 && r.dst.device().is_privateuseone() &&
        r.dst.scalar_type() == r.host.scalar_type() && r.dst.sizes() == r.host.sizes() &&
        !r.dst.is_conj() && !r.dst.is_neg()) {
      r.block->lent = true;
      lend_host(r.dst, r.host, block_returned, new std::shared_ptr<HostBlock>(r.block));
      // Returned already: the device copied it (a plugin whose memory is
      // not the host's; or a view's temporary, already consumed).
      (r.block->lent ? stats.zero_copy_bytes : stats.staged_bytes) += n;
      continue;
    }
    r.dst.copy_(r.host);
    stats.staged_bytes += n;
    copied = true;
  }
  if (copied) stats.staging_ns += ns_since(t0);
  results.clear();
}

std::string transport_message(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}


}  // namespace

DistStats& dist_stats() { return stats; }

void reset_dist_stats() {
  stats.collectives = 0;
  stats.staged_bytes = 0;
  stats.zero_copy_bytes = 0;
  stats.staging_ns = 0;
  stats.compute_wait_ns = 0;
  stats.transport_ns = 0;
  stats.checks = 0;
}

// ---------------------------------------------------------------- TpuWork

TpuWork::TpuWork(int rank, c10d::OpType type, std::string name,
                 c10::intrusive_ptr<c10d::Work> host_work, std::vector<WriteBack> write_back,
                 std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      host_work_(std::move(host_work)),
      write_back_(std::move(write_back)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

bool TpuWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool TpuWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

bool TpuWork::wait(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) {
      if (exception_) std::rethrow_exception(exception_);
      return true;
    }
  }
  try {
    if (host_work_) {
      auto t0 = Clock::now();
      try {
        host_work_->wait(timeout);
      } catch (const std::exception& e) {
        // Name the collective: the transport's message names only sockets.
        C10_THROW_ERROR(DistBackendError,
                        "tpu_dist " + name_ + " failed on rank " + std::to_string(rank_) +
                            " (a peer died, timed out or issued a different collective): " +
                            transport_message(e));
      }
      stats.transport_ns += ns_since(t0);
    }
    write_back(write_back_);
  } catch (...) {
    auto e = std::current_exception();
    future_->setError(e);
    finish(e);
    throw;
  }
  future_->markCompleted(c10::IValue(outputs_));
  finish();
  return true;
}

std::vector<at::Tensor> TpuWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> TpuWork::getFuture() { return future_; }

// ---------------------------------------------------------------- a call

// The fields a rank's descriptor carries, in this order, then (for
// all_to_all) the rows it sends to and receives from each rank.
enum Field { kKind, kDtype, kNdim, kNumel, kRoot, kReduce, kDim0, kDescFields = kDim0 + 6 };

// Host blocks reused from one collective to the next: a fresh buffer of
// tens of MB costs its page faults again on every call.
struct ProcessGroupTpu::HostPool {
  std::vector<std::shared_ptr<HostBlock>> blocks;
  std::vector<const HostBlock*> taken;  // by the collective running now
  // Held while a collective uses the pool (DDP issues its all-reduces from
  // the autograd thread); recursive: a collective may run others inside.
  std::recursive_mutex mu;

  bool is_free(const std::shared_ptr<HostBlock>& b) const {
    return !b->lent && std::find(taken.begin(), taken.end(), b.get()) == taken.end();
  }

  // The smallest free block of at least |n| bytes, or a new one. Free
  // blocks beyond what the largest recent call could use go back to the
  // allocator (lent blocks come back as their buffers die, so the pool
  // would otherwise keep a whole training step's results).
  std::shared_ptr<HostBlock> take(int64_t n) {
    std::shared_ptr<HostBlock> best;
    int64_t spare = 0;
    for (auto& b : blocks) {
      if (!is_free(b)) continue;
      const int64_t have = b->bytes.numel();
      spare += have;
      if (have >= n && (!best || have < best->bytes.numel())) best = b;
    }
    if (!best) {
      best = std::make_shared<HostBlock>();
      best->bytes = at::empty({n}, at::kByte);
      blocks.push_back(best);
    } else {
      spare -= best->bytes.numel();
    }
    taken.push_back(best.get());
    const int64_t keep = std::max<int64_t>(kKeepBytes, 2 * n);
    for (size_t i = blocks.size(); i-- > 0 && spare > keep;) {
      if (!is_free(blocks[i])) continue;
      spare -= blocks[i]->bytes.numel();
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return best;
  }
  static constexpr int64_t kKeepBytes = 256 << 20;
};

struct ProcessGroupTpu::Call {
  const char* op;
  c10d::OpType type;
  at::Tensor shaped;        // the tensor whose dtype (and shape) must agree
  int64_t root = -1;
  int64_t reduce = -1;
  std::vector<int64_t> send_rows, recv_rows;  // all_to_all: per peer
  std::vector<WriteBack> write_back;
  std::vector<at::Tensor> outputs;

  HostPool* pool;  // null: fresh blocks (ops that finish after they return)
  std::unique_lock<std::recursive_mutex> hold;

  Call(const char* op, c10d::OpType type, HostPool* pool) : op(op), type(type), pool(pool) {
    if (!pool) return;
    hold = std::unique_lock<std::recursive_mutex>(pool->mu);
    pool->taken.clear();  // the previous collective has finished
  }

  // A dense host tensor shaped like tpu tensor |t|, in a block of its own.
  std::pair<at::Tensor, std::shared_ptr<HostBlock>> host_block(const at::Tensor& t) {
    const int64_t n = static_cast<int64_t>(t.nbytes());
    if (n == 0) return {at::empty(t.sizes(), t.options().device(at::kCPU)), nullptr};
    std::shared_ptr<HostBlock> b;
    if (pool) {
      b = pool->take(n);
    } else {
      b = std::make_shared<HostBlock>();
      b->bytes = at::empty({n}, at::kByte);
    }
    at::Tensor h = b->bytes.narrow(0, 0, n).view(t.scalar_type()).view(t.sizes());
    return {h, b};
  }

  // Where the transport writes |t|'s result: a dense host tensor (|t|
  // itself for a dense CPU tensor), moved into |t| when it is done.
  at::Tensor receive(const at::Tensor& t) {
    if (t.is_cpu()) {
      at::Tensor h = t.is_contiguous() ? t : t.contiguous();
      write_back.push_back({t, h, nullptr});
      return h;
    }
    auto [h, block] = host_block(t);
    write_back.push_back({t, h, block});
    return h;
  }

  // A host copy of |t| the transport may read and write: a CPU tensor is
  // used as is (it is already where Gloo works), a tpu one is read once.
  at::Tensor to_host(const at::Tensor& t) {
    if (t.is_cpu()) return t;
    at::Tensor h = host_block(t).first;
    copy_in(h, t);
    return h;
  }

  // |t|'s value for the transport to read but not write: its bytes in
  // place where the device works in host memory, else a copy.
  at::Tensor read(const at::Tensor& t) {
    if (t.is_cpu()) return t;
    wait_for(t);
    at::Tensor v = zero_copy() ? host_view(t) : at::Tensor();
    if (!v.defined()) return to_host(t);
    stats.zero_copy_bytes += static_cast<int64_t>(t.nbytes());
    return v;
  }

  // Waits for the device to compute |t| (counted apart from the copies:
  // in DDP that is the backward pass still running).
  static void wait_for(const at::Tensor& t) {
    auto t0 = Clock::now();
    await_value(t);
    stats.compute_wait_ns += ns_since(t0);
  }

  static void copy_in(at::Tensor& h, const at::Tensor& t) {
    wait_for(t);
    auto t0 = Clock::now();
    at::Tensor v = zero_copy() ? host_view(t) : at::Tensor();
    h.copy_(v.defined() ? v : t);
    stats.staged_bytes += static_cast<int64_t>(t.nbytes());
    stats.staging_ns += ns_since(t0);
  }

  // to_host, for a result computed in place: the copy also receives it.
  at::Tensor to_host_in_place(const at::Tensor& t) {
    if (t.is_cpu()) return t;
    at::Tensor h = receive(t);
    copy_in(h, t);
    return h;
  }
};

namespace {

// Every tensor of one call on one device type, and that type cpu or tpu.
void check_devices(const char* op, std::initializer_list<const std::vector<at::Tensor>*> lists) {
  std::optional<at::Device> first;
  for (auto* l : lists) {
    for (const auto& t : *l) {
      TORCH_CHECK_VALUE(t.defined(), "tpu_dist ", op, ": got an undefined tensor");
      TORCH_CHECK_VALUE(t.is_cpu() || t.device().is_privateuseone(), "tpu_dist ", op,
                        ": tensors must be on tpu (or cpu), got ", t.device());
      TORCH_CHECK_VALUE(!t.is_sparse(), "tpu_dist ", op, ": sparse tensors are not supported");
      if (!first) {
        first = t.device();
      } else {
        TORCH_CHECK_VALUE(first->type() == t.device().type(), "tpu_dist ", op,
                          ": tpu and cpu tensors mixed in one call (", *first, " and ",
                          t.device(), "): move them to one device");
      }
    }
  }
}

// The per-rank list a call passes (gather's outputs, scatter's inputs):
// one list of |size| tensors like |like| where |holds| (the root), else none.
void check_rank_list(const char* op, const char* what,
                     const std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& like,
                     int size, bool holds) {
  if (!holds) {
    TORCH_CHECK_VALUE(lists.empty() || (lists.size() == 1 && lists[0].empty()), "tpu_dist ", op,
                      ": only the root passes ", what, " tensors");
    return;
  }
  TORCH_CHECK_VALUE(lists.size() == 1 && static_cast<int>(lists[0].size()) == size, "tpu_dist ",
                    op, ": needs one list of ", size, " ", what, " tensors (one per rank)");
  for (const auto& t : lists[0])
    TORCH_CHECK_VALUE(t.sizes() == like.sizes() && t.scalar_type() == like.scalar_type(),
                      "tpu_dist ", op, ": ", what, " ", describe(t), " does not match ",
                      describe(like));
}

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& l) {
  std::vector<at::Tensor> out;
  for (const auto& v : l) out.insert(out.end(), v.begin(), v.end());
  return out;
}

// Checks |op| suits |t|'s dtype as a reduction and returns the transport's
// op: PREMUL_SUM becomes a multiply on the host copy then SUM (Gloo has
// no PREMUL_SUM).
c10d::ReduceOp host_reduce(const char* op, const c10d::ReduceOp& r, at::Tensor& host,
                           const at::Tensor& t) {
  auto k = r.op_;
  bool integral = c10::isIntegralType(t.scalar_type(), /*includeBool=*/true);
  switch (k) {
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK_VALUE(integral, "tpu_dist ", op, ": ReduceOp.", reduce_name(k),
                        " needs an integer or bool tensor, got ", describe(t));
      return r;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK_VALUE(!integral, "tpu_dist ", op,
                        ": ReduceOp.AVG needs a floating-point tensor, got ", describe(t));
      return r;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK_VALUE(!integral, "tpu_dist ", op,
                        ": ReduceOp.PREMUL_SUM needs a floating-point tensor, got ", describe(t));
      auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(r.supplement_.get());
      TORCH_CHECK_VALUE(s, "tpu_dist ", op, ": ReduceOp.PREMUL_SUM without a factor");
      if (s->tensor_factor.defined())
        host.mul_(s->tensor_factor.to(at::kCPU));
      else
        host.mul_(s->double_factor);
      return c10d::ReduceOp(c10d::ReduceOp::SUM);
    }
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
      TORCH_CHECK_VALUE(!(t.is_complex() && (k == c10d::ReduceOp::MIN || k == c10d::ReduceOp::MAX)),
                        "tpu_dist ", op, ": ReduceOp.", reduce_name(k),
                        " is not defined for complex tensors, got ", describe(t));
      return r;
    default:
      TORCH_CHECK_VALUE(false, "tpu_dist ", op, ": unsupported reduce op ", reduce_name(k));
  }
}

}  // namespace

// ---------------------------------------------------------------- backend

ProcessGroupTpu::ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
                                 std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size),
      host_(std::move(host)),
      timeout_(timeout),
      check_(!env_off("TORCH_TPU_DIST_CHECK")),
      pool_(std::make_unique<HostPool>()) {
  TORCH_CHECK(host_, "tpu_dist: no host transport");
}

ProcessGroupTpu::~ProcessGroupTpu() = default;

void ProcessGroupTpu::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  host_->setTimeout(timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::endCoalescing() {
  return batch_done("coalesced", {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::batch_done(const char* op,
                                                           std::vector<at::Tensor> outputs) {
  Call call(op, c10d::OpType::COALESCED, pool_.get());
  call.outputs = std::move(outputs);
  return finish(call, nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::each_pair(
    const char* op, std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const std::function<void(at::Tensor&, at::Tensor&)>& run) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "tpu_dist ", op, ": ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); i++) run(outputs[i], inputs[i]);
  return batch_done(op, outputs);
}

void ProcessGroupTpu::check_agreement(const Call& call) {
  if (!check_ || size_ == 1) return;
  stats.checks++;
  const int64_t n = kDescFields + 2 * static_cast<int64_t>(call.send_rows.size());
  at::Tensor mine = at::full({n}, -1, at::kLong);
  int64_t* d = mine.data_ptr<int64_t>();
  d[kKind] = static_cast<int64_t>(call.type);
  if (call.shaped.defined()) {
    const auto& t = call.shaped;
    d[kDtype] = static_cast<int64_t>(t.scalar_type());
    d[kNdim] = t.dim();
    d[kNumel] = t.numel();
    for (int64_t i = 0; i < t.dim() && i < 6; i++) d[kDim0 + i] = t.size(i);
  }
  d[kRoot] = call.root;
  d[kReduce] = call.reduce;
  for (size_t i = 0; i < call.send_rows.size(); i++) {
    d[kDescFields + i] = call.send_rows[i];
    d[kDescFields + call.send_rows.size() + i] = call.recv_rows[i];
  }
  at::Tensor all = at::empty({size_ * n}, at::kLong);
  c10d::AllgatherOptions o;
  o.timeout = timeout_;
  try {
    host_->_allgather_base(all, mine, o)->wait();
  } catch (const std::exception& e) {
    C10_THROW_ERROR(DistBackendError,
                    std::string("tpu_dist ") + call.op + " of " +
                        (call.shaped.defined() ? describe(call.shaped) : std::string("no tensor")) +
                        " failed on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                        " before it started (a peer died, timed out or is in another collective): " +
                        transport_message(e));
  }
  const int64_t* a = all.data_ptr<int64_t>();
  auto field = [&](int r, int f) { return a[r * n + f]; };
  auto rank_desc = [&](int r) {
    std::ostringstream s;
    s << "rank " << r << ": ";
    if (field(r, kDtype) < 0) return s.str() + "no tensor";
    s << c10::getDtypeNames(static_cast<c10::ScalarType>(field(r, kDtype))).first << "[";
    for (int64_t i = 0; i < field(r, kNdim) && i < 6; i++)
      s << (i ? ", " : "") << field(r, kDim0 + i);
    if (field(r, kNdim) > 6) s << ", ...";
    s << "]";
    return s.str();
  };
  auto all_ranks = [&] {
    std::ostringstream s;
    for (int r = 0; r < size_; r++) s << (r ? "; " : "") << rank_desc(r);
    return s.str();
  };
  for (int r = 1; r < size_; r++) {
    TORCH_CHECK_VALUE(field(r, kKind) == field(0, kKind), "tpu_dist ", call.op,
                      ": the ranks called different collectives (rank 0: op ",
                      field(0, kKind), ", rank ", r, ": op ", field(r, kKind),
                      "); every rank must issue the same collectives in the same order");
    TORCH_CHECK_VALUE(field(r, kDtype) == field(0, kDtype), "tpu_dist ", call.op,
                      ": the ranks passed different dtypes (", all_ranks(), ")");
    bool same = field(r, kNumel) == field(0, kNumel) && field(r, kNdim) == field(0, kNdim);
    for (int i = 0; i < 6 && same; i++) same = field(r, kDim0 + i) == field(0, kDim0 + i);
    TORCH_CHECK_VALUE(same, "tpu_dist ", call.op, ": the ranks passed different shapes (",
                      all_ranks(), ")");
    TORCH_CHECK_VALUE(field(r, kRoot) == field(0, kRoot), "tpu_dist ", call.op,
                      ": the ranks named different roots (rank 0: ", field(0, kRoot),
                      ", rank ", r, ": ", field(r, kRoot), ")");
    TORCH_CHECK_VALUE(field(r, kReduce) == field(0, kReduce), "tpu_dist ", call.op,
                      ": the ranks passed different reduce ops (rank 0: ",
                      reduce_name(static_cast<c10d::ReduceOp::RedOpType>(field(0, kReduce))),
                      ", rank ", r, ": ",
                      reduce_name(static_cast<c10d::ReduceOp::RedOpType>(field(r, kReduce))),
                      ")");
  }
  const size_t peers = call.send_rows.size();
  for (size_t i = 0; i < peers; i++) {
    for (size_t j = 0; j < peers; j++) {
      int64_t sent = a[i * n + kDescFields + j];
      int64_t expected = a[j * n + kDescFields + peers + i];
      TORCH_CHECK_VALUE(sent == expected, "tpu_dist ", call.op, ": rank ", i, " sends ", sent,
                        " rows to rank ", j, ", which expects ", expected,
                        " (input_split_sizes and output_split_sizes must match across ranks)");
    }
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::finish(Call& call,
                                                       c10::intrusive_ptr<c10d::Work> host_work,
                                                       bool defer) {
  stats.collectives++;
  std::string what = call.op;
  if (call.shaped.defined() && call.shaped.device().type() != at::kMeta) what += " of " + describe(call.shaped);
  auto work = c10::make_intrusive<TpuWork>(rank_, call.type, what, std::move(host_work),
                                           std::move(call.write_back), call.outputs);
  // Collectives finish here: DDP and FSDP wait on the future, which must
  // only complete once the results are in the tpu tensors, and those are
  // written from this thread. Point-to-point ops wait when asked, so a
  // batch of isend/irecv can post all its ops first.
  if (!defer) work->wait(timeout_);
  return work;
}

#define TPU_TRANSPORT_OPTS(o) \
  auto host_opts = (o);       \
  if (host_opts.timeout == c10d::kUnsetTimeout) host_opts.timeout = timeout_;

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  Call call("broadcast", c10d::OpType::BROADCAST, pool_.get());
  check_devices(call.op, {&tensors});
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist broadcast: one tensor per call, got ",
                    tensors.size());
  call.shaped = tensors[0];
  call.root = opts.rootRank;
  check_agreement(call);
  // Only the root's value is read; the others only receive.
  std::vector<at::Tensor> host = {rank_ == opts.rootRank ? call.read(tensors[0])
                                                         : call.receive(tensors[0])};
  call.outputs = tensors;
  TPU_TRANSPORT_OPTS(opts);
  return finish(call, host_->broadcast(host, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  Call call("all_reduce", c10d::OpType::ALLREDUCE, pool_.get());
  check_devices(call.op, {&tensors});
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist all_reduce: one tensor per call, got ",
                    tensors.size());
  call.shaped = tensors[0];
  call.reduce = opts.reduceOp.op_;
  check_agreement(call);
  at::Tensor h = call.to_host_in_place(tensors[0]);
  TPU_TRANSPORT_OPTS(opts);
  host_opts.reduceOp = host_reduce(call.op, opts.reduceOp, h, tensors[0]);
  std::vector<at::Tensor> host = {h};
  call.outputs = tensors;
  return finish(call, host_->allreduce(host, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  check_devices("all_reduce_coalesced", {&tensors});
  for (auto& t : tensors) {
    std::vector<at::Tensor> one = {t};
    allreduce(one, opts);
  }
  return batch_done("all_reduce_coalesced", tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  Call call("reduce", c10d::OpType::REDUCE, pool_.get());
  check_devices(call.op, {&tensors});
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist reduce: one tensor per call, got ",
                    tensors.size());
  call.shaped = tensors[0];
  call.root = opts.rootRank;
  call.reduce = opts.reduceOp.op_;
  check_agreement(call);
  at::Tensor h = rank_ == opts.rootRank ? call.to_host_in_place(tensors[0])
                                         : call.to_host(tensors[0]);
  TPU_TRANSPORT_OPTS(opts);
  host_opts.reduceOp = host_reduce(call.op, opts.reduceOp, h, tensors[0]);
  std::vector<at::Tensor> host = {h};
  call.outputs = tensors;
  return finish(call, host_->reduce(host, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Call call("all_gather", c10d::OpType::ALLGATHER, pool_.get());
  auto outs = flat(outputs);
  check_devices(call.op, {&inputs, &outs});
  TORCH_CHECK_VALUE(inputs.size() == 1, "tpu_dist all_gather: one input per call");
  check_rank_list(call.op, "output", outputs, inputs[0], size_, true);
  call.shaped = inputs[0];
  check_agreement(call);
  std::vector<at::Tensor> host_in = {call.read(inputs[0])};
  std::vector<std::vector<at::Tensor>> host_out(1);
  for (auto& o : outputs[0]) {
    host_out[0].push_back(call.receive(o));
  }
  call.outputs = outputs[0];
  TPU_TRANSPORT_OPTS(opts);
  return finish(call, host_->allgather(host_out, host_in, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  Call call("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, pool_.get());
  std::vector<at::Tensor> in = {input}, out = {output};
  check_devices(call.op, {&in, &out});
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_ &&
                        output.scalar_type() == input.scalar_type(),
                    "tpu_dist all_gather_into_tensor: output ", describe(output),
                    " must hold ", size_, " inputs ", describe(input));
  call.shaped = input;
  check_agreement(call);
  at::Tensor hin = call.read(input);
  // Gloo wants a flat output: gather into rows, then view as |output|.
  at::Tensor flat_out = call.receive(output).view({-1});
  at::Tensor flat_in = hin.reshape({-1});
  call.outputs = out;
  TPU_TRANSPORT_OPTS(opts);
  return finish(call, host_->_allgather_base(flat_out, flat_in, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == static_cast<size_t>(size_),
                    "tpu_dist all_gather_coalesced: one output list per rank");
  for (size_t i = 0; i < inputs.size(); i++) {
    std::vector<std::vector<at::Tensor>> out(1);
    for (auto& per_rank : outputs) {
      TORCH_CHECK_VALUE(per_rank.size() == inputs.size(),
                        "tpu_dist all_gather_coalesced: each output list needs ", inputs.size(),
                        " tensors");
      out[0].push_back(per_rank[i]);
    }
    std::vector<at::Tensor> in = {inputs[i]};
    allgather(out, in, opts);
  }
  return batch_done("all_gather_coalesced", flat(outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return each_pair("all_gather_into_tensor_coalesced", outputs, inputs,
                   [&](at::Tensor& o, at::Tensor& i) { _allgather_base(o, i, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  Call call("gather", c10d::OpType::GATHER, pool_.get());
  auto outs = flat(outputs);
  check_devices(call.op, {&inputs, &outs});
  TORCH_CHECK_VALUE(inputs.size() == 1, "tpu_dist gather: one input per call");
  call.shaped = inputs[0];
  call.root = opts.rootRank;
  check_rank_list(call.op, "output", outputs, inputs[0], size_, rank_ == opts.rootRank);
  check_agreement(call);
  std::vector<at::Tensor> host_in = {call.read(inputs[0])};
  std::vector<std::vector<at::Tensor>> host_out;
  if (rank_ == opts.rootRank) {
    host_out.resize(1);
    for (auto& o : outputs[0]) {
      host_out[0].push_back(call.receive(o));
    }
    call.outputs = outputs[0];
  }
  TPU_TRANSPORT_OPTS(opts);
  return finish(call, host_->gather(host_out, host_in, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  Call call("scatter", c10d::OpType::SCATTER, pool_.get());
  auto ins = flat(inputs);
  check_devices(call.op, {&outputs, &ins});
  TORCH_CHECK_VALUE(outputs.size() == 1, "tpu_dist scatter: one output per call");
  call.shaped = outputs[0];
  call.root = opts.rootRank;
  std::vector<std::vector<at::Tensor>> host_in;
  check_rank_list(call.op, "input", inputs, outputs[0], size_, rank_ == opts.rootRank);
  check_agreement(call);
  if (rank_ == opts.rootRank) {
    host_in.resize(1);
    for (auto& i : inputs[0]) host_in[0].push_back(call.read(i));
  }
  std::vector<at::Tensor> host_out = {call.receive(outputs[0])};
  call.outputs = outputs;
  TPU_TRANSPORT_OPTS(opts);
  return finish(call, host_->scatter(host_out, host_in, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  Call call("reduce_scatter", c10d::OpType::REDUCE_SCATTER, pool_.get());
  auto ins = flat(inputs);
  check_devices(call.op, {&outputs, &ins});
  TORCH_CHECK_VALUE(outputs.size() == 1, "tpu_dist reduce_scatter: one output per call");
  check_rank_list(call.op, "input", inputs, outputs[0], size_, true);
  // One contiguous input on the host: the list version is the tensor
  // version with the inputs side by side.
  std::vector<at::Tensor> flat_inputs;
  for (auto& i : inputs[0]) flat_inputs.push_back(i.reshape({-1}));
  at::Tensor in = at::cat(flat_inputs);
  at::Tensor out = outputs[0];
  return _reduce_scatter_base(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  Call call("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, pool_.get());
  std::vector<at::Tensor> in = {input}, out = {output};
  check_devices(call.op, {&in, &out});
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_ &&
                        output.scalar_type() == input.scalar_type(),
                    "tpu_dist reduce_scatter_tensor: input ", describe(input), " must hold ",
                    size_, " outputs ", describe(output));
  call.shaped = input;
  call.reduce = opts.reduceOp.op_;
  check_agreement(call);
  at::Tensor hin = call.to_host(input).reshape({-1});
  if (input.is_cpu() && opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) hin = hin.clone();
  TPU_TRANSPORT_OPTS(opts);
  host_opts.reduceOp = host_reduce(call.op, opts.reduceOp, hin, input);
  at::Tensor flat_out = call.receive(output).view({-1});
  call.outputs = out;
  return finish(call, host_->_reduce_scatter_base(flat_out, hin, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return each_pair("reduce_scatter_tensor_coalesced", outputs, inputs,
                   [&](at::Tensor& o, at::Tensor& i) { _reduce_scatter_base(o, i, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  Call call("all_to_all_single", c10d::OpType::ALLTOALL_BASE, pool_.get());
  std::vector<at::Tensor> in = {input}, out = {output};
  check_devices(call.op, {&in, &out});
  TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(),
                    "tpu_dist all_to_all_single: output ", describe(output),
                    " and input ", describe(input), " differ in dtype");
  auto rows = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
    std::vector<int64_t> r;
    int64_t n = t.dim() ? t.size(0) : 0;
    if (splits.empty()) {
      TORCH_CHECK_VALUE(n % size_ == 0, "tpu_dist all_to_all_single: ", what, " ", describe(t),
                        " does not split evenly over ", size_, " ranks");
      r.assign(size_, n / size_);
    } else {
      TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "tpu_dist all_to_all_single: ",
                        splits.size(), " ", what, " split sizes for a group of ", size_);
      int64_t sum = 0;
      for (auto s : splits) {
        TORCH_CHECK_VALUE(s >= 0, "tpu_dist all_to_all_single: negative split size ", s);
        sum += s;
      }
      TORCH_CHECK_VALUE(sum == n, "tpu_dist all_to_all_single: ", what, " split sizes sum to ",
                        sum, " but the ", what, " has ", n, " rows (", describe(t), ")");
      r = splits;
    }
    return r;
  };
  call.send_rows = rows(input, input_splits, "input");
  call.recv_rows = rows(output, output_splits, "output");
  // The ranks agree on dtype and on the size of a row, not on row counts.
  call.shaped = at::empty(input.dim() ? input.sizes().slice(1) : input.sizes(),
                          input.options().device(at::kMeta));
  check_agreement(call);
  at::Tensor hin = call.read(input);
  at::Tensor hout = call.receive(output);
  call.outputs = out;
  TPU_TRANSPORT_OPTS(opts);
  std::vector<int64_t> out_splits = output_splits, in_splits = input_splits;
  return finish(call, host_->alltoall_base(hout, hin, out_splits, in_splits, host_opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions& opts) {
  const char* op = "all_to_all";
  check_devices(op, {&inputs, &outputs});
  TORCH_CHECK_VALUE(static_cast<int>(inputs.size()) == size_ &&
                        static_cast<int>(outputs.size()) == size_,
                    "tpu_dist all_to_all: ", size_, " inputs and outputs per call, got ",
                    inputs.size(), " and ", outputs.size());
  // The list form is the single-tensor form over the flattened tensors
  // side by side (Gloo has only that one).
  std::vector<int64_t> send, recv;
  std::vector<at::Tensor> flat_in;
  for (int i = 0; i < size_; i++) {
    TORCH_CHECK_VALUE(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                          outputs[i].scalar_type() == inputs[0].scalar_type(),
                      "tpu_dist all_to_all: every tensor needs dtype ",
                      dtype_name(inputs[0].scalar_type()));
    send.push_back(inputs[i].numel());
    recv.push_back(outputs[i].numel());
    flat_in.push_back(inputs[i].reshape({-1}));
  }
  int64_t total = 0;
  for (auto r : recv) total += r;
  at::Tensor in = at::cat(flat_in);
  at::Tensor out = at::empty({total}, outputs[0].options());
  // The transport may take the split vectors: pass copies.
  std::vector<int64_t> recv_arg = recv, send_arg = send;
  alltoall_base(out, in, recv_arg, send_arg, opts);
  int64_t at_row = 0;
  for (int i = 0; i < size_; i++) {
    outputs[i].copy_(out.narrow(0, at_row, recv[i]).view(outputs[i].sizes()));
    at_row += recv[i];
  }
  return batch_done(op, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::send(std::vector<at::Tensor>& tensors, int dst,
                                                     int tag) {
  Call call("send", c10d::OpType::SEND, nullptr);
  check_devices(call.op, {&tensors});
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist send: one tensor per call");
  TORCH_CHECK_VALUE(dst >= 0 && dst < size_ && dst != rank_, "tpu_dist send: bad peer rank ",
                    dst, " (this is rank ", rank_, " of ", size_, ")");
  std::vector<at::Tensor> host = {call.read(tensors[0]).contiguous()};
  call.outputs = tensors;
  return finish(call, host_->send(host, dst, tag), /*defer=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::recv(std::vector<at::Tensor>& tensors, int src,
                                                     int tag) {
  Call call("recv", c10d::OpType::RECV, nullptr);
  check_devices(call.op, {&tensors});
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist recv: one tensor per call");
  TORCH_CHECK_VALUE(src >= 0 && src < size_ && src != rank_, "tpu_dist recv: bad peer rank ",
                    src, " (this is rank ", rank_, " of ", size_, ")");
  std::vector<at::Tensor> host = {call.receive(tensors[0])};
  call.outputs = tensors;
  return finish(call, host_->recv(host, src, tag), /*defer=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::recvAnysource(std::vector<at::Tensor>& tensors,
                                                              int tag) {
  Call call("recv", c10d::OpType::RECVANYSOURCE, nullptr);
  check_devices(call.op, {&tensors});
  TORCH_CHECK_VALUE(tensors.size() == 1, "tpu_dist recv: one tensor per call");
  std::vector<at::Tensor> host = {call.receive(tensors[0])};
  call.outputs = tensors;
  return finish(call, host_->recvAnysource(host, tag), /*defer=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTpu::barrier(const c10d::BarrierOptions& opts) {
  Call call("barrier", c10d::OpType::BARRIER, pool_.get());
  check_agreement(call);
  auto host_opts = opts;
  host_opts.device = std::nullopt;  // the transport's own host device
  if (host_opts.timeout == c10d::kUnsetTimeout) host_opts.timeout = timeout_;
  return finish(call, host_->barrier(host_opts));
}

void ProcessGroupTpu::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  auto host_opts = opts;
  if (host_opts.timeout == c10d::kUnsetTimeout) host_opts.timeout = timeout_;
  host_->monitoredBarrier(host_opts, wait_all_ranks);
}

void ProcessGroupTpu::setSequenceNumberForGroup() { host_->setSequenceNumberForGroup(); }

uint64_t ProcessGroupTpu::getSequenceNumberForGroup() {
  return host_->getSequenceNumberForGroup();
}

}  // namespace torch_tpu
