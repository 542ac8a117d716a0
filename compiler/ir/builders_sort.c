// Builders for sorting, prefix scans and FFTs (see graph.h, "sorting, scans,
// FFT"). tpr_sort and tpr_fft are single StableHLO ops; the scans are
// composed from pad/slice/elementwise ops (Hillis-Steele: ceil(log2 n)
// steps, each combining every element with the one 2^k before it), which
// every XLA backend compiles quickly into fused loops. A reduce_window with
// a size-n window would be quadratic on backends that do not rewrite it.
#include <math.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"

#define TB 96

static bool is_int(tpr_dtype_t d) {
  return tpr_dtype_is_signed_int(d) || tpr_dtype_is_unsigned_int(d);
}

//===--- sort --------------------------------------------------------------===//

void tpr_sort(tpr_graph_t* g, const tpr_value_t* operands, int count,
              int64_t dimension, bool descending, tpr_value_t* out_values) {
  for (int i = 0; out_values && i < count; i++) out_values[i] = TPR_VALUE_NONE;
  if (!tpr_graph_ok(g)) return;
  char b[TB], c[TB];
  if (count < 1 || count > 8 || !operands || !out_values) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "tpr_sort: needs 1 to 8 operands and outputs, got %d", count);
    return;
  }
  tpr_type_t types[8];
  for (int i = 0; i < count; i++) {
    const tpr_type_t* t = tpr_graph_operand(g, operands[i], "tpr_sort", i);
    if (!t) return;
    types[i] = *t;
    bool same = t->rank == types[0].rank &&
                !memcmp(t->dims, types[0].dims, (size_t)t->rank * sizeof(int64_t));
    if (!same) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                     "tpr_sort: operand %d %s has not the shape of operand 0 %s",
                     i, tpr_type_format(t, b, TB),
                     tpr_type_format(&types[0], c, TB));
      return;
    }
  }
  tpr_dtype_t kd = types[0].dtype;
  if (dimension < 0 || dimension >= types[0].rank ||
      !(tpr_dtype_is_float(kd) || is_int(kd) || kd == TPR_DTYPE_BOOL)) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "tpr_sort: dimension %lld / key dtype invalid for %s",
                   (long long)dimension, tpr_type_format(&types[0], b, TB));
    return;
  }
  // A dim of size <= 1 is already sorted.
  if (types[0].dims[dimension] <= 1) {
    for (int i = 0; i < count; i++) out_values[i] = operands[i];
    return;
  }
  tpr_value_t first =
      tpr_graph_add_node(g, TPR_OP_SORT, (int32_t)dimension, operands, count,
                         (int64_t[]){descending}, 1, NULL, 0, types, count);
  if (first == TPR_VALUE_NONE) return;
  for (int i = 0; i < count; i++) out_values[i] = first + i;
}

//===--- scans -------------------------------------------------------------===//

// The identity of |op| as a rank-0 value of |d|.
static tpr_value_t scan_identity(tpr_graph_t* g, tpr_scan_op_t op,
                                 tpr_dtype_t d) {
  switch (op) {
    case TPR_SCAN_SUM: return tpr_constant_i64(g, d, 0);
    case TPR_SCAN_PROD: return tpr_constant_i64(g, d, 1);
    case TPR_SCAN_MAX: return tpr_constant_lowest(g, d);
    case TPR_SCAN_MIN: return tpr_constant_highest(g, d);
    case TPR_SCAN_LOGADDEXP: return tpr_constant_f64(g, d, -INFINITY);
  }
  return TPR_VALUE_NONE;
}

static tpr_value_t splat(tpr_graph_t* g, tpr_value_t s, const tpr_type_t* t) {
  return tpr_broadcast_in_dim(g, s, t->rank, t->dims, NULL);
}

// log(exp(a) + exp(b)) = max + log1p(exp(min - max)); both -inf gives -inf
// (min - max would be NaN), a NaN operand gives NaN.
static tpr_value_t logaddexp(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  const tpr_type_t* t = tpr_value_type(g, a);
  tpr_type_t tt = *t;
  tpr_value_t mx = tpr_binary(g, TPR_BINARY_MAX, a, b);
  tpr_value_t mn = tpr_binary(g, TPR_BINARY_MIN, a, b);
  tpr_value_t r = tpr_binary(
      g, TPR_BINARY_ADD, mx,
      tpr_unary(g, TPR_UNARY_LOG1P,
                tpr_unary(g, TPR_UNARY_EXP,
                          tpr_binary(g, TPR_BINARY_SUB, mn, mx))));
  tpr_value_t inf = splat(g, tpr_constant_f64(g, tt.dtype, INFINITY), &tt);
  tpr_value_t ninf = splat(g, tpr_constant_f64(g, tt.dtype, -INFINITY), &tt);
  // mx = +inf or mn = -inf: the result is mx exactly (no inf - inf).
  tpr_value_t exact = tpr_binary(g, TPR_BINARY_OR,
                                 tpr_compare(g, TPR_CMP_EQ, mx, inf),
                                 tpr_compare(g, TPR_CMP_EQ, mn, ninf));
  return tpr_select(g, exact, mx, r);
}

static tpr_value_t combine(tpr_graph_t* g, tpr_scan_op_t op, tpr_value_t a,
                           tpr_value_t b) {
  switch (op) {
    case TPR_SCAN_SUM:
      if (tpr_value_type(g, a)->dtype == TPR_DTYPE_BOOL)
        return tpr_binary(g, TPR_BINARY_OR, a, b);
      return tpr_binary(g, TPR_BINARY_ADD, a, b);
    case TPR_SCAN_PROD:
      if (tpr_value_type(g, a)->dtype == TPR_DTYPE_BOOL)
        return tpr_binary(g, TPR_BINARY_AND, a, b);
      return tpr_binary(g, TPR_BINARY_MUL, a, b);
    case TPR_SCAN_MAX: return tpr_binary(g, TPR_BINARY_MAX, a, b);
    case TPR_SCAN_MIN: return tpr_binary(g, TPR_BINARY_MIN, a, b);
    case TPR_SCAN_LOGADDEXP: return logaddexp(g, a, b);
  }
  return TPR_VALUE_NONE;
}

// |v| shifted by |s| along |dim| towards higher indices (lower when
// |reverse|), the vacated places filled with |fill|.
static tpr_value_t shift(tpr_graph_t* g, tpr_value_t v, int64_t dim, int64_t s,
                         bool reverse, tpr_value_t fill) {
  tpr_type_t t = *tpr_value_type(g, v);
  int64_t start[TPR_MAX_RANK] = {0}, limit[TPR_MAX_RANK];
  int64_t lo[TPR_MAX_RANK] = {0}, hi[TPR_MAX_RANK] = {0};
  memcpy(limit, t.dims, sizeof limit);
  if (reverse) {
    start[dim] = s;
    hi[dim] = s;
  } else {
    limit[dim] = t.dims[dim] - s;
    lo[dim] = s;
  }
  return tpr_pad(g, tpr_slice(g, v, start, limit, NULL), fill, lo, hi, NULL);
}

static bool scan_check(tpr_graph_t* g, const char* who, const tpr_type_t* t,
                       int64_t dim, bool ok_dtype) {
  char b[TB];
  if (dim < 0 || dim >= t->rank || !ok_dtype) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "%s: dimension %lld / dtype invalid for %s", who,
                   (long long)dim, tpr_type_format(t, b, TB));
    return false;
  }
  return true;
}

tpr_value_t tpr_scan(tpr_graph_t* g, tpr_value_t v, int64_t dim,
                     tpr_scan_op_t op, bool reverse) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const tpr_type_t* tp = tpr_graph_operand(g, v, "tpr_scan", 0);
  if (!tp) return TPR_VALUE_NONE;
  tpr_type_t t = *tp;
  tpr_dtype_t d = t.dtype;
  bool ok = (unsigned)op <= TPR_SCAN_LOGADDEXP &&
            (tpr_dtype_is_float(d) ||
             (op != TPR_SCAN_LOGADDEXP && (is_int(d) || d == TPR_DTYPE_BOOL)));
  if (!scan_check(g, "tpr_scan", &t, dim, ok)) return TPR_VALUE_NONE;
  int64_t n = t.dims[dim];
  tpr_value_t id = scan_identity(g, op, d);
  for (int64_t s = 1; s < n; s *= 2)
    v = combine(g, op, v, shift(g, v, dim, s, reverse, id));
  return v;
}

void tpr_scan_arg(tpr_graph_t* g, tpr_value_t v, int64_t dim, bool is_max,
                  tpr_value_t* out_values, tpr_value_t* out_indices) {
  *out_values = *out_indices = TPR_VALUE_NONE;
  if (!tpr_graph_ok(g)) return;
  const tpr_type_t* tp = tpr_graph_operand(g, v, "tpr_scan_arg", 0);
  if (!tp) return;
  tpr_type_t t = *tp;
  tpr_dtype_t d = t.dtype;
  bool fl = tpr_dtype_is_float(d);
  if (!scan_check(g, "tpr_scan_arg", &t, dim,
                  fl || is_int(d) || d == TPR_DTYPE_BOOL))
    return;
  tpr_type_t it = t;
  it.dtype = TPR_DTYPE_S64;
  tpr_value_t idx = tpr_iota(g, it, dim);
  // Element (a, ia) before (b, ib): b wins when b is NaN, or a is not NaN
  // and b >= a (<= for min). This is a max under a total order with ties
  // going to the later index, so it is associative; the padding (the
  // identity, index -1) never wins against a real element.
  tpr_value_t idv = scan_identity(g, is_max ? TPR_SCAN_MAX : TPR_SCAN_MIN, d);
  tpr_value_t idi = tpr_constant_i64(g, TPR_DTYPE_S64, -1);
  int64_t n = t.dims[dim];
  for (int64_t s = 1; s < n; s *= 2) {
    tpr_value_t a = shift(g, v, dim, s, false, idv);
    tpr_value_t ia = shift(g, idx, dim, s, false, idi);
    tpr_value_t win = tpr_compare(g, is_max ? TPR_CMP_GE : TPR_CMP_LE, v, a);
    if (fl) {
      tpr_value_t b_nan = tpr_compare(g, TPR_CMP_NE, v, v);
      tpr_value_t a_num = tpr_compare(g, TPR_CMP_EQ, a, a);
      win = tpr_binary(g, TPR_BINARY_OR, b_nan,
                       tpr_binary(g, TPR_BINARY_AND, a_num, win));
    }
    v = tpr_select(g, win, v, a);
    idx = tpr_select(g, win, idx, ia);
  }
  *out_values = v;
  *out_indices = idx;
}

//===--- FFT ---------------------------------------------------------------===//

static tpr_dtype_t complex_of(tpr_dtype_t d) {
  return d == TPR_DTYPE_F64 ? TPR_DTYPE_C128 : TPR_DTYPE_C64;
}

tpr_value_t tpr_fft(tpr_graph_t* g, tpr_value_t v, tpr_fft_type_t type,
                    const int64_t* lengths, int num_dims) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const tpr_type_t* t = tpr_graph_operand(g, v, "tpr_fft", 0);
  if (!t) return TPR_VALUE_NONE;
  char b[TB];
  tpr_dtype_t d = t->dtype;
  bool cplx = d == TPR_DTYPE_C64 || d == TPR_DTYPE_C128;
  bool real = d == TPR_DTYPE_F32 || d == TPR_DTYPE_F64;
  bool ok = (unsigned)type <= TPR_FFT_IRFFT && num_dims >= 1 && num_dims <= 3 &&
            num_dims <= t->rank && lengths &&
            (type == TPR_FFT_RFFT ? real : cplx);
  for (int i = 0; ok && i < num_dims; i++) {
    int64_t have = t->dims[t->rank - num_dims + i], want = lengths[i];
    bool last = i == num_dims - 1;
    ok = want >= 1 &&
         (type == TPR_FFT_IRFFT && last ? have == want / 2 + 1 : have == want);
  }
  if (!ok)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_fft: type %d over %d dims does not fit %s",
                          (int)type, num_dims, tpr_type_format(t, b, TB));
  tpr_type_t r = *t;
  if (type == TPR_FFT_RFFT) {
    r.dtype = complex_of(d);
    r.dims[r.rank - 1] = lengths[num_dims - 1] / 2 + 1;
  } else if (type == TPR_FFT_IRFFT) {
    r.dtype = d == TPR_DTYPE_C128 ? TPR_DTYPE_F64 : TPR_DTYPE_F32;
    r.dims[r.rank - 1] = lengths[num_dims - 1];
  }
  return tpr_graph_add_node(g, TPR_OP_FFT, (int32_t)type, &v, 1, lengths,
                            num_dims, NULL, 0, &r, 1);
}

//===--- scatter with a combiner -------------------------------------------===//

tpr_value_t tpr_scatter_reduce_along(tpr_graph_t* g, tpr_value_t v,
                                     int64_t dim, tpr_value_t index,
                                     tpr_value_t src, tpr_reduce_op_t op) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const tpr_type_t* t = tpr_graph_operand(g, v, "tpr_scatter_reduce_along", 0);
  const tpr_type_t* ti =
      t ? tpr_graph_operand(g, index, "tpr_scatter_reduce_along", 1) : NULL;
  const tpr_type_t* ts =
      ti ? tpr_graph_operand(g, src, "tpr_scatter_reduce_along", 2) : NULL;
  if (!ts) return TPR_VALUE_NONE;
  char b[TB], c[TB], d[TB];
  int r = t->rank;
  bool ok = is_int(ti->dtype) && ti->rank == r && ts->rank == r &&
            ts->dtype == t->dtype && r >= 1 && r < TPR_MAX_RANK && dim >= 0 &&
            dim < r && op >= TPR_REDUCE_SUM && op <= TPR_REDUCE_MIN &&
            (tpr_dtype_is_float(t->dtype) || is_int(t->dtype) ||
             t->dtype == TPR_DTYPE_BOOL);
  for (int k = 0; ok && k < r; k++)
    if ((k != dim && ti->dims[k] > t->dims[k]) || ti->dims[k] > ts->dims[k])
      ok = false;
  if (!ok)
    return tpr_graph_fail(
        g, TPR_INVALID_ARGUMENT,
        "tpr_scatter_reduce_along: op %d, dim %lld, index %s, src %s do not "
        "fit %s",
        (int)op, (long long)dim, tpr_type_format(ti, c, TB),
        tpr_type_format(ts, d, TB), tpr_type_format(t, b, TB));
  if (tpr_type_numel(ti) == 0) return v;
  int64_t zeros[TPR_MAX_RANK] = {0};
  src = tpr_slice(g, src, zeros, ti->dims, NULL);
  // Full coordinates s64[I..., r]: |index| in column |dim|, iotas elsewhere.
  int64_t cd[TPR_MAX_RANK + 1];
  memcpy(cd, ti->dims, (size_t)r * sizeof(int64_t));
  cd[r] = 1;
  tpr_type_t ct = tpr_type_make(TPR_DTYPE_S64, r + 1, cd);
  tpr_value_t cols[TPR_MAX_RANK];
  for (int k = 0; k < r; k++)
    cols[k] = k == dim ? tpr_reshape(g, tpr_convert(g, index, TPR_DTYPE_S64),
                                     r + 1, cd)
                       : tpr_iota(g, ct, k);
  tpr_value_t coords = tpr_concatenate(g, cols, r, r);
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  // Dimension numbers as graph_internal.h packs them: no window dims, all
  // dims inserted, coordinates map to every operand dim.
  int64_t ints[5 + 2 * TPR_MAX_RANK];
  int n = 0;
  ints[n++] = 0;
  ints[n++] = r;
  ints[n++] = r;
  ints[n++] = r;
  ints[n++] = 0;
  for (int k = 0; k < r; k++) ints[n++] = k;
  for (int k = 0; k < r; k++) ints[n++] = k;
  tpr_value_t ops[3] = {v, coords, src};
  return tpr_graph_add_node(g, TPR_OP_SCATTER_REDUCE, (int32_t)op, ops, 3, ints,
                            n, NULL, 0, t, 1);
}
