// View ops as values, for whole graphs (torch.compile). Functionalized
// graphs keep view ops but give them value semantics: a view's result is a
// new dense value computed from its dense input. Eager never reaches these
// rules (views there alias their storage through explicit kernels and
// PyTorch's composite ones), so they only serve compiled graphs.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

static tpr_status_t need_self(lw_ctx_t* ctx) {
  if (!lw_is_tensor(ctx, 0))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  return tpr_ok_status();
}

// permute(self, dims) / transpose.int(self, d0, d1) / t(self).
static tpr_status_t transpose_with(lw_ctx_t* ctx, const int64_t* perm) {
  return lw_ret(ctx, tpr_transpose(G, lw_value(ctx, 0), perm));
}

static tpr_status_t lower_permute(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_arg_t* a = lw_arg(ctx, 1);
  int rank = lw_arg_type(ctx, 0)->rank;
  if (a->kind != TPR_ARG_INT_LIST || a->count != rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dims must list every dim");
  int64_t perm[TPR_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    perm[i] = lw_wrap_dim(a->ints[i], rank);
    if (perm[i] < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  }
  return transpose_with(ctx, perm);
}

static tpr_status_t swap_dims(lw_ctx_t* ctx, int64_t d0, int64_t d1) {
  int rank = lw_arg_type(ctx, 0)->rank;
  int64_t perm[TPR_MAX_RANK];
  for (int i = 0; i < rank; i++) perm[i] = i;
  if (rank > 0) {
    d0 = lw_wrap_dim(d0, rank);
    d1 = lw_wrap_dim(d1, rank);
    if (d0 < 0 || d1 < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
    perm[d0] = d1;
    perm[d1] = d0;
  }
  return transpose_with(ctx, perm);
}

static tpr_status_t lower_transpose(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  return swap_dims(ctx, lw_int(ctx, 1, 0), lw_int(ctx, 2, 1));
}

static tpr_status_t lower_t(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  return swap_dims(ctx, 0, lw_arg_type(ctx, 0)->rank > 1 ? 1 : 0);
}

// expand(self, size, implicit): the out type has the expanded shape.
static tpr_status_t lower_expand(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  return lw_ret(ctx, tpr_broadcast_to(G, lw_value(ctx, 0), OUT->rank, OUT->dims));
}

// Elements [start, start + step * (len - 1)] of |dim|, len from |out|.
static tpr_value_t slice_dim(lw_ctx_t* ctx, tpr_value_t v, int64_t dim,
                             int64_t start, int64_t step, int64_t len) {
  const tpr_type_t* t = lw_type(ctx, v);
  int64_t lo[TPR_MAX_RANK], hi[TPR_MAX_RANK], st[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) {
    lo[i] = 0;
    hi[i] = t->dims[i];
    st[i] = 1;
  }
  lo[dim] = start;
  hi[dim] = len > 0 ? start + step * (len - 1) + 1 : start;
  st[dim] = step;
  return tpr_slice(G, v, lo, hi, st);
}

// The (dim, start, end, step) arguments of a slice from argument |first| on,
// over a tensor of type |t|: dim wrapped, start clamped into [0, size].
static tpr_status_t slice_args(lw_ctx_t* ctx, const tpr_type_t* t, int first,
                               int64_t* dim, int64_t* start, int64_t* step) {
  *dim = lw_wrap_dim(lw_int(ctx, first, 0), t->rank);
  *step = lw_int(ctx, first + 3, 1);
  if (*dim < 0 || *step < 1) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad dim or step");
  int64_t n = t->dims[*dim];
  int64_t s = lw_is_none(ctx, first + 1) ? 0 : lw_int(ctx, first + 1, 0);
  if (s < 0) s += n;
  *start = s < 0 ? 0 : (s > n ? n : s);
  return tpr_ok_status();
}

// slice.Tensor(self, dim, start, end, step)
static tpr_status_t lower_slice(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  int64_t dim, start, step;
  TPR_RETURN_IF_ERROR(slice_args(ctx, lw_arg_type(ctx, 0), 1, &dim, &start, &step));
  return lw_ret(ctx, slice_dim(ctx, lw_value(ctx, 0), dim, start, step, OUT->dims[dim]));
}

// |src| written over elements start, start + step, ... of |dim| of self:
// src padded out to self's shape (interior padding for the step) and
// selected where a padded mask of ones says. A rule of our own rather than
// PyTorch's decomposition, whose result strides differ from the kernel's
// (a later view of it failed to trace).
static tpr_status_t scatter_slice(lw_ctx_t* ctx, tpr_value_t src, int64_t dim,
                                  int64_t start, int64_t step) {
  tpr_graph_t* g = G;
  const tpr_type_t* st = lw_type(ctx, src);
  int64_t len = st->dims[dim], n = OUT->dims[dim];
  tpr_value_t self = lw_cast(g, lw_value(ctx, 0), OUT->dtype);
  if (len == 0 || tpr_type_numel(OUT) == 0) return lw_ret(ctx, self);
  int64_t lo[TPR_MAX_RANK] = {0}, hi[TPR_MAX_RANK] = {0}, in[TPR_MAX_RANK] = {0};
  lo[dim] = start;
  in[dim] = step - 1;
  hi[dim] = n - (start + step * (len - 1) + 1);
  if (hi[dim] < 0 || st->rank != OUT->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "src does not fit the slice");
  for (int i = 0; i < OUT->rank; i++)
    if (i != dim && st->dims[i] != OUT->dims[i])
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "src does not fit the slice");
  tpr_value_t v = tpr_pad(g, lw_cast(g, src, OUT->dtype),
                          tpr_constant_f64(g, OUT->dtype, 0), lo, hi, in);
  tpr_value_t ones = lw_full(g, 1, TPR_DTYPE_BOOL, st);
  tpr_value_t mask = tpr_pad(g, ones, tpr_constant_f64(g, TPR_DTYPE_BOOL, 0), lo, hi, in);
  return lw_ret(ctx, lw_sel(g, mask, v, self));
}

// slice_scatter(self, src, dim=0, start=None, end=None, step=1)
static tpr_status_t lower_slice_scatter(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  if (!lw_is_tensor(ctx, 1)) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs src");
  int64_t dim, start, step;
  TPR_RETURN_IF_ERROR(slice_args(ctx, OUT, 2, &dim, &start, &step));
  return scatter_slice(ctx, lw_value(ctx, 1), dim, start, step);
}

// select_scatter(self, src, dim, index): src lacks |dim|.
static tpr_status_t lower_select_scatter(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* st = lw_arg_type(ctx, 1);
  if (!st) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs src");
  int64_t dim = lw_wrap_dim(lw_int(ctx, 2, 0), OUT->rank);
  if (dim < 0 || st->rank + 1 != OUT->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  int64_t index = lw_int(ctx, 3, 0);
  if (index < 0) index += OUT->dims[dim];
  if (index < 0 || index >= OUT->dims[dim])
    return lw_fail(ctx, TPR_OUT_OF_RANGE, "index %lld out of range", (long long)index);
  tpr_type_t one = *st;
  one.rank = 0;
  for (int i = 0; i < OUT->rank; i++)
    one.dims[one.rank++] = i == dim ? 1 : st->dims[i - (i > dim)];
  return scatter_slice(ctx, lw_reshape_to(G, lw_value(ctx, 1), &one), dim, index, 1);
}

// select.int(self, dim, index)
static tpr_status_t lower_select(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t dim = lw_wrap_dim(lw_int(ctx, 1, 0), t->rank);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  int64_t index = lw_int(ctx, 2, 0);
  if (index < 0) index += t->dims[dim];
  if (index < 0 || index >= t->dims[dim])
    return lw_fail(ctx, TPR_OUT_OF_RANGE, "index %lld out of range", (long long)index);
  return lw_ret(ctx, slice_dim(ctx, lw_value(ctx, 0), dim, index, 1, 1));
}

// split.Tensor / split_with_sizes / unbind.int: consecutive pieces along
// |dim|, sizes from the out types (unbind: pieces of 1, dim removed).
static tpr_status_t split_along(lw_ctx_t* ctx, int64_t dim_arg, bool unbind) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t dim = lw_wrap_dim(dim_arg, t->rank);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  int64_t start = 0;
  for (int k = 0; k < ctx->num_outs; k++) {
    int64_t len = unbind ? 1 : ctx->out_types[k].dims[dim];
    lw_set(ctx, k, slice_dim(ctx, lw_value(ctx, 0), dim, start, 1, len));
    start += len;
  }
  return lw_done(ctx);
}

static tpr_status_t lower_split(lw_ctx_t* ctx) {
  return split_along(ctx, lw_int(ctx, 2, 0), false);
}

static tpr_status_t lower_unbind(lw_ctx_t* ctx) {
  return split_along(ctx, lw_int(ctx, 1, 0), true);
}

// Row-major strides of |t|.
static void dense_strides(const tpr_type_t* t, int64_t* strides) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= t->dims[i];
  }
}

static tpr_value_t flat(lw_ctx_t* ctx, int i) {
  int64_t n = tpr_type_numel(lw_arg_type(ctx, i));
  return tpr_reshape(G, lw_value(ctx, i), 1, &n);
}

// as_strided(self, size, stride, storage_offset): a window of self's dense
// row-major elements (self is a value here, so its storage is itself).
static tpr_status_t lower_as_strided(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_arg_t* size = lw_arg(ctx, 1);
  const tpr_arg_t* stride = lw_arg(ctx, 2);
  if (size->kind != TPR_ARG_INT_LIST || stride->kind != TPR_ARG_INT_LIST ||
      size->count != stride->count || size->count > TPR_MAX_RANK)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "size and stride must be int lists of one length");
  int64_t offset = lw_is_none(ctx, 3) ? 0 : lw_int(ctx, 3, 0);
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  return lw_ret(ctx, tpr_view_read(G, flat(ctx, 0), t->dtype, size->count, size->ints,
                                   stride->ints, offset));
}

// as_strided_scatter(self, src, size, stride, storage_offset): self with the
// strided window of its dense elements replaced by src (the gradient of an
// as_strided view: Longformer's overlapping chunks).
static tpr_status_t lower_as_strided_scatter(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_arg_t* size = lw_arg(ctx, 2);
  const tpr_arg_t* stride = lw_arg(ctx, 3);
  if (!lw_is_tensor(ctx, 1) || size->kind != TPR_ARG_INT_LIST ||
      stride->kind != TPR_ARG_INT_LIST || size->count != stride->count ||
      size->count > TPR_MAX_RANK)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs src, and size and stride of one length");
  int64_t offset = lw_is_none(ctx, 4) ? 0 : lw_int(ctx, 4, 0);
  tpr_value_t src = lw_cast(G, lw_value(ctx, 1), OUT->dtype);
  tpr_value_t base = lw_cast(G, flat(ctx, 0), OUT->dtype);
  tpr_value_t w = tpr_view_write(G, base, size->count, size->ints, stride->ints, offset, src);
  return lw_ret(ctx, lw_reshape_to(G, w, OUT));
}

// diagonal(self, offset, dim1, dim2): the other dims in order, then the
// diagonal, read as a strided window of the dense value.
static tpr_status_t lower_diagonal(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t off = lw_int(ctx, 1, 0);
  int64_t d1 = lw_wrap_dim(lw_int(ctx, 2, 0), t->rank);
  int64_t d2 = lw_wrap_dim(lw_int(ctx, 3, 1), t->rank);
  if (d1 < 0 || d2 < 0 || d1 == d2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad diagonal dims");
  int64_t st[TPR_MAX_RANK], sizes[TPR_MAX_RANK], strides[TPR_MAX_RANK];
  dense_strides(t, st);
  int r = 0;
  for (int i = 0; i < t->rank; i++) {
    if (i == d1 || i == d2) continue;
    sizes[r] = t->dims[i];
    strides[r++] = st[i];
  }
  int64_t start = off >= 0 ? off * st[d2] : -off * st[d1];
  sizes[r] = OUT->dims[OUT->rank - 1];
  strides[r++] = st[d1] + st[d2];
  if (sizes[r - 1] == 0) start = 0;
  return lw_ret(ctx, tpr_view_read(G, flat(ctx, 0), t->dtype, r, sizes, strides, start));
}

// view_as_real(self): complex [...] -> its part type [..., 2] (real, imag).
static tpr_status_t lower_view_as_real(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!tpr_dtype_is_complex(t->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be complex");
  tpr_type_t one = *t;
  one.dims[one.rank++] = 1;
  tpr_value_t x = lw_value(ctx, 0);
  tpr_value_t parts[2] = {lw_reshape_to(G, tpr_unary(G, TPR_UNARY_REAL, x), &one),
                          lw_reshape_to(G, tpr_unary(G, TPR_UNARY_IMAG, x), &one)};
  return lw_ret(ctx, tpr_concatenate(G, parts, 2, t->rank));
}

// view.dtype(self, dtype): self's bits as |dtype|. A narrower element
// multiplies the last dim by the size ratio, a wider one divides it (the
// value is dense: its last dim is contiguous).
static tpr_status_t lower_view_dtype(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_dtype_t to = OUT->dtype;
  if (tpr_dtype_is_complex(t->dtype) || tpr_dtype_is_complex(to))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes: use view_as_real / view_as_complex");
  const size_t from_size = tpr_dtype_size(t->dtype), to_size = tpr_dtype_size(to);
  tpr_value_t x = lw_value(ctx, 0);
  if (from_size == to_size) return lw_ret(ctx, tpr_bitcast_convert(G, x, to));
  if (t->rank == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "a 0-d tensor keeps its element size");
  if (from_size > to_size)  // [..., n] -> [..., n, r] -> [..., n * r]
    return lw_ret(ctx, lw_reshape_to(G, tpr_bitcast_convert(G, x, to), OUT));
  tpr_type_t split = *t;  // [..., n] -> [..., n / r, r] -> [..., n / r]
  const int64_t r = (int64_t)(to_size / from_size);
  if (split.rank >= TPR_MAX_RANK || split.dims[split.rank - 1] % r != 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "the last dim is not a multiple of %d",
                   (int)r);
  split.dims[split.rank - 1] /= r;
  split.dims[split.rank++] = r;
  return lw_ret(ctx, tpr_bitcast_convert(G, lw_reshape_to(G, x, &split), to));
}

// view_as_complex(self): f32/f64 [..., 2] -> complex [...].
static tpr_status_t lower_view_as_complex(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int last = t->rank - 1;
  if (last < 0 || t->dims[last] != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "the last dimension must have size 2");
  tpr_value_t x = lw_value(ctx, 0);
  return lw_ret(ctx, tpr_binary(G, TPR_BINARY_COMPLEX,
                                lw_reshape_to(G, slice_dim(ctx, x, last, 0, 1, 1), OUT),
                                lw_reshape_to(G, slice_dim(ctx, x, last, 1, 1, 1), OUT)));
}

// repeat(self, repeats): self tiled repeats[i] times along each dim, with
// leading dims of 1 when repeats is longer. Each repeated dim is a
// broadcast into [.., r, d, ..] and a merge; contiguous, as the kernel's
// result (PyTorch's decomposition gives other strides).
static tpr_status_t lower_repeat(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_arg_t* a = lw_arg(ctx, 1);
  if (a->kind != TPR_ARG_INT_LIST || a->count < t->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "repeats must list at least as many dims as self has");
  int rank = a->count;
  if (rank >= TPR_MAX_RANK)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "rank above %d", TPR_MAX_RANK - 1);
  tpr_type_t cur = tpr_type_scalar(t->dtype);
  cur.rank = rank;
  for (int i = 0; i < rank; i++) {
    if (a->ints[i] < 0)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "negative repeat %lld", (long long)a->ints[i]);
    cur.dims[i] = i < rank - t->rank ? 1 : t->dims[i - (rank - t->rank)];
  }
  tpr_value_t x = lw_reshape_to(G, lw_value(ctx, 0), &cur);
  for (int d = 0; d < rank; d++) {
    int64_t r = a->ints[d];
    if (r == 1) continue;
    int64_t wide[TPR_MAX_RANK], map[TPR_MAX_RANK];
    for (int i = 0; i < rank; i++) {
      wide[i + (i >= d)] = cur.dims[i];
      map[i] = i + (i >= d);
    }
    wide[d] = r;
    x = tpr_broadcast_in_dim(G, x, rank + 1, wide, map);
    cur.dims[d] *= r;
    x = lw_reshape_to(G, x, &cur);
  }
  return lw_ret(ctx, x);
}

// _neg_view(self): the negated view, as a value.
static tpr_status_t lower_neg_view(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(need_self(ctx));
  return lw_ret(ctx, tpr_unary(G, TPR_UNARY_NEG, lw_value(ctx, 0)));
}

LW_DEFINE_TABLE(
    view,
    LW_RULE("view", lw_rule_identity),
    LW_RULE("_reshape_alias", lw_rule_identity),
    LW_RULE("alias", lw_rule_identity),
    LW_RULE("detach", lw_rule_identity),
    LW_RULE("unsqueeze", lw_rule_identity),
    LW_RULE("squeeze", lw_rule_identity),
    LW_RULE("squeeze.dim", lw_rule_identity),
    LW_RULE("squeeze.dims", lw_rule_identity),
    LW_RULE("permute", lower_permute),
    LW_RULE("transpose.int", lower_transpose),
    LW_RULE("t", lower_t),
    LW_RULE("expand", lower_expand),
    LW_RULE("slice.Tensor", lower_slice),
    LW_RULE("select.int", lower_select),
    LW_RULE("slice_scatter", lower_slice_scatter),
    LW_RULE("select_scatter", lower_select_scatter),
    LW_RULE("split.Tensor", lower_split),
    LW_RULE("split_with_sizes", lower_split),
    LW_RULE("unbind.int", lower_unbind),
    LW_RULE("as_strided", lower_as_strided),
    LW_RULE("as_strided_scatter", lower_as_strided_scatter),
    {"prims::as_strided_scatter", lower_as_strided_scatter},
    LW_RULE("diagonal", lower_diagonal),
    LW_RULE("view.dtype", lower_view_dtype),
    LW_RULE("view_as_real", lower_view_as_real),
    LW_RULE("view_as_complex", lower_view_as_complex),
    LW_RULE("_neg_view", lower_neg_view),
    LW_RULE("repeat", lower_repeat),
    // A value already holds what a conjugate or negative view shows.
    LW_RULE("resolve_conj", lw_rule_identity),
    LW_RULE("resolve_neg", lw_rule_identity),
    // Functional graphs allocate with empty and then overwrite it; zeros
    // stand for the unspecified contents.
    LW_RULE("empty.memory_format", lw_rule_zero),
    LW_RULE("empty_strided", lw_rule_zero),
    LW_RULE("new_empty", lw_rule_zero),
    LW_RULE("new_empty_strided", lw_rule_zero),
    LW_RULE("empty_like", lw_rule_zero));
