// Random number rules. Every rule consumes the u64[2] generator state passed
// as a GENERATOR argument (the executor advances the generator itself) and
// draws bits with stablehlo.rng_bit_generator. The streams differ from
// PyTorch CPU's; the distributions match.
//
// Ops whose schema has no Generator (native_dropout) find the state in any
// GENERATOR argument the caller appends.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

static tpr_status_t need_state(lw_ctx_t* ctx, tpr_value_t* state) {
  *state = lw_generator(ctx);
  if (*state == TPR_VALUE_NONE)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs the generator state as a GENERATOR argument");
  return tpr_ok_status();
}

// Uniform floats in [0, 1) from the top |digits| of unsigned |bits|, in
// |acc|.
static tpr_value_t unit_from_bits(tpr_graph_t* g, tpr_value_t bits, int width,
                                  int digits, tpr_dtype_t acc) {
  bits = tpr_binary(g, TPR_BINARY_SHIFT_RIGHT_LOGICAL, bits,
                    lw_k(g, bits, width - digits));
  tpr_value_t u = tpr_convert(g, bits, acc);
  return lw_mul(g, u, lw_k(g, u, ldexp(1.0, -digits)));
}

// Significand bits a uniform draw for |out_dtype| uses.
static int uniform_digits(tpr_dtype_t out_dtype) {
  return out_dtype == TPR_DTYPE_F64    ? 53
         : out_dtype == TPR_DTYPE_BF16 ? 8
         : out_dtype == TPR_DTYPE_F16  ? 11
                                       : 24;
}

// Uniform floats in [0, 1) shaped like |shape|, in *acc (f64 for f64 outs,
// else f32). For f16/bf16 outs only as many random bits as the type's
// significand holds are used, so every value is exact in the out type and
// rounding can never produce 1 (as in PyTorch's uniform_real_distribution).
tpr_value_t lw_uniform01(lw_ctx_t* ctx, tpr_value_t state,
                         const tpr_type_t* shape, tpr_dtype_t out_dtype,
                         tpr_dtype_t* acc) {
  tpr_graph_t* g = G;
  bool wide = out_dtype == TPR_DTYPE_F64;
  *acc = wide ? TPR_DTYPE_F64 : TPR_DTYPE_F32;
  tpr_type_t bt = *shape;
  bt.dtype = wide ? TPR_DTYPE_U64 : TPR_DTYPE_U32;
  if (tpr_type_numel(shape) == 0) return lw_full(g, 0, *acc, shape);
  tpr_value_t bits, new_state;
  tpr_rng_bits(g, state, bt, &bits, &new_state);
  return unit_from_bits(g, bits, wide ? 64 : 32, uniform_digits(out_dtype), *acc);
}

static tpr_status_t float_out(lw_ctx_t* ctx) {
  if (!tpr_dtype_is_float(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating out type, got %s",
                   tpr_dtype_name(OUT->dtype));
  return tpr_ok_status();
}

// Argument |i| as a value of |like|'s type: a float or a tensor.
static tpr_value_t param(lw_ctx_t* ctx, int i, tpr_value_t like, double dflt) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  if (a->kind == TPR_ARG_TENSOR) return lw_splat(G, a->value, like);
  return lw_k(G, like, lw_double(ctx, i, dflt));
}

// uniform_(self, from=0, to=1, *, generator)
static tpr_status_t lower_uniform(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(float_out(ctx));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_dtype_t acc;
  tpr_value_t u = lw_uniform01(ctx, st, OUT, OUT->dtype, &acc);
  tpr_value_t from = param(ctx, 1, u, 0), to = param(ctx, 2, u, 1);
  return lw_ret(ctx, lw_add(G, lw_mul(G, u, lw_sub(G, to, from)), from));
}

// Standard normals by Box-Muller, in the out type's opmath type. An f32
// pair comes from the two halves of one 64-bit word, which XLA computes
// once per element; an f64 pair takes two words.
static tpr_value_t std_normal(lw_ctx_t* ctx, tpr_value_t st) {
  tpr_graph_t* g = G;
  int64_t n = tpr_type_numel(OUT);
  if (n == 0) return lw_full(g, 0, lw_opmath(OUT->dtype), OUT);
  tpr_value_t u1, u2;
  if (OUT->dtype == TPR_DTYPE_F64) {
    int64_t n_two[2] = {n, 2};
    tpr_type_t bt = tpr_type_make(TPR_DTYPE_F64, 2, n_two);
    tpr_dtype_t acc;
    tpr_value_t u = lw_uniform01(ctx, st, &bt, TPR_DTYPE_F64, &acc);
    int64_t s0[2] = {0, 0}, l0[2] = {n, 1}, s1[2] = {0, 1}, l1[2] = {n, 2};
    u1 = tpr_reshape(g, tpr_slice(g, u, s0, l0, NULL), OUT->rank, OUT->dims);
    u2 = tpr_reshape(g, tpr_slice(g, u, s1, l1, NULL), OUT->rank, OUT->dims);
  } else {
    tpr_type_t bt = *OUT;
    bt.dtype = TPR_DTYPE_U64;
    tpr_value_t w, ns;
    tpr_rng_bits(g, st, bt, &w, &ns);
    tpr_value_t hi = tpr_convert(g, tpr_binary(g, TPR_BINARY_SHIFT_RIGHT_LOGICAL, w,
                                               lw_k(g, w, 32)),
                                 TPR_DTYPE_U32);
    tpr_value_t lo = tpr_convert(g, w, TPR_DTYPE_U32);
    u1 = unit_from_bits(g, hi, 32, 24, TPR_DTYPE_F32);
    u2 = unit_from_bits(g, lo, 32, 24, TPR_DTYPE_F32);
  }
  u1 = lw_sub(g, lw_k(g, u1, 1), u1);  // (0, 1]
  tpr_value_t r = lw_un(g, TPR_UNARY_SQRT,
                        lw_mul(g, lw_k(g, u1, -2), lw_un(g, TPR_UNARY_LOG, u1)));
  tpr_value_t c = lw_un(g, TPR_UNARY_COS, lw_mul(g, u2, lw_k(g, u2, 6.28318530717958647692)));
  return lw_mul(g, r, c);
}

// normal_(self, mean=0, std=1, *, generator): parameters at 1, 2.
static tpr_status_t lower_normal_(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(float_out(ctx));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_value_t z = std_normal(ctx, st);
  return lw_ret(ctx, lw_add(G, lw_mul(G, z, param(ctx, 2, z, 1)), param(ctx, 1, z, 0)));
}

// normal.Tensor_float / float_Tensor / Tensor_Tensor / float_float: mean
// and std at 0, 1 (floats or tensors).
static tpr_status_t lower_normal(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(float_out(ctx));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_value_t z = std_normal(ctx, st);
  tpr_type_t shape = *lw_type(ctx, z);
  tpr_value_t mean = lw_is_tensor(ctx, 0) ? lw_in(ctx, 0, shape.dtype, &shape)
                                          : param(ctx, 0, z, 0);
  tpr_value_t std = lw_is_tensor(ctx, 1) ? lw_in(ctx, 1, shape.dtype, &shape)
                                         : param(ctx, 1, z, 1);
  return lw_ret(ctx, lw_add(G, lw_mul(G, z, std), mean));
}

// bernoulli(self) (p = self), bernoulli_.float / bernoulli.p (p float at 1),
// bernoulli_.Tensor / bernoulli.Tensor (p tensor at 1).
static tpr_status_t lower_bernoulli(lw_ctx_t* ctx) {
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  const tpr_arg_t* a = lw_arg(ctx, 1);
  int p_idx = (a->kind == TPR_ARG_TENSOR || a->kind == TPR_ARG_DOUBLE) ? 1 : 0;
  tpr_dtype_t acc;
  const tpr_type_t* pt = lw_arg_type(ctx, p_idx);
  tpr_dtype_t wide = (OUT->dtype == TPR_DTYPE_F64 ||
                      (pt && pt->dtype == TPR_DTYPE_F64))
                         ? TPR_DTYPE_F64
                         : TPR_DTYPE_F32;
  tpr_value_t u = lw_uniform01(ctx, st, OUT, wide, &acc);
  tpr_value_t p = param(ctx, p_idx, u, 0.5);
  return lw_ret(ctx, lw_cmp(G, TPR_CMP_LT, u, p));
}

// exponential_(self, lambd=1, *, generator): -log1p(-u) / lambd
static tpr_status_t lower_exponential(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(float_out(ctx));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_dtype_t acc;
  tpr_value_t u = lw_uniform01(ctx, st, OUT, OUT->dtype, &acc);
  tpr_value_t e = lw_un(G, TPR_UNARY_NEG, lw_un(G, TPR_UNARY_LOG1P, lw_un(G, TPR_UNARY_NEG, u)));
  return lw_ret(ctx, lw_div(G, e, param(ctx, 1, u, 1)));
}

// Largest integer random_ draws without `to` for the out dtype.
static uint64_t random_top(tpr_dtype_t d) {
  switch (d) {
    case TPR_DTYPE_BOOL: return 1;
    case TPR_DTYPE_U8: return 255;
    case TPR_DTYPE_S8: return 127;
    case TPR_DTYPE_S16: return 32767;
    case TPR_DTYPE_U16: return 65535;
    case TPR_DTYPE_S32: return 2147483647;
    case TPR_DTYPE_U32: return 4294967295u;
    case TPR_DTYPE_BF16: return 1u << 8;
    case TPR_DTYPE_F16: return 1u << 11;
    case TPR_DTYPE_F32: return 1u << 24;
    case TPR_DTYPE_F64: return 1ull << 53;
    default: return INT64_MAX;
  }
}

// random_(self), random_.to(self, to), random_.from(self, from, to?):
// integers uniform in [from, to).
static tpr_status_t lower_random(lw_ctx_t* ctx) {
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  int nint = 0;
  while (nint < 2 && lw_arg(ctx, 1 + nint)->kind == TPR_ARG_INT) nint++;
  int64_t from = 0;
  uint64_t range;
  if (nint == 2) {  // from, to
    from = lw_int(ctx, 1, 0);
    int64_t to = lw_int(ctx, 2, 0);
    if (to <= from) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "empty range");
    range = (uint64_t)to - (uint64_t)from;
  } else if (nint == 1 && ctx->num_args >= 3 &&
             ctx->args[2].kind == TPR_ARG_NONE) {  // from, to=None
    from = lw_int(ctx, 1, 0);
    range = random_top(OUT->dtype) - (uint64_t)from + 1;
  } else if (nint == 1) {  // to
    int64_t to = lw_int(ctx, 1, 0);
    if (to <= 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "empty range");
    range = (uint64_t)to;
  } else {
    range = random_top(OUT->dtype) + 1;
  }
  if (tpr_type_numel(OUT) == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_type_t bt = *OUT;
  bt.dtype = TPR_DTYPE_U64;
  tpr_value_t bits, ns;
  tpr_rng_bits(G, st, bt, &bits, &ns);
  tpr_value_t r;
  if (range == 0 || range > (uint64_t)INT64_MAX) {
    r = tpr_binary(G, TPR_BINARY_SHIFT_RIGHT_LOGICAL, bits, lw_k(G, bits, 1));
  } else {
    r = tpr_binary(G, TPR_BINARY_REM, bits,
                   tpr_broadcast_to(G, tpr_constant_i64(G, TPR_DTYPE_U64, (int64_t)range),
                                    bt.rank, bt.dims));
  }
  r = tpr_convert(G, r, TPR_DTYPE_S64);
  r = lw_add(G, r, tpr_broadcast_to(G, tpr_constant_i64(G, TPR_DTYPE_S64, from),
                                    bt.rank, bt.dims));
  return lw_ret(ctx, r);
}

// native_dropout(input, p, train?) -> (output, mask)
static tpr_status_t lower_native_dropout(lw_ctx_t* ctx) {
  double p = lw_double(ctx, 1, 0.5);
  bool train = lw_is_none(ctx, 2) ? true : lw_bool(ctx, 2, true);
  if (ctx->num_outs != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs two out types");
  const tpr_type_t* mt = &ctx->out_types[1];
  tpr_value_t x = lw_value(ctx, 0);
  if (!train || tpr_type_numel(OUT) == 0) {
    lw_set(ctx, 0, x);
    lw_set(ctx, 1, lw_full(G, 1, mt->dtype, mt));
    return lw_done(ctx);
  }
  TPR_RETURN_IF_ERROR(float_out(ctx));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_dtype_t acc;
  tpr_value_t u = lw_uniform01(ctx, st, OUT, TPR_DTYPE_F32, &acc);
  tpr_value_t keep = lw_cmpk(G, TPR_CMP_LT, u, 1.0 - p);
  double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t xv = lw_in(ctx, 0, cd, OUT);
  tpr_value_t y = lw_mul(G, lw_sel(G, keep, xv, lw_k(G, xv, 0)), lw_k(G, xv, scale));
  lw_set(ctx, 0, y);
  lw_set(ctx, 1, keep);
  return lw_done(ctx);
}

LW_DEFINE_TABLE(random,
    LW_RULE("uniform_", lower_uniform), LW_RULE("uniform", lower_uniform),
    LW_RULE("uniform.out", lower_uniform),
    LW_RULE("normal_", lower_normal_), LW_RULE("normal.out", lower_normal_),
    LW_RULE("normal_functional", lower_normal_),  // normal_ in compiled graphs
    LW_RULE("normal.Tensor_float", lower_normal),
    LW_RULE("normal.Tensor_float_out", lower_normal),
    LW_RULE("normal.float_Tensor", lower_normal),
    LW_RULE("normal.float_Tensor_out", lower_normal),
    LW_RULE("normal.Tensor_Tensor", lower_normal),
    LW_RULE("normal.Tensor_Tensor_out", lower_normal),
    LW_RULE("normal.float_float", lower_normal),
    LW_RULE("normal.float_float_out", lower_normal),
    LW_RULE("bernoulli", lower_bernoulli), LW_RULE("bernoulli.out", lower_bernoulli),
    LW_RULE("bernoulli.p", lower_bernoulli),
    LW_RULE("bernoulli.float_out", lower_bernoulli),
    LW_RULE("bernoulli.Tensor", lower_bernoulli),
    LW_RULE("bernoulli.Tensor_out", lower_bernoulli),
    LW_RULE("bernoulli_.float", lower_bernoulli),
    LW_RULE("bernoulli_.Tensor", lower_bernoulli),
    LW_RULE("exponential_", lower_exponential),
    LW_RULE("exponential", lower_exponential),
    LW_RULE("exponential.out", lower_exponential),
    LW_RULE("random_", lower_random), LW_RULE("random_.to", lower_random),
    LW_RULE("random_.from", lower_random), LW_RULE("random", lower_random),
    LW_RULE("random.out", lower_random), LW_RULE("random.to", lower_random),
    LW_RULE("random.to_out", lower_random), LW_RULE("random.from", lower_random),
    LW_RULE("random.from_out", lower_random),
    LW_RULE("native_dropout", lower_native_dropout),
    LW_RULE("native_dropout.out", lower_native_dropout));

//===--- more distributions (cauchy_, log_normal_, geometric_) -------------===//

// cauchy_(self, median=0, sigma=1): median + sigma tan(pi (u - 1/2)).
static tpr_status_t lower_cauchy(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(float_out(ctx));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_dtype_t acc;
  tpr_value_t u = lw_uniform01(ctx, st, OUT, OUT->dtype, &acc);
  tpr_value_t t = lw_un(G, TPR_UNARY_TAN, lw_mul(G, lw_sub(G, u, lw_k(G, u, 0.5)),
                                                 lw_k(G, u, 3.14159265358979323846)));
  return lw_ret(ctx, lw_add(G, lw_mul(G, t, param(ctx, 2, u, 1)), param(ctx, 1, u, 0)));
}

// log_normal_(self, mean=1, std=2): exp(mean + std z).
static tpr_status_t lower_log_normal(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(float_out(ctx));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_value_t z = std_normal(ctx, st);
  tpr_value_t y = lw_add(G, lw_mul(G, z, param(ctx, 2, z, 2)), param(ctx, 1, z, 1));
  return lw_ret(ctx, lw_un(G, TPR_UNARY_EXP, y));
}

// geometric_(self, p): ceil(log(u) / log1p(-p)) with u in (0, 1], the
// number of trials up to the first success.
static tpr_status_t lower_geometric(lw_ctx_t* ctx) {
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(need_state(ctx, &st));
  tpr_dtype_t acc;
  tpr_dtype_t wide = OUT->dtype == TPR_DTYPE_F64 ? TPR_DTYPE_F64 : TPR_DTYPE_F32;
  tpr_value_t u = lw_uniform01(ctx, st, OUT, wide, &acc);
  u = lw_sub(G, lw_k(G, u, 1), u);  // (0, 1]
  tpr_value_t p = param(ctx, 1, u, 0.5);
  tpr_value_t k = lw_un(G, TPR_UNARY_CEIL,
                        lw_div(G, lw_un(G, TPR_UNARY_LOG, u),
                               lw_un(G, TPR_UNARY_LOG1P, lw_un(G, TPR_UNARY_NEG, p))));
  return lw_ret(ctx, lw_max(G, k, lw_k(G, k, 1)));
}

LW_DEFINE_TABLE(random_more,
    LW_RULE("cauchy_", lower_cauchy), LW_RULE("cauchy", lower_cauchy),
    LW_RULE("cauchy.out", lower_cauchy),
    LW_RULE("log_normal_", lower_log_normal), LW_RULE("log_normal", lower_log_normal),
    LW_RULE("log_normal.out", lower_log_normal),
    LW_RULE("geometric_", lower_geometric), LW_RULE("geometric", lower_geometric),
    LW_RULE("geometric.out", lower_geometric));
