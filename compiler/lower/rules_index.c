// Indexing and data movement with computed values: cat, stack, embedding
// (+ backward), index_select, gather, scatter, advanced indexing (index /
// index_put), index_add, triu/tril, flip, roll, constant_pad_nd.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

//===--- cat / stack -----------------------------------------------------------===//

// cat(tensors, dim=0). 1-d empty tensors are skipped (PyTorch's legacy
// rule); inputs convert to the promoted out dtype.
static tpr_status_t lower_cat(lw_ctx_t* ctx) {
  const tpr_arg_t* a = lw_arg(ctx, 0);
  if (a->kind != TPR_ARG_TENSOR_LIST)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "tensors must be a list");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), OUT->rank);
  if (dim < 0 || OUT->rank == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  tpr_value_t parts[256];
  int n = 0;
  for (int i = 0; i < a->count; i++) {
    const tpr_type_t* t = lw_type(ctx, a->values[i]);
    if (t->rank == 1 && t->dims[0] == 0) continue;
    if (n == 256) return lw_fail(ctx, TPR_UNIMPLEMENTED, "more than 256 inputs");
    parts[n++] = lw_cast(G, a->values[i], OUT->dtype);
  }
  if (n == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  if (n == 1) return lw_ret(ctx, parts[0]);
  return lw_ret(ctx, tpr_concatenate(G, parts, n, dim));
}

// stack(tensors, dim=0)
static tpr_status_t lower_stack(lw_ctx_t* ctx) {
  const tpr_arg_t* a = lw_arg(ctx, 0);
  if (a->kind != TPR_ARG_TENSOR_LIST || a->count < 1 || a->count > 256)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "tensors must be a non-empty list");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), OUT->rank);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  tpr_value_t parts[256];
  tpr_type_t one = *OUT;
  one.dims[dim] = 1;
  for (int i = 0; i < a->count; i++)
    parts[i] = lw_reshape_to(G, lw_cast(G, a->values[i], OUT->dtype), &one);
  if (a->count == 1) return lw_ret(ctx, parts[0]);
  return lw_ret(ctx, tpr_concatenate(G, parts, a->count, dim));
}

//===--- embedding, index_select, gather, scatter -----------------------------===//

// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
static tpr_status_t lower_embedding(lw_ctx_t* ctx) {
  if (!lw_is_tensor(ctx, 0) || !lw_is_tensor(ctx, 1))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs weight and indices");
  return lw_ret(ctx, tpr_index_select(G, lw_value(ctx, 0), 0, lw_value(ctx, 1)));
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
// scale_grad_by_freq): rows scatter-added into zeros[num_weights, D].
static tpr_status_t lower_embedding_backward(lw_ctx_t* ctx) {
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, 1);
  if (!gt || !it || OUT->rank != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad_output and indices");
  tpr_graph_t* g = G;
  int64_t k = tpr_type_numel(it), d = OUT->dims[1];
  int64_t nw = OUT->dims[0];
  tpr_dtype_t acc = lw_opmath(OUT->dtype);
  int64_t kd[2] = {k, d};
  tpr_value_t gr = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), acc), 2, kd);
  tpr_value_t idx = tpr_reshape(g, lw_cast(g, lw_value(ctx, 1), TPR_DTYPE_S64), 1, &k);
  if (lw_bool(ctx, 4, false)) {
    tpr_value_t counts = lw_full(g, 0, acc, &(tpr_type_t){acc, 1, {nw}});
    counts = tpr_put_1d(g, counts, idx, lw_full(g, 1, acc, &(tpr_type_t){acc, 1, {k}}), true);
    tpr_value_t sc = tpr_take_1d(g, counts, idx);
    static const int64_t kD0 = 0;
    gr = lw_div(g, gr, tpr_broadcast_in_dim(g, sc, 2, kd, &kD0));
  }
  static const int64_t kD0 = 0;
  tpr_value_t valid = lw_cmpk(g, TPR_CMP_NE, idx, (double)lw_int(ctx, 3, -1));
  valid = tpr_broadcast_in_dim(g, valid, 2, kd, &kD0);
  gr = lw_sel(g, valid, gr, lw_k(g, gr, 0));
  tpr_value_t index = tpr_broadcast_in_dim(g, idx, 2, kd, &kD0);
  tpr_value_t zeros = lw_full(g, 0, acc, &(tpr_type_t){acc, 2, {nw, d}});
  if (k == 0) return lw_ret(ctx, zeros);
  return lw_ret(ctx, tpr_scatter_along(g, zeros, 0, index, gr, true));
}

// index_select(self, dim, index)
static tpr_status_t lower_index_select(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || !lw_is_tensor(ctx, 2))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self and index");
  tpr_value_t x = lw_value(ctx, 0);
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  if (t->rank == 0) {
    int64_t one = 1;
    x = tpr_reshape(G, x, 1, &one);
  }
  return lw_ret(ctx, tpr_index_select(G, x, dim, lw_value(ctx, 2)));
}

static tpr_status_t dim_arg(lw_ctx_t* ctx, const tpr_type_t* t, int i,
                            int64_t* dim) {
  *dim = lw_wrap_dim(lw_int(ctx, i, 0), t->rank);
  if (*dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  if (t->rank == 0) *dim = 0;
  return tpr_ok_status();
}

// gather(self, dim, index, sparse_grad)
static tpr_status_t lower_gather(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || !lw_is_tensor(ctx, 2))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self and index");
  int64_t dim;
  TPR_RETURN_IF_ERROR(dim_arg(ctx, t, 1, &dim));
  // An empty index gives an empty result whatever its rank (PyTorch skips
  // the shape check then).
  if (tpr_type_numel(OUT) == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_value_t x = lw_value(ctx, 0), idx = lw_value(ctx, 2);
  if (t->rank == 0) {  // a 0-d self (and index) read as 1-element vectors
    int64_t one = 1;
    x = tpr_reshape(G, x, 1, &one);
    idx = tpr_reshape(G, idx, 1, &one);
  }
  return lw_ret(ctx, tpr_gather_along(G, x, dim, idx));
}

// scatter.src/.value/.reduce/.value_reduce(self, dim, index, src|value,
// reduce?) and scatter_add(self, dim, index, src).
static tpr_status_t scatter(lw_ctx_t* ctx, bool add) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, 2);
  if (!t || !it || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, index and src");
  const char* reduce = lw_str(ctx, 4, NULL);
  if (reduce) {
    if (strcmp(reduce, "add") == 0) add = true;
    else return lw_fail(ctx, TPR_UNIMPLEMENTED, "reduce=\"%s\"", reduce);
  }
  int64_t dim;
  TPR_RETURN_IF_ERROR(dim_arg(ctx, t, 1, &dim));
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), OUT->dtype);
  if (tpr_type_numel(it) == 0) return lw_ret(ctx, x);  // nothing scattered
  tpr_value_t src = lw_cast(G, lw_value(ctx, 3), OUT->dtype);
  if (lw_arg(ctx, 3)->is_scalar || lw_type(ctx, src)->rank == 0) {
    tpr_type_t st = *it;
    st.dtype = OUT->dtype;
    src = tpr_broadcast_to(G, src, st.rank, st.dims);
  }
  tpr_value_t idx = lw_value(ctx, 2);
  if (t->rank == 0) {  // 0-d self, index and src as 1-element vectors
    int64_t one = 1;
    x = tpr_reshape(G, x, 1, &one);
    idx = tpr_reshape(G, idx, 1, &one);
    src = tpr_reshape(G, src, 1, &one);
  }
  return lw_ret(ctx, tpr_scatter_along(G, x, dim, idx, src, add));
}
static tpr_status_t lower_scatter(lw_ctx_t* ctx) { return scatter(ctx, false); }
static tpr_status_t lower_scatter_add(lw_ctx_t* ctx) { return scatter(ctx, true); }

// index_add(self, dim, index, source, *, alpha=1) and, without |add|,
// index_copy(self, dim, index, source).
static tpr_status_t index_scatter(lw_ctx_t* ctx, bool add) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_type_t* st = lw_arg_type(ctx, 3);
  if (!t || !st || !lw_is_tensor(ctx, 2))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, index and source");
  int64_t dim;
  TPR_RETURN_IF_ERROR(dim_arg(ctx, t, 1, &dim));
  tpr_graph_t* g = G;
  tpr_value_t src = lw_cast(g, lw_value(ctx, 3), OUT->dtype);
  if (lw_is_tensor(ctx, 4)) src = lw_mul(g, src, lw_splat(g, lw_value(ctx, 4), src));
  tpr_value_t idx = lw_cast(g, lw_value(ctx, 2), TPR_DTYPE_S64);
  int64_t n = tpr_type_numel(lw_type(ctx, idx));
  idx = tpr_reshape(g, idx, 1, &n);
  if (st->rank == 0) {
    int64_t one = 1;
    src = tpr_reshape(g, src, 1, &one);
  }
  const tpr_type_t* s2 = lw_type(ctx, src);
  tpr_value_t index = tpr_broadcast_in_dim(g, idx, s2->rank, s2->dims, &dim);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), OUT->dtype);
  if (t->rank == 0) {  // a 0-d self is indexed as a 1-element vector
    int64_t one = 1;
    x = tpr_reshape(g, x, 1, &one);
  }
  return lw_ret(ctx, tpr_scatter_along(g, x, dim, index, src, add));
}
static tpr_status_t lower_index_add(lw_ctx_t* ctx) { return index_scatter(ctx, true); }
static tpr_status_t lower_index_copy(lw_ctx_t* ctx) { return index_scatter(ctx, false); }

//===--- advanced indexing ---------------------------------------------------------===//

// The index tensors of index / index_put as coordinates: s64[B..., m] for
// the m indexed dims (negative indices wrapped), B their broadcast shape.
// The operand is never transposed or flattened: gather and scatter take
// whole windows of it where it lies (an index_put into a large cache then
// costs its updates, not the cache).
typedef struct {
  tpr_value_t coords;
  tpr_type_t btype;   // broadcast shape of the index tensors
  int64_t dims[TPR_MAX_RANK];  // the indexed dims, in order
  int m;
  int rest;           // number of dims not indexed
  bool adjacent;      // indexed dims are consecutive
} adv_t;

static tpr_status_t adv_setup(lw_ctx_t* ctx, tpr_value_t self, adv_t* s) {
  tpr_graph_t* g = G;
  const tpr_type_t* t = lw_type(ctx, self);
  const tpr_arg_t* ind = lw_arg(ctx, 1);
  if (ind->kind != TPR_ARG_TENSOR_LIST || ind->count > t->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "indices must be a list up to rank");
  s->m = 0;
  s->btype = tpr_type_scalar(TPR_DTYPE_S64);
  for (int k = 0; k < ind->count; k++) {
    if (ind->values[k] == TPR_VALUE_NONE) continue;
    const tpr_type_t* it = lw_type(ctx, ind->values[k]);
    if (!lw_is_int(it->dtype))
      return lw_fail(ctx, TPR_UNIMPLEMENTED,
                     "boolean-mask indexing has a data-dependent shape");
    tpr_type_t b;  // s64, the index tensors' broadcast shape
    if (!lw_broadcast_shape(&s->btype, it, &b))
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "index shapes do not broadcast");
    s->btype = b;
    s->dims[s->m++] = k;
  }
  if (s->m == 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "no index tensors");
  if (s->btype.rank + 1 > TPR_MAX_RANK || s->btype.rank + t->rank - s->m > TPR_MAX_RANK)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "result rank above %d", TPR_MAX_RANK);
  s->adjacent = s->dims[s->m - 1] - s->dims[0] == s->m - 1;
  s->rest = t->rank - s->m;
  tpr_type_t col = s->btype;  // [B..., 1]
  col.dims[col.rank++] = 1;
  tpr_value_t cols[TPR_MAX_RANK];
  for (int j = 0; j < s->m; j++) {
    double size = (double)t->dims[s->dims[j]];
    tpr_value_t ix = lw_cast_to(g, ind->values[s->dims[j]], TPR_DTYPE_S64, &s->btype);
    ix = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, ix, 0), lw_add(g, ix, lw_k(g, ix, size)), ix);
    cols[j] = lw_reshape_to(g, ix, &col);
  }
  s->coords = s->m == 1 ? cols[0] : tpr_concatenate(g, cols, s->m, col.rank - 1);
  return tpr_ok_status();
}

// The permutation taking [B..., rest...] to PyTorch's result order (B at
// the first indexed dim when the indexed dims are adjacent).
static int result_perm(const adv_t* s, int64_t* perm) {
  int nb = s->btype.rank, n = 0;
  int before = s->adjacent ? (int)s->dims[0] : 0;
  for (int i = 0; i < before; i++) perm[n++] = nb + i;
  for (int i = 0; i < nb; i++) perm[n++] = i;
  for (int i = before; i < s->rest; i++) perm[n++] = nb + i;
  return n;
}

// index.Tensor / _unsafe_index.Tensor(self, indices)
static tpr_status_t lower_index(lw_ctx_t* ctx) {
  if (!lw_is_tensor(ctx, 0)) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self");
  adv_t s;
  TPR_RETURN_IF_ERROR(adv_setup(ctx, lw_value(ctx, 0), &s));
  tpr_value_t r = tpr_gather_windows(G, lw_value(ctx, 0), s.dims, s.m, s.coords);
  int64_t perm[TPR_MAX_RANK];
  result_perm(&s, perm);
  return lw_ret(ctx, tpr_transpose(G, r, perm));
}

// index_put with one boolean mask (x[mask] = v, x[:, mask] += v). Which
// positions the mask selects is data-dependent, but the result's shape is
// not: when v does not run along them (a scalar, or one row for every
// selected position) it is where(mask, v, x), or x + where(mask, v, 0) when
// accumulating. When v has n rows along them, the k-th selected position
// takes row k (its slot: a prefix count of the mask), and a run-time check
// says the mask selected n positions. Static shapes, no host sync.
// TPR_VALUE_NONE when the form does not apply.
static tpr_value_t masked_put(lw_ctx_t* ctx, tpr_value_t self, bool accumulate) {
  tpr_graph_t* g = G;
  const tpr_arg_t* ind = lw_arg(ctx, 1);
  const tpr_type_t* t = lw_type(ctx, self);
  int p = -1;
  for (int k = 0; k < ind->count; k++) {
    if (ind->values[k] == TPR_VALUE_NONE) continue;
    if (p >= 0) return TPR_VALUE_NONE;  // more than one index tensor
    p = k;
  }
  if (p < 0) return TPR_VALUE_NONE;
  tpr_value_t mask = ind->values[p];
  const tpr_type_t* mt = lw_type(ctx, mask);
  if ((mt->dtype != TPR_DTYPE_BOOL && mt->dtype != TPR_DTYPE_U8) ||
      p + mt->rank > t->rank)
    return TPR_VALUE_NONE;
  for (int i = 0; i < mt->rank; i++)
    if (mt->dims[i] != t->dims[p + i]) return TPR_VALUE_NONE;
  // The indexing result is [self dims before p, N selected, dims after the
  // mask]; values broadcast to it from the right.
  int after = t->rank - p - mt->rank, rank = p + 1 + after;
  const tpr_type_t* vt = lw_arg_type(ctx, 2);
  if (vt->rank > rank) return TPR_VALUE_NONE;
  int64_t rows = vt->rank > rank - p - 1 ? vt->dims[vt->rank - rank + p] : 1;
  // The places of self, and (rows > 1) the values, as [before, N, after].
  tpr_type_t full = tpr_type_scalar(OUT->dtype);
  int64_t map[TPR_MAX_RANK];
  for (int i = 0; i < rank; i++)
    full.dims[full.rank++] = i < p ? t->dims[i] : i == p ? rows : t->dims[i - 1 + mt->rank];
  for (int j = 0; j < vt->rank; j++) {
    int rd = rank - vt->rank + j;
    if (vt->dims[j] != 1 && vt->dims[j] != full.dims[rd]) return TPR_VALUE_NONE;
    map[j] = rd;
  }
  tpr_value_t v = lw_cast(g, lw_value(ctx, 2), OUT->dtype);
  v = tpr_broadcast_in_dim(g, v, full.rank, full.dims, map);
  tpr_value_t m = lw_cast(g, mask, TPR_DTYPE_BOOL);
  int64_t places = tpr_type_numel(mt);
  if (rows != 1) {
    tpr_value_t flat = tpr_reshape(g, m, 1, &places);
    int64_t all = 0;
    tpr_value_t count = tpr_reduce(g, lw_cast(g, flat, TPR_DTYPE_S64), TPR_REDUCE_SUM, &all, 1);
    lw_check(ctx, lw_cmpk(g, TPR_CMP_EQ, count, (double)rows),
             "shape mismatch: the mask selects a number of places other than the "
             "%lld rows of values", (long long)rows);
    if (rows == 0) return self;  // nothing is written
    // Row k to the k-th selected place: [before, places, after], as self.
    v = tpr_index_select(g, v, p, lw_true_slots(g, flat, 0));
    v = tpr_reshape(g, v, t->rank, t->dims);
  } else {
    // The one row, [before, after], broadcast along the mask's dims.
    int64_t sdims[TPR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < rank; i++) {
      if (i == p) continue;
      sdims[r] = full.dims[i];
      map[r++] = i < p ? i : i - 1 + mt->rank;
    }
    v = tpr_broadcast_in_dim(g, tpr_reshape(g, v, r, sdims), t->rank, t->dims, map);
  }
  for (int i = 0; i < mt->rank; i++) map[i] = p + i;
  m = tpr_broadcast_in_dim(g, m, t->rank, t->dims, map);
  if (accumulate) return lw_add(g, self, lw_sel(g, m, v, lw_k(g, v, 0)));
  return lw_sel(g, m, v, self);
}

// index_put / _index_put_impl_ / _unsafe_index_put(self, indices, values,
// accumulate=False, unsafe=False)
static tpr_status_t lower_index_put(lw_ctx_t* ctx) {
  if (!lw_is_tensor(ctx, 0) || !lw_is_tensor(ctx, 2))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self and values");
  tpr_graph_t* g = G;
  tpr_value_t self = lw_cast(g, lw_value(ctx, 0), OUT->dtype);
  if (lw_arg(ctx, 1)->kind == TPR_ARG_TENSOR_LIST) {
    tpr_value_t masked = masked_put(ctx, self, lw_bool(ctx, 3, false));
    if (masked != TPR_VALUE_NONE) return lw_ret(ctx, masked);
  }
  adv_t s;
  TPR_RETURN_IF_ERROR(adv_setup(ctx, self, &s));
  // values broadcast to the indexing result (PyTorch's order), then
  // permuted to [B..., rest...].
  int64_t perm[TPR_MAX_RANK], inv[TPR_MAX_RANK];
  int nr = result_perm(&s, perm);
  const tpr_type_t* st = lw_type(ctx, self);
  tpr_type_t rt = tpr_type_scalar(OUT->dtype);  // [B..., rest...]
  for (int i = 0; i < s.btype.rank; i++) rt.dims[rt.rank++] = s.btype.dims[i];
  for (int d = 0, j = 0; d < st->rank; d++) {
    if (j < s.m && s.dims[j] == d) j++;
    else rt.dims[rt.rank++] = st->dims[d];
  }
  tpr_type_t res = rt;
  for (int i = 0; i < nr; i++) res.dims[i] = rt.dims[perm[i]];
  for (int i = 0; i < nr; i++) inv[perm[i]] = i;
  tpr_value_t v = tpr_transpose(g, lw_in(ctx, 2, OUT->dtype, &res), inv);
  return lw_ret(ctx, tpr_scatter_windows(g, self, s.dims, s.m, s.coords, v,
                                         lw_bool(ctx, 3, false)));
}

//===--- triu / tril, flip, roll, pad ------------------------------------------------===//

static tpr_status_t tri(lw_ctx_t* ctx, bool upper) {
  if (OUT->rank < 2) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs rank >= 2");
  tpr_graph_t* g = G;
  tpr_type_t it = *OUT;
  it.dtype = TPR_DTYPE_S64;
  tpr_value_t diff = lw_sub(g, tpr_iota(g, it, OUT->rank - 1), tpr_iota(g, it, OUT->rank - 2));
  double k = (double)lw_int(ctx, 1, 0);
  tpr_value_t keep = lw_cmpk(g, upper ? TPR_CMP_GE : TPR_CMP_LE, diff, k);
  tpr_value_t x = lw_in(ctx, 0, OUT->dtype, OUT);
  return lw_ret(ctx, lw_sel(g, keep, x, lw_k(g, x, 0)));
}
static tpr_status_t lower_triu(lw_ctx_t* ctx) { return tri(ctx, true); }
static tpr_status_t lower_tril(lw_ctx_t* ctx) { return tri(ctx, false); }

// flip(self, dims)
static tpr_status_t lower_flip(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self");
  int64_t dims[TPR_MAX_RANK], bad = 0;
  int n = lw_reduce_dims(ctx, 1, t->rank, true, dims, &bad);
  if (n < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim %lld out of range", (long long)bad);
  if (n == 0) return lw_ret(ctx, lw_value(ctx, 0));
  return lw_ret(ctx, tpr_reverse(G, lw_value(ctx, 0), dims, n));
}

static tpr_value_t roll1(tpr_graph_t* g, tpr_value_t x, int64_t shift, int64_t dim) {
  tpr_type_t t = *tpr_value_type(g, x);
  int64_t size = t.dims[dim];
  if (size == 0) return x;
  int64_t s = ((shift % size) + size) % size;
  if (s == 0) return x;
  int64_t st[TPR_MAX_RANK] = {0}, lim[TPR_MAX_RANK];
  memcpy(lim, t.dims, sizeof lim);
  st[dim] = size - s;
  tpr_value_t tail = tpr_slice(g, x, st, lim, NULL);
  st[dim] = 0;
  lim[dim] = size - s;
  tpr_value_t head = tpr_slice(g, x, st, lim, NULL);
  tpr_value_t parts[2] = {tail, head};
  return tpr_concatenate(g, parts, 2, dim);
}

// roll(self, shifts, dims=[])
static tpr_status_t lower_roll(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_arg_t* sh = lw_arg(ctx, 1);
  const tpr_arg_t* dm = lw_arg(ctx, 2);
  if (!t || sh->kind != TPR_ARG_INT_LIST)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self and shifts");
  tpr_value_t x = lw_value(ctx, 0);
  if (dm->kind != TPR_ARG_INT_LIST || dm->count == 0) {
    int64_t n = tpr_type_numel(t);
    x = roll1(G, tpr_reshape(G, x, 1, &n), sh->count ? sh->ints[0] : 0, 0);
    return lw_ret(ctx, x);
  }
  if (dm->count != sh->count)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "shifts and dims differ in length");
  for (int i = 0; i < dm->count; i++) {
    int64_t d = lw_wrap_dim(dm->ints[i], t->rank);
    if (d < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
    x = roll1(G, x, sh->ints[i], d);
  }
  return lw_ret(ctx, x);
}

// constant_pad_nd(self, pad, value=0): pairs from the last dim backwards;
// negative pads crop.
static tpr_status_t lower_constant_pad(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_arg_t* pad = lw_arg(ctx, 1);
  if (!t || pad->kind != TPR_ARG_INT_LIST || pad->count % 2 ||
      pad->count / 2 > t->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad pad list");
  tpr_graph_t* g = G;
  int r = t->rank;
  int64_t lo[TPR_MAX_RANK] = {0}, hi[TPR_MAX_RANK] = {0}, in[TPR_MAX_RANK] = {0};
  int64_t st[TPR_MAX_RANK] = {0}, lim[TPR_MAX_RANK];
  memcpy(lim, t->dims, sizeof lim);
  for (int i = 0; i < pad->count / 2; i++) {
    int d = r - 1 - i;
    int64_t l = pad->ints[2 * i], h = pad->ints[2 * i + 1];
    if (l < 0) st[d] = -l; else lo[d] = l;
    if (h < 0) lim[d] = t->dims[d] + h; else hi[d] = h;
    if (lim[d] < st[d]) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "pad crops below 0");
  }
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), OUT->dtype);
  x = tpr_slice(g, x, st, lim, NULL);
  tpr_value_t v = lw_is_tensor(ctx, 2) ? lw_cast(g, lw_value(ctx, 2), OUT->dtype)
                                       : tpr_constant_f64(g, OUT->dtype, 0);
  return lw_ret(ctx, tpr_pad(g, x, v, lo, hi, in));
}

//===--- index ranges for deferred bound checks --------------------------------===//

// tpu::index_range(index, ignore_index, has_ignore) -> s64[2]: the least and
// the greatest entry of an integer index tensor, entries equal to
// ignore_index left out (none left: {INT64_MAX, INT64_MIN}). One program per
// indexed op in strict eager, whose bounds the host checks at its next wait
// for the device (csrc/aten/ArgChecks.cpp).
static tpr_status_t lower_index_range(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || !lw_is_int(t->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "expected an integer index tensor");
  if (OUT->dtype != TPR_DTYPE_S64 || OUT->rank != 1 || OUT->dims[0] != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "the result is s64[2]");
  if (tpr_type_numel(t) == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "an empty index has no range");
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), TPR_DTYPE_S64);
  tpr_value_t lo = x, hi = x;
  if (lw_bool(ctx, 2, false)) {
    tpr_value_t skip = lw_cmp(G, TPR_CMP_EQ, x,
                              tpr_broadcast_to(G, tpr_constant_i64(G, TPR_DTYPE_S64,
                                                                   lw_int(ctx, 1, 0)),
                                               t->rank, t->dims));
    lo = lw_sel(G, skip, tpr_broadcast_to(G, tpr_constant_highest(G, TPR_DTYPE_S64),
                                          t->rank, t->dims), x);
    hi = lw_sel(G, skip, tpr_broadcast_to(G, tpr_constant_lowest(G, TPR_DTYPE_S64),
                                          t->rank, t->dims), x);
  }
  int64_t dims[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) dims[i] = i;
  static const int64_t kOne[1] = {1};
  tpr_value_t parts[2] = {
      tpr_reshape(G, tpr_reduce(G, lo, TPR_REDUCE_MIN, dims, t->rank), 1, kOne),
      tpr_reshape(G, tpr_reduce(G, hi, TPR_REDUCE_MAX, dims, t->rank), 1, kOne)};
  return lw_ret(ctx, tpr_concatenate(G, parts, 2, 0));
}

LW_DEFINE_TABLE(index,
    {"tpu::index_range", lower_index_range},
    LW_RULE("cat", lower_cat), LW_RULE("cat.out", lower_cat),
    LW_RULE("stack", lower_stack), LW_RULE("stack.out", lower_stack),
    LW_RULE("embedding", lower_embedding), LW_RULE("embedding.out", lower_embedding),
    LW_RULE("embedding_dense_backward", lower_embedding_backward),
    LW_RULE("embedding_dense_backward.out", lower_embedding_backward),
    LW_RULE("index_select", lower_index_select),
    LW_RULE("index_select.out", lower_index_select),
    LW_RULE("gather", lower_gather), LW_RULE("gather.out", lower_gather),
    LW_RULE("scatter.src", lower_scatter), LW_RULE("scatter_.src", lower_scatter),
    LW_RULE("scatter.src_out", lower_scatter),
    LW_RULE("scatter.value", lower_scatter), LW_RULE("scatter_.value", lower_scatter),
    LW_RULE("scatter.value_out", lower_scatter),
    LW_RULE("scatter_add", lower_scatter_add), LW_RULE("scatter_add_", lower_scatter_add),
    LW_RULE("scatter_add.out", lower_scatter_add),
    LW_RULE("index_add", lower_index_add), LW_RULE("index_add_", lower_index_add),
    LW_RULE("index_add.out", lower_index_add),
    LW_RULE("index_copy", lower_index_copy), LW_RULE("index_copy_", lower_index_copy),
    LW_RULE("index_copy.out", lower_index_copy),
    LW_RULE("index.Tensor", lower_index), LW_RULE("index.Tensor_out", lower_index),
    LW_RULE("_unsafe_index.Tensor", lower_index),
    LW_RULE("index_put", lower_index_put), LW_RULE("index_put_", lower_index_put),
    LW_RULE("index_put.out", lower_index_put),
    LW_RULE("_index_put_impl_", lower_index_put),
    LW_RULE("_unsafe_index_put", lower_index_put),
    LW_RULE("triu", lower_triu), LW_RULE("triu_", lower_triu), LW_RULE("triu.out", lower_triu),
    LW_RULE("tril", lower_tril), LW_RULE("tril_", lower_tril), LW_RULE("tril.out", lower_tril),
    LW_RULE("flip", lower_flip), LW_RULE("flip.out", lower_flip),
    LW_RULE("roll", lower_roll), LW_RULE("roll.out", lower_roll),
    LW_RULE("constant_pad_nd", lower_constant_pad),
    LW_RULE("constant_pad_nd.out", lower_constant_pad));
