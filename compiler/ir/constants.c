// Constant builders and exact host encodings of element values.
#include <math.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"

// Rounds |x| to an IEEE-like binary format with |ebits| exponent and
// |mbits| mantissa bits, to nearest even. |fn| selects the "finite, NaN
// only at all-ones" layout of f8E4M3FN (no infinities; overflow is NaN).
static uint32_t encode_small_float(double x, int ebits, int mbits, bool fn) {
  uint32_t sign = signbit(x) ? 1u << (ebits + mbits) : 0;
  uint32_t exp_ones = (1u << ebits) - 1;
  uint32_t nan = fn ? (exp_ones << mbits) | ((1u << mbits) - 1)
                    : (exp_ones << mbits) | (1u << (mbits - 1));
  if (isnan(x)) return sign | nan;
  double a = fabs(x);
  int bias = (1 << (ebits - 1)) - 1;
  uint32_t inf = exp_ones << mbits;
  if (isinf(a)) return sign | (fn ? nan : inf);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int E = e - 1;
  int emin = 1 - bias;
  if (E < emin) E = emin;  // subnormal: fixed quantum
  double q = nearbyint(ldexp(a, mbits - E));  // exact scaling, RNE
  // q in [0, 2^(mbits+1)]; biased encoding = (E + bias - 1) * 2^mbits + q
  // for normals, q for subnormals (E == emin, q < 2^mbits).
  uint64_t bits;
  if (E == emin && q < (double)(1u << mbits))
    bits = (uint64_t)q;
  else
    bits = ((uint64_t)(E + bias - 1) << mbits) + (uint64_t)q;
  uint64_t max_finite = fn ? ((uint64_t)exp_ones << mbits) | ((1u << mbits) - 2)
                           : ((uint64_t)(exp_ones - 1) << mbits) |
                                 ((1u << mbits) - 1);
  if (bits > max_finite) return sign | (fn ? nan : inf);
  return sign | (uint32_t)bits;
}

void tpr_encode_f64(tpr_dtype_t dtype, double x, void* out) {
  switch (dtype) {
    case TPR_DTYPE_F32: {
      float f = (float)x;
      memcpy(out, &f, 4);
      return;
    }
    case TPR_DTYPE_F64:
      memcpy(out, &x, 8);
      return;
    case TPR_DTYPE_F16: {
      uint16_t h = (uint16_t)encode_small_float(x, 5, 10, false);
      memcpy(out, &h, 2);
      return;
    }
    case TPR_DTYPE_BF16: {
      uint16_t h = (uint16_t)encode_small_float(x, 8, 7, false);
      memcpy(out, &h, 2);
      return;
    }
    case TPR_DTYPE_F8E5M2:
      *(uint8_t*)out = (uint8_t)encode_small_float(x, 5, 2, false);
      return;
    case TPR_DTYPE_F8E4M3FN:
      *(uint8_t*)out = (uint8_t)encode_small_float(x, 4, 3, true);
      return;
    case TPR_DTYPE_C64: {
      float f[2] = {(float)x, 0.0f};
      memcpy(out, f, 8);
      return;
    }
    case TPR_DTYPE_C128: {
      double d[2] = {x, 0.0};
      memcpy(out, d, 16);
      return;
    }
    case TPR_DTYPE_BOOL:
      *(uint8_t*)out = x != 0;  // NaN is nonzero: true
      return;
    default:
      break;
  }
  // Integers: truncate toward zero, saturate, NaN -> 0.
  int64_t i;
  if (isnan(x)) {
    i = 0;
  } else if (tpr_dtype_is_unsigned_int(dtype)) {
    uint64_t u = x <= 0 ? 0 : x >= 18446744073709551615.0 ? UINT64_MAX
                                                            : (uint64_t)x;
    memcpy(&i, &u, 8);
  } else {
    i = x <= -9223372036854775808.0 ? INT64_MIN
        : x >= 9223372036854775807.0 ? INT64_MAX
                                     : (int64_t)x;
  }
  tpr_encode_i64(dtype, i, out);
}

void tpr_encode_i64(tpr_dtype_t dtype, int64_t x, void* out) {
  switch (dtype) {
    case TPR_DTYPE_BOOL: *(uint8_t*)out = x != 0; return;
    case TPR_DTYPE_S8:
    case TPR_DTYPE_U8: *(uint8_t*)out = (uint8_t)x; return;
    case TPR_DTYPE_S16:
    case TPR_DTYPE_U16: { uint16_t v = (uint16_t)x; memcpy(out, &v, 2); return; }
    case TPR_DTYPE_S32:
    case TPR_DTYPE_U32: { uint32_t v = (uint32_t)x; memcpy(out, &v, 4); return; }
    case TPR_DTYPE_S64:
    case TPR_DTYPE_U64: memcpy(out, &x, 8); return;
    default:
      // Floats: exact where representable, else rounded once by the cast.
      tpr_encode_f64(dtype, (double)x, out);
      return;
  }
}

static tpr_value_t scalar_constant(tpr_graph_t* g, tpr_dtype_t dtype,
                                   const void* bytes, const char* who) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  if (!tpr_dtype_is_valid(dtype))
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: invalid dtype %d", who,
                          (int)dtype);
  tpr_type_t t = tpr_type_scalar(dtype);
  return tpr_graph_add_node(g, TPR_OP_CONSTANT, 0, NULL, 0, NULL, 0, bytes,
                            tpr_dtype_size(dtype), &t, 1);
}

tpr_value_t tpr_constant_f64(tpr_graph_t* g, tpr_dtype_t dtype, double v) {
  uint8_t b[16] = {0};
  if (tpr_dtype_is_valid(dtype)) tpr_encode_f64(dtype, v, b);
  return scalar_constant(g, dtype, b, "tpr_constant_f64");
}

tpr_value_t tpr_constant_i64(tpr_graph_t* g, tpr_dtype_t dtype, int64_t v) {
  uint8_t b[16] = {0};
  if (tpr_dtype_is_valid(dtype)) tpr_encode_i64(dtype, v, b);
  return scalar_constant(g, dtype, b, "tpr_constant_i64");
}

tpr_value_t tpr_constant_dense(tpr_graph_t* g, tpr_type_t type,
                               const void* data) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  char buf[128];
  bool bad = !tpr_dtype_is_valid(type.dtype) || type.rank < 0 ||
             type.rank > TPR_MAX_RANK;
  size_t bytes = tpr_dtype_size(type.dtype);
  for (int i = 0; !bad && i < type.rank; i++) {
    if (type.dims[i] < 0 || !tpr_mul_size(bytes, (size_t)type.dims[i], &bytes))
      bad = true;
  }
  if (bad || bytes > (size_t)1 << 40)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_constant_dense: invalid type %s (rank %d)",
                          tpr_type_format(&type, buf, sizeof buf), type.rank);
  if (bytes && !data)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_constant_dense: no data for %s",
                          tpr_type_format(&type, buf, sizeof buf));
  tpr_value_t v = tpr_graph_add_node(g, TPR_OP_CONSTANT, 0, NULL, 0, NULL, 0,
                                     data, bytes, &type, 1);
  if (v != TPR_VALUE_NONE && type.dtype == TPR_DTYPE_BOOL) {
    uint8_t* p = g->data + tpr_graph_node_of(g, v)->data;
    for (size_t i = 0; i < bytes; i++) p[i] = p[i] != 0;
  }
  return v;
}

static tpr_value_t extreme(tpr_graph_t* g, tpr_dtype_t dtype, bool high,
                           const char* who) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  uint8_t b[16] = {0};
  switch (dtype) {
    case TPR_DTYPE_BOOL: b[0] = high; break;
    case TPR_DTYPE_S8: tpr_encode_i64(dtype, high ? INT8_MAX : INT8_MIN, b); break;
    case TPR_DTYPE_S16: tpr_encode_i64(dtype, high ? INT16_MAX : INT16_MIN, b); break;
    case TPR_DTYPE_S32: tpr_encode_i64(dtype, high ? INT32_MAX : INT32_MIN, b); break;
    case TPR_DTYPE_S64: tpr_encode_i64(dtype, high ? INT64_MAX : INT64_MIN, b); break;
    case TPR_DTYPE_U8:
    case TPR_DTYPE_U16:
    case TPR_DTYPE_U32:
    case TPR_DTYPE_U64:
      if (high) memset(b, 0xFF, tpr_dtype_size(dtype));
      break;
    case TPR_DTYPE_F8E4M3FN:  // no infinities: the largest finite, 448
      tpr_encode_f64(dtype, high ? 448.0 : -448.0, b);
      break;
    case TPR_DTYPE_F16: case TPR_DTYPE_F32: case TPR_DTYPE_F64:
    case TPR_DTYPE_BF16: case TPR_DTYPE_F8E5M2:
      tpr_encode_f64(dtype, high ? INFINITY : -INFINITY, b);
      break;
    default:
      return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                            "%s: dtype %s has no order", who,
                            tpr_dtype_name(dtype));
  }
  return scalar_constant(g, dtype, b, who);
}

tpr_value_t tpr_constant_lowest(tpr_graph_t* g, tpr_dtype_t dtype) {
  return extreme(g, dtype, false, "tpr_constant_lowest");
}

tpr_value_t tpr_constant_highest(tpr_graph_t* g, tpr_dtype_t dtype) {
  return extreme(g, dtype, true, "tpr_constant_highest");
}
