// Activations and their backward ops. Formulas follow PyTorch's CPU kernels
// and torch/_decomp/decompositions.py; everything computes in opmath (f32
// for f16/bf16) and rounds once.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

// Loads the first |n| arguments in the out shape and opmath dtype; fails for
// non-float outs.
static tpr_status_t load(lw_ctx_t* ctx, int n, tpr_value_t* v) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating out type, got %s",
                   tpr_dtype_name(OUT->dtype));
  for (int i = 0; i < n; i++) v[i] = lw_in(ctx, i, cd, OUT);
  return tpr_ok_status();
}

// Scalar argument |i| splat like |x| (default |dflt| when absent).
static tpr_value_t sarg(lw_ctx_t* ctx, int i, tpr_value_t x, double dflt) {
  if (lw_is_tensor(ctx, i)) return lw_splat(G, lw_value(ctx, i), x);
  return lw_k(G, x, lw_double(ctx, i, dflt));
}

static tpr_status_t lower_relu(lw_ctx_t* ctx) {
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  return lw_ret(ctx, lw_max(G, x, lw_k(G, x, 0)));
}

// threshold(self, threshold, value): x <= threshold ? value : x
static tpr_status_t lower_threshold(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t th = sarg(ctx, 1, x, 0), v = sarg(ctx, 2, x, 0);
  return lw_ret(ctx, lw_sel(G, lw_cmp(G, TPR_CMP_LE, x, th), v, x));
}

// threshold_backward(grad_output, self, threshold)
static tpr_status_t lower_threshold_backward(lw_ctx_t* ctx) {
  const tpr_type_t* xt = lw_arg_type(ctx, 1);
  if (!xt) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  tpr_value_t gr = lw_in(ctx, 0, OUT->dtype, OUT);
  tpr_value_t x = lw_in(ctx, 1, lw_opmath(xt->dtype), OUT);
  tpr_value_t th = sarg(ctx, 2, x, 0);
  return lw_ret(ctx, lw_sel(G, lw_cmp(G, TPR_CMP_LE, x, th), lw_k(G, gr, 0), gr));
}

// 2 Phi(x) = erfc(-x / sqrt 2), not 1 + erf(x / sqrt 2): the sum cancels for
// negative x, and on xla-cpu-pjrt 0.0.1 erf(-big) inside a fusion is not
// exactly -1, so gelu(-1e30) came out as -8.9e22 instead of -0 (and
// gelu(-inf) as -inf instead of PyTorch's NaN).
static tpr_value_t gelu_twice_cdf(tpr_graph_t* g, tpr_value_t x) {
  return lw_un(g, TPR_UNARY_ERFC, lw_mul(g, x, lw_k(g, x, -0.70710678118654752440)));
}

static tpr_value_t gelu_value(tpr_graph_t* g, tpr_value_t x, bool tanh_approx) {
  if (tanh_approx) {
    const double kBeta = 0.79788456080286535588;  // sqrt(2 / pi)
    tpr_value_t x3 = lw_mul(g, lw_mul(g, x, x), x);
    tpr_value_t inner =
        lw_mul(g, lw_k(g, x, kBeta), lw_add(g, x, lw_mul(g, lw_k(g, x, 0.044715), x3)));
    tpr_value_t t = lw_add(g, lw_k(g, x, 1), lw_un(g, TPR_UNARY_TANH, inner));
    return lw_mul(g, lw_mul(g, lw_k(g, x, 0.5), x), t);
  }
  return lw_mul(g, lw_mul(g, x, lw_k(g, x, 0.5)), gelu_twice_cdf(g, x));
}

static bool gelu_is_tanh(lw_ctx_t* ctx, int i, tpr_status_t* s) {
  const char* a = lw_str(ctx, i, "none");
  *s = tpr_ok_status();
  if (strcmp(a, "tanh") == 0) return true;
  if (strcmp(a, "none") != 0)
    *s = lw_fail(ctx, TPR_INVALID_ARGUMENT, "unknown approximate \"%s\"", a);
  return false;
}

static tpr_status_t lower_gelu(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  tpr_status_t s;
  bool t = gelu_is_tanh(ctx, 1, &s);
  TPR_RETURN_IF_ERROR(s);
  return lw_ret(ctx, gelu_value(G, x, t));
}

static tpr_status_t lower_gelu_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_status_t s;
  bool approx = gelu_is_tanh(ctx, 2, &s);
  TPR_RETURN_IF_ERROR(s);
  tpr_graph_t* g = G;
  tpr_value_t gr = v[0], x = v[1];
  if (approx) {
    const double kBeta = 1.41421356237309504880 * 1.12837916709551257390 * 0.5;
    const double kKappa = 0.044715;
    tpr_value_t x2 = lw_mul(g, x, x);
    tpr_value_t x3 = lw_mul(g, x2, x);
    tpr_value_t inner = lw_mul(g, lw_k(g, x, kBeta),
                               lw_add(g, x, lw_mul(g, lw_k(g, x, kKappa), x3)));
    tpr_value_t th = lw_un(g, TPR_UNARY_TANH, inner);
    tpr_value_t left = lw_mul(g, lw_k(g, x, 0.5), x);
    tpr_value_t right = lw_add(g, lw_k(g, x, 1), th);
    tpr_value_t left_d = lw_mul(g, lw_k(g, x, 0.5), right);
    tpr_value_t th_d = lw_sub(g, lw_k(g, x, 1), lw_mul(g, th, th));
    tpr_value_t inner_d = lw_mul(g, lw_k(g, x, kBeta),
                                 lw_add(g, lw_k(g, x, 1),
                                        lw_mul(g, lw_k(g, x, 3 * kKappa), x2)));
    tpr_value_t right_d = lw_mul(g, lw_mul(g, left, th_d), inner_d);
    return lw_ret(ctx, lw_mul(g, gr, lw_add(g, left_d, right_d)));
  }
  const double kBeta = 1.12837916709551257390 * 0.70710678118654752440 * 0.5;
  tpr_value_t cdf = lw_mul(g, lw_k(g, x, 0.5), gelu_twice_cdf(g, x));
  tpr_value_t pdf = lw_mul(g, lw_k(g, x, kBeta),
                           lw_un(g, TPR_UNARY_EXP,
                                 lw_mul(g, lw_mul(g, x, x), lw_k(g, x, -0.5))));
  return lw_ret(ctx, lw_mul(g, gr, lw_add(g, cdf, lw_mul(g, x, pdf))));
}

// silu(x) = x / (1 + exp(-x))
static tpr_status_t lower_silu(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  tpr_value_t d = lw_add(G, lw_k(G, x, 1), lw_un(G, TPR_UNARY_EXP, lw_un(G, TPR_UNARY_NEG, x)));
  return lw_ret(ctx, lw_div(G, x, d));
}

static tpr_status_t lower_silu_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_graph_t* g = G;
  tpr_value_t x = v[1];
  tpr_value_t s = lw_div(g, lw_k(g, x, 1),
                         lw_add(g, lw_k(g, x, 1), lw_un(g, TPR_UNARY_EXP, lw_un(g, TPR_UNARY_NEG, x))));
  tpr_value_t t = lw_add(g, lw_k(g, x, 1), lw_mul(g, x, lw_sub(g, lw_k(g, x, 1), s)));
  return lw_ret(ctx, lw_mul(g, lw_mul(g, v[0], s), t));
}

// sigmoid_backward(grad, y) = grad * (1 - y) * y
static tpr_status_t lower_sigmoid_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_value_t y = v[1];
  return lw_ret(ctx, lw_mul(G, v[0], lw_mul(G, lw_sub(G, lw_k(G, y, 1), y), y)));
}

// tanh_backward(grad, y) = grad * (1 - y * y)
static tpr_status_t lower_tanh_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_value_t y = v[1];
  return lw_ret(ctx, lw_mul(G, v[0], lw_sub(G, lw_k(G, y, 1), lw_mul(G, y, y))));
}

// leaky_relu(self, negative_slope=0.01)
static tpr_status_t lower_leaky_relu(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  tpr_value_t s = sarg(ctx, 1, x, 0.01);
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_GT, x, 0), x, lw_mul(G, x, s)));
}

// leaky_relu_backward(grad, self, negative_slope, self_is_result)
static tpr_status_t lower_leaky_relu_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_value_t s = sarg(ctx, 2, v[0], 0.01);
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_GT, v[1], 0), v[0],
                            lw_mul(G, v[0], s)));
}

// elu(self, alpha=1, scale=1, input_scale=1)
static tpr_status_t lower_elu(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  tpr_value_t alpha = sarg(ctx, 1, x, 1), scale = sarg(ctx, 2, x, 1);
  tpr_value_t iscale = sarg(ctx, 3, x, 1);
  tpr_value_t neg = lw_mul(G, lw_un(G, TPR_UNARY_EXPM1, lw_mul(G, x, iscale)),
                           lw_mul(G, alpha, scale));
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_LE, x, 0), neg, lw_mul(G, x, scale)));
}

// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result)
static tpr_status_t lower_elu_backward(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating out type");
  tpr_value_t gr = lw_in(ctx, 0, cd, OUT), x = lw_in(ctx, 5, cd, OUT);
  tpr_value_t negcoef = lw_mul(G, sarg(ctx, 1, x, 1), sarg(ctx, 2, x, 1));
  tpr_value_t poscoef = sarg(ctx, 2, x, 1), nic = sarg(ctx, 3, x, 1);
  bool is_result = lw_bool(ctx, 4, false);
  tpr_value_t neg;
  if (is_result)
    neg = lw_mul(G, lw_mul(G, gr, nic), lw_add(G, x, negcoef));
  else
    neg = lw_mul(G, lw_mul(G, lw_mul(G, gr, nic), negcoef),
                 lw_un(G, TPR_UNARY_EXP, lw_mul(G, x, nic)));
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_LE, x, 0), neg,
                            lw_mul(G, gr, poscoef)));
}

// softplus(self, beta=1, threshold=20)
static tpr_status_t lower_softplus(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  tpr_value_t beta = sarg(ctx, 1, x, 1), th = sarg(ctx, 2, x, 20);
  tpr_value_t xb = lw_mul(G, x, beta);
  tpr_value_t soft = lw_div(G, lw_un(G, TPR_UNARY_LOG1P, lw_un(G, TPR_UNARY_EXP, xb)), beta);
  return lw_ret(ctx, lw_sel(G, lw_cmp(G, TPR_CMP_GT, xb, th), x, soft));
}

// softplus_backward(grad, self, beta, threshold)
static tpr_status_t lower_softplus_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_value_t x = v[1];
  tpr_value_t beta = sarg(ctx, 2, x, 1), th = sarg(ctx, 3, x, 20);
  tpr_value_t xb = lw_mul(G, x, beta);
  tpr_value_t z = lw_un(G, TPR_UNARY_EXP, xb);
  tpr_value_t soft = lw_div(G, lw_mul(G, v[0], z), lw_add(G, z, lw_k(G, z, 1)));
  return lw_ret(ctx, lw_sel(G, lw_cmp(G, TPR_CMP_GT, xb, th), v[0], soft));
}

// hardtanh(self, min_val=-1, max_val=1)
static tpr_status_t lower_hardtanh(lw_ctx_t* ctx) {
  tpr_dtype_t cd = OUT->dtype;
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t lo = sarg(ctx, 1, x, -1), hi = sarg(ctx, 2, x, 1);
  return lw_ret(ctx, lw_min(G, lw_max(G, x, lo), hi));
}

// hardtanh_backward(grad, self, min_val, max_val)
static tpr_status_t lower_hardtanh_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_value_t x = v[1];
  tpr_value_t lo = sarg(ctx, 2, x, -1), hi = sarg(ctx, 3, x, 1);
  tpr_value_t out = tpr_binary(G, TPR_BINARY_OR, lw_cmp(G, TPR_CMP_LE, x, lo),
                               lw_cmp(G, TPR_CMP_GE, x, hi));
  return lw_ret(ctx, lw_sel(G, out, lw_k(G, v[0], 0), v[0]));
}

// relu6(x) = min(max(x + 3, 0), 6) helper
static tpr_value_t relu6_p3(tpr_graph_t* g, tpr_value_t x) {
  return lw_min(g, lw_max(g, lw_add(g, x, lw_k(g, x, 3)), lw_k(g, x, 0)), lw_k(g, x, 6));
}

static tpr_status_t lower_hardsigmoid(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  return lw_ret(ctx, lw_div(G, relu6_p3(G, x), lw_k(G, x, 6)));
}

static tpr_status_t lower_hardsigmoid_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_value_t x = v[1];
  tpr_value_t in = tpr_binary(G, TPR_BINARY_AND, lw_cmpk(G, TPR_CMP_GT, x, -3),
                              lw_cmpk(G, TPR_CMP_LT, x, 3));
  return lw_ret(ctx, lw_sel(G, in, lw_mul(G, v[0], lw_k(G, x, 1.0 / 6.0)),
                            lw_k(G, x, 0)));
}

static tpr_status_t lower_hardswish(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  return lw_ret(ctx, lw_div(G, lw_mul(G, x, relu6_p3(G, x)), lw_k(G, x, 6)));
}

static tpr_status_t lower_hardswish_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_value_t gr = v[0], x = v[1];
  tpr_value_t mid = lw_mul(G, gr, lw_add(G, lw_div(G, x, lw_k(G, x, 3)), lw_k(G, x, 0.5)));
  tpr_value_t r = lw_sel(G, lw_cmpk(G, TPR_CMP_LT, x, 3), mid, gr);
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_LE, x, -3), lw_k(G, x, 0), r));
}

// mish(x) = x * tanh(softplus(x))
static tpr_value_t softplus1(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t soft = lw_un(g, TPR_UNARY_LOG1P, lw_un(g, TPR_UNARY_EXP, x));
  return lw_sel(g, lw_cmpk(g, TPR_CMP_GT, x, 20), x, soft);
}

static tpr_status_t lower_mish(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  return lw_ret(ctx, lw_mul(G, x, lw_un(G, TPR_UNARY_TANH, softplus1(G, x))));
}

static tpr_status_t lower_mish_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_graph_t* g = G;
  tpr_value_t x = v[1];
  tpr_value_t t = lw_un(g, TPR_UNARY_TANH, softplus1(g, x));
  tpr_value_t s = lw_un(g, TPR_UNARY_LOGISTIC, x);
  tpr_value_t out = lw_mul(g, lw_mul(g, x, s), lw_sub(g, lw_k(g, x, 1), lw_mul(g, t, t)));
  return lw_ret(ctx, lw_mul(g, v[0], lw_add(g, t, out)));
}

// log_sigmoid_forward(self) -> (output, buffer)
static tpr_status_t lower_log_sigmoid_forward(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  tpr_value_t z = lw_un(G, TPR_UNARY_EXP, lw_un(G, TPR_UNARY_NEG, lw_un(G, TPR_UNARY_ABS, x)));
  tpr_value_t out = lw_sub(G, lw_min(G, x, lw_k(G, x, 0)), lw_un(G, TPR_UNARY_LOG1P, z));
  lw_set(ctx, 0, out);
  if (ctx->num_outs > 1) {
    const tpr_type_t* bt = &ctx->out_types[1];
    lw_set(ctx, 1, tpr_type_numel(bt) == tpr_type_numel(OUT)
                       ? z
                       : lw_full(G, 0, bt->dtype, bt));
  }
  return lw_done(ctx);
}

// log_sigmoid_backward(grad, self, buffer)
static tpr_status_t lower_log_sigmoid_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  tpr_graph_t* g = G;
  tpr_value_t x = v[1];
  tpr_value_t neg = lw_cmpk(g, TPR_CMP_LT, x, 0);
  tpr_value_t maxd = lw_sel(g, neg, lw_k(g, x, 1), lw_k(g, x, 0));
  tpr_value_t sign = lw_sel(g, neg, lw_k(g, x, 1), lw_k(g, x, -1));
  tpr_value_t z = lw_un(g, TPR_UNARY_EXP, lw_un(g, TPR_UNARY_NEG, lw_un(g, TPR_UNARY_ABS, x)));
  tpr_value_t f = lw_div(g, z, lw_add(g, lw_k(g, z, 1), z));
  return lw_ret(ctx, lw_mul(g, v[0], lw_sub(g, maxd, lw_mul(g, sign, f))));
}

// glu(self, dim=-1) = a * sigmoid(b) over the two halves of dim
static tpr_status_t lower_glu(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || t->rank == 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs rank >= 1");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, -1), t->rank);
  if (dim < 0 || t->dims[dim] % 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad dim or odd size");
  tpr_type_t full = *t;
  full.dtype = lw_opmath(OUT->dtype);
  tpr_value_t x = lw_in(ctx, 0, full.dtype, &full);
  int64_t start[TPR_MAX_RANK] = {0}, limit[TPR_MAX_RANK];
  memcpy(limit, t->dims, sizeof limit);
  int64_t h = t->dims[dim] / 2;
  limit[dim] = h;
  tpr_value_t a = tpr_slice(G, x, start, limit, NULL);
  start[dim] = h;
  limit[dim] = 2 * h;
  tpr_value_t b = tpr_slice(G, x, start, limit, NULL);
  return lw_ret(ctx, lw_mul(G, a, lw_un(G, TPR_UNARY_LOGISTIC, b)));
}

// logit(self, eps=None)
static tpr_status_t lower_logit(lw_ctx_t* ctx) {
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(load(ctx, 1, &x));
  if (!lw_is_none(ctx, 1)) {
    double eps = lw_double(ctx, 1, 0);
    x = lw_min(G, lw_max(G, x, lw_k(G, x, eps)), lw_k(G, x, 1 - eps));
  }
  return lw_ret(ctx, lw_un(G, TPR_UNARY_LOG, lw_div(G, x, lw_sub(G, lw_k(G, x, 1), x))));
}

// _prelu_kernel(self, weight): x > 0 ? x : weight * x
static tpr_status_t lower_prelu(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_GT, v[0], 0), v[0],
                            lw_mul(G, v[1], v[0])));
}

// native_dropout_backward(grad_output, mask, scale)
static tpr_status_t lower_dropout_backward(lw_ctx_t* ctx) {
  tpr_value_t v[2];
  TPR_RETURN_IF_ERROR(load(ctx, 2, v));
  return lw_ret(ctx, lw_mul(G, v[0], lw_mul(G, v[1], sarg(ctx, 2, v[0], 1))));
}

#define FIO(n, fn) LW_RULE(n, fn), LW_RULE(n "_", fn), LW_RULE(n ".out", fn)
#define BWD(n, fn) LW_RULE(n, fn), LW_RULE(n ".grad_input", fn)

LW_DEFINE_TABLE(activation,
    LW_RULE("relu", lower_relu), LW_RULE("relu_", lower_relu),
    LW_RULE("relu.out", lower_relu),
    FIO("threshold", lower_threshold),
    BWD("threshold_backward", lower_threshold_backward),
    FIO("gelu", lower_gelu), BWD("gelu_backward", lower_gelu_backward),
    FIO("silu", lower_silu), BWD("silu_backward", lower_silu_backward),
    BWD("sigmoid_backward", lower_sigmoid_backward),
    BWD("tanh_backward", lower_tanh_backward),
    FIO("leaky_relu", lower_leaky_relu),
    BWD("leaky_relu_backward", lower_leaky_relu_backward),
    FIO("elu", lower_elu), BWD("elu_backward", lower_elu_backward),
    LW_RULE("softplus", lower_softplus), LW_RULE("softplus.out", lower_softplus),
    BWD("softplus_backward", lower_softplus_backward),
    FIO("hardtanh", lower_hardtanh),
    BWD("hardtanh_backward", lower_hardtanh_backward),
    FIO("hardsigmoid", lower_hardsigmoid),
    BWD("hardsigmoid_backward", lower_hardsigmoid_backward),
    FIO("hardswish", lower_hardswish),
    LW_RULE("hardswish_backward", lower_hardswish_backward),
    LW_RULE("hardswish_backward.out", lower_hardswish_backward),
    FIO("mish", lower_mish), LW_RULE("mish_backward", lower_mish_backward),
    LW_RULE("log_sigmoid_forward", lower_log_sigmoid_forward),
    LW_RULE("log_sigmoid_forward.output", lower_log_sigmoid_forward),
    BWD("log_sigmoid_backward", lower_log_sigmoid_backward),
    LW_RULE("glu", lower_glu), LW_RULE("glu.out", lower_glu),
    FIO("logit", lower_logit),
    LW_RULE("_prelu_kernel", lower_prelu),
    LW_RULE("native_dropout_backward", lower_dropout_backward),
    LW_RULE("native_dropout_backward.out", lower_dropout_backward));
