// Sample graphs covering every builder and the view paths, shared by
// test_emit_samples.c (dumps them for tools/check_stablehlo.py, which runs
// them with JAX's XLA and compares with NumPy) and test_emit_plugin.c
// (compiles them with the real PJRT plugin, the oldest parser we target).
//
// Each sample builds a graph and carries the sidecar JSON that
// check_stablehlo.py reads: per-argument input specs and one NumPy
// expression per result over a0, a1, ...
#ifndef TPR_TESTS_C_TEST_EMIT_SAMPLES_H_
#define TPR_TESTS_C_TEST_EMIT_SAMPLES_H_

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tpr/graph.h"

typedef struct tpr_sample {
  const char* name;
  void (*build)(tpr_graph_t* g, const void* arg);
  const void* arg;
  const char* json;  // NULL: use |arg| (views) to generate it
} tpr_sample_t;

#define T(dt, ...) \
  tpr_type_make(TPR_DTYPE_##dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__})
#define S(dt) tpr_type_scalar(TPR_DTYPE_##dt)
#define P(t) tpr_parameter(g, (t))
#define R(v) tpr_graph_add_result(g, (v))
#define L(...) (int64_t[]){__VA_ARGS__}

static void s_unary_float(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 2, 3));
  R(tpr_unary(g, TPR_UNARY_EXP, x));
  R(tpr_unary(g, TPR_UNARY_NEG, x));
  R(tpr_unary(g, TPR_UNARY_ABS, x));
  R(tpr_unary(g, TPR_UNARY_TANH, x));
  R(tpr_unary(g, TPR_UNARY_LOGISTIC, x));
  R(tpr_unary(g, TPR_UNARY_FLOOR, x));
  R(tpr_unary(g, TPR_UNARY_ROUND_NEAREST_EVEN, x));
  R(tpr_unary(g, TPR_UNARY_SIN, x));
  R(tpr_unary(g, TPR_UNARY_TAN, x));
  R(tpr_unary(g, TPR_UNARY_IS_FINITE, x));
  R(tpr_unary(g, TPR_UNARY_SIGN, x));
  R(tpr_unary(g, TPR_UNARY_CBRT, x));
  R(tpr_unary(g, TPR_UNARY_EXPM1, x));
}

static void s_unary_positive(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F64, 5));
  R(tpr_unary(g, TPR_UNARY_LOG, x));
  R(tpr_unary(g, TPR_UNARY_LOG1P, x));
  R(tpr_unary(g, TPR_UNARY_SQRT, x));
  R(tpr_unary(g, TPR_UNARY_RSQRT, x));
}

static void s_chlo(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 6));  // in (-1, 1)
  tpr_value_t y = P(T(F32, 6));  // in (1, 5)
  R(tpr_unary(g, TPR_UNARY_ERF, x));
  R(tpr_unary(g, TPR_UNARY_ERFC, x));
  R(tpr_unary(g, TPR_UNARY_ERF_INV, x));
  R(tpr_unary(g, TPR_UNARY_LGAMMA, y));
  R(tpr_unary(g, TPR_UNARY_DIGAMMA, y));
  R(tpr_unary(g, TPR_UNARY_ASIN, x));
  R(tpr_unary(g, TPR_UNARY_ACOS, x));
  R(tpr_unary(g, TPR_UNARY_ATAN, x));
  R(tpr_unary(g, TPR_UNARY_SINH, x));
  R(tpr_unary(g, TPR_UNARY_COSH, x));
  R(tpr_unary(g, TPR_UNARY_ASINH, x));
  R(tpr_unary(g, TPR_UNARY_ACOSH, y));
  R(tpr_unary(g, TPR_UNARY_ATANH, x));
  R(tpr_binary(g, TPR_BINARY_NEXTAFTER, x, y));
}

static void s_binary_float(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 3, 2)), y = P(T(F32, 3, 2));
  for (int op = TPR_BINARY_ADD; op <= TPR_BINARY_ATAN2; op++)
    if (op != TPR_BINARY_POW) R(tpr_binary(g, (tpr_binary_op_t)op, x, y));
  R(tpr_binary(g, TPR_BINARY_POW, tpr_unary(g, TPR_UNARY_ABS, x), y));
}

static void s_binary_int(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(S32, 4)), y = P(T(S32, 4)), sh = P(T(S32, 4));
  tpr_value_t u = P(T(U8, 4)), v = P(T(U8, 4));
  R(tpr_binary(g, TPR_BINARY_ADD, x, y));
  R(tpr_binary(g, TPR_BINARY_DIV, x, y));
  R(tpr_binary(g, TPR_BINARY_REM, x, y));
  R(tpr_binary(g, TPR_BINARY_AND, x, y));
  R(tpr_binary(g, TPR_BINARY_OR, x, y));
  R(tpr_binary(g, TPR_BINARY_XOR, x, y));
  R(tpr_binary(g, TPR_BINARY_SHIFT_LEFT, x, sh));
  R(tpr_binary(g, TPR_BINARY_SHIFT_RIGHT_ARITHMETIC, x, sh));
  R(tpr_binary(g, TPR_BINARY_MAX, u, v));
  R(tpr_binary(g, TPR_BINARY_SUB, u, v));
  R(tpr_unary(g, TPR_UNARY_NOT, x));
  R(tpr_unary(g, TPR_UNARY_POPCNT, u));
  R(tpr_unary(g, TPR_UNARY_CLZ, u));
}

static void s_compare_select(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 5)), y = P(T(F32, 5));
  tpr_value_t u = P(T(U8, 5)), v = P(T(U8, 5));
  tpr_value_t s = P(T(S64, 5)), t = P(T(S64, 5));
  tpr_value_t p = tpr_compare(g, TPR_CMP_LT, x, y);
  R(p);
  R(tpr_compare(g, TPR_CMP_GE, u, v));
  R(tpr_compare(g, TPR_CMP_GT, s, t));
  R(tpr_compare(g, TPR_CMP_NE, p, tpr_compare(g, TPR_CMP_LE, x, y)));
  R(tpr_select(g, p, x, y));
  R(tpr_select(g, tpr_constant_i64(g, TPR_DTYPE_BOOL, 1), s, t));
  R(tpr_clamp(g, tpr_constant_f64(g, TPR_DTYPE_F32, -0.5), x,
              tpr_constant_f64(g, TPR_DTYPE_F32, 0.5)));
}

static void s_constants(tpr_graph_t* g, const void* a) {
  float f[6] = {1.5f, -0.0f, NAN, INFINITY, -INFINITY, 1e-45f};
  R(tpr_constant_dense(g, T(F32, 2, 3), f));
  double d[3] = {0.1, -1e300, 4.9e-324};
  R(tpr_constant_dense(g, T(F64, 3), d));
  R(tpr_constant_f64(g, TPR_DTYPE_BF16, 3.140625));
  R(tpr_constant_f64(g, TPR_DTYPE_F16, 65504.0));
  R(tpr_constant_f64(g, TPR_DTYPE_F16, 1e-7));  // subnormal
  R(tpr_constant_i64(g, TPR_DTYPE_S64, INT64_MIN));
  R(tpr_constant_i64(g, TPR_DTYPE_U64, -1));  // 2^64 - 1
  R(tpr_constant_i64(g, TPR_DTYPE_U8, 255));
  R(tpr_constant_i64(g, TPR_DTYPE_S8, -128));
  uint8_t b[6] = {1, 0, 0, 1, 1, 0};
  R(tpr_constant_dense(g, T(BOOL, 3, 2), b));
  float c[4] = {1, 2, -3, NAN};
  R(tpr_constant_dense(g, T(C64, 2), c));
  int16_t i16[4] = {-1, 2, 300, -32768};
  R(tpr_constant_dense(g, T(S16, 2, 2), i16));
  float splat[4] = {2.5f, 2.5f, 2.5f, 2.5f};
  R(tpr_constant_dense(g, T(F32, 4), splat));
  R(tpr_constant_dense(g, T(F32, 0, 3), NULL));
  R(tpr_constant_f64(g, TPR_DTYPE_BOOL, 0.0));
}

static void s_extremes(tpr_graph_t* g, const void* a) {
  const tpr_dtype_t ds[] = {TPR_DTYPE_F32, TPR_DTYPE_BF16, TPR_DTYPE_S32,
                            TPR_DTYPE_U16, TPR_DTYPE_BOOL, TPR_DTYPE_S64};
  for (int i = 0; i < 6; i++) {
    R(tpr_constant_lowest(g, ds[i]));
    R(tpr_constant_highest(g, ds[i]));
  }
}

static void s_iota_convert(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 2, 3));
  tpr_value_t b = P(T(BOOL, 3));
  tpr_value_t u = P(T(U8, 3));
  tpr_value_t c = P(T(C64, 2));
  R(tpr_iota(g, T(S64, 2, 3), 1));
  R(tpr_iota(g, T(F32, 4), 0));
  R(tpr_convert(g, x, TPR_DTYPE_S32));
  R(tpr_convert(g, x, TPR_DTYPE_BOOL));
  R(tpr_convert(g, x, TPR_DTYPE_BF16));
  R(tpr_bitcast_convert(g, x, TPR_DTYPE_S32));
  R(tpr_bitcast_convert(g, b, TPR_DTYPE_U8));
  R(tpr_bitcast_convert(g, u, TPR_DTYPE_BOOL));
  R(tpr_convert(g, c, TPR_DTYPE_F32));
  R(tpr_unary(g, TPR_UNARY_IMAG, c));
  R(tpr_unary(g, TPR_UNARY_ABS, c));
}

static void s_shapes(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 2, 3)), y = P(T(F32, 3));
  R(tpr_broadcast_in_dim(g, y, 3, L(4, 2, 3), L(2)));
  R(tpr_broadcast_to(g, y, 2, L(2, 3)));
  R(tpr_reshape(g, x, 3, L(3, 1, 2)));
  R(tpr_transpose(g, x, L(1, 0)));
  R(tpr_slice(g, x, L(0, 1), L(2, 3), L(1, 2)));
  tpr_value_t parts[3] = {x, x, tpr_broadcast_to(g, y, 2, L(1, 3))};
  R(tpr_concatenate(g, parts, 3, 0));
  R(tpr_pad(g, x, tpr_constant_f64(g, TPR_DTYPE_F32, 9), L(1, -1), L(0, 2),
            L(1, 0)));
  R(tpr_reverse(g, x, L(1), 1));
  R(tpr_broadcast_in_dim(g, x, 3, L(3, 2, 4), L(1, 0)));  // unsorted dims
}

static void s_dynamic(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 4, 5)), i = P(S(S32)), j = P(S(S32));
  tpr_value_t u = P(T(F32, 2, 2));
  tpr_value_t st[2] = {i, j};
  R(tpr_dynamic_slice(g, x, st, L(2, 3)));
  R(tpr_dynamic_update_slice(g, x, u, st));
}

static void s_reduce(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 3, 4)), b = P(T(BOOL, 3, 4)), s = P(T(S32, 3, 4));
  R(tpr_reduce(g, x, TPR_REDUCE_SUM, L(1), 1));
  R(tpr_reduce(g, x, TPR_REDUCE_MAX, L(0), 1));
  R(tpr_reduce(g, x, TPR_REDUCE_MIN, L(0, 1), 2));
  R(tpr_reduce(g, x, TPR_REDUCE_PROD, L(1), 1));
  R(tpr_reduce(g, b, TPR_REDUCE_AND, L(1), 1));
  R(tpr_reduce(g, b, TPR_REDUCE_OR, L(1), 1));
  R(tpr_reduce(g, b, TPR_REDUCE_SUM, L(0), 1));
  R(tpr_reduce(g, s, TPR_REDUCE_MAX, L(1), 1));
  R(tpr_reduce(g, s, TPR_REDUCE_MIN, L(1), 1));
  R(tpr_reduce(g, s, TPR_REDUCE_AND, L(1), 1));
  R(tpr_reduce(g, x, TPR_REDUCE_SUM, NULL, 0));
}

static void s_argreduce(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 4, 4)), s = P(T(S32, 2, 5));
  tpr_value_t v, i;
  tpr_argreduce(g, x, 1, true, &v, &i);
  R(v); R(i);
  tpr_argreduce(g, x, 1, false, &v, &i);
  R(v); R(i);
  tpr_argreduce(g, s, 1, true, &v, &i);
  R(v); R(i);
  tpr_argreduce(g, s, 0, false, &v, &i);
  R(v); R(i);
}

static void s_dot(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 3, 4)), y = P(T(F32, 4, 5));
  tpr_value_t bx = P(T(F32, 2, 3, 4)), by = P(T(F32, 2, 4, 5));
  tpr_value_t hx = P(T(BF16, 3, 4)), hy = P(T(BF16, 4, 5));
  R(tpr_dot_general(g, x, y, 0, NULL, NULL, 1, L(1), L(0), TPR_DTYPE_F32));
  R(tpr_dot_general(g, bx, by, 1, L(0), L(0), 1, L(2), L(1), TPR_DTYPE_F32));
  R(tpr_dot_general(g, hx, hy, 0, NULL, NULL, 1, L(1), L(0), TPR_DTYPE_F32));
  R(tpr_dot_general(g, x, x, 0, NULL, NULL, 0, NULL, NULL, TPR_DTYPE_F32));
}

static void s_indexing(tpr_graph_t* g, const void* a) {
  tpr_value_t v = P(T(F32, 10));
  tpr_value_t idx = P(T(S64, 2, 3));   // [0, 10)
  tpr_value_t upd = P(T(F32, 2, 3));
  tpr_value_t m = P(T(F32, 3, 4));
  tpr_value_t gi = P(T(S32, 3, 2));    // [0, 4)
  tpr_value_t si = P(T(S64, 2));       // [0, 3)
  tpr_value_t src = P(T(F32, 4, 4));
  R(tpr_take_1d(g, v, idx));
  R(tpr_put_1d(g, v, idx, upd, true));
  R(tpr_gather_along(g, m, 1, gi));
  R(tpr_scatter_along(g, m, 1, gi, src, true));
  R(tpr_index_select(g, m, 0, si));
  R(tpr_index_select(g, m, 1, si));
  tpr_value_t perm = tpr_constant_dense(g, T(S32, 3), (int32_t[]){2, 0, 1});
  tpr_value_t row = tpr_reshape(g, tpr_slice(g, upd, L(0, 0), L(1, 3), NULL),
                                1, L(3));
  R(tpr_put_1d(g, v, perm, row, false));
}

static void s_rng(tpr_graph_t* g, const void* a) {
  tpr_value_t st = P(T(U64, 2));
  tpr_value_t bits, ns;
  tpr_rng_bits(g, st, T(U32, 4, 4), &bits, &ns);
  R(bits);
  R(ns);
}

static void s_alias(tpr_graph_t* g, const void* a) {
  tpr_value_t x = P(T(F32, 8)), y = P(T(F32, 8));
  R(tpr_binary(g, TPR_BINARY_ADD, x, y));
  tpr_graph_alias(g, 0, 0);
}

// A view read or write over a flat f32[n] base.
typedef struct view_case {
  int64_t n;
  int rank;
  int64_t sizes[4], strides[4], offset;
  bool write;
} view_case_t;

static void s_view(tpr_graph_t* g, const void* arg) {
  const view_case_t* c = (const view_case_t*)arg;
  tpr_value_t base = P(T(F32, c->n));
  if (c->write) {
    tpr_value_t v = P(tpr_type_make(TPR_DTYPE_F32, c->rank, c->sizes));
    R(tpr_view_write(g, base, c->rank, c->sizes, c->strides, c->offset, v));
  } else {
    R(tpr_view_read(g, base, TPR_DTYPE_F32, c->rank, c->sizes, c->strides,
                    c->offset));
  }
}

static void s_view_bitcast(tpr_graph_t* g, const void* arg) {
  tpr_value_t base = P(T(F32, 12));
  R(tpr_view_read(g, base, TPR_DTYPE_S32, 2, L(2, 3), L(1, 4), 2));
  tpr_value_t bb = P(T(U8, 6));
  R(tpr_view_read(g, bb, TPR_DTYPE_BOOL, 1, L(3), L(2), 1));
}

static const view_case_t kViews[] = {
    {12, 2, {3, 4}, {4, 1}, 0, false},          // whole buffer
    {20, 2, {3, 4}, {4, 1}, 5, false},          // contiguous, offset
    {12, 2, {4, 3}, {1, 4}, 0, false},          // transpose
    {24, 3, {2, 3, 4}, {1, 8, 2}, 0, false},     // permuted
    {20, 2, {3, 2}, {5, 1}, 1, false},          // column slice (box)
    {30, 2, {3, 3}, {10, 3}, 2, false},         // stepped box, padded
    {40, 3, {2, 3, 2}, {12, 4, 3}, 1, false},    // 3-D stepped box
    {24, 2, {3, 3}, {6, 4}, 0, false},          // interleaved: gather
    {10, 1, {4}, {2}, 1, false},                // 1-D step
    {10, 0, {0}, {0}, 7, false},                // rank 0
    {10, 3, {3, 1, 4}, {0, 9, 1}, 2, false},     // broadcast + size-1
    {10, 2, {3, 4}, {1, 1}, 0, false},          // overlapping (unfold): gather
    {16, 2, {3, 3}, {3, 2}, 1, false},          // odd strides: gather
    {10, 2, {0, 3}, {3, 1}, 0, false},          // empty
    {12, 2, {3, 4}, {4, 1}, 0, true},           // whole write
    {20, 2, {3, 4}, {4, 1}, 5, true},           // contiguous write
    {12, 2, {4, 3}, {1, 4}, 0, true},           // transposed write
    {20, 2, {3, 2}, {5, 1}, 1, true},           // box write
    {30, 2, {3, 3}, {10, 3}, 2, true},          // stepped box, padded
    {40, 3, {2, 3, 2}, {12, 4, 3}, 1, true},     // 3-D stepped box
    {10, 1, {4}, {2}, 1, true},                 // 1-D stepped write
    {10, 0, {0}, {0}, 7, true},                 // scalar write
    {20, 2, {3, 3}, {3, 5}, 0, true},           // interleaved: scatter
};

#undef T
#undef S
#undef P
#undef R
#undef L

// One random graph: three random parameters, then 1-4 random builder calls
// with random, often invalid, operands and attributes; the last value is the
// result when the graph stays valid. |state| is an xorshift state.
static inline int64_t tpr_fuzz_rand(uint64_t* st, int64_t lo, int64_t hi) {
  *st ^= *st << 13;
  *st ^= *st >> 7;
  *st ^= *st << 17;
  return lo + (int64_t)(*st % (uint64_t)(hi - lo + 1));
}

static inline void tpr_fuzz_graph(tpr_graph_t* g, uint64_t* st) {
#define fr(lo, hi) tpr_fuzz_rand(st, (lo), (hi))
  int nv = 0;
  tpr_value_t vals[16];
  for (int p = 0; p < 3; p++) {
    int64_t d[3] = {fr(0, 3), fr(1, 3), fr(1, 3)};
    tpr_dtype_t dt = (tpr_dtype_t)fr(1, 15);
    vals[nv++] = tpr_parameter(g, tpr_type_make(dt, (int)fr(0, 3), d));
  }
  int steps = (int)fr(1, 4);
  for (int step = 0; step < steps; step++) {
    tpr_value_t a = vals[fr(0, nv - 1)], b = vals[fr(0, nv - 1)];
    if (fr(0, 20) == 0) a = (tpr_value_t)fr(-3, 100);
    int64_t x[4] = {fr(-1, 3), fr(-1, 3), fr(-1, 3), fr(-1, 3)};
    int64_t y[4] = {fr(-1, 4), fr(-1, 4), fr(-1, 4), fr(-1, 4)};
    int r = (int)fr(-1, 4);
    tpr_value_t out = TPR_VALUE_NONE, o2;
    tpr_value_t starts[4];
    for (int k = 0; k < 4; k++)
      starts[k] = fr(0, 3) ? tpr_constant_i64(g, TPR_DTYPE_S32, fr(-1, 2)) : b;
    uint8_t bytes[256];  // up to 4x4 elements of 16 bytes
    for (int k = 0; k < 256; k++) bytes[k] = (uint8_t)fr(0, 255);
    switch (fr(0, 30)) {
      case 0: out = tpr_unary(g, (tpr_unary_op_t)fr(0, 40), a); break;
      case 1: out = tpr_binary(g, (tpr_binary_op_t)fr(0, 17), a, b); break;
      case 2: out = tpr_compare(g, (tpr_compare_dir_t)fr(0, 6), a, b); break;
      case 3: out = tpr_reshape(g, a, r, y); break;
      case 4: out = tpr_transpose(g, a, x); break;
      case 5: out = tpr_slice(g, a, x, y, NULL); break;
      case 6: out = tpr_broadcast_in_dim(g, a, r, y, x); break;
      case 7: out = tpr_broadcast_to(g, a, r, y); break;
      case 8:
        out = tpr_reduce(g, a, (tpr_reduce_op_t)fr(0, 6), x, (int)fr(0, 2));
        break;
      case 9: tpr_argreduce(g, a, x[0], fr(0, 1), &out, &o2); break;
      case 10:
        out = tpr_dot_general(g, a, b, (int)fr(0, 1), x, x + 1, (int)fr(0, 1),
                              y, y + 1, (tpr_dtype_t)fr(0, 15));
        break;
      case 11: out = tpr_convert(g, a, (tpr_dtype_t)fr(0, 18)); break;
      case 12: out = tpr_bitcast_convert(g, a, (tpr_dtype_t)fr(0, 18)); break;
      case 13: out = tpr_take_1d(g, a, b); break;
      case 14: out = tpr_index_select(g, a, x[0], b); break;
      case 15: out = tpr_gather_along(g, a, x[0], b); break;
      case 16: out = tpr_pad(g, a, b, x, y, NULL); break;
      case 17: out = tpr_concatenate(g, (tpr_value_t[]){a, b}, 2, x[0]); break;
      case 18:
        out = tpr_view_read(g, a, (tpr_dtype_t)fr(1, 15), r, y, x, fr(-1, 3));
        break;
      case 19: out = tpr_view_write(g, a, r, y, x, fr(-1, 3), b); break;
      case 20: out = tpr_select(g, a, b, b); break;
      case 21: out = tpr_scatter_along(g, a, x[0], b, b, fr(0, 1)); break;
      case 22: out = tpr_clamp(g, b, a, b); break;
      case 23: out = tpr_reverse(g, a, x, (int)fr(0, 2)); break;
      case 24: out = tpr_dynamic_slice(g, a, starts, y); break;
      case 25: out = tpr_dynamic_update_slice(g, a, b, starts); break;
      case 26: tpr_rng_bits(g, a, tpr_type_make((tpr_dtype_t)fr(6, 9), r, y), &out, &o2); break;
      case 27: out = tpr_put_1d(g, a, b, a, fr(0, 1)); break;
      case 28:
        out = tpr_constant_dense(g, tpr_type_make((tpr_dtype_t)fr(1, 17), r > 2 ? 2 : r, y),
                                 bytes);
        break;
      case 29:
        out = fr(0, 1) ? tpr_constant_lowest(g, (tpr_dtype_t)fr(0, 18))
                       : tpr_constant_highest(g, (tpr_dtype_t)fr(0, 18));
        break;
      default:
        out = tpr_iota(g, tpr_type_make((tpr_dtype_t)fr(1, 15), r, y), x[0]);
        break;
    }
    if (out != TPR_VALUE_NONE && nv < 16) vals[nv++] = out;
  }
  if (tpr_graph_ok(g)) tpr_graph_add_result(g, vals[nv - 1]);
#undef fr
}

// Fills |out| with sample |i| (views last); false past the end.
static inline bool tpr_sample_get(int i, tpr_sample_t* out, char* json, size_t cap) {
  static const tpr_sample_t fixed[] = {
      {"unary_float", s_unary_float, NULL,
       "{\"rtol\": 2e-6, \"atol\": 1e-6, \"expect\": [\"np.exp(a0)\", \"-a0\", "
       "\"np.abs(a0)\", \"np.tanh(a0)\", \"1/(1+np.exp(-a0))\", "
       "\"np.floor(a0)\", \"np.round(a0)\", \"np.sin(a0)\", \"np.tan(a0)\", "
       "\"np.isfinite(a0)\", \"np.sign(a0)\", \"np.cbrt(a0)\", "
       "\"np.expm1(a0)\"]}"},
      {"unary_positive", s_unary_positive, NULL,
       "{\"inputs\": [{\"values\": [0.5, 1, 2, 3, 100]}], \"expect\": "
       "[\"np.log(a0)\", \"np.log1p(a0)\", \"np.sqrt(a0)\", "
       "\"1/np.sqrt(a0)\"]}"},
      {"chlo", s_chlo, NULL,
       "{\"rtol\": 1e-5, \"atol\": 1e-6, \"inputs\": [{\"values\": [-0.9, "
       "-0.5, 0, 0.1, 0.5, 0.99]}, {\"values\": [1.5, 2, 2.5, 3, 4, 4.5]}], "
       "\"expect\": [\"__import__('scipy.special').special.erf(a0)\", "
       "\"__import__('scipy.special').special.erfc(a0)\", "
       "\"__import__('scipy.special').special.erfinv(a0)\", "
       "\"__import__('scipy.special').special.gammaln(a1)\", "
       "\"__import__('scipy.special').special.digamma(a1)\", "
       "\"np.arcsin(a0)\", \"np.arccos(a0)\", \"np.arctan(a0)\", "
       "\"np.sinh(a0)\", \"np.cosh(a0)\", \"np.arcsinh(a0)\", "
       "\"np.arccosh(a1)\", \"np.arctanh(a0)\", \"np.nextafter(a0, a1)\"]}"},
      {"binary_float", s_binary_float, NULL,
       "{\"rtol\": 1e-6, \"expect\": [\"a0+a1\", \"a0-a1\", \"a0*a1\", "
       "\"a0/a1\", \"np.fmod(a0,a1)\", \"np.maximum(a0,a1)\", "
       "\"np.minimum(a0,a1)\", \"np.arctan2(a0,a1)\", "
       "\"np.abs(a0)**a1\"]}"},
      {"binary_int", s_binary_int, NULL,
       "{\"inputs\": [{\"range\": [-50, 50]}, {\"range\": [1, 9]}, "
       "{\"range\": [0, 5]}, {}, {}], \"expect\": [\"a0+a1\", "
       "\"np.trunc(a0/a1)\", \"np.fmod(a0,a1)\", \"a0&a1\", \"a0|a1\", "
       "\"a0^a1\", \"a0<<a2\", \"a0>>a2\", \"np.maximum(a3,a4)\", "
       "\"(a3-a4).astype(np.uint8)\", \"~a0\", "
       "\"np.bitwise_count(a3)\", "
       "\"np.array([8-int(v).bit_length() for v in a3], np.uint8)\"]}"},
      {"compare_select", s_compare_select, NULL,
       "{\"expect\": [\"a0<a1\", \"a2>=a3\", \"a4>a5\", \"(a0<a1)!=(a0<=a1)\", "
       "\"np.where(a0<a1,a0,a1)\", \"a4\", \"np.clip(a0,-0.5,0.5)\"]}"},
      {"constants", s_constants, NULL,
       "{\"expect\": [\"np.array([[1.5,-0.0,np.nan],[np.inf,-np.inf,1e-45]],"
       "np.float32)\", \"np.array([0.1,-1e300,4.9e-324])\", "
       "\"np.array(3.140625)\", \"np.array(65504.0)\", "
       "\"np.array(1e-7, np.float16)\", "
       "\"np.array(-2**63, np.int64)\", \"np.array(2**64-1, np.uint64)\", "
       "\"np.array(255)\", \"np.array(-128)\", "
       "\"np.array([[1,0],[0,1],[1,0]], bool)\", "
       "\"np.array([1+2j, complex(-3, np.nan)], np.complex64)\", "
       "\"np.array([[-1,2],[300,-32768]], np.int16)\", "
       "\"np.full(4, 2.5, np.float32)\", \"np.zeros((0,3), np.float32)\", "
       "\"np.array(False)\"]}"},
      {"extremes", s_extremes, NULL,
       "{\"expect\": [\"-np.inf\", \"np.inf\", \"-np.inf\", \"np.inf\", "
       "\"np.array(-2**31)\", \"np.array(2**31-1)\", \"np.array(0)\", "
       "\"np.array(65535)\", \"np.array(False)\", \"np.array(True)\", "
       "\"np.array(-2**63)\", \"np.array(2**63-1)\"]}"},
      {"iota_convert", s_iota_convert, NULL,
       "{\"inputs\": [{}, {}, {\"values\": [0, 1, 2]}, {}], \"expect\": "
       "[\"np.tile(np.arange(3), (2, 1))\", \"np.arange(4.0)\", "
       "\"np.trunc(a0).astype(np.int32)\", \"a0 != 0\", "
       "\"a0.astype(ml_dtypes.bfloat16)\", \"a0.view(np.int32)\", "
       "\"a1.astype(np.uint8)\", \"a2 != 0\", \"a3.real\", \"a3.imag\", "
       "\"np.abs(a3)\"], \"rtol\": 1e-6}"},
      {"shapes", s_shapes, NULL,
       "{\"expect\": [\"np.broadcast_to(a1, (4,2,3))\", "
       "\"np.broadcast_to(a1, (2,3))\", \"a0.reshape(3,1,2)\", \"a0.T\", "
       "\"a0[0:2, 1:3:2]\", \"np.concatenate([a0, a0, a1[None]], 0)\", "
       "\"np.array([[9,9,9,9],[a0[0,1],a0[0,2],9,9],[9,9,9,9],"
       "[a0[1,1],a0[1,2],9,9]], np.float32)\", \"a0[:, ::-1]\", "
       "\"np.broadcast_to(a0.T[:, :, None], (3, 2, 4))\"]}"},
      {"dynamic", s_dynamic, NULL,
       "{\"inputs\": [{}, {\"values\": [1]}, {\"values\": [2]}, {}], "
       "\"expect\": [\"a0[1:3, 2:5]\", "
       "\"np.concatenate([a0[:1], np.concatenate([a0[1:3,:2], a3, "
       "a0[1:3,4:]], 1), a0[3:]], 0)\"]}"},
      {"reduce", s_reduce, NULL,
       "{\"rtol\": 1e-5, \"expect\": [\"a0.sum(1)\", \"a0.max(0)\", "
       "\"a0.min()\", \"a0.prod(1)\", \"a1.all(1)\", \"a1.any(1)\", "
       "\"a1.any(0)\", \"a2.max(1)\", \"a2.min(1)\", "
       "\"np.bitwise_and.reduce(a2, 1)\", \"a0\"]}"},
      {"argreduce", s_argreduce, NULL,
       "{\"inputs\": [{\"values\": [1, 3, 3, 2, \"nan\", 1, \"nan\", 5, "
       "\"-inf\", \"-inf\", \"-inf\", \"-inf\", 2, 1, 1, 2]}, "
       "{\"values\": [4, 1, 4, 0, 0, 4, 1, 0, 2, 4]}], \"expect\": ["
       "\"[3, np.nan, -np.inf, 2]\", \"[1, 0, 0, 0]\", "
       "\"[1, np.nan, -np.inf, 1]\", \"[0, 0, 0, 1]\", "
       "\"a1.max(1)\", \"a1.argmax(1)\", \"a1.min(0)\", \"a1.argmin(0)\"]}"},
      {"dot", s_dot, NULL,
       "{\"rtol\": 1e-5, \"atol\": 1e-5, \"expect\": [\"a0@a1\", \"a2@a3\", "
       "\"a4.astype(np.float32)@a5.astype(np.float32)\", "
       "\"np.einsum('ij,kl->ijkl', a0, a0)\"]}"},
      {"indexing", s_indexing, NULL,
       "{\"rtol\": 1e-6, \"inputs\": [{}, {\"range\": [0, 10]}, {}, {}, "
       "{\"range\": [0, 4]}, {\"range\": [0, 3]}, {}], \"expect\": ["
       "\"a0[a1]\", \"(lambda r: (np.add.at(r, a1.ravel(), a2.ravel()), r)[1])"
       "(a0.copy())\", \"np.take_along_axis(a3, a4, 1)\", "
       "\"(lambda r: ([np.add.at(r[i], a4[i], a6[i,:2]) for i in range(3)], "
       "r)[1])(a3.copy())\", \"a3[a5]\", \"a3[:, a5]\", "
       "\"(lambda r: (r.__setitem__([2,0,1], a2[0]), r)[1])(a0.copy())\"]}"},
      {"rng", s_rng, NULL, "{}"},
      {"alias", s_alias, NULL, "{\"expect\": [\"a0+a1\"]}"},
      {"view_bitcast", s_view_bitcast, NULL,
       "{\"inputs\": [{}, {\"values\": [0, 1, 2, 0, 0, 5]}], \"expect\": "
       "[\"view(a0, [2,3], [1,4], 2).view(np.int32)\", "
       "\"view(a1, [3], [2], 1) != 0\"]}"},
  };
  int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
  int nviews = (int)(sizeof kViews / sizeof kViews[0]);
  if (i < nfixed) {
    *out = fixed[i];
    return true;
  }
  i -= nfixed;
  if (i >= nviews) return false;
  const view_case_t* c = &kViews[i];
  static char names[sizeof kViews / sizeof kViews[0]][32];
  snprintf(names[i], sizeof names[i], "view_%s_%02d", c->write ? "write" : "read",
           i);
  char sz[64] = "", st[64] = "";
  for (int k = 0; k < c->rank; k++) {
    size_t a = strlen(sz), b = strlen(st);
    snprintf(sz + a, sizeof sz - a, "%s%lld", k ? ", " : "", (long long)c->sizes[k]);
    snprintf(st + b, sizeof st - b, "%s%lld", k ? ", " : "", (long long)c->strides[k]);
  }
  if (c->write)
    snprintf(json, cap, "{\"expect\": [\"view_write(a0, [%s], [%s], %lld, a1)\"]}",
             sz, st, (long long)c->offset);
  else
    snprintf(json, cap, "{\"expect\": [\"view(a0, [%s], [%s], %lld)\"]}", sz, st,
             (long long)c->offset);
  out->name = names[i];
  out->build = s_view;
  out->arg = c;
  out->json = json;
  return true;
}

#endif  // TPR_TESTS_C_TEST_EMIT_SAMPLES_H_
