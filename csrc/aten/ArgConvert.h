// ATen IValue arguments -> the C core's argument descriptors, shared by the
// eager dispatcher fallback (tensors are storage windows) and the compiled
// graph builder (tensors are graph values).
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/function_schema.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/TpuContext.h"

namespace torch_tpu {

// The argument's schema type with any Optional[...] removed.
c10::TypePtr value_type(const c10::Argument& a);
bool is_generator_arg(const c10::Argument& a);

// What tensors become: eager reads storage windows, compiled graphs use
// graph values. Each call fills |out| (kind already set).
class TensorArgSink {
 public:
  virtual ~TensorArgSink() = default;
  // A defined tensor argument (out.arg.kind == TPR_ARG_TENSOR).
  virtual void tensor(const at::Tensor& t, tpr_eager_arg_t& out) = 0;
  // A Tensor[] / Tensor?[] argument; nullopt for None entries.
  virtual void tensor_list(const std::vector<std::optional<at::Tensor>>& ts,
                           tpr_eager_arg_t& out) = 0;
  // A Scalar[] argument (foreach ops' per-tensor scalars).
  virtual void scalar_list(const std::vector<double>& values, bool all_int,
                           tpr_eager_arg_t& out) = 0;
};

// Random ops whose schema has no Generator argument but draw from the
// default one (native_dropout): the caller appends a GENERATOR argument.
bool draws_from_default_generator(const std::string& op_name);

// Generator counters one random op reserves for its outputs. Eager calls and
// compiled graphs both reserve exactly this, so a compiled graph draws the
// numbers eager would draw for the same ops from the same generator state.
uint64_t random_counters(const std::vector<tpr_type_t>& out_types);

// Lists and strings that must outlive the C call.
struct ArgStore {
  std::deque<std::vector<int64_t>> int_lists;
  std::deque<std::vector<double>> double_lists;
  std::deque<std::unique_ptr<bool[]>> bool_lists;
  std::deque<std::string> strings;

  // Empties the store; the containers keep their memory for the next call.
  void clear() {
    int_lists.clear();
    double_lists.clear();
    bool_lists.clear();
    strings.clear();
  }
};

// Fills |out| for one argument of |op| per its schema type: Scalars become
// rank-0 TENSOR arguments with is_scalar (out.scalar_dtype / out.scalar),
// ints, floats, bools, lists, dtypes and strings plain values, tensors go
// through |sink|. Sets |needs_rng| for a Generator argument (state left to
// the caller).
void convert_arg(ArgStore& store, TensorArgSink& sink,
                 const c10::Argument& schema_arg, const c10::IValue& v,
                 const char* op, tpr_eager_arg_t& out, bool& needs_rng);

}  // namespace torch_tpu
