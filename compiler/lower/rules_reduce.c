// Reductions and the softmax family. Sums and means accumulate in opmath
// (f32 for f16/bf16; integers/bools arrive converted to the s64 out type);
// keepdim is a final reshape to the out type (lw_set).
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

// Reads the input and the reduced dims from argument |dim_arg|.
static tpr_status_t prep(lw_ctx_t* ctx, int dim_arg, bool empty_is_none,
                         const tpr_type_t** t, int64_t* dims, int* n) {
  *t = lw_arg_type(ctx, 0);
  if (!*t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  int64_t bad = 0;
  *n = lw_reduce_dims(ctx, dim_arg, (*t)->rank, empty_is_none, dims, &bad);
  if (*n < 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim %lld out of range",
                   (long long)bad);
  return tpr_ok_status();
}

static tpr_status_t check_real(lw_ctx_t* ctx, const tpr_type_t* t) {
  if (tpr_dtype_is_complex(t->dtype) || tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  return tpr_ok_status();
}

//===--- sum / mean / prod -------------------------------------------------===//

static tpr_status_t sum_like(lw_ctx_t* ctx, int dim_arg, tpr_reduce_op_t op,
                             bool mean) {
  const tpr_type_t* t;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  TPR_RETURN_IF_ERROR(prep(ctx, dim_arg, false, &t, dims, &n));
  // Complex sums and means reduce like reals (XLA adds complex values).
  if (!(op == TPR_REDUCE_SUM && tpr_dtype_is_complex(OUT->dtype)))
    TPR_RETURN_IF_ERROR(check_real(ctx, t));
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  if (acc == TPR_DTYPE_BOOL) acc = TPR_DTYPE_S64;
  int64_t count = lw_reduced_numel(t, dims, n);
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), acc);
  tpr_value_t r = tpr_reduce(G, x, op, dims, n);
  if (mean) r = lw_div(G, r, lw_k(G, r, (double)count));
  return lw_ret(ctx, r);
}

// sum(self, dtype) / sum.dim_IntList(self, dim, keepdim, dtype)
static tpr_status_t lower_sum(lw_ctx_t* ctx) {
  return sum_like(ctx, 1, TPR_REDUCE_SUM, false);
}
static tpr_status_t lower_mean(lw_ctx_t* ctx) {
  return sum_like(ctx, 1, TPR_REDUCE_SUM, true);
}
static tpr_status_t lower_prod(lw_ctx_t* ctx) {
  return sum_like(ctx, 1, TPR_REDUCE_PROD, false);
}

//===--- max / min ----------------------------------------------------------===//

static tpr_status_t extreme(lw_ctx_t* ctx, int dim_arg, bool is_max) {
  const tpr_type_t* t;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  TPR_RETURN_IF_ERROR(prep(ctx, dim_arg, false, &t, dims, &n));
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  if (tpr_type_numel(t) == 0 && lw_reduced_numel(t, dims, n) == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "reducing a zero-size dimension has no identity");
  tpr_value_t r = tpr_reduce(G, lw_value(ctx, 0),
                             is_max ? TPR_REDUCE_MAX : TPR_REDUCE_MIN, dims, n);
  return lw_ret(ctx, r);
}
// amax(self, dim=[], keepdim) ; max(self)
static tpr_status_t lower_amax(lw_ctx_t* ctx) { return extreme(ctx, 1, true); }
static tpr_status_t lower_amin(lw_ctx_t* ctx) { return extreme(ctx, 1, false); }
tpr_status_t lw_rule_max_all(lw_ctx_t* ctx) { return extreme(ctx, -1, true); }
static tpr_status_t lower_min_all(lw_ctx_t* ctx) {
  return extreme(ctx, -1, false);
}

// Values and indices along one dim; dim None flattens first.
static tpr_status_t arg_extreme(lw_ctx_t* ctx, bool is_max, bool values) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  tpr_value_t x = lw_value(ctx, 0);
  int64_t dim;
  if (lw_is_none(ctx, 1) || t->rank == 0) {
    int64_t n = tpr_type_numel(t);
    x = tpr_reshape(G, x, 1, &n);
    dim = 0;
  } else {
    dim = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank);
    if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  }
  if (lw_type(ctx, x)->dims[dim] == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "reducing a zero-size dimension has no identity");
  tpr_value_t v, i;
  tpr_argreduce(G, x, dim, is_max, &v, &i);
  if (values) {
    lw_set(ctx, 0, v);
    lw_set(ctx, 1, i);
  } else {
    lw_set(ctx, 0, i);
  }
  return lw_done(ctx);
}
static tpr_status_t lower_max_dim(lw_ctx_t* ctx) {
  return arg_extreme(ctx, true, true);
}
static tpr_status_t lower_min_dim(lw_ctx_t* ctx) {
  return arg_extreme(ctx, false, true);
}
static tpr_status_t lower_argmax(lw_ctx_t* ctx) {
  return arg_extreme(ctx, true, false);
}
static tpr_status_t lower_argmin(lw_ctx_t* ctx) {
  return arg_extreme(ctx, false, false);
}

//===--- var / std -----------------------------------------------------------===//

// var.correction(self, dim?, *, correction?, keepdim); var_mean also outputs
// the mean; std takes the root.
static tpr_status_t variance(lw_ctx_t* ctx, bool root, bool with_mean) {
  const tpr_type_t* t;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  TPR_RETURN_IF_ERROR(prep(ctx, 1, false, &t, dims, &n));
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(acc))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  int64_t count = lw_reduced_numel(t, dims, n);
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), acc);
  tpr_value_t mean = tpr_reduce(G, x, TPR_REDUCE_SUM, dims, n);
  mean = lw_div(G, mean, lw_k(G, mean, (double)count));
  tpr_type_t full = *t;
  full.dtype = acc;
  tpr_value_t d = lw_sub(G, x, lw_unreduce(G, mean, &full, dims, n));
  tpr_value_t ss = tpr_reduce(G, lw_mul(G, d, d), TPR_REDUCE_SUM, dims, n);
  tpr_value_t corr = lw_is_tensor(ctx, 2) ? lw_splat(G, lw_value(ctx, 2), ss)
                                          : lw_k(G, ss, 1.0);
  tpr_value_t denom = lw_max(G, lw_sub(G, lw_k(G, ss, (double)count), corr),
                             lw_k(G, ss, 0));
  tpr_value_t var = lw_div(G, ss, denom);
  if (root) var = lw_un(G, TPR_UNARY_SQRT, var);
  lw_set(ctx, 0, var);
  if (with_mean) lw_set(ctx, 1, mean);
  return lw_done(ctx);
}
static tpr_status_t lower_var(lw_ctx_t* ctx) { return variance(ctx, false, false); }
static tpr_status_t lower_std(lw_ctx_t* ctx) { return variance(ctx, true, false); }
static tpr_status_t lower_var_mean(lw_ctx_t* ctx) {
  return variance(ctx, false, true);
}
static tpr_status_t lower_std_mean(lw_ctx_t* ctx) {
  return variance(ctx, true, true);
}

//===--- any / all -----------------------------------------------------------===//

static tpr_status_t any_all(lw_ctx_t* ctx, bool any) {
  const tpr_type_t* t;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  TPR_RETURN_IF_ERROR(prep(ctx, 1, true, &t, dims, &n));
  tpr_value_t x = lw_nonzero(G, lw_value(ctx, 0));
  tpr_value_t r =
      tpr_reduce(G, x, any ? TPR_REDUCE_OR : TPR_REDUCE_AND, dims, n);
  return lw_ret(ctx, r);
}
static tpr_status_t lower_any(lw_ctx_t* ctx) { return any_all(ctx, true); }
static tpr_status_t lower_all(lw_ctx_t* ctx) { return any_all(ctx, false); }

//===--- logsumexp, norms -----------------------------------------------------===//

// logsumexp(self, dim, keepdim): max + log(sum(exp(x - max))), with
// infinite maxima replaced by 0 as PyTorch does.
static tpr_status_t lower_logsumexp(lw_ctx_t* ctx) {
  const tpr_type_t* t;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  TPR_RETURN_IF_ERROR(prep(ctx, 1, false, &t, dims, &n));
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), acc);
  tpr_value_t m = tpr_reduce_max_unguarded(G, x, dims, n);
  m = lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, lw_un(G, TPR_UNARY_ABS, m), INFINITY),
             lw_k(G, m, 0), m);
  tpr_type_t full = *t;
  full.dtype = acc;
  tpr_value_t e = lw_un(G, TPR_UNARY_EXP,
                        lw_sub(G, x, lw_unreduce(G, m, &full, dims, n)));
  tpr_value_t s = tpr_reduce(G, e, TPR_REDUCE_SUM, dims, n);
  return lw_ret(ctx, lw_add(G, lw_un(G, TPR_UNARY_LOG, s), m));
}

// linalg_vector_norm(self, ord=2, dim?, keepdim, *, dtype?). The order is a
// runtime scalar, so the special orders (inf, -inf, 0, 1, 2) are selected
// at run time; the elementwise parts are cheap next to the reductions.
tpr_status_t lw_rule_norm(lw_ctx_t* ctx) {
  const tpr_type_t* t;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  int dim_arg = lw_arg(ctx, 2)->kind == TPR_ARG_INT_LIST ||
                        lw_arg(ctx, 2)->kind == TPR_ARG_INT
                    ? 2
                    : -1;
  TPR_RETURN_IF_ERROR(prep(ctx, dim_arg, false, &t, dims, &n));
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(acc))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  tpr_graph_t* g = G;
  tpr_value_t a = lw_un(g, TPR_UNARY_ABS, lw_cast(g, lw_value(ctx, 0), acc));
  tpr_value_t p = lw_is_tensor(ctx, 1) ? lw_splat(g, lw_value(ctx, 1), a)
                                       : lw_k(g, a, 2.0);
  bool any = lw_reduced_numel(t, dims, n) > 0;
  // For p other than 0 and 1, |x| is divided by the largest |x| before the
  // powers (as LAPACK's nrm2) and the root multiplied back: the CPU sums
  // float32 in double, so tiny (1e-24) or huge (1e20) values whose squares
  // leave float32's range still give their norm there, and must here.
  tpr_value_t scale = TPR_VALUE_NONE, b = a;
  if (any) {
    tpr_value_t mx = tpr_reduce(g, a, TPR_REDUCE_MAX, dims, n);
    tpr_value_t usable = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GT, mx, 0),
                                    lw_un(g, TPR_UNARY_IS_FINITE, mx));
    tpr_value_t pk = lw_is_tensor(ctx, 1) ? lw_splat(g, lw_value(ctx, 1), mx) : lw_k(g, mx, 2.0);
    usable = tpr_binary(g, TPR_BINARY_AND, usable,
                        tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_NE, pk, 0),
                                   lw_cmpk(g, TPR_CMP_NE, pk, 1)));
    scale = lw_sel(g, usable, mx, lw_k(g, mx, 1.0));
    tpr_type_t at = *tpr_value_type(g, a);
    b = lw_div(g, a, lw_unreduce(g, scale, &at, dims, n));
  }
  tpr_value_t ap = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, p, 2), lw_mul(g, b, b),
                          lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, p, 1), a,
                                 tpr_binary(g, TPR_BINARY_POW, b, p)));
  ap = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, p, 0),
              lw_cast(g, lw_nonzero(g, a), acc), ap);
  tpr_value_t s = tpr_reduce(g, ap, TPR_REDUCE_SUM, dims, n);
  tpr_value_t ps = lw_is_tensor(ctx, 1) ? lw_splat(g, lw_value(ctx, 1), s)
                                        : lw_k(g, s, 2.0);
  tpr_value_t root = lw_sel(
      g, lw_cmpk(g, TPR_CMP_EQ, ps, 2), lw_un(g, TPR_UNARY_SQRT, s),
      lw_sel(g,
             tpr_binary(g, TPR_BINARY_OR, lw_cmpk(g, TPR_CMP_EQ, ps, 1),
                        lw_cmpk(g, TPR_CMP_EQ, ps, 0)),
             s, tpr_binary(g, TPR_BINARY_POW, s, lw_div(g, lw_k(g, ps, 1), ps))));
  if (any) root = lw_mul(g, root, scale);  // 1 where not scaled
  if (any) {
    tpr_value_t mx = tpr_reduce(g, a, TPR_REDUCE_MAX, dims, n);
    tpr_value_t mn = tpr_reduce(g, a, TPR_REDUCE_MIN, dims, n);
    root = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, ps, INFINITY), mx, root);
    root = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, ps, -INFINITY), mn, root);
  }
  return lw_ret(ctx, root);
}

// _foreach_powsum.Scalar(self, ord=2, dtype?): sum(|x| ** ord)
tpr_status_t lw_rule_powsum(lw_ctx_t* ctx) {
  const tpr_type_t* t;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  TPR_RETURN_IF_ERROR(prep(ctx, -1, false, &t, dims, &n));
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  tpr_value_t a = lw_un(G, TPR_UNARY_ABS, lw_cast(G, lw_value(ctx, 0), acc));
  tpr_value_t p = lw_is_tensor(ctx, 1) ? lw_splat(G, lw_value(ctx, 1), a)
                                       : lw_k(G, a, 2.0);
  tpr_value_t ap = lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, p, 2), lw_mul(G, a, a),
                          tpr_binary(G, TPR_BINARY_POW, a, p));
  return lw_ret(ctx, tpr_reduce(G, ap, TPR_REDUCE_SUM, dims, n));
}

//===--- softmax family -------------------------------------------------------===//

static tpr_status_t softmax_dim(lw_ctx_t* ctx, int arg, const tpr_type_t* t,
                                int64_t* dims, int* n) {
  int64_t d = lw_wrap_dim(lw_int(ctx, arg, -1), t->rank);
  if (d < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  *n = t->rank ? 1 : 0;
  dims[0] = d;
  return tpr_ok_status();
}

// _softmax / _log_softmax(self, dim, half_to_float)
static tpr_status_t softmax(lw_ctx_t* ctx, bool log) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  int64_t dims[1];
  int n = 0;
  TPR_RETURN_IF_ERROR(softmax_dim(ctx, 1, t, dims, &n));
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(acc))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  tpr_graph_t* g = G;
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), acc);
  if (tpr_type_numel(t) == 0) return lw_ret(ctx, x);
  tpr_type_t full = *tpr_value_type(g, x);
  tpr_value_t m = lw_unreduce(g, tpr_reduce_max_unguarded(g, x, dims, n),
                              &full, dims, n);
  tpr_value_t sh = lw_sub(g, x, m);
  tpr_value_t e = lw_un(g, TPR_UNARY_EXP, sh);
  tpr_value_t s = lw_reduce_keep(g, e, TPR_REDUCE_SUM, dims, n);
  if (log) return lw_ret(ctx, lw_sub(g, sh, lw_un(g, TPR_UNARY_LOG, s)));
  return lw_ret(ctx, lw_div(g, e, s));
}
static tpr_status_t lower_softmax(lw_ctx_t* ctx) { return softmax(ctx, false); }
static tpr_status_t lower_log_softmax(lw_ctx_t* ctx) { return softmax(ctx, true); }

// _softmax_backward_data / _log_softmax_backward_data(grad, output, dim,
// input_dtype)
static tpr_status_t softmax_backward(lw_ctx_t* ctx, bool log) {
  const tpr_type_t* t = lw_arg_type(ctx, 1);
  if (!t || !lw_arg_type(ctx, 0))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs tensors");
  TPR_RETURN_IF_ERROR(check_real(ctx, t));
  int64_t dims[1];
  int n = 0;
  TPR_RETURN_IF_ERROR(softmax_dim(ctx, 2, t, dims, &n));
  tpr_dtype_t acc = lw_opmath(lw_promote(lw_arg_type(ctx, 0)->dtype, t->dtype));
  tpr_graph_t* g = G;
  tpr_value_t gr = lw_cast(g, lw_value(ctx, 0), acc);
  tpr_value_t y = lw_cast(g, lw_value(ctx, 1), acc);
  if (log) {
    tpr_value_t s = lw_reduce_keep(g, gr, TPR_REDUCE_SUM, dims, n);
    return lw_ret(ctx, lw_sub(g, gr, lw_mul(g, lw_un(g, TPR_UNARY_EXP, y), s)));
  }
  tpr_value_t gy = lw_mul(g, gr, y);
  tpr_value_t s = lw_reduce_keep(g, gy, TPR_REDUCE_SUM, dims, n);
  return lw_ret(ctx, lw_sub(g, gy, lw_mul(g, y, s)));
}
static tpr_status_t lower_softmax_backward(lw_ctx_t* ctx) {
  return softmax_backward(ctx, false);
}
static tpr_status_t lower_log_softmax_backward(lw_ctx_t* ctx) {
  return softmax_backward(ctx, true);
}

LW_DEFINE_TABLE(reduce,
    LW_RULE("sum", lower_sum), LW_RULE("sum.out", lower_sum),
    LW_RULE("sum.dim_IntList", lower_sum), LW_RULE("sum.IntList_out", lower_sum),
    LW_RULE("mean", lower_mean), LW_RULE("mean.dtype_out", lower_mean),
    LW_RULE("mean.dim", lower_mean), LW_RULE("mean.out", lower_mean),
    LW_RULE("prod", lower_prod), LW_RULE("prod.out", lower_prod),
    LW_RULE("prod.dim_int", lower_prod), LW_RULE("prod.int_out", lower_prod),
    LW_RULE("amax", lower_amax), LW_RULE("amax.out", lower_amax),
    LW_RULE("amin", lower_amin), LW_RULE("amin.out", lower_amin),
    LW_RULE("max", lw_rule_max_all), LW_RULE("max.unary_out", lw_rule_max_all),
    LW_RULE("min", lower_min_all), LW_RULE("min.unary_out", lower_min_all),
    LW_RULE("max.dim", lower_max_dim), LW_RULE("max.dim_max", lower_max_dim),
    LW_RULE("min.dim", lower_min_dim), LW_RULE("min.dim_min", lower_min_dim),
    LW_RULE("argmax", lower_argmax), LW_RULE("argmax.out", lower_argmax),
    LW_RULE("argmin", lower_argmin), LW_RULE("argmin.out", lower_argmin),
    LW_RULE("var.correction", lower_var),
    LW_RULE("var.correction_out", lower_var),
    LW_RULE("std.correction", lower_std),
    LW_RULE("std.correction_out", lower_std),
    LW_RULE("var_mean.correction", lower_var_mean),
    LW_RULE("var_mean.correction_out", lower_var_mean),
    LW_RULE("std_mean.correction", lower_std_mean),
    LW_RULE("std_mean.correction_out", lower_std_mean),
    LW_RULE("any", lower_any), LW_RULE("any.all_out", lower_any),
    LW_RULE("any.dim", lower_any), LW_RULE("any.out", lower_any),
    LW_RULE("any.dims", lower_any), LW_RULE("any.dims_out", lower_any),
    LW_RULE("all", lower_all), LW_RULE("all.all_out", lower_all),
    LW_RULE("all.dim", lower_all), LW_RULE("all.out", lower_all),
    LW_RULE("all.dims", lower_all), LW_RULE("all.dims_out", lower_all),
    LW_RULE("logsumexp", lower_logsumexp),
    LW_RULE("logsumexp.out", lower_logsumexp),
    LW_RULE("linalg_vector_norm", lw_rule_norm),
    LW_RULE("linalg_vector_norm.out", lw_rule_norm),
    LW_RULE("norm.Scalar", lw_rule_norm), LW_RULE("norm.Scalar_out", lw_rule_norm),
    LW_RULE("norm.ScalarOpt_dim", lw_rule_norm),
    LW_RULE("norm.ScalarOpt_dim_dtype", lw_rule_norm),
    LW_RULE("norm.out", lw_rule_norm), LW_RULE("norm.dtype_out", lw_rule_norm),
    LW_RULE("norm.ScalarOpt_dtype", lw_rule_norm),
    LW_RULE("norm.ScalarOpt_dtype_out", lw_rule_norm),
    LW_RULE("_softmax", lower_softmax), LW_RULE("_softmax.out", lower_softmax),
    LW_RULE("_log_softmax", lower_log_softmax),
    LW_RULE("_log_softmax.out", lower_log_softmax),
    LW_RULE("_softmax_backward_data", lower_softmax_backward),
    LW_RULE("_softmax_backward_data.out", lower_softmax_backward),
    LW_RULE("_log_softmax_backward_data", lower_log_softmax_backward),
    LW_RULE("_log_softmax_backward_data.out", lower_log_softmax_backward));
