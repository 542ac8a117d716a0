// Orthogonal polynomials of torch.special: chebyshev_polynomial_t/u/v/w,
// shifted_chebyshev_polynomial_t/u/v/w, hermite_polynomial_h/he,
// laguerre_polynomial_l and legendre_polynomial_p, with the semantics of
// PyTorch's CPU kernels (aten/src/ATen/native/Math.h): the degree is
// trunc(n) (n past int64, NaN included, counts as negative); n < 0 gives 0;
// fixed values at the interval ends; for Chebyshev with |x| < 1 above a
// small degree the trigonometric closed form; otherwise the three-term
// recurrence.
//
// The degree is a runtime tensor:
//  * Chebyshev: the recurrence is unrolled to K = 64 and p_n picked by
//    select; for n > K the closed forms cos(n acos x) (|x| < 1) and
//    cosh(n acosh |x|) with sign (|x| > 1) and their U/V/W analogues; where
//    PyTorch's recurrence would overflow (inf - inf) the result is NaN.
//  * Hermite, Laguerre, Legendre have no closed form: a while loop runs the
//    recurrence up to the largest degree in the tensor, each element keeping
//    its value once its own degree is reached, so every n is exact. Hermite
//    degrees above PyTorch's limit (128 for float32, 512 for float64) give
//    NaN, as on the CPU.
// Floats compute in the opmath dtype (f32 for f16/bf16/f32, f64 for f64).
#include <math.h>

#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

enum {
  P_T, P_U, P_V, P_W,      // Chebyshev (shifted: + P_SHIFT)
  P_ST, P_SU, P_SV, P_SW,  // shifted Chebyshev
  P_H, P_HE, P_L, P_P
};

#define ABS(v) lw_un(g, TPR_UNARY_ABS, v)
#define K(v) lw_k(g, x, v)
#define EQ(a, c) lw_cmpk(g, TPR_CMP_EQ, a, c)
#define SEL lw_sel

enum { KCHEB = 64 };

// Closed forms of the Chebyshev kinds T/U/V/W (kind 0..3) at z for degree
// n > KCHEB (|z| != 1 handled by the caller's special cases).
static tpr_value_t cheb_closed(tpr_graph_t* g, int kind, tpr_value_t z, tpr_value_t n,
                               tpr_value_t odd) {
  tpr_value_t x = z;
  tpr_value_t n1 = lw_add(g, n, K(1)), nh = lw_add(g, n, K(0.5));
  // |z| < 1
  tpr_value_t th = lw_un(g, TPR_UNARY_ACOS, z);
  tpr_value_t in;
  switch (kind) {
    case 0: in = lw_un(g, TPR_UNARY_COS, lw_mul(g, n, th)); break;
    case 1:
      in = lw_div(g, lw_un(g, TPR_UNARY_SIN, lw_mul(g, n1, th)), lw_un(g, TPR_UNARY_SIN, th));
      break;
    case 2:
      in = lw_div(g, lw_un(g, TPR_UNARY_COS, lw_mul(g, nh, th)),
                  lw_un(g, TPR_UNARY_COS, lw_mul(g, th, K(0.5))));
      break;
    default:
      in = lw_div(g, lw_un(g, TPR_UNARY_SIN, lw_mul(g, nh, th)),
                  lw_un(g, TPR_UNARY_SIN, lw_mul(g, th, K(0.5))));
      break;
  }
  // |z| > 1: t = acosh|z|; P(-z) = (-1)^n P(z) for T, U; V(-z) = (-1)^n W(z).
  tpr_value_t t = lw_un(g, TPR_UNARY_ACOSH, ABS(z));
  tpr_value_t ch_n = lw_div(g, lw_un(g, TPR_UNARY_COSH, lw_mul(g, nh, t)),
                            lw_un(g, TPR_UNARY_COSH, lw_mul(g, t, K(0.5))));
  tpr_value_t sh_n = lw_div(g, lw_un(g, TPR_UNARY_SINH, lw_mul(g, nh, t)),
                            lw_un(g, TPR_UNARY_SINH, lw_mul(g, t, K(0.5))));
  tpr_value_t neg = lw_cmpk(g, TPR_CMP_LT, z, 0), pos_v, neg_v;
  switch (kind) {
    case 0: pos_v = neg_v = lw_un(g, TPR_UNARY_COSH, lw_mul(g, n, t)); break;
    case 1:
      pos_v = neg_v = lw_div(g, lw_un(g, TPR_UNARY_SINH, lw_mul(g, n1, t)),
                             lw_un(g, TPR_UNARY_SINH, t));
      break;
    case 2: pos_v = ch_n, neg_v = sh_n; break;
    default: pos_v = sh_n, neg_v = ch_n; break;
  }
  tpr_value_t nv = SEL(g, odd, lw_un(g, TPR_UNARY_NEG, neg_v), neg_v);
  tpr_value_t out = SEL(g, neg, nv, pos_v);
  // PyTorch's recurrence turns an overflow into inf - inf = NaN.
  tpr_value_t fin = lw_cmpk(g, TPR_CMP_LT, ABS(out), INFINITY);
  out = SEL(g, fin, out, K(NAN));
  return SEL(g, lw_cmpk(g, TPR_CMP_LT, ABS(z), 1), in, out);
}

// The loop of the Hermite, Laguerre and Legendre recurrences. Carried:
// m (s64, the degree computed next), the last degree to compute (s64), x,
// n, p = p_{m-2}, q = p_{m-1}.
enum { RC_M, RC_LAST, RC_X, RC_N, RC_P, RC_Q, RC_COUNT };

static void rec_cond(tpr_graph_t* g, void* user, const tpr_value_t* a,
                     tpr_value_t* r) {
  r[0] = lw_cmp(g, TPR_CMP_LE, a[RC_M], a[RC_LAST]);
}

static void rec_body(tpr_graph_t* g, void* user, const tpr_value_t* a,
                     tpr_value_t* r) {
  int which = *(const int*)user;
  tpr_value_t x = a[RC_X], p = a[RC_P], q = a[RC_Q];
  tpr_value_t mf = lw_splat(g, a[RC_M], x);
  tpr_value_t k = lw_sub(g, mf, K(1)), k1 = mf;
  tpr_value_t s;
  if (which == P_H) {
    s = lw_sub(g, lw_mul(g, lw_add(g, x, x), q), lw_mul(g, lw_add(g, k, k), p));
  } else if (which == P_HE) {
    s = lw_sub(g, lw_mul(g, x, q), lw_mul(g, k, p));
  } else if (which == P_L) {
    tpr_value_t c = lw_add(g, lw_add(g, k, k), lw_sub(g, K(1), x));
    s = lw_div(g, lw_sub(g, lw_mul(g, c, q), lw_mul(g, k, p)), k1);
  } else {
    tpr_value_t c = lw_add(g, lw_add(g, k, k), K(1));
    s = lw_div(g, lw_sub(g, lw_mul(g, lw_mul(g, c, x), q), lw_mul(g, k, p)), k1);
  }
  tpr_value_t upd = lw_cmp(g, TPR_CMP_GE, a[RC_N], mf);
  r[RC_M] = lw_add(g, a[RC_M], tpr_constant_i64(g, TPR_DTYPE_S64, 1));
  r[RC_LAST] = a[RC_LAST];
  r[RC_X] = x;
  r[RC_N] = a[RC_N];
  r[RC_P] = lw_sel(g, upd, q, p);
  r[RC_Q] = lw_sel(g, upd, s, q);
}

// p_n for n >= 1 (p_0 = 1, p_1 = q1) by the loop; other elements undefined.
static tpr_value_t rec_loop(tpr_graph_t* g, int which, tpr_value_t x,
                            tpr_value_t n, tpr_value_t q1, double limit) {
  // Largest degree, bounded so that the s64 conversion is exact.
  tpr_value_t last = lw_reduce_all(g, n, TPR_REDUCE_MAX);
  last = lw_min(g, lw_max(g, last, lw_k(g, last, 0)), lw_k(g, last, limit));
  tpr_value_t init[RC_COUNT] = {
      tpr_constant_i64(g, TPR_DTYPE_S64, 2), lw_cast(g, last, TPR_DTYPE_S64),
      x, n, K(1), q1};
  tpr_value_t out[RC_COUNT];
  tpr_while(g, RC_COUNT, init, rec_cond, rec_body, &which, out);
  return out[RC_Q];
}

static tpr_status_t poly_rule(lw_ctx_t* ctx, int which) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  if (tpr_dtype_is_complex(cd))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  for (int i = 0; i < 2; i++) {
    const tpr_type_t* t = lw_arg_type(ctx, i);
    if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "x and n must be tensors or scalars");
    if (tpr_dtype_is_complex(t->dtype))
      return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  }
  tpr_graph_t* g = G;
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t nf = lw_in(ctx, 1, cd, OUT);
  // n = trunc(n). The CPU kernel casts n to int64: NaN, +-inf and
  // |n| >= 2^63 become INT64_MIN on x86-64, a negative degree (0 result).
  tpr_value_t n = lw_trunc(g, nf);
  n = SEL(g, lw_cmpk(g, TPR_CMP_LT, ABS(nf), 9223372036854775808.0), n, K(-1));
  tpr_value_t odd = lw_cmpk(g, TPR_CMP_NE, tpr_binary(g, TPR_BINARY_REM, n, K(2)), 0);
  tpr_value_t n1 = lw_add(g, n, K(1)), n21 = lw_add(g, lw_add(g, n, n), K(1));
  bool cheb = which <= P_SW;
  int kind = which & 3;
  int bound = cheb ? KCHEB : 1;
  // z: the Chebyshev argument (2x - 1 for the shifted kinds).
  tpr_value_t z = x;
  if (which >= P_ST && which <= P_SW) z = lw_sub(g, lw_add(g, x, x), K(1));

  // Recurrence p_0..p_bound.
  tpr_value_t p = K(1), q, r;
  if (cheb) {
    switch (kind) {
      case 0: q = z; break;
      case 1: q = lw_add(g, z, z); break;
      case 2: q = lw_sub(g, lw_add(g, z, z), K(1)); break;
      default: q = lw_add(g, lw_add(g, z, z), K(1)); break;
    }
  } else if (which == P_H) {
    q = lw_add(g, x, x);
  } else if (which == P_L) {
    q = lw_sub(g, K(1), x);
  } else {
    q = x;
  }
  // Degrees above the bound.
  if (cheb) {
    r = cheb_closed(g, kind, z, n, odd);
  } else {
    // PyTorch's Hermite limit; the others run to the largest degree.
    bool herm = which == P_H || which == P_HE;
    double limit = herm ? (cd == TPR_DTYPE_F64 ? 512 : 128) : 0x1p62;
    r = rec_loop(g, which, x, n, q, limit);
    if (herm) r = SEL(g, lw_cmpk(g, TPR_CMP_GT, n, limit), K(NAN), r);
  }
  r = SEL(g, EQ(n, 0), p, r);
  r = SEL(g, EQ(n, 1), q, r);
  tpr_value_t zz = lw_add(g, z, z), omx = lw_sub(g, K(1), x);
  for (int m = 2; m <= bound; m++) {
    double k = m - 1;
    tpr_value_t s;
    if (cheb) {
      s = lw_sub(g, lw_mul(g, zz, q), p);
    } else if (which == P_H) {
      s = lw_sub(g, lw_mul(g, zz, q), lw_mul(g, K(2 * k), p));
    } else if (which == P_HE) {
      s = lw_sub(g, lw_mul(g, x, q), lw_mul(g, K(k), p));
    } else if (which == P_L) {
      s = lw_div(g, lw_sub(g, lw_mul(g, lw_add(g, K(2 * k), omx), q), lw_mul(g, K(k), p)),
                 K(k + 1));
    } else {
      s = lw_div(g, lw_sub(g, lw_mul(g, lw_mul(g, K(2 * k + 1), x), q), lw_mul(g, K(k), p)),
                 K(k + 1));
    }
    p = q;
    q = s;
    r = SEL(g, EQ(n, m), q, r);
  }

  tpr_value_t one = K(1), mone = K(-1);
  tpr_value_t pm1 = SEL(g, odd, mone, one);  // (-1)^n
  if (cheb) {
    // Trigonometric closed form for |z| < 1 above a small degree.
    int thr = which == P_T ? 6 : which <= P_W ? 8 : which == P_SW ? 4 : 6;
    tpr_value_t th = lw_un(g, TPR_UNARY_ACOS, z), trig;
    switch (kind) {
      case 0: trig = lw_un(g, TPR_UNARY_COS, lw_mul(g, n, th)); break;
      case 1: {
        tpr_value_t s = lw_un(g, TPR_UNARY_SIN, th);
        tpr_value_t a = lw_div(g, lw_un(g, TPR_UNARY_SIN, lw_mul(g, n1, th)), s);
        tpr_value_t b = lw_div(g, lw_mul(g, n1, lw_un(g, TPR_UNARY_COS, lw_mul(g, n1, th))), z);
        trig = SEL(g, lw_cmpk(g, TPR_CMP_NE, s, 0), a, b);
        break;
      }
      case 2: {
        tpr_value_t h = lw_div(g, th, K(2));
        tpr_value_t a = lw_div(g, lw_un(g, TPR_UNARY_COS, lw_mul(g, lw_add(g, n, K(0.5)), th)),
                               lw_un(g, TPR_UNARY_COS, h));
        trig = SEL(g, lw_cmpk(g, TPR_CMP_NE, lw_un(g, TPR_UNARY_SIN, h), 1), a,
                   lw_mul(g, pm1, n21));
        break;
      }
      default: {
        tpr_value_t h = lw_div(g, th, K(2));
        tpr_value_t a = lw_div(g, lw_un(g, TPR_UNARY_SIN, lw_mul(g, lw_add(g, n, K(0.5)), th)),
                               lw_un(g, TPR_UNARY_SIN, h));
        tpr_value_t b = which == P_W ? SEL(g, lw_cmpk(g, TPR_CMP_GT, x, 0), n21, pm1) : pm1;
        trig = SEL(g, lw_cmpk(g, TPR_CMP_NE, lw_un(g, TPR_UNARY_COS, h), 1), a, b);
        break;
      }
    }
    tpr_value_t use = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GT, n, thr),
                                 lw_cmpk(g, TPR_CMP_LT, ABS(z), 1));
    r = SEL(g, use, trig, r);
    // Interval ends z = +-1 (x = 1 and x = 0 for the shifted kinds).
    tpr_value_t at1, atm1;
    switch (kind) {
      case 0: at1 = one, atm1 = pm1; break;
      case 1: at1 = n1, atm1 = lw_mul(g, pm1, n1); break;
      case 2: at1 = one, atm1 = lw_mul(g, pm1, n21); break;
      default: at1 = n21, atm1 = pm1; break;
    }
    tpr_value_t e1, em1;
    if (which <= P_W) {
      e1 = EQ(x, 1), em1 = EQ(x, -1);
    } else {
      e1 = EQ(x, 1), em1 = EQ(x, 0);
    }
    r = SEL(g, em1, atm1, r);
    r = SEL(g, e1, at1, r);
  } else if (which == P_L) {
    r = SEL(g, tpr_binary(g, TPR_BINARY_AND, EQ(x, 0), lw_cmpk(g, TPR_CMP_GE, n, 0)), one, r);
  } else if (which == P_P) {
    tpr_value_t atm1 = pm1;
    r = SEL(g, tpr_binary(g, TPR_BINARY_AND, EQ(x, -1), lw_cmpk(g, TPR_CMP_GE, n, 0)), atm1, r);
    r = SEL(g, tpr_binary(g, TPR_BINARY_AND, EQ(x, 1), lw_cmpk(g, TPR_CMP_GE, n, 0)), one, r);
  }
  r = SEL(g, lw_cmpk(g, TPR_CMP_LT, n, 0), K(0), r);
  return lw_ret(ctx, r);
}

#define DEF(name, id) \
  static tpr_status_t lower_##name(lw_ctx_t* ctx) { return poly_rule(ctx, id); }
DEF(t, P_T)
DEF(u, P_U)
DEF(v, P_V)
DEF(w, P_W)
DEF(st, P_ST)
DEF(su, P_SU)
DEF(sv, P_SV)
DEF(sw, P_SW)
DEF(h, P_H)
DEF(he, P_HE)
DEF(l, P_L)
DEF(p, P_P)

//===--- table -------------------------------------------------------------===//

#define F6(n, fn)                                                             \
  LW_RULE(n, fn), LW_RULE(n ".out", fn), LW_RULE(n ".x_scalar", fn),          \
      LW_RULE(n ".x_scalar_out", fn), LW_RULE(n ".n_scalar", fn),             \
      LW_RULE(n ".n_scalar_out", fn)

LW_DEFINE_TABLE(poly,
    F6("special_chebyshev_polynomial_t", lower_t),
    F6("special_chebyshev_polynomial_u", lower_u),
    F6("special_chebyshev_polynomial_v", lower_v),
    F6("special_chebyshev_polynomial_w", lower_w),
    F6("special_shifted_chebyshev_polynomial_t", lower_st),
    F6("special_shifted_chebyshev_polynomial_u", lower_su),
    F6("special_shifted_chebyshev_polynomial_v", lower_sv),
    F6("special_shifted_chebyshev_polynomial_w", lower_sw),
    F6("special_hermite_polynomial_h", lower_h),
    F6("special_hermite_polynomial_he", lower_he),
    F6("special_laguerre_polynomial_l", lower_l),
    F6("special_legendre_polynomial_p", lower_p));
