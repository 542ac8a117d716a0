// Elementwise rules: arithmetic, math functions, comparisons, logic, where,
// clamp. Inputs broadcast to the out shape; floats compute in PyTorch's
// opmath dtype (f32 for f16/bf16) and round once into the out dtype.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

static bool is_complex_out(const lw_ctx_t* ctx) {
  return tpr_dtype_is_complex(OUT->dtype);
}

static tpr_status_t no_complex(const lw_ctx_t* ctx) {
  return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
}

// The dtype arithmetic runs in for out dtype |d|: opmath for floats; bool
// arithmetic runs in s32 and converts back (nonzero -> true).
static tpr_dtype_t arith_dtype(tpr_dtype_t d) {
  if (d == TPR_DTYPE_BOOL) return TPR_DTYPE_S32;
  return lw_opmath(d);
}

//===--- unary math --------------------------------------------------------===//

// Float functions: integer inputs promote (out_types says to what).
static tpr_status_t unary_float(lw_ctx_t* ctx, tpr_unary_op_t op) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  return lw_ret(ctx, lw_un(G, op, x));
}

#define UNARY_FLOAT(name, op) \
  static tpr_status_t lower_##name(lw_ctx_t* ctx) { return unary_float(ctx, op); }
UNARY_FLOAT(exp, TPR_UNARY_EXP)
UNARY_FLOAT(expm1, TPR_UNARY_EXPM1)
UNARY_FLOAT(log, TPR_UNARY_LOG)
UNARY_FLOAT(log1p, TPR_UNARY_LOG1P)
UNARY_FLOAT(sqrt, TPR_UNARY_SQRT)
UNARY_FLOAT(rsqrt, TPR_UNARY_RSQRT)
UNARY_FLOAT(sin, TPR_UNARY_SIN)
UNARY_FLOAT(cos, TPR_UNARY_COS)
UNARY_FLOAT(tan, TPR_UNARY_TAN)
UNARY_FLOAT(tanh, TPR_UNARY_TANH)
UNARY_FLOAT(sigmoid, TPR_UNARY_LOGISTIC)
UNARY_FLOAT(erf, TPR_UNARY_ERF)
UNARY_FLOAT(erfc, TPR_UNARY_ERFC)
UNARY_FLOAT(erfinv, TPR_UNARY_ERF_INV)
UNARY_FLOAT(lgamma, TPR_UNARY_LGAMMA)
UNARY_FLOAT(asin, TPR_UNARY_ASIN)
UNARY_FLOAT(acos, TPR_UNARY_ACOS)
UNARY_FLOAT(atan, TPR_UNARY_ATAN)
UNARY_FLOAT(sinh, TPR_UNARY_SINH)
UNARY_FLOAT(cosh, TPR_UNARY_COSH)
UNARY_FLOAT(asinh, TPR_UNARY_ASINH)
UNARY_FLOAT(acosh, TPR_UNARY_ACOSH)
UNARY_FLOAT(atanh, TPR_UNARY_ATANH)

static tpr_status_t lower_digamma(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  return lw_ret(ctx, lw_digamma(G, lw_in(ctx, 0, cd, OUT)));
}

static tpr_status_t lower_reciprocal(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_value_t x = lw_in(ctx, 0, lw_opmath(OUT->dtype), OUT);
  return lw_ret(ctx, lw_div(G, lw_k(G, x, 1.0), x));
}

static tpr_status_t lower_exp2(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_value_t x = lw_in(ctx, 0, lw_opmath(OUT->dtype), OUT);
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_POW, lw_k(G, x, 2.0), x));
}

// log2 / log10 as log(x) * (1 / ln b).
static tpr_status_t log_base(lw_ctx_t* ctx, double inv_ln) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_value_t x = lw_in(ctx, 0, lw_opmath(OUT->dtype), OUT);
  return lw_ret(ctx, lw_mul(G, lw_un(G, TPR_UNARY_LOG, x), lw_k(G, x, inv_ln)));
}
static tpr_status_t lower_log2(lw_ctx_t* ctx) {
  return log_base(ctx, 1.4426950408889634074);
}
static tpr_status_t lower_log10(lw_ctx_t* ctx) {
  return log_base(ctx, 0.43429448190325182765);
}

// Ops exact in the out dtype.
static tpr_status_t lower_neg(lw_ctx_t* ctx) {
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  return lw_ret(ctx, lw_un(G, TPR_UNARY_NEG, x));
}

static tpr_status_t lower_abs(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (t && tpr_dtype_is_complex(t->dtype) && tpr_dtype_is_float(OUT->dtype))
    return lw_ret(ctx, lw_un(G, TPR_UNARY_ABS, lw_value(ctx, 0)));  // |z|
  if (is_complex_out(ctx) || (t && tpr_dtype_is_complex(t->dtype)))
    return no_complex(ctx);
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  if (OUT->dtype == TPR_DTYPE_BOOL) return lw_ret(ctx, x);
  return lw_ret(ctx, lw_un(G, TPR_UNARY_ABS, x));
}

static tpr_status_t lower_sign(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  if (OUT->dtype == TPR_DTYPE_BOOL) return lw_ret(ctx, x);
  tpr_value_t sg = lw_un(G, TPR_UNARY_SIGN, x);
  if (!tpr_dtype_is_float(OUT->dtype)) return lw_ret(ctx, sg);
  // PyTorch's sign of NaN is 0 ((0 < x) - (x < 0), on the CPU and CUDA);
  // stablehlo.sign gives NaN.
  return lw_ret(ctx, lw_sel(G, lw_isnan(G, x), lw_k(G, x, 0), sg));
}

// Rounding: integers are returned unchanged, as in PyTorch.
static tpr_status_t rounding(lw_ctx_t* ctx, int which) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  if (!tpr_dtype_is_float(OUT->dtype)) return lw_ret(ctx, x);
  switch (which) {
    case 0: x = lw_un(G, TPR_UNARY_FLOOR, x); break;
    case 1: x = lw_un(G, TPR_UNARY_CEIL, x); break;
    case 2: x = lw_un(G, TPR_UNARY_ROUND_NEAREST_EVEN, x); break;
    case 3: x = lw_trunc(G, x); break;
    default: x = lw_sub(G, x, lw_trunc(G, x)); break;  // frac
  }
  return lw_ret(ctx, x);
}
static tpr_status_t lower_floor(lw_ctx_t* ctx) { return rounding(ctx, 0); }
static tpr_status_t lower_ceil(lw_ctx_t* ctx) { return rounding(ctx, 1); }
static tpr_status_t lower_round(lw_ctx_t* ctx) { return rounding(ctx, 2); }
static tpr_status_t lower_trunc(lw_ctx_t* ctx) { return rounding(ctx, 3); }
static tpr_status_t lower_frac(lw_ctx_t* ctx) { return rounding(ctx, 4); }

// round.decimals(self, *, int decimals)
static tpr_status_t lower_round_decimals(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  int64_t dec = lw_int(ctx, 1, 0);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  if (!tpr_dtype_is_float(cd)) return lw_ret(ctx, x);
  bool neg = dec < 0;
  tpr_value_t p = lw_k(G, x, pow(10.0, (double)(neg ? -dec : dec)));
  tpr_value_t r;
  if (neg)
    r = lw_mul(G, lw_un(G, TPR_UNARY_ROUND_NEAREST_EVEN, lw_div(G, x, p)), p);
  else
    r = lw_div(G, lw_un(G, TPR_UNARY_ROUND_NEAREST_EVEN, lw_mul(G, x, p)), p);
  return lw_ret(ctx, r);
}

static tpr_status_t lower_bitwise_not(lw_ctx_t* ctx) {
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  return lw_ret(ctx, lw_un(G, TPR_UNARY_NOT, x));
}

static tpr_status_t lower_logical_not(lw_ctx_t* ctx) {
  tpr_value_t x = lw_value(ctx, 0);
  x = lw_cmpk(G, TPR_CMP_EQ, lw_cast(G, x, lw_opmath(lw_type(ctx, x)->dtype)), 0);
  return lw_ret(ctx, tpr_broadcast_to(G, x, OUT->rank, OUT->dims));
}

// isnan / isinf / isposinf / isneginf / isfinite: false (true) for non-floats.
static tpr_status_t float_class(lw_ctx_t* ctx, int which) {
  tpr_value_t x = lw_value(ctx, 0);
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a tensor");
  if (tpr_dtype_is_complex(t->dtype)) return no_complex(ctx);
  if (!tpr_dtype_is_float(t->dtype))
    return lw_ret(ctx, lw_full(G, which == 4, TPR_DTYPE_BOOL, OUT));
  tpr_value_t r;
  switch (which) {
    case 0: r = lw_isnan(G, x); break;
    case 1: r = lw_cmpk(G, TPR_CMP_EQ, lw_un(G, TPR_UNARY_ABS, x), INFINITY); break;
    case 2: r = lw_cmpk(G, TPR_CMP_EQ, x, INFINITY); break;
    case 3: r = lw_cmpk(G, TPR_CMP_EQ, x, -INFINITY); break;
    default: r = lw_un(G, TPR_UNARY_IS_FINITE, x); break;
  }
  return lw_ret(ctx, r);
}
static tpr_status_t lower_isnan(lw_ctx_t* ctx) { return float_class(ctx, 0); }
static tpr_status_t lower_isinf(lw_ctx_t* ctx) { return float_class(ctx, 1); }
static tpr_status_t lower_isposinf(lw_ctx_t* ctx) { return float_class(ctx, 2); }
static tpr_status_t lower_isneginf(lw_ctx_t* ctx) { return float_class(ctx, 3); }
static tpr_status_t lower_isfinite(lw_ctx_t* ctx) { return float_class(ctx, 4); }

//===--- binary arithmetic -------------------------------------------------===//

// self + alpha * other (sign -1: self - alpha * other). Alpha is optional.
static tpr_status_t add_sub(lw_ctx_t* ctx, int a_idx, int b_idx, bool sub) {
  tpr_dtype_t cd = arith_dtype(OUT->dtype);
  tpr_value_t a = lw_in(ctx, a_idx, cd, OUT);
  tpr_value_t b = lw_in(ctx, b_idx, cd, OUT);
  if (lw_is_tensor(ctx, 2)) b = lw_mul(G, b, lw_in(ctx, 2, cd, OUT));
  return lw_ret(ctx, sub ? lw_sub(G, a, b) : lw_add(G, a, b));
}
tpr_status_t lw_rule_add(lw_ctx_t* ctx) { return add_sub(ctx, 0, 1, false); }
tpr_status_t lw_rule_sub(lw_ctx_t* ctx) { return add_sub(ctx, 0, 1, true); }
// rsub(self, other, alpha) = other - alpha * self
static tpr_status_t lower_rsub(lw_ctx_t* ctx) { return add_sub(ctx, 1, 0, true); }

tpr_status_t lw_rule_mul(lw_ctx_t* ctx) {
  tpr_dtype_t cd = arith_dtype(OUT->dtype);
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = lw_in(ctx, 1, cd, OUT);
  return lw_ret(ctx, lw_mul(G, a, b));
}

// Input |i| as a divisor of the out shape; a broadcast one is made opaque
// (lw_opaque), or trunc/floor division and remainders came out one off on
// lammps-jax-pjrt-cpu 0.11.2 (div(8.375, 0.5586) truncated to 14, not 15).
static tpr_value_t divisor(lw_ctx_t* ctx, int i, tpr_dtype_t cd) {
  tpr_value_t b = lw_in(ctx, i, cd, OUT);
  const tpr_type_t* t = lw_arg_type(ctx, i);
  bool broadcast = !t || !lw_is_tensor(ctx, i) || tpr_type_numel(t) < tpr_type_numel(OUT);
  return broadcast ? lw_opaque(G, b) : b;
}

// PyTorch's div_floor for floats (c10/util/generic_math.h).
static tpr_value_t float_floor_div(tpr_graph_t* g, tpr_value_t a,
                                   tpr_value_t b) {
  tpr_value_t mod = tpr_binary(g, TPR_BINARY_REM, a, b);
  tpr_value_t div = lw_div(g, lw_sub(g, a, mod), b);
  tpr_value_t fix = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_NE, mod, 0),
                               lw_cmp(g, TPR_CMP_NE, lw_cmpk(g, TPR_CMP_LT, b, 0),
                                      lw_cmpk(g, TPR_CMP_LT, mod, 0)));
  div = lw_sel(g, fix, lw_sub(g, div, lw_k(g, div, 1)), div);
  tpr_value_t fl = lw_un(g, TPR_UNARY_FLOOR, div);
  fl = lw_sel(g, lw_cmpk(g, TPR_CMP_GT, lw_sub(g, div, fl), 0.5),
              lw_add(g, fl, lw_k(g, fl, 1)), fl);
  // div == 0: copysign(0, a / b)
  tpr_value_t q = lw_div(g, a, b);
  tpr_value_t zero = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, q, 0), lw_k(g, q, -0.0),
                            lw_k(g, q, 0.0));
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_NE, div, 0), fl, zero);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, b, 0), q, r);
}

// Integer floor division: truncating quotient, minus one where the signs
// differ and the division is inexact.
static tpr_value_t int_floor_div(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  tpr_value_t q = lw_div(g, a, b);
  if (tpr_dtype_is_unsigned_int(tpr_value_type(g, a)->dtype)) return q;
  tpr_value_t r = tpr_binary(g, TPR_BINARY_REM, a, b);
  tpr_value_t fix = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_NE, r, 0),
                               lw_cmp(g, TPR_CMP_NE, lw_cmpk(g, TPR_CMP_LT, a, 0),
                                      lw_cmpk(g, TPR_CMP_LT, b, 0)));
  return lw_sel(g, fix, lw_sub(g, q, lw_k(g, q, 1)), q);
}

// div(self, other, rounding_mode=None|"trunc"|"floor").
static tpr_status_t div_mode(lw_ctx_t* ctx, const char* mode) {
  tpr_dtype_t od = OUT->dtype;
  if (!mode) {
    tpr_dtype_t cd = lw_opmath(od);
    if (!tpr_dtype_is_float(cd) && !tpr_dtype_is_complex(cd))
      return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                     "true division needs a floating out type");
    tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = divisor(ctx, 1, cd);
    return lw_ret(ctx, lw_div(G, a, b));
  }
  if (tpr_dtype_is_complex(od)) return no_complex(ctx);
  bool floor = strcmp(mode, "floor") == 0;
  if (!floor && strcmp(mode, "trunc") != 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "unknown rounding_mode \"%s\"",
                   mode);
  tpr_dtype_t cd = arith_dtype(od);
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = divisor(ctx, 1, cd);
  tpr_value_t r;
  if (tpr_dtype_is_float(cd) && floor) {
    r = float_floor_div(G, a, b);
  } else if (tpr_dtype_is_float(cd)) {
    // The quotient is rounded to the out dtype before it is truncated, as
    // PyTorch's scalar_t division does for bfloat16 and float16.
    tpr_value_t q = lw_div(G, a, b);
    if (od != cd) q = tpr_convert(G, tpr_convert(G, q, od), cd);
    r = lw_trunc(G, q);
  } else
    r = floor ? int_floor_div(G, a, b) : lw_div(G, a, b);
  return lw_ret(ctx, r);
}

tpr_status_t lw_rule_div(lw_ctx_t* ctx) {
  return div_mode(ctx, lw_str(ctx, 2, NULL));
}
static tpr_status_t lower_floor_divide(lw_ctx_t* ctx) {
  return div_mode(ctx, "floor");
}

// Python-style remainder: the result takes the divisor's sign.
static tpr_status_t lower_remainder(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = arith_dtype(OUT->dtype);
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = divisor(ctx, 1, cd);
  tpr_value_t m = tpr_binary(G, TPR_BINARY_REM, a, b);
  tpr_value_t fix = tpr_binary(G, TPR_BINARY_AND, lw_cmpk(G, TPR_CMP_NE, m, 0),
                               lw_cmp(G, TPR_CMP_NE, lw_cmpk(G, TPR_CMP_LT, b, 0),
                                      lw_cmpk(G, TPR_CMP_LT, m, 0)));
  if (tpr_dtype_is_unsigned_int(cd)) return lw_ret(ctx, m);
  return lw_ret(ctx, lw_sel(G, fix, lw_add(G, m, b), m));
}

static tpr_status_t lower_fmod(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = arith_dtype(OUT->dtype);
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = divisor(ctx, 1, cd);
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_REM, a, b));
}

tpr_status_t lw_rule_pow(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = arith_dtype(OUT->dtype);
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = lw_in(ctx, 1, cd, OUT);
  // Both CPU plugins (xla-cpu-pjrt 0.0.1, lammps-jax-pjrt-cpu 0.11.2) flush
  // denormals in arithmetic but not in pow's tests for zero and for an
  // integer exponent: pow(-denormal, 2.5) and pow(-12.3, denormal) came out
  // NaN, not pow(-0, 2.5) = 0 and pow(-12.3, 0) = 1.
  if (tpr_dtype_is_float(cd) && tpr_plugin_workarounds()) {
    a = lw_flush_denormal(G, a);
    b = lw_flush_denormal(G, b);
  }
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_POW, a, b));
}

static tpr_status_t binary_exact(lw_ctx_t* ctx, tpr_binary_op_t op) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_value_t a = lw_in(ctx, 0, OUT->dtype, OUT);
  tpr_value_t b = lw_in(ctx, 1, OUT->dtype, OUT);
  return lw_ret(ctx, tpr_binary(G, op, a, b));
}
tpr_status_t lw_rule_maximum(lw_ctx_t* ctx) {
  return binary_exact(ctx, TPR_BINARY_MAX);
}
tpr_status_t lw_rule_minimum(lw_ctx_t* ctx) {
  return binary_exact(ctx, TPR_BINARY_MIN);
}
// fmax / fmin: a NaN operand yields the other operand.
static tpr_status_t fminmax(lw_ctx_t* ctx, tpr_binary_op_t op) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_value_t a = lw_in(ctx, 0, OUT->dtype, OUT);
  tpr_value_t b = lw_in(ctx, 1, OUT->dtype, OUT);
  tpr_value_t r = tpr_binary(G, op, a, b);
  if (!tpr_dtype_is_float(OUT->dtype)) return lw_ret(ctx, r);
  r = lw_sel(G, lw_isnan(G, b), a, r);
  return lw_ret(ctx, lw_sel(G, lw_isnan(G, a), b, r));
}
static tpr_status_t lower_fmax(lw_ctx_t* ctx) {
  return fminmax(ctx, TPR_BINARY_MAX);
}
static tpr_status_t lower_fmin(lw_ctx_t* ctx) {
  return fminmax(ctx, TPR_BINARY_MIN);
}
static tpr_status_t lower_bitwise_and(lw_ctx_t* ctx) {
  return binary_exact(ctx, TPR_BINARY_AND);
}
static tpr_status_t lower_bitwise_or(lw_ctx_t* ctx) {
  return binary_exact(ctx, TPR_BINARY_OR);
}
static tpr_status_t lower_bitwise_xor(lw_ctx_t* ctx) {
  return binary_exact(ctx, TPR_BINARY_XOR);
}

// bitwise_left_shift / bitwise_right_shift (and __lshift__ / __rshift__),
// in the result dtype as PyTorch computes them: a shift by a negative amount
// or by the width or more gives 0, or for a signed right shift the sign.
// Stated explicitly rather than left to the plugin's shift semantics.
static tpr_status_t shift(lw_ctx_t* ctx, bool left) {
  tpr_dtype_t d = OUT->dtype;
  if (!lw_is_int(d))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "shifts need an integer dtype");
  tpr_graph_t* g = G;
  tpr_value_t a = lw_in(ctx, 0, d, OUT), b = lw_in(ctx, 1, d, OUT);
  double width = 8.0 * (double)tpr_dtype_size(d);
  bool is_signed = tpr_dtype_is_signed_int(d);
  tpr_value_t ok = lw_cmpk(g, TPR_CMP_LT, b, width);
  if (is_signed) ok = tpr_binary(g, TPR_BINARY_AND, ok, lw_cmpk(g, TPR_CMP_GE, b, 0));
  if (left)
    return lw_ret(ctx, lw_sel(g, ok, tpr_binary(g, TPR_BINARY_SHIFT_LEFT, a, b), lw_k(g, a, 0)));
  if (!is_signed)
    return lw_ret(ctx, lw_sel(g, ok, tpr_binary(g, TPR_BINARY_SHIFT_RIGHT_LOGICAL, a, b),
                              lw_k(g, a, 0)));
  b = lw_sel(g, ok, b, lw_k(g, b, width - 1));
  return lw_ret(ctx, tpr_binary(g, TPR_BINARY_SHIFT_RIGHT_ARITHMETIC, a, b));
}
static tpr_status_t lower_shift_left(lw_ctx_t* ctx) { return shift(ctx, true); }
static tpr_status_t lower_shift_right(lw_ctx_t* ctx) { return shift(ctx, false); }

static tpr_status_t lower_atan2(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = lw_in(ctx, 1, cd, OUT);
  // lammps-jax-pjrt-cpu 0.11.2 and xla-cpu-pjrt 0.0.1 give NaN for
  // atan2 of two denormals (it should be atan2 of the flushed zeros: ±0 or
  // ±pi); flushing them first gives IEEE's zero cases.
  if (tpr_plugin_workarounds()) {
    a = lw_flush_denormal(G, a);
    b = lw_flush_denormal(G, b);
  }
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_ATAN2, a, b));
}

static tpr_status_t logical(lw_ctx_t* ctx, tpr_binary_op_t op) {
  tpr_value_t a = lw_nonzero(G, lw_value(ctx, 0));
  tpr_value_t b = lw_nonzero(G, lw_value(ctx, 1));
  a = tpr_broadcast_to(G, a, OUT->rank, OUT->dims);
  b = tpr_broadcast_to(G, b, OUT->rank, OUT->dims);
  return lw_ret(ctx, tpr_binary(G, op, a, b));
}
static tpr_status_t lower_logical_and(lw_ctx_t* ctx) {
  return logical(ctx, TPR_BINARY_AND);
}
static tpr_status_t lower_logical_or(lw_ctx_t* ctx) {
  return logical(ctx, TPR_BINARY_OR);
}
static tpr_status_t lower_logical_xor(lw_ctx_t* ctx) {
  return logical(ctx, TPR_BINARY_XOR);
}

//===--- comparisons -------------------------------------------------------===//

static tpr_status_t compare(lw_ctx_t* ctx, tpr_compare_dir_t dir) {
  static const int kArgs[2] = {0, 1};
  tpr_dtype_t cd = lw_result_type(ctx, kArgs, 2);
  if (tpr_dtype_is_complex(cd) && dir != TPR_CMP_EQ && dir != TPR_CMP_NE)
    return no_complex(ctx);
  if (cd == TPR_DTYPE_INVALID)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs tensor operands");
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = lw_in(ctx, 1, cd, OUT);
  return lw_ret(ctx, lw_cmp(G, dir, a, b));
}
static tpr_status_t lower_eq(lw_ctx_t* ctx) { return compare(ctx, TPR_CMP_EQ); }
static tpr_status_t lower_ne(lw_ctx_t* ctx) { return compare(ctx, TPR_CMP_NE); }
static tpr_status_t lower_lt(lw_ctx_t* ctx) { return compare(ctx, TPR_CMP_LT); }
static tpr_status_t lower_le(lw_ctx_t* ctx) { return compare(ctx, TPR_CMP_LE); }
static tpr_status_t lower_gt(lw_ctx_t* ctx) { return compare(ctx, TPR_CMP_GT); }
static tpr_status_t lower_ge(lw_ctx_t* ctx) { return compare(ctx, TPR_CMP_GE); }

//===--- selection ---------------------------------------------------------===//

// where.self(condition, self, other)
static tpr_status_t lower_where(lw_ctx_t* ctx) {
  tpr_value_t c = lw_nonzero(G, lw_value(ctx, 0));
  c = tpr_broadcast_to(G, c, OUT->rank, OUT->dims);
  tpr_value_t a = lw_in(ctx, 1, OUT->dtype, OUT);
  tpr_value_t b = lw_in(ctx, 2, OUT->dtype, OUT);
  return lw_ret(ctx, lw_sel(G, c, a, b));
}

// masked_fill(self, mask, value)
static tpr_status_t lower_masked_fill(lw_ctx_t* ctx) {
  tpr_value_t m = lw_nonzero(G, lw_value(ctx, 1));
  m = tpr_broadcast_to(G, m, OUT->rank, OUT->dims);
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  tpr_value_t v = lw_in(ctx, 2, OUT->dtype, OUT);
  return lw_ret(ctx, lw_sel(G, m, v, x));
}

// clamp(self, min?, max?): min(max(x, lo), hi); NaN propagates.
static tpr_status_t clamp(lw_ctx_t* ctx, int lo_idx, int hi_idx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = OUT->dtype;
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  if (lo_idx >= 0 && lw_is_tensor(ctx, lo_idx))
    x = lw_max(G, x, lw_in(ctx, lo_idx, cd, OUT));
  if (hi_idx >= 0 && lw_is_tensor(ctx, hi_idx))
    x = lw_min(G, x, lw_in(ctx, hi_idx, cd, OUT));
  return lw_ret(ctx, x);
}
static tpr_status_t lower_clamp(lw_ctx_t* ctx) { return clamp(ctx, 1, 2); }
tpr_status_t lw_rule_clamp_min(lw_ctx_t* ctx) { return clamp(ctx, 1, -1); }
tpr_status_t lw_rule_clamp_max(lw_ctx_t* ctx) { return clamp(ctx, -1, 1); }

//===--- compound ----------------------------------------------------------===//

// addcmul(self, t1, t2, value=1): self + value * t1 * t2
tpr_status_t lw_rule_addcmul(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = arith_dtype(OUT->dtype);
  tpr_value_t s = lw_in(ctx, 0, cd, OUT);
  tpr_value_t p = lw_mul(G, lw_in(ctx, 1, cd, OUT), lw_in(ctx, 2, cd, OUT));
  if (lw_is_tensor(ctx, 3)) p = lw_mul(G, lw_in(ctx, 3, cd, OUT), p);
  return lw_ret(ctx, lw_add(G, s, p));
}

// addcdiv(self, t1, t2, value=1): self + value * t1 / t2
tpr_status_t lw_rule_addcdiv(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t s = lw_in(ctx, 0, cd, OUT);
  tpr_value_t q = lw_div(G, lw_in(ctx, 1, cd, OUT), lw_in(ctx, 2, cd, OUT));
  if (lw_is_tensor(ctx, 3)) q = lw_mul(G, lw_in(ctx, 3, cd, OUT), q);
  return lw_ret(ctx, lw_add(G, s, q));
}

// prims::fma(a, b, c): a * b + c. Dynamo writes addcmul_, addcdiv_ and
// add_ with a scalar or tensor factor this way (for Inductor); a compiled
// graph on tpu receives it like any other op.
static tpr_status_t lower_fma(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t p = lw_mul(G, lw_in(ctx, 0, cd, OUT), lw_in(ctx, 1, cd, OUT));
  return lw_ret(ctx, lw_add(G, p, lw_in(ctx, 2, cd, OUT)));
}

// gcd(self, other) of integers by Euclid's algorithm in one loop over the
// whole tensor: (a, b) <- (b, a mod b) where b != 0, until b is 0
// everywhere (at most ~90 rounds for 64-bit values). Carried: a, b.
static void gcd_cond(tpr_graph_t* g, void* user, const tpr_value_t* a, tpr_value_t* r) {
  (void)user;
  r[0] = lw_reduce_all(g, lw_cmpk(g, TPR_CMP_NE, a[1], 0), TPR_REDUCE_OR);
}

static void gcd_body(tpr_graph_t* g, void* user, const tpr_value_t* a, tpr_value_t* r) {
  (void)user;
  tpr_value_t nz = lw_cmpk(g, TPR_CMP_NE, a[1], 0);
  tpr_value_t safe = lw_sel(g, nz, a[1], lw_k(g, a[1], 1));
  r[0] = lw_sel(g, nz, a[1], a[0]);
  r[1] = lw_sel(g, nz, tpr_binary(g, TPR_BINARY_REM, a[0], safe), a[1]);
}

static tpr_status_t gcd_lcm(lw_ctx_t* ctx, bool lcm) {
  if (!lw_is_int(OUT->dtype) || OUT->dtype == TPR_DTYPE_BOOL)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "takes integer tensors");
  tpr_graph_t* g = G;
  tpr_value_t a = lw_in(ctx, 0, OUT->dtype, OUT), b = lw_in(ctx, 1, OUT->dtype, OUT);
  tpr_value_t init[2] = {lw_un(g, TPR_UNARY_ABS, a), lw_un(g, TPR_UNARY_ABS, b)};
  tpr_value_t out[2];
  tpr_while(g, 2, init, gcd_cond, gcd_body, NULL, out);
  if (!lcm) return lw_ret(ctx, out[0]);
  // lcm = |a / gcd * b|, and 0 where the gcd is (a = b = 0).
  tpr_value_t zero = lw_cmpk(g, TPR_CMP_EQ, out[0], 0);
  tpr_value_t d = lw_sel(g, zero, lw_k(g, out[0], 1), out[0]);
  tpr_value_t r = lw_un(g, TPR_UNARY_ABS, lw_mul(g, lw_div(g, a, d), b));
  return lw_ret(ctx, lw_sel(g, zero, lw_k(g, r, 0), r));
}
static tpr_status_t lower_gcd(lw_ctx_t* ctx) { return gcd_lcm(ctx, false); }
static tpr_status_t lower_lcm(lw_ctx_t* ctx) { return gcd_lcm(ctx, true); }

// lerp(self, end, weight), with PyTorch's two-sided formula.
tpr_status_t lw_rule_lerp(lw_ctx_t* ctx) {
  if (is_complex_out(ctx)) return no_complex(ctx);
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t s = lw_in(ctx, 0, cd, OUT), e = lw_in(ctx, 1, cd, OUT);
  tpr_value_t w = lw_in(ctx, 2, cd, OUT);
  tpr_value_t d = lw_sub(G, e, s);
  tpr_value_t lo = lw_add(G, s, lw_mul(G, w, d));
  tpr_value_t hi = lw_sub(G, e, lw_mul(G, d, lw_sub(G, lw_k(G, w, 1), w)));
  tpr_value_t small = lw_cmpk(G, TPR_CMP_LT, lw_un(G, TPR_UNARY_ABS, w), 0.5);
  return lw_ret(ctx, lw_sel(G, small, lo, hi));
}

//===--- unary rule lookup (for foreach) -----------------------------------===//

static const struct {
  const char* name;
  tpr_lower_fn_t fn;
} kUnaryByName[] = {
    {"abs", lower_abs},         {"acos", lower_acos},
    {"acosh", lower_acosh},     {"asin", lower_asin},
    {"asinh", lower_asinh},     {"atan", lower_atan},
    {"atanh", lower_atanh},     {"ceil", lower_ceil},
    {"cos", lower_cos},         {"cosh", lower_cosh},
    {"erf", lower_erf},         {"erfc", lower_erfc},
    {"exp", lower_exp},         {"expm1", lower_expm1},
    {"floor", lower_floor},     {"frac", lower_frac},
    {"lgamma", lower_lgamma},   {"log", lower_log},
    {"log10", lower_log10},     {"log1p", lower_log1p},
    {"log2", lower_log2},       {"neg", lower_neg},
    {"reciprocal", lower_reciprocal}, {"round", lower_round},
    {"rsqrt", lower_rsqrt},     {"sigmoid", lower_sigmoid},
    {"sign", lower_sign},       {"sin", lower_sin},
    {"sinh", lower_sinh},       {"sqrt", lower_sqrt},
    {"tan", lower_tan},         {"tanh", lower_tanh},
    {"trunc", lower_trunc},
};

tpr_lower_fn_t lw_unary_rule(const char* base) {
  for (size_t i = 0; i < sizeof kUnaryByName / sizeof kUnaryByName[0]; i++)
    if (strcmp(kUnaryByName[i].name, base) == 0) return kUnaryByName[i].fn;
  return NULL;
}

//===--- table -------------------------------------------------------------===//

// A functional op with its in-place and out variants.
#define FIO(n, fn) LW_RULE(n, fn), LW_RULE(n "_", fn), LW_RULE(n ".out", fn)

LW_DEFINE_TABLE(elementwise,
    // unary float math
    FIO("exp", lower_exp), FIO("exp2", lower_exp2), FIO("expm1", lower_expm1),
    FIO("log", lower_log), FIO("log2", lower_log2), FIO("log10", lower_log10),
    FIO("log1p", lower_log1p), FIO("sqrt", lower_sqrt),
    FIO("rsqrt", lower_rsqrt), FIO("sin", lower_sin), FIO("cos", lower_cos),
    FIO("tan", lower_tan), FIO("tanh", lower_tanh),
    FIO("sigmoid", lower_sigmoid), FIO("erf", lower_erf),
    FIO("erfc", lower_erfc), FIO("erfinv", lower_erfinv),
    FIO("lgamma", lower_lgamma), FIO("digamma", lower_digamma),
    FIO("asin", lower_asin), FIO("acos", lower_acos), FIO("atan", lower_atan),
    FIO("sinh", lower_sinh), FIO("cosh", lower_cosh),
    FIO("asinh", lower_asinh), FIO("acosh", lower_acosh),
    FIO("atanh", lower_atanh), FIO("reciprocal", lower_reciprocal),
    // unary exact
    FIO("neg", lower_neg), FIO("abs", lower_abs), FIO("sign", lower_sign),
    FIO("floor", lower_floor), FIO("ceil", lower_ceil),
    FIO("round", lower_round), FIO("trunc", lower_trunc),
    FIO("frac", lower_frac), FIO("bitwise_not", lower_bitwise_not),
    FIO("logical_not", lower_logical_not),
    LW_RULE("round.decimals", lower_round_decimals),
    LW_RULE("round_.decimals", lower_round_decimals),
    LW_RULE("round.decimals_out", lower_round_decimals),
    LW_RULE("isnan", lower_isnan), LW_RULE("isnan.out", lower_isnan),
    LW_RULE("isinf", lower_isinf), LW_RULE("isinf.out", lower_isinf),
    LW_RULE("isposinf", lower_isposinf), LW_RULE("isposinf.out", lower_isposinf),
    LW_RULE("isneginf", lower_isneginf), LW_RULE("isneginf.out", lower_isneginf),
    LW_RULE("isfinite", lower_isfinite),
    // add / sub / mul / div
    LW_RULE("add.Tensor", lw_rule_add), LW_RULE("add_.Tensor", lw_rule_add),
    LW_RULE("add.out", lw_rule_add), LW_RULE("add.Scalar", lw_rule_add),
    LW_RULE("add_.Scalar", lw_rule_add), LW_RULE("add.Scalar_out", lw_rule_add),
    LW_RULE("sub.Tensor", lw_rule_sub), LW_RULE("sub_.Tensor", lw_rule_sub),
    LW_RULE("sub.out", lw_rule_sub), LW_RULE("sub.Scalar", lw_rule_sub),
    LW_RULE("sub_.Scalar", lw_rule_sub), LW_RULE("sub.Scalar_out", lw_rule_sub),
    LW_RULE("rsub.Tensor", lower_rsub), LW_RULE("rsub.Scalar", lower_rsub),
    LW_RULE("rsub.Tensor_out", lower_rsub), LW_RULE("rsub.Scalar_out", lower_rsub),
    LW_RULE("mul.Tensor", lw_rule_mul), LW_RULE("mul_.Tensor", lw_rule_mul),
    LW_RULE("mul.out", lw_rule_mul), LW_RULE("mul.Scalar", lw_rule_mul),
    LW_RULE("mul_.Scalar", lw_rule_mul), LW_RULE("mul.Scalar_out", lw_rule_mul),
    LW_RULE("div.Tensor", lw_rule_div), LW_RULE("div_.Tensor", lw_rule_div),
    LW_RULE("div.out", lw_rule_div), LW_RULE("div.Scalar", lw_rule_div),
    LW_RULE("div_.Scalar", lw_rule_div), LW_RULE("div.Scalar_out", lw_rule_div),
    LW_RULE("div.Tensor_mode", lw_rule_div),
    LW_RULE("div_.Tensor_mode", lw_rule_div),
    LW_RULE("div.out_mode", lw_rule_div),
    LW_RULE("div.Scalar_mode", lw_rule_div),
    LW_RULE("div_.Scalar_mode", lw_rule_div),
    LW_RULE("div.Scalar_mode_out", lw_rule_div),
    LW_RULE("floor_divide", lower_floor_divide),
    LW_RULE("floor_divide_.Tensor", lower_floor_divide),
    LW_RULE("floor_divide.out", lower_floor_divide),
    LW_RULE("floor_divide.Scalar", lower_floor_divide),
    LW_RULE("floor_divide_.Scalar", lower_floor_divide),
    LW_RULE("floor_divide.Scalar_out", lower_floor_divide),
    // remainder / fmod / pow
    LW_RULE("remainder.Tensor", lower_remainder),
    LW_RULE("remainder_.Tensor", lower_remainder),
    LW_RULE("remainder.Tensor_out", lower_remainder),
    LW_RULE("remainder.Scalar", lower_remainder),
    LW_RULE("remainder_.Scalar", lower_remainder),
    LW_RULE("remainder.Scalar_out", lower_remainder),
    LW_RULE("remainder.Scalar_Tensor", lower_remainder),
    LW_RULE("remainder.Scalar_Tensor_out", lower_remainder),
    LW_RULE("fmod.Tensor", lower_fmod), LW_RULE("fmod_.Tensor", lower_fmod),
    LW_RULE("fmod.Tensor_out", lower_fmod), LW_RULE("fmod.Scalar", lower_fmod),
    LW_RULE("fmod_.Scalar", lower_fmod), LW_RULE("fmod.Scalar_out", lower_fmod),
    LW_RULE("pow.Tensor_Tensor", lw_rule_pow),
    LW_RULE("pow.Tensor_Tensor_out", lw_rule_pow),
    LW_RULE("pow_.Tensor", lw_rule_pow), LW_RULE("pow.Tensor_Scalar", lw_rule_pow),
    LW_RULE("pow.Tensor_Scalar_out", lw_rule_pow),
    LW_RULE("pow_.Scalar", lw_rule_pow), LW_RULE("pow.Scalar", lw_rule_pow),
    LW_RULE("pow.Scalar_out", lw_rule_pow),
    // min / max / atan2 / bitwise / logical
    LW_RULE("maximum", lw_rule_maximum), LW_RULE("maximum.out", lw_rule_maximum),
    LW_RULE("minimum", lw_rule_minimum), LW_RULE("minimum.out", lw_rule_minimum),
    LW_RULE("fmax", lower_fmax), LW_RULE("fmax.out", lower_fmax),
    LW_RULE("fmin", lower_fmin), LW_RULE("fmin.out", lower_fmin),
    FIO("atan2", lower_atan2),
    LW_RULE("bitwise_and.Tensor", lower_bitwise_and),
    LW_RULE("bitwise_and_.Tensor", lower_bitwise_and),
    LW_RULE("bitwise_and.Tensor_out", lower_bitwise_and),
    LW_RULE("bitwise_and.Scalar", lower_bitwise_and),
    LW_RULE("bitwise_and_.Scalar", lower_bitwise_and),
    LW_RULE("bitwise_and.Scalar_out", lower_bitwise_and),
    LW_RULE("bitwise_and.Scalar_Tensor", lower_bitwise_and),
    LW_RULE("bitwise_and.Scalar_Tensor_out", lower_bitwise_and),
    LW_RULE("bitwise_or.Tensor", lower_bitwise_or),
    LW_RULE("bitwise_or_.Tensor", lower_bitwise_or),
    LW_RULE("bitwise_or.Tensor_out", lower_bitwise_or),
    LW_RULE("bitwise_or.Scalar", lower_bitwise_or),
    LW_RULE("bitwise_or_.Scalar", lower_bitwise_or),
    LW_RULE("bitwise_or.Scalar_out", lower_bitwise_or),
    LW_RULE("bitwise_or.Scalar_Tensor", lower_bitwise_or),
    LW_RULE("bitwise_or.Scalar_Tensor_out", lower_bitwise_or),
    LW_RULE("bitwise_xor.Tensor", lower_bitwise_xor),
    LW_RULE("bitwise_xor_.Tensor", lower_bitwise_xor),
    LW_RULE("bitwise_xor.Tensor_out", lower_bitwise_xor),
    LW_RULE("bitwise_xor.Scalar", lower_bitwise_xor),
    LW_RULE("bitwise_xor_.Scalar", lower_bitwise_xor),
    LW_RULE("bitwise_xor.Scalar_out", lower_bitwise_xor),
    LW_RULE("bitwise_xor.Scalar_Tensor", lower_bitwise_xor),
    LW_RULE("bitwise_xor.Scalar_Tensor_out", lower_bitwise_xor),
    LW_RULE("bitwise_left_shift.Tensor", lower_shift_left),
    LW_RULE("bitwise_left_shift.Tensor_out", lower_shift_left),
    LW_RULE("bitwise_left_shift.Tensor_Scalar", lower_shift_left),
    LW_RULE("bitwise_left_shift.Tensor_Scalar_out", lower_shift_left),
    LW_RULE("bitwise_left_shift.Scalar_Tensor", lower_shift_left),
    LW_RULE("bitwise_left_shift.Scalar_Tensor_out", lower_shift_left),
    LW_RULE("bitwise_left_shift_.Tensor", lower_shift_left),
    LW_RULE("bitwise_left_shift_.Tensor_Scalar", lower_shift_left),
    LW_RULE("bitwise_right_shift.Tensor", lower_shift_right),
    LW_RULE("bitwise_right_shift.Tensor_out", lower_shift_right),
    LW_RULE("bitwise_right_shift.Tensor_Scalar", lower_shift_right),
    LW_RULE("bitwise_right_shift.Tensor_Scalar_out", lower_shift_right),
    LW_RULE("bitwise_right_shift.Scalar_Tensor", lower_shift_right),
    LW_RULE("bitwise_right_shift.Scalar_Tensor_out", lower_shift_right),
    LW_RULE("bitwise_right_shift_.Tensor", lower_shift_right),
    LW_RULE("bitwise_right_shift_.Tensor_Scalar", lower_shift_right),
    LW_RULE("__lshift__.Scalar", lower_shift_left),
    LW_RULE("__lshift__.Tensor", lower_shift_left),
    LW_RULE("__ilshift__.Scalar", lower_shift_left),
    LW_RULE("__ilshift__.Tensor", lower_shift_left),
    LW_RULE("__rshift__.Scalar", lower_shift_right),
    LW_RULE("__rshift__.Tensor", lower_shift_right),
    LW_RULE("__irshift__.Scalar", lower_shift_right),
    LW_RULE("__irshift__.Tensor", lower_shift_right),
    FIO("logical_and", lower_logical_and), FIO("logical_or", lower_logical_or),
    FIO("logical_xor", lower_logical_xor),
    // comparisons
    LW_RULE("eq.Tensor", lower_eq), LW_RULE("eq_.Tensor", lower_eq),
    LW_RULE("eq.Tensor_out", lower_eq), LW_RULE("eq.Scalar", lower_eq),
    LW_RULE("eq_.Scalar", lower_eq), LW_RULE("eq.Scalar_out", lower_eq),
    LW_RULE("ne.Tensor", lower_ne), LW_RULE("ne_.Tensor", lower_ne),
    LW_RULE("ne.Tensor_out", lower_ne), LW_RULE("ne.Scalar", lower_ne),
    LW_RULE("ne_.Scalar", lower_ne), LW_RULE("ne.Scalar_out", lower_ne),
    LW_RULE("lt.Tensor", lower_lt), LW_RULE("lt_.Tensor", lower_lt),
    LW_RULE("lt.Tensor_out", lower_lt), LW_RULE("lt.Scalar", lower_lt),
    LW_RULE("lt_.Scalar", lower_lt), LW_RULE("lt.Scalar_out", lower_lt),
    LW_RULE("le.Tensor", lower_le), LW_RULE("le_.Tensor", lower_le),
    LW_RULE("le.Tensor_out", lower_le), LW_RULE("le.Scalar", lower_le),
    LW_RULE("le_.Scalar", lower_le), LW_RULE("le.Scalar_out", lower_le),
    LW_RULE("gt.Tensor", lower_gt), LW_RULE("gt_.Tensor", lower_gt),
    LW_RULE("gt.Tensor_out", lower_gt), LW_RULE("gt.Scalar", lower_gt),
    LW_RULE("gt_.Scalar", lower_gt), LW_RULE("gt.Scalar_out", lower_gt),
    LW_RULE("ge.Tensor", lower_ge), LW_RULE("ge_.Tensor", lower_ge),
    LW_RULE("ge.Tensor_out", lower_ge), LW_RULE("ge.Scalar", lower_ge),
    LW_RULE("ge_.Scalar", lower_ge), LW_RULE("ge.Scalar_out", lower_ge),
    // selection, clamp
    LW_RULE("where.self", lower_where), LW_RULE("where.self_out", lower_where),
    LW_RULE("masked_fill.Scalar", lower_masked_fill),
    LW_RULE("masked_fill_.Scalar", lower_masked_fill),
    LW_RULE("masked_fill.Scalar_out", lower_masked_fill),
    LW_RULE("masked_fill.Tensor", lower_masked_fill),
    LW_RULE("masked_fill_.Tensor", lower_masked_fill),
    LW_RULE("masked_fill.Tensor_out", lower_masked_fill),
    FIO("clamp", lower_clamp), LW_RULE("clamp.Tensor", lower_clamp),
    LW_RULE("clamp_.Tensor", lower_clamp),
    LW_RULE("clamp.Tensor_out", lower_clamp),
    FIO("clamp_min", lw_rule_clamp_min),
    LW_RULE("clamp_min.Tensor", lw_rule_clamp_min),
    LW_RULE("clamp_min_.Tensor", lw_rule_clamp_min),
    LW_RULE("clamp_min.Tensor_out", lw_rule_clamp_min),
    FIO("clamp_max", lw_rule_clamp_max),
    LW_RULE("clamp_max.Tensor", lw_rule_clamp_max),
    LW_RULE("clamp_max_.Tensor", lw_rule_clamp_max),
    LW_RULE("clamp_max.Tensor_out", lw_rule_clamp_max),
    // compound
    FIO("addcmul", lw_rule_addcmul), FIO("addcdiv", lw_rule_addcdiv),
    {"prims::fma", lower_fma},
    FIO("gcd", lower_gcd), {"prims::gcd", lower_gcd}, FIO("lcm", lower_lcm),
    LW_RULE("lerp.Scalar", lw_rule_lerp), LW_RULE("lerp_.Scalar", lw_rule_lerp),
    LW_RULE("lerp.Scalar_out", lw_rule_lerp),
    LW_RULE("lerp.Tensor", lw_rule_lerp), LW_RULE("lerp_.Tensor", lw_rule_lerp),
    LW_RULE("lerp.Tensor_out", lw_rule_lerp));
