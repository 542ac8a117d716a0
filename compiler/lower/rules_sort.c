// Sorting and order statistics: sort, argsort, topk, kthvalue, median,
// nanmedian, mode. All are one stable tpr_sort of (values, iota) along the
// dim, then slices or a gather at a computed position. Floats sort NaN
// last, as PyTorch does, so order statistics see NaN as the largest value.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

// Self, made at least 1-d, and |dim| wrapped against it.
static tpr_status_t self_dim(lw_ctx_t* ctx, int dim_arg, int64_t dflt,
                             tpr_value_t* x, int64_t* dim) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  if (tpr_dtype_is_complex(t->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex values have no order");
  *x = lw_value(ctx, 0);
  *dim = lw_wrap_dim(dim_arg < 0 ? dflt : lw_int(ctx, dim_arg, dflt),
                     t->rank ? t->rank : 1);
  if (*dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  if (t->rank == 0) {
    int64_t one = 1;
    *x = tpr_reshape(G, *x, 1, &one);
  }
  return tpr_ok_status();
}

// |x| sorted along |dim| and the s64 source index of every element.
static void sort_idx(tpr_graph_t* g, tpr_value_t x, int64_t dim, bool desc,
                     tpr_value_t* vals, tpr_value_t* idx) {
  tpr_type_t it = *tpr_value_type(g, x);
  it.dtype = TPR_DTYPE_S64;
  tpr_value_t ops[2] = {x, tpr_iota(g, it, dim)}, outs[2];
  tpr_sort(g, ops, 2, dim, desc, outs);
  *vals = outs[0];
  *idx = outs[1];
}

// sort(self, dim=-1, descending) and sort.stable(self, *, stable, dim=-1,
// descending): the stable form has a bool/None at argument 1. Our sort is
// always stable, which is one of the orders the unstable form may give.
static tpr_status_t lower_sort(lw_ctx_t* ctx) {
  int d = lw_arg(ctx, 1)->kind == TPR_ARG_INT ? 1 : 2;
  tpr_value_t x, v, i;
  int64_t dim;
  TPR_RETURN_IF_ERROR(self_dim(ctx, d, -1, &x, &dim));
  sort_idx(G, x, dim, lw_bool(ctx, d + 1, false), &v, &i);
  lw_set(ctx, 0, v);
  if (ctx->num_outs > 1) lw_set(ctx, 1, i);
  return lw_done(ctx);
}

// argsort(self, dim, descending) / argsort.stable(self, *, stable, dim,
// descending)
static tpr_status_t lower_argsort(lw_ctx_t* ctx) {
  int d = lw_arg(ctx, 1)->kind == TPR_ARG_INT ? 1 : 2;
  tpr_value_t x, v, i;
  int64_t dim;
  TPR_RETURN_IF_ERROR(self_dim(ctx, d, -1, &x, &dim));
  sort_idx(G, x, dim, lw_bool(ctx, d + 1, false), &v, &i);
  return lw_ret(ctx, i);
}

// msort(self): sort along dim 0.
static tpr_status_t lower_msort(lw_ctx_t* ctx) {
  tpr_value_t x, v, i;
  int64_t dim;
  TPR_RETURN_IF_ERROR(self_dim(ctx, -1, 0, &x, &dim));
  sort_idx(G, x, dim, false, &v, &i);
  return lw_ret(ctx, v);
}

// The first |k| entries along |dim|.
static tpr_value_t head(tpr_graph_t* g, tpr_value_t v, int64_t dim,
                        int64_t k) {
  const tpr_type_t* t = tpr_value_type(g, v);
  int64_t st[TPR_MAX_RANK] = {0}, lim[TPR_MAX_RANK];
  memcpy(lim, t->dims, sizeof lim);
  lim[dim] = k;
  return tpr_slice(g, v, st, lim, NULL);
}

// topk(self, k, dim=-1, largest=True, sorted=True). Among tied values the
// lowest indices come first (the stable sort's order); PyTorch leaves the
// choice open and the CPU's falls out of std::nth_element, so tied MoE
// router scores route differently there. Tests pin this order.
static tpr_status_t lower_topk(lw_ctx_t* ctx) {
  tpr_value_t x, v, i;
  int64_t dim;
  TPR_RETURN_IF_ERROR(self_dim(ctx, 2, -1, &x, &dim));
  int64_t k = lw_int(ctx, 1, 0), n = lw_type(ctx, x)->dims[dim];
  if (k < 0 || k > n)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "k %lld out of range [0, %lld]",
                   (long long)k, (long long)n);
  sort_idx(G, x, dim, lw_bool(ctx, 3, true), &v, &i);
  lw_set(ctx, 0, head(G, v, dim, k));
  lw_set(ctx, 1, head(G, i, dim, k));
  return lw_done(ctx);
}

// Values and indices of the sorted |x| at the s64 position |pos| (x's
// shape with |dim| of size 1).
static tpr_status_t pick(lw_ctx_t* ctx, tpr_value_t vals, tpr_value_t idx,
                         int64_t dim, tpr_value_t pos) {
  lw_set(ctx, 0, tpr_gather_along(G, vals, dim, pos));
  if (ctx->num_outs > 1) lw_set(ctx, 1, tpr_gather_along(G, idx, dim, pos));
  return lw_done(ctx);
}

// A constant s64 position, shaped like |x| with |dim| of size 1.
static tpr_value_t const_pos(tpr_graph_t* g, tpr_value_t x, int64_t dim,
                             int64_t p) {
  tpr_type_t t = *tpr_value_type(g, x);
  t.dims[dim] = 1;
  return lw_full(g, (double)p, TPR_DTYPE_S64, &t);
}

// kthvalue(self, k, dim=-1, keepdim=False): the k-th smallest (1-based).
static tpr_status_t lower_kthvalue(lw_ctx_t* ctx) {
  tpr_value_t x, v, i;
  int64_t dim;
  TPR_RETURN_IF_ERROR(self_dim(ctx, 2, -1, &x, &dim));
  int64_t k = lw_int(ctx, 1, 0), n = lw_type(ctx, x)->dims[dim];
  if (k < 1 || k > n)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "k %lld out of range [1, %lld]",
                   (long long)k, (long long)n);
  sort_idx(G, x, dim, false, &v, &i);
  return pick(ctx, v, i, dim, const_pos(G, x, dim, k - 1));
}

// median / nanmedian: the lower median. With NaNs present, median gives the
// first NaN (stable sort: the first NaN of the sorted tail is the first in
// the input) and nanmedian the median of the others (index 0 if all NaN).
static tpr_status_t median(lw_ctx_t* ctx, bool ignore_nan, bool whole) {
  tpr_value_t x, v, i;
  int64_t dim;
  if (whole) {
    const tpr_type_t* t = lw_arg_type(ctx, 0);
    if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
    int64_t n = tpr_type_numel(t);
    if (n == 0) return lw_ret(ctx, lw_full(G, NAN, OUT->dtype, OUT));
    x = tpr_reshape(G, lw_value(ctx, 0), 1, &n);
    dim = 0;
  } else {
    TPR_RETURN_IF_ERROR(self_dim(ctx, 1, 0, &x, &dim));
  }
  tpr_graph_t* g = G;
  const tpr_type_t* xt = lw_type(ctx, x);
  if (tpr_dtype_is_complex(xt->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex values have no order");
  int64_t n = xt->dims[dim];
  if (n == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "median of an empty dimension");
  sort_idx(g, x, dim, false, &v, &i);
  tpr_value_t pos = const_pos(g, x, dim, (n - 1) / 2);
  if (tpr_dtype_is_float(xt->dtype)) {
    tpr_value_t nan = lw_cast(g, lw_isnan(g, x), TPR_DTYPE_S64);
    tpr_value_t nnan = lw_reshape_to(
        g, tpr_reduce(g, nan, TPR_REDUCE_SUM, &dim, 1), lw_type(ctx, pos));
    tpr_value_t valid = lw_sub(g, lw_k(g, nnan, (double)n), nnan);
    if (ignore_nan) {
      tpr_value_t half = lw_div(g, lw_sub(g, valid, lw_k(g, valid, 1)),
                                lw_k(g, valid, 2));
      pos = lw_max(g, half, lw_k(g, half, 0));
    } else {
      pos = lw_sel(g, lw_cmpk(g, TPR_CMP_GT, nnan, 0), valid, pos);
    }
  }
  return pick(ctx, v, i, dim, pos);
}
static tpr_status_t lower_median(lw_ctx_t* ctx) {
  return median(ctx, false, lw_is_none(ctx, 1));
}
static tpr_status_t lower_nanmedian(lw_ctx_t* ctx) {
  return median(ctx, true, lw_is_none(ctx, 1));
}

// mode(self, dim=-1, keepdim=False): the most frequent value (the smallest
// among equally frequent ones) and the last index where it occurs. After a
// sort, a run's length at each place is (place - start of its run + 1),
// with the run start carried forward by a running max.
static tpr_status_t lower_mode(lw_ctx_t* ctx) {
  tpr_value_t x, v, i;
  int64_t dim;
  TPR_RETURN_IF_ERROR(self_dim(ctx, 1, -1, &x, &dim));
  tpr_graph_t* g = G;
  tpr_type_t t = *lw_type(ctx, x);
  int64_t n = t.dims[dim];
  if (n == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "mode of an empty dimension");
  sort_idx(g, x, dim, false, &v, &i);
  tpr_type_t it = t;
  it.dtype = TPR_DTYPE_S64;
  tpr_value_t place = tpr_iota(g, it, dim);
  // start[p] = p where v[p] != v[p-1] (or p == 0), else -1.
  int64_t st[TPR_MAX_RANK] = {0}, lim[TPR_MAX_RANK], lo[TPR_MAX_RANK] = {0},
          hi[TPR_MAX_RANK] = {0};
  memcpy(lim, t.dims, sizeof lim);
  lim[dim] = n - 1;
  lo[dim] = 1;
  tpr_value_t prev = tpr_pad(g, tpr_slice(g, v, st, lim, NULL),
                             tpr_constant_f64(g, t.dtype, 0), lo, hi, NULL);
  tpr_value_t first = lw_cmpk(g, TPR_CMP_EQ, place, 0);
  tpr_value_t starts = tpr_binary(g, TPR_BINARY_OR, first,
                                  lw_cmp(g, TPR_CMP_NE, v, prev));
  tpr_value_t sp = lw_sel(g, starts, place, lw_k(g, place, -1));
  sp = tpr_scan(g, sp, dim, TPR_SCAN_MAX, false);
  tpr_value_t count = lw_sub(g, place, sp);
  // The first place (smallest value) of the longest run.
  tpr_value_t best, at;
  tpr_argreduce(g, count, dim, true, &best, &at);
  tpr_type_t pt = t;
  pt.dims[dim] = 1;
  pt.dtype = TPR_DTYPE_S64;
  tpr_value_t mode = tpr_gather_along(g, v, dim, lw_reshape_to(g, at, &pt));
  // The last input index holding the mode value.
  tpr_value_t full = tpr_broadcast_to(g, mode, t.rank, t.dims);
  tpr_value_t eq = lw_cmp(g, TPR_CMP_EQ, x, full);
  tpr_value_t src = lw_sel(g, eq, place, lw_k(g, place, -1));
  tpr_value_t last = tpr_reduce(g, src, TPR_REDUCE_MAX, &dim, 1);
  lw_set(ctx, 0, mode);
  lw_set(ctx, 1, last);
  return lw_done(ctx);
}

LW_DEFINE_TABLE(sort,
    LW_RULE("sort", lower_sort), LW_RULE("sort.values", lower_sort),
    LW_RULE("sort.stable", lower_sort), LW_RULE("sort.values_stable", lower_sort),
    LW_RULE("argsort", lower_argsort), LW_RULE("argsort.stable", lower_argsort),
    LW_RULE("argsort.stable_out", lower_argsort),
    LW_RULE("msort", lower_msort), LW_RULE("msort.out", lower_msort),
    LW_RULE("topk", lower_topk), LW_RULE("topk.values", lower_topk),
    LW_RULE("kthvalue", lower_kthvalue), LW_RULE("kthvalue.values", lower_kthvalue),
    LW_RULE("median", lower_median), LW_RULE("median.out", lower_median),
    LW_RULE("median.dim", lower_median), LW_RULE("median.dim_values", lower_median),
    LW_RULE("nanmedian", lower_nanmedian), LW_RULE("nanmedian.out", lower_nanmedian),
    LW_RULE("nanmedian.dim", lower_nanmedian),
    LW_RULE("nanmedian.dim_values", lower_nanmedian),
    LW_RULE("mode", lower_mode), LW_RULE("mode.values", lower_mode));
