// Losses and layer norm. Formulas follow torch/_decomp/decompositions.py;
// everything computes in opmath and rounds once. Reductions: 0 none,
// 1 mean, 2 sum.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 };

static tpr_value_t reduce_all(tpr_graph_t* g, tpr_value_t v, bool mean) {
  const tpr_type_t* t = tpr_value_type(g, v);
  int64_t dims[TPR_MAX_RANK];
  int n = t->rank;
  for (int i = 0; i < n; i++) dims[i] = i;
  int64_t count = tpr_type_numel(t);
  tpr_value_t s = tpr_reduce(g, v, TPR_REDUCE_SUM, dims, n);
  return mean ? lw_div(g, s, lw_k(g, s, (double)count)) : s;
}

tpr_value_t lw_loss_reduction(tpr_graph_t* g, tpr_value_t loss,
                              int64_t reduction) {
  if (reduction == RED_NONE) return loss;
  return reduce_all(g, loss, reduction == RED_MEAN);
}

// Loads (self, target) of a pointwise loss at |a|, |a|+1 in their broadcast
// shape and opmath dtype.
static tpr_status_t load_pair(lw_ctx_t* ctx, int a, tpr_type_t* shape,
                              tpr_value_t* x, tpr_value_t* y) {
  const tpr_type_t* ta = lw_arg_type(ctx, a);
  const tpr_type_t* tb = lw_arg_type(ctx, a + 1);
  if (!ta || !tb || !lw_broadcast_shape(ta, tb, shape))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "operands do not broadcast");
  shape->dtype = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(shape->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating out type");
  *x = lw_in(ctx, a, shape->dtype, shape);
  *y = lw_in(ctx, a + 1, shape->dtype, shape);
  return tpr_ok_status();
}

//===--- nll_loss ----------------------------------------------------------===//

typedef struct {
  tpr_type_t xt;        // self's type in opmath
  int64_t cdim;         // class dim
  tpr_value_t onehot;   // bool, self's shape: class == target
  tpr_value_t valid;    // bool, self's shape: target != ignore_index
  tpr_value_t weight;   // opmath, self's shape (1 without weight)
} nll_t;

// Shared setup: self at 0+off, target at 1+off, weight at 2+off,
// ignore_index at 4+off.
static tpr_status_t nll_setup(lw_ctx_t* ctx, int off, nll_t* s) {
  tpr_graph_t* g = G;
  const tpr_type_t* xt = lw_arg_type(ctx, off);
  const tpr_type_t* tt = lw_arg_type(ctx, off + 1);
  if (!xt || !tt || xt->rank < 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self and target tensors");
  s->xt = *xt;
  s->xt.dtype = lw_opmath(xt->dtype);
  if (!tpr_dtype_is_float(s->xt.dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating self");
  s->cdim = xt->rank == 1 ? 0 : 1;
  // target has self's shape without the class dim.
  tpr_type_t want = tpr_type_scalar(TPR_DTYPE_S64);
  int64_t bd[TPR_MAX_RANK];
  for (int d = 0; d < xt->rank; d++)
    if (d != s->cdim) {
      bd[want.rank] = d;
      want.dims[want.rank++] = xt->dims[d];
    }
  if (tpr_type_numel(tt) != tpr_type_numel(&want))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "target size does not match self");
  tpr_value_t t = lw_reshape_to(g, lw_cast(g, lw_value(ctx, off + 1), TPR_DTYPE_S64),
                                &want);
  t = tpr_broadcast_in_dim(g, t, xt->rank, xt->dims, bd);
  tpr_type_t it = *xt;
  it.dtype = TPR_DTYPE_S64;
  s->onehot = lw_cmp(g, TPR_CMP_EQ, tpr_iota(g, it, s->cdim), t);
  s->valid = lw_cmpk(g, TPR_CMP_NE, t, (double)lw_int(ctx, off + 4, -100));
  if (lw_is_tensor(ctx, off + 2)) {
    const tpr_type_t* wt = lw_arg_type(ctx, off + 2);
    if (wt->rank != 1 || wt->dims[0] != xt->dims[s->cdim])
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "weight must have one entry per class");
    int64_t cd = s->cdim;
    s->weight = tpr_broadcast_in_dim(g, lw_cast(g, lw_value(ctx, off + 2), s->xt.dtype),
                                     xt->rank, xt->dims, &cd);
  } else {
    s->weight = lw_full(g, 1, s->xt.dtype, &s->xt);
  }
  return tpr_ok_status();
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction,
// ignore_index) -> (output, total_weight)
static tpr_status_t lower_nll_loss_forward(lw_ctx_t* ctx) {
  nll_t s;
  TPR_RETURN_IF_ERROR(nll_setup(ctx, 0, &s));
  tpr_graph_t* g = G;
  int64_t red = lw_int(ctx, 3, RED_MEAN);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), s.xt.dtype);
  tpr_value_t zero = lw_k(g, x, 0);
  tpr_value_t pick = tpr_binary(g, TPR_BINARY_AND, s.onehot, s.valid);
  // -(self * w)[target], 0 where ignored
  tpr_value_t l = lw_sel(g, pick, lw_un(g, TPR_UNARY_NEG, lw_mul(g, x, s.weight)), zero);
  tpr_value_t w = lw_sel(g, pick, s.weight, zero);
  tpr_value_t loss = tpr_reduce(g, l, TPR_REDUCE_SUM, &s.cdim, 1);
  tpr_value_t wsum = reduce_all(g, w, false);
  if (red == RED_NONE) {
    lw_set(ctx, 0, loss);
    if (ctx->num_outs > 1)
      lw_set(ctx, 1, s.xt.rank > 1 ? lw_k(g, wsum, 0) : wsum);
    return lw_done(ctx);
  }
  tpr_value_t total = reduce_all(g, loss, false);
  if (red == RED_MEAN) total = lw_div(g, total, wsum);
  lw_set(ctx, 0, total);
  if (ctx->num_outs > 1) lw_set(ctx, 1, wsum);
  return lw_done(ctx);
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target,
// weight?, reduction, ignore_index, total_weight)
static tpr_status_t lower_nll_loss_backward(lw_ctx_t* ctx) {
  nll_t s;
  TPR_RETURN_IF_ERROR(nll_setup(ctx, 1, &s));
  tpr_graph_t* g = G;
  int64_t red = lw_int(ctx, 4, RED_MEAN);
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  if (!gt) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grad_output must be a tensor");
  tpr_value_t go = lw_cast(g, lw_value(ctx, 0), s.xt.dtype);
  if (red == RED_MEAN && lw_is_tensor(ctx, 6))
    go = lw_div(g, go, lw_splat(g, lw_value(ctx, 6), go));
  if (gt->rank == 0 || tpr_type_numel(gt) == 1) {
    go = lw_splat(g, lw_reshape_to(g, go, &(tpr_type_t){s.xt.dtype, 0, {0}}),
                  s.weight);
  } else {
    int64_t bd[TPR_MAX_RANK];
    int n = 0;
    for (int d = 0; d < s.xt.rank; d++)
      if (d != s.cdim) bd[n++] = d;
    if (gt->rank != n)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grad_output shape does not fit");
    go = tpr_broadcast_in_dim(g, go, s.xt.rank, s.xt.dims, bd);
  }
  tpr_value_t pick = tpr_binary(g, TPR_BINARY_AND, s.onehot, s.valid);
  tpr_value_t gi = lw_un(g, TPR_UNARY_NEG, lw_mul(g, s.weight, go));
  return lw_ret(ctx, lw_sel(g, pick, gi, lw_k(g, gi, 0)));
}

//===--- pointwise losses ----------------------------------------------------===//

// mse_loss(self, target, reduction=1)
static tpr_status_t lower_mse_loss(lw_ctx_t* ctx) {
  tpr_type_t sh;
  tpr_value_t x, y;
  TPR_RETURN_IF_ERROR(load_pair(ctx, 0, &sh, &x, &y));
  tpr_value_t d = lw_sub(G, x, y);
  return lw_ret(ctx, lw_loss_reduction(G, lw_mul(G, d, d), lw_int(ctx, 2, RED_MEAN)));
}

// Pointwise-loss backward: grad at 0 (scalar or shaped), self/target at 1, 2.
static tpr_status_t load_backward(lw_ctx_t* ctx, int64_t red, tpr_value_t* gr,
                                  tpr_value_t* x, tpr_value_t* y) {
  tpr_type_t sh;
  TPR_RETURN_IF_ERROR(load_pair(ctx, 1, &sh, x, y));
  *gr = lw_in(ctx, 0, sh.dtype, &sh);
  if (red == RED_MEAN)
    *gr = lw_div(G, *gr, lw_k(G, *gr, (double)tpr_type_numel(&sh)));
  return tpr_ok_status();
}

// mse_loss_backward(grad, self, target, reduction)
static tpr_status_t lower_mse_loss_backward(lw_ctx_t* ctx) {
  tpr_value_t gr, x, y;
  TPR_RETURN_IF_ERROR(load_backward(ctx, lw_int(ctx, 3, RED_MEAN), &gr, &x, &y));
  tpr_value_t d = lw_mul(G, lw_k(G, x, 2), lw_sub(G, x, y));
  return lw_ret(ctx, lw_mul(G, d, gr));
}

static tpr_value_t opt_weight(lw_ctx_t* ctx, int i, tpr_value_t like) {
  if (!lw_is_tensor(ctx, i)) return TPR_VALUE_NONE;
  tpr_type_t t = *lw_type(ctx, like);
  return lw_in(ctx, i, t.dtype, &t);
}

// binary_cross_entropy(self, target, weight?, reduction)
static tpr_status_t lower_bce(lw_ctx_t* ctx) {
  tpr_type_t sh;
  tpr_value_t x, t;
  TPR_RETURN_IF_ERROR(load_pair(ctx, 0, &sh, &x, &t));
  tpr_graph_t* g = G;
  tpr_value_t lo = lw_k(g, x, -100);
  tpr_value_t l1 = lw_max(g, lw_un(g, TPR_UNARY_LOG1P, lw_un(g, TPR_UNARY_NEG, x)), lo);
  tpr_value_t l2 = lw_max(g, lw_un(g, TPR_UNARY_LOG, x), lo);
  tpr_value_t loss = lw_sub(g, lw_mul(g, lw_sub(g, t, lw_k(g, t, 1)), l1), lw_mul(g, t, l2));
  tpr_value_t w = opt_weight(ctx, 2, loss);
  if (w != TPR_VALUE_NONE) loss = lw_mul(g, loss, w);
  return lw_ret(ctx, lw_loss_reduction(g, loss, lw_int(ctx, 3, RED_MEAN)));
}

// binary_cross_entropy_backward(grad, self, target, weight?, reduction)
static tpr_status_t lower_bce_backward(lw_ctx_t* ctx) {
  tpr_value_t gr, x, t;
  TPR_RETURN_IF_ERROR(load_backward(ctx, lw_int(ctx, 4, RED_MEAN), &gr, &x, &t));
  tpr_graph_t* g = G;
  tpr_value_t den = lw_max(g, lw_mul(g, x, lw_sub(g, lw_k(g, x, 1), x)), lw_k(g, x, 1e-12));
  tpr_value_t r = lw_div(g, lw_mul(g, gr, lw_sub(g, x, t)), den);
  tpr_value_t w = opt_weight(ctx, 3, r);
  if (w != TPR_VALUE_NONE) r = lw_mul(g, r, w);
  return lw_ret(ctx, r);
}

// binary_cross_entropy_with_logits(self, target, weight?, pos_weight?, reduction)
static tpr_status_t lower_bce_logits(lw_ctx_t* ctx) {
  tpr_type_t sh;
  tpr_value_t x, t;
  TPR_RETURN_IF_ERROR(load_pair(ctx, 0, &sh, &x, &t));
  tpr_graph_t* g = G;
  tpr_value_t ls = lw_sub(g, lw_min(g, x, lw_k(g, x, 0)),
                          lw_un(g, TPR_UNARY_LOG1P,
                                lw_un(g, TPR_UNARY_EXP,
                                      lw_un(g, TPR_UNARY_NEG, lw_un(g, TPR_UNARY_ABS, x)))));
  tpr_value_t pw = opt_weight(ctx, 3, x);
  if (pw != TPR_VALUE_NONE)
    ls = lw_mul(g, lw_add(g, lw_mul(g, lw_sub(g, pw, lw_k(g, pw, 1)), t), lw_k(g, t, 1)), ls);
  tpr_value_t loss = lw_sub(g, lw_mul(g, lw_sub(g, lw_k(g, t, 1), t), x), ls);
  tpr_value_t w = opt_weight(ctx, 2, loss);
  if (w != TPR_VALUE_NONE) loss = lw_mul(g, loss, w);
  return lw_ret(ctx, lw_loss_reduction(g, loss, lw_int(ctx, 4, RED_MEAN)));
}

// smooth_l1_loss(self, target, reduction, beta=1) and
// huber_loss(self, target, reduction, delta=1)
static tpr_status_t l1_family(lw_ctx_t* ctx, bool huber) {
  tpr_type_t sh;
  tpr_value_t x, y;
  TPR_RETURN_IF_ERROR(load_pair(ctx, 0, &sh, &x, &y));
  tpr_graph_t* g = G;
  double b = lw_double(ctx, 3, 1.0);
  tpr_value_t z = lw_un(g, TPR_UNARY_ABS, lw_sub(g, x, y));
  tpr_value_t loss;
  if (huber) {
    tpr_value_t q = lw_mul(g, lw_k(g, z, 0.5), lw_mul(g, z, z));
    tpr_value_t l = lw_mul(g, lw_k(g, z, b), lw_sub(g, z, lw_k(g, z, 0.5 * b)));
    loss = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, z, b), q, l);
  } else if (b == 0) {
    loss = z;
  } else {
    tpr_value_t q = lw_div(g, lw_mul(g, lw_k(g, z, 0.5), lw_mul(g, z, z)), lw_k(g, z, b));
    loss = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, z, b), q, lw_sub(g, z, lw_k(g, z, 0.5 * b)));
  }
  return lw_ret(ctx, lw_loss_reduction(g, loss, lw_int(ctx, 2, RED_MEAN)));
}
static tpr_status_t lower_smooth_l1(lw_ctx_t* ctx) { return l1_family(ctx, false); }
static tpr_status_t lower_huber(lw_ctx_t* ctx) { return l1_family(ctx, true); }

// smooth_l1_loss_backward / huber_loss_backward(grad, self, target,
// reduction, beta|delta)
static tpr_status_t l1_family_backward(lw_ctx_t* ctx, bool huber) {
  tpr_value_t gr, x, y;
  TPR_RETURN_IF_ERROR(load_backward(ctx, lw_int(ctx, 3, RED_MEAN), &gr, &x, &y));
  tpr_graph_t* g = G;
  double b = lw_double(ctx, 4, 1.0);
  tpr_value_t d = lw_sub(g, x, y);
  tpr_value_t r;
  if (huber) {
    r = lw_min(g, lw_max(g, d, lw_k(g, d, -b)), lw_k(g, d, b));
  } else {
    tpr_value_t sg = lw_un(g, TPR_UNARY_SIGN, d);
    r = b == 0 ? sg
               : lw_sel(g, lw_cmpk(g, TPR_CMP_LT, lw_un(g, TPR_UNARY_ABS, d), b),
                        lw_div(g, d, lw_k(g, d, b)), sg);
  }
  return lw_ret(ctx, lw_mul(g, r, gr));
}
static tpr_status_t lower_smooth_l1_backward(lw_ctx_t* ctx) {
  return l1_family_backward(ctx, false);
}
static tpr_status_t lower_huber_backward(lw_ctx_t* ctx) {
  return l1_family_backward(ctx, true);
}

//===--- layer norm ------------------------------------------------------------===//

// Inner dims of a layer norm over the last |n| dims.
static int inner_dims(const tpr_type_t* t, int n, int64_t* dims) {
  for (int i = 0; i < n; i++) dims[i] = t->rank - n + i;
  return n;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps)
//   -> (out, mean, rstd)
static tpr_status_t lower_layer_norm(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_arg_t* ns = lw_arg(ctx, 1);
  if (!t || ns->kind != TPR_ARG_INT_LIST || ns->count > t->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad input or normalized_shape");
  tpr_graph_t* g = G;
  int64_t dims[TPR_MAX_RANK];
  int n = inner_dims(t, ns->count, dims);
  tpr_type_t full = *t;
  full.dtype = lw_opmath(t->dtype);
  if (!tpr_dtype_is_float(full.dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating input");
  int64_t count = lw_reduced_numel(t, dims, n);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), full.dtype);
  tpr_value_t mean = tpr_reduce(g, x, TPR_REDUCE_SUM, dims, n);
  mean = lw_div(g, mean, lw_k(g, mean, (double)count));
  tpr_value_t d = lw_sub(g, x, lw_unreduce(g, mean, &full, dims, n));
  tpr_value_t var = tpr_reduce(g, lw_mul(g, d, d), TPR_REDUCE_SUM, dims, n);
  var = lw_div(g, var, lw_k(g, var, (double)count));
  tpr_value_t rstd = lw_un(g, TPR_UNARY_RSQRT,
                           lw_add(g, var, lw_k(g, var, lw_double(ctx, 4, 1e-5))));
  tpr_value_t y = lw_mul(g, d, lw_unreduce(g, rstd, &full, dims, n));
  if (lw_is_tensor(ctx, 2)) y = lw_mul(g, y, lw_in(ctx, 2, full.dtype, &full));
  if (lw_is_tensor(ctx, 3)) y = lw_add(g, y, lw_in(ctx, 3, full.dtype, &full));
  lw_set(ctx, 0, y);
  if (ctx->num_outs > 1) lw_set(ctx, 1, mean);
  if (ctx->num_outs > 2) lw_set(ctx, 2, rstd);
  return lw_done(ctx);
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
//   weight?, bias?, output_mask) -> (d_input, d_weight, d_bias). Outputs
// masked off have no out slot (lower.h), except in the .out overload, which
// always has three: there they are zeros.
static tpr_status_t lower_layer_norm_backward(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 1);
  const tpr_arg_t* ns = lw_arg(ctx, 2);
  if (!t || ns->kind != TPR_ARG_INT_LIST || ns->count > t->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad input or normalized_shape");
  const tpr_arg_t* mask = lw_arg(ctx, 7);
  bool want[3] = {true, true, true};
  if (mask->kind == TPR_ARG_BOOL_LIST)
    for (int i = 0; i < 3 && i < mask->count; i++) want[i] = mask->bools[i];
  tpr_graph_t* g = G;
  int64_t dims[TPR_MAX_RANK], outer[TPR_MAX_RANK];
  int n = inner_dims(t, ns->count, dims), no = t->rank - n;
  for (int i = 0; i < no; i++) outer[i] = i;
  tpr_type_t full = *t;
  full.dtype = lw_opmath(t->dtype);
  double N = (double)lw_reduced_numel(t, dims, n);
  tpr_value_t go = lw_in(ctx, 0, full.dtype, &full);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 1), full.dtype);
  // mean / rstd arrive with size-1 inner dims: drop them, broadcast back.
  tpr_type_t red = tpr_type_scalar(full.dtype);
  for (int i = 0; i < no; i++) red.dims[red.rank++] = t->dims[i];
  tpr_value_t mean = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 3), full.dtype), &red);
  tpr_value_t rstd = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 4), full.dtype), &red);
  mean = lw_unreduce(g, mean, &full, dims, n);
  rstd = lw_unreduce(g, rstd, &full, dims, n);
  tpr_value_t xhat = lw_mul(g, lw_sub(g, x, mean), rstd);
  bool has_w = lw_is_tensor(ctx, 5);
  tpr_value_t gxh = has_w ? lw_mul(g, go, lw_in(ctx, 5, full.dtype, &full)) : go;
  bool every_slot = ctx->num_outs >= 3;
  for (int i = 0, k = 0; i < 3 && k < ctx->num_outs; i++) {
    if (!want[i] && !every_slot) continue;
    const tpr_type_t* ot = &ctx->out_types[k];
    if (!want[i]) {
      lw_set(ctx, k++, lw_full(g, 0, ot->dtype, ot));
      continue;
    }
    tpr_value_t r;
    if (i == 0) {
      tpr_value_t a = lw_mul(g, gxh, lw_k(g, gxh, N));
      tpr_value_t b = lw_reduce_keep(g, gxh, TPR_REDUCE_SUM, dims, n);
      tpr_value_t c = lw_mul(g, xhat, lw_reduce_keep(g, lw_mul(g, gxh, xhat),
                                                     TPR_REDUCE_SUM, dims, n));
      r = lw_mul(g, lw_div(g, rstd, lw_k(g, rstd, N)), lw_sub(g, lw_sub(g, a, b), c));
    } else {
      tpr_value_t v = i == 1 ? lw_mul(g, go, xhat) : go;
      r = tpr_reduce(g, v, TPR_REDUCE_SUM, outer, no);
    }
    lw_set(ctx, k++, r);
  }
  return lw_done(ctx);
}

LW_DEFINE_TABLE(nn,
    LW_RULE("nll_loss_forward", lower_nll_loss_forward),
    LW_RULE("nll_loss_forward.output", lower_nll_loss_forward),
    LW_RULE("nll_loss2d_forward", lower_nll_loss_forward),
    LW_RULE("nll_loss2d_forward.output", lower_nll_loss_forward),
    LW_RULE("nll_loss_backward", lower_nll_loss_backward),
    LW_RULE("nll_loss_backward.grad_input", lower_nll_loss_backward),
    LW_RULE("nll_loss2d_backward", lower_nll_loss_backward),
    LW_RULE("nll_loss2d_backward.grad_input", lower_nll_loss_backward),
    LW_RULE("mse_loss", lower_mse_loss), LW_RULE("mse_loss.out", lower_mse_loss),
    LW_RULE("mse_loss_backward", lower_mse_loss_backward),
    LW_RULE("mse_loss_backward.grad_input", lower_mse_loss_backward),
    LW_RULE("binary_cross_entropy", lower_bce),
    LW_RULE("binary_cross_entropy.out", lower_bce),
    LW_RULE("binary_cross_entropy_backward", lower_bce_backward),
    LW_RULE("binary_cross_entropy_backward.grad_input", lower_bce_backward),
    LW_RULE("binary_cross_entropy_with_logits", lower_bce_logits),
    LW_RULE("binary_cross_entropy_with_logits.out", lower_bce_logits),
    LW_RULE("smooth_l1_loss", lower_smooth_l1),
    LW_RULE("smooth_l1_loss.out", lower_smooth_l1),
    LW_RULE("smooth_l1_loss_backward", lower_smooth_l1_backward),
    LW_RULE("smooth_l1_loss_backward.grad_input", lower_smooth_l1_backward),
    LW_RULE("huber_loss", lower_huber), LW_RULE("huber_loss.out", lower_huber),
    LW_RULE("huber_loss_backward", lower_huber_backward),
    LW_RULE("huber_loss_backward.out", lower_huber_backward),
    LW_RULE("native_layer_norm", lower_layer_norm),
    LW_RULE("native_layer_norm.out", lower_layer_norm),
    LW_RULE("native_layer_norm_backward", lower_layer_norm_backward),
    LW_RULE("native_layer_norm_backward.out", lower_layer_norm_backward));
