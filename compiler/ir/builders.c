// Builders: operand checks and result types for every op of graph.h.
//
// Each builder returns TPR_VALUE_NONE at once when the graph already holds an
// error (so TPR_VALUE_NONE propagates silently), and records an error naming
// itself and its operand types on a bad operand. No-op cases (reshape to the
// same shape, identity transpose, convert to the same dtype, ...) return the
// operand itself and add no node.
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"

#define TB 96  // type-format buffer size

#define OPERAND(t, v, who, i)                                  \
  const tpr_type_t* t = tpr_graph_operand(g, (v), (who), (i)); \
  if (!t) return TPR_VALUE_NONE

#define FAIL(...) return tpr_graph_fail(g, TPR_INVALID_ARGUMENT, __VA_ARGS__)

bool tpr_plugin_workarounds(void) {
  static atomic_int state;  // 0: not read yet, 1: on, 2: off
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (!s) {
    const char* e = getenv("TORCH_TPU_PLUGIN_WORKAROUNDS");
    s = e && strcmp(e, "0") == 0 ? 2 : 1;
    atomic_store_explicit(&state, s, memory_order_relaxed);
  }
  return s == 1;
}

static const char* fmt(const tpr_type_t* t, char* buf) {
  return tpr_type_format(t, buf, TB);
}

static tpr_value_t add1(tpr_graph_t* g, tpr_op_t op, int32_t sub,
                        const tpr_value_t* operands, int nops,
                        const int64_t* ints, int nints, tpr_type_t type) {
  return tpr_graph_add_node(g, op, sub, operands, nops, ints, nints, NULL, 0,
                            &type, 1);
}

// Checks |rank| and |dims| for a result shape; false after recording.
static bool check_shape(tpr_graph_t* g, const char* who, int rank,
                        const int64_t* dims) {
  if (rank < 0 || rank > TPR_MAX_RANK) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: rank %d out of [0, %d]", who,
                   rank, TPR_MAX_RANK);
    return false;
  }
  if (rank && !dims) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: missing dims", who);
    return false;
  }
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: dim %d is negative (%lld)",
                     who, i, (long long)dims[i]);
      return false;
    }
  return true;
}

// Checks that |dims| are |n| distinct dimensions of a rank-|rank| value.
static bool check_dim_set(tpr_graph_t* g, const char* who, const char* what,
                          const int64_t* dims, int n, int rank) {
  if (n < 0 || n > rank || (n && !dims)) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: bad %s count %d for rank %d",
                   who, what, n, rank);
    return false;
  }
  unsigned seen = 0;
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0 || dims[i] >= rank || (seen >> dims[i]) & 1u) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                     "%s: %s[%d] = %lld is out of range or repeated (rank %d)",
                     who, what, i, (long long)dims[i], rank);
      return false;
    }
    seen |= 1u << dims[i];
  }
  return true;
}

static bool is_int(tpr_dtype_t d) {
  return tpr_dtype_is_signed_int(d) || tpr_dtype_is_unsigned_int(d);
}

//===--- shapes ------------------------------------------------------------===//

tpr_value_t tpr_iota(tpr_graph_t* g, tpr_type_t type, int64_t dimension) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  char b[TB];
  if (!check_shape(g, "tpr_iota", type.rank, type.dims)) return TPR_VALUE_NONE;
  if (!(is_int(type.dtype) || tpr_dtype_is_float(type.dtype)) ||
      dimension < 0 || dimension >= type.rank)
    FAIL("tpr_iota: bad type %s or dimension %lld", fmt(&type, b),
         (long long)dimension);
  return add1(g, TPR_OP_IOTA, (int32_t)dimension, NULL, 0, NULL, 0, type);
}

tpr_value_t tpr_convert(tpr_graph_t* g, tpr_value_t v, tpr_dtype_t dtype) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_convert", 0);
  char b[TB];
  if (!tpr_dtype_is_valid(dtype))
    FAIL("tpr_convert: invalid target dtype %d for %s", (int)dtype, fmt(t, b));
  if (t->dtype == dtype) return v;
  if (tpr_dtype_is_complex(t->dtype) && !tpr_dtype_is_complex(dtype)) {
    // XLA has no complex -> real convert: take the real part first.
    v = tpr_unary(g, TPR_UNARY_REAL, v);
    return tpr_convert(g, v, dtype);
  }
  tpr_type_t r = *t;
  r.dtype = dtype;
  return add1(g, TPR_OP_CONVERT, 0, &v, 1, NULL, 0, r);
}

tpr_value_t tpr_bitcast_convert(tpr_graph_t* g, tpr_value_t v,
                                tpr_dtype_t dtype) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_bitcast_convert", 0);
  char b[TB];
  if (!tpr_dtype_is_valid(dtype))
    FAIL("tpr_bitcast_convert: %s to invalid dtype %d", fmt(t, b), (int)dtype);
  if (t->dtype == dtype) return v;
  size_t from = tpr_dtype_size(t->dtype), to = tpr_dtype_size(dtype);
  if (tpr_dtype_is_complex(t->dtype) != tpr_dtype_is_complex(dtype))
    return tpr_graph_fail(g, TPR_UNIMPLEMENTED,
                          "tpr_bitcast_convert: %s to %s: XLA cannot bitcast "
                          "between complex and real types",
                          fmt(t, b), tpr_dtype_name(dtype));
  tpr_type_t r = *t;
  r.dtype = dtype;
  if (from != to) {
    // StableHLO's width change: a wider element splits into a new minor dim
    // of narrower ones, and a minor dim of narrower ones joins into one.
    bool pred = t->dtype == TPR_DTYPE_BOOL || dtype == TPR_DTYPE_BOOL;
    if (pred || tpr_dtype_is_complex(dtype))
      FAIL("tpr_bitcast_convert: %s to %s: element sizes differ", fmt(t, b),
           tpr_dtype_name(dtype));
    if (from > to) {
      if (r.rank == TPR_MAX_RANK)
        FAIL("tpr_bitcast_convert: %s to %s: no room for the minor dim",
             fmt(t, b), tpr_dtype_name(dtype));
      r.dims[r.rank++] = (int64_t)(from / to);
    } else {
      if (t->rank == 0 || t->dims[t->rank - 1] != (int64_t)(to / from))
        FAIL("tpr_bitcast_convert: %s to %s: the minor dim must be %d",
             fmt(t, b), tpr_dtype_name(dtype), (int)(to / from));
      r.rank--;
    }
  }
  return add1(g, TPR_OP_BITCAST_CONVERT, 0, &v, 1, NULL, 0, r);
}

tpr_value_t tpr_broadcast_in_dim(tpr_graph_t* g, tpr_value_t v, int rank,
                                 const int64_t* dims,
                                 const int64_t* broadcast_dims) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_broadcast_in_dim", 0);
  if (!check_shape(g, "tpr_broadcast_in_dim", rank, dims) ||
      !check_dim_set(g, "tpr_broadcast_in_dim", "broadcast_dims",
                     broadcast_dims, t->rank, rank))
    return TPR_VALUE_NONE;
  char b[TB];
  bool identity = t->rank == rank;
  for (int i = 0; i < t->rank; i++) {
    int64_t od = t->dims[i], rd = dims[broadcast_dims[i]];
    if (od != 1 && od != rd)
      FAIL("tpr_broadcast_in_dim: operand %s dim %d (%lld) does not fit result "
           "dim %lld (%lld)",
           fmt(t, b), i, (long long)od, (long long)broadcast_dims[i],
           (long long)rd);
    if (broadcast_dims[i] != i || od != rd) identity = false;
  }
  if (identity) return v;
  tpr_type_t r = tpr_type_make(t->dtype, rank, dims);
  return add1(g, TPR_OP_BROADCAST_IN_DIM, 0, &v, 1, broadcast_dims, t->rank, r);
}

tpr_value_t tpr_broadcast_to(tpr_graph_t* g, tpr_value_t v, int rank,
                             const int64_t* dims) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_broadcast_to", 0);
  char b[TB];
  if (!check_shape(g, "tpr_broadcast_to", rank, dims)) return TPR_VALUE_NONE;
  if (t->rank > rank)
    FAIL("tpr_broadcast_to: %s has more dims than the target rank %d",
         fmt(t, b), rank);
  int64_t bd[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) bd[i] = rank - t->rank + i;
  return tpr_broadcast_in_dim(g, v, rank, dims, bd);
}

tpr_value_t tpr_reshape(tpr_graph_t* g, tpr_value_t v, int rank,
                        const int64_t* dims) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_reshape", 0);
  if (!check_shape(g, "tpr_reshape", rank, dims)) return TPR_VALUE_NONE;
  tpr_type_t r = tpr_type_make(t->dtype, rank, dims);
  char b[TB], c[TB];
  if (tpr_type_numel(&r) != tpr_type_numel(t))
    FAIL("tpr_reshape: %s to %s changes the element count", fmt(t, b),
         fmt(&r, c));
  if (tpr_type_equal(&r, t)) return v;
  return add1(g, TPR_OP_RESHAPE, 0, &v, 1, NULL, 0, r);
}

tpr_value_t tpr_transpose(tpr_graph_t* g, tpr_value_t v,
                          const int64_t* permutation) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_transpose", 0);
  if (!check_dim_set(g, "tpr_transpose", "permutation", permutation, t->rank,
                     t->rank))
    return TPR_VALUE_NONE;
  tpr_type_t r = *t;
  bool identity = true;
  for (int i = 0; i < t->rank; i++) {
    r.dims[i] = t->dims[permutation[i]];
    if (permutation[i] != i) identity = false;
  }
  if (identity) return v;
  return add1(g, TPR_OP_TRANSPOSE, 0, &v, 1, permutation, t->rank, r);
}

tpr_value_t tpr_slice(tpr_graph_t* g, tpr_value_t v, const int64_t* start,
                      const int64_t* limit, const int64_t* strides) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_slice", 0);
  char b[TB];
  int64_t ints[3 * TPR_MAX_RANK];
  tpr_type_t r = *t;
  bool identity = true;
  if (t->rank && (!start || !limit)) FAIL("tpr_slice: missing start/limit");
  for (int i = 0; i < t->rank; i++) {
    int64_t s = start[i], l = limit[i], st = strides ? strides[i] : 1;
    if (s < 0 || l < s || l > t->dims[i] || st < 1)
      FAIL("tpr_slice: dim %d [%lld:%lld:%lld] is out of bounds for %s", i,
           (long long)s, (long long)l, (long long)st, fmt(t, b));
    ints[i] = s;
    ints[t->rank + i] = l;
    ints[2 * t->rank + i] = st;
    r.dims[i] = (l - s + st - 1) / st;
    if (s != 0 || r.dims[i] != t->dims[i]) identity = false;
  }
  if (identity) return v;
  return add1(g, TPR_OP_SLICE, 0, &v, 1, ints, 3 * t->rank, r);
}

// Checks dynamic start operands: rank-0 integers of one dtype.
static bool check_starts(tpr_graph_t* g, const char* who,
                         const tpr_value_t* starts, int n, int first_operand) {
  tpr_dtype_t d = TPR_DTYPE_INVALID;
  char b[TB];
  if (n && !starts) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: missing start indices", who);
    return false;
  }
  for (int i = 0; i < n; i++) {
    const tpr_type_t* s = tpr_graph_operand(g, starts[i], who, first_operand + i);
    if (!s) return false;
    if (s->rank != 0 || !is_int(s->dtype) || (i && s->dtype != d)) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                     "%s: start index %d is %s; starts must be rank-0 "
                     "integers of one dtype",
                     who, i, fmt(s, b));
      return false;
    }
    d = s->dtype;
  }
  return true;
}

tpr_value_t tpr_dynamic_slice(tpr_graph_t* g, tpr_value_t v,
                              const tpr_value_t* starts, const int64_t* sizes) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_dynamic_slice", 0);
  char b[TB];
  if (!check_starts(g, "tpr_dynamic_slice", starts, t->rank, 1))
    return TPR_VALUE_NONE;
  if (t->rank && !sizes) FAIL("tpr_dynamic_slice: missing sizes");
  tpr_value_t ops[1 + TPR_MAX_RANK];
  ops[0] = v;
  tpr_type_t r = *t;
  for (int i = 0; i < t->rank; i++) {
    if (sizes[i] < 0 || sizes[i] > t->dims[i])
      FAIL("tpr_dynamic_slice: size %lld of dim %d exceeds %s",
           (long long)sizes[i], i, fmt(t, b));
    r.dims[i] = sizes[i];
    ops[1 + i] = starts[i];
  }
  return add1(g, TPR_OP_DYNAMIC_SLICE, 0, ops, 1 + t->rank, sizes, t->rank, r);
}

tpr_value_t tpr_dynamic_update_slice(tpr_graph_t* g, tpr_value_t v,
                                     tpr_value_t update,
                                     const tpr_value_t* starts) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_dynamic_update_slice", 0);
  OPERAND(u, update, "tpr_dynamic_update_slice", 1);
  char b[TB], c[TB];
  if (u->dtype != t->dtype || u->rank != t->rank)
    FAIL("tpr_dynamic_update_slice: update %s does not match operand %s",
         fmt(u, b), fmt(t, c));
  for (int i = 0; i < t->rank; i++)
    if (u->dims[i] > t->dims[i])
      FAIL("tpr_dynamic_update_slice: update %s larger than operand %s",
           fmt(u, b), fmt(t, c));
  if (!check_starts(g, "tpr_dynamic_update_slice", starts, t->rank, 2))
    return TPR_VALUE_NONE;
  tpr_value_t ops[2 + TPR_MAX_RANK];
  ops[0] = v;
  ops[1] = update;
  for (int i = 0; i < t->rank; i++) ops[2 + i] = starts[i];
  return add1(g, TPR_OP_DYNAMIC_UPDATE_SLICE, 0, ops, 2 + t->rank, NULL, 0, *t);
}

tpr_value_t tpr_concatenate(tpr_graph_t* g, const tpr_value_t* values,
                            int count, int64_t dimension) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  if (count < 1 || !values) FAIL("tpr_concatenate: needs at least one value");
  OPERAND(t0, values[0], "tpr_concatenate", 0);
  char b[TB], c[TB];
  if (dimension < 0 || dimension >= t0->rank)
    FAIL("tpr_concatenate: dimension %lld out of range for %s",
         (long long)dimension, fmt(t0, b));
  tpr_type_t r = *t0;
  for (int i = 1; i < count; i++) {
    OPERAND(t, values[i], "tpr_concatenate", i);
    bool ok = t->dtype == t0->dtype && t->rank == t0->rank;
    for (int d = 0; ok && d < t->rank; d++)
      if (d != dimension && t->dims[d] != t0->dims[d]) ok = false;
    if (!ok)
      FAIL("tpr_concatenate: operand %d %s does not match operand 0 %s along "
           "dimension %lld",
           i, fmt(t, b), fmt(t0, c), (long long)dimension);
    r.dims[dimension] += t->dims[dimension];
  }
  if (count == 1) return values[0];
  return add1(g, TPR_OP_CONCATENATE, (int32_t)dimension, values, count, NULL, 0,
              r);
}

tpr_value_t tpr_pad(tpr_graph_t* g, tpr_value_t v, tpr_value_t pad_value,
                    const int64_t* low, const int64_t* high,
                    const int64_t* interior) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_pad", 0);
  OPERAND(p, pad_value, "tpr_pad", 1);
  char b[TB], c[TB];
  if (p->rank != 0 || p->dtype != t->dtype)
    FAIL("tpr_pad: pad value %s must be a rank-0 %s", fmt(p, b),
         tpr_dtype_name(t->dtype));
  if (t->rank && (!low || !high)) FAIL("tpr_pad: missing low/high");
  int64_t ints[3 * TPR_MAX_RANK];
  tpr_type_t r = *t;
  bool identity = true;
  for (int i = 0; i < t->rank; i++) {
    int64_t in = interior ? interior[i] : 0, d = t->dims[i];
    int64_t n = low[i] + high[i] + d + (d > 0 ? (d - 1) * in : 0);
    if (in < 0 || n < 0)
      FAIL("tpr_pad: dim %d padding (%lld, %lld, %lld) invalid for %s", i,
           (long long)low[i], (long long)high[i], (long long)in, fmt(t, c));
    ints[i] = low[i];
    ints[t->rank + i] = high[i];
    ints[2 * t->rank + i] = in;
    r.dims[i] = n;
    if (low[i] || high[i] || (in && d > 1)) identity = false;
  }
  if (identity) return v;
  tpr_value_t ops[2] = {v, pad_value};
  return add1(g, TPR_OP_PAD, 0, ops, 2, ints, 3 * t->rank, r);
}

tpr_value_t tpr_reverse(tpr_graph_t* g, tpr_value_t v, const int64_t* dims,
                        int num_dims) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_reverse", 0);
  if (!check_dim_set(g, "tpr_reverse", "dims", dims, num_dims, t->rank))
    return TPR_VALUE_NONE;
  if (num_dims == 0) return v;
  return add1(g, TPR_OP_REVERSE, 0, &v, 1, dims, num_dims, *t);
}

//===--- elementwise -------------------------------------------------------===//

enum { K_F = 1, K_C = 2, K_I = 4, K_B = 8, K_NUM = K_F | K_C | K_I };

static unsigned kind_of(tpr_dtype_t d) {
  if (tpr_dtype_is_float(d)) return K_F;
  if (tpr_dtype_is_complex(d)) return K_C;
  if (is_int(d)) return K_I;
  if (d == TPR_DTYPE_BOOL) return K_B;
  return 0;
}

static const unsigned char kUnaryKinds[TPR_UNARY_COUNT_] = {
    [TPR_UNARY_NEG] = K_NUM, [TPR_UNARY_ABS] = K_NUM, [TPR_UNARY_SIGN] = K_NUM,
    [TPR_UNARY_NOT] = K_I | K_B, [TPR_UNARY_EXP] = K_F | K_C,
    [TPR_UNARY_EXPM1] = K_F | K_C, [TPR_UNARY_LOG] = K_F | K_C,
    [TPR_UNARY_LOG1P] = K_F | K_C, [TPR_UNARY_SQRT] = K_F | K_C,
    [TPR_UNARY_RSQRT] = K_F | K_C, [TPR_UNARY_CBRT] = K_F,
    [TPR_UNARY_TANH] = K_F | K_C, [TPR_UNARY_LOGISTIC] = K_F | K_C,
    [TPR_UNARY_SIN] = K_F | K_C, [TPR_UNARY_COS] = K_F | K_C,
    [TPR_UNARY_TAN] = K_F | K_C, [TPR_UNARY_FLOOR] = K_F,
    [TPR_UNARY_CEIL] = K_F, [TPR_UNARY_ROUND_NEAREST_EVEN] = K_F,
    [TPR_UNARY_ROUND_NEAREST_AFZ] = K_F, [TPR_UNARY_IS_FINITE] = K_F,
    [TPR_UNARY_POPCNT] = K_I, [TPR_UNARY_CLZ] = K_I,
    [TPR_UNARY_REAL] = K_F | K_C, [TPR_UNARY_IMAG] = K_F | K_C,
    [TPR_UNARY_ERF] = K_F, [TPR_UNARY_ERFC] = K_F, [TPR_UNARY_ERF_INV] = K_F,
    [TPR_UNARY_LGAMMA] = K_F, [TPR_UNARY_DIGAMMA] = K_F,
    [TPR_UNARY_ASIN] = K_F | K_C, [TPR_UNARY_ACOS] = K_F | K_C,
    [TPR_UNARY_ATAN] = K_F | K_C, [TPR_UNARY_SINH] = K_F | K_C,
    [TPR_UNARY_COSH] = K_F | K_C, [TPR_UNARY_ASINH] = K_F | K_C,
    [TPR_UNARY_ACOSH] = K_F | K_C, [TPR_UNARY_ATANH] = K_F | K_C,
    [TPR_UNARY_BESSEL_I1E] = K_F,
};

static const unsigned char kBinaryKinds[TPR_BINARY_COUNT_] = {
    [TPR_BINARY_ADD] = K_NUM | K_B, [TPR_BINARY_SUB] = K_NUM,
    [TPR_BINARY_MUL] = K_NUM | K_B, [TPR_BINARY_DIV] = K_NUM,
    [TPR_BINARY_REM] = K_F | K_I, [TPR_BINARY_POW] = K_NUM,
    [TPR_BINARY_MAX] = K_F | K_I | K_B, [TPR_BINARY_MIN] = K_F | K_I | K_B,
    [TPR_BINARY_ATAN2] = K_F | K_C, [TPR_BINARY_AND] = K_I | K_B,
    [TPR_BINARY_OR] = K_I | K_B, [TPR_BINARY_XOR] = K_I | K_B,
    [TPR_BINARY_SHIFT_LEFT] = K_I, [TPR_BINARY_SHIFT_RIGHT_ARITHMETIC] = K_I,
    [TPR_BINARY_SHIFT_RIGHT_LOGICAL] = K_I, [TPR_BINARY_NEXTAFTER] = K_F,
    [TPR_BINARY_POLYGAMMA] = K_F, [TPR_BINARY_ZETA] = K_F,
    [TPR_BINARY_COMPLEX] = K_F,
};

static bool is_f8(tpr_dtype_t d) {
  return d == TPR_DTYPE_F8E4M3FN || d == TPR_DTYPE_F8E5M2;
}

static tpr_dtype_t complex_part(tpr_dtype_t d) {
  return d == TPR_DTYPE_C64 ? TPR_DTYPE_F32
         : d == TPR_DTYPE_C128 ? TPR_DTYPE_F64
                               : d;
}

tpr_value_t tpr_unary(tpr_graph_t* g, tpr_unary_op_t op, tpr_value_t v) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_unary", 0);
  char b[TB];
  if ((unsigned)op >= TPR_UNARY_COUNT_)
    FAIL("tpr_unary: unknown op %d on %s", (int)op, fmt(t, b));
  if (!(kUnaryKinds[op] & kind_of(t->dtype)))
    FAIL("tpr_unary: op %d does not apply to %s", (int)op, fmt(t, b));
  if (is_f8(t->dtype) && op >= TPR_UNARY_ERF) {
    // XLA cannot legalize chlo ops on f8: compute in f32.
    tpr_dtype_t d = t->dtype;
    return tpr_convert(g, tpr_unary(g, op, tpr_convert(g, v, TPR_DTYPE_F32)), d);
  }
  if (tpr_dtype_is_unsigned_int(t->dtype)) {
    // StableHLO has no abs/sign of unsigned types: |u| = u, sign = u != 0.
    if (op == TPR_UNARY_ABS) return v;
    if (op == TPR_UNARY_SIGN) {
      tpr_value_t z = tpr_broadcast_in_dim(
          g, tpr_constant_i64(g, t->dtype, 0), t->rank, t->dims, NULL);
      return tpr_convert(g, tpr_compare(g, TPR_CMP_NE, v, z), t->dtype);
    }
  }
  if (op == TPR_UNARY_ATAN && tpr_dtype_is_float(t->dtype) &&
      tpr_plugin_workarounds()) {
    // atan(x) = atan2(2x, 2). lammps-jax-pjrt-cpu 0.11.2 (XLA:CPU, PJRT
    // 0.115) computes chlo.atan wrong once a f32 or bf16 tensor has about 63
    // elements or more (its vectorised kernel: atan(20) came out as -16.9),
    // and it rewrites atan2(x, 1) into that same atan; atan2 of other
    // operands is right on every size. Doubling is exact, and where 2x
    // overflows atan2(±inf, 2) = ±pi/2 is still atan(x) in every float type.
    tpr_value_t two = tpr_broadcast_in_dim(
        g, tpr_constant_f64(g, t->dtype, 2.0), t->rank, t->dims, NULL);
    return tpr_binary(g, TPR_BINARY_ATAN2, tpr_binary(g, TPR_BINARY_MUL, v, two),
                      two);
  }
  tpr_type_t r = *t;
  if (op == TPR_UNARY_IS_FINITE) r.dtype = TPR_DTYPE_BOOL;
  // stablehlo.abs of a complex is its (real) magnitude.
  if (op == TPR_UNARY_REAL || op == TPR_UNARY_IMAG || op == TPR_UNARY_ABS)
    r.dtype = complex_part(t->dtype);
  return add1(g, TPR_OP_UNARY, op, &v, 1, NULL, 0, r);
}

tpr_value_t tpr_binary(tpr_graph_t* g, tpr_binary_op_t op, tpr_value_t a,
                       tpr_value_t b_) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(ta, a, "tpr_binary", 0);
  OPERAND(tb, b_, "tpr_binary", 1);
  char b[TB], c[TB];
  if ((unsigned)op >= TPR_BINARY_COUNT_) FAIL("tpr_binary: unknown op %d", op);
  if (!tpr_type_equal(ta, tb))
    FAIL("tpr_binary: op %d operand types differ: %s vs %s", (int)op,
         fmt(ta, b), fmt(tb, c));
  if (!(kBinaryKinds[op] & kind_of(ta->dtype)))
    FAIL("tpr_binary: op %d does not apply to %s", (int)op, fmt(ta, b));
  if (is_f8(ta->dtype) && op == TPR_BINARY_NEXTAFTER) {
    // chlo.next_after has no f8 lowering; nextafter in f8 steps one f8 ulp,
    // which f32 cannot express: refuse rather than compute the wrong value.
    return tpr_graph_fail(g, TPR_UNIMPLEMENTED,
                          "tpr_binary: nextafter on %s is not supported",
                          fmt(ta, b));
  }
  if (is_f8(ta->dtype) && op >= TPR_BINARY_POLYGAMMA) {
    // Like the chlo unaries: no f8 lowering, compute in f32.
    tpr_dtype_t d = ta->dtype;
    tpr_value_t r = tpr_binary(g, op, tpr_convert(g, a, TPR_DTYPE_F32),
                               tpr_convert(g, b_, TPR_DTYPE_F32));
    return op == TPR_BINARY_COMPLEX ? r : tpr_convert(g, r, d);
  }
  tpr_value_t ops[2] = {a, b_};
  if (op == TPR_BINARY_COMPLEX) {
    // stablehlo.complex takes f32/f64 parts; narrower floats widen to f32.
    if (ta->dtype != TPR_DTYPE_F32 && ta->dtype != TPR_DTYPE_F64)
      return tpr_binary(g, op, tpr_convert(g, a, TPR_DTYPE_F32),
                        tpr_convert(g, b_, TPR_DTYPE_F32));
    tpr_type_t ct = *ta;
    ct.dtype = ta->dtype == TPR_DTYPE_F64 ? TPR_DTYPE_C128 : TPR_DTYPE_C64;
    return add1(g, TPR_OP_BINARY, op, ops, 2, NULL, 0, ct);
  }
  tpr_value_t r = add1(g, TPR_OP_BINARY, op, ops, 2, NULL, 0, *ta);
  if ((op == TPR_BINARY_MAX || op == TPR_BINARY_MIN) &&
      tpr_dtype_is_float(ta->dtype)) {
    // PyTorch propagates NaN through maximum/minimum; XLA:CPU's max/min
    // may return the other operand ("fast min/max"). Make it explicit.
    r = tpr_select(g, tpr_compare(g, TPR_CMP_NE, b_, b_), b_, r);
    r = tpr_select(g, tpr_compare(g, TPR_CMP_NE, a, a), a, r);
  }
  return r;
}

tpr_value_t tpr_compare(tpr_graph_t* g, tpr_compare_dir_t dir, tpr_value_t a,
                        tpr_value_t b_) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(ta, a, "tpr_compare", 0);
  OPERAND(tb, b_, "tpr_compare", 1);
  char b[TB], c[TB];
  if ((unsigned)dir > TPR_CMP_GE) FAIL("tpr_compare: unknown direction %d", dir);
  if (!tpr_type_equal(ta, tb))
    FAIL("tpr_compare: operand types differ: %s vs %s", fmt(ta, b), fmt(tb, c));
  if (tpr_dtype_is_complex(ta->dtype) && dir != TPR_CMP_EQ && dir != TPR_CMP_NE)
    FAIL("tpr_compare: complex %s only compares for (in)equality", fmt(ta, b));
  tpr_type_t r = *ta;
  r.dtype = TPR_DTYPE_BOOL;
  tpr_value_t ops[2] = {a, b_};
  return add1(g, TPR_OP_COMPARE, dir, ops, 2, NULL, 0, r);
}

tpr_value_t tpr_select(tpr_graph_t* g, tpr_value_t pred, tpr_value_t on_true,
                       tpr_value_t on_false) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(tp, pred, "tpr_select", 0);
  OPERAND(tt, on_true, "tpr_select", 1);
  OPERAND(tf, on_false, "tpr_select", 2);
  char b[TB], c[TB], d[TB];
  if (!tpr_type_equal(tt, tf) || tp->dtype != TPR_DTYPE_BOOL ||
      (tp->rank != 0 && (tp->rank != tt->rank ||
                         memcmp(tp->dims, tt->dims,
                                (size_t)tt->rank * sizeof(int64_t)))))
    FAIL("tpr_select: bad operands %s ? %s : %s", fmt(tp, b), fmt(tt, c),
         fmt(tf, d));
  tpr_value_t ops[3] = {pred, on_true, on_false};
  return add1(g, TPR_OP_SELECT, 0, ops, 3, NULL, 0, *tt);
}

tpr_value_t tpr_clamp(tpr_graph_t* g, tpr_value_t lo, tpr_value_t v,
                      tpr_value_t hi) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(tl, lo, "tpr_clamp", 0);
  OPERAND(tv, v, "tpr_clamp", 1);
  OPERAND(th, hi, "tpr_clamp", 2);
  char b[TB], c[TB], d[TB];
  bool ok = !tpr_dtype_is_complex(tv->dtype);
  const tpr_type_t* bounds[2] = {tl, th};
  for (int i = 0; i < 2 && ok; i++)
    ok = bounds[i]->dtype == tv->dtype &&
         (bounds[i]->rank == 0 || tpr_type_equal(bounds[i], tv));
  if (!ok)
    FAIL("tpr_clamp: bad operands clamp(%s, %s, %s)", fmt(tl, b), fmt(tv, c),
         fmt(th, d));
  tpr_value_t ops[3] = {lo, v, hi};
  return add1(g, TPR_OP_CLAMP, 0, ops, 3, NULL, 0, *tv);
}

//===--- reductions, contractions ------------------------------------------===//

static atomic_bool row_sums_as_dots;

void tpr_graph_set_row_sums_as_dots(bool on) {
  atomic_store(&row_sums_as_dots, on);
}

// The sum of |v| over its trailing |num_dims| dims as a product with a ones
// vector (see tpr_graph_set_row_sums_as_dots); TPR_VALUE_NONE when it does
// not apply or would not pay.
static tpr_value_t row_sum_as_dot(tpr_graph_t* g, tpr_value_t v,
                                  const tpr_type_t* t, const int64_t* dims,
                                  int num_dims) {
  if (t->dtype != TPR_DTYPE_F32 || num_dims == 0) return TPR_VALUE_NONE;
  int lead = t->rank - num_dims;
  for (int j = 0; j < num_dims; j++)
    if (dims[j] < lead) return TPR_VALUE_NONE;  // a set, so all trailing
  int64_t rows = 1, row = 1;
  for (int i = 0; i < lead; i++) rows *= t->dims[i];
  for (int i = lead; i < t->rank; i++) row *= t->dims[i];
  // Measured on xla-cpu-pjrt: below 16K elements both forms take the same
  // ~20 us, or the reduction runs inline and the dot does not; a dot of one
  // row (a sum to a scalar) loses, up to 6x at 2^20 elements. Rows of up to
  // 4K elements (a 16 KB ones vector) become a loop fused with the producer
  // of x, 1.2-4x faster than the reduction and as accurate (float32
  // relative error 2e-7 at 4K); longer rows go to a library kernel, still
  // faster where there are many of them but up to 10x less accurate (1e-6
  // at 64K).
  enum { kMinElements = 16384, kMaxRow = 4096 };
  if (rows < 2 || row > kMaxRow || rows * row < kMinElements)
    return TPR_VALUE_NONE;
  tpr_value_t x = v;
  if (num_dims > 1) {
    int64_t shape[TPR_MAX_RANK];
    memcpy(shape, t->dims, (size_t)lead * sizeof(int64_t));
    shape[lead] = row;
    x = tpr_reshape(g, v, lead + 1, shape);
  }
  tpr_value_t ones = tpr_broadcast_in_dim(
      g, tpr_constant_f64(g, t->dtype, 1.0), 1, &row, NULL);
  static const int64_t kZero = 0;
  int64_t minor = lead;
  return tpr_dot_general(g, x, ones, 0, NULL, NULL, 1, &minor, &kZero,
                         t->dtype);
}

static tpr_value_t reduce(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op,
                          const int64_t* dims, int num_dims, bool nan_guard) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_reduce", 0);
  char b[TB];
  static const unsigned char kinds[] = {
      [TPR_REDUCE_SUM] = K_NUM | K_B, [TPR_REDUCE_PROD] = K_NUM | K_B,
      [TPR_REDUCE_MAX] = K_F | K_I | K_B, [TPR_REDUCE_MIN] = K_F | K_I | K_B,
      [TPR_REDUCE_AND] = K_I | K_B, [TPR_REDUCE_OR] = K_I | K_B};
  if ((unsigned)op > TPR_REDUCE_OR || !(kinds[op] & kind_of(t->dtype)))
    FAIL("tpr_reduce: op %d does not apply to %s", (int)op, fmt(t, b));
  if (!check_dim_set(g, "tpr_reduce", "dims", dims, num_dims, t->rank))
    return TPR_VALUE_NONE;
  tpr_type_t r = tpr_type_scalar(t->dtype);
  for (int i = 0; i < t->rank; i++) {
    bool reduced = false;
    for (int j = 0; j < num_dims; j++) reduced |= dims[j] == i;
    if (!reduced) r.dims[r.rank++] = t->dims[i];
  }
  if (op == TPR_REDUCE_SUM &&
      atomic_load_explicit(&row_sums_as_dots, memory_order_relaxed)) {
    tpr_value_t dot = row_sum_as_dot(g, v, t, dims, num_dims);
    if (dot != TPR_VALUE_NONE || !tpr_graph_ok(g)) return dot;
  }
  tpr_value_t out = add1(g, TPR_OP_REDUCE, op, &v, 1, dims, num_dims, r);
  if (nan_guard && (op == TPR_REDUCE_MAX || op == TPR_REDUCE_MIN) &&
      tpr_dtype_is_float(t->dtype)) {
    // NaN wins, as in PyTorch (see tpr_binary).
    tpr_value_t has_nan = add1(g, TPR_OP_REDUCE, TPR_REDUCE_OR,
                               (tpr_value_t[]){tpr_compare(g, TPR_CMP_NE, v, v)},
                               1, dims, num_dims,
                               tpr_type_make(TPR_DTYPE_BOOL, r.rank, r.dims));
    tpr_value_t nan = tpr_broadcast_in_dim(
        g, tpr_constant_f64(g, t->dtype, (double)NAN), r.rank, r.dims, NULL);
    out = tpr_select(g, has_nan, nan, out);
  }
  return out;
}

tpr_value_t tpr_reduce(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op,
                       const int64_t* dims, int num_dims) {
  return reduce(g, v, op, dims, num_dims, true);
}

tpr_value_t tpr_reduce_max_unguarded(tpr_graph_t* g, tpr_value_t v,
                                     const int64_t* dims, int num_dims) {
  return reduce(g, v, TPR_REDUCE_MAX, dims, num_dims, false);
}

void tpr_argreduce(tpr_graph_t* g, tpr_value_t v, int64_t dim, bool is_max,
                   tpr_value_t* out_values, tpr_value_t* out_indices) {
  *out_values = *out_indices = TPR_VALUE_NONE;
  if (!tpr_graph_ok(g)) return;
  const tpr_type_t* t = tpr_graph_operand(g, v, "tpr_argreduce", 0);
  if (!t) return;
  char b[TB];
  if (dim < 0 || dim >= t->rank || !(kind_of(t->dtype) & (K_F | K_I | K_B))) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "tpr_argreduce: dim %lld / dtype invalid for %s",
                   (long long)dim, fmt(t, b));
    return;
  }
  tpr_type_t r[2];
  r[0] = tpr_type_scalar(t->dtype);
  for (int i = 0; i < t->rank; i++)
    if (i != dim) r[0].dims[r[0].rank++] = t->dims[i];
  r[1] = r[0];
  r[1].dtype = TPR_DTYPE_S64;
  int64_t flag = is_max;
  tpr_value_t first = tpr_graph_add_node(g, TPR_OP_ARGREDUCE, (int32_t)dim, &v,
                                         1, &flag, 1, NULL, 0, r, 2);
  if (first == TPR_VALUE_NONE) return;
  *out_values = first;
  *out_indices = first + 1;
}

static atomic_bool swap_transposed_dots;

void tpr_graph_set_swap_transposed_dots(bool on) {
  atomic_store(&swap_transposed_dots, on);
}

tpr_value_t tpr_optimization_barrier(tpr_graph_t* g, tpr_value_t v) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_optimization_barrier", 0);
  tpr_type_t r = *t;
  return add1(g, TPR_OP_OPTIMIZATION_BARRIER, 0, &v, 1, NULL, 0, r);
}

// [M,K] x transpose(W [N,K]) with M < N, as transpose(W x^T) (see
// tpr_graph_set_swap_transposed_dots); TPR_VALUE_NONE when it does not apply.
static tpr_value_t swapped_dot(tpr_graph_t* g, tpr_value_t lhs,
                               tpr_value_t rhs, tpr_dtype_t result_dtype) {
  // The stored operand: an odd number of 2-D transposes from rhs (an even
  // number leaves it in the layout a dot reads well).
  tpr_value_t w = rhs;
  int flips = 0;
  for (const tpr_node_t* n = tpr_graph_node_of(g, w); n->op == TPR_OP_TRANSPOSE;
       n = tpr_graph_node_of(g, w)) {
    w = g->operands[n->operands];
    flips++;
  }
  if (flips % 2 == 0) return TPR_VALUE_NONE;
  const tpr_type_t* tl = &tpr_graph_value(g, lhs)->type;
  const tpr_type_t* tw = &tpr_graph_value(g, w)->type;
  if (tw->rank != 2 || tl->dims[0] >= tw->dims[0]) return TPR_VALUE_NONE;
  static const int64_t kOne = 1, kSwap[2] = {1, 0};
  tpr_value_t p = tpr_dot_general(g, w, lhs, 0, NULL, NULL, 1, &kOne, &kOne,
                                  result_dtype);
  return tpr_transpose(g, tpr_optimization_barrier(g, p), kSwap);
}

tpr_value_t tpr_dot_general(tpr_graph_t* g, tpr_value_t lhs, tpr_value_t rhs,
                            int num_batch, const int64_t* lhs_batch,
                            const int64_t* rhs_batch, int num_contract,
                            const int64_t* lhs_contract,
                            const int64_t* rhs_contract,
                            tpr_dtype_t result_dtype) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(tl, lhs, "tpr_dot_general", 0);
  OPERAND(tr, rhs, "tpr_dot_general", 1);
  char b[TB], c[TB];
  const char* who = "tpr_dot_general";
  if (tl->dtype != tr->dtype || !tpr_dtype_is_valid(result_dtype) ||
      tl->dtype == TPR_DTYPE_BOOL)
    FAIL("%s: operand dtypes %s x %s -> %s unsupported", who, fmt(tl, b),
         fmt(tr, c), tpr_dtype_name(result_dtype));
  if (num_batch < 0 || num_contract < 0 ||
      (int64_t)num_batch + num_contract > tl->rank ||
      (int64_t)num_batch + num_contract > tr->rank ||
      (num_batch && (!lhs_batch || !rhs_batch)) ||
      (num_contract && (!lhs_contract || !rhs_contract)))
    FAIL("%s: %d batch + %d contracting dims do not fit %s x %s", who,
         num_batch, num_contract, fmt(tl, b), fmt(tr, c));
  int64_t lset[TPR_MAX_RANK], rset[TPR_MAX_RANK];
  for (int i = 0; i < num_batch; i++) lset[i] = lhs_batch[i], rset[i] = rhs_batch[i];
  for (int i = 0; i < num_contract; i++)
    lset[num_batch + i] = lhs_contract[i], rset[num_batch + i] = rhs_contract[i];
  if (!check_dim_set(g, who, "lhs dims", lset, num_batch + num_contract,
                     tl->rank) ||
      !check_dim_set(g, who, "rhs dims", rset, num_batch + num_contract,
                     tr->rank))
    return TPR_VALUE_NONE;
  for (int i = 0; i < num_batch + num_contract; i++)
    if (tl->dims[lset[i]] != tr->dims[rset[i]])
      FAIL("%s: lhs dim %lld and rhs dim %lld differ in %s x %s", who,
           (long long)lset[i], (long long)rset[i], fmt(tl, b), fmt(tr, c));
  tpr_type_t r = tpr_type_scalar(result_dtype);
  for (int i = 0; i < num_batch; i++) r.dims[r.rank++] = tl->dims[lhs_batch[i]];
  const tpr_type_t* sides[2] = {tl, tr};
  const int64_t* sets[2] = {lset, rset};
  for (int s = 0; s < 2; s++)
    for (int d = 0; d < sides[s]->rank; d++) {
      bool used = false;
      for (int j = 0; j < num_batch + num_contract; j++) used |= sets[s][j] == d;
      if (!used) {
        if (r.rank >= TPR_MAX_RANK)
          FAIL("%s: result of %s x %s exceeds rank %d", who, fmt(tl, b),
               fmt(tr, c), TPR_MAX_RANK);
        r.dims[r.rank++] = sides[s]->dims[d];
      }
    }
  int64_t ints[2 + 4 * TPR_MAX_RANK];
  int n = 0;
  ints[n++] = num_batch;
  ints[n++] = num_contract;
  for (int i = 0; i < num_batch; i++) ints[n++] = lhs_batch[i];
  for (int i = 0; i < num_batch; i++) ints[n++] = rhs_batch[i];
  for (int i = 0; i < num_contract; i++) ints[n++] = lhs_contract[i];
  for (int i = 0; i < num_contract; i++) ints[n++] = rhs_contract[i];
  if (num_batch == 0 && num_contract == 1 && tl->rank == 2 && tr->rank == 2 &&
      lhs_contract[0] == 1 && rhs_contract[0] == 0 &&
      atomic_load_explicit(&swap_transposed_dots, memory_order_relaxed)) {
    tpr_value_t swapped = swapped_dot(g, lhs, rhs, result_dtype);
    if (swapped != TPR_VALUE_NONE || !tpr_graph_ok(g)) return swapped;
  }
  tpr_value_t ops[2] = {lhs, rhs};
  return add1(g, TPR_OP_DOT_GENERAL, 0, ops, 2, ints, n, r);
}

//===--- indexing ----------------------------------------------------------===//

// Packs dimension numbers as described in graph_internal.h.
static int pack_dimnums(int64_t* out, const int64_t* a, int na,
                        const int64_t* b, int nb, const int64_t* c, int nc,
                        int64_t index_vector_dim, const int64_t* d, int nd) {
  int n = 0;
  out[n++] = na;
  out[n++] = nb;
  out[n++] = nc;
  out[n++] = index_vector_dim;
  out[n++] = nd;
  for (int i = 0; i < na; i++) out[n++] = a[i];
  for (int i = 0; i < nb; i++) out[n++] = b[i];
  for (int i = 0; i < nc; i++) out[n++] = c[i];
  for (int i = 0; i < nd; i++) out[n++] = d[i];
  return n;
}

static const int64_t kIota[TPR_MAX_RANK] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

tpr_value_t tpr_take_1d(tpr_graph_t* g, tpr_value_t v, tpr_value_t indices) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_take_1d", 0);
  OPERAND(ti, indices, "tpr_take_1d", 1);
  char b[TB], c[TB];
  if (t->rank != 1 || !is_int(ti->dtype))
    FAIL("tpr_take_1d: needs a rank-1 operand and integer indices, got %s, %s",
         fmt(t, b), fmt(ti, c));
  tpr_type_t r = *ti;
  r.dtype = t->dtype;
  if (t->dims[0] == 0) {
    if (tpr_type_numel(ti) != 0)
      FAIL("tpr_take_1d: indexing the empty %s with %s", fmt(t, b), fmt(ti, c));
    return tpr_constant_dense(g, r, NULL);
  }
  int64_t ints[16];
  int64_t one = 1;
  int n = pack_dimnums(ints, NULL, 0, kIota, 1, kIota, 1, ti->rank, &one, 1);
  tpr_value_t ops[2] = {v, indices};
  return add1(g, TPR_OP_GATHER, 0, ops, 2, ints, n, r);
}

tpr_value_t tpr_put_1d(tpr_graph_t* g, tpr_value_t v, tpr_value_t indices,
                       tpr_value_t updates, bool accumulate) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_put_1d", 0);
  OPERAND(ti, indices, "tpr_put_1d", 1);
  OPERAND(tu, updates, "tpr_put_1d", 2);
  char b[TB], c[TB], d[TB];
  tpr_type_t want = *ti;
  want.dtype = t->dtype;
  if (t->rank != 1 || !is_int(ti->dtype) || !tpr_type_equal(tu, &want))
    FAIL("tpr_put_1d: bad operands %s, indices %s, updates %s", fmt(t, b),
         fmt(ti, c), fmt(tu, d));
  if (tpr_type_numel(ti) == 0) return v;
  int64_t ints[16];
  int n = pack_dimnums(ints, NULL, 0, kIota, 1, kIota, 1, ti->rank, NULL, 0);
  tpr_value_t ops[3] = {v, indices, updates};
  return add1(g, TPR_OP_SCATTER, accumulate, ops, 3, ints, n, *t);
}

// Full coordinates for torch.gather/scatter: s64[I..., n] where the |dim|
// column is |index| and the others are iotas.
static tpr_value_t along_coords(tpr_graph_t* g, const tpr_type_t* ti,
                                int64_t dim, tpr_value_t index) {
  int n = ti->rank;
  int64_t dims[TPR_MAX_RANK + 1];
  memcpy(dims, ti->dims, (size_t)n * sizeof(int64_t));
  dims[n] = 1;
  tpr_type_t ct = tpr_type_make(TPR_DTYPE_S64, n + 1, dims);
  tpr_value_t cols[TPR_MAX_RANK];
  for (int d = 0; d < n; d++)
    cols[d] = d == dim ? tpr_reshape(g, tpr_convert(g, index, TPR_DTYPE_S64),
                                     n + 1, dims)
                       : tpr_iota(g, ct, d);
  return tpr_concatenate(g, cols, n, n);
}

tpr_value_t tpr_gather_along(tpr_graph_t* g, tpr_value_t v, int64_t dim,
                             tpr_value_t index) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_gather_along", 0);
  OPERAND(ti, index, "tpr_gather_along", 1);
  char b[TB], c[TB];
  bool ok = is_int(ti->dtype) && ti->rank == t->rank &&
            ((t->rank == 0 && (dim == 0 || dim == -1)) ||
             (dim >= 0 && dim < t->rank));
  for (int d = 0; ok && d < t->rank; d++)
    if (d != dim && ti->dims[d] > t->dims[d]) ok = false;
  if (!ok || (t->rank >= TPR_MAX_RANK))
    FAIL("tpr_gather_along: dim %lld, index %s do not fit %s", (long long)dim,
         fmt(ti, c), fmt(t, b));
  if (t->rank <= 1) {
    int64_t one = 1;
    return tpr_take_1d(g, tpr_reshape(g, v, 1, t->rank ? t->dims : &one), index);
  }
  tpr_type_t r = *ti;
  r.dtype = t->dtype;
  if (tpr_type_numel(ti) == 0) return tpr_constant_dense(g, r, NULL);
  if (tpr_type_numel(t) == 0)
    FAIL("tpr_gather_along: gathering from the empty %s", fmt(t, b));
  tpr_value_t coords = along_coords(g, ti, dim, index);
  int64_t ones[TPR_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
  int64_t ints[5 + 3 * TPR_MAX_RANK];
  int n = pack_dimnums(ints, NULL, 0, kIota, t->rank, kIota, t->rank, t->rank,
                       ones, t->rank);
  tpr_value_t ops[2] = {v, coords};
  if (coords == TPR_VALUE_NONE) return TPR_VALUE_NONE;
  return add1(g, TPR_OP_GATHER, 0, ops, 2, ints, n, r);
}

tpr_value_t tpr_scatter_along(tpr_graph_t* g, tpr_value_t v, int64_t dim,
                              tpr_value_t index, tpr_value_t src,
                              bool accumulate) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_scatter_along", 0);
  OPERAND(ti, index, "tpr_scatter_along", 1);
  OPERAND(ts, src, "tpr_scatter_along", 2);
  char b[TB], c[TB], d[TB];
  bool ok = is_int(ti->dtype) && ti->rank == t->rank && ts->rank == t->rank &&
            ts->dtype == t->dtype &&
            ((t->rank == 0 && (dim == 0 || dim == -1)) ||
             (dim >= 0 && dim < t->rank));
  for (int k = 0; ok && k < t->rank; k++)
    if ((k != dim && ti->dims[k] > t->dims[k]) || ti->dims[k] > ts->dims[k])
      ok = false;
  if (!ok || t->rank >= TPR_MAX_RANK)
    FAIL("tpr_scatter_along: dim %lld, index %s, src %s do not fit %s",
         (long long)dim, fmt(ti, c), fmt(ts, d), fmt(t, b));
  if (tpr_type_numel(ti) == 0) return v;
  // Only the leading index-shaped block of src takes part.
  int64_t zeros[TPR_MAX_RANK] = {0};
  src = tpr_slice(g, src, zeros, ti->dims, NULL);
  if (t->rank == 0) {
    int64_t one = 1;
    tpr_value_t flat = tpr_reshape(g, v, 1, &one);
    flat = tpr_put_1d(g, flat, index, src, accumulate);
    return tpr_reshape(g, flat, 0, NULL);
  }
  tpr_value_t coords = along_coords(g, ti, dim, index);
  if (coords == TPR_VALUE_NONE || src == TPR_VALUE_NONE) return TPR_VALUE_NONE;
  int64_t ints[5 + 3 * TPR_MAX_RANK];
  int n = pack_dimnums(ints, NULL, 0, kIota, t->rank, kIota, t->rank, t->rank,
                       NULL, 0);
  tpr_value_t ops[3] = {v, coords, src};
  return add1(g, TPR_OP_SCATTER, accumulate, ops, 3, ints, n, *t);
}

tpr_value_t tpr_index_select(tpr_graph_t* g, tpr_value_t v, int64_t dim,
                             tpr_value_t indices) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_index_select", 0);
  OPERAND(ti, indices, "tpr_index_select", 1);
  char b[TB], c[TB];
  int k = ti->rank;
  if (dim < 0 || dim >= t->rank || !is_int(ti->dtype) ||
      t->rank - 1 + k > TPR_MAX_RANK)
    FAIL("tpr_index_select: dim %lld, indices %s do not fit %s",
         (long long)dim, fmt(ti, c), fmt(t, b));
  tpr_type_t r = tpr_type_scalar(t->dtype);
  int64_t offset_dims[TPR_MAX_RANK], slice_sizes[TPR_MAX_RANK];
  int no = 0;
  for (int d = 0; d < t->rank; d++) {
    slice_sizes[d] = d == dim ? 1 : t->dims[d];
    if (d == dim) {
      for (int j = 0; j < k; j++) r.dims[r.rank++] = ti->dims[j];
    } else {
      offset_dims[no++] = r.rank;
      r.dims[r.rank++] = t->dims[d];
    }
  }
  if (tpr_type_numel(&r) == 0) return tpr_constant_dense(g, r, NULL);
  if (t->dims[dim] == 0)
    FAIL("tpr_index_select: selecting from the empty dim %lld of %s",
         (long long)dim, fmt(t, b));
  int64_t ints[5 + 4 * TPR_MAX_RANK];
  int n = pack_dimnums(ints, offset_dims, no, &dim, 1, &dim, 1, k, slice_sizes,
                       t->rank);
  tpr_value_t ops[2] = {v, indices};
  return add1(g, TPR_OP_GATHER, 0, ops, 2, ints, n, r);
}

// Validates |index_dims| (m distinct dims of |t|) and |coords| s64[B..., m];
// fills the indexed dims in ascending order, the positions of the window
// (not indexed) dims in [B..., window...], and that type, |windows|, in
// t's dtype. False on bad input (the graph failed).
static bool window_dims(tpr_graph_t* g, const char* who, const tpr_type_t* t,
                        const int64_t* index_dims, int m,
                        const tpr_type_t* tc, int64_t* sorted, int64_t* window,
                        int* num_window, tpr_type_t* windows) {
  char b[TB], c[TB];
  bool ok = m >= 1 && m <= t->rank && is_int(tc->dtype) && tc->rank >= 1 &&
            tc->dims[tc->rank - 1] == m &&
            tc->rank - 1 + t->rank - m <= TPR_MAX_RANK;
  bool used[TPR_MAX_RANK] = {false};
  for (int i = 0; ok && i < m; i++) {
    int64_t d = index_dims[i];
    ok = d >= 0 && d < t->rank && !used[d];
    if (ok) used[d] = true;
  }
  if (!ok) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: %d index dims with coords %s do not fit %s",
                   who, m, fmt(tc, c), fmt(t, b));
    return false;
  }
  int ns = 0, nb = tc->rank - 1;
  *num_window = 0;
  *windows = tpr_type_make(t->dtype, nb, tc->dims);
  for (int d = 0; d < t->rank; d++) {
    if (used[d]) {
      sorted[ns++] = d;
    } else {
      window[(*num_window)++] = windows->rank;
      windows->dims[windows->rank++] = t->dims[d];
    }
  }
  return true;
}

tpr_value_t tpr_gather_windows(tpr_graph_t* g, tpr_value_t v,
                               const int64_t* index_dims, int m,
                               tpr_value_t coords) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_gather_windows", 0);
  OPERAND(tc, coords, "tpr_gather_windows", 1);
  int64_t sorted[TPR_MAX_RANK], offset_dims[TPR_MAX_RANK], slice_sizes[TPR_MAX_RANK];
  int nr;
  tpr_type_t r;
  if (!window_dims(g, "tpr_gather_windows", t, index_dims, m, tc, sorted, offset_dims,
                   &nr, &r))
    return TPR_VALUE_NONE;
  for (int d = 0; d < t->rank; d++) slice_sizes[d] = t->dims[d];
  for (int i = 0; i < m; i++) slice_sizes[index_dims[i]] = 1;
  if (tpr_type_numel(&r) == 0) return tpr_constant_dense(g, r, NULL);
  for (int i = 0; i < m; i++)
    if (t->dims[index_dims[i]] == 0) {
      char b[TB];
      FAIL("tpr_gather_windows: indexing the empty dim %lld of %s",
           (long long)index_dims[i], fmt(t, b));
    }
  int64_t ints[5 + 4 * TPR_MAX_RANK];
  int n = pack_dimnums(ints, offset_dims, nr, sorted, m, index_dims, m, tc->rank - 1,
                       slice_sizes, t->rank);
  tpr_value_t ops[2] = {v, coords};
  return add1(g, TPR_OP_GATHER, 0, ops, 2, ints, n, r);
}

tpr_value_t tpr_scatter_windows(tpr_graph_t* g, tpr_value_t v,
                                const int64_t* index_dims, int m,
                                tpr_value_t coords, tpr_value_t updates,
                                bool accumulate) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_scatter_windows", 0);
  OPERAND(tc, coords, "tpr_scatter_windows", 1);
  OPERAND(tu, updates, "tpr_scatter_windows", 2);
  int64_t sorted[TPR_MAX_RANK], window[TPR_MAX_RANK];
  int nr;
  tpr_type_t want;
  if (!window_dims(g, "tpr_scatter_windows", t, index_dims, m, tc, sorted, window, &nr,
                   &want))
    return TPR_VALUE_NONE;
  if (!tpr_type_equal(tu, &want)) {
    char b[TB], c[TB];
    FAIL("tpr_scatter_windows: updates %s, expected %s", fmt(tu, b), fmt(&want, c));
  }
  if (tpr_type_numel(tu) == 0) return v;
  int64_t ints[5 + 4 * TPR_MAX_RANK];
  int n = pack_dimnums(ints, window, nr, sorted, m, index_dims, m, tc->rank - 1, NULL, 0);
  tpr_value_t ops[3] = {v, coords, updates};
  return add1(g, TPR_OP_SCATTER, accumulate, ops, 3, ints, n, *t);
}

//===--- random ------------------------------------------------------------===//

void tpr_rng_bits(tpr_graph_t* g, tpr_value_t state, tpr_type_t type,
                  tpr_value_t* out_bits, tpr_value_t* out_new_state) {
  *out_bits = *out_new_state = TPR_VALUE_NONE;
  if (!tpr_graph_ok(g)) return;
  const tpr_type_t* ts = tpr_graph_operand(g, state, "tpr_rng_bits", 0);
  if (!ts) return;
  char b[TB], c[TB];
  if (ts->dtype != TPR_DTYPE_U64 || ts->rank != 1 || ts->dims[0] != 2 ||
      !tpr_dtype_is_unsigned_int(type.dtype)) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "tpr_rng_bits: needs a u64[2] state and an unsigned result "
                   "type, got %s, %s",
                   fmt(ts, b), fmt(&type, c));
    return;
  }
  if (!check_shape(g, "tpr_rng_bits", type.rank, type.dims)) return;
  // Narrower bits are 64-bit words bitcast apart: XLA expands a 64-bit
  // rng_bit_generator into a program that compiles about 3x faster than
  // the 32-bit one (60 against 175 ms on XLA:CPU, most of a random op's
  // first call) and, split by a bitcast, also runs faster (45 against 63 ms
  // for 16M u32 on two cores).
  // Where the minor dim holds whole words, each word's elements stay
  // neighbours in it, so the split is elementwise and fuses with its users;
  // otherwise the flattened words are cut to size.
  int64_t n = tpr_type_numel(&type);
  int per_word = (int)(8 / tpr_dtype_size(type.dtype));
  tpr_type_t r[2] = {*ts, type};
  r[1].dtype = TPR_DTYPE_U64;
  bool minor = type.rank > 0 && type.dims[type.rank - 1] % per_word == 0;
  if (per_word > 1 && n > 0 && minor) {
    r[1].dims[type.rank - 1] /= per_word;
  } else if (per_word > 1 && n > 0) {
    int64_t words = (n + per_word - 1) / per_word;
    r[1] = tpr_type_make(TPR_DTYPE_U64, 1, &words);
  } else {
    r[1] = type;
  }
  tpr_value_t first = tpr_graph_add_node(g, TPR_OP_RNG_BIT_GENERATOR, 0, &state,
                                         1, NULL, 0, NULL, 0, r, 2);
  if (first == TPR_VALUE_NONE) return;
  *out_new_state = first;
  *out_bits = first + 1;
  if (r[1].dtype == type.dtype) return;
  tpr_value_t v = tpr_bitcast_convert(g, first + 1, type.dtype);  // [..., k]
  if (!minor) {
    int64_t all = tpr_type_numel(&r[1]) * per_word, start = 0;
    v = tpr_slice(g, tpr_reshape(g, v, 1, &all), &start, &n, NULL);
  }
  *out_bits = tpr_reshape(g, v, type.rank, type.dims);
  if (!tpr_graph_ok(g)) *out_bits = *out_new_state = TPR_VALUE_NONE;
}

//===--- bounded dynamism -------------------------------------------------===//

tpr_value_t tpr_set_dimension_size(tpr_graph_t* g, tpr_value_t v,
                                   tpr_value_t size, int64_t dimension) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_set_dimension_size", 0);
  OPERAND(st, size, "tpr_set_dimension_size", 1);
  char b[TB];
  if (dimension < 0 || dimension >= t->rank)
    FAIL("tpr_set_dimension_size: dimension %lld of %s", (long long)dimension,
         fmt(t, b));
  if (st->rank != 0 || st->dtype != TPR_DTYPE_S32)
    FAIL("tpr_set_dimension_size: the size must be a rank-0 s32, got %s",
         fmt(st, b));
  tpr_value_t ops[2] = {v, size};
  int64_t restore = 0;
  return add1(g, TPR_OP_SET_DIMENSION_SIZE, (int32_t)dimension, ops, 2,
              &restore, 1, *t);
}

tpr_value_t tpr_set_dimension_static(tpr_graph_t* g, tpr_value_t v,
                                     int64_t dimension) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  OPERAND(t, v, "tpr_set_dimension_static", 0);
  char b[TB];
  if (dimension < 0 || dimension >= t->rank)
    FAIL("tpr_set_dimension_static: dimension %lld of %s",
         (long long)dimension, fmt(t, b));
  int64_t restore = 1;
  return add1(g, TPR_OP_SET_DIMENSION_SIZE, (int32_t)dimension, &v, 1,
              &restore, 1, *t);
}
