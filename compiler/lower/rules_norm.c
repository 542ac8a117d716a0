// Batch norm (every ATen entry point) and group norm, forward and backward.
// Statistics and normalisation compute in opmath (f32 for bf16/f16), as
// PyTorch's CPU kernels do; variances are biased, running variances are
// updated with the unbiased one.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)

// Dims other than the channel dim 1 of a rank-|rank| value.
static int non_channel_dims(int rank, int64_t* dims) {
  int n = 0;
  for (int i = 0; i < rank; i++)
    if (i != 1) dims[n++] = i;
  return n;
}

// A per-channel vector (argument |i|, or |dflt| when None) in |dt|,
// broadcast along dim 1 of |full|.
static tpr_value_t per_channel(lw_ctx_t* ctx, tpr_value_t v, double dflt,
                               const tpr_type_t* full) {
  tpr_graph_t* g = G;
  if (v == TPR_VALUE_NONE) return lw_full(g, dflt, full->dtype, full);
  int64_t one = 1;
  int64_t c = full->dims[1];
  v = lw_reshape_to(g, lw_cast(g, v, full->dtype),
                    &(tpr_type_t){full->dtype, 1, {c}});
  return tpr_broadcast_in_dim(g, v, full->rank, full->dims, &one);
}

static tpr_value_t opt_value(lw_ctx_t* ctx, int i) {
  return lw_is_tensor(ctx, i) ? lw_value(ctx, i) : TPR_VALUE_NONE;
}

// Where each batch-norm overload keeps its arguments (-1: absent).
typedef struct {
  const char* name;
  int rm, rv, training, momentum, eps;
  bool fresh_stats;  // running stats come back as fresh returns 3 and 4
  bool reserve;      // a 4th (empty) reserve result; running stats at 4, 5
} bn_layout_t;

#define BN_ALWAYS_TRAINING (-2)

static const bn_layout_t kBn[] = {
    {"aten::native_batch_norm", 3, 4, 5, 6, 7, false},
    {"aten::_native_batch_norm_legit", 3, 4, 5, 6, 7, false},
    {"aten::_native_batch_norm_legit_functional", 3, 4, 5, 6, 7, true},
    {"aten::_native_batch_norm_legit.no_stats", -1, -1, 3, 4, 5, false},
    {"aten::_native_batch_norm_legit_no_training", 3, 4, -1, 5, 6, false},
    {"aten::_batch_norm_with_update", 3, 4, BN_ALWAYS_TRAINING, 5, 6, false, true},
    {"aten::_batch_norm_with_update_functional", 3, 4, BN_ALWAYS_TRAINING, 5, 6, true, true},
    {"aten::_batch_norm_no_update", 3, 4, -1, 5, 6, false, true},
};

static const bn_layout_t* bn_layout(const char* op) {
  const bn_layout_t* best = NULL;
  size_t best_len = 0;
  for (size_t i = 0; i < sizeof kBn / sizeof kBn[0]; i++) {
    size_t n = strlen(kBn[i].name);
    if (strncmp(op, kBn[i].name, n) == 0 && (op[n] == 0 || op[n] == '.') &&
        n > best_len)
      best = &kBn[i], best_len = n;
  }
  // ".no_stats_out" belongs to no_stats.
  if (strstr(op, ".no_stats")) best = &kBn[3];
  return best;
}

// The .out forms that also write running stats are not listed: their
// written arguments interleave with the outs.
// native_batch_norm / _native_batch_norm_legit* (input, weight?, bias?,
// [running_mean, running_var,] [training,] momentum, eps)
//   -> (out, save_mean, save_invstd[, new running_mean, running_var])
// Outputs 3 and 4 are the running stats written back (or returned fresh by
// the functional form).
static tpr_status_t lower_batch_norm(lw_ctx_t* ctx) {
  const bn_layout_t* L = bn_layout(ctx->op_name);
  const tpr_type_t* xt = lw_arg_type(ctx, 0);
  if (!L || !xt || xt->rank < 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs an input with a channel dim");
  tpr_graph_t* g = G;
  tpr_type_t full = *xt;
  full.dtype = lw_opmath(xt->dtype);
  if (!tpr_dtype_is_float(full.dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating input");
  bool training = L->training == BN_ALWAYS_TRAINING ||
                  (L->training >= 0 && lw_bool(ctx, L->training, false));
  double momentum = lw_double(ctx, L->momentum, 0.1);
  double eps = lw_double(ctx, L->eps, 1e-5);
  tpr_value_t rm = L->rm < 0 ? TPR_VALUE_NONE : opt_value(ctx, L->rm);
  tpr_value_t rv = L->rv < 0 ? TPR_VALUE_NONE : opt_value(ctx, L->rv);
  // _batch_norm_no_update without running stats normalises by the batch's.
  if (L->reserve && rm == TPR_VALUE_NONE && rv == TPR_VALUE_NONE) training = true;
  if (!training && (rm == TPR_VALUE_NONE || rv == TPR_VALUE_NONE))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "evaluation needs running_mean and running_var");
  int64_t dims[TPR_MAX_RANK];
  int nd = non_channel_dims(xt->rank, dims);
  double n = (double)lw_reduced_numel(xt, dims, nd);
  tpr_type_t ct = tpr_type_make(full.dtype, 1, &xt->dims[1]);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), full.dtype);
  tpr_value_t mean, var;  // [C]
  if (training) {
    mean = tpr_reduce(g, x, TPR_REDUCE_SUM, dims, nd);
    mean = lw_div(g, mean, lw_k(g, mean, n));
    tpr_value_t d = lw_sub(g, x, lw_unreduce(g, mean, &full, dims, nd));
    var = tpr_reduce(g, lw_mul(g, d, d), TPR_REDUCE_SUM, dims, nd);
    var = lw_div(g, var, lw_k(g, var, n));
  } else {
    mean = lw_reshape_to(g, lw_cast(g, rm, full.dtype), &ct);
    var = lw_reshape_to(g, lw_cast(g, rv, full.dtype), &ct);
  }
  tpr_value_t invstd = lw_un(g, TPR_UNARY_RSQRT, lw_add(g, var, lw_k(g, var, eps)));
  tpr_value_t y = lw_mul(g, lw_sub(g, x, lw_unreduce(g, mean, &full, dims, nd)),
                         lw_unreduce(g, invstd, &full, dims, nd));
  tpr_value_t w = opt_value(ctx, 1), b = opt_value(ctx, 2);
  if (w != TPR_VALUE_NONE) y = lw_mul(g, y, per_channel(ctx, w, 1, &full));
  if (b != TPR_VALUE_NONE) y = lw_add(g, y, per_channel(ctx, b, 0, &full));
  lw_set(ctx, 0, y);
  // save_mean / save_invstd: [C] in training; evaluation returns them empty
  // (PyTorch's out types say which).
  for (int i = 1; i < 3 && i < ctx->num_outs; i++) {
    const tpr_type_t* ot = &ctx->out_types[i];
    if (tpr_type_numel(ot) != xt->dims[1])
      lw_set(ctx, i, lw_full(g, 0, ot->dtype, ot));
    else
      lw_set(ctx, i, i == 1 ? mean : invstd);
  }
  // The reserve buffer (empty: there is nothing to keep for backward).
  int s0 = L->reserve ? 4 : 3;
  if (L->reserve && ctx->num_outs > 3)
    lw_set(ctx, 3, lw_full(g, 0, ctx->out_types[3].dtype, &ctx->out_types[3]));
  // Running stats: momentum update in training, unchanged otherwise.
  tpr_value_t stats[2] = {rm, rv};
  for (int i = s0; i < s0 + 2 && i < ctx->num_outs; i++) {
    tpr_value_t old = stats[i - s0];
    if (old == TPR_VALUE_NONE)
      return lw_fail(ctx, TPR_INTERNAL, "running stats written but absent");
    const tpr_type_t* ot = &ctx->out_types[i];
    tpr_value_t r = old;
    if (training) {
      tpr_type_t st = *ot;
      st.dtype = lw_opmath(ot->dtype);
      tpr_value_t cur = i == s0 ? mean
                               : lw_mul(g, var, lw_k(g, var, n > 1 ? n / (n - 1) : INFINITY));
      cur = lw_reshape_to(g, lw_cast(g, cur, st.dtype), &st);
      tpr_value_t o = lw_reshape_to(g, lw_cast(g, old, st.dtype), &st);
      r = lw_add(g, lw_mul(g, o, lw_k(g, o, 1 - momentum)),
                 lw_mul(g, cur, lw_k(g, cur, momentum)));
    }
    lw_set(ctx, i, r);
  }
  return lw_done(ctx);
}

// Masked gradient outputs: absent unless all three were asked for (see
// lower.h); returns the out slot of gradient |i| or -1.
static int grad_slot(const lw_ctx_t* ctx, int arg, int i, int* next) {
  const tpr_arg_t* mask = lw_arg(ctx, arg);
  bool want = mask->kind != TPR_ARG_BOOL_LIST || i >= mask->count || mask->bools[i];
  if (ctx->num_outs >= 3) return i;
  if (!want) return -1;
  return *next < ctx->num_outs ? (*next)++ : -1;
}
static bool grad_wanted(const lw_ctx_t* ctx, int arg, int i) {
  const tpr_arg_t* mask = lw_arg(ctx, arg);
  return mask->kind != TPR_ARG_BOOL_LIST || i >= mask->count || mask->bools[i];
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
// running_var?, save_mean?, save_invstd?, train, eps, output_mask)
static tpr_status_t lower_batch_norm_backward(lw_ctx_t* ctx) {
  const tpr_type_t* xt = lw_arg_type(ctx, 1);
  if (!xt || xt->rank < 2 || !lw_is_tensor(ctx, 0))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad_out and an input with a channel dim");
  tpr_graph_t* g = G;
  tpr_type_t full = *xt;
  full.dtype = lw_opmath(xt->dtype);
  if (!tpr_dtype_is_float(full.dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating input");
  bool train = lw_bool(ctx, 7, false);
  double eps = lw_double(ctx, 8, 1e-5);
  int ms = train ? 5 : 3, is = train ? 6 : 4;
  if (!lw_is_tensor(ctx, ms) || !lw_is_tensor(ctx, is))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs the saved or running statistics");
  int64_t dims[TPR_MAX_RANK];
  int nd = non_channel_dims(xt->rank, dims);
  double n = (double)lw_reduced_numel(xt, dims, nd);
  tpr_type_t ct = tpr_type_make(full.dtype, 1, &xt->dims[1]);
  tpr_value_t mean = lw_reshape_to(g, lw_cast(g, lw_value(ctx, ms), full.dtype), &ct);
  tpr_value_t invstd = lw_reshape_to(g, lw_cast(g, lw_value(ctx, is), full.dtype), &ct);
  if (!train) invstd = lw_un(g, TPR_UNARY_RSQRT, lw_add(g, invstd, lw_k(g, invstd, eps)));
  tpr_value_t go = lw_in(ctx, 0, full.dtype, &full);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 1), full.dtype);
  tpr_value_t xc = lw_sub(g, x, lw_unreduce(g, mean, &full, dims, nd));
  tpr_value_t inv_f = lw_unreduce(g, invstd, &full, dims, nd);
  tpr_value_t w = opt_value(ctx, 2);
  tpr_value_t wf = per_channel(ctx, w, 1, &full);
  tpr_value_t sum_go = tpr_reduce(g, go, TPR_REDUCE_SUM, dims, nd);
  tpr_value_t dot = tpr_reduce(g, lw_mul(g, go, xc), TPR_REDUCE_SUM, dims, nd);
  int next = 0;
  for (int i = 0; i < 3; i++) {
    int o = grad_slot(ctx, 9, i, &next);
    if (o < 0) continue;
    const tpr_type_t* ot = &ctx->out_types[o];
    tpr_value_t r;
    if (!grad_wanted(ctx, 9, i)) {
      r = lw_full(g, 0, ot->dtype, ot);
    } else if (i == 0) {
      if (train) {
        // (go - mean(go) - xc * invstd^2 * mean(go * xc)) * invstd * w
        tpr_value_t mg = lw_div(g, sum_go, lw_k(g, sum_go, n));
        tpr_value_t proj = lw_mul(g, lw_div(g, dot, lw_k(g, dot, n)),
                                  lw_mul(g, invstd, invstd));
        r = lw_sub(g, lw_sub(g, go, lw_unreduce(g, mg, &full, dims, nd)),
                   lw_mul(g, xc, lw_unreduce(g, proj, &full, dims, nd)));
        r = lw_mul(g, r, lw_mul(g, inv_f, wf));
      } else {
        r = lw_mul(g, go, lw_mul(g, inv_f, wf));
      }
    } else if (i == 1) {
      r = lw_mul(g, dot, invstd);
    } else {
      r = sum_go;
    }
    lw_set(ctx, o, r);
  }
  return lw_done(ctx);
}

//===--- group norm --------------------------------------------------------===//

typedef struct {
  int64_t n, c, hw, groups, d;  // d = c / groups * hw
  tpr_type_t full;              // [N, C, HxW] in opmath
  tpr_type_t grouped;           // [N, G, D]
} gn_t;

static tpr_status_t gn_setup(lw_ctx_t* ctx, int x, int first, gn_t* s) {
  const tpr_type_t* xt = lw_arg_type(ctx, x);
  s->n = lw_int(ctx, first, 0);
  s->c = lw_int(ctx, first + 1, 0);
  s->hw = lw_int(ctx, first + 2, 0);
  s->groups = lw_int(ctx, first + 3, 1);
  if (!xt || s->groups < 1 || s->c % s->groups ||
      tpr_type_numel(xt) != s->n * s->c * s->hw)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "N, C, HxW, group do not fit input");
  tpr_dtype_t d = lw_opmath(xt->dtype);
  if (!tpr_dtype_is_float(d))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating input");
  s->d = s->c / s->groups * s->hw;
  s->full = tpr_type_make(d, 3, (int64_t[]){s->n, s->c, s->hw});
  s->grouped = tpr_type_make(d, 3, (int64_t[]){s->n, s->groups, s->d});
  return tpr_ok_status();
}

// Per-channel |v| (or |dflt|) broadcast to [N, C, HxW].
static tpr_value_t gn_channel(lw_ctx_t* ctx, int i, double dflt, const gn_t* s) {
  return per_channel(ctx, opt_value(ctx, i), dflt, &s->full);
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
//   -> (out, mean [N, G], rstd [N, G])
static tpr_status_t lower_group_norm(lw_ctx_t* ctx) {
  gn_t s;
  TPR_RETURN_IF_ERROR(gn_setup(ctx, 0, 3, &s));
  tpr_graph_t* g = G;
  int64_t last = 2;
  tpr_value_t x = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 0), s.full.dtype), &s.grouped);
  tpr_value_t mean = tpr_reduce(g, x, TPR_REDUCE_SUM, &last, 1);
  mean = lw_div(g, mean, lw_k(g, mean, (double)s.d));
  tpr_value_t xc = lw_sub(g, x, lw_unreduce(g, mean, &s.grouped, &last, 1));
  tpr_value_t var = tpr_reduce(g, lw_mul(g, xc, xc), TPR_REDUCE_SUM, &last, 1);
  var = lw_div(g, var, lw_k(g, var, (double)s.d));
  tpr_value_t rstd = lw_un(g, TPR_UNARY_RSQRT,
                           lw_add(g, var, lw_k(g, var, lw_double(ctx, 7, 1e-5))));
  tpr_value_t y = lw_mul(g, xc, lw_unreduce(g, rstd, &s.grouped, &last, 1));
  y = lw_reshape_to(g, y, &s.full);
  if (lw_is_tensor(ctx, 1)) y = lw_mul(g, y, gn_channel(ctx, 1, 1, &s));
  if (lw_is_tensor(ctx, 2)) y = lw_add(g, y, gn_channel(ctx, 2, 0, &s));
  lw_set(ctx, 0, y);
  if (ctx->num_outs > 1) lw_set(ctx, 1, mean);
  if (ctx->num_outs > 2) lw_set(ctx, 2, rstd);
  return lw_done(ctx);
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C,
// HxW, group, output_mask) -> (grad_input, grad_weight, grad_bias)
static tpr_status_t lower_group_norm_backward(lw_ctx_t* ctx) {
  gn_t s;
  TPR_RETURN_IF_ERROR(gn_setup(ctx, 1, 5, &s));
  tpr_graph_t* g = G;
  tpr_dtype_t dt = s.full.dtype;
  int64_t last = 2, nh[2] = {0, 2};
  tpr_type_t ng = tpr_type_make(dt, 2, (int64_t[]){s.n, s.groups});
  tpr_value_t mean = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 2), dt), &ng);
  tpr_value_t rstd = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 3), dt), &ng);
  tpr_value_t x = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 1), dt), &s.grouped);
  tpr_value_t xhat = lw_mul(g, lw_sub(g, x, lw_unreduce(g, mean, &s.grouped, &last, 1)),
                            lw_unreduce(g, rstd, &s.grouped, &last, 1));
  tpr_value_t go = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 0), dt), &s.full);
  int next = 0;
  for (int i = 0; i < 3; i++) {
    int o = grad_slot(ctx, 9, i, &next);
    if (o < 0) continue;
    const tpr_type_t* ot = &ctx->out_types[o];
    tpr_value_t r;
    if (!grad_wanted(ctx, 9, i)) {
      r = lw_full(g, 0, ot->dtype, ot);
    } else if (i == 0) {
      tpr_value_t gx = go;
      if (lw_is_tensor(ctx, 4)) gx = lw_mul(g, gx, gn_channel(ctx, 4, 1, &s));
      gx = lw_reshape_to(g, gx, &s.grouped);
      tpr_value_t a = lw_reduce_keep(g, gx, TPR_REDUCE_SUM, &last, 1);
      tpr_value_t b = lw_reduce_keep(g, lw_mul(g, gx, xhat), TPR_REDUCE_SUM, &last, 1);
      tpr_value_t inv_d = lw_k(g, a, 1.0 / (double)s.d);
      r = lw_sub(g, lw_sub(g, gx, lw_mul(g, a, inv_d)), lw_mul(g, xhat, lw_mul(g, b, inv_d)));
      r = lw_mul(g, r, lw_unreduce(g, rstd, &s.grouped, &last, 1));
    } else {
      tpr_value_t v = i == 1 ? lw_mul(g, go, lw_reshape_to(g, xhat, &s.full)) : go;
      r = tpr_reduce(g, v, TPR_REDUCE_SUM, nh, 2);
    }
    lw_set(ctx, o, r);
  }
  return lw_done(ctx);
}

LW_DEFINE_TABLE(norm,
    LW_RULE("native_batch_norm", lower_batch_norm),
    LW_RULE("_native_batch_norm_legit", lower_batch_norm),
    LW_RULE("_native_batch_norm_legit.no_stats", lower_batch_norm),
    LW_RULE("_native_batch_norm_legit.no_stats_out", lower_batch_norm),
    LW_RULE("_native_batch_norm_legit_functional", lower_batch_norm),
    LW_RULE("_native_batch_norm_legit_no_training", lower_batch_norm),
    LW_RULE("_native_batch_norm_legit_no_training.out", lower_batch_norm),
    LW_RULE("native_batch_norm_backward", lower_batch_norm_backward),
    LW_RULE("native_batch_norm_backward.out", lower_batch_norm_backward),
    LW_RULE("_batch_norm_with_update", lower_batch_norm),
    LW_RULE("_batch_norm_with_update_functional", lower_batch_norm),
    LW_RULE("_batch_norm_no_update", lower_batch_norm),
    LW_RULE("_batch_norm_no_update.out", lower_batch_norm),
    // (grad_out, input, weight, running_mean, running_var, save_mean,
    // save_var, update, eps, output_mask, reserve): native's layout.
    LW_RULE("batch_norm_backward", lower_batch_norm_backward),
    LW_RULE("native_group_norm", lower_group_norm),
    LW_RULE("native_group_norm.out", lower_group_norm),
    LW_RULE("native_group_norm_backward", lower_group_norm_backward),
    LW_RULE("native_group_norm_backward.out", lower_group_norm_backward),
);
