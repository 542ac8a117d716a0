// torch_tpu._C.Program: the compiled-graph builder behind the "tpu"
// torch.compile backend. Python walks the FX graph; each call_function node
// comes here with its arguments in schema order (tensors as stand-ins mapped
// to graph values), is converted exactly as eager converts a dispatcher call
// (ArgConvert), and lowered by the same C rule table into one program.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/ArgChecks.h"
#include "aten/ArgConvert.h"
#include "aten/TensorRef.h"
#include "compile/Program.h"
#include "core/TpuGenerator.h"
#include "core/TpuStatus.h"
#include "kernels/Kernel.h"

extern "C" {
#include "tpr/program.h"
}

namespace py = pybind11;

namespace torch_tpu {
namespace {

using TypeSpec = std::pair<c10::ScalarType, std::vector<int64_t>>;

tpr_type_t make_type(const TypeSpec& t, const char* what) {
  TORCH_CHECK(t.second.size() <= TPR_MAX_RANK, what, ": tensors of rank ",
              t.second.size(), " are not supported on tpu (max ", TPR_MAX_RANK, ")");
  return tpr_type_make(checked_dtype(t.first, what), static_cast<int>(t.second.size()),
                       t.second.data());
}

std::vector<tpr_type_t> make_types(const std::vector<TypeSpec>& specs, const char* what) {
  std::vector<tpr_type_t> types;
  for (const auto& t : specs) types.push_back(make_type(t, what));
  return types;
}

// Compiled graphs: tensors are graph values; constants (CPU tensors, Python
// numbers for Scalar arguments) become graph constants.
class GraphSink : public TensorArgSink {
 public:
  GraphSink(tpr_graph_t* g, const std::unordered_map<const void*, tpr_value_t>& ids,
            const char* op)
      : g_(g), ids_(ids), op_(op) {}

  void tensor(const at::Tensor& t, tpr_eager_arg_t& out) override {
    out.arg.value = value_of(t);
  }

  void tensor_list(const std::vector<std::optional<at::Tensor>>& ts,
                   tpr_eager_arg_t& out) override {
    std::vector<tpr_value_t> vs;
    for (const auto& t : ts) vs.push_back(t ? value_of(*t) : TPR_VALUE_NONE);
    finish_list(std::move(vs), out);
  }

  void scalar_list(const std::vector<double>& values, bool all_int,
                   tpr_eager_arg_t& out) override {
    std::vector<tpr_value_t> vs;
    for (double v : values)
      vs.push_back(all_int ? tpr_constant_i64(g_, TPR_DTYPE_S64, static_cast<int64_t>(v))
                           : tpr_constant_f64(g_, TPR_DTYPE_F64, v));
    finish_list(std::move(vs), out);
  }

  tpr_value_t scalar(const tpr_eager_arg_t& a) {
    switch (a.scalar_dtype) {
      case TPR_DTYPE_F64: return tpr_constant_f64(g_, TPR_DTYPE_F64, a.scalar.d);
      case TPR_DTYPE_BOOL: return tpr_constant_i64(g_, TPR_DTYPE_BOOL, a.scalar.b);
      case TPR_DTYPE_C128:
        return tpr_constant_dense(g_, tpr_type_scalar(TPR_DTYPE_C128), a.scalar.c);
      default: return tpr_constant_i64(g_, TPR_DTYPE_S64, a.scalar.i);
    }
  }

 private:
  tpr_value_t value_of(const at::Tensor& t) {
    auto it = ids_.find(t.unsafeGetTensorImpl());
    if (it != ids_.end()) return it->second;
    TORCH_CHECK(t.device().is_cpu(), op_, ": a constant tensor on ", t.device(),
                " cannot be embedded in a compiled graph");
    at::Tensor c = t.contiguous();
    tpr_type_t type = tensor_type(c, op_);
    return tpr_constant_dense(g_, type, c.data_ptr());
  }

  void finish_list(std::vector<tpr_value_t> vs, tpr_eager_arg_t& out) {
    lists_.push_back(std::move(vs));
    out.arg.values = lists_.back().data();
    out.arg.count = static_cast<int32_t>(lists_.back().size());
  }

  tpr_graph_t* g_;
  const std::unordered_map<const void*, tpr_value_t>& ids_;
  const char* op_;
  std::deque<std::vector<tpr_value_t>> lists_;
};

// Random ops draw from the device's default generator, as in eager: a
// program with random ops gets the generator's (seed, offset) as a hidden
// u64[2] last input; its ops draw at fixed offsets from it, in graph order,
// each reserving what the same eager call reserves (random_counters); each
// run reserves their total from the generator. The numbers are then those
// eager draws for the same ops from the same generator state.
class Program {
 public:
  Program(const std::vector<TypeSpec>& inputs, bool random) {
    std::vector<tpr_type_t> types = make_types(inputs, "torch.compile input");
    num_inputs_ = types.size();
    if (random) {
      int64_t two = 2;
      types.push_back(tpr_type_make(TPR_DTYPE_U64, 1, &two));
    }
    inputs_.resize(types.size());
    check(tpr_program_create(types.data(), static_cast<int>(types.size()), &p_,
                             inputs_.data()));
    if (random) rng_state_ = inputs_.back();
  }
  ~Program() { tpr_program_free(p_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  std::vector<int> inputs() const {
    return {inputs_.begin(), inputs_.begin() + num_inputs_};
  }

  // Lowers one node: |args| in schema order (defaults filled in), tensors
  // given as stand-in tensors listed with their graph values in |tensors|.
  // A random op draws with generator state |rng_state| (a u64[2] value),
  // or by default at the next offset of the run's state. Returns the result
  // values (lower.h's order).
  std::vector<int> lower(const std::string& name, const std::string& overload,
                         py::sequence args, py::sequence tensors,
                         const std::vector<TypeSpec>& out_specs, int rng_state) {
    const std::string full = overload.empty() || overload == "default"
                                 ? name : name + "." + overload;
    auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
        name.c_str(), overload == "default" ? "" : overload.c_str());
    const auto& schema = op.schema();
    TORCH_CHECK(args.size() == schema.arguments().size(), full, ": expected ",
                schema.arguments().size(), " arguments, got ", args.size());
    std::unordered_map<const void*, tpr_value_t> ids;
    for (auto item : tensors) {
      auto pair = item.cast<std::pair<at::Tensor, int>>();
      ids[pair.first.unsafeGetTensorImpl()] = pair.second;
    }
    tpr_graph_t* g = tpr_program_graph(p_);
    ArgStore store;
    GraphSink sink(g, ids, full.c_str());
    bool has_generator = false;
    int gen_index = -1;
    std::vector<tpr_eager_arg_t> eargs(args.size());
    std::vector<tpr_arg_t> cargs(args.size());
    torch::jit::Stack stack;
    for (size_t i = 0; i < args.size(); i++) {
      const auto& sa = schema.arguments()[i];
      c10::IValue v = torch::jit::toIValue(args[i], sa.real_type());
      stack.push_back(v);
      tpr_eager_arg_t& ea = eargs[i];
      std::memset(&ea, 0, sizeof ea);
      convert_arg(store, sink, sa, v, full.c_str(), ea, has_generator);
      if (ea.arg.kind == TPR_ARG_TENSOR && ea.arg.is_scalar) ea.arg.value = sink.scalar(ea);
      if (ea.arg.kind == TPR_ARG_GENERATOR) {
        TORCH_CHECK_NOT_IMPLEMENTED(
            v.isNone(), full, ": an explicit generator= is not supported in compiled "
            "tpu graphs (they draw from the default tpu generator)");
        gen_index = static_cast<int>(i);
      }
      cargs[i] = ea.arg;
    }
    if (gen_index < 0 && draws_from_default_generator(full)) {
      cargs.emplace_back();
      std::memset(&cargs.back(), 0, sizeof(tpr_arg_t));
      cargs.back().kind = TPR_ARG_GENERATOR;
      gen_index = static_cast<int>(cargs.size() - 1);
    }
    std::vector<tpr_type_t> out_types = make_types(out_specs, full.c_str());
    if (gen_index >= 0)
      cargs[gen_index].value = rng_state >= 0 ? rng_state : draw_state(full, out_types);
    std::vector<tpr_value_t> outs(out_types.size(), TPR_VALUE_NONE);
    tpr_lower_ctx_t ctx = {g, full.c_str(), cargs.data(), static_cast<int32_t>(cargs.size()),
                           out_types.data(), static_cast<int32_t>(out_types.size()),
                           outs.data()};
    check(tpr_lower(&ctx));
    if (has_data_checks(full)) add_range_checks(full, stack, ids);
    return {outs.begin(), outs.end()};
  }

  // Calls |kernel| on graph values |args|; returns its outputs' values.
  std::vector<int> call_kernel(const Kernel& kernel, const std::vector<int>& args) {
    tpr_graph_t* g = tpr_program_graph(p_);
    std::vector<tpr_value_t> in(args.begin(), args.end());
    std::vector<tpr_value_t> outs(kernel.outputs().size(), TPR_VALUE_NONE);
    tpr_call_kernel(g, kernel.get(), in.data(), static_cast<int>(in.size()), outs.data());
    check(tpr_graph_status(g));
    return {outs.begin(), outs.end()};
  }

  // The generator state (u64[2]) a random op with outputs |out_specs| would
  // draw with at this point, reserved for it: for ops whose state is also
  // saved (activation checkpointing's run_and_save_rng_state) to draw
  // again later with run_with_rng_state.
  int reserve_state(const std::string& op, const std::vector<TypeSpec>& out_specs) {
    return draw_state(op, make_types(out_specs, op.c_str()));
  }

  // Converts |v| to |dtype| and broadcasts it to |shape| (copy_ epilogues).
  int convert(int v, c10::ScalarType dtype, std::vector<int64_t> shape) {
    tpr_graph_t* g = tpr_program_graph(p_);
    tpr_value_t c = tpr_convert(g, v, checked_dtype(dtype, "copy_"));
    tpr_value_t r = tpr_broadcast_to(g, c, static_cast<int>(shape.size()), shape.data());
    check(tpr_graph_status(g));
    return r;
  }

  // Bounded dynamism: |v|'s dimension |dim| holds |size| (an s32 scalar
  // value) real entries, the rest is padding XLA then ignores.
  int set_dimension_size(int v, int size, int64_t dim) {
    tpr_graph_t* g = tpr_program_graph(p_);
    tpr_value_t r = tpr_set_dimension_size(g, v, size, dim);
    check(tpr_graph_status(g));
    return r;
  }

  // Back to a static array laid out at the bound (for outputs).
  int set_dimension_static(int v, int64_t dim) {
    tpr_graph_t* g = tpr_program_graph(p_);
    tpr_value_t r = tpr_set_dimension_static(g, v, dim);
    check(tpr_graph_status(g));
    return r;
  }

  // A fresh output of |dtype| (mutates < 0), or the new value of input
  // |mutates|.
  void add_output(int value, int mutates, c10::ScalarType dtype) {
    check(tpr_program_add_output(p_, value, mutates));
    if (mutates >= 0) {
      mutated_.push_back(mutates);
      return;
    }
    const tpr_type_t* t = tpr_program_output_type(p_, tpr_program_num_outputs(p_) - 1);
    out_dtypes_.push_back(dtype);
    out_shapes_.emplace_back(t->dims, t->dims + t->rank);
  }

  // Starts XLA's compile on a thread of its own (see tpr_program_compile_start);
  // compile() waits for it.
  void compile_start(const std::string& name) {
    seal_outputs();
    py::gil_scoped_release nogil;
    check(tpr_program_compile_start(p_, name.c_str()));
  }

  // Gets a cached executable without waiting (see tpr_program_load_start):
  // true if it is in memory or loading on a thread of its own, false if
  // only a compile can make it.
  bool load_start(const std::string& name) {
    seal_outputs();
    bool started = false;
    py::gil_scoped_release nogil;
    check(tpr_program_load_start(p_, name.c_str(), &started));
    return started;
  }

  bool compile(const std::string& name) {
    seal_outputs();
    bool compiled = false;
    {
      py::gil_scoped_release nogil;
      check(tpr_program_compile(p_, name.c_str(), &compiled));
    }
    return compiled;
  }

  // Runs on |inputs| (tensors of the input types); returns the fresh
  // outputs as new tensors. Mutated inputs are updated in place.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) {
    TORCH_CHECK(inputs.size() == num_inputs_, "compiled graph: expected ",
                num_inputs_, " inputs, got ", inputs.size());
    c10::Device device(c10::DeviceType::PrivateUse1, current_device());
    for (const auto& t : inputs)
      if (t.device().type() == c10::DeviceType::PrivateUse1) {
        device = t.device();
        break;
      }
    std::vector<at::Tensor> args(inputs);
    if (rng_state_ != TPR_VALUE_NONE) args.push_back(reserve_draws(device));
    std::vector<tpr_storage_t*> in_storages;
    for (size_t i = 0; i < args.size(); i++) {
      at::Tensor& t = args[i];
      if (t.device() != device) t = t.to(device);
      tpr_tensor_ref_t r = tensor_ref(t, "compiled graph input");
      if (!tpr_program_input_ok(p_, static_cast<int>(i), &r)) {
        // A view, a window of a larger storage or a never-written storage:
        // pass a dense copy (made through eager).
        at::Tensor dense = at::empty(t.sizes(), t.options().device(device));
        dense.copy_(t);
        t = dense;
        r = tensor_ref(t, "compiled graph input");
      }
      in_storages.push_back(r.storage);
    }
    std::vector<at::Tensor> outs;
    std::vector<tpr_storage_t*> out_storages;
    for (size_t k = 0; k < out_dtypes_.size(); k++) {
      const auto& shape = out_shapes_[k];
      at::Tensor o = at::empty(shape, at::TensorOptions().dtype(out_dtypes_[k]).device(device));
      out_storages.push_back(tensor_ref(o, "compiled graph output").storage);
      outs.push_back(o);
    }
    {
      py::gil_scoped_release nogil;
      check(tpr_program_run(p_, device.index(), in_storages.data(), out_storages.data()));
    }
    // Inputs passed as copies got their new values in the copy.
    for (int i : mutated_)
      if (!args[i].is_same(inputs[i])) inputs[i].copy_(args[i]);
    if (!checks_.empty()) {
      for (size_t k = 0; k < checks_.size(); k++)
        submit_range_check(checks_[k].second, outs[num_user_outputs_ + k]);
      outs.resize(num_user_outputs_);
    }
    return outs;
  }

 private:
  void seal_outputs() {
    if (num_user_outputs_ >= 0) return;
    // The checks' ranges follow the graph's outputs.
    num_user_outputs_ = static_cast<int>(out_dtypes_.size());
    for (const auto& c : checks_) add_output(c.first, -1, at::kLong);
  }

  // The index and class-target checks of op |full| on |stack| (stand-ins
  // whose graph values |ids| holds): XLA clamps out-of-range gathers and
  // drops out-of-range scatters where PyTorch raises, so the graph also
  // computes each index's range, judged after each run as eager judges
  // its own (at the host's next wait for the device).
  void add_range_checks(const std::string& full, const torch::jit::Stack& stack,
                        const std::unordered_map<const void*, tpr_value_t>& ids) {
    // Unsafe indexing is made by decompositions whose indices are in range.
    if (full.rfind("aten::_unsafe", 0) == 0) return;
    tpr_graph_t* g = tpr_program_graph(p_);
    for (auto& c : collect_range_checks(full, stack)) {
      auto it = ids.find(c.index.unsafeGetTensorImpl());
      if (it == ids.end()) continue;  // a constant index
      tpr_arg_t a[3];
      std::memset(a, 0, sizeof a);
      a[0].kind = TPR_ARG_TENSOR;
      a[0].value = it->second;
      set_index_range_args(c.ignore, &a[1], &a[2]);
      int64_t two = 2;
      tpr_type_t range_type = tpr_type_make(TPR_DTYPE_S64, 1, &two);
      tpr_value_t range = TPR_VALUE_NONE;
      tpr_lower_ctx_t ctx = {g, "tpu::index_range", a, 3, &range_type, 1, &range};
      check(tpr_lower(&ctx));
      checks_.emplace_back(range, std::move(c));
    }
  }

  // This run's generator state (seed, offset) on |device|; advances the
  // device's default generator past the counters the run draws.
  at::Tensor reserve_draws(c10::Device device) {
    at::Tensor state = at::empty({2}, at::TensorOptions().dtype(at::kUInt64));
    {
      at::Generator gen = default_generator(device.index());
      std::lock_guard<std::mutex> lock(gen.mutex());
      auto so = gen.get<TpuGeneratorImpl>()->reserve(rng_used_);
      auto* p = static_cast<uint64_t*>(state.data_ptr());
      p[0] = so.first;
      p[1] = so.second;
    }
    return state.to(device);
  }

  // The generator state of the next random op: the run's (seed, offset)
  // plus the counters the ops before it reserved.
  tpr_value_t draw_state(const std::string& op, const std::vector<tpr_type_t>& out_types) {
    tpr_graph_t* g = tpr_program_graph(p_);
    TORCH_CHECK(rng_state_ != TPR_VALUE_NONE, op, " draws random numbers, but its "
                "compiled graph was built without a generator input");
    tpr_value_t st = rng_state_;
    if (rng_used_ != 0) {
      uint64_t step[2] = {0, rng_used_};
      int64_t two = 2;
      st = tpr_binary(g, TPR_BINARY_ADD, st,
                      tpr_constant_dense(g, tpr_type_make(TPR_DTYPE_U64, 1, &two), step));
      check(tpr_graph_status(g));
    }
    rng_used_ += random_counters(out_types);
    return st;
  }

  tpr_program_t* p_ = nullptr;
  size_t num_inputs_ = 0;                     // without the generator state
  tpr_value_t rng_state_ = TPR_VALUE_NONE;    // u64[2] input of random programs
  uint64_t rng_used_ = 0;                     // counters reserved per run
  std::vector<tpr_value_t> inputs_;
  std::vector<int> mutated_;                  // input of each mutation output
  std::vector<c10::ScalarType> out_dtypes_;   // of each fresh output
  std::vector<std::pair<tpr_value_t, RangeCheck>> checks_;  // range value, judge
  int num_user_outputs_ = -1;                 // fresh outputs before the ranges
  std::vector<std::vector<int64_t>> out_shapes_;
};

}  // namespace

void init_program_bindings(py::module& m) {
  py::class_<Program>(m, "Program")
      .def(py::init<const std::vector<TypeSpec>&, bool>(), py::arg("inputs"),
           py::arg("random") = false)
      .def("inputs", &Program::inputs)
      .def("lower", &Program::lower, py::arg("name"), py::arg("overload"), py::arg("args"),
           py::arg("tensors"), py::arg("out_specs"), py::arg("rng_state") = -1)
      .def("reserve_state", &Program::reserve_state)
      .def("call_kernel", &Program::call_kernel)
      .def("convert", &Program::convert)
      .def("set_dimension_size", &Program::set_dimension_size)
      .def("set_dimension_static", &Program::set_dimension_static)
      .def("add_output", &Program::add_output)
      .def("compile_start", &Program::compile_start)
      .def("load_start", &Program::load_start)
      .def("compile", &Program::compile)
      .def("run", &Program::run);
}

}  // namespace torch_tpu
