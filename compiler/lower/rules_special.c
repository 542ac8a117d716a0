// Elementwise math beyond the basics: sign and float-class helpers
// (copysign, signbit, heaviside, nextafter, frexp, nan_to_num), log-sum
// forms (logaddexp, xlogy, xlog1py, entr), special functions (sinc, i0, i0e,
// i1, i1e, polygamma, zeta, erfcx, ndtri, log_ndtr), complex numbers
// (complex, polar, sgn, angle, conj_physical) and NaN-aware reductions.
// Floats compute in PyTorch's opmath dtype and round once into the out
// dtype, as in rules_elementwise.c. Formulas follow PyTorch's CPU kernels
// (aten/src/ATen/native/Math.h), including the Cephes Chebyshev tables.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

static tpr_status_t need_float(lw_ctx_t* ctx, tpr_dtype_t cd) {
  if (tpr_dtype_is_complex(cd) || tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  return tpr_ok_status();
}

// Sign bit of a float (also of -0.0 and -NaN), as bool.
static tpr_value_t signbit_of(tpr_graph_t* g, tpr_value_t x) {
  tpr_dtype_t d = tpr_value_type(g, x)->dtype;
  if (d == TPR_DTYPE_BOOL || tpr_dtype_is_unsigned_int(d))
    return tpr_compare(g, TPR_CMP_NE, x, x);  // false
  if (!tpr_dtype_is_float(d)) return lw_cmpk(g, TPR_CMP_LT, x, 0);
  size_t sz = tpr_dtype_size(d);
  tpr_dtype_t id = sz == 8 ? TPR_DTYPE_S64 : sz == 4 ? TPR_DTYPE_S32
                   : sz == 2 ? TPR_DTYPE_S16 : TPR_DTYPE_S8;
  return lw_cmpk(g, TPR_CMP_LT, tpr_bitcast_convert(g, x, id), 0);
}

//===--- sign, class, representation ---------------------------------------===//

// copysign(self, other): |self| with other's sign bit.
static tpr_status_t lower_copysign(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t a = lw_un(G, TPR_UNARY_ABS, lw_in(ctx, 0, cd, OUT));
  tpr_value_t b = lw_in(ctx, 1, cd, OUT);
  return lw_ret(ctx, lw_sel(G, signbit_of(G, b), lw_un(G, TPR_UNARY_NEG, a), a));
}

static tpr_status_t lower_signbit(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || tpr_dtype_is_complex(t->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a real tensor");
  return lw_ret(ctx, signbit_of(G, lw_value(ctx, 0)));
}

// heaviside(self, values): values where self == 0, else self > 0.
static tpr_status_t lower_heaviside(lw_ctx_t* ctx) {
  if (tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  tpr_value_t v = lw_in(ctx, 1, OUT->dtype, OUT);
  tpr_value_t pos = lw_cast(G, lw_cmpk(G, TPR_CMP_GT, x, 0), OUT->dtype);
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, x, 0), v, pos));
}

static tpr_status_t lower_nextafter(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_float(ctx, OUT->dtype));
  tpr_value_t a = lw_in(ctx, 0, OUT->dtype, OUT);
  tpr_value_t b = lw_in(ctx, 1, OUT->dtype, OUT);
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_NEXTAFTER, a, b));
}

// frexp(self) -> (mantissa in [0.5, 1), s32 exponent); 0, inf and NaN give
// (self, 0). Computed in f64 (exact for every narrower float); the scale
// 2^-e is applied in two halves so subnormal f64 inputs do not overflow it.
static tpr_status_t lower_frexp(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_float(ctx, OUT->dtype));
  if (ctx->num_outs != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs mantissa and exponent");
  // Denormals of the input's own dtype are flushed first, as the device's
  // arithmetic flushes them (a f32 denormal is a normal f64: its exponent
  // came out of a log of the flushed zero).
  tpr_value_t x = lw_cast(G, lw_flush_denormal(G, lw_in(ctx, 0, OUT->dtype, OUT)),
                          TPR_DTYPE_F64);
  tpr_value_t ax = lw_un(G, TPR_UNARY_ABS, x);
  tpr_value_t special = tpr_binary(
      G, TPR_BINARY_OR, lw_cmpk(G, TPR_CMP_EQ, x, 0),
      lw_un(G, TPR_UNARY_NOT, lw_un(G, TPR_UNARY_IS_FINITE, x)));
  tpr_value_t safe = lw_sel(G, special, lw_k(G, x, 1), ax);
  tpr_value_t e = lw_add(G, lw_un(G, TPR_UNARY_FLOOR,
                                  lw_mul(G, lw_un(G, TPR_UNARY_LOG, safe),
                                         lw_k(G, x, 1.4426950408889634074))),
                         lw_k(G, x, 1));
  for (int pass = 0; pass < 2; pass++) {  // fix log2 rounding at the edges
    tpr_value_t h = lw_un(G, TPR_UNARY_FLOOR, lw_mul(G, e, lw_k(G, e, 0.5)));
    tpr_value_t two = lw_k(G, e, 2);
    tpr_value_t m = lw_mul(G, lw_mul(G, safe, tpr_binary(G, TPR_BINARY_POW, two,
                                                         lw_un(G, TPR_UNARY_NEG, h))),
                           tpr_binary(G, TPR_BINARY_POW, two,
                                      lw_un(G, TPR_UNARY_NEG, lw_sub(G, e, h))));
    e = lw_sel(G, lw_cmpk(G, TPR_CMP_GE, m, 1), lw_add(G, e, lw_k(G, e, 1)),
               lw_sel(G, lw_cmpk(G, TPR_CMP_LT, m, 0.5), lw_sub(G, e, lw_k(G, e, 1)), e));
  }
  tpr_value_t h = lw_un(G, TPR_UNARY_FLOOR, lw_mul(G, e, lw_k(G, e, 0.5)));
  tpr_value_t two = lw_k(G, e, 2);
  tpr_value_t m = lw_mul(G, lw_mul(G, x, tpr_binary(G, TPR_BINARY_POW, two,
                                                    lw_un(G, TPR_UNARY_NEG, h))),
                         tpr_binary(G, TPR_BINARY_POW, two,
                                    lw_un(G, TPR_UNARY_NEG, lw_sub(G, e, h))));
  lw_set(ctx, 0, lw_sel(G, special, x, m));
  lw_set(ctx, 1, lw_sel(G, special, lw_k(G, e, 0), e));
  return lw_done(ctx);
}

// Largest finite value of a float dtype.
static double float_max(tpr_dtype_t d) {
  switch (d) {
    case TPR_DTYPE_F16: return 65504.0;
    case TPR_DTYPE_BF16: return 3.38953138925153547590e38;
    case TPR_DTYPE_F32: return 3.40282346638528859812e38;
    default: return 1.79769313486231570815e308;
  }
}

// nan_to_num(self, nan=None, posinf=None, neginf=None), in the out dtype.
static tpr_status_t lower_nan_to_num(lw_ctx_t* ctx) {
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  if (tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  if (!tpr_dtype_is_float(OUT->dtype)) return lw_ret(ctx, x);
  double big = float_max(OUT->dtype);
  tpr_value_t nan = lw_k(G, x, lw_double(ctx, 1, 0));
  tpr_value_t pinf = lw_k(G, x, lw_double(ctx, 2, big));
  tpr_value_t ninf = lw_k(G, x, lw_double(ctx, 3, -big));
  x = lw_sel(G, lw_isnan(G, x), nan, x);
  x = lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, x, INFINITY), pinf, x);
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, x, -INFINITY), ninf, x));
}

// hypot(a, b) = M sqrt(1 + (m / M)^2), M = max(|a|, |b|), m the other;
// inf if either is inf (even with a NaN), as std::hypot.
static tpr_status_t lower_hypot(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t a = lw_un(G, TPR_UNARY_ABS, lw_in(ctx, 0, cd, OUT));
  tpr_value_t b = lw_un(G, TPR_UNARY_ABS, lw_in(ctx, 1, cd, OUT));
  tpr_value_t hi = lw_max(G, a, b), lo = lw_min(G, a, b);
  tpr_value_t safe = lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, hi, 0), lw_k(G, hi, 1), hi);
  tpr_value_t q = lw_div(G, lo, safe);
  tpr_value_t r = lw_mul(G, hi, lw_un(G, TPR_UNARY_SQRT,
                                      lw_add(G, lw_k(G, q, 1), lw_mul(G, q, q))));
  tpr_value_t inf = tpr_binary(G, TPR_BINARY_OR, lw_cmpk(G, TPR_CMP_EQ, a, INFINITY),
                               lw_cmpk(G, TPR_CMP_EQ, b, INFINITY));
  return lw_ret(ctx, lw_sel(G, inf, lw_k(G, r, INFINITY), r));
}

//===--- log-sum forms -----------------------------------------------------===//

// logaddexp(a, b) = max + log1p(exp(-|a - b|)); equal infinities give a.
// base2: the same in base 2.
static tpr_status_t logaddexp(lw_ctx_t* ctx, bool base2) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = lw_in(ctx, 1, cd, OUT);
  tpr_value_t m = lw_max(G, a, b);
  tpr_value_t d = lw_un(G, TPR_UNARY_NEG, lw_un(G, TPR_UNARY_ABS, lw_sub(G, a, b)));
  tpr_value_t r;
  if (base2) {
    tpr_value_t p = tpr_binary(G, TPR_BINARY_POW, lw_k(G, d, 2), d);
    r = lw_add(G, m, lw_mul(G, lw_un(G, TPR_UNARY_LOG1P, p),
                            lw_k(G, d, 1.4426950408889634074)));
  } else {
    r = lw_add(G, m, lw_un(G, TPR_UNARY_LOG1P, lw_un(G, TPR_UNARY_EXP, d)));
  }
  tpr_value_t same_inf = tpr_binary(
      G, TPR_BINARY_AND, lw_cmp(G, TPR_CMP_EQ, a, b),
      lw_cmpk(G, TPR_CMP_EQ, lw_un(G, TPR_UNARY_ABS, a), INFINITY));
  return lw_ret(ctx, lw_sel(G, same_inf, a, r));
}
static tpr_status_t lower_logaddexp(lw_ctx_t* ctx) { return logaddexp(ctx, false); }
static tpr_status_t lower_logaddexp2(lw_ctx_t* ctx) { return logaddexp(ctx, true); }

// xlogy(x, y) = x * log(y) (log1p for xlog1py); 0 where x == 0 unless y is
// NaN.
static tpr_status_t xlog(lw_ctx_t* ctx, tpr_unary_op_t op) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT), y = lw_in(ctx, 1, cd, OUT);
  tpr_value_t r = lw_mul(G, x, lw_un(G, op, y));
  r = lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, x, 0), lw_k(G, x, 0), r);
  return lw_ret(ctx, lw_sel(G, lw_isnan(G, y), y, r));
}
static tpr_status_t lower_xlogy(lw_ctx_t* ctx) { return xlog(ctx, TPR_UNARY_LOG); }
static tpr_status_t lower_xlog1py(lw_ctx_t* ctx) { return xlog(ctx, TPR_UNARY_LOG1P); }

// entr(x) = -x log x for x > 0, 0 at 0, -inf below, NaN for NaN.
static tpr_status_t lower_entr(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t r = lw_un(G, TPR_UNARY_NEG, lw_mul(G, x, lw_un(G, TPR_UNARY_LOG, x)));
  r = lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, x, 0), lw_k(G, x, 0), r);
  r = lw_sel(G, lw_cmpk(G, TPR_CMP_LT, x, 0), lw_k(G, x, -INFINITY), r);
  return lw_ret(ctx, r);
}

// logit_backward(grad_output, self, eps=None): grad / (x (1 - x)) inside
// [eps, 1 - eps] (or [0, 1] without eps, NaN outside), 0 outside with eps.
static tpr_status_t lower_logit_backward(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t go = lw_in(ctx, 0, cd, OUT), x = lw_in(ctx, 1, cd, OUT);
  bool has_eps = lw_arg(ctx, 2)->kind == TPR_ARG_DOUBLE;
  double eps = has_eps ? lw_double(ctx, 2, 0) : 0;
  tpr_value_t r = lw_div(G, go, lw_mul(G, x, lw_sub(G, lw_k(G, x, 1), x)));
  tpr_value_t out = tpr_binary(G, TPR_BINARY_OR, lw_cmpk(G, TPR_CMP_LT, x, eps),
                               lw_cmpk(G, TPR_CMP_GT, x, 1 - eps));
  return lw_ret(ctx, lw_sel(G, out, lw_k(G, x, has_eps ? 0 : NAN), r));
}

//===--- special functions -------------------------------------------------===//

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
static tpr_status_t lower_sinc(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t px = lw_mul(G, x, lw_k(G, x, 3.14159265358979323846));
  tpr_value_t r = lw_div(G, lw_un(G, TPR_UNARY_SIN, px), px);
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_EQ, x, 0), lw_k(G, x, 1), r));
}

// Cephes chbevl: sum of Chebyshev series |c| at x.
static tpr_value_t chbevl(tpr_graph_t* g, tpr_value_t x, const double* c,
                         int n) {
  tpr_value_t b0 = lw_k(g, x, c[0]), b1 = lw_k(g, x, 0), b2 = b1;
  for (int i = 1; i < n; i++) {
    b2 = b1;
    b1 = b0;
    b0 = lw_add(g, lw_sub(g, lw_mul(g, x, b1), b2), lw_k(g, x, c[i]));
  }
  return lw_mul(g, lw_sub(g, b0, b2), lw_k(g, x, 0.5));
}

// Cephes coefficients for exp(-|x|) I0(x) on [0, 8] and sqrt(x) exp(-x)
// I0(x) beyond 8 (the tables PyTorch's calc_i0 / calc_i0e use).
static const double kI0A[30] = {
    -4.41534164647933937950e-18, 3.33079451882223809783e-17,
    -2.43127984654795469359e-16, 1.71539128555513303061e-15,
    -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12,
    -1.72682629144155570723e-11, 9.67580903537323691224e-11,
    -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8,  6.04699502254191894932e-8,
    -2.67079385394061173391e-7,  1.11738753912010371815e-6,
    -4.41673835845875056359e-6,  1.64484480707288970893e-5,
    -5.75419501008210370398e-5,  1.88502885095841655729e-4,
    -5.76375574538582365885e-4,  1.63947561694133579842e-3,
    -4.32430999505057594430e-3,  1.05464603945949983183e-2,
    -2.37374148058994688156e-2,  4.93052842396707084878e-2,
    -9.49010970480476444210e-2,  1.71620901522208775349e-1,
    -3.04682672343198398683e-1,  6.76795274409476084995e-1};
static const double kI0B[25] = {
    -7.23318048787475395456e-18, -4.83050448594418207126e-18,
    4.46562142029675999901e-17,  3.46122286769746109310e-17,
    -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15,  3.81168066935262242075e-15,
    -9.55484669882830764870e-15, -4.15056934728722208663e-14,
    1.54008621752140982691e-14,  3.85277838274214270114e-13,
    7.18012445138366623367e-13,  -1.79417853150680611778e-12,
    -1.32158118404477131188e-11, -3.14991652796324136454e-11,
    1.18891471078464383424e-11,  4.94060238822496958910e-10,
    3.39623202570838634515e-9,   2.26666899049817806459e-8,
    2.04891858946906374183e-7,   2.89137052083475648297e-6,
    6.88975834691682398426e-5,   3.36911647825569408990e-3,
    8.04490411014108831608e-1};

// exp(-|x|) I0(x), from the two Chebyshev tables.
static tpr_value_t i0e_of(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t ax = lw_un(g, TPR_UNARY_ABS, x);
  tpr_value_t lo = chbevl(g, lw_sub(g, lw_mul(g, ax, lw_k(g, x, 0.5)), lw_k(g, x, 2)),
                          kI0A, 30);
  tpr_value_t safe = lw_max(g, ax, lw_k(g, x, 8));
  tpr_value_t hi = lw_div(g, chbevl(g, lw_sub(g, lw_div(g, lw_k(g, x, 32), safe),
                                              lw_k(g, x, 2)),
                                    kI0B, 25),
                          lw_un(g, TPR_UNARY_SQRT, safe));
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LE, ax, 8), lo, hi);
}

static tpr_status_t bessel_i(lw_ctx_t* ctx, int which) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT), r;
  tpr_value_t ex = lw_un(G, TPR_UNARY_EXP, lw_un(G, TPR_UNARY_ABS, x));
  switch (which) {
    case 0: r = lw_mul(G, i0e_of(G, x), ex); break;  // i0
    case 1: r = i0e_of(G, x); break;                  // i0e
    case 2: r = lw_mul(G, lw_un(G, TPR_UNARY_BESSEL_I1E, x), ex); break;  // i1
    default: r = lw_un(G, TPR_UNARY_BESSEL_I1E, x); break;                // i1e
  }
  return lw_ret(ctx, r);
}
static tpr_status_t lower_i0(lw_ctx_t* ctx) { return bessel_i(ctx, 0); }
static tpr_status_t lower_i0e(lw_ctx_t* ctx) { return bessel_i(ctx, 1); }
static tpr_status_t lower_i1(lw_ctx_t* ctx) { return bessel_i(ctx, 2); }
static tpr_status_t lower_i1e(lw_ctx_t* ctx) { return bessel_i(ctx, 3); }

// Terms of the Hurwitz zeta summed by hand before chlo.zeta takes over:
// chlo.zeta is accurate for q > 0 only, so negative q is shifted up by
// zeta(s, q) = sum_{k<m} (q + k)^-s + zeta(s, q + m), m = ceil(1 - q), in a
// loop to the largest m of the tensor (the CPU kernel's own loop runs as
// far, but per element: here every element runs the tensor's longest
// shift). Shifts past kZetaShiftMax give NaN rather than a loop that long
// over every element (a 1029x917 tensor with one q of -1e6 did not finish).
#define kZetaShiftMax 256.0

// PyTorch's kernel (Cephes) in the order it decides: s < 1 is NaN, s = 1
// and the poles of q (non-positive integers, -inf included) +inf. chlo.zeta
// and the shifted sum gave NaN at the poles, so polygamma(2, -inf) was NaN,
// not the CPU's -inf.
static tpr_value_t zeta_domain(tpr_graph_t* g, tpr_value_t s, tpr_value_t q, tpr_value_t r) {
  tpr_value_t pole = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_LE, q, 0),
                                lw_cmp(g, TPR_CMP_EQ, q, lw_un(g, TPR_UNARY_FLOOR, q)));
  pole = tpr_binary(g, TPR_BINARY_OR, pole, lw_cmpk(g, TPR_CMP_EQ, s, 1));
  r = lw_sel(g, pole, lw_k(g, q, INFINITY), r);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LT, s, 1), lw_k(g, q, NAN), r);
}

// The shift loop. Carried: k (s64), the last k (s64), s, q, m, sum.
enum { ZS_K, ZS_LAST, ZS_S, ZS_Q, ZS_M, ZS_SUM, ZS_COUNT };

static void zeta_shift_cond(tpr_graph_t* g, void* user, const tpr_value_t* a, tpr_value_t* r) {
  (void)user;
  r[0] = lw_cmp(g, TPR_CMP_LT, a[ZS_K], a[ZS_LAST]);
}

static void zeta_shift_body(tpr_graph_t* g, void* user, const tpr_value_t* a, tpr_value_t* r) {
  (void)user;
  tpr_value_t kf = lw_splat(g, a[ZS_K], a[ZS_Q]);
  tpr_value_t t = tpr_binary(g, TPR_BINARY_POW, lw_add(g, a[ZS_Q], kf),
                             lw_un(g, TPR_UNARY_NEG, a[ZS_S]));
  r[ZS_SUM] = lw_add(g, a[ZS_SUM], lw_sel(g, lw_cmp(g, TPR_CMP_GT, a[ZS_M], kf), t,
                                          lw_k(g, t, 0)));
  r[ZS_K] = lw_add(g, a[ZS_K], tpr_constant_i64(g, TPR_DTYPE_S64, 1));
  for (int i = ZS_LAST; i < ZS_SUM; i++) r[i] = a[i];
}

static tpr_value_t zeta_any_q(tpr_graph_t* g, tpr_value_t s, tpr_value_t q) {
  tpr_value_t m = lw_max(g, lw_un(g, TPR_UNARY_CEIL, lw_sub(g, lw_k(g, q, 1), q)),
                         lw_k(g, q, 0));
  tpr_value_t too_far = lw_cmpk(g, TPR_CMP_GT, m, kZetaShiftMax);
  m = lw_sel(g, too_far, lw_k(g, m, 0), m);  // NaN below; no loop that long
  m = lw_sel(g, lw_isnan(g, m), lw_k(g, m, 0), m);
  tpr_value_t last = lw_cast(g, lw_reduce_all(g, m, TPR_REDUCE_MAX), TPR_DTYPE_S64);
  tpr_value_t init[ZS_COUNT] = {tpr_constant_i64(g, TPR_DTYPE_S64, 0), last, s, q, m,
                                lw_k(g, q, 0)};
  tpr_value_t out[ZS_COUNT];
  tpr_while(g, ZS_COUNT, init, zeta_shift_cond, zeta_shift_body, NULL, out);
  tpr_value_t r = lw_add(g, out[ZS_SUM], tpr_binary(g, TPR_BINARY_ZETA, s, lw_add(g, q, m)));
  r = lw_sel(g, too_far, lw_k(g, q, NAN), r);
  return zeta_domain(g, s, q, r);
}

// trigamma as PyTorch's CPU kernel: reflection below 1/2, six recurrence
// steps, then the asymptotic series.
static tpr_value_t trigamma_of(tpr_graph_t* g, tpr_value_t x) {
  const double pi = 3.14159265358979323846;
  tpr_value_t refl = lw_cmpk(g, TPR_CMP_LT, x, 0.5);
  tpr_value_t sp = lw_un(g, TPR_UNARY_SIN, lw_mul(g, x, lw_k(g, x, pi)));
  tpr_value_t r = lw_sel(g, refl, lw_div(g, lw_k(g, x, -pi * pi), lw_mul(g, sp, sp)),
                         lw_k(g, x, 0));
  x = lw_sel(g, refl, lw_sub(g, lw_k(g, x, 1), x), x);
  for (int i = 0; i < 6; i++) {
    r = lw_add(g, r, lw_div(g, lw_k(g, x, 1), lw_mul(g, x, x)));
    x = lw_add(g, x, lw_k(g, x, 1));
  }
  tpr_value_t ixx = lw_div(g, lw_k(g, x, 1), lw_mul(g, x, x));
  tpr_value_t p = lw_sub(g, lw_k(g, x, 1.0 / 30), lw_mul(g, ixx, lw_k(g, x, 1.0 / 42)));
  p = lw_sub(g, lw_k(g, x, 1.0 / 6), lw_mul(g, ixx, p));
  p = lw_add(g, lw_add(g, lw_k(g, x, 1), lw_div(g, lw_k(g, x, 0.5), x)), lw_mul(g, ixx, p));
  r = lw_add(g, r, lw_div(g, p, x));
  return lw_sel(g, refl, lw_un(g, TPR_UNARY_NEG, r), r);
}

// polygamma(int n, self): digamma (n = 0), trigamma (n = 1), else
// (-1)^(n+1) n! zeta(n + 1, x), as PyTorch's CPU kernel.
static tpr_status_t lower_polygamma(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  int64_t n = lw_int(ctx, 0, 0);
  if (n < 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "polygamma: n must be >= 0");
  tpr_value_t x = lw_in(ctx, 1, cd, OUT);
  if (n == 0) return lw_ret(ctx, lw_digamma(G, x));
  if (n == 1) return lw_ret(ctx, trigamma_of(G, x));
  double f = (n % 2 ? 1.0 : -1.0) * exp(lgamma((double)n + 1.0));
  tpr_value_t z = zeta_any_q(G, lw_k(G, x, (double)n + 1), x);
  return lw_ret(ctx, lw_mul(G, z, lw_k(G, x, f)));
}

// special_zeta(self, other): Hurwitz zeta(x, q), negative q shifted as for
// polygamma (chlo.zeta alone gave NaN there).
static tpr_status_t lower_zeta(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT), q = lw_in(ctx, 1, cd, OUT);
  return lw_ret(ctx, zeta_any_q(G, x, q));
}

// ndtri(p), the standard normal quantile, as PyTorch's kernel (Cephes):
// a rational function of p - 1/2 in the middle, of 1/sqrt(-2 log p) in the
// tails (1 - p for the upper one, exact there). sqrt(2) erfinv(2p - 1) lost
// the low bits of p below 0.5: 3e-4 off at p = 9e-5.
static const double kNdtriP0[] = {
    -5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
    1.39312609387279679503E1, -1.23916583867381258016E0};
static const double kNdtriQ0[] = {
    1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
    -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
    1.59056225126211695515E1, -1.18331621121330003142E0};
static const double kNdtriP1[] = {
    4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
    4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
    -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4};
static const double kNdtriQ1[] = {
    1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
    1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
    -3.80806407691578277194E-2, -9.33259480895457427372E-4};
static const double kNdtriP2[] = {
    3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
    1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
    3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9};
static const double kNdtriQ2[] = {
    1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
    2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
    2.89247864745380683936E-6, 6.79019408009981274425E-9};
#define NK(t) ((int)(sizeof(t) / sizeof(t[0])))

static tpr_status_t lower_ndtri(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_graph_t* g = G;
  tpr_value_t p = lw_in(ctx, 0, cd, OUT);
  const double e2 = 0.13533528323661269189;  // exp(-2)
  tpr_value_t upper = lw_cmpk(g, TPR_CMP_GT, p, 1 - e2);
  tpr_value_t y = lw_sel(g, upper, lw_sub(g, lw_k(g, p, 1), p), p);
  // Middle: |p - 1/2| < 1/2 - exp(-2).
  tpr_value_t c = lw_sub(g, y, lw_k(g, p, 0.5)), c2 = lw_mul(g, c, c);
  tpr_value_t mid = lw_div(g, lw_mul(g, c2, lw_polevl(g, c2, kNdtriP0, NK(kNdtriP0))),
                           lw_polevl(g, c2, kNdtriQ0, NK(kNdtriQ0)));
  mid = lw_mul(g, lw_add(g, c, lw_mul(g, c, mid)), lw_k(g, p, 2.50662827463100050242));
  // Tails: x = sqrt(-2 log y), two fits split at x = 8; y kept in (0, 1] so
  // the unused branch stays finite.
  tpr_value_t ys = lw_min(g, lw_max(g, y, lw_k(g, p, 1e-300)), lw_k(g, p, 1));
  tpr_value_t x = lw_un(g, TPR_UNARY_SQRT,
                        lw_mul(g, lw_k(g, p, -2), lw_un(g, TPR_UNARY_LOG, ys)));
  tpr_value_t x0 = lw_sub(g, x, lw_div(g, lw_un(g, TPR_UNARY_LOG, x), x));
  tpr_value_t z = lw_div(g, lw_k(g, p, 1), x);
  tpr_value_t near = lw_div(g, lw_mul(g, z, lw_polevl(g, z, kNdtriP1, NK(kNdtriP1))),
                            lw_polevl(g, z, kNdtriQ1, NK(kNdtriQ1)));
  tpr_value_t far = lw_div(g, lw_mul(g, z, lw_polevl(g, z, kNdtriP2, NK(kNdtriP2))),
                           lw_polevl(g, z, kNdtriQ2, NK(kNdtriQ2)));
  tpr_value_t tail = lw_sub(g, x0, lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 8), near, far));
  tail = lw_sel(g, upper, tail, lw_un(g, TPR_UNARY_NEG, tail));
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_GT, y, e2), mid, tail);
  r = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, p, 0), lw_k(g, p, -INFINITY), r);
  r = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, p, 1), lw_k(g, p, INFINITY), r);
  // p outside [0, 1], NaN included.
  tpr_value_t in = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GE, p, 0),
                              lw_cmpk(g, TPR_CMP_LE, p, 1));
  return lw_ret(ctx, lw_sel(g, in, r, lw_k(g, p, NAN)));
}

// log_ndtr(x) = log(erfc(-x / sqrt 2) / 2); for x < -1 through
// log(erfcx(t)) - t^2 with t = -x / sqrt 2, which stays finite far out.
static tpr_value_t erfcx_of(tpr_graph_t* g, tpr_value_t x);

static tpr_status_t lower_log_ndtr(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t t = lw_mul(G, x, lw_k(G, x, -0.70710678118654752440));
  tpr_value_t direct = lw_un(G, TPR_UNARY_LOG1P,
                             lw_mul(G, lw_un(G, TPR_UNARY_ERFC, lw_un(G, TPR_UNARY_NEG, t)),
                                    lw_k(G, x, -0.5)));
  tpr_value_t ts = lw_max(G, t, lw_k(G, t, 0.5));
  tpr_value_t tail = lw_sub(G, lw_sub(G, lw_un(G, TPR_UNARY_LOG, erfcx_of(G, ts)),
                                      lw_mul(G, ts, ts)),
                            lw_k(G, x, 0.69314718055994530942));
  return lw_ret(ctx, lw_sel(G, lw_cmpk(G, TPR_CMP_LT, x, -1), tail, direct));
}

// erfcx(x) = exp(x^2) erfc(x). For x < 2: directly (erfc has full relative
// accuracy there and exp(x^2) is finite up to the overflow PyTorch also
// has for x < -9.3). For x >= 2: the continued fraction of erfc,
// erfcx(x) = 1/sqrt(pi) / (x + 1/2 / (x + 1 / (x + 3/2 / (x + ...)))),
// 40 terms, which converges to f64 accuracy from x = 2 on.
static tpr_value_t erfcx_of(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t xs = lw_max(g, x, lw_k(g, x, 2));
  tpr_value_t f = xs;
  for (int k = 40; k >= 1; k--)
    f = lw_add(g, xs, lw_div(g, lw_k(g, x, 0.5 * k), f));
  tpr_value_t cf = lw_div(g, lw_k(g, x, 0.56418958354775628695), f);
  tpr_value_t direct = lw_mul(g, lw_un(g, TPR_UNARY_EXP, lw_mul(g, x, x)),
                              lw_un(g, TPR_UNARY_ERFC, x));
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_GE, x, 2), cf, direct);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, x, INFINITY), lw_k(g, x, 0), r);
}

static tpr_status_t lower_erfcx(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_float(ctx, cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  // Near x = 2 the two forms meet; compute the direct form in f64 there.
  tpr_value_t wide = lw_cast(G, x, TPR_DTYPE_F64);
  return lw_ret(ctx, erfcx_of(G, wide));
}

//===--- complex numbers ---------------------------------------------------===//

// complex(real, imag)
static tpr_status_t lower_complex(lw_ctx_t* ctx) {
  if (!tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a complex out type");
  tpr_dtype_t pd = OUT->dtype == TPR_DTYPE_C128 ? TPR_DTYPE_F64 : TPR_DTYPE_F32;
  tpr_value_t re = lw_in(ctx, 0, pd, OUT), im = lw_in(ctx, 1, pd, OUT);
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_COMPLEX, re, im));
}

// polar(abs, angle) = abs (cos angle + i sin angle)
static tpr_status_t lower_polar(lw_ctx_t* ctx) {
  if (!tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a complex out type");
  tpr_dtype_t pd = OUT->dtype == TPR_DTYPE_C128 ? TPR_DTYPE_F64 : TPR_DTYPE_F32;
  tpr_value_t r = lw_in(ctx, 0, pd, OUT), t = lw_in(ctx, 1, pd, OUT);
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_COMPLEX,
                                lw_mul(G, r, lw_un(G, TPR_UNARY_COS, t)),
                                lw_mul(G, r, lw_un(G, TPR_UNARY_SIN, t))));
}

static bool complex_arg(const lw_ctx_t* ctx, int i) {
  const tpr_type_t* t = lw_arg_type(ctx, i);
  return t && tpr_dtype_is_complex(t->dtype);
}

// sgn: sign for reals, z / |z| (0 at 0) for complex.
static tpr_status_t lower_sgn(lw_ctx_t* ctx) {
  if (!complex_arg(ctx, 0)) {
    tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
    if (OUT->dtype == TPR_DTYPE_BOOL) return lw_ret(ctx, x);
    tpr_value_t sg = lw_un(G, TPR_UNARY_SIGN, x);
    if (!tpr_dtype_is_float(OUT->dtype)) return lw_ret(ctx, sg);
    return lw_ret(ctx, lw_sel(G, lw_isnan(G, x), lw_k(G, x, 0), sg));  // as CPU
  }
  tpr_value_t z = lw_in(ctx, 0, OUT->dtype, OUT);
  tpr_value_t a = lw_un(G, TPR_UNARY_ABS, z);
  tpr_value_t zero = lw_cmpk(G, TPR_CMP_EQ, a, 0);
  tpr_value_t az = tpr_binary(G, TPR_BINARY_COMPLEX, a, lw_k(G, a, 0));
  tpr_value_t one = tpr_binary(G, TPR_BINARY_COMPLEX, lw_k(G, a, 1), lw_k(G, a, 0));
  tpr_value_t q = lw_div(G, z, lw_sel(G, zero, one, az));
  return lw_ret(ctx, lw_sel(G, zero, lw_k(G, z, 0), q));
}

// angle: atan2(imag, real) for complex; pi for negative reals, 0 otherwise,
// NaN kept.
static tpr_status_t lower_angle(lw_ctx_t* ctx) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  if (complex_arg(ctx, 0)) {
    tpr_value_t z = lw_value(ctx, 0);
    return lw_ret(ctx, tpr_binary(G, TPR_BINARY_ATAN2, lw_un(G, TPR_UNARY_IMAG, z),
                                  lw_un(G, TPR_UNARY_REAL, z)));
  }
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t r = lw_sel(G, lw_cmpk(G, TPR_CMP_LT, x, 0),
                         lw_k(G, x, 3.14159265358979323846), lw_k(G, x, 0));
  return lw_ret(ctx, lw_sel(G, lw_isnan(G, x), x, r));
}

// conj_physical: (re, -im) for complex, the value itself otherwise. Also
// _conj, the conjugate view: compiled graphs give views value semantics.
static tpr_status_t lower_conj_physical(lw_ctx_t* ctx) {
  tpr_value_t z = lw_in(ctx, 0, OUT->dtype, OUT);
  if (!tpr_dtype_is_complex(OUT->dtype)) return lw_ret(ctx, z);
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_COMPLEX, lw_un(G, TPR_UNARY_REAL, z),
                                lw_un(G, TPR_UNARY_NEG, lw_un(G, TPR_UNARY_IMAG, z))));
}

//===--- NaN-aware and counting reductions ---------------------------------===//

// nansum(self, dim=None, keepdim=False, *, dtype=None): NaN counts as 0.
static tpr_status_t lower_nansum(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  if (tpr_dtype_is_complex(t->dtype) || tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  int64_t dims[TPR_MAX_RANK], bad = 0;
  int n = lw_reduce_dims(ctx, 1, t->rank, false, dims, &bad);
  if (n < 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim %lld out of range", (long long)bad);
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  if (acc == TPR_DTYPE_BOOL) acc = TPR_DTYPE_S64;
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), acc);
  if (tpr_dtype_is_float(acc)) x = lw_sel(G, lw_isnan(G, x), lw_k(G, x, 0), x);
  return lw_ret(ctx, tpr_reduce(G, x, TPR_REDUCE_SUM, dims, n));
}

// count_nonzero(self, dim=None) / count_nonzero.dim_IntList(self, dim[]).
static tpr_status_t lower_count_nonzero(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  int64_t dims[TPR_MAX_RANK], bad = 0;
  int n = lw_reduce_dims(ctx, 1, t->rank, false, dims, &bad);
  if (n < 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim %lld out of range", (long long)bad);
  tpr_value_t nz = lw_cast(G, lw_nonzero(G, lw_value(ctx, 0)), TPR_DTYPE_S64);
  return lw_ret(ctx, tpr_reduce(G, nz, TPR_REDUCE_SUM, dims, n));
}

//===--- table -------------------------------------------------------------===//

#define FIO(n, fn) LW_RULE(n, fn), LW_RULE(n "_", fn), LW_RULE(n ".out", fn)
#define FO(n, fn) LW_RULE(n, fn), LW_RULE(n ".out", fn)

LW_DEFINE_TABLE(special,
    LW_RULE("copysign.Tensor", lower_copysign), LW_RULE("copysign_.Tensor", lower_copysign),
    LW_RULE("copysign.out", lower_copysign), LW_RULE("copysign.Scalar", lower_copysign),
    LW_RULE("copysign_.Scalar", lower_copysign),
    LW_RULE("copysign.Scalar_out", lower_copysign),
    FO("signbit", lower_signbit), FIO("heaviside", lower_heaviside),
    FIO("nextafter", lower_nextafter), FIO("hypot", lower_hypot),
    LW_RULE("frexp.Tensor", lower_frexp), LW_RULE("frexp.Tensor_out", lower_frexp),
    FIO("nan_to_num", lower_nan_to_num),
    FO("logaddexp", lower_logaddexp), FO("logaddexp2", lower_logaddexp2),
    LW_RULE("xlogy.Tensor", lower_xlogy), LW_RULE("xlogy_.Tensor", lower_xlogy),
    LW_RULE("xlogy.OutTensor", lower_xlogy), LW_RULE("xlogy.Scalar_Self", lower_xlogy),
    LW_RULE("xlogy.OutScalar_Self", lower_xlogy),
    LW_RULE("xlogy.Scalar_Other", lower_xlogy), LW_RULE("xlogy_.Scalar_Other", lower_xlogy),
    LW_RULE("xlogy.OutScalar_Other", lower_xlogy),
    FO("special_xlog1py", lower_xlog1py),
    LW_RULE("special_xlog1py.self_scalar", lower_xlog1py),
    LW_RULE("special_xlog1py.other_scalar", lower_xlog1py),
    LW_RULE("special_xlog1py.self_scalar_out", lower_xlog1py),
    LW_RULE("special_xlog1py.other_scalar_out", lower_xlog1py),
    FO("special_entr", lower_entr),
    LW_RULE("logit_backward", lower_logit_backward),
    LW_RULE("logit_backward.grad_input", lower_logit_backward),
    FIO("sinc", lower_sinc), FIO("i0", lower_i0), FO("special_i0e", lower_i0e),
    FO("special_i1", lower_i1), FO("special_i1e", lower_i1e),
    FO("polygamma", lower_polygamma), LW_RULE("polygamma_", lower_polygamma),
    FO("special_zeta", lower_zeta),
    LW_RULE("special_zeta.self_scalar", lower_zeta),
    LW_RULE("special_zeta.other_scalar", lower_zeta),
    LW_RULE("special_zeta.self_scalar_out", lower_zeta),
    LW_RULE("special_zeta.other_scalar_out", lower_zeta),
    FO("special_ndtri", lower_ndtri), FO("special_log_ndtr", lower_log_ndtr),
    FO("special_erfcx", lower_erfcx),
    FO("complex", lower_complex), FO("polar", lower_polar),
    FIO("sgn", lower_sgn), FO("angle", lower_angle),
    FIO("conj_physical", lower_conj_physical),
    FO("_conj_physical", lower_conj_physical), LW_RULE("_conj", lower_conj_physical),
    FO("nansum", lower_nansum),
    FO("count_nonzero", lower_count_nonzero),
    LW_RULE("count_nonzero.dim_IntList", lower_count_nonzero),
    LW_RULE("count_nonzero.dim_IntList_out", lower_count_nonzero));
