// Matrix factorizations and what is built on them: Cholesky and triangular
// solves (XLA's native stablehlo.cholesky / triangular_solve), LU with
// partial pivoting, Householder QR, and their users (inverse, LU solves,
// unpacking). Matrices are the last two dims; leading dims are a batch.
//
// LU and QR have no StableHLO op: they are unrolled over the (static) number
// of columns, each step a handful of whole-matrix masked updates, so a
// step costs the same ops at any size and the graph stays small for the
// matrix sizes eager code meets. They follow LAPACK's conventions exactly
// (getrf: first largest |pivot|, 1-based pivots, info = first zero pivot;
// geqrf: dlarfg reflectors with beta = -sign(alpha) * norm), so results
// match the CPU's, not just up to a gauge.
//
// Only f32 and f64 are computed; complex and low-precision inputs are
// UNIMPLEMENTED (PyTorch's CPU has no bf16/f16 linalg either).
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)

// Unrolled factorizations stop at this many steps (columns): beyond it the
// graph grows too large to compile quickly, so rules say UNIMPLEMENTED.
enum { kMaxSteps = 64 };

//===--- batched matrix helpers -------------------------------------------===//

// v's type, or NULL once the graph has failed (v may then be NONE): the
// helpers below return NONE on NULL, so a failure stays sticky without
// reading a bogus rank.
static const tpr_type_t* ty(tpr_graph_t* g, tpr_value_t v) {
  if (!tpr_graph_ok(g)) return NULL;
  const tpr_type_t* t = tpr_value_type(g, v);
  return t->dtype == TPR_DTYPE_INVALID ? NULL : t;
}

// A type like |t| with dtype |d|.
static tpr_type_t retype(const tpr_type_t* t, tpr_dtype_t d) {
  tpr_type_t r = *t;
  r.dtype = d;
  return r;
}

// s32 iota over |t|'s shape along |dim|.
static tpr_value_t iota(tpr_graph_t* g, const tpr_type_t* t, int dim) {
  tpr_type_t it = retype(t, TPR_DTYPE_S32);
  return tpr_iota(g, it, dim);
}

// Row / column index of every element of a matrix-shaped type.
static tpr_value_t rows(tpr_graph_t* g, const tpr_type_t* t) {
  return iota(g, t, t->rank - 2);
}
static tpr_value_t cols(tpr_graph_t* g, const tpr_type_t* t) {
  return iota(g, t, t->rank - 1);
}

// |v| (dims 1 or equal) broadcast to |t|'s shape, dtype kept.
static tpr_value_t expand(tpr_graph_t* g, tpr_value_t v, const tpr_type_t* t) {
  int64_t bd[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) bd[i] = i;
  return tpr_broadcast_in_dim(g, v, t->rank, t->dims, bd);
}

// A rank-0 |s| or a constant broadcast to |t| with |t|'s dtype.
static tpr_value_t kfull(tpr_graph_t* g, double c, const tpr_type_t* t) {
  return t ? lw_full(g, c, t->dtype, t) : TPR_VALUE_NONE;
}

// select(pred, a, b) with a, b expanded to pred's shape.
static tpr_value_t sel(tpr_graph_t* g, tpr_value_t p, tpr_value_t a,
                       tpr_value_t b) {
  const tpr_type_t* tp = ty(g, p);
  if (!tp) return TPR_VALUE_NONE;
  tpr_type_t t = retype(tp, ty(g, a)->dtype);
  return tpr_select(g, p, expand(g, a, &t), expand(g, b, &t));
}

// rows/cols [r0, r1) x [c0, c1) of the trailing matrix.
static tpr_value_t block(tpr_graph_t* g, tpr_value_t v, int64_t r0, int64_t r1,
                         int64_t c0, int64_t c1) {
  const tpr_type_t* t = ty(g, v);
  if (!t) return TPR_VALUE_NONE;
  int64_t s[TPR_MAX_RANK] = {0}, l[TPR_MAX_RANK], st[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) l[i] = t->dims[i], st[i] = 1;
  s[t->rank - 2] = r0, l[t->rank - 2] = r1;
  s[t->rank - 1] = c0, l[t->rank - 1] = c1;
  return tpr_slice(g, v, s, l, st);
}
static tpr_value_t col(tpr_graph_t* g, tpr_value_t v, int64_t j) {
  const tpr_type_t* t = ty(g, v);
  return t ? block(g, v, 0, t->dims[t->rank - 2], j, j + 1) : TPR_VALUE_NONE;
}
static tpr_value_t row(tpr_graph_t* g, tpr_value_t v, int64_t i) {
  const tpr_type_t* t = ty(g, v);
  return t ? block(g, v, i, i + 1, 0, t->dims[t->rank - 1]) : TPR_VALUE_NONE;
}

// Swaps the last two dims.
static tpr_value_t mT(tpr_graph_t* g, tpr_value_t v) {
  const tpr_type_t* t = ty(g, v);
  if (!t) return TPR_VALUE_NONE;
  int64_t p[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) p[i] = i;
  p[t->rank - 2] = t->rank - 1, p[t->rank - 1] = t->rank - 2;
  return tpr_transpose(g, v, p);
}

// Batched a @ b (equal batch dims).
static tpr_value_t matmul(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  const tpr_type_t* t = ty(g, a);
  if (!t) return TPR_VALUE_NONE;
  int r = t->rank;
  int64_t bd[TPR_MAX_RANK];
  for (int i = 0; i < r - 2; i++) bd[i] = i;
  int64_t lc = r - 1, rc = r - 2;
  return tpr_dot_general(g, a, b, r - 2, bd, bd, 1, &lc, &rc, t->dtype);
}

// The identity of |t|'s shape (rectangular: ones on the main diagonal).
static tpr_value_t eye(tpr_graph_t* g, const tpr_type_t* t) {
  if (!t) return TPR_VALUE_NONE;
  return tpr_convert(g, tpr_compare(g, TPR_CMP_EQ, rows(g, t), cols(g, t)),
                     t->dtype);
}

// Entries with col - row >= k (upper) or <= k (lower); others zero.
static tpr_value_t tri(tpr_graph_t* g, tpr_value_t v, bool upper, int k) {
  const tpr_type_t* t = ty(g, v);
  if (!t) return TPR_VALUE_NONE;
  tpr_value_t diff = tpr_binary(g, TPR_BINARY_SUB, cols(g, t), rows(g, t));
  tpr_value_t kk = lw_full(g, k, TPR_DTYPE_S32, t);
  tpr_value_t keep = tpr_compare(g, upper ? TPR_CMP_GE : TPR_CMP_LE, diff, kk);
  return tpr_select(g, keep, v, kfull(g, 0, t));
}

// The diagonal of the trailing matrix as [..., min(m, n)].
static tpr_value_t diag(tpr_graph_t* g, tpr_value_t v) {
  const tpr_type_t* t = ty(g, v);
  if (!t) return TPR_VALUE_NONE;
  int r = t->rank;
  int64_t k = t->dims[r - 2] < t->dims[r - 1] ? t->dims[r - 2] : t->dims[r - 1];
  tpr_value_t sq = block(g, v, 0, k, 0, k);
  const tpr_type_t* ts = ty(g, sq);
  tpr_value_t m = tpr_select(g, tpr_compare(g, TPR_CMP_EQ, rows(g, ts),
                                            cols(g, ts)),
                             sq, kfull(g, 0, ts));
  int64_t d = r - 1;
  return tpr_reduce(g, m, TPR_REDUCE_SUM, &d, 1);
}

// |v| with its batch dims broadcast to the first |nb| dims of |batch|.
static tpr_value_t to_batch(tpr_graph_t* g, tpr_value_t v, const int64_t* batch,
                            int nb) {
  const tpr_type_t* t = ty(g, v);
  if (!t) return TPR_VALUE_NONE;
  int64_t dims[TPR_MAX_RANK];
  int k = t->rank - 2;  // matrix dims kept
  for (int i = 0; i < nb; i++) dims[i] = batch[i];
  dims[nb] = t->dims[k], dims[nb + 1] = t->dims[k + 1];
  return tpr_broadcast_to(g, v, nb + 2, dims);
}

// Argument |i| as an f32/f64 matrix batch in |d|, else a failed status.
static tpr_status_t mat_arg(lw_ctx_t* ctx, int i, tpr_dtype_t d,
                            tpr_value_t* out) {
  const tpr_type_t* t = lw_arg_type(ctx, i);
  if (!t || t->rank < 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d is not a matrix", i);
  if (tpr_dtype_is_complex(t->dtype) || tpr_dtype_is_complex(d))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex linear algebra");
  if (d != TPR_DTYPE_F32 && d != TPR_DTYPE_F64)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "only float32 and float64");
  *out = lw_cast(G, lw_value(ctx, i), d);
  return tpr_ok_status();
}

// Argument |i| as a matrix in the out dtype, checked against kMaxSteps.
static tpr_status_t small_mat_arg(lw_ctx_t* ctx, int i, tpr_dtype_t d,
                                  tpr_value_t* out) {
  TPR_RETURN_IF_ERROR(mat_arg(ctx, i, d, out));
  const tpr_type_t* t = lw_arg_type(ctx, i);
  int64_t m = t->dims[t->rank - 2], n = t->dims[t->rank - 1];
  if ((m < n ? m : n) > kMaxSteps)
    return lw_fail(ctx, TPR_UNIMPLEMENTED,
                   "matrices with more than %d rows and columns", kMaxSteps);
  return tpr_ok_status();
}

// Argument |i| as a batch of square matrices (small_mat_arg's checks too).
static tpr_status_t square_arg(lw_ctx_t* ctx, int i, tpr_dtype_t d,
                               tpr_value_t* out) {
  TPR_RETURN_IF_ERROR(small_mat_arg(ctx, i, d, out));
  const tpr_type_t* t = lw_arg_type(ctx, i);
  if (t->dims[t->rank - 1] != t->dims[t->rank - 2])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d is not square", i);
  return tpr_ok_status();
}

// The float dtype of the first out (the computation dtype).
static tpr_dtype_t out_dtype(lw_ctx_t* ctx, int i) {
  return ctx->num_outs > i ? ctx->out_types[i].dtype : TPR_DTYPE_INVALID;
}

// check_errors=True asks the kernel to raise on a failed factorization,
// which needs the info on the host; PyTorch's callers pass False and check
// info themselves, so a rule that skipped the check would fail silently.
static tpr_status_t no_check_errors(lw_ctx_t* ctx) {
  return lw_fail(ctx, TPR_UNIMPLEMENTED,
                 "check_errors=True (call with False and check info)");
}

//===--- Cholesky and triangular solves ------------------------------------===//

// The factor of |a| (lower, or upper when |upper|), other triangle zeroed.
static tpr_value_t chol(tpr_graph_t* g, tpr_value_t a, bool upper) {
  return tri(g, tpr_cholesky(g, a, !upper), upper, 0);
}

// Solve with both operands broadcast to one batch first.
static tpr_value_t trsolve(tpr_graph_t* g, tpr_value_t a, tpr_value_t b,
                           bool left, bool lower, bool unit, bool trans) {
  const tpr_type_t* ta = ty(g, a);
  const tpr_type_t* tb = ty(g, b);
  if (!ta || !tb) return TPR_VALUE_NONE;
  int nb = (ta->rank > tb->rank ? ta->rank : tb->rank) - 2;
  int64_t batch[TPR_MAX_RANK];
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - (ta->rank - 2)), ib = i - (nb - (tb->rank - 2));
    int64_t da = ia >= 0 ? ta->dims[ia] : 1, db = ib >= 0 ? tb->dims[ib] : 1;
    batch[i] = da == 1 ? db : da;
  }
  return tpr_triangular_solve(g, to_batch(g, a, batch, nb),
                              to_batch(g, b, batch, nb), left, lower, unit,
                              trans);
}

// LAPACK's potrf info for the symmetric |a| [..., n, n]: the order of the
// first leading minor that is not positive definite, else 0. XLA's
// cholesky does not report where it failed (it may NaN the whole matrix),
// so the pivots of an unpivoted elimination (= the squared Cholesky
// diagonal) are recomputed: unrolled, a masked rank-1 update per column.
static tpr_value_t chol_info(tpr_graph_t* g, tpr_value_t a) {
  const tpr_type_t* t0 = ty(g, a);
  if (!t0) return TPR_VALUE_NONE;
  tpr_type_t t = *t0;
  int r = t.rank;
  int64_t n = t.dims[r - 1];
  tpr_type_t bt = retype(&t, TPR_DTYPE_S32);
  bt.rank = r - 2;
  tpr_value_t info = lw_full(g, 0, TPR_DTYPE_S32, &bt);
  tpr_value_t ri = rows(g, &t), ci = cols(g, &t);
  for (int64_t j = 0; j < n; j++) {
    tpr_value_t piv = block(g, a, j, j + 1, j, j + 1);
    tpr_value_t bad = tpr_unary(g, TPR_UNARY_NOT,
                                tpr_compare(g, TPR_CMP_GT, piv, lw_k(g, piv, 0)));
    tpr_value_t unset = tpr_compare(g, TPR_CMP_EQ, info, lw_full(g, 0, TPR_DTYPE_S32, &bt));
    info = tpr_select(g, tpr_binary(g, TPR_BINARY_AND, unset,
                                    tpr_reshape(g, bad, r - 2, bt.dims)),
                      lw_full(g, (double)(j + 1), TPR_DTYPE_S32, &bt), info);
    if (j + 1 == n) break;
    tpr_value_t safe = tpr_select(g, bad, lw_k(g, piv, 1), piv);
    tpr_value_t jj = lw_full(g, (double)j, TPR_DTYPE_S32, &t);
    tpr_value_t c = sel(g, tpr_compare(g, TPR_CMP_GT, ri, jj), col(g, a, j), kfull(g, 0, &t));
    tpr_value_t u = sel(g, tpr_compare(g, TPR_CMP_GT, ci, jj), row(g, a, j), kfull(g, 0, &t));
    a = lw_sub(g, a, lw_mul(g, lw_div(g, c, expand(g, safe, &t)), u));
  }
  return info;
}

// linalg_cholesky_ex(self, *, upper, check_errors) -> (L, info)
static tpr_status_t lower_cholesky_ex(lw_ctx_t* ctx) {
  if (lw_bool(ctx, 2, false)) return no_check_errors(ctx);
  tpr_value_t a;
  TPR_RETURN_IF_ERROR(square_arg(ctx, 0, out_dtype(ctx, 0), &a));
  tpr_graph_t* g = G;
  bool upper = lw_bool(ctx, 1, false);
  lw_set(ctx, 0, chol(g, a, upper));
  // The triangle potrf reads, mirrored.
  tpr_value_t sym = lw_add(g, tri(g, a, upper, 0), mT(g, tri(g, a, upper, upper ? 1 : -1)));
  lw_set(ctx, 1, chol_info(g, sym));
  return lw_done(ctx);
}

// cholesky_inverse(L, upper): (L L^T)^-1 = L^-T L^-1, (U^T U)^-1 = U^-1 U^-T.
static tpr_status_t lower_cholesky_inverse(lw_ctx_t* ctx) {
  tpr_value_t l;
  TPR_RETURN_IF_ERROR(square_arg(ctx, 0, out_dtype(ctx, 0), &l));
  tpr_graph_t* g = G;
  bool upper = lw_bool(ctx, 1, false);
  tpr_value_t x = tpr_triangular_solve(g, l, eye(g, ty(g, l)), true, !upper,
                                       false, false);
  return lw_ret(ctx, upper ? matmul(g, x, mT(g, x)) : matmul(g, mT(g, x), x));
}

// _cholesky_solve_helper(B, L, upper): L L^T X = B (or U^T U X = B).
static tpr_status_t lower_cholesky_solve(lw_ctx_t* ctx) {
  tpr_value_t b, l;
  tpr_dtype_t d = out_dtype(ctx, 0);
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, &b));
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 1, d, &l));
  bool upper = lw_bool(ctx, 2, false);
  tpr_value_t y = trsolve(G, l, b, true, !upper, false, upper);
  return lw_ret(ctx, trsolve(G, l, y, true, !upper, false, !upper));
}

// triangular_solve(B, A, upper, transpose, unitriangular) -> (X, A).
static tpr_status_t lower_triangular_solve(lw_ctx_t* ctx) {
  tpr_value_t b, a;
  tpr_dtype_t d = out_dtype(ctx, 0);
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, &b));
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 1, d, &a));
  bool upper = lw_bool(ctx, 2, true);
  lw_set(ctx, 0, trsolve(G, a, b, true, !upper, lw_bool(ctx, 4, false),
                         lw_bool(ctx, 3, false)));
  if (ctx->num_outs > 1)
    lw_set(ctx, 1, tpr_broadcast_to(G, a, ctx->out_types[1].rank,
                                    ctx->out_types[1].dims));
  return lw_done(ctx);
}

// linalg_solve_triangular(A, B, *, upper, left, unitriangular)
static tpr_status_t lower_solve_triangular(lw_ctx_t* ctx) {
  tpr_value_t a, b;
  tpr_dtype_t d = out_dtype(ctx, 0);
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, &a));
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 1, d, &b));
  return lw_ret(ctx, trsolve(G, a, b, lw_bool(ctx, 3, true),
                             !lw_bool(ctx, 2, false), lw_bool(ctx, 4, false),
                             false));
}

//===--- LU with partial pivoting ------------------------------------------===//

typedef struct lu_s {
  tpr_value_t lu;     // [..., m, n]: unit-lower L below the diagonal, U on and above
  tpr_value_t piv;    // s32 [..., k], 1-based (LAPACK ipiv)
  tpr_value_t perm;   // s32 [..., m, 1]: row i of P^T A is row perm[i] of A
  tpr_value_t info;   // s32 [...]: first zero pivot (1-based) or 0
} lu_t;

// Swaps rows |j| and |p| (s32 [..., 1, 1]) of |v| [..., m, c].
static tpr_value_t swap_rows(tpr_graph_t* g, tpr_value_t v, int64_t j,
                             tpr_value_t p) {
  const tpr_type_t* t = ty(g, v);
  if (!t) return TPR_VALUE_NONE;
  tpr_type_t rt = *t;
  rt.dims[rt.rank - 2] = 1;
  tpr_type_t it = retype(&rt, TPR_DTYPE_S64);
  tpr_value_t idx = expand(g, tpr_convert(g, p, TPR_DTYPE_S64), &it);
  tpr_value_t rp = tpr_gather_along(g, v, t->rank - 2, idx);
  tpr_value_t rj = row(g, v, j);
  tpr_value_t r = rows(g, t);
  tpr_value_t is_j = tpr_compare(g, TPR_CMP_EQ, r, lw_full(g, (double)j, TPR_DTYPE_S32, t));
  tpr_type_t ts = retype(t, TPR_DTYPE_S32);
  tpr_value_t is_p = tpr_compare(g, TPR_CMP_EQ, r, expand(g, p, &ts));
  return sel(g, is_j, rp, sel(g, is_p, rj, v));
}

// getrf on |a| [..., m, n] (f32/f64), unrolled over min(m, n) columns.
static lu_t lu_factor(tpr_graph_t* g, tpr_value_t a) {
  lu_t out = {TPR_VALUE_NONE, TPR_VALUE_NONE, TPR_VALUE_NONE, TPR_VALUE_NONE};
  const tpr_type_t* t0 = ty(g, a);
  if (!t0) return out;
  tpr_type_t t = *t0;
  int r = t.rank;
  int64_t m = t.dims[r - 2], n = t.dims[r - 1], k = m < n ? m : n;
  tpr_type_t ct = t;  // [..., m, 1]
  ct.dims[r - 1] = 1;
  tpr_type_t ci = retype(&ct, TPR_DTYPE_S32);
  tpr_type_t bt = ci;  // [...]
  bt.rank = r - 2;
  tpr_value_t perm = tpr_iota(g, ci, r - 2);
  tpr_value_t info = lw_full(g, 0, TPR_DTYPE_S32, &bt);
  tpr_value_t pivs[kMaxSteps];
  tpr_value_t row_i = rows(g, &t), col_i = cols(g, &t);
  tpr_value_t crow = tpr_iota(g, ci, r - 2);
  for (int64_t j = 0; j < k; j++) {
    // Pivot: the first largest |entry| on or below the diagonal.
    tpr_value_t c = col(g, a, j);
    tpr_value_t cand = tpr_select(
        g, tpr_compare(g, TPR_CMP_GE, crow, lw_full(g, (double)j, TPR_DTYPE_S32, &ci)),
        tpr_unary(g, TPR_UNARY_ABS, c), kfull(g, -1, &ct));
    tpr_value_t mx, p;
    tpr_argreduce(g, cand, r - 2, true, &mx, &p);  // p: s64 [..., 1]
    tpr_type_t pt = ct;
    pt.dims[r - 2] = 1;
    pt.dtype = TPR_DTYPE_S32;
    p = tpr_reshape(g, tpr_convert(g, p, TPR_DTYPE_S32), r, pt.dims);
    a = swap_rows(g, a, j, p);
    perm = swap_rows(g, perm, j, p);
    tpr_type_t p1 = pt;
    p1.rank = r - 1;
    p1.dims[r - 2] = 1;
    if (j < kMaxSteps)
      pivs[j] = tpr_binary(g, TPR_BINARY_ADD, tpr_reshape(g, p, r - 1, p1.dims),
                           lw_full(g, 1, TPR_DTYPE_S32, &p1));
    // Eliminate below the pivot.
    tpr_value_t piv = block(g, a, j, j + 1, j, j + 1);
    tpr_value_t zero = tpr_compare(g, TPR_CMP_EQ, piv, lw_k(g, piv, 0));
    tpr_value_t below = tpr_compare(g, TPR_CMP_GT, crow,
                                    lw_full(g, (double)j, TPR_DTYPE_S32, &ci));
    c = col(g, a, j);
    tpr_value_t safe = tpr_select(g, zero, lw_k(g, piv, 1), piv);
    tpr_type_t cb = retype(&ct, TPR_DTYPE_BOOL);
    tpr_value_t l = tpr_select(
        g, tpr_binary(g, TPR_BINARY_AND, below,
                      expand(g, tpr_unary(g, TPR_UNARY_NOT, zero), &cb)),
        tpr_binary(g, TPR_BINARY_DIV, c, expand(g, safe, &ct)), kfull(g, 0, &ct));
    tpr_type_t rt = t;
    rt.dims[r - 2] = 1;
    tpr_type_t ri = retype(&rt, TPR_DTYPE_S32);
    tpr_value_t u = tpr_select(
        g, tpr_compare(g, TPR_CMP_GT, tpr_iota(g, ri, r - 1),
                       lw_full(g, (double)j, TPR_DTYPE_S32, &ri)),
        row(g, a, j), kfull(g, 0, &rt));
    a = tpr_binary(g, TPR_BINARY_SUB, a,
                   tpr_binary(g, TPR_BINARY_MUL, expand(g, l, &t), expand(g, u, &t)));
    tpr_value_t put = tpr_binary(
        g, TPR_BINARY_AND,
        tpr_compare(g, TPR_CMP_GT, row_i, lw_full(g, (double)j, TPR_DTYPE_S32, &t)),
        tpr_compare(g, TPR_CMP_EQ, col_i, lw_full(g, (double)j, TPR_DTYPE_S32, &t)));
    a = sel(g, put, l, a);
    // info: the first zero pivot.
    tpr_value_t z = tpr_reshape(g, zero, r - 2, bt.dims);
    tpr_value_t unset = tpr_compare(g, TPR_CMP_EQ, info, lw_full(g, 0, TPR_DTYPE_S32, &bt));
    info = tpr_select(g, tpr_binary(g, TPR_BINARY_AND, z, unset),
                      lw_full(g, (double)(j + 1), TPR_DTYPE_S32, &bt), info);
  }
  out.lu = a;
  out.perm = perm;
  out.info = info;
  if (k == 0) {
    tpr_type_t e = bt;
    e.rank = r - 1;
    e.dims[r - 2] = 0;
    out.piv = lw_full(g, 0, TPR_DTYPE_S32, &e);
  } else {
    out.piv = tpr_concatenate(g, pivs, (int)k, r - 2);
  }
  return out;
}

// linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info)
static tpr_status_t lower_lu_factor_ex(lw_ctx_t* ctx) {
  if (lw_bool(ctx, 2, false)) return no_check_errors(ctx);
  if (!lw_bool(ctx, 1, true))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "LU without pivoting");
  tpr_value_t a;
  TPR_RETURN_IF_ERROR(small_mat_arg(ctx, 0, out_dtype(ctx, 0), &a));
  lu_t f = lu_factor(G, a);
  lw_set(ctx, 0, f.lu);
  lw_set(ctx, 1, f.piv);
  lw_set(ctx, 2, f.info);
  return lw_done(ctx);
}

// P (one-hot of |perm| [..., m, 1]) of |t|'s dtype, [..., m, m]: A = P L U.
static tpr_value_t perm_matrix(tpr_graph_t* g, tpr_value_t perm,
                               tpr_dtype_t d) {
  const tpr_type_t* tp = ty(g, perm);
  if (!tp) return TPR_VALUE_NONE;
  tpr_type_t sq = *tp;
  sq.dims[sq.rank - 1] = sq.dims[sq.rank - 2];
  // P[r, i] = (perm[i] == r)
  tpr_value_t pi = expand(g, mT(g, perm), &sq);
  return tpr_convert(g, tpr_compare(g, TPR_CMP_EQ, pi, rows(g, &sq)), d);
}

// L [..., m, k] (unit lower) and U [..., k, n] of a packed LU.
static void unpack_lu(tpr_graph_t* g, tpr_value_t lu, tpr_value_t* l,
                      tpr_value_t* u) {
  const tpr_type_t* t = ty(g, lu);
  if (!t) {
    *l = *u = TPR_VALUE_NONE;
    return;
  }
  int64_t m = t->dims[t->rank - 2], n = t->dims[t->rank - 1];
  int64_t k = m < n ? m : n;
  tpr_value_t lb = block(g, lu, 0, m, 0, k);
  *l = tpr_binary(g, TPR_BINARY_ADD, tri(g, lb, false, -1), eye(g, ty(g, lb)));
  *u = tri(g, block(g, lu, 0, k, 0, n), true, 0);
}

// linalg_lu(A, *, pivot) -> (P, L, U)
static tpr_status_t lower_linalg_lu(lw_ctx_t* ctx) {
  if (!lw_bool(ctx, 1, true))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "LU without pivoting");
  tpr_value_t a, l, u;
  tpr_dtype_t d = out_dtype(ctx, 1);
  TPR_RETURN_IF_ERROR(small_mat_arg(ctx, 0, d, &a));
  lu_t f = lu_factor(G, a);
  unpack_lu(G, f.lu, &l, &u);
  lw_set(ctx, 0, perm_matrix(G, f.perm, d));
  lw_set(ctx, 1, l);
  lw_set(ctx, 2, u);
  return lw_done(ctx);
}

// The row permutation [..., m, 1] that LAPACK |piv| (s32 [..., k],
// 1-based) applies: the swaps replayed on an iota.
static tpr_value_t perm_of_pivots(tpr_graph_t* g, tpr_value_t piv, int64_t m) {
  const tpr_type_t* tp = ty(g, piv);
  if (!tp) return TPR_VALUE_NONE;
  int r = tp->rank + 1;
  tpr_type_t ci = *tp;
  ci.rank = r;
  ci.dims[r - 2] = m;
  ci.dims[r - 1] = 1;
  ci.dtype = TPR_DTYPE_S32;
  tpr_value_t perm = tpr_iota(g, ci, r - 2);
  piv = tpr_convert(g, piv, TPR_DTYPE_S32);
  int64_t k = tp->dims[tp->rank - 1];
  for (int64_t j = 0; j < k; j++) {
    int64_t s[TPR_MAX_RANK] = {0}, l[TPR_MAX_RANK], st[TPR_MAX_RANK];
    for (int i = 0; i < tp->rank; i++) l[i] = tp->dims[i], st[i] = 1;
    s[tp->rank - 1] = j, l[tp->rank - 1] = j + 1;
    tpr_type_t pt = ci;
    pt.dims[r - 2] = 1;
    tpr_value_t p = tpr_reshape(g, tpr_slice(g, piv, s, l, st), r, pt.dims);
    p = tpr_binary(g, TPR_BINARY_SUB, p, lw_full(g, 1, TPR_DTYPE_S32, &pt));
    perm = swap_rows(g, perm, j, p);
  }
  return perm;
}

// lu_unpack(LU, pivots, unpack_data, unpack_pivots) -> (P, L, U); parts not
// asked for are empty.
static tpr_status_t lower_lu_unpack(lw_ctx_t* ctx) {
  tpr_value_t lu, l, u;
  tpr_dtype_t d = out_dtype(ctx, 1);
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, &lu));
  const tpr_type_t* tp = lw_arg_type(ctx, 1);
  if (!tp || tp->rank < 1 || !lw_is_int(tp->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "pivots must be integers");
  const tpr_type_t* t = ty(G, lu);
  int64_t m = t->dims[t->rank - 2];
  for (int i = 0; i < 3; i++) {
    if (tpr_type_numel(&ctx->out_types[i]) == 0) {
      lw_set(ctx, i, lw_full(G, 0, ctx->out_types[i].dtype, &ctx->out_types[i]));
      continue;
    }
    if (i == 0) {
      if (tp->dims[tp->rank - 1] > kMaxSteps)
        return lw_fail(ctx, TPR_UNIMPLEMENTED, "more than %d pivots", kMaxSteps);
      tpr_value_t p = perm_matrix(G, perm_of_pivots(G, lw_value(ctx, 1), m), d);
      lw_set(ctx, 0, tpr_broadcast_to(G, p, ctx->out_types[0].rank,
                                      ctx->out_types[0].dims));
    } else {
      unpack_lu(G, lu, &l, &u);
      lw_set(ctx, i, i == 1 ? l : u);
    }
  }
  return lw_done(ctx);
}

// |b| [..., m, c] with rows gathered by |perm| [..., m, 1]: row i = b[perm[i]].
static tpr_value_t gather_rows(tpr_graph_t* g, tpr_value_t b, tpr_value_t perm) {
  const tpr_type_t* t = ty(g, b);
  if (!t) return TPR_VALUE_NONE;
  tpr_type_t it = retype(t, TPR_DTYPE_S64);
  return tpr_gather_along(g, b, t->rank - 2,
                          expand(g, tpr_convert(g, perm, TPR_DTYPE_S64), &it));
}

// The inverse permutation of |perm| [..., m, 1]: inv[perm[i]] = i.
static tpr_value_t invert_perm(tpr_graph_t* g, tpr_value_t perm) {
  const tpr_type_t* tp = ty(g, perm);
  if (!tp) return TPR_VALUE_NONE;
  tpr_type_t sq = *tp;
  sq.dims[sq.rank - 1] = sq.dims[sq.rank - 2];
  // onehot[r, i] = perm[i] == r; inv[r] = sum_i i * onehot[r, i]
  tpr_value_t hit = tpr_compare(g, TPR_CMP_EQ, expand(g, mT(g, perm), &sq),
                                rows(g, &sq));
  tpr_value_t v = tpr_select(g, hit, cols(g, &sq), lw_full(g, 0, TPR_DTYPE_S32, &sq));
  int64_t last = sq.rank - 1;
  return tpr_reshape(g, tpr_reduce(g, v, TPR_REDUCE_SUM, &last, 1), tp->rank,
                     tp->dims);
}

// X with A X = B (|adjoint|: A^T X = B) from A's LU and row permutation;
// all of one batch.
static tpr_value_t lu_solve_left(tpr_graph_t* g, tpr_value_t lu,
                                 tpr_value_t perm, tpr_value_t b, bool adjoint) {
  if (!adjoint) {
    tpr_value_t y = tpr_triangular_solve(g, lu, gather_rows(g, b, perm), true,
                                         true, true, false);
    return tpr_triangular_solve(g, lu, y, true, false, false, false);
  }
  tpr_value_t y = tpr_triangular_solve(g, lu, b, true, false, false, true);
  y = tpr_triangular_solve(g, lu, y, true, true, true, true);
  return gather_rows(g, y, invert_perm(g, perm));
}

// X with A X = B, or X A = B when !|left|; |adjoint| solves with A^T.
static tpr_value_t lu_solve(tpr_graph_t* g, tpr_value_t lu, tpr_value_t perm,
                            tpr_value_t b, bool left, bool adjoint) {
  if (left) return lu_solve_left(g, lu, perm, b, adjoint);
  return mT(g, lu_solve_left(g, lu, perm, mT(g, b), !adjoint));
}

// linalg_lu_solve(LU, pivots, B, *, left, adjoint)
static tpr_status_t lower_lu_solve(lw_ctx_t* ctx) {
  tpr_value_t lu, b;
  tpr_dtype_t d = out_dtype(ctx, 0);
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, &lu));
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 2, d, &b));
  const tpr_type_t* tp = lw_arg_type(ctx, 1);
  if (!tp || !lw_is_int(tp->dtype) || tp->dims[tp->rank - 1] > kMaxSteps)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "pivots must be at most %d integers",
                   kMaxSteps);
  const tpr_type_t* o = &ctx->out_types[0];
  int nb = o->rank - 2;
  tpr_graph_t* g = G;
  const tpr_type_t* tl = lw_arg_type(ctx, 0);
  int64_t m = tl->dims[tl->rank - 2];
  lu = to_batch(g, lu, o->dims, nb);
  tpr_value_t perm = to_batch(g, perm_of_pivots(g, lw_value(ctx, 1), m), o->dims, nb);
  b = to_batch(g, b, o->dims, nb);
  return lw_ret(ctx, lu_solve(g, lu, perm, b, lw_bool(ctx, 3, true),
                              lw_bool(ctx, 4, false)));
}

// linalg_inv_ex(A, *, check_errors) -> (inverse, info)
static tpr_status_t lower_inv_ex(lw_ctx_t* ctx) {
  if (lw_bool(ctx, 1, false)) return no_check_errors(ctx);
  tpr_value_t a;
  TPR_RETURN_IF_ERROR(square_arg(ctx, 0, out_dtype(ctx, 0), &a));
  lu_t f = lu_factor(G, a);
  lw_set(ctx, 0, lu_solve(G, f.lu, f.perm, eye(G, ty(G, a)), true, false));
  lw_set(ctx, 1, f.info);
  return lw_done(ctx);
}

//===--- Householder QR ----------------------------------------------------===//

// Reflector j of a geqrf-packed |a| [..., m, n]: v [..., m, 1] with zeros
// above row j, one at row j, a's column j below it.
static tpr_value_t reflector(tpr_graph_t* g, tpr_value_t a, int64_t j) {
  tpr_value_t c = col(g, a, j);
  const tpr_type_t* t = ty(g, c);
  if (!t) return TPR_VALUE_NONE;
  tpr_value_t r = rows(g, t);
  tpr_value_t jj = lw_full(g, (double)j, TPR_DTYPE_S32, t);
  return tpr_select(g, tpr_compare(g, TPR_CMP_EQ, r, jj), kfull(g, 1, t),
                    tpr_select(g, tpr_compare(g, TPR_CMP_GT, r, jj), c,
                               kfull(g, 0, t)));
}

// (I - tau v v^T) c from the left ([..., m, c]) or c (I - tau v v^T) from
// the right ([..., c, m]); |tau| is [..., 1, 1].
static tpr_value_t reflect(tpr_graph_t* g, tpr_value_t c, tpr_value_t v,
                           tpr_value_t tau, bool left) {
  const tpr_type_t* t = ty(g, c);
  if (!t) return TPR_VALUE_NONE;
  tpr_value_t tv = tpr_binary(g, TPR_BINARY_MUL, v, expand(g, tau, ty(g, v)));
  if (left)  // c - (tau v) (v^T c)
    return lw_sub(g, c, matmul(g, tv, matmul(g, mT(g, v), c)));
  return lw_sub(g, c, matmul(g, matmul(g, c, v), mT(g, tv)));
}

// geqrf on |a| [..., m, n]: R on and above the diagonal, reflectors below,
// and tau [..., k]. LAPACK's dlarfg: for x = a[j:, j] = (alpha, x'),
// beta = -sign(alpha) |x|, tau = (beta - alpha) / beta, v = x' / (alpha -
// beta); tau = 0 (H = I) when x' is zero.
static void geqrf(tpr_graph_t* g, tpr_value_t a, tpr_value_t* out_a,
                  tpr_value_t* out_tau) {
  *out_a = *out_tau = TPR_VALUE_NONE;
  const tpr_type_t* t0 = ty(g, a);
  if (!t0) return;
  tpr_type_t t = *t0;
  int r = t.rank;
  int64_t m = t.dims[r - 2], n = t.dims[r - 1], k = m < n ? m : n;
  tpr_value_t taus[kMaxSteps];
  tpr_type_t ct = t;
  ct.dims[r - 1] = 1;
  tpr_value_t crow = rows(g, &ct);
  tpr_type_t st = ct;  // [..., 1, 1]
  st.dims[r - 2] = 1;
  for (int64_t j = 0; j < k; j++) {
    tpr_value_t c = col(g, a, j);
    tpr_value_t below = tpr_select(
        g, tpr_compare(g, TPR_CMP_GT, crow, lw_full(g, (double)j, TPR_DTYPE_S32, &ct)),
        c, kfull(g, 0, &ct));
    int64_t rd = r - 2;
    tpr_value_t xn2 = tpr_reshape(
        g, tpr_reduce(g, lw_mul(g, below, below), TPR_REDUCE_SUM, &rd, 1), r,
        st.dims);
    tpr_value_t alpha = block(g, a, j, j + 1, j, j + 1);
    tpr_value_t norm = tpr_unary(g, TPR_UNARY_SQRT,
                                 lw_add(g, lw_mul(g, alpha, alpha), xn2));
    tpr_value_t neg = tpr_compare(g, TPR_CMP_LT, alpha, kfull(g, 0, &st));
    tpr_value_t beta = tpr_select(g, neg, norm, tpr_unary(g, TPR_UNARY_NEG, norm));
    tpr_value_t trivial = tpr_compare(g, TPR_CMP_EQ, xn2, kfull(g, 0, &st));
    tpr_value_t one = kfull(g, 1, &st);
    tpr_value_t sb = tpr_select(g, trivial, one, beta);
    tpr_value_t tau = tpr_select(g, trivial, kfull(g, 0, &st),
                                 lw_div(g, lw_sub(g, beta, alpha), sb));
    tpr_value_t den = tpr_select(g, trivial, one, lw_sub(g, alpha, beta));
    tpr_value_t vb = lw_div(g, below, expand(g, den, &ct));
    tpr_value_t v = lw_add(g, vb, tpr_convert(g, tpr_compare(g, TPR_CMP_EQ, crow,
        lw_full(g, (double)j, TPR_DTYPE_S32, &ct)), t.dtype));
    // Apply H to the columns right of j, then store beta and v in column j.
    tpr_value_t h = reflect(g, a, v, tau, true);
    tpr_value_t cidx = cols(g, &t);
    tpr_value_t right = tpr_compare(g, TPR_CMP_GT, cidx,
                                    lw_full(g, (double)j, TPR_DTYPE_S32, &t));
    tpr_value_t colj = tpr_compare(g, TPR_CMP_EQ, cidx,
                                   lw_full(g, (double)j, TPR_DTYPE_S32, &t));
    tpr_value_t newc = tpr_select(
        g, tpr_compare(g, TPR_CMP_EQ, crow, lw_full(g, (double)j, TPR_DTYPE_S32, &ct)),
        expand(g, tpr_select(g, trivial, alpha, beta), &ct),
        tpr_select(g, tpr_compare(g, TPR_CMP_GT, crow,
                                  lw_full(g, (double)j, TPR_DTYPE_S32, &ct)),
                   vb, c));
    a = tpr_select(g, right, h, sel(g, colj, newc, a));
    tpr_type_t s1 = st;
    s1.rank = r - 1;
    taus[j] = tpr_reshape(g, tau, r - 1, s1.dims);
  }
  *out_a = a;
  if (k == 0) {
    tpr_type_t e = st;
    e.rank = r - 1;
    e.dims[r - 2] = 0;
    *out_tau = kfull(g, 0, &e);
  } else {
    *out_tau = tpr_concatenate(g, taus, (int)k, r - 2);
  }
}

// tau[..., j] as [..., 1, 1].
static tpr_value_t tau_at(tpr_graph_t* g, tpr_value_t tau, int64_t j) {
  const tpr_type_t* t = ty(g, tau);
  if (!t) return TPR_VALUE_NONE;
  int64_t s[TPR_MAX_RANK] = {0}, l[TPR_MAX_RANK], st[TPR_MAX_RANK];
  int64_t d[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) l[i] = d[i] = t->dims[i], st[i] = 1;
  s[t->rank - 1] = j, l[t->rank - 1] = j + 1;
  d[t->rank - 1] = 1, d[t->rank] = 1;
  return tpr_reshape(g, tpr_slice(g, tau, s, l, st), t->rank + 1, d);
}

// H_0 ... H_{k-1} c (|left|, |!trans|) and the other three products
// (ormqr's semantics), for reflectors packed in |v| [..., m, >=k].
static tpr_value_t apply_q(tpr_graph_t* g, tpr_value_t v, tpr_value_t tau,
                           tpr_value_t c, bool left, bool trans) {
  const tpr_type_t* tt = ty(g, tau);
  if (!tt) return TPR_VALUE_NONE;
  int64_t k = tt->dims[tt->rank - 1];
  // Q c applies H_{k-1} first; Q^T c, c Q apply H_0 first; c Q^T H_{k-1}.
  bool backward = left != trans;
  for (int64_t s = 0; s < k; s++) {
    int64_t j = backward ? k - 1 - s : s;
    c = reflect(g, c, reflector(g, v, j), tau_at(g, tau, j), left);
  }
  return c;
}

// geqrf(self) -> (a, tau)
static tpr_status_t lower_geqrf(lw_ctx_t* ctx) {
  tpr_value_t a, qa, tau;
  TPR_RETURN_IF_ERROR(small_mat_arg(ctx, 0, out_dtype(ctx, 0), &a));
  geqrf(G, a, &qa, &tau);
  lw_set(ctx, 0, qa);
  lw_set(ctx, 1, tau);
  return lw_done(ctx);
}

// Columns of |v| and tau's batch broadcast to the out batch.
static tpr_status_t reflector_args(lw_ctx_t* ctx, tpr_value_t* v,
                                   tpr_value_t* tau) {
  tpr_dtype_t d = out_dtype(ctx, 0);
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, v));
  const tpr_type_t* tt = lw_arg_type(ctx, 1);
  if (!tt || tt->rank < 1 || tt->dims[tt->rank - 1] > kMaxSteps)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "tau must have at most %d entries",
                   kMaxSteps);
  const tpr_type_t* tv = lw_arg_type(ctx, 0);
  if (tt->dims[tt->rank - 1] > tv->dims[tv->rank - 1])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "more taus than reflectors");
  *tau = lw_cast(G, lw_value(ctx, 1), d);
  return tpr_ok_status();
}

// linalg_householder_product(input [..., m, n], tau [..., k]): the first n
// columns of H_0 ... H_{k-1}.
static tpr_status_t lower_householder_product(lw_ctx_t* ctx) {
  tpr_value_t v, tau;
  TPR_RETURN_IF_ERROR(reflector_args(ctx, &v, &tau));
  return lw_ret(ctx, apply_q(G, v, tau, eye(G, ty(G, v)), true, false));
}

// ormqr(input, tau, other, left, transpose): op(Q) other or other op(Q).
static tpr_status_t lower_ormqr(lw_ctx_t* ctx) {
  tpr_value_t v, tau, c;
  TPR_RETURN_IF_ERROR(reflector_args(ctx, &v, &tau));
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 2, out_dtype(ctx, 0), &c));
  const tpr_type_t* tv = lw_arg_type(ctx, 0);
  const tpr_type_t* tc = lw_arg_type(ctx, 2);
  bool left = lw_bool(ctx, 3, true);
  if (tv->rank != tc->rank ||
      tv->dims[tv->rank - 2] != tc->dims[tc->rank - (left ? 2 : 1)])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "shapes do not fit");
  return lw_ret(ctx, apply_q(G, v, tau, c, left, lw_bool(ctx, 4, false)));
}

// linalg_qr(A, mode) -> (Q, R): "reduced" Q [m, k], R [k, n]; "complete"
// Q [m, m], R [m, n]; "r" no Q (empty).
static tpr_status_t lower_linalg_qr(lw_ctx_t* ctx) {
  tpr_value_t a, qa, tau;
  tpr_dtype_t d = out_dtype(ctx, 1);
  TPR_RETURN_IF_ERROR(small_mat_arg(ctx, 0, d, &a));
  const char* mode = lw_str(ctx, 1, "reduced");
  tpr_graph_t* g = G;
  geqrf(g, a, &qa, &tau);
  const tpr_type_t* ro = &ctx->out_types[1];
  lw_set(ctx, 1, tri(g, block(g, qa, 0, ro->dims[ro->rank - 2], 0,
                              ro->dims[ro->rank - 1]), true, 0));
  const tpr_type_t* qo = &ctx->out_types[0];
  if (strcmp(mode, "r") == 0 || tpr_type_numel(qo) == 0) {
    lw_set(ctx, 0, kfull(g, 0, qo));
  } else {
    tpr_type_t qt = *qo;
    qt.dtype = d;
    lw_set(ctx, 0, apply_q(g, qa, tau, eye(g, &qt), true, false));
  }
  return lw_done(ctx);
}

//===--- Jacobi: symmetric eigendecomposition and SVD -----------------------===//
//
// Parallel cyclic Jacobi (round-robin pairing): each round rotates n/2
// disjoint index pairs at once, J = diag(c) + the paired entries +-s, so a
// round is a few whole-matrix ops and two or three matmuls. eigh rotates
// A <- J^T A J; the SVD is one-sided (Hestenes): W <- W J on the columns,
// rotations computed from the column Gram entries, which keeps the small
// singular values' relative accuracy (an eigh of A^T A would not). Rotation
// parameters follow Golub & Van Loan's sym.schur2. A fixed number of
// sweeps, enough for convergence at these sizes (Jacobi converges
// quadratically), keeps the graph static.

enum { kMaxJacobi = 32 };

// Sweeps for an n x n problem in dtype d.
static int jacobi_sweeps(int64_t n, tpr_dtype_t d) {
  int s = 6 + (d == TPR_DTYPE_F64 ? 3 : 0);
  for (int64_t k = 1; k < n; k *= 2) s++;
  return s;
}

// Round |r| of the round-robin schedule on n' = n rounded up to even
// players: partner[i] (i itself when paired with the phantom player of an
// odd n) and sign[i] = +1 if i is the pair's first index, -1 second, 0 none.
static void schedule(int64_t n, int64_t r, int32_t* partner, int32_t* sign) {
  int64_t np = n + (n & 1), m = np - 1;
  int64_t pos[kMaxJacobi + 1];
  pos[0] = np - 1;  // fixed player
  for (int64_t i = 0; i < m; i++) pos[i + 1] = (r + i) % m;
  for (int64_t i = 0; i < np / 2; i++) {
    int64_t a = pos[i], b = pos[np - 1 - i];
    int64_t lo = a < b ? a : b, hi = a < b ? b : a;
    if (hi >= n) {  // phantom
      partner[lo] = (int32_t)lo, sign[lo] = 0;
      continue;
    }
    partner[lo] = (int32_t)hi, sign[lo] = 1;
    partner[hi] = (int32_t)lo, sign[hi] = -1;
  }
}

// A constant s32 [n] broadcast along |t|'s batch dims to [..., n] (rank =
// t->rank - 1) or, with |as_col|, [..., n, 1].
static tpr_value_t const_vec(tpr_graph_t* g, const int32_t* v, int64_t n,
                             const tpr_type_t* t, bool as_col) {
  tpr_type_t c = tpr_type_make(TPR_DTYPE_S32, 1, &n);
  tpr_value_t k = tpr_constant_dense(g, c, v);
  int64_t dims[TPR_MAX_RANK];
  int r = t->rank - 1 + (as_col ? 1 : 0);
  for (int i = 0; i < t->rank - 2; i++) dims[i] = t->dims[i];
  dims[t->rank - 2] = n;
  if (as_col) dims[t->rank - 1] = 1;
  int64_t bd = t->rank - 2;
  return tpr_broadcast_in_dim(g, k, r, dims, &bd);
}

// The rotation J [..., n, n] of one round from the diagonal-like |d| and the
// paired off-diagonal |apq| (both [..., n]); |t| is J's type.
static tpr_value_t rotation(tpr_graph_t* g, tpr_value_t d, tpr_value_t apq,
                            const int32_t* partner, const int32_t* sign,
                            const tpr_type_t* t) {
  int64_t n = t->dims[t->rank - 1];
  const tpr_type_t* tv = ty(g, d);
  if (!tv) return TPR_VALUE_NONE;
  tpr_value_t pidx = tpr_convert(g, const_vec(g, partner, n, t, false), TPR_DTYPE_S64);
  tpr_value_t sg = tpr_convert(g, const_vec(g, sign, n, t, false), t->dtype);
  tpr_value_t dp = tpr_gather_along(g, d, tv->rank - 1, pidx);
  tpr_value_t zero = kfull(g, 0, tv), one = kfull(g, 1, tv);
  tpr_value_t active = tpr_binary(
      g, TPR_BINARY_AND, tpr_compare(g, TPR_CMP_NE, sg, zero),
      tpr_compare(g, TPR_CMP_NE, apq, zero));
  tpr_value_t safe = tpr_select(g, active, apq, one);
  tpr_value_t theta = lw_div(g, lw_mul(g, sg, lw_sub(g, dp, d)),
                             lw_mul(g, kfull(g, 2, tv), safe));
  tpr_value_t sgn = tpr_select(g, tpr_compare(g, TPR_CMP_GE, theta, zero), one,
                               kfull(g, -1, tv));
  tpr_value_t tt = lw_div(
      g, sgn,
      lw_add(g, tpr_unary(g, TPR_UNARY_ABS, theta),
             tpr_unary(g, TPR_UNARY_SQRT, lw_add(g, lw_mul(g, theta, theta), one))));
  tt = tpr_select(g, active, tt, zero);
  tpr_value_t c = tpr_unary(g, TPR_UNARY_RSQRT, lw_add(g, lw_mul(g, tt, tt), one));
  tpr_value_t sv = lw_mul(g, lw_mul(g, tt, c), sg);
  // J = diag(c) + P (.) s*sign per row, P[i, j] = (j == partner[i]).
  int64_t cd[TPR_MAX_RANK];
  for (int i = 0; i < t->rank - 1; i++) cd[i] = t->dims[i];
  cd[t->rank - 1] = 1;
  tpr_value_t ccol = tpr_reshape(g, c, t->rank, cd);
  tpr_value_t scol = tpr_reshape(g, sv, t->rank, cd);
  tpr_type_t ti = retype(t, TPR_DTYPE_S32);
  tpr_value_t pm = tpr_compare(g, TPR_CMP_EQ, cols(g, t),
                               expand(g, const_vec(g, partner, n, t, true), &ti));
  tpr_value_t dm = tpr_compare(g, TPR_CMP_EQ, cols(g, t), rows(g, t));
  tpr_value_t z = kfull(g, 0, t);
  return lw_add(g, sel(g, dm, ccol, z),
                sel(g, tpr_binary(g, TPR_BINARY_AND, pm, tpr_unary(g, TPR_UNARY_NOT, dm)),
                    scol, z));
}

// |v| [..., r, n] with columns permuted: column j = v[:, idx[j]] (idx s64
// [..., n]).
static tpr_value_t gather_cols(tpr_graph_t* g, tpr_value_t v, tpr_value_t idx) {
  const tpr_type_t* t = ty(g, v);
  const tpr_type_t* ti = ty(g, idx);
  if (!t || !ti) return TPR_VALUE_NONE;
  int64_t d[TPR_MAX_RANK];
  for (int i = 0; i < t->rank - 2; i++) d[i] = t->dims[i];
  d[t->rank - 2] = 1, d[t->rank - 1] = t->dims[t->rank - 1];
  tpr_type_t it = retype(t, TPR_DTYPE_S64);
  return tpr_gather_along(g, v, t->rank - 1,
                          expand(g, tpr_reshape(g, idx, t->rank, d), &it));
}

// Sorts |w| [..., n] (ascending, or descending) and permutes the columns
// of each of |vs| (NONE entries skipped) the same way.
static tpr_value_t sort_with(tpr_graph_t* g, tpr_value_t w, bool descending,
                             tpr_value_t* vs, int nv) {
  const tpr_type_t* t = ty(g, w);
  if (!t) return TPR_VALUE_NONE;
  tpr_type_t it = retype(t, TPR_DTYPE_S64);
  tpr_value_t ops[2] = {w, tpr_iota(g, it, t->rank - 1)}, out[2];
  tpr_sort(g, ops, 2, t->rank - 1, descending, out);
  for (int i = 0; i < nv; i++)
    if (vs[i] != TPR_VALUE_NONE) vs[i] = gather_cols(g, vs[i], out[1]);
  return out[0];
}

// Eigen-decomposition of the symmetric |a| [..., n, n]: ascending
// eigenvalues [..., n] and eigenvectors as columns.
static void jacobi_eigh(tpr_graph_t* g, tpr_value_t a, tpr_value_t* w,
                        tpr_value_t* v) {
  const tpr_type_t* t0 = ty(g, a);
  if (!t0) return;
  tpr_type_t t = *t0;
  int64_t n = t.dims[t.rank - 1];
  tpr_value_t vv = eye(g, &t);
  int32_t partner[kMaxJacobi], sign[kMaxJacobi];
  int sweeps = jacobi_sweeps(n, t.dtype);
  int64_t rounds = n < 2 ? 0 : n + (n & 1) - 1;
  for (int s = 0; s < sweeps; s++) {
    for (int64_t r = 0; r < rounds; r++) {
      schedule(n, r, partner, sign);
      tpr_value_t d = diag(g, a);
      tpr_value_t pcol = tpr_convert(g, const_vec(g, partner, n, &t, true), TPR_DTYPE_S64);
      tpr_value_t apq = tpr_reshape(
          g, tpr_gather_along(g, a, t.rank - 1, pcol), t.rank - 1, t.dims);
      tpr_value_t j = rotation(g, d, apq, partner, sign, &t);
      a = matmul(g, mT(g, j), matmul(g, a, j));
      vv = matmul(g, vv, j);
    }
  }
  *v = vv;
  *w = sort_with(g, diag(g, a), false, v, 1);
}

// One-sided Jacobi SVD of |a| [..., m, n], m >= n: singular values [..., n]
// descending, U [..., m, n] (columns of zero singular values are zero) and
// V [..., n, n].
static void jacobi_svd(tpr_graph_t* g, tpr_value_t a, tpr_value_t* s,
                       tpr_value_t* u, tpr_value_t* v) {
  const tpr_type_t* t0 = ty(g, a);
  if (!t0) return;
  tpr_type_t t = *t0;
  int r = t.rank;
  int64_t n = t.dims[r - 1];
  tpr_type_t sq = t;
  sq.dims[r - 2] = n;
  tpr_value_t vv = eye(g, &sq);
  int32_t partner[kMaxJacobi], sign[kMaxJacobi];
  int sweeps = jacobi_sweeps(n, t.dtype);
  int64_t rounds = n < 2 ? 0 : n + (n & 1) - 1;
  int64_t rd = r - 2;
  for (int sw = 0; sw < sweeps; sw++) {
    for (int64_t k = 0; k < rounds; k++) {
      schedule(n, k, partner, sign);
      tpr_value_t norms = tpr_reduce(g, lw_mul(g, a, a), TPR_REDUCE_SUM, &rd, 1);
      tpr_value_t pidx = tpr_convert(g, const_vec(g, partner, n, &t, false), TPR_DTYPE_S64);
      tpr_value_t ap = gather_cols(g, a, pidx);
      tpr_value_t gam = tpr_reduce(g, lw_mul(g, a, ap), TPR_REDUCE_SUM, &rd, 1);
      tpr_value_t j = rotation(g, norms, gam, partner, sign, &sq);
      a = matmul(g, a, j);
      vv = matmul(g, vv, j);
    }
  }
  tpr_value_t sig = tpr_unary(g, TPR_UNARY_SQRT,
                              tpr_reduce(g, lw_mul(g, a, a), TPR_REDUCE_SUM, &rd, 1));
  const tpr_type_t* ts = ty(g, sig);
  if (!ts) return;
  int64_t cd[TPR_MAX_RANK];
  for (int i = 0; i < r - 2; i++) cd[i] = t.dims[i];
  cd[r - 2] = 1, cd[r - 1] = n;
  tpr_value_t srow = tpr_reshape(g, sig, r, cd);
  tpr_value_t pos = tpr_compare(g, TPR_CMP_GT, srow, kfull(g, 0, ty(g, srow)));
  tpr_value_t safe = tpr_select(g, pos, srow, kfull(g, 1, ty(g, srow)));
  tpr_type_t tb = retype(&t, TPR_DTYPE_BOOL);
  tpr_value_t uu = tpr_select(g, expand(g, pos, &tb), lw_div(g, a, expand(g, safe, &t)),
                  kfull(g, 0, &t));
  tpr_value_t vs[2] = {uu, vv};
  *s = sort_with(g, sig, true, vs, 2);
  *u = vs[0];
  *v = vs[1];
}

// Orthonormal columns completing |u| [..., m, n] (orthonormal or zero
// columns) to [..., m, c]: Householder QR of u, Q's columns signed so that
// the first n reproduce u's nonzero columns.
static tpr_value_t complete_basis(tpr_graph_t* g, tpr_value_t u, int64_t c) {
  const tpr_type_t* t0 = ty(g, u);
  if (!t0) return TPR_VALUE_NONE;
  tpr_type_t t = *t0;
  int r = t.rank;
  tpr_value_t qa, tau;
  geqrf(g, u, &qa, &tau);
  tpr_type_t qt = t;
  qt.dims[r - 1] = c;
  tpr_value_t q = apply_q(g, qa, tau, eye(g, &qt), true, false);
  // sign of R's diagonal (1 where zero), padded with ones to c columns.
  tpr_value_t d = diag(g, qa);
  const tpr_type_t* td = ty(g, d);
  if (!td) return TPR_VALUE_NONE;
  tpr_value_t sg = tpr_select(g, tpr_compare(g, TPR_CMP_LT, d, kfull(g, 0, td)),
                              kfull(g, -1, td), kfull(g, 1, td));
  int64_t k = td->dims[td->rank - 1];
  if (c > k) {
    int64_t lo[TPR_MAX_RANK] = {0}, hi[TPR_MAX_RANK] = {0}, in[TPR_MAX_RANK] = {0};
    hi[td->rank - 1] = c - k;
    sg = tpr_pad(g, sg, tpr_constant_f64(g, td->dtype, 1), lo, hi, in);
  }
  int64_t cd[TPR_MAX_RANK];
  for (int i = 0; i < r - 2; i++) cd[i] = t.dims[i];
  cd[r - 2] = 1, cd[r - 1] = c;
  return lw_mul(g, q, expand(g, tpr_reshape(g, sg, r, cd), &qt));
}

static tpr_status_t jacobi_arg(lw_ctx_t* ctx, tpr_dtype_t d, tpr_value_t* a) {
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, a));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t m = t->dims[t->rank - 2], n = t->dims[t->rank - 1];
  if ((m < n ? m : n) > kMaxJacobi)
    return lw_fail(ctx, TPR_UNIMPLEMENTED,
                   "matrices with more than %d rows and columns", kMaxJacobi);
  return tpr_ok_status();
}

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors); only the
// UPLO triangle of A is read.
static tpr_status_t lower_eigh(lw_ctx_t* ctx) {
  tpr_value_t a, w = TPR_VALUE_NONE, v = TPR_VALUE_NONE;
  TPR_RETURN_IF_ERROR(jacobi_arg(ctx, out_dtype(ctx, 0), &a));
  const tpr_type_t* ta = lw_arg_type(ctx, 0);
  if (ta->dims[ta->rank - 1] != ta->dims[ta->rank - 2])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "A is not square");
  tpr_graph_t* g = G;
  bool upper = strcmp(lw_str(ctx, 1, "L"), "U") == 0;
  tpr_value_t h = tri(g, a, upper, 0);
  a = lw_add(g, h, mT(g, tri(g, a, upper, upper ? 1 : -1)));
  jacobi_eigh(g, a, &w, &v);
  lw_set(ctx, 0, w);
  const tpr_type_t* vo = &ctx->out_types[1];
  lw_set(ctx, 1, tpr_type_numel(vo) == 0 && tpr_type_numel(ty(g, a)) != 0
                     ? kfull(g, 0, vo) : v);
  return lw_done(ctx);
}

// _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S, Vh)
static tpr_status_t lower_svd(lw_ctx_t* ctx) {
  tpr_value_t a, s = TPR_VALUE_NONE, u = TPR_VALUE_NONE, v = TPR_VALUE_NONE;
  TPR_RETURN_IF_ERROR(jacobi_arg(ctx, out_dtype(ctx, 1), &a));
  tpr_graph_t* g = G;
  const tpr_type_t* t = ty(g, a);
  int r = t->rank;
  int64_t m = t->dims[r - 2], n = t->dims[r - 1];
  bool wide = m < n;
  // A = U S V^T; for a wide A, factor A^T = V S U^T.
  jacobi_svd(g, wide ? mT(g, a) : a, &s, &u, &v);
  lw_set(ctx, 1, s);
  const tpr_type_t* uo = &ctx->out_types[0];
  const tpr_type_t* vo = &ctx->out_types[2];
  if (!lw_bool(ctx, 2, true)) {  // compute_uv=False: U, Vh are empty
    lw_set(ctx, 0, kfull(g, 0, uo));
    lw_set(ctx, 2, kfull(g, 0, vo));
    return lw_done(ctx);
  }
  // The tall factor (u) may need completing: to its own row count when
  // full_matrices, and to orthonormal columns where singular values are 0.
  int64_t rows_u = wide ? n : m;
  int64_t want = wide ? vo->dims[vo->rank - 2] : uo->dims[uo->rank - 1];
  u = complete_basis(g, u, want < rows_u ? want : rows_u);
  tpr_value_t uu = wide ? v : u, vv = wide ? u : v;
  lw_set(ctx, 0, uu);
  lw_set(ctx, 2, mT(g, vv));
  return lw_done(ctx);
}

//===--- matrix exponential ------------------------------------------------===//

// linalg_matrix_exp: scaling and squaring around a degree-18 Taylor
// polynomial. The scaling s = ceil(log2(|A|_1 / theta)) is data-dependent:
// A / 2^s is one op, and the squarings are unrolled up to a bound, each
// kept only while i < s. theta bounds the truncation error below the
// dtype's epsilon (Bader, Blanes & Casas 2019: 1.09 for f64, 3.01 for f32).
static tpr_status_t lower_matrix_exp(lw_ctx_t* ctx) {
  // Computed in f64: the squarings amplify rounding (by up to 2^s), and
  // PyTorch's float32 result is accurate to its own rounding.
  const tpr_type_t* o = &ctx->out_types[0];
  tpr_dtype_t d = TPR_DTYPE_F64;
  tpr_value_t a;
  if (tpr_dtype_is_complex(o->dtype) || !tpr_dtype_is_float(o->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "only real floating dtypes");
  TPR_RETURN_IF_ERROR(mat_arg(ctx, 0, d, &a));
  tpr_graph_t* g = G;
  const tpr_type_t* t = ty(g, a);
  if (!t) return lw_done(ctx);
  if (t->dims[t->rank - 1] != t->dims[t->rank - 2])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "A is not square");
  tpr_type_t tt = *t;
  int r = tt.rank;
  bool f64 = d == TPR_DTYPE_F64;
  double theta = f64 ? 1.090863719290036 : 3.010066362817634;
  int max_sq = f64 ? 64 : 40;
  // |A|_1: the largest column sum of |a|.
  int64_t rd = r - 2, cd = r - 2;
  tpr_value_t colsum = tpr_reduce(g, tpr_unary(g, TPR_UNARY_ABS, a), TPR_REDUCE_SUM, &rd, 1);
  cd = r - 2;
  tpr_value_t norm = tpr_reduce(g, colsum, TPR_REDUCE_MAX, &cd, 1);  // [...]
  const tpr_type_t* tn = ty(g, norm);
  if (!tn) return lw_done(ctx);
  tpr_value_t sc = tpr_unary(g, TPR_UNARY_CEIL, tpr_binary(g, TPR_BINARY_DIV,
      tpr_unary(g, TPR_UNARY_LOG, lw_div(g, norm, kfull(g, theta, tn))),
      kfull(g, log(2.0), tn)));
  sc = tpr_clamp(g, kfull(g, 0, tn), sc, kfull(g, max_sq, tn));
  sc = tpr_select(g, tpr_unary(g, TPR_UNARY_IS_FINITE, sc), sc, kfull(g, 0, tn));
  int64_t sd[TPR_MAX_RANK];
  for (int i = 0; i < r - 2; i++) sd[i] = tt.dims[i];
  sd[r - 2] = sd[r - 1] = 1;
  tpr_value_t scm = tpr_reshape(g, sc, r, sd);
  tpr_value_t x = lw_div(g, a, expand(g, tpr_binary(g, TPR_BINARY_POW,
      kfull(g, 2, ty(g, scm)), scm), &tt));
  tpr_value_t id = eye(g, &tt);
  tpr_value_t p = id;
  for (int k = 18; k >= 1; k--)
    p = lw_add(g, id, lw_div(g, matmul(g, x, p), kfull(g, k, &tt)));
  for (int i = 0; i < max_sq; i++) {
    tpr_value_t keep = tpr_compare(g, TPR_CMP_GT, scm, kfull(g, i, ty(g, scm)));
    tpr_type_t tb = retype(&tt, TPR_DTYPE_BOOL);
    p = tpr_select(g, expand(g, keep, &tb), matmul(g, p, p), p);
  }
  return lw_ret(ctx, p);
}

LW_DEFINE_TABLE(factor,
    LW_RULE("linalg_cholesky_ex", lower_cholesky_ex),
    LW_RULE("linalg_cholesky_ex.L", lower_cholesky_ex),
    LW_RULE("cholesky_inverse", lower_cholesky_inverse),
    LW_RULE("cholesky_inverse.out", lower_cholesky_inverse),
    LW_RULE("_cholesky_solve_helper", lower_cholesky_solve),
    LW_RULE("triangular_solve", lower_triangular_solve),
    LW_RULE("triangular_solve.X", lower_triangular_solve),
    LW_RULE("linalg_solve_triangular", lower_solve_triangular),
    LW_RULE("linalg_solve_triangular.out", lower_solve_triangular),
    LW_RULE("linalg_lu_factor_ex", lower_lu_factor_ex),
    LW_RULE("linalg_lu_factor_ex.out", lower_lu_factor_ex),
    LW_RULE("linalg_lu", lower_linalg_lu),
    LW_RULE("linalg_lu.out", lower_linalg_lu),
    LW_RULE("lu_unpack", lower_lu_unpack),
    LW_RULE("lu_unpack.out", lower_lu_unpack),
    LW_RULE("linalg_lu_solve", lower_lu_solve),
    LW_RULE("linalg_lu_solve.out", lower_lu_solve),
    LW_RULE("linalg_inv_ex", lower_inv_ex),
    LW_RULE("linalg_inv_ex.inverse", lower_inv_ex),
    LW_RULE("geqrf", lower_geqrf), LW_RULE("geqrf.a", lower_geqrf),
    LW_RULE("linalg_householder_product", lower_householder_product),
    LW_RULE("linalg_householder_product.out", lower_householder_product),
    LW_RULE("ormqr", lower_ormqr), LW_RULE("ormqr.out", lower_ormqr),
    LW_RULE("linalg_qr", lower_linalg_qr), LW_RULE("linalg_qr.out", lower_linalg_qr),
    LW_RULE("_linalg_eigh", lower_eigh),
    LW_RULE("_linalg_eigh.eigenvalues", lower_eigh),
    LW_RULE("_linalg_svd", lower_svd), LW_RULE("_linalg_svd.U", lower_svd),
    LW_RULE("linalg_matrix_exp", lower_matrix_exp),
    LW_RULE("linalg_matrix_exp.out", lower_matrix_exp));
