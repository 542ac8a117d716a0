// Fused optimizer steps: _fused_adam_ and _fused_adamw_ (torch.optim.Adam and
// AdamW with fused=True; Hugging Face Trainer's default optimizer),
// _fused_sgd_ and _fused_adagrad_. One rule updates every parameter of the
// group, so a step is one program.
//
// Arguments: params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs (all
// written), state_steps, lr (float, or a 0-d tensor for the .tensor_lr
// overloads), beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale?,
// found_inf?. Outputs: the written lists in that order (the executor writes
// them back). As PyTorch's kernels:
//   g = grad / grad_scale (stored back into grad), negated when maximize;
//   AdamW: p *= 1 - lr * wd;  Adam: g += wd * p;
//   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g;
//   v_hat = max(v_max, v) under amsgrad;
//   p -= lr / (1 - beta1^t) * m / (sqrt(v_hat) / sqrt(1 - beta2^t) + eps);
// and found_inf == 1 leaves every tensor as it was.
// Arithmetic is in the opmath type (f32 for f16/bf16). The bias corrections
// 1 - beta^t are computed as -expm1(t * log(beta)) in f32: the direct form
// cancels (1 - 0.999f loses 4 digits) and f64, which the CPU kernels use, is
// not available on every device.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)

enum {
  A_PARAMS, A_GRADS, A_EXP_AVGS, A_EXP_AVG_SQS, A_MAX_SQS, A_STEPS, A_LR,
  A_BETA1, A_BETA2, A_WD, A_EPS, A_AMSGRAD, A_MAXIMIZE, A_GRAD_SCALE,
  A_FOUND_INF
};

// 1 - beta^step for a rank-0 f32 step.
static tpr_value_t bias_correction(tpr_graph_t* g, tpr_value_t step, double beta) {
  tpr_value_t lb = tpr_constant_f64(g, TPR_DTYPE_F32, log(beta));
  return lw_un(g, TPR_UNARY_NEG, lw_un(g, TPR_UNARY_EXPM1, lw_mul(g, step, lb)));
}

// A rank-0 f32 value: the lr argument (float or 0-d tensor).
static tpr_value_t scalar_f32(lw_ctx_t* ctx, int i) {
  if (lw_is_tensor(ctx, i))
    return tpr_reshape(G, lw_cast(G, lw_value(ctx, i), TPR_DTYPE_F32), 0, NULL);
  return tpr_constant_f64(G, TPR_DTYPE_F32, lw_double(ctx, i, 0.0));
}

// Lists |first|..|last| of the op's arguments are tensor lists, each with
// |n| tensors of param |i|'s shape (lists with other counts than n are
// allowed only where |optional_list| names them and they are empty).
static tpr_status_t check_lists(lw_ctx_t* ctx, int first, int last, int optional_list,
                                const tpr_arg_t** lists) {
  for (int k = first; k <= last; k++) {
    lists[k] = lw_arg(ctx, k);
    if (lists[k]->kind != TPR_ARG_TENSOR_LIST)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d must be a tensor list", k);
  }
  const size_t n = lists[first]->count;
  for (int k = first + 1; k <= last; k++) {
    if (k == optional_list && lists[k]->count == 0) continue;
    if (lists[k]->count != n)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d has %d tensors, params %d", k,
                     (int)lists[k]->count, (int)n);
    for (size_t i = 0; i < n; i++) {
      const tpr_type_t* pt = lw_type(ctx, lists[first]->values[i]);
      const tpr_type_t* t = lw_type(ctx, lists[k]->values[i]);
      if (!pt || !t || t->rank != pt->rank ||
          memcmp(t->dims, pt->dims, sizeof(int64_t) * (size_t)pt->rank) != 0)
        return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                       "tensor %d of argument %d does not have param %d's shape", (int)i, k,
                       (int)i);
    }
  }
  for (size_t i = 0; i < n; i++) {
    const tpr_type_t* pt = lw_type(ctx, lists[first]->values[i]);
    if (!tpr_dtype_is_float(pt->dtype))
      return lw_fail(ctx, TPR_UNIMPLEMENTED, "param %d must be floating point", (int)i);
  }
  return TPR_OK;
}

// The gradient in the opmath type, divided by grad_scale: what the fused
// kernels store back into grad, before maximize and weight decay.
static tpr_value_t unscaled_grad(lw_ctx_t* ctx, tpr_value_t g0, tpr_dtype_t cd,
                                 tpr_value_t inv_scale, tpr_value_t* g_store) {
  tpr_value_t g = lw_cast(G, g0, cd);
  if (inv_scale != TPR_VALUE_NONE) g = lw_div(G, g, lw_splat(G, inv_scale, g));
  *g_store = g;
  return g;
}

// Writes output |slot| as |value| in |old|'s dtype, or |old| itself when the
// step is skipped (found_inf == 1).
static void set_unless_skipped(lw_ctx_t* ctx, int slot, tpr_value_t value, tpr_value_t old,
                               tpr_value_t skip) {
  tpr_value_t out = lw_cast(G, value, lw_type(ctx, old)->dtype);
  if (skip != TPR_VALUE_NONE)
    out = lw_sel(G, lw_cast_to(G, skip, TPR_DTYPE_BOOL, lw_type(ctx, out)), old, out);
  lw_set(ctx, slot, out);
}

// grad_scale and found_inf, at arguments |i| and |i| + 1.
static void scale_and_skip(lw_ctx_t* ctx, int i, tpr_value_t* inv_scale, tpr_value_t* skip) {
  *inv_scale = lw_is_tensor(ctx, i) ? scalar_f32(ctx, i) : TPR_VALUE_NONE;
  *skip = lw_is_tensor(ctx, i + 1) ? lw_cmpk(G, TPR_CMP_EQ, scalar_f32(ctx, i + 1), 1.0)
                                   : TPR_VALUE_NONE;
}

static tpr_status_t lower_fused_adam_common(lw_ctx_t* ctx, bool decoupled) {
  const tpr_arg_t* lists[A_STEPS + 1];
  for (int k = A_PARAMS; k <= A_STEPS; k++) {
    lists[k] = lw_arg(ctx, k);
    if (lists[k]->kind != TPR_ARG_TENSOR_LIST)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d must be a tensor list", k);
  }
  const int n = (int)lists[A_PARAMS]->count;
  const bool amsgrad = lw_bool(ctx, A_AMSGRAD, false);
  const bool maximize = lw_bool(ctx, A_MAXIMIZE, false);
  const int n_max = (int)lists[A_MAX_SQS]->count;
  for (int k = A_GRADS; k <= A_STEPS; k++) {
    if (k == A_MAX_SQS && !amsgrad) continue;
    if ((int)lists[k]->count != n)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d has %d tensors, params %d",
                     k, (int)lists[k]->count, n);
  }
  if (ctx->num_outs != 4 * n + n_max)
    return lw_fail(ctx, TPR_INTERNAL, "%d outputs for %d params", (int)ctx->num_outs, n);
  const double beta1 = lw_double(ctx, A_BETA1, 0.9);
  const double beta2 = lw_double(ctx, A_BETA2, 0.999);
  const double wd = lw_double(ctx, A_WD, 0.0);
  const double eps = lw_double(ctx, A_EPS, 1e-8);
  if (!(beta1 > 0 && beta1 < 1 && beta2 > 0 && beta2 < 1))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "betas must lie in (0, 1), got %g, %g",
                   beta1, beta2);

  tpr_value_t lr = scalar_f32(ctx, A_LR), inv_scale, skip;
  scale_and_skip(ctx, A_GRAD_SCALE, &inv_scale, &skip);
  tpr_value_t decay = TPR_VALUE_NONE;  // AdamW's 1 - lr * wd
  if (decoupled && wd != 0)
    decay = lw_sub(G, lw_k(G, lr, 1.0), lw_mul(G, lr, lw_k(G, lr, wd)));

  for (int i = 0; i < n; i++) {
    tpr_value_t p0 = lists[A_PARAMS]->values[i];
    const tpr_type_t* pt = lw_type(ctx, p0);
    if (!pt || !tpr_dtype_is_float(pt->dtype))
      return lw_fail(ctx, TPR_UNIMPLEMENTED, "param %d must be floating point", i);
    const tpr_dtype_t cd = lw_opmath(pt->dtype);
    tpr_value_t g0 = lists[A_GRADS]->values[i];
    tpr_value_t m0 = lists[A_EXP_AVGS]->values[i];
    tpr_value_t v0 = lists[A_EXP_AVG_SQS]->values[i];
    tpr_value_t x0 = amsgrad ? lists[A_MAX_SQS]->values[i] : TPR_VALUE_NONE;
    const tpr_value_t olds[4] = {g0, m0, v0, x0};
    for (int k = 0; k < (amsgrad ? 4 : 3); k++) {
      const tpr_type_t* t = lw_type(ctx, olds[k]);
      if (!t || t->rank != pt->rank ||
          memcmp(t->dims, pt->dims, sizeof(int64_t) * (size_t)pt->rank) != 0)
        return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                       "tensor %d of argument %d does not have param %d's shape", i,
                       k + 1, i);
    }
    tpr_value_t step = tpr_reshape(
        G, lw_cast(G, lists[A_STEPS]->values[i], TPR_DTYPE_F32), 0, NULL);
    tpr_value_t bc1 = bias_correction(G, step, beta1);
    tpr_value_t bc2_sqrt = lw_un(G, TPR_UNARY_SQRT, bias_correction(G, step, beta2));
    tpr_value_t step_size = lw_div(G, lr, bc1);

    tpr_value_t p = lw_cast(G, p0, cd), g_store;
    tpr_value_t g = unscaled_grad(ctx, g0, cd, inv_scale, &g_store);
    if (maximize) g = lw_un(G, TPR_UNARY_NEG, g);
    if (wd != 0) {
      if (decoupled)
        p = lw_mul(G, p, lw_splat(G, decay, p));
      else
        g = lw_add(G, g, lw_mul(G, p, lw_k(G, p, wd)));
    }
    tpr_value_t m = lw_cast(G, m0, cd);
    m = lw_add(G, m, lw_mul(G, lw_k(G, m, 1.0 - beta1), lw_sub(G, g, m)));
    tpr_value_t v = lw_cast(G, v0, cd);
    v = lw_add(G, lw_mul(G, v, lw_k(G, v, beta2)),
               lw_mul(G, lw_mul(G, g, g), lw_k(G, g, 1.0 - beta2)));
    tpr_value_t vmax = amsgrad ? lw_max(G, lw_cast(G, x0, cd), v) : v;
    tpr_value_t denom = lw_add(
        G, lw_div(G, lw_un(G, TPR_UNARY_SQRT, vmax), lw_splat(G, bc2_sqrt, vmax)),
        lw_k(G, vmax, eps));
    p = lw_sub(G, p, lw_div(G, lw_mul(G, lw_splat(G, step_size, m), m), denom));

    tpr_value_t news[5] = {p, g_store, m, v, vmax};
    tpr_value_t olds5[5] = {p0, g0, m0, v0, x0};
    for (int k = 0; k < (amsgrad ? 5 : 4); k++)
      set_unless_skipped(ctx, k * n + i, news[k], olds5[k], skip);
  }
  // max_exp_avg_sqs passed without amsgrad are written back unchanged.
  for (int i = 0; !amsgrad && i < n_max; i++)
    lw_set(ctx, 4 * n + i, lists[A_MAX_SQS]->values[i]);
  return lw_done(ctx);
}

static tpr_status_t lower_fused_adam(lw_ctx_t* ctx) {
  return lower_fused_adam_common(ctx, false);
}

static tpr_status_t lower_fused_adamw(lw_ctx_t* ctx) {
  return lower_fused_adam_common(ctx, true);
}

// _fused_sgd_(params, grads, momentum_buffers, weight_decay, momentum, lr,
// dampening, nesterov, maximize, is_first_step, grad_scale?, found_inf?)
// (torch.optim.SGD with fused=True). As PyTorch's kernels:
//   g = grad / grad_scale (stored back), negated when maximize, + wd * p;
//   with momentum: buf = g on the first step, else momentum * buf +
//   (1 - dampening) * g; g = g + momentum * buf (nesterov) or buf;
//   p -= lr * g.
// momentum_buffers is empty without momentum. Outputs: params, grads,
// buffers.
enum { S_PARAMS, S_GRADS, S_BUFS, S_WD, S_MOMENTUM, S_LR, S_DAMPENING, S_NESTEROV,
       S_MAXIMIZE, S_FIRST, S_GRAD_SCALE };

static tpr_status_t lower_fused_sgd(lw_ctx_t* ctx) {
  const tpr_arg_t* lists[S_BUFS + 1];
  TPR_RETURN_IF_ERROR(check_lists(ctx, S_PARAMS, S_BUFS, S_BUFS, lists));
  const int n = (int)lists[S_PARAMS]->count;
  const double wd = lw_double(ctx, S_WD, 0.0), momentum = lw_double(ctx, S_MOMENTUM, 0.0);
  const double dampening = lw_double(ctx, S_DAMPENING, 0.0);
  const bool nesterov = lw_bool(ctx, S_NESTEROV, false);
  const bool maximize = lw_bool(ctx, S_MAXIMIZE, false);
  const bool first = lw_bool(ctx, S_FIRST, false);
  const int n_bufs = (int)lists[S_BUFS]->count;
  if (momentum != 0 && n_bufs != n)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "momentum %g needs %d momentum buffers, got %d",
                   momentum, n, n_bufs);
  if (ctx->num_outs != 2 * n + n_bufs)
    return lw_fail(ctx, TPR_INTERNAL, "%d outputs for %d params", (int)ctx->num_outs, n);
  tpr_value_t lr = scalar_f32(ctx, S_LR), inv_scale, skip;
  scale_and_skip(ctx, S_GRAD_SCALE, &inv_scale, &skip);
  for (int i = 0; i < n; i++) {
    tpr_value_t p0 = lists[S_PARAMS]->values[i], g0 = lists[S_GRADS]->values[i];
    const tpr_dtype_t cd = lw_opmath(lw_type(ctx, p0)->dtype);
    tpr_value_t p = lw_cast(G, p0, cd), g_store;
    tpr_value_t g = unscaled_grad(ctx, g0, cd, inv_scale, &g_store);
    if (maximize) g = lw_un(G, TPR_UNARY_NEG, g);
    if (wd != 0) g = lw_add(G, g, lw_mul(G, p, lw_k(G, p, wd)));
    if (momentum != 0) {
      tpr_value_t b0 = lists[S_BUFS]->values[i];
      tpr_value_t buf = first ? g
                              : lw_add(G, lw_mul(G, lw_cast(G, b0, cd), lw_k(G, g, momentum)),
                                       lw_mul(G, g, lw_k(G, g, 1.0 - dampening)));
      g = nesterov ? lw_add(G, g, lw_mul(G, buf, lw_k(G, buf, momentum))) : buf;
      set_unless_skipped(ctx, 2 * n + i, buf, b0, skip);
    }
    p = lw_sub(G, p, lw_mul(G, g, lw_splat(G, lw_cast(G, lr, cd), g)));
    set_unless_skipped(ctx, i, p, p0, skip);
    set_unless_skipped(ctx, n + i, g_store, g0, skip);
  }
  return lw_done(ctx);
}

// _fused_adagrad_(params, grads, state_sums, state_steps, lr, lr_decay,
// weight_decay, eps, maximize, grad_scale?, found_inf?) (torch.optim.Adagrad
// with fused=True; the steps were already counted up by the caller). As
// PyTorch's kernels:
//   g = grad / grad_scale (stored back), negated when maximize, + wd * p;
//   clr = lr / (1 + (step - 1) * lr_decay);
//   sum += g * g;  p -= clr * g / (sqrt(sum) + eps).
// Outputs: params, grads, state_sums, and the steps (unchanged) where the
// overload writes them.
enum { D_PARAMS, D_GRADS, D_SUMS, D_STEPS, D_LR, D_LR_DECAY, D_WD, D_EPS, D_MAXIMIZE,
       D_GRAD_SCALE };

static tpr_status_t lower_fused_adagrad(lw_ctx_t* ctx) {
  const tpr_arg_t* lists[D_STEPS + 1];
  TPR_RETURN_IF_ERROR(check_lists(ctx, D_PARAMS, D_SUMS, -1, lists));
  lists[D_STEPS] = lw_arg(ctx, D_STEPS);
  const int n = (int)lists[D_PARAMS]->count;
  if (lists[D_STEPS]->kind != TPR_ARG_TENSOR_LIST || (int)lists[D_STEPS]->count != n)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "state_steps must hold one step per param");
  const bool writes_steps = ctx->num_outs == 4 * n;
  if (!writes_steps && ctx->num_outs != 3 * n)
    return lw_fail(ctx, TPR_INTERNAL, "%d outputs for %d params", (int)ctx->num_outs, n);
  const double lr_decay = lw_double(ctx, D_LR_DECAY, 0.0), wd = lw_double(ctx, D_WD, 0.0);
  const double eps = lw_double(ctx, D_EPS, 1e-10);
  const bool maximize = lw_bool(ctx, D_MAXIMIZE, false);
  tpr_value_t lr = scalar_f32(ctx, D_LR), inv_scale, skip;
  scale_and_skip(ctx, D_GRAD_SCALE, &inv_scale, &skip);
  for (int i = 0; i < n; i++) {
    tpr_value_t p0 = lists[D_PARAMS]->values[i], g0 = lists[D_GRADS]->values[i];
    tpr_value_t s0 = lists[D_SUMS]->values[i];
    const tpr_dtype_t cd = lw_opmath(lw_type(ctx, p0)->dtype);
    tpr_value_t step = tpr_reshape(
        G, lw_cast(G, lists[D_STEPS]->values[i], TPR_DTYPE_F32), 0, NULL);
    tpr_value_t clr = lw_div(
        G, lr, lw_add(G, lw_k(G, step, 1.0),
                      lw_mul(G, lw_sub(G, step, lw_k(G, step, 1.0)), lw_k(G, step, lr_decay))));
    tpr_value_t p = lw_cast(G, p0, cd), g_store;
    tpr_value_t g = unscaled_grad(ctx, g0, cd, inv_scale, &g_store);
    if (maximize) g = lw_un(G, TPR_UNARY_NEG, g);
    if (wd != 0) g = lw_add(G, g, lw_mul(G, p, lw_k(G, p, wd)));
    tpr_value_t sum = lw_add(G, lw_cast(G, s0, cd), lw_mul(G, g, g));
    tpr_value_t std = lw_add(G, lw_un(G, TPR_UNARY_SQRT, sum), lw_k(G, sum, eps));
    p = lw_sub(G, p, lw_div(G, lw_mul(G, lw_splat(G, lw_cast(G, clr, cd), g), g), std));
    set_unless_skipped(ctx, i, p, p0, skip);
    set_unless_skipped(ctx, n + i, g_store, g0, skip);
    set_unless_skipped(ctx, 2 * n + i, sum, s0, skip);
    if (writes_steps) lw_set(ctx, 3 * n + i, lists[D_STEPS]->values[i]);
  }
  return lw_done(ctx);
}

//===--- GradScaler: unscale and check, update the scale -------------------===//

// A one-element f32 tensor argument (found_inf, inv_scale, the scale) as a
// rank-0 value; |what| names it in the error.
static tpr_status_t one_f32(lw_ctx_t* ctx, int i, const char* what, tpr_value_t* out) {
  const tpr_type_t* t = lw_arg_type(ctx, i);
  if (!t || t->dtype != TPR_DTYPE_F32 || tpr_type_numel(t) != 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "%s must be a one-element float32 tensor",
                   what);
  *out = scalar_f32(ctx, i);
  return TPR_OK;
}

// _amp_foreach_non_finite_check_and_unscale_(self[], found_inf, inv_scale)
// (and its functional form): every tensor multiplied by inv_scale in its
// opmath type; found_inf set to 1 when any element of any tensor is not
// finite, left as it was otherwise. Outputs: the tensors, then found_inf.
static tpr_status_t lower_amp_unscale(lw_ctx_t* ctx) {
  const tpr_arg_t* list = lw_arg(ctx, 0);
  if (list->kind != TPR_ARG_TENSOR_LIST)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor list");
  const int n = (int)list->count;
  if (ctx->num_outs != n + 1)
    return lw_fail(ctx, TPR_INTERNAL, "%d outputs for %d tensors", (int)ctx->num_outs, n);
  tpr_value_t found, inv;
  TPR_RETURN_IF_ERROR(one_f32(ctx, 1, "found_inf", &found));
  TPR_RETURN_IF_ERROR(one_f32(ctx, 2, "inv_scale", &inv));
  tpr_value_t any = tpr_constant_i64(G, TPR_DTYPE_BOOL, 0);
  for (int i = 0; i < n; i++) {
    tpr_value_t x = list->values[i];
    const tpr_type_t* t = lw_type(ctx, x);
    if (!t || !tpr_dtype_is_float(t->dtype))
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "tensor %d must be floating point", i);
    tpr_value_t xc = lw_cast(G, x, lw_opmath(t->dtype));
    tpr_value_t bad = tpr_unary(G, TPR_UNARY_NOT, lw_un(G, TPR_UNARY_IS_FINITE, xc));
    int64_t dims[TPR_MAX_RANK];
    for (int d = 0; d < t->rank; d++) dims[d] = d;
    any = tpr_binary(G, TPR_BINARY_OR, any, tpr_reduce(G, bad, TPR_REDUCE_OR, dims, t->rank));
    tpr_value_t scale = lw_cast(G, inv, lw_opmath(t->dtype));
    lw_set(ctx, i, lw_cast(G, lw_mul(G, xc, lw_splat(G, scale, xc)), t->dtype));
  }
  tpr_value_t f = tpr_select(G, any, tpr_constant_f64(G, TPR_DTYPE_F32, 1.0), found);
  lw_set(ctx, n, lw_reshape_to(G, f, lw_arg_type(ctx, 1)));
  return lw_done(ctx);
}

// _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor,
// backoff_factor, growth_interval) (and its functional form): after an
// overflow the scale backs off and the count of good steps restarts; after
// growth_interval good steps it grows (unless that overflows f32) and the
// count restarts. Outputs: the scale, the growth tracker.
static tpr_status_t lower_amp_update_scale(lw_ctx_t* ctx) {
  if (ctx->num_outs != 2)
    return lw_fail(ctx, TPR_INTERNAL, "%d outputs, expected 2", (int)ctx->num_outs);
  tpr_value_t scale, found;
  TPR_RETURN_IF_ERROR(one_f32(ctx, 0, "the scale", &scale));
  TPR_RETURN_IF_ERROR(one_f32(ctx, 2, "found_inf", &found));
  const tpr_type_t* gt = lw_arg_type(ctx, 1);
  if (!gt || gt->dtype != TPR_DTYPE_S32 || tpr_type_numel(gt) != 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "growth_tracker must be a one-element int32 tensor");
  const double growth = lw_double(ctx, 3, 2.0), backoff = lw_double(ctx, 4, 0.5);
  const int64_t interval = lw_int(ctx, 5, 2000);
  tpr_value_t tracker = tpr_reshape(G, lw_value(ctx, 1), 0, NULL);
  tpr_value_t overflow = lw_cmpk(G, TPR_CMP_NE, found, 0.0);
  tpr_value_t good = lw_add(G, tracker, lw_k(G, tracker, 1));
  tpr_value_t grow = lw_cmpk(G, TPR_CMP_EQ, good, (double)interval);
  tpr_value_t grown = lw_mul(G, scale, lw_k(G, scale, growth));
  grown = tpr_select(G, lw_un(G, TPR_UNARY_IS_FINITE, grown), grown, scale);
  tpr_value_t zero = lw_k(G, tracker, 0);
  tpr_value_t new_scale = tpr_select(G, overflow, lw_mul(G, scale, lw_k(G, scale, backoff)),
                                     tpr_select(G, grow, grown, scale));
  tpr_value_t new_tracker = tpr_select(G, overflow, zero, tpr_select(G, grow, zero, good));
  lw_set(ctx, 0, lw_reshape_to(G, new_scale, lw_arg_type(ctx, 0)));
  lw_set(ctx, 1, lw_reshape_to(G, new_tracker, gt));
  return lw_done(ctx);
}

LW_DEFINE_TABLE(optim,
    LW_RULE("_amp_foreach_non_finite_check_and_unscale", lower_amp_unscale),
    LW_RULE("_amp_foreach_non_finite_check_and_unscale_", lower_amp_unscale),
    LW_RULE("_amp_update_scale", lower_amp_update_scale),
    LW_RULE("_amp_update_scale_", lower_amp_update_scale),
    LW_RULE("_fused_adam_", lower_fused_adam),
    LW_RULE("_fused_adam_.tensor_lr", lower_fused_adam),
    LW_RULE("_fused_adamw_", lower_fused_adamw),
    LW_RULE("_fused_adamw_.tensor_lr", lower_fused_adamw),
    LW_RULE("_fused_sgd_", lower_fused_sgd),
    LW_RULE("_fused_sgd_.tensor_lr", lower_fused_sgd),
    LW_RULE("_fused_adagrad_", lower_fused_adagrad),
    LW_RULE("_fused_adagrad_.tensor_lr", lower_fused_adagrad),
);
