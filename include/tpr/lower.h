//===--- tpr/lower.h - ATen -> StableHLO lowering rules -------------------===//
//
// One table of rules keyed by the ATen overload name ("aten::add.Tensor"),
// shared by strict eager, fused eager and torch.compile. A rule receives its
// arguments already as graph values (tensors) or plain C values (ints,
// doubles, lists), plus the result types PyTorch itself computed (meta
// kernels or FakeTensors), and appends nodes to the graph that produce
// exactly those types. Rules never re-derive PyTorch's promotion or shape
// rules; they read them from |out_types|.
//
// Arguments are in schema order with defaults filled in. Out-variant and
// in-place overloads reuse the functional rule: the caller strips the `out`
// arguments and writes the results back itself, so a table entry such as
// {"aten::add_.Tensor", lower_add} sees the same arguments as add.Tensor.
//
// Results, in order: the op's fresh (non-aliasing) returns, then one value
// per argument the schema marks as written that is not an `out` argument
// (self of x_(), each element of a written Tensor[] list, running_mean and
// running_var of native_batch_norm), in argument order. The caller writes
// those back. `out=` overloads: one result per out argument, in order.
// Undefined returns (gradients switched off by an output_mask) get no
// out type: such rules fill the remaining outs in order, skipping them.
// Random ops get a GENERATOR argument where the schema has one; ops that draw
// random numbers without one (native_dropout) get one appended last.
//
// Scalar arguments of schema type `Scalar` arrive as rank-0 TENSOR values
// with is_scalar set (runtime parameters, so a new learning rate does not
// recompile); `int`/`float`/`bool` schema arguments arrive as compile-time
// INT/DOUBLE/BOOL.
//
//===----------------------------------------------------------------------===//
#ifndef TPR_LOWER_H_
#define TPR_LOWER_H_

#include "tpr/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpr_arg_kind_e {
  TPR_ARG_NONE = 0,     // None / absent optional
  TPR_ARG_TENSOR,       // .value (and .is_scalar for Scalar arguments)
  TPR_ARG_TENSOR_LIST,  // .values[.count]; TPR_VALUE_NONE for None entries
  TPR_ARG_INT,          // .i (also SymInt, MemoryFormat, Layout enums)
  TPR_ARG_DOUBLE,       // .d
  TPR_ARG_BOOL,         // .b
  TPR_ARG_INT_LIST,     // .ints[.count]
  TPR_ARG_DOUBLE_LIST,  // .doubles[.count]
  TPR_ARG_BOOL_LIST,    // .bools[.count]
  TPR_ARG_DTYPE,        // .dtype (ScalarType), TPR_DTYPE_INVALID if unmapped
  TPR_ARG_STRING,       // .s
  TPR_ARG_GENERATOR,    // .value: u64[2] state (key, counter) of the device
                        // generator for this call
  TPR_ARG_OTHER,        // anything else (Device, ...): rules must not need it
} tpr_arg_kind_t;

typedef struct tpr_arg {
  tpr_arg_kind_t kind;
  bool is_scalar;  // TENSOR that came from a Scalar (weak type in promotion)
  tpr_value_t value;
  int64_t i;
  double d;
  bool b;
  tpr_dtype_t dtype;
  const char* s;
  int32_t count;
  const int64_t* ints;
  const double* doubles;
  const bool* bools;
  const tpr_value_t* values;
} tpr_arg_t;

typedef struct tpr_lower_ctx {
  tpr_graph_t* graph;
  const char* op_name;  // "aten::add.Tensor"
  const tpr_arg_t* args;
  int32_t num_args;
  const tpr_type_t* out_types;  // from PyTorch
  int32_t num_outs;
  tpr_value_t* outs;  // the rule fills num_outs values of exactly out_types
  const void* rule_data;  // what the caller passed along with a rule override
} tpr_lower_ctx_t;

typedef tpr_status_t (*tpr_lower_fn_t)(tpr_lower_ctx_t* ctx);

typedef struct tpr_rule {
  const char* name;  // ATen overload name
  tpr_lower_fn_t lower;
} tpr_rule_t;

// The rule for |op_name|, or NULL.
const tpr_rule_t* tpr_rule_find(const char* op_name);
// All rules (for coverage reports); *out_count gets the number.
const tpr_rule_t* tpr_rule_table(size_t* out_count);

// The rule for a kernel call (tpr_call_kernel): ctx->rule_data is the
// tpr_kernel_t, the TENSOR arguments are its inputs in order.
tpr_status_t tpr_lower_kernel_call(tpr_lower_ctx_t* ctx);

// Runs the rule for ctx->op_name and checks that every output has exactly
// its out_type. Errors name the op, the argument types and the reason.
tpr_status_t tpr_lower(tpr_lower_ctx_t* ctx) TPR_MUST_USE_RESULT;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TPR_LOWER_H_
