//===--- compiler/lower/lower_internal.h - shared helpers of the rules ----===//
//
// Private to compiler/lower. Rules are written straight-line: builders keep a
// sticky error in the graph, so a rule builds its nodes, stores its results
// with lw_set and returns lw_done(ctx), which reports the first error.
// Argument problems (a wrong kind, an unsupported dtype) are returned at once
// with lw_fail, which names the op and the argument types.
//
// Conventions shared by every rule:
//  * Results get exactly ctx->out_types: compute in a suitable dtype (see
//    lw_opmath), then lw_set converts to the out dtype and, where only the
//    placement of size-1 dims differs (keepdim), reshapes.
//  * Inputs are broadcast NumPy-style to the out shape (lw_in).
//  * Missing trailing arguments read as None, so element rules can be called
//    with fewer arguments (foreach ops) and take their defaults.
//
//===----------------------------------------------------------------------===//
#ifndef TPR_COMPILER_LOWER_LOWER_INTERNAL_H_
#define TPR_COMPILER_LOWER_LOWER_INTERNAL_H_

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "tpr/lower.h"

typedef tpr_lower_ctx_t lw_ctx_t;

//===--- rule tables ------------------------------------------------------===//
//
// Each rules_*.c file exports one table; table.c merges and sorts them.

#define LW_RULE(name, fn) {"aten::" name, fn}

#define LW_DECLARE_TABLE(group)                 \
  extern const tpr_rule_t lw_rules_##group[];   \
  extern const size_t lw_rules_##group##_count

LW_DECLARE_TABLE(elementwise);
LW_DECLARE_TABLE(activation);
LW_DECLARE_TABLE(reduce);
LW_DECLARE_TABLE(linalg);
LW_DECLARE_TABLE(factory);
LW_DECLARE_TABLE(random);
LW_DECLARE_TABLE(nn);
LW_DECLARE_TABLE(index);
LW_DECLARE_TABLE(foreach);
// sorting, scans, scatters, sampling (rules_sort.c, rules_scan.c,
// rules_scatter.c, rules_sample.c)
LW_DECLARE_TABLE(sort);
LW_DECLARE_TABLE(scan);
LW_DECLARE_TABLE(scatter);
LW_DECLARE_TABLE(sample);
LW_DECLARE_TABLE(conv);
LW_DECLARE_TABLE(pool);
LW_DECLARE_TABLE(norm);
// special functions, complex numbers, FFT (rules_special.c, rules_fft.c)
LW_DECLARE_TABLE(special);
LW_DECLARE_TABLE(fft);
// Bessel and Airy functions, p-norm distances (rules_bessel_cdist.c)
LW_DECLARE_TABLE(bessel_cdist);
LW_DECLARE_TABLE(poly);  // orthogonal polynomials (rules_poly.c)
LW_DECLARE_TABLE(random_more);  // rules_random.c
// shrink activations, take/put, cross, isin, trace, aminmax, renorm
// (rules_shrink_take_cross_isin.c)
LW_DECLARE_TABLE(shrink_take_cross_isin);
// matrix factorizations (rules_factor.c)
LW_DECLARE_TABLE(factor);
LW_DECLARE_TABLE(embedding_bag);  // rules_embedding_bag.c
LW_DECLARE_TABLE(grid);  // grid sampling (rules_grid.c)
LW_DECLARE_TABLE(view);  // view ops as values, for compiled graphs (rules_view.c)
// margin losses, rrelu, embedding_renorm (rules_margin_rrelu_renorm.c)
LW_DECLARE_TABLE(margin_rrelu_renorm);
// weight norm, the fused LSTM and GRU cells (rules_weight_norm_rnn_cells.c)
LW_DECLARE_TABLE(weight_norm_rnn_cells);
LW_DECLARE_TABLE(optim);  // fused optimizer steps (rules_optim.c)
LW_DECLARE_TABLE(ctc);    // CTC loss and its gradient (rules_ctc.c)


#define LW_DEFINE_TABLE(group, ...)                                  \
  const tpr_rule_t lw_rules_##group[] = {__VA_ARGS__};               \
  const size_t lw_rules_##group##_count =                            \
      sizeof(lw_rules_##group) / sizeof(lw_rules_##group[0])

//===--- errors -----------------------------------------------------------===//

// A status naming the op, its argument types and the reason.
tpr_status_t lw_fail(const lw_ctx_t* ctx, tpr_status_code_t code,
                     const char* fmt, ...) TPR_PRINTF_LIKE(3, 4);
// A run-time check (tpr_graph_add_check): |ok|, a bool scalar, must hold
// when the graph runs; the message names the op, its argument types and
// the reason.
void lw_check(const lw_ctx_t* ctx, tpr_value_t ok, const char* fmt, ...)
    TPR_PRINTF_LIKE(3, 4);
// "f32[2,3], s64[] scalar, int 1, None" into buf.
void lw_format_args(const lw_ctx_t* ctx, char* buf, size_t cap);
// The graph's first error, or OK.
tpr_status_t lw_done(const lw_ctx_t* ctx);

//===--- arguments --------------------------------------------------------===//

// Argument |i|, or a None argument when i >= num_args.
const tpr_arg_t* lw_arg(const lw_ctx_t* ctx, int i);
bool lw_is_none(const lw_ctx_t* ctx, int i);
bool lw_is_tensor(const lw_ctx_t* ctx, int i);
int64_t lw_int(const lw_ctx_t* ctx, int i, int64_t dflt);
double lw_double(const lw_ctx_t* ctx, int i, double dflt);
bool lw_bool(const lw_ctx_t* ctx, int i, bool dflt);
const char* lw_str(const lw_ctx_t* ctx, int i, const char* dflt);
// The value of a TENSOR argument, else TPR_VALUE_NONE.
tpr_value_t lw_value(const lw_ctx_t* ctx, int i);
// The type of a TENSOR argument, else NULL.
const tpr_type_t* lw_arg_type(const lw_ctx_t* ctx, int i);
// The first GENERATOR argument's state value, or TPR_VALUE_NONE.
tpr_value_t lw_generator(const lw_ctx_t* ctx);

//===--- dtypes -----------------------------------------------------------===//

// PyTorch's opmath type: f16/bf16 compute in f32, others in themselves.
static inline tpr_dtype_t lw_opmath(tpr_dtype_t d) {
  return (d == TPR_DTYPE_F16 || d == TPR_DTYPE_BF16) ? TPR_DTYPE_F32 : d;
}
static inline bool lw_is_int(tpr_dtype_t d) {
  return tpr_dtype_is_signed_int(d) || tpr_dtype_is_unsigned_int(d);
}
// c10::promoteTypes for the dtypes we know.
tpr_dtype_t lw_promote(tpr_dtype_t a, tpr_dtype_t b);
// PyTorch's result_type over the TENSOR arguments |idx| (dim tensors, then
// zero-dim tensors, then Scalars; Python floats count as float32).
tpr_dtype_t lw_result_type(const lw_ctx_t* ctx, const int* idx, int n);

//===--- values -----------------------------------------------------------===//

const tpr_type_t* lw_type(const lw_ctx_t* ctx, tpr_value_t v);
// Argument |i| converted to |dtype| and broadcast to |shape|'s dims.
tpr_value_t lw_in(const lw_ctx_t* ctx, int i, tpr_dtype_t dtype,
                  const tpr_type_t* shape);
// |v| converted to |dtype| (no-op if equal) and broadcast to |shape|'s dims.
tpr_value_t lw_cast_to(tpr_graph_t* g, tpr_value_t v, tpr_dtype_t dtype,
                       const tpr_type_t* shape);
tpr_value_t lw_cast(tpr_graph_t* g, tpr_value_t v, tpr_dtype_t dtype);
// A constant |c| of |dtype| broadcast to |shape|'s dims.
tpr_value_t lw_full(tpr_graph_t* g, double c, tpr_dtype_t dtype,
                    const tpr_type_t* shape);
// A constant |c| of v's type.
tpr_value_t lw_k(tpr_graph_t* g, tpr_value_t like, double c);
// A rank-0 value broadcast to like's type (dtype converted too).
tpr_value_t lw_splat(tpr_graph_t* g, tpr_value_t scalar, tpr_value_t like);
// Reshape to dims of |t| (no-op when equal).
tpr_value_t lw_reshape_to(tpr_graph_t* g, tpr_value_t v, const tpr_type_t* t);
// Converts |v| to out_types[i]'s dtype, reshapes it to its dims where only
// the element count has to match, and stores it as output |i|.
void lw_set(lw_ctx_t* ctx, int i, tpr_value_t v);
// lw_set(ctx, 0, v) and lw_done(ctx).
tpr_status_t lw_ret(lw_ctx_t* ctx, tpr_value_t v);
// A backward's output_mask (argument i, |n| bools; absent: all true) into
// want[n], checked against the number of results PyTorch asked for.
tpr_status_t lw_output_mask(const lw_ctx_t* ctx, int i, int n, bool* want);
// Every result zero (nothing to compute); returns lw_done(ctx).
tpr_status_t lw_ret_zeros(lw_ctx_t* ctx);
// Normalizes a possibly negative dim against rank; -1 if out of range.
int64_t lw_wrap_dim(int64_t dim, int rank);

// Shorthands for straight-line formulas.
static inline tpr_value_t lw_add(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  return tpr_binary(g, TPR_BINARY_ADD, a, b);
}
static inline tpr_value_t lw_sub(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  return tpr_binary(g, TPR_BINARY_SUB, a, b);
}
static inline tpr_value_t lw_mul(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  return tpr_binary(g, TPR_BINARY_MUL, a, b);
}
static inline tpr_value_t lw_div(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  return tpr_binary(g, TPR_BINARY_DIV, a, b);
}
static inline tpr_value_t lw_max(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  return tpr_binary(g, TPR_BINARY_MAX, a, b);
}
static inline tpr_value_t lw_min(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  return tpr_binary(g, TPR_BINARY_MIN, a, b);
}
static inline tpr_value_t lw_un(tpr_graph_t* g, tpr_unary_op_t op,
                                tpr_value_t a) {
  return tpr_unary(g, op, a);
}
static inline tpr_value_t lw_sel(tpr_graph_t* g, tpr_value_t p, tpr_value_t a,
                                 tpr_value_t b) {
  return tpr_select(g, p, a, b);
}
static inline tpr_value_t lw_cmp(tpr_graph_t* g, tpr_compare_dir_t d,
                                 tpr_value_t a, tpr_value_t b) {
  return tpr_compare(g, d, a, b);
}
// a <op> constant c (of a's type).
static inline tpr_value_t lw_cmpk(tpr_graph_t* g, tpr_compare_dir_t d,
                                  tpr_value_t a, double c) {
  return tpr_compare(g, d, a, lw_k(g, a, c));
}
// x != 0 as bool (bool stays).
tpr_value_t lw_nonzero(tpr_graph_t* g, tpr_value_t x);
// For a rank-1 bool |m|: s64 k at the k-th true place (row-major order),
// |past| at the false ones (the places that a compaction drops).
tpr_value_t lw_true_slots(tpr_graph_t* g, tpr_value_t m, int64_t past);
// NumPy broadcast shape of two types (a's dtype) into *out; false if they
// do not broadcast.
bool lw_broadcast_shape(const tpr_type_t* a, const tpr_type_t* b, tpr_type_t* out);
// trunc(x) for floats.
tpr_value_t lw_trunc(tpr_graph_t* g, tpr_value_t x);
// isnan(x) as bool.
tpr_value_t lw_isnan(tpr_graph_t* g, tpr_value_t x);
// x with denormals replaced by zeros of their sign (x * 0): XLA:CPU flushes
// them in arithmetic but not in every test for zero or conversion. float16
// is returned as it is (its denormals are float32 normals when computed).
tpr_value_t lw_flush_denormal(tpr_graph_t* g, tpr_value_t x);

// |v| reduced over every dimension with |op| (rank 0: |v| itself).
tpr_value_t lw_reduce_all(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op);
// digamma with PyTorch's signed poles at zero: digamma(+-0) = -+inf
// (-1/x). The plugins' digamma gave NaN at +0 (xla-cpu-pjrt 0.0.1) and
// -inf at -0 (lammps-jax-pjrt-cpu 0.11.2).
tpr_value_t lw_digamma(tpr_graph_t* g, tpr_value_t x);
// c[0] x^(n-1) + ... + c[n-1] (Horner; Cephes' polevl).
tpr_value_t lw_polevl(tpr_graph_t* g, tpr_value_t x, const double* c, int n);
// v - 0*iota: the same values (x - 0 keeps -0), but no longer a constant or
// a broadcast. lammps-jax-pjrt-cpu 0.11.2 (and newer XLAs) turn a division
// by a constant or broadcast divisor into a multiplication by its rounded
// reciprocal, one ulp off where PyTorch divides (trunc division 14 for 15;
// airy_ai's phase at x = -501). Unchanged for rank 0, non-float types and
// with TORCH_TPU_PLUGIN_WORKAROUNDS=0.
tpr_value_t lw_opaque(tpr_graph_t* g, tpr_value_t v);
// a / c, divided as PyTorch divides (see lw_opaque).
tpr_value_t lw_div_exact(tpr_graph_t* g, tpr_value_t a, double c);

//===--- random -----------------------------------------------------------===//

// Uniform floats in [0, 1) shaped like |shape| from the generator |state|,
// in *acc (f64 for f64 outs, else f32), exact in |out_dtype| (rules_random.c).
tpr_value_t lw_uniform01(lw_ctx_t* ctx, tpr_value_t state,
                         const tpr_type_t* shape, tpr_dtype_t out_dtype,
                         tpr_dtype_t* acc);

//===--- reductions -------------------------------------------------------===//

// A loss reduced as ATen's |reduction| says: 0 none (as is), 1 mean, 2 sum
// over every element (rules_nn.c).
tpr_value_t lw_loss_reduction(tpr_graph_t* g, tpr_value_t loss,
                              int64_t reduction);

// Reduced dims from argument |i| (INT, INT_LIST or None; None and, unless
// |empty_is_none|, [] mean all dims), sorted and deduplicated. Returns the
// count or -1 (out of range; *bad gets the dim).
int lw_reduce_dims(const lw_ctx_t* ctx, int i, int rank, bool empty_is_none,
                   int64_t* dims, int64_t* bad);
// Product of |v|'s sizes over dims.
int64_t lw_reduced_numel(const tpr_type_t* t, const int64_t* dims, int n);
// |r| (v reduced over dims) broadcast back to v's shape (keepdim + expand).
tpr_value_t lw_unreduce(tpr_graph_t* g, tpr_value_t r, const tpr_type_t* full,
                        const int64_t* dims, int n);
// Reduces |v| over |dims| and broadcasts back to v's shape.
tpr_value_t lw_reduce_keep(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op,
                           const int64_t* dims, int n);

//===--- shared element rules (used by foreach) ----------------------------===//

tpr_status_t lw_rule_add(lw_ctx_t* ctx);
tpr_status_t lw_rule_sub(lw_ctx_t* ctx);
tpr_status_t lw_rule_mul(lw_ctx_t* ctx);
tpr_status_t lw_rule_div(lw_ctx_t* ctx);
tpr_status_t lw_rule_pow(lw_ctx_t* ctx);
tpr_status_t lw_rule_maximum(lw_ctx_t* ctx);
tpr_status_t lw_rule_minimum(lw_ctx_t* ctx);
tpr_status_t lw_rule_clamp_min(lw_ctx_t* ctx);
tpr_status_t lw_rule_clamp_max(lw_ctx_t* ctx);
tpr_status_t lw_rule_addcmul(lw_ctx_t* ctx);
tpr_status_t lw_rule_addcdiv(lw_ctx_t* ctx);
tpr_status_t lw_rule_lerp(lw_ctx_t* ctx);
tpr_status_t lw_rule_copy(lw_ctx_t* ctx);
tpr_status_t lw_rule_identity(lw_ctx_t* ctx);
tpr_status_t lw_rule_zero(lw_ctx_t* ctx);
tpr_status_t lw_rule_norm(lw_ctx_t* ctx);
tpr_status_t lw_rule_max_all(lw_ctx_t* ctx);
tpr_status_t lw_rule_powsum(lw_ctx_t* ctx);
tpr_status_t lw_rule_mm(lw_ctx_t* ctx);
// Unary elementwise rules by name ("sqrt", "exp", ...); NULL if unknown.
tpr_lower_fn_t lw_unary_rule(const char* base_name);

#endif  // TPR_COMPILER_LOWER_LOWER_INTERNAL_H_
