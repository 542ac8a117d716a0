// Golden-ish checks of the emitted StableHLO text: key lines and attribute
// spellings. Numerical checks live in test_emit_plugin.c and
// tools/check_stablehlo.py.
#include <math.h>

#include "harness.h"
#include "tpr/graph.h"

#define T(dt, ...)                                                         \
  tpr_type_make(TPR_DTYPE_##dt,                                            \
                (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                (int64_t[]){__VA_ARGS__})
#define L(...) (int64_t[]){__VA_ARGS__}

// Emits |g| into a tpr_malloc'd string (NULL on error, printed).
static char* emit(tpr_graph_t* g) {
  char* text = NULL;
  size_t len = 0;
  tpr_status_t s = tpr_graph_emit_stablehlo(g, &text, &len);
  if (!tpr_status_is_ok(s)) {
    fprintf(stderr, "  emit: %s\n", tpr_status_message(s));
    tpr_status_free(s);
    return NULL;
  }
  if (strlen(text) != len) {
    tpr_free(text);
    return NULL;
  }
  return text;
}

#define EXPECT_LINE(text, needle)                              \
  do {                                                         \
    if (!strstr((text), (needle))) {                           \
      fprintf(stderr, "  missing: %s\n--- text:\n%s\n", needle, text); \
      tpr_free(text);                                          \
      tpr_graph_free(g);                                       \
      CHECK(false);                                            \
    }                                                          \
  } while (0)

TPR_TEST(emit_module_shape_and_aliasing) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(F32, 4));
  tpr_value_t y = tpr_parameter(g, tpr_type_scalar(TPR_DTYPE_F32));
  tpr_value_t s = tpr_binary(g, TPR_BINARY_ADD, x,
                             tpr_broadcast_in_dim(g, y, 1, L(4), NULL));
  tpr_graph_add_result(g, s);
  tpr_graph_add_result(g, y);
  tpr_graph_alias(g, 0, 0);
  char* t = emit(g);
  CHECK(t);
  EXPECT_LINE(t, "module @tpr attributes {mhlo.num_partitions = 1 : i32, "
                 "mhlo.num_replicas = 1 : i32} {");
  EXPECT_LINE(t, "func.func public @main(%arg0: tensor<4xf32> "
                 "{tf.aliasing_output = 0 : i32}, %arg1: tensor<f32>) -> "
                 "(tensor<4xf32>, tensor<f32>) {");
  EXPECT_LINE(t, "= \"stablehlo.broadcast_in_dim\"(%arg1) "
                 "{broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
                 "tensor<4xf32>");
  EXPECT_LINE(t, "%3 = \"stablehlo.add\"(%arg0, %2) : (tensor<4xf32>, "
                 "tensor<4xf32>) -> tensor<4xf32>");
  EXPECT_LINE(t, "\"func.return\"(%3, %arg1) : (tensor<4xf32>, tensor<f32>) "
                 "-> ()");
  tpr_free(t);
  // No results, no parameters.
  tpr_graph_reset(g);
  t = emit(g);
  CHECK(t);
  EXPECT_LINE(t, "@main() -> () {");
  EXPECT_LINE(t, "\"func.return\"() : () -> ()");
  tpr_free(t);
  tpr_graph_free(g);
}

TPR_TEST(emit_constants_are_exact) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_F32, 1.0));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_F32, NAN));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_F64, -INFINITY));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_BF16, 1.0));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_F16, -2.0));
  tpr_graph_add_result(g, tpr_constant_i64(g, TPR_DTYPE_U64, -1));
  tpr_graph_add_result(g, tpr_constant_i64(g, TPR_DTYPE_S8, -5));
  tpr_graph_add_result(g, tpr_constant_i64(g, TPR_DTYPE_BOOL, 7));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_C64, 2.0));
  tpr_graph_add_result(g, tpr_constant_lowest(g, TPR_DTYPE_S32));
  tpr_graph_add_result(g, tpr_constant_highest(g, TPR_DTYPE_F8E4M3FN));
  int32_t m[4] = {1, 2, 3, 4};
  tpr_graph_add_result(g, tpr_constant_dense(g, T(S32, 2, 2), m));
  uint8_t b[4] = {1, 0, 0, 3};
  tpr_graph_add_result(g, tpr_constant_dense(g, T(BOOL, 2, 2), b));
  char* t = emit(g);
  CHECK(t);
  EXPECT_LINE(t, "%0 = \"stablehlo.constant\"() {value = dense<\"0x0000803F\"> "
                 ": tensor<f32>} : () -> tensor<f32>");
  EXPECT_LINE(t, "dense<\"0x0000C07F\"> : tensor<f32>");
  EXPECT_LINE(t, "dense<\"0x000000000000F0FF\"> : tensor<f64>");
  EXPECT_LINE(t, "dense<\"0x803F\"> : tensor<bf16>");
  EXPECT_LINE(t, "dense<\"0x00C0\"> : tensor<f16>");
  EXPECT_LINE(t, "dense<18446744073709551615> : tensor<ui64>");
  EXPECT_LINE(t, "dense<-5> : tensor<i8>");
  EXPECT_LINE(t, "dense<true> : tensor<i1>");
  EXPECT_LINE(t, "dense<\"0x0000004000000000\"> : tensor<complex<f32>>");
  EXPECT_LINE(t, "dense<-2147483648> : tensor<i32>");
  EXPECT_LINE(t, "dense<\"0x7E\"> : tensor<f8E4M3FN>");  // 448
  EXPECT_LINE(t, "dense<\"0x01000000020000000300000004000000\"> : "
                 "tensor<2x2xi32>");
  EXPECT_LINE(t, "dense<[[true, false], [false, true]]> : tensor<2x2xi1>");
  tpr_free(t);
  tpr_graph_free(g);
}

TPR_TEST(emit_attribute_spellings) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(F32, 2, 3));
  tpr_value_t i = tpr_parameter(g, T(S32, 2, 3));
  tpr_value_t u = tpr_parameter(g, T(U8, 2));
  tpr_value_t bx = tpr_parameter(g, T(F32, 5, 2, 3));
  tpr_value_t by = tpr_parameter(g, T(F32, 5, 3, 4));
  tpr_value_t st = tpr_parameter(g, T(U64, 2));
  tpr_value_t r[16];
  int n = 0;
  r[n++] = tpr_compare(g, TPR_CMP_LT, x, x);
  r[n++] = tpr_compare(g, TPR_CMP_GE, i, i);
  r[n++] = tpr_compare(g, TPR_CMP_NE, u, u);
  r[n++] = tpr_dot_general(g, bx, by, 1, L(0), L(0), 1, L(2), L(1),
                           TPR_DTYPE_F32);
  r[n++] = tpr_iota(g, T(S64, 3), 0);
  r[n++] = tpr_slice(g, x, L(0, 1), L(2, 3), L(1, 2));
  r[n++] = tpr_transpose(g, x, L(1, 0));
  tpr_value_t parts[2] = {x, x};
  r[n++] = tpr_concatenate(g, parts, 2, 0);
  r[n++] = tpr_pad(g, x, tpr_constant_f64(g, TPR_DTYPE_F32, 0), L(0, 1),
                   L(2, 0), L(0, 1));
  r[n++] = tpr_reduce(g, x, TPR_REDUCE_MAX, L(1), 1);
  r[n++] = tpr_unary(g, TPR_UNARY_ERF, x);
  r[n++] = tpr_binary(g, TPR_BINARY_NEXTAFTER, x, x);
  tpr_value_t bits, ns;
  tpr_rng_bits(g, st, T(U32, 4), &bits, &ns);
  r[n++] = bits;
  r[n++] = tpr_reverse(g, x, L(0, 1), 2);
  for (int k = 0; k < n; k++) tpr_graph_add_result(g, r[k]);
  char* t = emit(g);
  CHECK(t);
  EXPECT_LINE(t, "{comparison_direction = #stablehlo<comparison_direction LT>, "
                 "compare_type = #stablehlo<comparison_type FLOAT>} : "
                 "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>");
  EXPECT_LINE(t, "#stablehlo<comparison_direction GE>, compare_type = "
                 "#stablehlo<comparison_type SIGNED>");
  EXPECT_LINE(t, "#stablehlo<comparison_direction NE>, compare_type = "
                 "#stablehlo<comparison_type UNSIGNED>");
  EXPECT_LINE(t, "\"stablehlo.dot_general\"(%arg3, %arg4) "
                 "{dot_dimension_numbers = #stablehlo.dot<"
                 "lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
                 "lhs_contracting_dimensions = [2], "
                 "rhs_contracting_dimensions = [1]>, precision_config = "
                 "[#stablehlo<precision HIGHEST>, #stablehlo<precision "
                 "HIGHEST>]} : (tensor<5x2x3xf32>, tensor<5x3x4xf32>) -> "
                 "tensor<5x2x4xf32>");
  EXPECT_LINE(t, "\"stablehlo.iota\"() {iota_dimension = 0 : i64} : () -> "
                 "tensor<3xi64>");
  EXPECT_LINE(t, "{start_indices = array<i64: 0, 1>, limit_indices = "
                 "array<i64: 2, 3>, strides = array<i64: 1, 2>}");
  EXPECT_LINE(t, "{permutation = array<i64: 1, 0>}");
  EXPECT_LINE(t, "{dimension = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) "
                 "-> tensor<4x3xf32>");
  EXPECT_LINE(t, "{edge_padding_low = array<i64: 0, 1>, edge_padding_high = "
                 "array<i64: 2, 0>, interior_padding = array<i64: 0, 1>}");
  EXPECT_LINE(t, "\"stablehlo.reduce\"(%arg0, %n");
  EXPECT_LINE(t, "\"stablehlo.maximum\"(%n");
  EXPECT_LINE(t, "}) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, "
                 "tensor<f32>) -> tensor<2xf32>");
  EXPECT_LINE(t, "dense<\"0x000080FF\"> : tensor<f32>");  // max init -inf
  EXPECT_LINE(t, "\"chlo.erf\"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>");
  EXPECT_LINE(t, "\"chlo.next_after\"(%arg0, %arg0)");
  EXPECT_LINE(t, "\"stablehlo.rng_bit_generator\"(%arg5) {rng_algorithm = "
                 "#stablehlo<rng_algorithm THREE_FRY>} : (tensor<2xui64>) -> "
                 "(tensor<2xui64>, tensor<2xui64>)");
  // 32-bit draws are 64-bit words bitcast apart.
  EXPECT_LINE(t, "\"stablehlo.bitcast_convert\"(%m");
  EXPECT_LINE(t, "(tensor<2xui64>) -> tensor<2x2xui32>");
  EXPECT_LINE(t, "\"stablehlo.reverse\"(%arg0) {dimensions = array<i64: 0, "
                 "1>}");
  // Multi-result values are %mN#i.
  char want[64];
  snprintf(want, sizeof want, "%%m%d:2 = \"stablehlo.rng_bit_generator\"", ns);
  EXPECT_LINE(t, want);
  snprintf(want, sizeof want, "%%m%d#1", ns);
  EXPECT_LINE(t, want);
  tpr_free(t);
  tpr_graph_free(g);
}

TPR_TEST(emit_indexing_ops) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t v = tpr_parameter(g, T(F32, 10));
  tpr_value_t idx = tpr_parameter(g, T(S64, 4));
  tpr_value_t m = tpr_parameter(g, T(F32, 3, 5));
  tpr_graph_add_result(g, tpr_take_1d(g, v, idx));
  tpr_graph_add_result(g, tpr_put_1d(g, v, idx, tpr_take_1d(g, v, idx), true));
  tpr_graph_add_result(g, tpr_index_select(g, m, 1, idx));
  tpr_value_t vals, ids;
  tpr_argreduce(g, m, 1, true, &vals, &ids);
  tpr_graph_add_result(g, ids);
  char* t = emit(g);
  CHECK(t);
  EXPECT_LINE(t, "\"stablehlo.gather\"(%arg0, %arg1) {dimension_numbers = "
                 "#stablehlo.gather<collapsed_slice_dims = [0], "
                 "start_index_map = [0], index_vector_dim = 1>, "
                 "indices_are_sorted = false, slice_sizes = array<i64: 1>} : "
                 "(tensor<10xf32>, tensor<4xi64>) -> tensor<4xf32>");
  EXPECT_LINE(t, "\"stablehlo.scatter\"(%arg0, %arg1, %");
  EXPECT_LINE(t, "\"stablehlo.add\"(%n");
  EXPECT_LINE(t, "}) {indices_are_sorted = false, scatter_dimension_numbers = "
                 "#stablehlo.scatter<inserted_window_dims = [0], "
                 "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
                 "unique_indices = false} : (tensor<10xf32>, tensor<4xi64>, "
                 "tensor<4xf32>) -> tensor<10xf32>");
  EXPECT_LINE(t, "#stablehlo.gather<offset_dims = [0], collapsed_slice_dims = "
                 "[1], start_index_map = [1], index_vector_dim = 1>, "
                 "indices_are_sorted = false, slice_sizes = array<i64: 3, 1>} "
                 ": (tensor<3x5xf32>, tensor<4xi64>) -> tensor<3x4xf32>");
  EXPECT_LINE(t, "\"stablehlo.reduce\"(%arg2, %n");
  EXPECT_LINE(t, "-> (tensor<3xf32>, tensor<3xi64>)");
  tpr_free(t);
  tpr_graph_free(g);
}

// Windows indexed along dims 0 and 2 of a [6, 3, 5, 4] operand: no
// transpose of the operand, the windows are its dims 1 and 3.
TPR_TEST(emit_window_gather_and_scatter) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t v = tpr_parameter(g, T(F32, 6, 3, 5, 4));
  tpr_value_t c = tpr_parameter(g, T(S64, 2, 2));
  tpr_value_t u = tpr_parameter(g, T(F32, 2, 3, 4));
  const int64_t dims[2] = {2, 0};  // column 0 indexes dim 2
  tpr_graph_add_result(g, tpr_gather_windows(g, v, dims, 2, c));
  tpr_graph_add_result(g, tpr_scatter_windows(g, v, dims, 2, c, u, false));
  char* t = emit(g);
  CHECK(t);
  EXPECT_LINE(t, "\"stablehlo.gather\"(%arg0, %arg1) {dimension_numbers = "
                 "#stablehlo.gather<offset_dims = [1, 2], collapsed_slice_dims = [0, 2], "
                 "start_index_map = [2, 0], index_vector_dim = 1>, "
                 "indices_are_sorted = false, slice_sizes = array<i64: 1, 3, 1, 4>} : "
                 "(tensor<6x3x5x4xf32>, tensor<2x2xi64>) -> tensor<2x3x4xf32>");
  EXPECT_LINE(t, "#stablehlo.scatter<update_window_dims = [1, 2], inserted_window_dims = "
                 "[0, 2], scatter_dims_to_operand_dims = [2, 0], index_vector_dim = 1>, "
                 "unique_indices = false} : (tensor<6x3x5x4xf32>, tensor<2x2xi64>, "
                 "tensor<2x3x4xf32>) -> tensor<6x3x5x4xf32>");
  CHECK(!strstr(t, "transpose"));
  tpr_free(t);
  tpr_graph_free(g);
  // Bad input fails the graph with a message, never a bad program.
  const int64_t twice[2] = {1, 1};
  CHECK_OK(tpr_graph_create(&g));
  v = tpr_parameter(g, T(F32, 6, 3));
  c = tpr_parameter(g, T(S64, 2, 2));
  CHECK(tpr_gather_windows(g, v, twice, 2, c) == TPR_VALUE_NONE);
  tpr_status_t st = tpr_graph_status(g);
  CHECK(strstr(tpr_status_message(st), "do not fit"));
  tpr_status_free(st);
  tpr_graph_free(g);
  CHECK_OK(tpr_graph_create(&g));
  v = tpr_parameter(g, T(F32, 6, 3));
  c = tpr_parameter(g, T(S64, 2, 1));
  u = tpr_parameter(g, T(F32, 2, 4));
  CHECK(tpr_scatter_windows(g, v, dims + 1, 1, c, u, true) == TPR_VALUE_NONE);
  st = tpr_graph_status(g);
  CHECK(strstr(tpr_status_message(st), "tpr_scatter_windows: updates"));
  tpr_status_free(st);
  tpr_graph_free(g);
}

TPR_TEST(emit_large_constant_and_many_nodes) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  static float big[1 << 16];
  for (int i = 0; i < (1 << 16); i++) big[i] = (float)i;
  tpr_value_t c = tpr_constant_dense(g, T(F32, 1 << 16), big);
  tpr_value_t x = c;
  for (int i = 0; i < 2000; i++) x = tpr_unary(g, TPR_UNARY_NEG, x);
  tpr_graph_add_result(g, x);
  char* t = emit(g);
  CHECK(t);
  CHECK(strlen(t) > (1 << 16) * 8);
  tpr_free(t);
  tpr_graph_free(g);
}
