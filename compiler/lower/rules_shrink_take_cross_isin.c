// Assorted NN and tensor ops: shrink activations, trace,
// aminmax, cross, take/put, isin, channel_shuffle, renorm, unfold_backward.
// Formulas follow torch/_decomp/decompositions.py and torch/_refs; floating
// math runs in opmath (f32 for bf16/f16) and rounds once.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

static tpr_status_t need_float(lw_ctx_t* ctx, tpr_dtype_t* cd) {
  *cd = lw_opmath(OUT->dtype);
  if (!tpr_dtype_is_float(*cd))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a real floating out type, got %s",
                   tpr_dtype_name(OUT->dtype));
  return tpr_ok_status();
}

// Scalar argument |i| splat like |x| (|dflt| when absent).
static tpr_value_t sarg(lw_ctx_t* ctx, int i, tpr_value_t x, double dflt) {
  if (lw_is_tensor(ctx, i)) return lw_splat(G, lw_value(ctx, i), x);
  return lw_k(G, x, lw_double(ctx, i, dflt));
}

//===--- shrink activations ----------------------------------------------===//

// -lambd <= x <= lambd, the band that hardshrink/softshrink zero.
static tpr_value_t in_band(lw_ctx_t* ctx, tpr_value_t x, int lambd_arg) {
  tpr_value_t l = sarg(ctx, lambd_arg, x, 0.5);
  tpr_value_t ge = lw_cmp(G, TPR_CMP_GE, x, lw_un(G, TPR_UNARY_NEG, l));
  return tpr_binary(G, TPR_BINARY_AND, ge, lw_cmp(G, TPR_CMP_LE, x, l));
}

// hardshrink(self, lambd): x outside the band, else 0.
static tpr_status_t lower_hardshrink(lw_ctx_t* ctx) {
  tpr_dtype_t cd;
  TPR_RETURN_IF_ERROR(need_float(ctx, &cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  return lw_ret(ctx, lw_sel(G, in_band(ctx, x, 1), lw_k(G, x, 0), x));
}

// softshrink(self, lambd): x - lambd above, x + lambd below, x * 0 inside
// (as PyTorch's kernel: NaN stays NaN, and the band keeps x's sign of zero).
static tpr_status_t lower_softshrink(lw_ctx_t* ctx) {
  tpr_dtype_t cd;
  TPR_RETURN_IF_ERROR(need_float(ctx, &cd));
  tpr_value_t x = lw_in(ctx, 0, cd, OUT);
  tpr_value_t l = sarg(ctx, 1, x, 0.5);
  tpr_value_t r = lw_sel(G, lw_cmp(G, TPR_CMP_GT, x, l), lw_sub(G, x, l),
                         lw_mul(G, x, lw_k(G, x, 0)));
  tpr_value_t below = lw_cmp(G, TPR_CMP_LT, x, lw_un(G, TPR_UNARY_NEG, l));
  return lw_ret(ctx, lw_sel(G, below, lw_add(G, x, l), r));
}

// hardshrink_backward / softshrink_backward(grad, self, lambd): grad
// outside the band, 0 inside (both shrinks have slope 1 outside).
static tpr_status_t lower_shrink_backward(lw_ctx_t* ctx) {
  tpr_dtype_t cd;
  TPR_RETURN_IF_ERROR(need_float(ctx, &cd));
  tpr_value_t go = lw_in(ctx, 0, cd, OUT), x = lw_in(ctx, 1, cd, OUT);
  return lw_ret(ctx, lw_sel(G, in_band(ctx, x, 2), lw_k(G, go, 0), go));
}

//===--- trace, aminmax, cross ------------------------------------------------===//

// trace(self): the sum of the main diagonal of a matrix, accumulated in the
// out dtype (s64 for integers, as PyTorch promotes).
static tpr_status_t lower_trace(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || t->rank != 2) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "expected a matrix");
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), cd);
  tpr_type_t it = *t;
  it.dtype = TPR_DTYPE_S64;
  tpr_value_t diag = lw_cmp(G, TPR_CMP_EQ, tpr_iota(G, it, 0), tpr_iota(G, it, 1));
  x = lw_sel(G, diag, x, lw_k(G, x, 0));
  static const int64_t kAll[2] = {0, 1};
  return lw_ret(ctx, tpr_reduce(G, x, TPR_REDUCE_SUM, kAll, 2));
}

// aminmax(self, *, dim=None, keepdim=False) -> (min, max)
static tpr_status_t lower_aminmax(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || ctx->num_outs != 2) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self");
  if (tpr_dtype_is_complex(t->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "complex inputs have no order");
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  if (lw_is_none(ctx, 1)) {
    for (int i = 0; i < t->rank; i++) dims[n++] = i;
  } else if (t->rank > 0) {
    dims[0] = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank);
    if (dims[0] < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
    n = 1;
  }
  if (lw_reduced_numel(t, dims, n) == 0 && tpr_type_numel(t) == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "reducing a zero-size dimension has no identity");
  tpr_value_t x = lw_value(ctx, 0);
  lw_set(ctx, 0, tpr_reduce(G, x, TPR_REDUCE_MIN, dims, n));
  lw_set(ctx, 1, tpr_reduce(G, x, TPR_REDUCE_MAX, dims, n));
  return lw_done(ctx);
}

// linalg_cross(self, other, *, dim=-1): inputs broadcast to the out shape,
// whose |dim| has size 3.
static tpr_status_t lower_linalg_cross(lw_ctx_t* ctx) {
  int64_t dim = lw_wrap_dim(lw_int(ctx, 2, -1), OUT->rank);
  if (dim < 0 || OUT->dims[dim] != 3)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim must have size 3");
  if (tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex cross is not lowered");
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t a = lw_in(ctx, 0, cd, OUT), b = lw_in(ctx, 1, cd, OUT);
  tpr_value_t ac[3], bc[3], r[3];
  int64_t st[TPR_MAX_RANK] = {0}, lim[TPR_MAX_RANK];
  memcpy(lim, OUT->dims, sizeof lim);
  for (int i = 0; i < 3; i++) {
    st[dim] = i;
    lim[dim] = i + 1;
    ac[i] = tpr_slice(G, a, st, lim, NULL);
    bc[i] = tpr_slice(G, b, st, lim, NULL);
  }
  for (int i = 0; i < 3; i++) {
    int j = (i + 1) % 3, k = (i + 2) % 3;
    r[i] = lw_sub(G, lw_mul(G, ac[j], bc[k]), lw_mul(G, ac[k], bc[j]));
  }
  return lw_ret(ctx, tpr_concatenate(G, r, 3, dim));
}

//===--- take / put, isin -------------------------------------------------------===//

// |idx| as s64 with negative entries wrapped by |n| (take/put accept them).
static tpr_value_t wrap_index(tpr_graph_t* g, tpr_value_t idx, int64_t n) {
  idx = lw_cast(g, idx, TPR_DTYPE_S64);
  tpr_value_t neg = lw_cmpk(g, TPR_CMP_LT, idx, 0);
  return lw_sel(g, neg, lw_add(g, idx, lw_k(g, idx, (double)n)), idx);
}

static tpr_value_t flatten(tpr_graph_t* g, tpr_value_t v) {
  int64_t n = tpr_type_numel(tpr_value_type(g, v));
  return tpr_reshape(g, v, 1, &n);
}

// take(self, index): self read as a flat vector.
static tpr_status_t lower_take(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || !lw_is_tensor(ctx, 1))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self and index");
  int64_t n = tpr_type_numel(t);
  if (n == 0 && tpr_type_numel(OUT) > 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "take from an empty tensor");
  if (tpr_type_numel(OUT) == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_value_t idx = wrap_index(G, lw_value(ctx, 1), n);
  return lw_ret(ctx, tpr_take_1d(G, flatten(G, lw_value(ctx, 0)), idx));
}

// put / put_(self, index, source, accumulate=False): self written as a flat
// vector at index; source has as many elements as index.
static tpr_status_t lower_put(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, 1);
  const tpr_type_t* st = lw_arg_type(ctx, 2);
  if (!t || !it || !st || tpr_type_numel(it) != tpr_type_numel(st))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, and index and source of one size");
  tpr_value_t self = flatten(G, lw_cast(G, lw_value(ctx, 0), OUT->dtype));
  if (tpr_type_numel(it) == 0) return lw_ret(ctx, self);
  tpr_value_t idx = flatten(G, wrap_index(G, lw_value(ctx, 1), tpr_type_numel(t)));
  tpr_value_t src = flatten(G, lw_cast(G, lw_value(ctx, 2), OUT->dtype));
  return lw_ret(ctx, tpr_put_1d(G, self, idx, src, lw_bool(ctx, 3, false)));
}

// isin(elements, test_elements, *, assume_unique, invert): every element
// against every test element ([E, T] comparisons, fine for the sizes this
// op sees; PyTorch's sort-based path is an optimisation, not semantics).
static tpr_status_t lower_isin(lw_ctx_t* ctx) {
  const tpr_type_t* et = lw_arg_type(ctx, 0);
  const tpr_type_t* tt = lw_arg_type(ctx, 1);
  if (!et || !tt) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs elements and test elements");
  if (tpr_dtype_is_complex(et->dtype) || tpr_dtype_is_complex(tt->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex isin is not lowered");
  tpr_graph_t* g = G;
  tpr_dtype_t cd = lw_promote(et->dtype, tt->dtype);
  int64_t ne = tpr_type_numel(et), nt = tpr_type_numel(tt);
  if (ne == 0 || nt == 0)
    return lw_ret(ctx, lw_full(g, lw_bool(ctx, 3, false) ? 1 : 0, OUT->dtype, OUT));
  int64_t both[2] = {ne, nt}, d0 = 0, d1 = 1;
  tpr_value_t e = tpr_broadcast_in_dim(g, flatten(g, lw_cast(g, lw_value(ctx, 0), cd)), 2, both, &d0);
  tpr_value_t t = tpr_broadcast_in_dim(g, flatten(g, lw_cast(g, lw_value(ctx, 1), cd)), 2, both, &d1);
  tpr_value_t hit = tpr_reduce(g, lw_cmp(g, TPR_CMP_EQ, e, t), TPR_REDUCE_OR, &d1, 1);
  if (lw_bool(ctx, 3, false)) hit = lw_un(g, TPR_UNARY_NOT, hit);
  return lw_ret(ctx, hit);
}

//===--- channel_shuffle, renorm, unfold_backward -------------------------------===//

// channel_shuffle(self, groups): [N, g, C/g, *] -> [N, C/g, g, *].
static tpr_status_t lower_channel_shuffle(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t groups = lw_int(ctx, 1, 0);
  if (!t || t->rank < 3 || t->rank + 1 > TPR_MAX_RANK || groups <= 0 ||
      t->dims[1] % groups)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "channels must split into groups");
  tpr_type_t s = *t;
  s.rank = t->rank + 1;
  s.dims[1] = groups;
  s.dims[2] = t->dims[1] / groups;
  for (int i = 2; i < t->rank; i++) s.dims[i + 1] = t->dims[i];
  int64_t perm[TPR_MAX_RANK];
  for (int i = 0; i < s.rank; i++) perm[i] = i;
  perm[1] = 2;
  perm[2] = 1;
  tpr_value_t x = lw_reshape_to(G, lw_value(ctx, 0), &s);
  return lw_ret(ctx, tpr_transpose(G, x, perm));
}

// renorm(self, p, dim, maxnorm): each slice along |dim| whose p-norm
// exceeds maxnorm is scaled to maxnorm / (norm + 1e-7), as PyTorch does.
static tpr_status_t lower_renorm(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  tpr_dtype_t cd;
  TPR_RETURN_IF_ERROR(need_float(ctx, &cd));
  if (!t || !lw_is_tensor(ctx, 1) || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, p and maxnorm");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 2, 0), t->rank);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  tpr_graph_t* g = G;
  tpr_type_t full = *OUT;
  full.dtype = cd;
  int64_t dims[TPR_MAX_RANK];
  int n = 0;
  for (int i = 0; i < t->rank; i++)
    if (i != dim) dims[n++] = i;
  tpr_value_t x = lw_in(ctx, 0, cd, &full);
  tpr_value_t a = lw_un(g, TPR_UNARY_ABS, x);
  tpr_value_t p = lw_splat(g, lw_value(ctx, 1), a);
  // p = inf: the max; otherwise (sum |x|^p)^(1/p). p is a runtime value.
  tpr_value_t sum = lw_reduce_keep(g, tpr_binary(g, TPR_BINARY_POW, a, p), TPR_REDUCE_SUM, dims, n);
  tpr_value_t norm = tpr_binary(g, TPR_BINARY_POW, sum, lw_div(g, lw_k(g, p, 1), p));
  tpr_value_t is_inf = lw_cmpk(g, TPR_CMP_EQ, p, INFINITY);
  norm = lw_sel(g, is_inf, lw_reduce_keep(g, a, TPR_REDUCE_MAX, dims, n), norm);
  tpr_value_t maxnorm = lw_splat(g, lw_value(ctx, 3), a);
  tpr_value_t scale = lw_div(g, maxnorm, lw_add(g, norm, lw_k(g, norm, 1e-7)));
  scale = lw_sel(g, lw_cmp(g, TPR_CMP_GT, norm, maxnorm), scale, lw_k(g, scale, 1));
  return lw_ret(ctx, lw_mul(g, x, scale));
}

// unfold_backward(grad_in, input_sizes, dim, size, step): grad_in is the
// input with |dim| replaced by the window count W and a trailing window
// dim of |size|; element (w, k) came from input position w * step + k, and
// overlapping windows add up.
static tpr_status_t lower_unfold_backward(lw_ctx_t* ctx) {
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  int r = OUT->rank;
  int64_t size = lw_int(ctx, 3, 0), step = lw_int(ctx, 4, 1);
  if (!gt || step <= 0 || (r > 0 && gt->rank != r + 1))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grad does not fit input_sizes");
  tpr_graph_t* g = G;
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t go = lw_cast(g, lw_value(ctx, 0), cd);
  if (r == 0) return lw_ret(ctx, go);  // one window of one element
  int64_t dim = lw_wrap_dim(lw_int(ctx, 2, 0), r);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  int64_t w = gt->dims[dim], len = OUT->dims[dim];
  if (gt->dims[r] != size || (w > 0 && (w - 1) * step + size > len))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "windows do not fit input_sizes");
  // [rest..., W, size] -> [rest..., W * size]
  int64_t perm[TPR_MAX_RANK], n = 0;
  for (int i = 0; i < r; i++)
    if (i != dim) perm[n++] = i;
  perm[n++] = dim;
  perm[n++] = r;
  go = tpr_transpose(g, go, perm);
  tpr_type_t src = *lw_type(ctx, go);
  src.rank = r;
  src.dims[r - 1] = w * size;
  go = lw_reshape_to(g, go, &src);
  tpr_type_t wk = tpr_type_make(TPR_DTYPE_S64, 2, (int64_t[]){w, size});
  tpr_value_t pos = lw_add(g, lw_mul(g, tpr_iota(g, wk, 0), lw_k(g, tpr_iota(g, wk, 0), (double)step)),
                           tpr_iota(g, wk, 1));
  int64_t last = r - 1, ws = w * size;
  pos = tpr_reshape(g, pos, 1, &ws);
  tpr_type_t it = src;
  it.dtype = TPR_DTYPE_S64;
  pos = tpr_broadcast_in_dim(g, pos, it.rank, it.dims, &last);
  tpr_type_t acc = src;
  acc.dims[r - 1] = len;
  tpr_value_t res = tpr_scatter_along(g, lw_full(g, 0, cd, &acc), last, pos, go, true);
  int64_t back[TPR_MAX_RANK];
  for (int i = 0; i < r; i++) back[i] = i < dim ? i : (i == dim ? r - 1 : i - 1);
  return lw_ret(ctx, tpr_transpose(g, res, back));
}

// max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices,
// output_size, stride, padding): each input value written at its flat
// index into the zeroed output plane. Indices are not bounds-checked (XLA
// drops out-of-range writes; see README).
static tpr_status_t lower_max_unpool(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, 1);
  const tpr_arg_t* os = lw_arg(ctx, 2);
  if (!t || !it || os->kind != TPR_ARG_INT_LIST || t->rank != OUT->rank ||
      t->rank < os->count + 1 || tpr_type_numel(t) != tpr_type_numel(it))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self, indices and output_size do not fit");
  int ns = os->count, lead = t->rank - ns;
  tpr_type_t src = tpr_type_scalar(OUT->dtype), dst;
  for (int i = 0; i < lead; i++) src.dims[src.rank++] = t->dims[i];
  dst = src;
  int64_t in_plane = 1, out_plane = 1;  // spatial element counts
  for (int i = lead; i < t->rank; i++) in_plane *= t->dims[i], out_plane *= OUT->dims[i];
  src.dims[src.rank++] = in_plane;
  dst.dims[dst.rank++] = out_plane;
  tpr_value_t v = lw_reshape_to(G, lw_cast(G, lw_value(ctx, 0), OUT->dtype), &src);
  tpr_type_t ix = src;
  ix.dtype = TPR_DTYPE_S64;
  tpr_value_t idx = lw_reshape_to(G, lw_cast(G, lw_value(ctx, 1), TPR_DTYPE_S64), &ix);
  if (tpr_type_numel(&src) == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_value_t r = tpr_scatter_along(G, lw_full(G, 0, OUT->dtype, &dst), lead, idx, v, false);
  return lw_ret(ctx, r);
}

// _efficientzerotensor(size, dtype, ...): a plain zero tensor (sgn's and
// other gradients that are known to be zero).
static tpr_status_t lower_zero_tensor(lw_ctx_t* ctx) {
  return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
}

#define FIO(n, fn) LW_RULE(n, fn), LW_RULE(n "_", fn), LW_RULE(n ".out", fn)

// _assert_async(self[, assert_msg]) and _functional_assert_async.msg(self,
// assert_msg, dep_token): a run-time check that the one element of self is
// nonzero (compiled graphs; PyTorch's CUDA kernel checks on the device too).
// The functional form returns an empty token.
static tpr_status_t lower_assert_async(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || tpr_type_numel(t) != 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "Boolean value of Tensor with %s is ambiguous",
                   t && tpr_type_numel(t) == 0 ? "no values" : "more than one value");
  tpr_value_t one = tpr_reshape(G, lw_value(ctx, 0), 0, NULL);
  const char* msg = lw_str(ctx, 1, NULL);
  lw_check(ctx, lw_nonzero(G, one), "%s",
           msg && *msg ? msg : "Expected Tensor with single nonzero value, but got zero");
  for (int i = 0; i < ctx->num_outs; i++)
    lw_set(ctx, i, lw_full(G, 0, OUT[i].dtype, &OUT[i]));
  return lw_done(ctx);
}

LW_DEFINE_TABLE(shrink_take_cross_isin,
    LW_RULE("_assert_async", lower_assert_async),
    LW_RULE("_assert_async.msg", lower_assert_async),
    LW_RULE("_functional_assert_async.msg", lower_assert_async),
    LW_RULE("hardshrink", lower_hardshrink), LW_RULE("hardshrink.out", lower_hardshrink),
    LW_RULE("softshrink", lower_softshrink), LW_RULE("softshrink.out", lower_softshrink),
    LW_RULE("hardshrink_backward", lower_shrink_backward),
    LW_RULE("hardshrink_backward.grad_input", lower_shrink_backward),
    LW_RULE("softshrink_backward", lower_shrink_backward),
    LW_RULE("softshrink_backward.grad_input", lower_shrink_backward),
    LW_RULE("trace", lower_trace), LW_RULE("trace.out", lower_trace),
    LW_RULE("aminmax", lower_aminmax), LW_RULE("aminmax.out", lower_aminmax),
    LW_RULE("linalg_cross", lower_linalg_cross), LW_RULE("linalg_cross.out", lower_linalg_cross),
    LW_RULE("take", lower_take), LW_RULE("take.out", lower_take),
    LW_RULE("put", lower_put), LW_RULE("put_", lower_put), LW_RULE("put.out", lower_put),
    LW_RULE("isin.Tensor_Tensor", lower_isin), LW_RULE("isin.Tensor_Tensor_out", lower_isin),
    LW_RULE("isin.Tensor_Scalar", lower_isin), LW_RULE("isin.Tensor_Scalar_out", lower_isin),
    LW_RULE("isin.Scalar_Tensor", lower_isin), LW_RULE("isin.Scalar_Tensor_out", lower_isin),
    LW_RULE("channel_shuffle", lower_channel_shuffle),
    LW_RULE("channel_shuffle.out", lower_channel_shuffle),
    LW_RULE("native_channel_shuffle", lower_channel_shuffle),
    FIO("renorm", lower_renorm),
    LW_RULE("unfold_backward", lower_unfold_backward),
    LW_RULE("unfold_backward.out", lower_unfold_backward),
    LW_RULE("max_unpool2d", lower_max_unpool), LW_RULE("max_unpool2d.out", lower_max_unpool),
    LW_RULE("max_unpool3d", lower_max_unpool), LW_RULE("max_unpool3d.out", lower_max_unpool),
    LW_RULE("_efficientzerotensor", lower_zero_tensor),
    LW_RULE("_efficientzerotensor.out", lower_zero_tensor),
);
