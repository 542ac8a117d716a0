#include "aten/ArgChecks.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/stack.h>
#include <c10/util/Exception.h>

#include "aten/TensorRef.h"
#include "core/TpuStatus.h"

#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace torch_tpu {
namespace {

using Args = c10::ArrayRef<c10::IValue>;

bool is_write(const c10::Argument& a) {
  return a.alias_info() && a.alias_info()->isWrite();
}

// "Float[2, 3]", and the offset and strides where they are not the
// contiguous ones: enough to tell two views of one storage apart.
std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << t.scalar_type() << t.sizes();
  if (t.storage_offset() || !t.is_contiguous())
    s << " (offset " << t.storage_offset() << ", strides " << t.strides() << ")";
  return s.str();
}

// A call's arguments looked up by schema name.
struct Call {
  const c10::FunctionSchema& schema;
  Args args;
  const c10::IValue* get(const char* name) const {
    auto i = schema.argumentIndexWithName(name);
    return i && static_cast<size_t>(*i) < args.size() ? &args[*i] : nullptr;
  }
  at::Tensor tensor(const char* name) const {
    const c10::IValue* v = get(name);
    return v && v->isTensor() ? v->toTensor() : at::Tensor();
  }
};

// Every tensor in |v| (a tensor, or a list of tensors and Nones).
template <typename F>
void each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) f(v.toTensor());
  } else if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (e.isTensor() && e.toTensor().defined()) f(e.toTensor());
  }
}

// -- op-specific checks: the CPU kernels' own, which no meta kernel makes ------

using CheckFn = void (*)(const std::string&, const Call&);

// The CPU's fills convert the value to self's dtype and refuse one that
// does not fit: the same conversion here gives the same verdict.
void check_value_fits(const std::string& name, const at::Tensor& self, const c10::Scalar& v) {
  try {
    switch (self.scalar_type()) {
#define CONVERT(T, N)        \
  case at::ScalarType::N:    \
    (void)v.to<T>();         \
    break;
      AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(CONVERT)
#undef CONVERT
      default:
        break;
    }
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, name, ": ", e.what_without_backtrace(), " (value ", v, ", self ",
                describe(self), ")");
  }
}

void check_fill_scalar(const std::string& name, const Call& c) {
  const c10::IValue* v = c.get("value");
  if (v && v->isScalar()) check_value_fits(name, c.tensor("self"), v->toScalar());
}

// A CPU value tensor is read for free; one on tpu only in debug eager
// (check_argument_data).
void check_fill_tensor(const std::string& name, const Call& c) {
  at::Tensor v = c.tensor("value");
  if (v.defined() && v.device().is_cpu() && v.dim() == 0)
    check_value_fits(name, c.tensor("self"), v.item());
}

void check_complex(const std::string& name, const Call& c) {
  at::Tensor re = c.tensor("real"), im = c.tensor("imag"), out = c.tensor("out");
  if (!re.defined() || !im.defined()) return;
  auto floating = [](at::ScalarType t) {
    return t == at::kHalf || t == at::kFloat || t == at::kDouble;
  };
  TORCH_CHECK(floating(re.scalar_type()) && floating(im.scalar_type()), name,
              ": Expected both inputs to be Half, Float or Double tensors but got ",
              re.scalar_type(), " and ", im.scalar_type());
  TORCH_CHECK(re.scalar_type() == im.scalar_type(), name, ": Expected object of scalar type ",
              re.scalar_type(), " but got scalar type ", im.scalar_type(),
              " for second argument (real ", describe(re), ", imag ", describe(im), ")");
  auto want = c10::toComplexType(re.scalar_type());
  TORCH_CHECK(!out.defined() || out.scalar_type() == want, name,
              ": Expected object of scalar type ", want, " but got scalar type ",
              out.scalar_type(), " for argument 'out'");
}

// aten::convolution is claimed for tpu, so the CPU path's checks of the
// window arguments (in at::_convolution) must be made here.
void check_convolution(const std::string& name, const Call& c) {
  auto ints = [&](const char* arg) {
    const c10::IValue* v = c.get(arg);
    return v && v->isIntList() ? v->toIntVector() : std::vector<int64_t>();
  };
  auto any = [](const std::vector<int64_t>& v, bool (*bad)(int64_t)) {
    for (int64_t x : v)
      if (bad(x)) return true;
    return false;
  };
  const c10::IValue* tr = c.get("transposed");
  bool transposed = tr && tr->isBool() && tr->toBool();
  TORCH_CHECK(!any(ints("padding"), [](int64_t x) { return x < 0; }), name,
              ": negative padding is not supported (padding ", ints("padding"), ")");
  TORCH_CHECK(!transposed || !any(ints("output_padding"), [](int64_t x) { return x < 0; }),
              name, ": negative output_padding is not supported (output_padding ",
              ints("output_padding"), ")");
  TORCH_CHECK(!any(ints("stride"), [](int64_t x) { return x <= 0; }), name,
              ": non-positive stride is not supported (stride ", ints("stride"), ")");
  TORCH_CHECK(!any(ints("dilation"), [](int64_t x) { return x <= 0; }), name,
              ": dilation should be greater than zero, but got ", ints("dilation"));
  const c10::IValue* g = c.get("groups");
  TORCH_CHECK(!g || !g->isInt() || g->toInt() > 0, name,
              ": non-positive groups is not supported (groups ", g ? g->toInt() : 1, ")");
}

void check_gelu(const std::string& name, const Call& c) {
  const c10::IValue* a = c.get("approximate");
  if (!a || !a->isString()) return;
  std::string s = a->toStringRef();
  TORCH_CHECK(s == "none" || s == "tanh", name,
              ": approximate argument must be either none or tanh. (got \"", s, "\")");
}

void check_bucketize(const std::string& name, const Call& c) {
  at::Tensor b = c.tensor("boundaries");
  TORCH_CHECK(!b.defined() || b.dim() == 1, name,
              ": boundaries tensor must be 1 dimension, but got dim(", b.dim(), ") (boundaries ",
              describe(b), ")");
}

void check_masked_scatter(const std::string& name, const Call& c) {
  at::Tensor m = c.tensor("mask");
  TORCH_CHECK(!m.defined() || m.scalar_type() == at::kBool, name,
              ": masked_scatter_ only supports boolean masks, but got mask with dtype ",
              m.scalar_type());
}

// aminmax's CPU kernel is structured: its outputs must have self's dtype.
void check_aminmax_out(const std::string& name, const Call& c) {
  at::Tensor self = c.tensor("self");
  for (const char* o : {"min", "max"}) {
    at::Tensor out = c.tensor(o);
    if (!self.defined() || !out.defined()) continue;
    TORCH_CHECK(out.scalar_type() == self.scalar_type(), name,
                ": Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(self.scalar_type()),
                ", but got ", c10::scalarTypeToTypeMeta(out.scalar_type()), " instead (", o,
                " ", describe(out), ")");
  }
}

// amax and amin's CPU kernels write only into an out of self's dtype.
void check_amax_out(const std::string& name, const Call& c) {
  at::Tensor self = c.tensor("self"), out = c.tensor("out");
  TORCH_CHECK(!self.defined() || !out.defined() || self.scalar_type() == out.scalar_type(), name,
              ": Expected the dtype for input and out to match, but got ", self.scalar_type(),
              " for input's dtype and ", out.scalar_type(), " for out's dtype.");
}

const std::unordered_map<std::string, CheckFn>& op_checks() {
  static const std::unordered_map<std::string, CheckFn> t = {
      {"aten::masked_fill.Scalar", check_fill_scalar},
      {"aten::masked_fill_.Scalar", check_fill_scalar},
      {"aten::masked_fill.Scalar_out", check_fill_scalar},
      {"aten::masked_fill.Tensor", check_fill_tensor},
      {"aten::masked_fill_.Tensor", check_fill_tensor},
      {"aten::masked_fill.Tensor_out", check_fill_tensor},
      {"aten::fill.Scalar", check_fill_scalar},
      {"aten::fill_.Scalar", check_fill_scalar},
      {"aten::fill.Scalar_out", check_fill_scalar},
      {"aten::complex", check_complex},
      {"aten::complex.out", check_complex},
      {"aten::convolution", check_convolution},
      {"aten::convolution.out", check_convolution},
      {"aten::_convolution", check_convolution},
      {"aten::_convolution.out", check_convolution},
      {"aten::gelu", check_gelu},
      {"aten::gelu_", check_gelu},
      {"aten::gelu.out", check_gelu},
      {"aten::gelu_backward", check_gelu},
      {"aten::gelu_backward.grad_input", check_gelu},
      {"aten::bucketize.Tensor", check_bucketize},
      {"aten::bucketize.Tensor_out", check_bucketize},
      {"aten::bucketize.Scalar", check_bucketize},
      {"aten::bucketize.Scalar_out", check_bucketize},
      {"aten::masked_scatter", check_masked_scatter},
      {"aten::masked_scatter_", check_masked_scatter},
      {"aten::masked_scatter.out", check_masked_scatter},
      {"aten::aminmax.out", check_aminmax_out},
      {"aten::amax.out", check_amax_out},
      {"aten::amin.out", check_amax_out},
  };
  return t;
}

// -- overlap between the written tensor and the inputs ---------------------------

// Inputs the CPU kernel refuses to share memory with the written tensor
// (its out=, or self when in place): the whole overlap, or with |partial|
// only a partial one. By op name up to the overload. Some CPU kernels
// check before resizing out= to the result's shape, others (|after|) after.
struct OverlapRule {
  const char* base;
  const char* args[2];
  bool partial[2];
  bool after;
  const char* written;  // the written argument checked; nullptr: every one
};

const OverlapRule kOverlapRules[] = {
    {"aten::cat", {"tensors", nullptr}, {false, false}, true, nullptr},
    {"aten::gather", {"self", "index"}, {false, true}, true, nullptr},
    {"aten::index_select", {"self", "index"}, {false, false}, false, nullptr},
    {"aten::take", {"self", "index"}, {false, false}, false, nullptr},
    {"aten::index", {"self", "indices"}, {false, false}, false, nullptr},
    {"aten::scatter", {"index", "src"}, {false, false}, false, nullptr},
    {"aten::scatter_", {"index", "src"}, {false, false}, false, nullptr},
    {"aten::scatter_add", {"index", "src"}, {false, false}, false, nullptr},
    {"aten::scatter_add_", {"index", "src"}, {false, false}, false, nullptr},
    {"aten::scatter_reduce", {"index", "src"}, {false, false}, false, nullptr},
    {"aten::scatter_reduce_", {"index", "src"}, {false, false}, false, nullptr},
    {"aten::index_add", {"index", "source"}, {false, false}, true, nullptr},
    {"aten::index_add_", {"index", "source"}, {false, false}, true, nullptr},
    {"aten::index_copy", {"index", "source"}, {false, false}, true, nullptr},
    {"aten::index_copy_", {"index", "source"}, {false, false}, true, nullptr},
    {"aten::index_reduce", {"index", "source"}, {false, false}, true, nullptr},
    {"aten::index_reduce_", {"index", "source"}, {false, false}, true, nullptr},
    {"aten::kthvalue", {"self", nullptr}, {false, false}, true, "values"},
    {"aten::median", {"self", nullptr}, {false, false}, true, "values"},
    {"aten::mode", {"self", nullptr}, {false, false}, true, "values"},
    {"aten::topk", {"self", nullptr}, {false, false}, true, "values"},
};

}  // namespace

struct ArgChecks {
  CheckFn fn = nullptr;
  const OverlapRule* overlap = nullptr;
  // Pointwise ops run on the CPU through TensorIterator, which refuses a
  // written tensor that partially overlaps an input.
  bool pointwise = false;
  std::vector<size_t> written;  // written tensor arguments
};

const ArgChecks* find_arg_checks(const c10::OperatorHandle& op, const std::string& name) {
  auto checks = std::make_unique<ArgChecks>();
  auto it = op_checks().find(name);
  if (it != op_checks().end()) checks->fn = it->second;
  std::string base = name.substr(0, name.find('.'));
  for (const auto& r : kOverlapRules)
    if (base == r.base) checks->overlap = &r;
  const auto& args = op.schema().arguments();
  for (size_t i = 0; i < args.size(); i++)
    if (is_write(args[i]) && args[i].type()->kind() == c10::TypeKind::TensorType)
      checks->written.push_back(i);
  checks->pointwise = !checks->written.empty() && op.hasTag(at::Tag::pointwise);
  if (!checks->fn && !checks->pointwise && !(checks->overlap && !checks->written.empty()))
    return nullptr;
  // Kept for the process: one per op overload that has checks.
  return checks.release();
}

void check_writable(const std::string& name, const at::Tensor& t) {
  TORCH_CHECK(!t.defined() || at::has_internal_overlap(t) != at::MemOverlap::Yes, name,
              ": unsupported operation: more than one element of the written-to tensor refers "
              "to a single memory location. Please clone() the tensor before performing the "
              "operation. (written-to ", describe(t), ")");
}

void check_no_overlap(const std::string& name, const at::Tensor& out, const char* what,
                      const at::Tensor& in, bool partial_only) {
  if (!out.defined() || !in.defined() || in.device() != out.device()) return;
  auto s = at::get_overlap_status(out, in);
  bool bad = s == at::MemOverlapStatus::Partial ||
             (!partial_only && s == at::MemOverlapStatus::Full);
  TORCH_CHECK(!bad, name,
              ": unsupported operation: some elements of the input tensor and the written-to "
              "tensor refer to a single memory location. Please clone() the tensor before "
              "performing the operation. (written-to ", describe(out), ", ", what, " ",
              describe(in), ")");
}

namespace {

void overlap_rule(const ArgChecks& checks, const Call& c, const std::string& name,
                  const at::Tensor& out) {
  const OverlapRule& r = *checks.overlap;
  check_writable(name, out);
  for (int k = 0; k < 2 && r.args[k]; k++) {
    const c10::IValue* v = c.get(r.args[k]);
    if (!v) continue;
    // An input that is the written tensor itself overlaps it fully.
    each_tensor(*v, [&](const at::Tensor& in) {
      check_no_overlap(name, out, r.args[k], in, r.partial[k]);
    });
  }
}

// TensorIterator's check: no input partially overlaps a written tensor
// (the written tensor itself, read in place, is fine).
void pointwise_rule(const Call& c, const std::string& name, const at::Tensor& out) {
  for (size_t i = 0; i < c.args.size(); i++) {
    if (is_write(c.schema.arguments()[i])) continue;
    each_tensor(c.args[i], [&](const at::Tensor& in) {
      if (!in.is_same(out))
        check_no_overlap(name, out, c.schema.arguments()[i].name().c_str(), in, true);
    });
  }
}

}  // namespace

void run_arg_checks(const ArgChecks& checks, const c10::FunctionSchema& schema,
                    const std::string& name, const torch::jit::Stack& stack, bool resized) {
  Call c{schema, torch::jit::last(stack, schema.arguments().size())};
  if (!resized && checks.fn) checks.fn(name, c);
  for (size_t w : checks.written) {
    if (!c.args[w].isTensor() || !c.args[w].toTensor().defined()) continue;
    const at::Tensor& out = c.args[w].toTensor();
    const OverlapRule* r = checks.overlap;
    if (r && r->after == resized &&
        (!r->written || schema.arguments()[w].name() == r->written))
      overlap_rule(checks, c, name, out);
    if (checks.pointwise && !resized) pointwise_rule(c, name, out);
  }
}

// -- checks that read tensor data ---------------------------------------------
//
// XLA clamps out-of-range gather indices and drops out-of-range scatter
// updates; PyTorch raises. Such checks need values only the device has (an
// index's range, a probability tensor's flags), so they are computed there by
// ops of their own, queued behind the op they guard. Debug eager reads them
// at once. Strict and fused eager read them at the host's next wait for the
// device (a read to the host, synchronize()), where the first failed check
// raises the CPU's exception: later, as CUDA's device-side asserts surface,
// but no op waits for its check.

namespace {

struct DataCheck {
  std::vector<at::Tensor> values;  // on the device until judged
  // Throws the CPU's exception, |note| appended, if the values (read to the
  // host) show a bad call.
  std::function<void(const std::vector<at::Tensor>& host, const char* note)> judge;
};

const char kLaterNote[] =
    " (found at a later synchronization: tpu checks tensor data without waiting, in eager "
    "and in compiled graphs; TORCH_TPU_LAUNCH_BLOCKING=1 raises at the op)";

// Bounds how many checks wait: at this count all of them are judged.
constexpr size_t kMaxWaitingChecks = 256;

std::mutex waiting_mutex;
// Never destroyed: it may hold device tensors past the runtime's shutdown.
std::vector<DataCheck>* const waiting = new std::vector<DataCheck>();
std::atomic<size_t> waiting_count{0};

void judge_now(const DataCheck& c, const char* note) {
  std::vector<at::Tensor> host;
  host.reserve(c.values.size());
  for (const auto& v : c.values) host.push_back(v.cpu());
  c.judge(host, note);
}

// |of_device_data|: the values describe tensors on the device, so they are
// judged at the next wait like every such check, even where they were
// computed on the host (index_range over a buffer already in host memory);
// values of host tensors are judged at once.
void submit(DataCheck c, bool of_device_data) {
  if (!of_device_data || tpr_eager_launch_blocking()) {
    judge_now(c, "");
    return;
  }
  size_t n;
  {
    std::lock_guard<std::mutex> lock(waiting_mutex);
    waiting->push_back(std::move(c));
    n = waiting->size();
    waiting_count.store(n);
  }
  if (n >= kMaxWaitingChecks) raise_failed_data_checks();
}

void submit(DataCheck c) {
  bool on_host = true;
  for (const auto& v : c.values) on_host = on_host && v.device().is_cpu();
  submit(std::move(c), !on_host);
}

// The least and greatest of |n| integers at |data| (of |dtype|), entries
// equal to |ignore| left out, as a CPU s64[2] tensor (max, min when none is
// left).
at::Tensor host_range(const void* data, at::ScalarType dtype, int64_t n,
                      std::optional<int64_t> ignore) {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  AT_DISPATCH_INTEGRAL_TYPES(dtype, "index_range", [&] {
    const scalar_t* p = static_cast<const scalar_t*>(data);
    for (int64_t i = 0; i < n; i++) {
      int64_t v = static_cast<int64_t>(p[i]);
      if (ignore && v == *ignore) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  });
  at::Tensor range = at::empty({2}, at::TensorOptions().dtype(at::kLong));
  range.mutable_data_ptr<int64_t>()[0] = lo;
  range.mutable_data_ptr<int64_t>()[1] = hi;
  return range;
}

// An integer index tensor's least and greatest entries as an s64[2] tensor,
// entries equal to |ignore| left out: one program on tpu (tpu::index_range),
// or, where the index is already computed in host memory (the CPU plugin's
// buffers; an index uploaded from the host, say), on the CPU from its bytes
// in place, which compiles nothing and waits for nothing.
at::Tensor index_range(const at::Tensor& index, std::optional<int64_t> ignore) {
  if (index.device().is_cpu()) {
    at::Tensor x = index.to(at::kLong).contiguous();
    return host_range(x.const_data_ptr(), at::kLong, x.numel(), ignore);
  }
  const at::ScalarType t = index.scalar_type();  // those host_range reads
  if (t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt || t == at::kLong) {
    tpr_tensor_ref_t in = tensor_ref(index, "index_range");
    const void* data = nullptr;
    tpr_buffer_t* hold = nullptr;
    if (tpr_tensor_host_view_ready(&in, &data, &hold)) {
      at::Tensor range = host_range(data, t, index.numel(), ignore);
      tpr_buffer_release(hold);
      return range;
    }
  }
  at::Tensor range = at::empty({2}, index.options().dtype(at::kLong));
  tpr_tensor_ref_t in = tensor_ref(index, "index_range");
  tpr_tensor_ref_t out = tensor_ref(range, "index_range");
  tpr_eager_arg_t args[3] = {};
  args[0].arg.kind = TPR_ARG_TENSOR;
  args[0].tensor = &in;
  set_index_range_args(ignore, &args[1].arg, &args[2].arg);
  tpr_type_t out_type = tensor_type(range, "index_range");
  const tpr_tensor_ref_t* targets[1] = {&out};
  tpr_eager_call_t call = {"tpu::index_range", static_cast<int>(index.device().index()),
                           args, 3, &out_type, 1, targets, nullptr};
  check(tpr_eager_run(&call));
  return range;
}

// Where range checks go while collect_range_checks runs (a compiled graph's
// lowering); null otherwise.
thread_local std::vector<RangeCheck>* collecting = nullptr;

// Queues |judge| on |index|'s range, or hands it to the compiled graph being
// built.
void submit_range(const at::Tensor& index, std::optional<int64_t> ignore,
                  std::function<void(const std::vector<at::Tensor>&, const char*)> judge) {
  if (collecting) {
    collecting->push_back({index, ignore, std::move(judge)});
    return;
  }
  submit({{index_range(index, ignore)}, std::move(judge)}, !index.device().is_cpu());
}

struct IndexedOp {
  const char* base;  // overload name up to the '.'
  int data;          // argument holding the indexed tensor
  int dim;           // argument holding the dim; -1: dim 0; -2: one index per dim;
                     // -3: the flattened tensor
  int index;         // argument holding the index tensor (or list)
  bool negative_ok;  // Python-style negative indices allowed
  bool index_error;  // the CPU raises IndexError (else RuntimeError)
};

const IndexedOp kIndexedOps[] = {
    {"aten::index_select", 0, 1, 2, false, true},
    {"aten::gather", 0, 1, 2, false, false},
    {"aten::scatter", 0, 1, 2, false, false},
    {"aten::scatter_", 0, 1, 2, false, false},
    {"aten::scatter_add", 0, 1, 2, false, false},
    {"aten::scatter_add_", 0, 1, 2, false, false},
    {"aten::scatter_reduce", 0, 1, 2, false, false},
    {"aten::scatter_reduce_", 0, 1, 2, false, false},
    {"aten::index_add", 0, 1, 2, false, false},
    {"aten::index_add_", 0, 1, 2, false, false},
    {"aten::index_copy", 0, 1, 2, false, true},
    {"aten::index_copy_", 0, 1, 2, false, true},
    {"aten::index_fill", 0, 1, 2, true, true},
    {"aten::index_fill_", 0, 1, 2, true, true},
    {"aten::embedding", 0, -1, 1, false, true},
    {"aten::take", 0, -3, 1, true, true},
    {"aten::index", 0, -2, 1, true, true},
    {"aten::index_put", 0, -2, 1, true, true},
    {"aten::index_put_", 0, -2, 1, true, true},
    {"aten::_index_put_impl_", 0, -2, 1, true, true},
    {"aten::_unsafe_index", 0, -2, 1, true, true},
};

void check_index(const std::string& name, const at::Tensor& index, int64_t size,
                 const std::string& where, bool negative_ok, bool index_error) {
  if (!index.defined() || index.numel() == 0 || index.scalar_type() == at::kBool ||
      index.scalar_type() == at::kByte)
    return;
  submit_range(index, std::nullopt,
               [=](const std::vector<at::Tensor>& host, const char* note) {
            const int64_t* r = host[0].const_data_ptr<int64_t>();
            int64_t floor = negative_ok ? -size : 0;
            if (r[1] < size && r[0] >= floor) return;
            std::ostringstream msg;
            msg << name << ": index " << (r[1] >= size ? r[1] : r[0])
                << " is out of bounds for " << where << " with size " << size << note;
            if (index_error) TORCH_CHECK_INDEX(false, msg.str());
            TORCH_CHECK(false, msg.str());
          });
}

// The kIndexedOps entry for overload |name| ("aten::gather.out"), or null.
const IndexedOp* indexed_op(const std::string& name) {
  const size_t base = std::min(name.find('.'), name.size());
  for (const auto& e : kIndexedOps)
    if (name.compare(0, base, e.base) == 0) return &e;
  return nullptr;
}

void check_index_bounds(const std::string& name, const IndexedOp& e, Args args) {
  if (static_cast<size_t>(std::max(e.data, e.index)) >= args.size() ||
      !args[e.data].isTensor())
    return;
  const at::Tensor& data = args[e.data].toTensor();
  if (e.dim == -2) {  // one index tensor per leading dim
    if (!args[e.index].isList()) return;
    int64_t d = 0;
    for (const auto& v : args[e.index].toListRef()) {
      if (v.isTensor() && d < data.dim())
        check_index(name, v.toTensor(), data.size(d), "dimension " + std::to_string(d),
                    e.negative_ok, e.index_error);
      d++;
    }
    return;
  }
  if (!args[e.index].isTensor()) return;
  if (e.dim == -3) {
    check_index(name, args[e.index].toTensor(), data.numel(),
                "the flattened " + describe(data), e.negative_ok, e.index_error);
    return;
  }
  int64_t dim = e.dim == -1 ? 0 : args[e.dim].toInt();
  if (dim < 0) dim += std::max<int64_t>(data.dim(), 1);
  int64_t size = data.dim() == 0 ? 1 : data.size(dim);
  check_index(name, args[e.index].toTensor(), size, "dimension " + std::to_string(dim),
              e.negative_ok, e.index_error);
}

// nll_loss's class targets: in [0, C) unless equal to ignore_index.
void check_nll_targets(const std::string& name, Args args) {
  if (args.size() < 5 || !args[0].isTensor() || !args[1].isTensor() || !args[4].isInt())
    return;
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& target = args[1].toTensor();
  if (self.dim() < 1 || !target.defined() || target.numel() == 0 ||
      !at::isIntegralType(target.scalar_type(), /*includeBool=*/false))
    return;
  const int64_t classes = self.dim() == 1 ? self.size(0) : self.size(1);
  submit_range(target, args[4].toInt(),
               [=](const std::vector<at::Tensor>& host, const char* note) {
            const int64_t* r = host[0].const_data_ptr<int64_t>();
            if (r[0] > r[1] || (r[0] >= 0 && r[1] < classes)) return;  // none or all valid
            TORCH_CHECK_INDEX(false, "Target ", r[0] < 0 ? r[0] : r[1], " is out of bounds. (",
                              name, ", ", classes, " classes)", note);
          });
}

// multinomial's argument checks that read the probabilities: in PyTorch's
// device-generic path without replacement, and in its CPU kernel with it.
void check_multinomial_data(const std::string& name, Args args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[1].isInt() || !args[2].isBool()) return;
  const at::Tensor& p = args[0].toTensor();
  if (!at::isFloatingType(p.scalar_type()) || p.numel() == 0 || p.dim() < 1 || p.dim() > 2)
    return;
  const bool replacement = args[2].toBool();
  const bool one = args[1].toInt() == 1;
  // The least and greatest entry and the least row sum: ops whose result
  // types come from C++ (a first multinomial imports no compiler module).
  at::Tensor rows = p.dim() == 1 ? p.unsqueeze(0) : p;
  at::Tensor values = at::stack({p.min(), p.max(), rows.sum(1).min()});
  const std::string shape = describe(p);
  submit({{values}, [=](const std::vector<at::Tensor>& host, const char* note) {
            at::Tensor v = host[0].to(at::kDouble);
            const double* r = v.const_data_ptr<double>();
            // NaN fails "not below 0" too, as in the CPU's order of checks.
            const bool f[3] = {!(r[0] >= 0), r[1] == std::numeric_limits<double>::infinity(),
                               r[2] <= 0};
            if (!replacement || one) {
              TORCH_CHECK(!f[0] && !f[1], name, ": probability tensor contains either `inf`, "
                          "`nan` or element < 0 (", shape, ")", note);
              TORCH_CHECK(!f[2], name, ": invalid multinomial distribution (sum of "
                          "probabilities <= 0) (", shape, ")", note);
              return;
            }
            TORCH_CHECK(!f[0], name, ": invalid multinomial distribution (encountering "
                        "probability entry < 0) (", shape, ")", note);
            TORCH_CHECK(!f[1], name, ": invalid multinomial distribution (encountering "
                        "probability entry = infinity or NaN) (", shape, ")", note);
            TORCH_CHECK(!f[2], name, ": invalid multinomial distribution (sum of "
                        "probabilities <= 0) (", shape, ")", note);
          }});
}

// Whether every value of dtype |from| converts to |to| without overflow.
bool always_fits(at::ScalarType from, at::ScalarType to) {
  if (from == to || from == at::kBool) return true;
  if (at::isComplexType(from) && !at::isComplexType(to)) return false;
  if (at::isIntegralType(from, false) && at::isIntegralType(to, false))
    return at::promoteTypes(from, to) == to;
  if (at::isFloatingType(from) && at::isFloatingType(to))
    return c10::elementSize(from) < c10::elementSize(to) ||
           (from == at::kFloat && to == at::kDouble);
  return false;
}

// masked_fill with a tpu value tensor: the CPU converts its value like a
// Python scalar's. A copy is judged, as the value may change before then.
void check_fill_value_data(const std::string& name, Args args) {
  if (args.size() < 3 || !args[0].isTensor() || !args[2].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& v = args[2].toTensor();
  if (!v.defined() || v.device().is_cpu() || v.dim() != 0 ||
      always_fits(v.scalar_type(), self.scalar_type()))
    return;
  at::Tensor like = at::empty(self.sizes(), self.options().device(c10::kMeta));
  submit({{v.clone()}, [=](const std::vector<at::Tensor>& host, const char* note) {
            try {
              check_value_fits(name, like, host[0].item());
            } catch (const c10::Error& e) {
              TORCH_CHECK(false, e.what_without_backtrace(), note);
            }
          }});
}

bool is_nll_forward(const std::string& name) {
  return name.rfind("aten::nll_loss", 0) == 0 && name.find("_forward") != std::string::npos;
}
bool is_multinomial(const std::string& name) {
  return name == "aten::multinomial" || name == "aten::multinomial.out";
}
bool is_masked_fill_tensor(const std::string& name) {
  return name.rfind("aten::masked_fill", 0) == 0 && name.find(".Tensor") != std::string::npos;
}

}  // namespace

bool has_data_checks(const std::string& name) {
  return indexed_op(name) || is_nll_forward(name) || is_multinomial(name) ||
         is_masked_fill_tensor(name);
}

void check_argument_data(const std::string& name, const torch::jit::Stack& args) {
  Args a(args);
  if (const IndexedOp* e = indexed_op(name)) check_index_bounds(name, *e, a);
  if (is_nll_forward(name)) check_nll_targets(name, a);
  if (is_multinomial(name)) check_multinomial_data(name, a);
  if (is_masked_fill_tensor(name)) check_fill_value_data(name, a);
}

std::vector<RangeCheck> collect_range_checks(const std::string& name,
                                             const torch::jit::Stack& args) {
  std::vector<RangeCheck> found;
  struct Collect {
    explicit Collect(std::vector<RangeCheck>* to) { collecting = to; }
    ~Collect() { collecting = nullptr; }
  } collect(&found);
  Args a(args);
  if (const IndexedOp* e = indexed_op(name)) check_index_bounds(name, *e, a);
  if (is_nll_forward(name)) check_nll_targets(name, a);
  return found;
}

void set_index_range_args(std::optional<int64_t> ignore, tpr_arg_t* value, tpr_arg_t* ignoring) {
  value->kind = TPR_ARG_INT;
  value->i = ignore.value_or(0);
  ignoring->kind = TPR_ARG_BOOL;
  ignoring->b = ignore.has_value();
}

void submit_range_check(const RangeCheck& check, const at::Tensor& range) {
  submit({{range}, check.judge});
}

void raise_failed_data_checks() {
  if (waiting_count.load() == 0) return;
  std::vector<DataCheck> mine;
  {
    std::lock_guard<std::mutex> lock(waiting_mutex);
    mine.swap(*waiting);
    waiting_count.store(0);
  }
  // The first failure is raised; the checks queued after it are dropped,
  // as their ops ran on a bad call's results.
  for (const auto& c : mine) judge_now(c, kLaterNote);
}

}  // namespace torch_tpu
