// The boxed PrivateUse1 fallback: every ATen op without its own tpu kernel
// lands here. Ops with a lowering rule run natively through the eager
// executor (result metadata from PyTorch's meta kernels); the rest go to a
// counted CPU fallback that TORCH_TPU_FALLBACK=0 turns into an error.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/empty.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <sstream>
#include <memory>
#include <unordered_map>
#include <mutex>
#include <string>
#include <vector>

#include "aten/ArgChecks.h"
#include "aten/ArgConvert.h"
#include "aten/Dispatch.h"
#include "aten/FastMeta.h"
#include "aten/TensorRef.h"
#include "core/TpuGenerator.h"
#include "core/TpuStatus.h"

namespace torch_tpu {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

std::mutex fallback_mutex;
std::map<std::string, int64_t> fallback_counts;

bool fallback_allowed() {
  const char* v = std::getenv("TORCH_TPU_FALLBACK");
  return !(v && std::strcmp(v, "0") == 0);
}

bool is_tpu(const at::Tensor& t) {
  return t.defined() && t.device().type() == kTpu;
}

void cpu_fallback_counted(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                          const std::string& name, const char* why) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      fallback_allowed(), name, " ", why,
      ", and the CPU fallback is disabled (TORCH_TPU_FALLBACK=0)");
  bool first;
  {
    std::lock_guard<std::mutex> lock(fallback_mutex);
    first = fallback_counts[name]++ == 0;
  }
  if (first)
    TORCH_WARN(name, " ", why, "; running it on the CPU (counted in "
               "torch.tpu.fallback_counts(); TORCH_TPU_FALLBACK=0 makes this "
               "an error)");
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

// Meta twin of a tpu tensor: same sizes, strides, offset and dtype. A CPU
// scalar tensor (which ops accept beside device tensors, e.g. masked_fill's
// value) becomes a meta scalar too, as meta kernels may demand one device;
// wrapped Python numbers stay on the CPU, where PyTorch requires them.
at::Tensor to_meta(const at::Tensor& t) {
  if (t.defined() && t.device().is_cpu() && t.dim() == 0 &&
      !t.unsafeGetTensorImpl()->is_wrapped_number())
    return at::empty({}, t.options().device(c10::kMeta));
  if (!is_tpu(t)) return t;
  auto opts = t.options().device(c10::kMeta);
  int64_t storage_elems = static_cast<int64_t>(
      t.storage().nbytes() / std::max<size_t>(t.dtype().itemsize(), 1));
  return at::empty({storage_elems}, opts)
      .as_strided(t.sizes(), t.strides(), t.storage_offset());
}

bool writes(const c10::Argument& a) {
  return a.alias_info() && a.alias_info()->isWrite();
}

// native_batch_norm updates running_mean/running_var (arguments 3 and 4)
// in training although its schema does not mark them written.
bool writes_unmarked(const std::string& name, size_t i,
                     const torch::jit::Stack& args) {
  return name == "aten::native_batch_norm" && (i == 3 || i == 4) &&
         args[i].isTensor() && args[i].toTensor().defined() &&
         args[5].isBool() && args[5].toBool();
}

// What the dispatch path needs to know about an op that does not change
// between calls, looked up once per schema: the name, whether a lowering
// rule exists, which arguments the op writes, where its indices are.
struct OpInfo {
  std::string name;  // "aten::add.Tensor"; built once, not per call
  bool has_rule = false;
  bool has_meta = false;  // only true is remembered: kernels may come later
  bool is_out_fn = false;
  bool batch_norm = false;        // writes_unmarked applies
  bool foreach = false;           // aten::_foreach_*
  bool per_tensor = false;        // a CompositeExplicitAutograd kernel (foreach's slow one)
  int indices = -1;               // the "indices" argument, if any
  std::vector<char> writes;       // per argument
  const ArgChecks* checks = nullptr;  // the CPU kernel's argument checks
  bool data_checks = false;           // check_argument_data applies
  enum Fill : char { kNoFill, kZero, kFillScalar } fill = kNoFill;  // fill_from_host
};

const OpInfo& op_info(const c10::OperatorHandle& op) {
  static thread_local std::unordered_map<const c10::FunctionSchema*, OpInfo> infos;
  const auto& s = op.schema();
  OpInfo& info = infos[&s];
  // New, or a deregistered op's schema address reused: check the name.
  const std::string& base = s.name();
  const std::string& ov = s.overload_name();
  const std::string& name = info.name;
  bool same = name.size() == base.size() + (ov.empty() ? 0 : ov.size() + 1) &&
              name.compare(0, base.size(), base) == 0 &&
              (ov.empty() || name.compare(base.size() + 1, ov.size(), ov) == 0);
  if (!same) {
    info = OpInfo();
    info.name = ov.empty() ? base : base + "." + ov;
    info.has_rule = tpr_rule_find(info.name.c_str()) != nullptr;
    info.batch_norm = info.name == "aten::native_batch_norm";
    info.foreach = info.name.compare(0, 15, "aten::_foreach_") == 0;
    info.per_tensor = info.foreach &&
                      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
    auto pos = s.argumentIndexWithName("indices");
    info.indices = pos ? static_cast<int>(*pos) : -1;
    for (const auto& a : s.arguments()) {
      info.is_out_fn |= a.is_out();
      info.writes.push_back(writes(a));
    }
    info.checks = find_arg_checks(op, info.name);
    info.data_checks = has_data_checks(info.name);
    info.fill = info.name == "aten::zero_"          ? OpInfo::kZero
                : info.name == "aten::fill_.Scalar" ? OpInfo::kFillScalar
                                                    : OpInfo::kNoFill;
  }
  if (!info.has_meta)
    info.has_meta = op.hasKernelForDispatchKey(c10::DispatchKey::Meta) ||
                    op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
  return info;
}

// Append-only storage whose elements never move (the C call keeps pointers
// to them) and which keeps its blocks across clear().
template <typename T, size_t kBlock = 16>
class StableArena {
 public:
  T* push_back(const T& v) {
    if (n_ == blocks_.size() * kBlock) blocks_.push_back(std::make_unique<T[]>(kBlock));
    T* p = &blocks_[n_ / kBlock][n_ % kBlock];
    *p = v;
    n_++;
    return p;
  }
  void clear() { n_ = 0; }

 private:
  std::vector<std::unique_ptr<T[]>> blocks_;
  size_t n_ = 0;
};

// Everything that must outlive the C call.
struct CallState : ArgStore {
  StableArena<tpr_tensor_ref_t> refs;
  std::deque<std::vector<const tpr_tensor_ref_t*>> ref_lists;
  std::vector<at::Tensor> keep_alive;
  std::vector<tpr_eager_arg_t> args;
  std::vector<at::Tensor> outs;  // result targets, in rule order
  std::vector<tpr_type_t> out_types;
  std::vector<const tpr_tensor_ref_t*> targets;
  std::vector<c10::IValue> returns;  // fresh results, in schema order
  std::vector<int> stripped;         // per argument: an out= (not passed)

  void clear() {
    ArgStore::clear();
    refs.clear();
    ref_lists.clear();
    keep_alive.clear();
    args.clear();
    outs.clear();
    out_types.clear();
    targets.clear();
    returns.clear();
    stripped.clear();
  }
};

// A small op would spend as long allocating a fresh CallState (a dozen
// containers) as running on the device, so each thread reuses its own.
// Calls nest (a CPU argument copied to tpu is an op inside the op): one
// state per nesting depth.
class PooledCallState {
 public:
  PooledCallState() {
    if (depth_ == pool_.size()) pool_.push_back(std::make_unique<CallState>());
    st_ = pool_[depth_++].get();
  }
  ~PooledCallState() {
    st_->clear();
    depth_--;
  }
  PooledCallState(const PooledCallState&) = delete;
  PooledCallState& operator=(const PooledCallState&) = delete;
  CallState& get() { return *st_; }

 private:
  CallState* st_;
  static thread_local std::vector<std::unique_ptr<CallState>> pool_;
  static thread_local size_t depth_;
};
thread_local std::vector<std::unique_ptr<CallState>> PooledCallState::pool_;
thread_local size_t PooledCallState::depth_ = 0;

const tpr_tensor_ref_t* add_ref(CallState& st, const at::Tensor& t,
                                const char* op, c10::Device device) {
  at::Tensor x = t;
  if (!is_tpu(x)) {  // CPU scalars and the like move over
    x = x.to(device);
    st.keep_alive.push_back(x);
  }
  return st.refs.push_back(tensor_ref(x, op));
}

// Eager tensors are windows into their storages.
class EagerSink : public TensorArgSink {
 public:
  EagerSink(CallState& st, const char* op, c10::Device device)
      : st_(st), op_(op), device_(device) {}

  void tensor(const at::Tensor& t, tpr_eager_arg_t& out) override {
    out.tensor = add_ref(st_, t, op_, device_);
  }

  void tensor_list(const std::vector<std::optional<at::Tensor>>& ts,
                   tpr_eager_arg_t& out) override {
    std::vector<const tpr_tensor_ref_t*> refs;
    for (const auto& t : ts) refs.push_back(t ? add_ref(st_, *t, op_, device_) : nullptr);
    finish_list(std::move(refs), out);
  }

  // Scalar[] (per-tensor scalars of foreach ops, e.g. Adam's bias
  // corrections): one small device tensor, so new values do not recompile.
  void scalar_list(const std::vector<double>& vals, bool all_int,
                   tpr_eager_arg_t& out) override {
    at::Tensor host = at::tensor(vals, at::dtype(at::kDouble));
    if (all_int) host = host.to(at::kLong);
    at::Tensor dev = host.to(device_);
    st_.keep_alive.push_back(dev);
    std::vector<const tpr_tensor_ref_t*> refs;
    for (int64_t k = 0; k < dev.numel(); k++)
      refs.push_back(add_ref(st_, dev.select(0, k), op_, device_));
    finish_list(std::move(refs), out);
  }

 private:
  void finish_list(std::vector<const tpr_tensor_ref_t*> refs, tpr_eager_arg_t& out) {
    st_.ref_lists.push_back(std::move(refs));
    out.arg.count = static_cast<int32_t>(st_.ref_lists.back().size());
    out.tensors = st_.ref_lists.back().data();
  }

  CallState& st_;
  const char* op_;
  c10::Device device_;
};

// The device an op runs on: that of its tpu tensors, which must all be on
// one device, as PyTorch requires (CPU scalars and the like move over);
// with none, a tpu Device argument (tril_indices(..., device="tpu:1")),
// else the current device. A foreach op whose lists span devices sets
// |mixed| instead of failing: it runs per tensor, as on CUDA.
c10::Device op_device(const c10::FunctionSchema& schema, const std::string& name,
                      const c10::IValue* args, size_t nargs, bool foreach, bool* mixed) {
  std::optional<c10::Device> found;
  auto see = [&](const at::Tensor& t, size_t i, int64_t k) {
    if (!is_tpu(t)) return;
    if (!found) {
      found = t.device();
      return;
    }
    if (t.device() == *found) return;
    if (foreach) {
      *mixed = true;
      return;
    }
    std::string what = i < schema.arguments().size() ? schema.arguments()[i].name()
                                                      : "argument " + std::to_string(i);
    if (k >= 0) what += "[" + std::to_string(k) + "]";
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but got ", what,
                " is on ", t.device(), ", different from other tensors on ", *found,
                " (when checking argument in method ", name, ")");
  };
  std::optional<c10::Device> device_arg;
  for (size_t i = 0; i < nargs; i++) {
    const auto& v = args[i];
    if (v.isTensor()) {
      see(v.toTensor(), i, -1);
    } else if (v.isList()) {
      int64_t k = 0;
      for (const auto& e : v.toListRef()) {
        if (e.isTensor()) see(e.toTensor(), i, k);
        k++;
      }
    } else if (v.isDevice() && v.toDevice().type() == kTpu && v.toDevice().has_index() &&
               !device_arg) {
      device_arg = v.toDevice();
    }
  }
  if (found) return *found;
  if (device_arg) {
    check_device_index(device_arg->index(), name.c_str());
    return *device_arg;
  }
  return c10::Device(kTpu, current_device());
}

// What PyTorch's meta kernel says about one call: the returns and the
// (possibly resized) arguments. Meta kernels cost tens of microseconds, so
// results are cached by the call's metadata: op, tensor sizes, strides,
// offsets, dtypes, devices, and every non-tensor argument's value, except
// Scalar and Scalar[] arguments, which count only by kind (bool, integer,
// floating, complex: type promotion reads no more), so that an optimizer's
// per-step scalars (AdamW's bias corrections) do not add an entry per step.
// The few ops whose result shape depends on Scalar values (arange, range)
// key them by value.
struct MetaResult {
  torch::jit::Stack args;
  torch::jit::Stack returns;
};

std::mutex meta_mutex;
std::unordered_map<std::string, std::shared_ptr<const MetaResult>> meta_cache;
constexpr size_t kMetaCacheMax = 1 << 16;

template <typename T>
void put(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_tensor(std::string& k, const at::Tensor& t) {
  if (!t.defined()) {
    k.push_back('u');
    return;
  }
  k.push_back('t');
  put(k, static_cast<int8_t>(t.device().type()));
  put(k, static_cast<int8_t>(t.scalar_type()));
  put(k, static_cast<bool>(t.unsafeGetTensorImpl()->is_wrapped_number()));
  put(k, static_cast<int8_t>(t.dim()));
  for (int64_t i = 0; i < t.dim(); i++) {
    put(k, t.size(i));
    put(k, t.stride(i));
  }
  put(k, t.storage_offset());
  if (t.has_storage()) put(k, t.storage().nbytes());
}

// Appends the kind of a Scalar (or of each entry of a Scalar list).
bool put_scalar_kind(std::string& k, const c10::IValue& v) {
  if (v.isList()) {
    k.push_back('[');
    for (const auto& e : v.toListRef())
      if (!put_scalar_kind(k, e)) return false;
    k.push_back(']');
    return true;
  }
  if (v.isDouble()) k.push_back('D');
  else if (v.isInt() || v.isSymInt()) k.push_back('I');
  else if (v.isBool()) k.push_back('B');
  else if (v.isComplexDouble()) k.push_back('C');
  else if (v.isNone()) k.push_back('n');
  else return false;
  return true;
}

// Whether |a| is a Scalar, Scalar? or Scalar[] argument.
bool is_scalar_argument(const c10::Argument& a) {
  c10::TypePtr t = a.real_type();
  if (auto o = t->castRaw<c10::OptionalType>()) t = o->getElementType();
  if (auto l = t->castRaw<c10::ListType>()) t = l->getElementType();
  return t->kind() == c10::TypeKind::NumberType;
}

// Ops whose result metadata depends on their Scalar arguments' values.
bool shape_reads_scalar_values(const c10::FunctionSchema& schema) {
  const std::string& n = schema.name();
  return n == "aten::arange" || n == "aten::range";
}

// Appends |v| to the key; false for values the key cannot describe.
bool put_ivalue(std::string& k, const c10::IValue& v) {
  if (v.isTensor()) {
    put_tensor(k, v.toTensor());
  } else if (v.isNone()) {
    k.push_back('n');
  } else if (v.isInt()) {
    k.push_back('i');
    put(k, v.toInt());
  } else if (v.isDouble()) {
    k.push_back('d');
    put(k, v.toDouble());
  } else if (v.isBool()) {
    k.push_back('b');
    put(k, v.toBool());
  } else if (v.isComplexDouble()) {
    k.push_back('c');
    put(k, v.toComplexDouble());
  } else if (v.isString()) {
    k.push_back('s');
    k.append(v.toStringRef());
    k.push_back('\0');
  } else if (v.isDevice()) {
    k.push_back('D');
    put(k, static_cast<int8_t>(v.toDevice().type()));
    put(k, v.toDevice().index());
  } else if (v.isGenerator()) {
    k.push_back('g');
  } else if (v.isSymInt()) {
    if (v.toSymInt().is_symbolic()) return false;
    k.push_back('i');
    put(k, v.toSymInt().as_int_unchecked());
  } else if (v.isList()) {
    k.push_back('[');
    for (const auto& e : v.toListRef())
      if (!put_ivalue(k, e)) return false;
    k.push_back(']');
  } else {
    return false;
  }
  return true;
}

// native_layer_norm's meta kernel is written in Python (torch._refs), and
// its first call imports a large part of torch._refs and torch._prims
// (about a second). Its result metadata is simple: the output has the
// input's shape; mean and rstd keep the leading dims with the normalized
// ones set to 1, in float32 for half-precision inputs (as PyTorch's meta).
// The argument checks are the CPU kernel's (the Python meta skips some).
std::shared_ptr<const MetaResult> layer_norm_meta(const torch::jit::Stack& args) {
  if (args.size() < 4 || !args[0].isTensor() || !args[1].isIntList()) return nullptr;
  const at::Tensor& in = args[0].toTensor();
  auto normalized = args[1].toIntVector();
  TORCH_CHECK(!normalized.empty(), "native_layer_norm: Expected normalized_shape to be at least "
              "1-dimensional, i.e., containing at least one element, but got normalized_shape = ",
              normalized);
  for (size_t k : {size_t{2}, size_t{3}}) {
    if (!args[k].isTensor() || !args[k].toTensor().defined()) continue;
    const at::Tensor& w = args[k].toTensor();
    const char* what = k == 2 ? "weight" : "bias";
    TORCH_CHECK(w.sizes().equals(normalized), "native_layer_norm: Expected ", what,
                " to be of same shape as normalized_shape, but got ", what, " of shape ",
                w.sizes(), " and normalized_shape = ", normalized);
  }
  int64_t axis = in.dim() - static_cast<int64_t>(normalized.size());
  bool fits = axis >= 0;
  for (size_t i = 0; fits && i < normalized.size(); i++)
    fits = in.size(axis + static_cast<int64_t>(i)) == normalized[i];
  if (!fits) {
    std::ostringstream want;
    for (int64_t n : normalized) want << ", " << n;
    TORCH_CHECK(false, "native_layer_norm: Given normalized_shape=", normalized,
                ", expected input with shape [*", want.str(), "], but got input of size",
                in.sizes());
  }
  std::vector<int64_t> stat = in.sizes().vec();
  for (int64_t i = axis; i < in.dim(); i++) stat[i] = 1;
  auto st = in.scalar_type();
  auto acc = (st == at::kHalf || st == at::kBFloat16) ? at::kFloat : st;
  auto opts = in.options().device(c10::kMeta);
  auto r = std::make_shared<MetaResult>();
  r->args = args;
  r->returns = {at::empty(in.sizes(), opts), at::empty(stat, opts.dtype(acc)),
                at::empty(stat, opts.dtype(acc))};
  return r;
}

// Batch norm in evaluation saves no statistics: the CPU kernel returns
// save_mean and save_invstd empty, PyTorch's meta kernels of size [C].
void empty_eval_batch_norm_stats(const c10::FunctionSchema& schema,
                                 const torch::jit::Stack& args, torch::jit::Stack& returns) {
  const std::string& n = schema.name();
  bool eval;
  if (n == "aten::_native_batch_norm_legit_no_training")
    eval = true;
  else if ((n == "aten::native_batch_norm" || n == "aten::_native_batch_norm_legit") &&
           schema.overload_name().empty() && args.size() > 5 && args[5].isBool())
    eval = !args[5].toBool();
  else
    return;
  if (!eval || returns.size() < 3) return;
  for (size_t i = 1; i < 3; i++)
    if (returns[i].isTensor())
      returns[i] = at::empty({0}, returns[i].toTensor().options());
}

// multilabel_margin_loss_forward of a 1-d input with reduction 'none': the
// CPU kernel returns a 0-d loss, PyTorch's meta kernel (its decomposition,
// which makes the input 2-d) a [1] one. tpu returns what the CPU does.
void unbatched_multilabel_loss_is_0d(const c10::FunctionSchema& schema,
                                     const torch::jit::Stack& args, torch::jit::Stack& returns) {
  if (schema.name() != "aten::multilabel_margin_loss_forward" || !schema.overload_name().empty() ||
      args.size() < 3 || !args[0].isTensor() || !args[2].isInt() || returns.empty() ||
      !returns[0].isTensor())
    return;
  if (args[0].toTensor().dim() <= 1 && args[2].toInt() == 0)
    returns[0] = at::empty({}, returns[0].toTensor().options());
}

// Layouts the CPU kernels choose but PyTorch's meta kernels do not: a
// convolution's output is channels-last when its input or weight is (as
// oneDNN, and cuDNN on CUDA, lay it out), and 2-d/3-d reflection and
// replication padding (and their gradients) keep their input's channels-last
// layout (CUDA's kernels do not, and PyTorch's module tests skip that check
// there; following the CPU keeps a channels-last network channels-last).
// nn.Conv2d(...).to(memory_format=torch.channels_last) then gives
// channels-last results on tpu as on the CPU, which PyTorch's module
// memory-format tests expect. Values are the same either way. Structured
// ops reach us through their out= overload with a contiguous out tensor:
// its meta twin is restrided here, and the real one after it (step 2 of
// run_kernel), as the CPU kernels restride theirs.
void channels_last_results(const c10::FunctionSchema& schema, torch::jit::Stack& args,
                           torch::jit::Stack& returns) {
  static const std::set<std::string> pads = {
      "aten::reflection_pad2d", "aten::reflection_pad3d", "aten::replication_pad2d",
      "aten::replication_pad3d", "aten::reflection_pad2d_backward",
      "aten::reflection_pad3d_backward", "aten::replication_pad2d_backward",
      "aten::replication_pad3d_backward"};
  const std::string& n = schema.name();
  std::vector<size_t> sources;  // the arguments whose layout the result follows
  if (n == "aten::convolution")
    sources = {0, 1};
  else if (pads.count(n))
    sources = {n.size() > 9 && n.compare(n.size() - 9, 9, "_backward") == 0 ? size_t{1} : size_t{0}};
  else
    return;
  c10::IValue* slot = returns.empty() ? nullptr : &returns[0];
  const auto& sargs = schema.arguments();
  for (size_t i = 0; i < sargs.size() && i < args.size(); i++)
    if (sargs[i].is_out()) slot = &args[i];
  if (!slot || !slot->isTensor()) return;
  const at::Tensor out = slot->toTensor();
  if (out.dim() != 4 && out.dim() != 5) return;
  const auto cl = out.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
  for (size_t i : sources) {
    if (i >= args.size() || !args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    if (t.dim() != out.dim() || t.suggest_memory_format() != cl) continue;
    if (out.is_contiguous(cl)) return;
    at::Tensor relaid = at::empty(out.sizes(), out.options().memory_format(cl));
    *slot = relaid;
    if (!returns.empty() && returns[0].isTensor() && returns[0].toTensor().is_same(out))
      returns[0] = relaid;
    return;
  }
}

std::shared_ptr<const MetaResult> run_meta(const c10::OperatorHandle& op,
                                           const torch::jit::Stack& args,
                                           size_t nargs) {
  const auto& schema = op.schema();
  if (schema.name() == "aten::native_layer_norm" && schema.overload_name().empty())
    if (auto r = layer_norm_meta(args)) return r;
  torch::jit::Stack meta;
  meta.reserve(nargs);
  for (size_t i = 0; i < nargs; i++) {
    const auto& v = args[i];
    const auto& sa = schema.arguments()[i];
    if (is_generator_arg(sa)) {
      meta.emplace_back();
    } else if (v.isTensor()) {
      meta.emplace_back(to_meta(v.toTensor()));
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> l;
      for (const auto& t : v.toTensorVector()) l.push_back(to_meta(t));
      meta.emplace_back(l);
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> l;
      for (const auto& e : v.toListRef())
        l.push_back(e.isTensor() ? std::optional<at::Tensor>(to_meta(e.toTensor()))
                                 : std::nullopt);
      meta.emplace_back(l);
    } else if (v.isDevice() && v.toDevice().type() == kTpu) {
      meta.emplace_back(c10::Device(c10::kMeta));
    } else {
      meta.push_back(v);
    }
  }
  auto r = std::make_shared<MetaResult>();
  if (auto fast = fast_meta(schema, meta)) {
    r->args = std::move(meta);
    r->returns = std::move(*fast);
    channels_last_results(schema, r->args, r->returns);
    return r;
  }
  r->args = meta;  // the call replaces the arguments by the returns
  // Foreach ops have no Meta kernel; their composite one runs per tensor on
  // the meta twins, which is just as good for metadata.
  auto key = op.hasKernelForDispatchKey(c10::DispatchKey::Meta)
                 ? c10::DispatchKey::Meta
                 : c10::DispatchKey::CompositeExplicitAutograd;
  op.redispatchBoxed(c10::DispatchKeySet(key), &meta);
  r->returns = std::move(meta);
  empty_eval_batch_norm_stats(schema, args, r->returns);
  unbatched_multilabel_loss_is_0d(schema, args, r->returns);
  channels_last_results(schema, r->args, r->returns);
  return r;
}

std::shared_ptr<const MetaResult> meta_result(const c10::OperatorHandle& op,
                                              const torch::jit::Stack& args,
                                              size_t nargs) {
  // The key is built in a per-thread buffer (no allocation on a hit) and
  // copied out before running the meta kernel, which may nest.
  static thread_local std::string buf;
  buf.clear();
  const auto& schema = op.schema();
  put(buf, &schema);
  bool cacheable = true;
  const bool scalar_values = shape_reads_scalar_values(schema);
  for (size_t i = 0; i < nargs && cacheable; i++)
    cacheable = !scalar_values && i < schema.arguments().size() &&
                        is_scalar_argument(schema.arguments()[i])
                    ? put_scalar_kind(buf, args[i])
                    : put_ivalue(buf, args[i]);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(meta_mutex);
    auto it = meta_cache.find(buf);
    if (it != meta_cache.end()) return it->second;
  }
  std::string key = buf;
  auto r = run_meta(op, args, nargs);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(meta_mutex);
    if (meta_cache.size() >= kMetaCacheMax) meta_cache.clear();
    meta_cache.emplace(std::move(key), r);
  }
  return r;
}

}  // namespace

size_t meta_cache_entries() {
  std::lock_guard<std::mutex> lock(meta_mutex);
  return meta_cache.size();
}

namespace {

void add_out(CallState& st, const at::Tensor& real, const char* op) {
  st.outs.push_back(real);
  st.out_types.push_back(tensor_type(real, op));
}

at::Tensor fresh_like_meta(const at::Tensor& m, c10::Device device) {
  return empty_strided_tpu(m.sizes(), m.strides(), m.scalar_type(), device);
}

// Runs an op that has a lowering rule. Returns false when it cannot
// (no meta kernel), so the caller may fall back.
bool run_native(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                const OpInfo& info, c10::Device device) {
  const std::string& name = info.name;
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  torch::jit::Stack args(stack->end() - nargs, stack->end());

  // 1. Result metadata from PyTorch's meta kernel (which checks shapes and
  // dtypes before any check of the data, as the CPU kernels do).
  if (!info.has_meta) return false;
  std::shared_ptr<const MetaResult> mr = meta_result(op, args, nargs);
  if (info.data_checks) check_argument_data(name, args);
  const torch::jit::Stack& meta = mr->returns;
  const torch::jit::Stack& meta_args = mr->args;

  // 2. Targets: fresh results, out= arguments, in-place arguments.
  PooledCallState pooled;
  CallState& st = pooled.get();
  std::vector<c10::IValue>& returns = st.returns;
  const bool is_out_fn = info.is_out_fn;
  if (!is_out_fn) {
    for (size_t r = 0; r < schema.returns().size(); r++) {
      const auto& ret = schema.returns()[r];
      if (ret.alias_info()) continue;  // returns an argument (in-place)
      const auto& mv = meta[r];
      if (mv.isTensor()) {
        const auto& m = mv.toTensor();
        if (!m.defined()) {  // masked-off gradient: no result slot (lower.h)
          returns.emplace_back(at::Tensor());
          continue;
        }
        auto real = fresh_like_meta(m, device);
        add_out(st, real, name.c_str());
        returns.emplace_back(real);
      } else if (mv.isTensorList()) {
        std::vector<at::Tensor> list;
        for (const auto& m : mv.toTensorVector()) {
          auto real = fresh_like_meta(m, device);
          add_out(st, real, name.c_str());
          list.push_back(real);
        }
        returns.emplace_back(list);
      } else {
        return false;  // non-tensor results: not a rule's business
      }
    }
  }
  std::vector<int>& stripped = st.stripped;
  stripped.assign(nargs, 0);
  for (size_t i = 0; i < nargs; i++) {
    const auto& sa = schema.arguments()[i];
    if (!info.writes[i] && !(info.batch_norm && writes_unmarked(name, i, args))) continue;
    stripped[i] = sa.is_out();
    const auto& v = args[i];
    if (v.isTensor()) {
      at::Tensor real = v.toTensor();
      if (sa.is_out()) {  // out= may be resized by the meta kernel
        const auto& m = meta_args[i].toTensor();
        if (real.sizes() != m.sizes()) at::native::resize_output(real, m.sizes());
        if (real.strides() != m.strides())
          real.as_strided_(m.sizes(), m.strides(), real.storage_offset());
      }
      check_writable(name, real);
      add_out(st, real, name.c_str());
    } else if (v.isTensorList()) {
      for (const auto& t : v.toTensorVector()) add_out(st, t, name.c_str());
    }
  }

  if (info.checks) run_arg_checks(*info.checks, schema, name, args, /*resized=*/true);

  // 3. Arguments in schema order, out= stripped.
  EagerSink sink(st, name.c_str(), device);
  int gen_index = -1;
  size_t gen_arg = 0;
  for (size_t i = 0; i < nargs; i++) {
    if (stripped[i]) continue;
    st.args.emplace_back();
    tpr_eager_arg_t& ea = st.args.back();
    std::memset(&ea, 0, sizeof ea);
    bool rng = false;
    convert_arg(st, sink, schema.arguments()[i], args[i], name.c_str(), ea, rng);
    if (rng) {
      gen_index = static_cast<int>(st.args.size() - 1);
      gen_arg = i;
    }
  }
  // Random ops whose schema has no Generator draw from the default one.
  if (gen_index < 0 && draws_from_default_generator(name)) {
    st.args.emplace_back();
    std::memset(&st.args.back(), 0, sizeof(tpr_eager_arg_t));
    st.args.back().arg.kind = TPR_ARG_GENERATOR;
    gen_index = static_cast<int>(st.args.size() - 1);
    gen_arg = nargs;
  }
  if (gen_index >= 0) {
    c10::IValue none;
    const auto& gv = gen_arg < nargs ? args[gen_arg] : none;
    at::Generator gen = gv.isNone() ? default_generator(device.index())
                                    : gv.toGenerator();
    auto* impl = gen.get<TpuGeneratorImpl>();
    TORCH_CHECK(impl, name, ": expected a tpu generator");
    std::lock_guard<std::mutex> lock(gen.mutex());
    auto so = impl->reserve(random_counters(st.out_types));
    st.args[gen_index].rng_state[0] = so.first;
    st.args[gen_index].rng_state[1] = so.second;
  }

  for (auto& t : st.outs) {
    st.targets.push_back(st.refs.push_back(tensor_ref(t, name.c_str())));
  }
  tpr_eager_call_t call = {};
  call.op_name = name.c_str();
  call.device = device.index();
  call.args = st.args.data();
  call.num_args = static_cast<int32_t>(st.args.size());
  call.out_types = st.out_types.data();
  call.num_outs = static_cast<int32_t>(st.out_types.size());
  call.out_targets = st.targets.data();
  check(tpr_eager_run(&call));

  // 4. Results: fresh tensors, or the arguments the op returns.
  torch::jit::drop(*stack, nargs);
  if (is_out_fn) {
    for (size_t i = 0; i < nargs; i++)
      if (schema.arguments()[i].is_out()) stack->push_back(args[i]);
  } else {
    size_t fresh = 0;
    for (size_t r = 0; r < schema.returns().size(); r++) {
      const auto& ret = schema.returns()[r];
      if (!ret.alias_info()) {
        stack->push_back(returns[fresh++]);
        continue;
      }
      // An aliased return: the written argument it names (self for x_()).
      for (size_t i = 0; i < nargs; i++) {
        const auto& ai = schema.arguments()[i].alias_info();
        if (ai && ai->isWrite() && ai->beforeSets() == ret.alias_info()->beforeSets()) {
          stack->push_back(args[i]);
          break;
        }
      }
    }
  }
  return true;
}

// zero_ and fill_ of a whole storage in strict eager: the value is made on
// the host (by PyTorch's CPU fill, so it converts as the CPU does) and
// uploaded, which compiles nothing for a new shape (zeros(), full(), an
// optimizer's first state). False leaves the fill to the op's program.
bool fill_from_host(const OpInfo& info, torch::jit::Stack* stack) {
  const size_t nargs = info.fill == OpInfo::kZero ? 1 : 2;
  at::Tensor self = (*stack)[stack->size() - nargs].toTensor();
  if (self.is_conj() || self.is_neg() || !self.is_contiguous()) return false;
  at::Tensor item = at::empty({}, self.options().device(c10::kCPU));
  if (info.fill == OpInfo::kZero)
    item.zero_();
  else
    item.fill_(stack->back().toScalar());
  tpr_tensor_ref_t ref = tensor_ref(self, info.name.c_str());
  bool filled = false;
  check(tpr_tensor_fill_host(&ref, item.const_data_ptr(), item.nbytes(), &filled));
  if (!filled) return false;
  torch::jit::drop(*stack, nargs);
  stack->push_back(std::move(self));
  return true;
}

// Boolean-mask indices (x[mask], x[mask] = v) have data-dependent shapes:
// replace each mask by the long indices of its true elements (one sync), as
// PyTorch's own kernels do, so the op runs natively with fixed shapes.
void expand_bool_indices(const c10::OperatorHandle& op, const OpInfo& info,
                         torch::jit::Stack* stack) {
  if (info.indices < 0) return;
  c10::IValue& v = (*stack)[stack->size() - op.schema().arguments().size() + info.indices];
  if (!v.isList()) return;
  bool any = false;
  for (const auto& e : v.toListRef())
    any |= e.isTensor() && (e.toTensor().scalar_type() == at::kBool ||
                            e.toTensor().scalar_type() == at::kByte);
  if (!any) return;
  c10::List<std::optional<at::Tensor>> out;
  for (const auto& e : v.toListRef()) {
    if (e.isTensor() && (e.toTensor().scalar_type() == at::kBool ||
                         e.toTensor().scalar_type() == at::kByte)) {
      const at::Tensor& mask = e.toTensor();
      at::Tensor nz = nonzero_sync(mask);
      for (int64_t k = 0; k < mask.dim(); k++) out.push_back(nz.select(1, k));
    } else {
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(e.toTensor()) : std::nullopt);
    }
  }
  v = out;
}

void tpu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet,
                  torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  const std::string& name = info.name;
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  bool mixed = false;
  c10::Device device = op_device(schema, name, stack->data() + stack->size() - nargs, nargs,
                                info.foreach, &mixed);
  if (mixed) {
    // A foreach op over tensors on several devices (FSDP2 copying shards
    // into a buffer on another device): PyTorch's per-tensor kernel, each
    // op on its own tensors' device, as CUDA's foreach kernels do.
    TORCH_CHECK(info.per_tensor, name, ": its tensors are on several tpu devices, "
                "and it has no per-tensor kernel to run them one device at a time");
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CompositeExplicitAutograd),
                       stack);
    return;
  }
  if (info.checks) run_arg_checks(*info.checks, op.schema(), name, *stack, /*resized=*/false);
  if (info.fill && fill_from_host(info, stack)) return;
  expand_bool_indices(op, info, stack);
  if (info.has_rule) {
    try {
      if (run_native(op, stack, info, device)) return;
    } catch (const std::exception& e) {
      // The meta kernel cannot say the result's shape (data-dependent
      // output, e.g. boolean-mask indexing): only running it can.
      std::string what = e.what();
      // (repeat_interleave.Tensor without output_size says "cannot
      // repeat_interleave a meta tensor without output_size".) A rule that
      // needs a run-time check (_assert_async) serves compiled graphs only:
      // eager reads the values on the CPU.
      bool check = what.find("needs a run-time check") != std::string::npos;
      if (!check && what.find("data-dependent") == std::string::npos &&
          what.find("data-independent") == std::string::npos &&
          what.find("meta tensor without") == std::string::npos)
        throw;
      cpu_fallback_counted(op, stack, name,
                           check ? "needs a run-time check" : "has a data-dependent output shape");
      return;
    }
    cpu_fallback_counted(op, stack, name, "has a tpu rule but no meta kernel");
    return;
  }
  cpu_fallback_counted(op, stack, name, "has no tpu lowering");
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
}

// Some ops have CompositeExplicitAutograd kernels, which a backend without
// its own kernel inherits: foreach ops split into one op (and one executable
// run) per tensor, native_layer_norm decomposes through batch_norm,
// native_group_norm views its input as if contiguous (a channels-last one
// fails, though group_norm hands it over as on the CPU), and
// convolutions end in convolution_overrideable, which has no meta kernel to
// give result types. Claiming them for tpu runs each as one graph through
// its rule; native_group_norm decomposes through view(), which refuses the
// strided layouts (channels-last with a size-1 batch) its CPU kernel
// accepts. The hottest structured ops are claimed too: their inherited
// functional and in-place forms run PyTorch's meta and output allocation,
// then call the out= form, about a microsecond per op before our kernel.
// addr's decomposition (outer product, then beta and alpha) rounds bfloat16
// and float16 in another order than the CPU and CUDA kernels do.
bool claimed(const std::string& name) {
  static const std::string kForeach = "aten::_foreach_";
  static const std::set<std::string> kHot = {
      "aten::add.Tensor",  "aten::sub.Tensor",  "aten::mul.Tensor", "aten::div.Tensor",
      "aten::add_.Tensor", "aten::sub_.Tensor", "aten::mul_.Tensor", "aten::div_.Tensor",
      "aten::addmm",       "aten::mm",          "aten::bmm"};
  return name.compare(0, kForeach.size(), kForeach) == 0 ||
         name == "aten::native_layer_norm" || name == "aten::native_group_norm" ||
         name == "aten::convolution" ||
         name == "aten::_convolution" || name == "aten::convolution_backward" ||
         name == "aten::addr" || name == "aten::addr_" ||
         kHot.count(name) > 0;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  size_t n = 0;
  const tpr_rule_t* rules = tpr_rule_table(&n);
  for (size_t i = 0; i < n; i++) {
    std::string name = rules[i].name;
    if (!claimed(name)) continue;
    m.impl(name.substr(6).c_str(),
           torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  }
}

}  // namespace

std::map<std::string, int64_t> fallback_counts_snapshot() {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  return fallback_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  fallback_counts.clear();
}

}  // namespace torch_tpu
