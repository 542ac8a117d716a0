// Matrix products: mm, bmm, addmm, baddbmm, addbmm, dot, mv, addmv, addr.
// f16/bf16 operands contract into f32 (PyTorch CPU accumulates in f32) and
// the epilogue (beta * self + alpha * product) runs in f32 before one final
// rounding.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

typedef enum { MM, BMM, MV, DOT } shape_kind_t;

// The product of arguments |a| and |b| in the accumulation dtype |*acc|.
static tpr_status_t product(lw_ctx_t* ctx, int a, int b, shape_kind_t kind,
                            tpr_dtype_t* acc, tpr_value_t* out) {
  const tpr_type_t* ta = lw_arg_type(ctx, a);
  const tpr_type_t* tb = lw_arg_type(ctx, b);
  if (!ta || !tb) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs tensors");
  static const int kRanks[4][2] = {{2, 2}, {3, 3}, {2, 1}, {1, 1}};
  if (ta->rank != kRanks[kind][0] || tb->rank != kRanks[kind][1])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "operand ranks do not fit");
  tpr_dtype_t d = lw_promote(ta->dtype, tb->dtype);
  if (tpr_dtype_is_complex(d) || tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  if (d == TPR_DTYPE_BOOL)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "bool matrix products");
  *acc = lw_opmath(lw_promote(d, OUT->dtype));
  if (lw_is_int(*acc)) *acc = OUT->dtype;
  tpr_value_t x = lw_cast(G, lw_value(ctx, a), d);
  tpr_value_t y = lw_cast(G, lw_value(ctx, b), d);
  static const int64_t kZero = 0, kOne = 1, kTwo = 2;
  switch (kind) {
    case MM:   // [M,K] x [K,N]
      *out = tpr_dot_general(G, x, y, 0, NULL, NULL, 1, &kOne, &kZero, *acc);
      break;
    case BMM:  // [B,M,K] x [B,K,N]
      *out = tpr_dot_general(G, x, y, 1, &kZero, &kZero, 1, &kTwo, &kOne, *acc);
      break;
    case MV:   // [M,K] x [K]
      *out = tpr_dot_general(G, x, y, 0, NULL, NULL, 1, &kOne, &kZero, *acc);
      break;
    case DOT:  // [K] x [K]
      *out = tpr_dot_general(G, x, y, 0, NULL, NULL, 1, &kZero, &kZero, *acc);
      break;
  }
  return tpr_ok_status();
}

static tpr_status_t plain(lw_ctx_t* ctx, shape_kind_t kind) {
  tpr_dtype_t acc;
  tpr_value_t p;
  TPR_RETURN_IF_ERROR(product(ctx, 0, 1, kind, &acc, &p));
  return lw_ret(ctx, p);
}
tpr_status_t lw_rule_mm(lw_ctx_t* ctx) { return plain(ctx, MM); }
static tpr_status_t lower_bmm(lw_ctx_t* ctx) { return plain(ctx, BMM); }
static tpr_status_t lower_mv(lw_ctx_t* ctx) { return plain(ctx, MV); }
static tpr_status_t lower_dot(lw_ctx_t* ctx) { return plain(ctx, DOT); }

// beta * self + alpha * p, where beta == 0 ignores self (NaN included), as
// in BLAS and PyTorch. |s_idx| is the self argument, |sc| the index of beta
// (alpha follows it).
static tpr_value_t epilogue_value(lw_ctx_t* ctx, tpr_value_t p,
                                  tpr_dtype_t acc, int s_idx, int sc) {
  tpr_graph_t* g = G;
  tpr_type_t shape = *OUT;
  shape.dtype = acc;
  p = lw_cast_to(g, p, acc, &shape);
  if (lw_is_tensor(ctx, sc + 1))
    p = lw_mul(g, p, lw_splat(g, lw_value(ctx, sc + 1), p));
  tpr_value_t s = lw_in(ctx, s_idx, acc, &shape);
  if (lw_is_tensor(ctx, sc)) {
    tpr_value_t beta = lw_splat(g, lw_value(ctx, sc), s);
    s = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, beta, 0), lw_k(g, s, 0),
               lw_mul(g, beta, s));
  }
  return lw_add(g, s, p);
}
static tpr_status_t epilogue(lw_ctx_t* ctx, tpr_value_t p, tpr_dtype_t acc,
                             int s_idx, int sc) {
  return lw_ret(ctx, epilogue_value(ctx, p, acc, s_idx, sc));
}

// addmm(self, mat1, mat2, *, beta=1, alpha=1)
static tpr_status_t lower_addmm(lw_ctx_t* ctx) {
  tpr_dtype_t acc;
  tpr_value_t p;
  TPR_RETURN_IF_ERROR(product(ctx, 1, 2, MM, &acc, &p));
  return epilogue(ctx, p, acc, 0, 3);
}

// _addmm_activation(self, mat1, mat2, *, beta, alpha, use_gelu)
static tpr_status_t lower_addmm_activation(lw_ctx_t* ctx) {
  tpr_dtype_t acc;
  tpr_value_t p;
  TPR_RETURN_IF_ERROR(product(ctx, 1, 2, MM, &acc, &p));
  tpr_graph_t* g = G;
  tpr_value_t y = epilogue_value(ctx, p, acc, 0, 3);
  if (lw_bool(ctx, 5, false)) {
    // x Phi(x) with 2 Phi(x) = erfc(-x / sqrt 2), as gelu (rules_activation.c).
    tpr_value_t c = lw_un(g, TPR_UNARY_ERFC, lw_mul(g, y, lw_k(g, y, -0.70710678118654752440)));
    y = lw_mul(g, lw_mul(g, y, lw_k(g, y, 0.5)), c);
  } else {
    y = lw_max(g, y, lw_k(g, y, 0));
  }
  return lw_ret(ctx, y);
}

static tpr_status_t lower_baddbmm(lw_ctx_t* ctx) {
  tpr_dtype_t acc;
  tpr_value_t p;
  TPR_RETURN_IF_ERROR(product(ctx, 1, 2, BMM, &acc, &p));
  return epilogue(ctx, p, acc, 0, 3);
}

// addbmm: the batch of products summed.
static tpr_status_t lower_addbmm(lw_ctx_t* ctx) {
  tpr_dtype_t acc;
  tpr_value_t p;
  TPR_RETURN_IF_ERROR(product(ctx, 1, 2, BMM, &acc, &p));
  static const int64_t kZero = 0;
  p = tpr_reduce(G, p, TPR_REDUCE_SUM, &kZero, 1);
  return epilogue(ctx, p, acc, 0, 3);
}

static tpr_status_t lower_addmv(lw_ctx_t* ctx) {
  tpr_dtype_t acc;
  tpr_value_t p;
  TPR_RETURN_IF_ERROR(product(ctx, 1, 2, MV, &acc, &p));
  return epilogue(ctx, p, acc, 0, 3);
}

// addr(self, vec1, vec2, *, beta, alpha): outer product
static tpr_status_t lower_addr(lw_ctx_t* ctx) {
  const tpr_type_t* ta = lw_arg_type(ctx, 1);
  const tpr_type_t* tb = lw_arg_type(ctx, 2);
  if (!ta || !tb || ta->rank != 1 || tb->rank != 1 || OUT->rank != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs two vectors");
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  if (acc == TPR_DTYPE_BOOL) acc = TPR_DTYPE_S32;
  static const int64_t kD0 = 0, kD1 = 1;
  tpr_value_t a = tpr_broadcast_in_dim(G, lw_cast(G, lw_value(ctx, 1), acc), 2,
                                       OUT->dims, &kD0);
  tpr_value_t b = tpr_broadcast_in_dim(G, lw_cast(G, lw_value(ctx, 2), acc), 2,
                                       OUT->dims, &kD1);
  tpr_dtype_t od = OUT->dtype;
  if (od == acc || !tpr_dtype_is_float(od)) return epilogue(ctx, lw_mul(G, a, b), acc, 0, 3);
  // bfloat16 and float16 round after every operation, as PyTorch's scalar_t
  // arithmetic does on the CPU and CUDA: beta * self + (alpha * vec1) * vec2,
  // with beta and alpha themselves in the out dtype. (Rounding once at the
  // end differs where the terms cancel: a quarter of the result.) The
  // barrier keeps XLA from dropping the round trips as excess precision.
  tpr_graph_t* g = G;
#define ROUND(x) tpr_convert(g, tpr_optimization_barrier(g, tpr_convert(g, (x), od)), acc)
  if (lw_is_tensor(ctx, 4)) a = ROUND(lw_mul(g, a, ROUND(lw_splat(g, lw_value(ctx, 4), a))));
  tpr_value_t p = ROUND(lw_mul(g, a, b));
  tpr_type_t shape = *OUT;
  shape.dtype = acc;
  tpr_value_t self = lw_in(ctx, 0, acc, &shape);
  if (lw_is_tensor(ctx, 3)) {
    tpr_value_t beta = ROUND(lw_splat(g, lw_value(ctx, 3), self));
    self = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, beta, 0), lw_k(g, self, 0),
                  ROUND(lw_mul(g, beta, self)));
  }
#undef ROUND
  return lw_ret(ctx, lw_add(g, self, p));
}

LW_DEFINE_TABLE(linalg,
    LW_RULE("mm", lw_rule_mm), LW_RULE("mm.out", lw_rule_mm),
    LW_RULE("mm.dtype", lw_rule_mm), LW_RULE("mm.dtype_out", lw_rule_mm),
    LW_RULE("bmm", lower_bmm), LW_RULE("bmm.out", lower_bmm),
    LW_RULE("bmm.dtype", lower_bmm), LW_RULE("bmm.dtype_out", lower_bmm),
    LW_RULE("mv", lower_mv), LW_RULE("mv.out", lower_mv),
    LW_RULE("dot", lower_dot), LW_RULE("dot.out", lower_dot),
    LW_RULE("vdot", lower_dot), LW_RULE("vdot.out", lower_dot),
    LW_RULE("addmm", lower_addmm), LW_RULE("addmm_", lower_addmm),
    LW_RULE("addmm.out", lower_addmm),
    LW_RULE("_addmm_activation", lower_addmm_activation),
    LW_RULE("_addmm_activation.out", lower_addmm_activation),
    LW_RULE("baddbmm", lower_baddbmm), LW_RULE("baddbmm_", lower_baddbmm),
    LW_RULE("baddbmm.out", lower_baddbmm),
    LW_RULE("addbmm", lower_addbmm), LW_RULE("addbmm_", lower_addbmm),
    LW_RULE("addbmm.out", lower_addbmm),
    LW_RULE("addmv", lower_addmv), LW_RULE("addmv_", lower_addmv),
    LW_RULE("addmv.out", lower_addmv),
    LW_RULE("addr", lower_addr), LW_RULE("addr_", lower_addr),
    LW_RULE("addr.out", lower_addr));
