// Scatters that combine: scatter_reduce.two (sum, prod, mean, amax, amin;
// include_self), the legacy scatter(reduce="add"|"multiply"), index_reduce,
// masked_scatter (a prefix sum of the mask numbers the places), and
// index_fill.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

typedef enum { R_SUM, R_PROD, R_MEAN, R_AMAX, R_AMIN, R_BAD } red_t;

static red_t parse_reduce(const char* s) {
  static const char* const kNames[][2] = {
      {"sum", "add"}, {"prod", "multiply"}, {"mean", ""}, {"amax", ""},
      {"amin", ""}};
  for (int i = 0; s && i < 5; i++)
    if (strcmp(s, kNames[i][0]) == 0 || (kNames[i][1][0] && strcmp(s, kNames[i][1]) == 0))
      return (red_t)i;
  return R_BAD;
}

static const tpr_reduce_op_t kOps[] = {
    [R_SUM] = TPR_REDUCE_SUM, [R_PROD] = TPR_REDUCE_PROD,
    [R_MEAN] = TPR_REDUCE_SUM, [R_AMAX] = TPR_REDUCE_MAX,
    [R_AMIN] = TPR_REDUCE_MIN};

static tpr_value_t rank1(tpr_graph_t* g, tpr_value_t v) {
  const tpr_type_t* t = tpr_value_type(g, v);
  if (t->rank) return v;
  int64_t one = 1;
  return tpr_reshape(g, v, 1, &one);
}

// The shared core: self (out dtype) combined with src at index along dim.
// Integer means divide with floor, as PyTorch does.
static tpr_status_t combine(lw_ctx_t* ctx, tpr_value_t self, int64_t dim,
                            tpr_value_t index, tpr_value_t src, red_t red,
                            bool include_self) {
  tpr_graph_t* g = G;
  tpr_dtype_t od = OUT->dtype;
  if (tpr_dtype_is_complex(od))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex scatter reductions");
  tpr_dtype_t acc = (red == R_AMAX || red == R_AMIN) ? od : lw_opmath(od);
  tpr_value_t x = rank1(g, lw_cast(g, self, acc));
  tpr_value_t s = rank1(g, lw_cast(g, src, acc));
  index = rank1(g, index);
  const tpr_type_t* xt = lw_type(ctx, x);
  const tpr_type_t* it = lw_type(ctx, index);
  tpr_value_t cnt = TPR_VALUE_NONE;
  if (!include_self || red == R_MEAN) {
    tpr_type_t ct = *xt, ot = *it;
    ct.dtype = ot.dtype = TPR_DTYPE_S64;
    cnt = tpr_scatter_along(g, lw_full(g, 0, TPR_DTYPE_S64, &ct), dim, index,
                            lw_full(g, 1, TPR_DTYPE_S64, &ot), true);
  }
  if (!include_self) {
    tpr_value_t id = red == R_AMAX   ? tpr_constant_lowest(g, acc)
                     : red == R_AMIN ? tpr_constant_highest(g, acc)
                                     : tpr_constant_f64(g, acc, red == R_PROD);
    x = lw_sel(g, lw_cmpk(g, TPR_CMP_GT, cnt, 0), lw_splat(g, id, x), x);
  }
  tpr_value_t r = tpr_scatter_reduce_along(g, x, dim, index, s, kOps[red]);
  if (red == R_MEAN) {
    if (include_self) cnt = lw_add(g, cnt, lw_k(g, cnt, 1));
    cnt = lw_max(g, cnt, lw_k(g, cnt, 1));
    tpr_value_t c = lw_cast(g, cnt, acc);
    tpr_value_t q = lw_div(g, r, c);
    if (!tpr_dtype_is_float(acc)) {
      // Floor division (counts are positive): truncation is one too high
      // for a negative inexact quotient.
      tpr_value_t inexact = lw_cmpk(g, TPR_CMP_NE, tpr_binary(g, TPR_BINARY_REM, r, c), 0);
      tpr_value_t adj = tpr_binary(g, TPR_BINARY_AND, inexact, lw_cmpk(g, TPR_CMP_LT, r, 0));
      q = lw_sel(g, adj, lw_sub(g, q, lw_k(g, q, 1)), q);
    }
    r = q;
  }
  return lw_ret(ctx, r);
}

// scatter_reduce.two(self, dim, index, src, reduce, *, include_self=True)
static tpr_status_t lower_scatter_reduce(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || !lw_is_tensor(ctx, 2) || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, index and src");
  red_t red = parse_reduce(lw_str(ctx, 4, NULL));
  if (red == R_BAD) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "unknown reduce");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank ? t->rank : 1);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  return combine(ctx, lw_value(ctx, 0), dim, lw_value(ctx, 2), lw_value(ctx, 3),
                 red, lw_bool(ctx, 5, true));
}

// scatter.reduce / scatter.value_reduce(self, dim, index, src|value,
// reduce): "add" or "multiply", self included.
static tpr_status_t lower_scatter_legacy(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, 2);
  if (!t || !it || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, index and src");
  red_t red = parse_reduce(lw_str(ctx, 4, NULL));
  if (red != R_SUM && red != R_PROD)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "reduce must be add or multiply");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank ? t->rank : 1);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  tpr_value_t src = lw_value(ctx, 3);
  if (lw_arg(ctx, 3)->is_scalar || lw_type(ctx, src)->rank == 0)
    src = tpr_broadcast_to(G, src, it->rank, it->dims);
  return combine(ctx, lw_value(ctx, 0), dim, lw_value(ctx, 2), src, red, true);
}

// index_reduce(self, dim, index, source, reduce, *, include_self=True):
// the 1-d index expanded along |dim| of source is a scatter_reduce index.
static tpr_status_t lower_index_reduce(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_type_t* st = lw_arg_type(ctx, 3);
  if (!t || !st || !lw_is_tensor(ctx, 2))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, index and source");
  red_t red = parse_reduce(lw_str(ctx, 4, NULL));
  if (red == R_BAD || red == R_SUM)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "reduce must be prod, mean, amax or amin");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank ? t->rank : 1);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  tpr_graph_t* g = G;
  tpr_value_t src = rank1(g, lw_value(ctx, 3));
  const tpr_type_t* s1 = lw_type(ctx, src);
  tpr_value_t idx = lw_cast(g, rank1(g, lw_value(ctx, 2)), TPR_DTYPE_S64);
  int64_t n = tpr_type_numel(lw_type(ctx, idx));
  if (n != s1->dims[dim])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "index length differs from source");
  idx = tpr_reshape(g, idx, 1, &n);
  tpr_value_t index = tpr_broadcast_in_dim(g, idx, s1->rank, s1->dims, &dim);
  return combine(ctx, lw_value(ctx, 0), dim, index, src, red, lw_bool(ctx, 5, true));
}

// masked_scatter(self, mask, source): the k-th true place of the mask (row
// major) takes source.flatten()[k].
static tpr_status_t lower_masked_scatter(lw_ctx_t* ctx) {
  const tpr_type_t* st = lw_arg_type(ctx, 2);
  if (!lw_is_tensor(ctx, 0) || !lw_is_tensor(ctx, 1) || !st)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, mask and source");
  tpr_graph_t* g = G;
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  int64_t numel = tpr_type_numel(OUT), ns = tpr_type_numel(st);
  if (numel == 0 || ns == 0) return lw_ret(ctx, x);
  tpr_value_t m = lw_nonzero(g, lw_in(ctx, 1, lw_arg_type(ctx, 1)->dtype, OUT));
  tpr_value_t pos = lw_true_slots(g, tpr_reshape(g, m, 1, &numel), 0);
  pos = tpr_clamp(g, tpr_constant_i64(g, TPR_DTYPE_S64, 0), pos,
                  tpr_constant_i64(g, TPR_DTYPE_S64, ns - 1));
  tpr_value_t src = tpr_reshape(g, lw_cast(g, lw_value(ctx, 2), OUT->dtype), 1, &ns);
  tpr_value_t taken = lw_reshape_to(g, tpr_take_1d(g, src, pos), OUT);
  return lw_ret(ctx, lw_sel(g, m, taken, x));
}

// masked_scatter_backward(grad, mask, sizes): the source's gradient, the
// grad at the mask's true places (row major) in order, then zeros up to the
// source's size. The k-th true place goes to slot k; the false ones to a
// slot past the end, dropped.
static tpr_status_t lower_masked_scatter_backward(lw_ctx_t* ctx) {
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  const tpr_type_t* mt = lw_arg_type(ctx, 1);
  if (!gt || !mt) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad and mask");
  tpr_graph_t* g = G;
  int64_t ns = tpr_type_numel(OUT);
  tpr_type_t shape;  // grad and mask broadcast together
  if (!lw_broadcast_shape(gt, mt, &shape))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grad and mask do not broadcast");
  shape.dtype = OUT->dtype;
  int64_t n = tpr_type_numel(&shape);
  if (ns == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_type_t all = tpr_type_make(OUT->dtype, 1, &(int64_t){ns + 1});
  tpr_value_t out = lw_full(g, 0, OUT->dtype, &all);
  if (n > 0) {
    tpr_value_t m = tpr_reshape(g, lw_nonzero(g, lw_in(ctx, 1, mt->dtype, &shape)), 1, &n);
    tpr_value_t pos = lw_true_slots(g, m, ns);
    pos = lw_min(g, pos, lw_k(g, pos, (double)ns));  // more true places than slots
    tpr_value_t gf = tpr_reshape(g, lw_in(ctx, 0, OUT->dtype, &shape), 1, &n);
    out = tpr_put_1d(g, out, pos, gf, false);
  }
  int64_t lo = 0;
  out = tpr_slice(g, out, &lo, &ns, NULL);
  return lw_ret(ctx, lw_reshape_to(g, out, OUT));
}

// index_fill.int_Scalar / .int_Tensor(self, dim, index, value): the
// slices at index (negative ones wrap) along dim take the value.
static tpr_status_t lower_index_fill(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || !lw_is_tensor(ctx, 2) || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, index and value");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank ? t->rank : 1);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  tpr_graph_t* g = G;
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  int64_t size = t->rank ? t->dims[dim] : 1, k = tpr_type_numel(lw_arg_type(ctx, 2));
  if (k == 0 || tpr_type_numel(OUT) == 0) return lw_ret(ctx, x);
  tpr_value_t idx = tpr_reshape(g, lw_cast(g, lw_value(ctx, 2), TPR_DTYPE_S64), 1, &k);
  idx = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, idx, 0), lw_add(g, idx, lw_k(g, idx, (double)size)), idx);
  tpr_type_t mt = tpr_type_make(TPR_DTYPE_BOOL, 1, &size);
  tpr_value_t hit = tpr_put_1d(g, lw_full(g, 0, TPR_DTYPE_BOOL, &mt), idx,
                               lw_full(g, 1, TPR_DTYPE_BOOL, &(tpr_type_t){TPR_DTYPE_BOOL, 1, {k}}), false);
  tpr_value_t mask = OUT->rank ? tpr_broadcast_in_dim(g, hit, OUT->rank, OUT->dims, &dim)
                               : tpr_reshape(g, hit, 0, NULL);
  tpr_value_t v = lw_splat(g, lw_cast(g, lw_value(ctx, 3), OUT->dtype), x);
  return lw_ret(ctx, lw_sel(g, mask, v, x));
}

#define FIO(n, fn) LW_RULE(n, fn), LW_RULE(n "_", fn), LW_RULE(n ".out", fn)

LW_DEFINE_TABLE(scatter,
    LW_RULE("scatter_reduce.two", lower_scatter_reduce),
    LW_RULE("scatter_reduce_.two", lower_scatter_reduce),
    LW_RULE("scatter_reduce.two_out", lower_scatter_reduce),
    LW_RULE("scatter.reduce", lower_scatter_legacy),
    LW_RULE("scatter_.reduce", lower_scatter_legacy),
    LW_RULE("scatter.reduce_out", lower_scatter_legacy),
    LW_RULE("scatter.value_reduce", lower_scatter_legacy),
    LW_RULE("scatter_.value_reduce", lower_scatter_legacy),
    LW_RULE("scatter.value_reduce_out", lower_scatter_legacy),
    FIO("index_reduce", lower_index_reduce),
    FIO("masked_scatter", lower_masked_scatter),
    LW_RULE("masked_scatter_backward", lower_masked_scatter_backward),
    LW_RULE("index_fill.int_Scalar", lower_index_fill),
    LW_RULE("index_fill_.int_Scalar", lower_index_fill),
    LW_RULE("index_fill.int_Scalar_out", lower_index_fill),
    LW_RULE("index_fill.int_Tensor", lower_index_fill),
    LW_RULE("index_fill_.int_Tensor", lower_index_fill),
    LW_RULE("index_fill.int_Tensor_out", lower_index_fill));
