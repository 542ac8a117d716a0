// Strided windows over flat storage: tpr_view_read / tpr_view_write.
//
// A window is (sizes, strides, offset) over a rank-1 base. Its "active"
// dims have size > 1 and stride != 0; size-1 dims never matter and stride-0
// dims are broadcasts (reads only). Sort the active dims by decreasing
// stride s[0] > s[1] > ... > s[k-1]. The window is a *box* when every outer
// stride is a multiple of the next one with room for that dim
// (s[j] % s[j+1] == 0, s[j] / s[j+1] >= size[j+1], j < k-2) and the
// innermost run fits in one step of the dim above it
// ((size[k-1] - 1) * s[k-1] < s[k-2]). A box is read as
//
//   slice(base, offset, offset + size[0] * s[0])   (padded if it runs off)
//   reshape to [size[0], s[0]/s[1], ..., s[k-3]/s[k-2], s[k-2]]
//   slice [0:size[0], ..., 0:size[k-2], 0:(size[k-1]-1)*s[k-1]+1:s[k-1]]
//   transpose back to the original dim order, then broadcast / reshape
//
// which covers contiguous tensors (slice + reshape, or nothing at all for
// the whole base), transposes/permutes, narrow/select and stepped slices.
// Writes mirror this with dynamic_update_slice on the reshaped region.
// Everything else (overlapping reads such as unfold, negative strides, odd
// interleavings) computes flat indices with iota * stride + offset and
// gathers / scatters.
#include <stdlib.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"

typedef struct window {
  int rank;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t offset;
  int k;                      // number of active dims
  int act[TPR_MAX_RANK];      // original positions of the active dims
  int order[TPR_MAX_RANK];    // active indices sorted by decreasing stride
  bool broadcast;             // some dim has size > 1 and stride 0
  bool negative;              // some active stride is negative
  int64_t numel, lo, hi;      // element count, lowest/highest address
} window_t;

// Validates the window against a base of |n| elements and classifies it.
static bool analyze(tpr_graph_t* g, const char* who, int64_t n, int rank,
                    const int64_t* sizes, const int64_t* strides,
                    int64_t offset, window_t* w) {
  memset(w, 0, sizeof *w);
  if (rank < 0 || rank > TPR_MAX_RANK || (rank && (!sizes || !strides))) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: bad rank %d", who, rank);
    return false;
  }
  w->rank = rank;
  w->sizes = sizes;
  w->strides = strides;
  w->offset = offset;
  w->numel = 1;
  w->lo = w->hi = offset;
  for (int i = 0; i < rank; i++) {
    if (sizes[i] < 0) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: size %d is negative (%lld)",
                     who, i, (long long)sizes[i]);
      return false;
    }
    if (__builtin_mul_overflow(w->numel, sizes[i], &w->numel)) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: window too large", who);
      return false;
    }
  }
  if (w->numel == 0) return true;
  for (int i = 0; i < rank; i++) {
    if (sizes[i] == 1) continue;
    if (strides[i] == 0) {
      w->broadcast = true;
      continue;
    }
    int64_t span;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) ||
        __builtin_add_overflow(span > 0 ? w->hi : w->lo, span,
                               span > 0 ? &w->hi : &w->lo)) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: window overflows", who);
      return false;
    }
    if (strides[i] < 0) w->negative = true;
    w->act[w->k++] = i;
  }
  if (w->lo < 0 || w->hi >= n) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "%s: window (offset %lld) reaches elements [%lld, %lld] "
                   "outside the storage of %lld elements",
                   who, (long long)offset, (long long)w->lo, (long long)w->hi,
                   (long long)n);
    return false;
  }
  // Insertion sort of the active dims by decreasing |stride|.
  for (int j = 0; j < w->k; j++) {
    int x = j;
    int p = j;
    while (p > 0 && strides[w->act[w->order[p - 1]]] < strides[w->act[x]]) {
      w->order[p] = w->order[p - 1];
      p--;
    }
    w->order[p] = x;
  }
  return true;
}

static int64_t sorted_size(const window_t* w, int j) {
  return w->sizes[w->act[w->order[j]]];
}
static int64_t sorted_stride(const window_t* w, int j) {
  return w->strides[w->act[w->order[j]]];
}

// The box reshape of a window with k >= 2 active dims (see the top).
typedef struct box {
  int64_t R[TPR_MAX_RANK];  // region shape, k dims
  int64_t len;              // region length, size[0] * s[0]
  int64_t inner;            // s[k-1], the stride of the last region dim
  bool dense;               // the region is exactly the window
} box_t;

static bool box_plan(const window_t* w, box_t* b) {
  int k = w->k;
  if (w->negative || k < 2) return false;
  b->R[0] = sorted_size(w, 0);
  for (int j = 1; j + 1 < k; j++) {
    int64_t s = sorted_stride(w, j - 1), s1 = sorted_stride(w, j);
    if (s == s1 || s % s1 || s / s1 < sorted_size(w, j)) return false;
    b->R[j] = s / s1;
  }
  b->R[k - 1] = sorted_stride(w, k - 2);
  b->inner = sorted_stride(w, k - 1);
  if (b->inner >= b->R[k - 1] ||
      (sorted_size(w, k - 1) - 1) * b->inner >= b->R[k - 1])
    return false;
  b->dense = b->inner == 1 && b->R[k - 1] == sorted_size(w, k - 1);
  for (int j = 1; j + 1 < k; j++) b->dense &= b->R[j] == sorted_size(w, j);
  return !__builtin_mul_overflow(b->R[0], sorted_stride(w, 0), &b->len);
}

static tpr_value_t index_const(tpr_graph_t* g, int64_t v) {
  return tpr_constant_i64(g, TPR_DTYPE_S64, v);
}

// Flat addresses of the active dims, shape = active sizes in original order.
static tpr_value_t flat_indices(tpr_graph_t* g, const window_t* w) {
  tpr_dtype_t it = (w->hi < INT32_MAX) ? TPR_DTYPE_S32 : TPR_DTYPE_S64;
  int64_t dims[TPR_MAX_RANK];
  for (int j = 0; j < w->k; j++) dims[j] = w->sizes[w->act[j]];
  tpr_type_t t = tpr_type_make(it, w->k, dims);
  tpr_value_t acc = TPR_VALUE_NONE;
  for (int j = 0; j < w->k; j++) {
    tpr_value_t term = tpr_iota(g, t, j);
    int64_t s = w->strides[w->act[j]];
    if (s != 1)
      term = tpr_binary(g, TPR_BINARY_MUL, term,
                        tpr_broadcast_in_dim(g, tpr_constant_i64(g, it, s),
                                             w->k, dims, NULL));
    acc = j ? tpr_binary(g, TPR_BINARY_ADD, acc, term) : term;
  }
  if (w->offset != 0 || w->k == 0)
    acc = w->k ? tpr_binary(g, TPR_BINARY_ADD, acc,
                            tpr_broadcast_in_dim(
                                g, tpr_constant_i64(g, it, w->offset), w->k,
                                dims, NULL))
               : tpr_constant_i64(g, it, w->offset);
  return acc;
}

// From a value over the active dims (original order) to the window shape.
static tpr_value_t expand_active(tpr_graph_t* g, const window_t* w,
                                 tpr_value_t x) {
  if (!w->broadcast) return tpr_reshape(g, x, w->rank, w->sizes);
  int64_t bd[TPR_MAX_RANK];
  for (int j = 0; j < w->k; j++) bd[j] = w->act[j];
  return tpr_broadcast_in_dim(g, x, w->rank, w->sizes, bd);
}

static tpr_value_t zero_of(tpr_graph_t* g, tpr_dtype_t d) {
  return tpr_constant_i64(g, d, 0);
}

// True when |a| and |b| are a complex dtype and its part type (c64/f32,
// c128/f64): a storage of one can be viewed as the other (view_as_real,
// view_as_complex), each complex element being two adjacent parts.
static bool complex_pair(tpr_dtype_t a, tpr_dtype_t b) {
  return (a == TPR_DTYPE_C64 && b == TPR_DTYPE_F32) ||
         (a == TPR_DTYPE_F32 && b == TPR_DTYPE_C64) ||
         (a == TPR_DTYPE_C128 && b == TPR_DTYPE_F64) ||
         (a == TPR_DTYPE_F64 && b == TPR_DTYPE_C128);
}

// The rank-1 |base| reinterpreted as |dtype| (see complex_pair): XLA cannot
// bitcast between complex and real types, so complex -> parts interleaves
// real and imag, parts -> complex pairs them with stablehlo.complex. Exact.
static tpr_value_t reinterpret_complex(tpr_graph_t* g, tpr_value_t base,
                                       tpr_dtype_t dtype) {
  const tpr_type_t* bt = tpr_value_type(g, base);
  int64_t n = bt->dims[0];
  if (tpr_dtype_is_complex(bt->dtype)) {
    int64_t col[2] = {n, 1}, flat = 2 * n;
    tpr_value_t parts[2] = {
        tpr_reshape(g, tpr_unary(g, TPR_UNARY_REAL, base), 2, col),
        tpr_reshape(g, tpr_unary(g, TPR_UNARY_IMAG, base), 2, col)};
    return tpr_reshape(g, tpr_concatenate(g, parts, 2, 1), 1, &flat);
  }
  if (n % 2)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_view_read: a %s storage of %lld elements has "
                          "no %s view (odd count)",
                          tpr_dtype_name(bt->dtype), (long long)n,
                          tpr_dtype_name(dtype));
  int64_t pairs[2] = {n / 2, 2}, half = n / 2;
  tpr_value_t x = tpr_reshape(g, base, 2, pairs);
  int64_t s0[2] = {0, 0}, l0[2] = {half, 1}, s1[2] = {0, 1}, l1[2] = {half, 2};
  tpr_value_t re = tpr_reshape(g, tpr_slice(g, x, s0, l0, NULL), 1, &half);
  tpr_value_t im = tpr_reshape(g, tpr_slice(g, x, s1, l1, NULL), 1, &half);
  return tpr_binary(g, TPR_BINARY_COMPLEX, re, im);
}

// The rank-1 |base| reinterpreted as |dtype| of another element size (real
// types; bool goes through u8, so a bool |dtype| gives u8): the storage's
// bytes in order, as PyTorch sees them. A trailing partial element is left
// out. Complex types other than their part pairs are UNIMPLEMENTED.
static tpr_value_t reinterpret_sized(tpr_graph_t* g, tpr_value_t base,
                                     tpr_dtype_t dtype, const char* who) {
  const tpr_type_t* bt = tpr_value_type(g, base);
  tpr_dtype_t from = bt->dtype;
  int64_t n = bt->dims[0];
  char b[96];
  if (tpr_dtype_is_complex(from) || tpr_dtype_is_complex(dtype))
    return tpr_graph_fail(g, TPR_UNIMPLEMENTED,
                          "%s: viewing %s storage %s as %s (different element "
                          "sizes) is not supported",
                          who, tpr_dtype_name(from),
                          tpr_type_format(bt, b, sizeof b),
                          tpr_dtype_name(dtype));
  if (from == TPR_DTYPE_BOOL) {
    base = tpr_bitcast_convert(g, base, TPR_DTYPE_U8);
    from = TPR_DTYPE_U8;
  }
  tpr_dtype_t to = dtype == TPR_DTYPE_BOOL ? TPR_DTYPE_U8 : dtype;
  size_t sf = tpr_dtype_size(from), st = tpr_dtype_size(to);
  if (sf == st) return tpr_bitcast_convert(g, base, to);
  if (sf > st) {
    int64_t flat = n * (int64_t)(sf / st);
    return tpr_reshape(g, tpr_bitcast_convert(g, base, to), 1, &flat);
  }
  int64_t r = (int64_t)(st / sf), m = n / r, used = m * r, zero = 0;
  int64_t rows[2] = {m, r};
  if (used != n) base = tpr_slice(g, base, &zero, &used, NULL);
  return tpr_bitcast_convert(g, tpr_reshape(g, base, 2, rows), to);
}

tpr_value_t tpr_view_read(tpr_graph_t* g, tpr_value_t base, tpr_dtype_t dtype,
                          int rank, const int64_t* sizes,
                          const int64_t* strides, int64_t offset) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const char* who = "tpr_view_read";
  const tpr_type_t* bt = tpr_graph_operand(g, base, who, 0);
  if (!bt) return TPR_VALUE_NONE;
  char b[96];
  tpr_dtype_t bd = bt->dtype;
  int64_t n = bt->dims[0];
  if (bt->rank != 1)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "%s: the base must be rank 1, got %s", who,
                          tpr_type_format(bt, b, sizeof b));
  if (!tpr_dtype_is_valid(dtype))
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: invalid dtype %d", who,
                          (int)dtype);
  if (complex_pair(bd, dtype) && tpr_dtype_size(dtype) != tpr_dtype_size(bd)) {
    base = reinterpret_complex(g, base, dtype);
    if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
    bd = dtype;
    n = tpr_value_type(g, base)->dims[0];
  }
  if (dtype != bd && tpr_dtype_size(dtype) != tpr_dtype_size(bd)) {
    base = reinterpret_sized(g, base, dtype, who);
    if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
    bd = tpr_value_type(g, base)->dtype;
    n = tpr_value_type(g, base)->dims[0];
  }
  window_t w;
  if (!analyze(g, who, n, rank, sizes, strides, offset, &w))
    return TPR_VALUE_NONE;
  if (w.numel == 0)
    return tpr_constant_dense(g, tpr_type_make(dtype, rank, sizes), NULL);

  tpr_value_t x;
  box_t bx;
  if (w.k <= 1 && !w.negative) {
    // One element or one strided run: a (strided) slice of the base.
    int64_t s = w.k ? sorted_stride(&w, 0) : 1;
    int64_t m = w.k ? sorted_size(&w, 0) : 1;
    int64_t lim = offset + (m - 1) * s + 1;
    x = tpr_slice(g, base, &offset, &lim, &s);
    if (w.k == 0) x = tpr_reshape(g, x, 0, NULL);
  } else if (box_plan(&w, &bx)) {
    int64_t end = offset + bx.len;
    x = base;
    if (end > n) {
      int64_t lo = 0, hi = end - n;
      x = tpr_pad(g, x, zero_of(g, bd), &lo, &hi, NULL);
    }
    x = tpr_slice(g, x, &offset, &end, NULL);
    x = tpr_reshape(g, x, w.k, bx.R);
    if (!bx.dense) {
      int64_t zeros[TPR_MAX_RANK] = {0}, lim[TPR_MAX_RANK], st[TPR_MAX_RANK];
      for (int j = 0; j < w.k; j++) {
        lim[j] = sorted_size(&w, j);
        st[j] = 1;
      }
      st[w.k - 1] = bx.inner;
      lim[w.k - 1] = (lim[w.k - 1] - 1) * bx.inner + 1;
      x = tpr_slice(g, x, zeros, lim, st);
    }
    // Sorted order -> original order of the active dims.
    int64_t perm[TPR_MAX_RANK];
    for (int j = 0; j < w.k; j++) perm[w.order[j]] = j;
    x = tpr_transpose(g, x, perm);
  } else {
    x = tpr_take_1d(g, base, flat_indices(g, &w));
  }
  x = expand_active(g, &w, x);
  return tpr_bitcast_convert(g, x, dtype);
}

static int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

// Exact overlap test for windows the box rule cannot prove disjoint.
static bool overlaps_exactly(const window_t* w, bool* out_overlap) {
  if (w->numel > (1 << 22)) return false;
  int64_t* addr = (int64_t*)tpr_malloc((size_t)w->numel * sizeof(int64_t));
  if (!addr) return false;
  int64_t idx[TPR_MAX_RANK] = {0};
  for (int64_t e = 0; e < w->numel; e++) {
    int64_t a = w->offset;
    for (int j = 0; j < w->k; j++) a += idx[j] * w->strides[w->act[j]];
    addr[e] = a;
    for (int j = w->k - 1; j >= 0; j--) {
      if (++idx[j] < w->sizes[w->act[j]]) break;
      idx[j] = 0;
    }
  }
  qsort(addr, (size_t)w->numel, sizeof(int64_t), cmp_i64);
  bool dup = false;
  for (int64_t e = 1; e < w->numel && !dup; e++) dup = addr[e] == addr[e - 1];
  tpr_free(addr);
  *out_overlap = dup;
  return true;
}

static tpr_value_t write_box(tpr_graph_t* g, tpr_value_t base, tpr_value_t v,
                             const window_t* w, const box_t* bx, int k,
                             const int64_t* ss);

tpr_value_t tpr_view_write(tpr_graph_t* g, tpr_value_t base, int rank,
                           const int64_t* sizes, const int64_t* strides,
                           int64_t offset, tpr_value_t value) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const char* who = "tpr_view_write";
  const tpr_type_t* bt = tpr_graph_operand(g, base, who, 0);
  const tpr_type_t* vt = tpr_graph_operand(g, value, who, 1);
  if (!bt || !vt) return TPR_VALUE_NONE;
  char b[96], c[96];
  tpr_dtype_t bd = bt->dtype;
  int64_t n = bt->dims[0];
  if (bt->rank != 1)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "%s: the base must be rank 1, got %s", who,
                          tpr_type_format(bt, b, sizeof b));
  tpr_type_t want = tpr_type_make(vt->dtype, rank, sizes);
  if (rank < 0 || rank > TPR_MAX_RANK || !tpr_type_equal(vt, &want))
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "%s: value %s does not have the window shape (rank "
                          "%d)",
                          who, tpr_type_format(vt, b, sizeof b), rank);
  if (complex_pair(bd, vt->dtype) &&
      tpr_dtype_size(vt->dtype) != tpr_dtype_size(bd)) {
    // Write through the other view of the storage, then turn it back.
    tpr_value_t other = reinterpret_complex(g, base, vt->dtype);
    if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
    other = tpr_view_write(g, other, rank, sizes, strides, offset, value);
    return reinterpret_complex(g, other, bd);
  }
  size_t vs = tpr_dtype_size(vt->dtype), bs = tpr_dtype_size(bd);
  if (vt->dtype != bd && vs != bs) {
    // Write through the storage's bytes seen as the value's type, then turn
    // them back; a partial trailing element would be lost on the way.
    if (vs > bs && n % (int64_t)(vs / bs))
      return tpr_graph_fail(g, TPR_UNIMPLEMENTED,
                            "%s: writing %s into %s storage %s (different "
                            "element sizes, not a whole number of elements)",
                            who, tpr_type_format(vt, b, sizeof b),
                            tpr_dtype_name(bd), tpr_type_format(bt, c, sizeof c));
    tpr_value_t other = reinterpret_sized(g, base, vt->dtype, who);
    if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
    other = tpr_view_write(g, other, rank, sizes, strides, offset, value);
    if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
    return tpr_bitcast_convert(g, reinterpret_sized(g, other, bd, who), bd);
  }
  window_t w;
  if (!analyze(g, who, n, rank, sizes, strides, offset, &w))
    return TPR_VALUE_NONE;
  if (w.numel == 0) return base;
  if (w.broadcast)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "%s: the window has a stride-0 dim of size > 1 "
                          "(overlapping elements)",
                          who);
  value = tpr_bitcast_convert(g, value, bd);
  // The active dims in original order: drop the size-1 dims.
  int64_t adims[TPR_MAX_RANK];
  for (int j = 0; j < w.k; j++) adims[j] = sizes[w.act[j]];
  tpr_value_t v = tpr_reshape(g, value, w.k, adims);

  box_t bx;
  int k = w.k;
  int64_t ss[TPR_MAX_RANK];  // window sizes in decreasing-stride order
  for (int j = 0; j < k; j++) ss[j] = sorted_size(&w, j);
  bool run = k <= 1 && !w.negative;
  if (run) {  // one element or one strided run: a box [m] of stride s
    bx.inner = k ? sorted_stride(&w, 0) : 1;
    ss[0] = k ? ss[0] : 1;
    k = 1;
    bx.R[0] = bx.len = ss[0] * bx.inner;
    bx.dense = bx.inner == 1;
  }
  if ((run || box_plan(&w, &bx)) && (bx.inner == 1 || k < TPR_MAX_RANK))
    return write_box(g, base, v, &w, &bx, k, ss);
  // Not a box: reject overlaps (equal strides, interleavings), then scatter.
  bool overlap;
  if (!overlaps_exactly(&w, &overlap))
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "%s: cannot prove the window disjoint (%lld "
                          "elements)",
                          who, (long long)w.numel);
  if (overlap)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "%s: the window's elements overlap", who);
  return tpr_put_1d(g, base, flat_indices(g, &w), v, false);
}

// Writes |v| (active dims, original order) into the box |bx| of |base|:
// the region [offset, offset + len) reshaped to [R.., last] has its last dim
// padded to c * inner and split into [c, inner], so that the window is the
// unit-stride corner [ss.., 1] for one dynamic_update_slice.
static tpr_value_t write_box(tpr_graph_t* g, tpr_value_t base, tpr_value_t v,
                             const window_t* w, const box_t* bx, int k,
                             const int64_t* ss) {
  int64_t n = tpr_value_type(g, base)->dims[0], offset = w->offset;
  tpr_dtype_t bd = tpr_value_type(g, base)->dtype;
  tpr_value_t off = index_const(g, offset);
  // Original order -> decreasing-stride order.
  int64_t perm[TPR_MAX_RANK];
  for (int j = 0; j < w->k; j++) perm[j] = w->order[j];
  if (w->k) v = tpr_transpose(g, v, perm);
  if (bx->dense) {
    int64_t numel = w->numel;
    v = tpr_reshape(g, v, 1, &numel);
    if (offset == 0 && numel == n) return v;  // the whole storage
    return tpr_dynamic_update_slice(g, base, v, &off);
  }
  int64_t end = offset + bx->len, len = bx->len;
  tpr_value_t x = base;
  if (end > n) {
    int64_t lo = 0, hi = end - n;
    x = tpr_pad(g, x, zero_of(g, bd), &lo, &hi, NULL);
  }
  tpr_value_t r = tpr_slice(g, x, &offset, &end, NULL);
  int64_t last = bx->R[k - 1], inner = bx->inner;
  int64_t c = (last + inner - 1) / inner;
  int64_t shape[TPR_MAX_RANK + 1], vshape[TPR_MAX_RANK + 1];
  int64_t zl[TPR_MAX_RANK] = {0}, ph[TPR_MAX_RANK] = {0};
  memcpy(shape, bx->R, sizeof(int64_t) * (size_t)k);
  r = tpr_reshape(g, r, k, shape);
  ph[k - 1] = c * inner - last;
  r = tpr_pad(g, r, zero_of(g, bd), zl, ph, NULL);
  shape[k - 1] = c;
  shape[k] = inner;
  int nd = k + (inner > 1);
  r = tpr_reshape(g, r, nd, shape);
  memcpy(vshape, ss, sizeof(int64_t) * (size_t)k);
  vshape[k] = 1;
  v = tpr_reshape(g, v, nd, vshape);
  tpr_value_t zero = index_const(g, 0), zs[TPR_MAX_RANK + 1];
  for (int j = 0; j < nd; j++) zs[j] = zero;
  r = tpr_dynamic_update_slice(g, r, v, zs);
  shape[k - 1] = c * inner;
  r = tpr_reshape(g, r, k, shape);
  shape[k - 1] = last;
  r = tpr_slice(g, r, zl, shape, NULL);
  r = tpr_reshape(g, r, 1, &len);
  x = tpr_dynamic_update_slice(g, x, r, &off);
  if (end > n) {
    int64_t zero0 = 0;
    x = tpr_slice(g, x, &zero0, &n, NULL);
  }
  return x;
}
