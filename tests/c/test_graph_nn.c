// The spatial builders (tpr_convolution, tpr_reduce_window): result types,
// sticky errors, and the emitted text compiled and run on the plugin against
// a plain C reference.
#include <stdlib.h>

#include "harness.h"
#include "test_runtime_fixture.h"
#include "tpr/graph.h"

static tpr_type_t f32(int rank, const int64_t* dims) {
  return tpr_type_make(TPR_DTYPE_F32, rank, dims);
}

TPR_TEST(graph_nn_convolution_types) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, f32(4, (int64_t[]){2, 4, 9, 7}));
  tpr_value_t w = tpr_parameter(g, f32(4, (int64_t[]){6, 2, 3, 2}));
  // groups 2, stride (2, 1), padding (1, 0 / 1, 1), dilation (1, 2)
  tpr_value_t y = tpr_convolution(g, x, w, 2, (int64_t[]){2, 1},
                                  (int64_t[]){1, 0}, (int64_t[]){1, 1}, NULL,
                                  (int64_t[]){1, 2}, 2, 1, TPR_DTYPE_F32);
  const tpr_type_t* t = tpr_value_type(g, y);
  CHECK(t->rank == 4 && t->dims[0] == 2 && t->dims[1] == 6);
  CHECK(t->dims[2] == 5 && t->dims[3] == 6);  // (9+2-3)/2+1, 7+1-3+1
  // lhs dilation (transposed conv): 3 -> 5 (+2 pad each side) - 3 + 1 = 7
  tpr_value_t x1 = tpr_parameter(g, f32(3, (int64_t[]){1, 2, 3}));
  tpr_value_t w1 = tpr_parameter(g, f32(3, (int64_t[]){1, 2, 3}));
  tpr_value_t y1 = tpr_convolution(g, x1, w1, 1, NULL, (int64_t[]){2},
                                   (int64_t[]){2}, (int64_t[]){2}, NULL, 1, 1,
                                   TPR_DTYPE_F32);
  CHECK(tpr_value_type(g, y1)->dims[2] == 7);
  tpr_value_t r = tpr_reduce_window(
      g, x, tpr_constant_f64(g, TPR_DTYPE_F32, 0), TPR_REDUCE_SUM,
      (int64_t[]){1, 1, 3, 3}, (int64_t[]){1, 1, 2, 2}, NULL, NULL,
      (int64_t[]){0, 0, 1, 1}, (int64_t[]){0, 0, 1, 1});
  t = tpr_value_type(g, r);
  CHECK(t->dims[2] == 5 && t->dims[3] == 4);
  CHECK(tpr_graph_ok(g));
  tpr_graph_free(g);
}

TPR_TEST(graph_nn_bad_operands_are_sticky_errors) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, f32(4, (int64_t[]){2, 4, 9, 7}));
  tpr_value_t w = tpr_parameter(g, f32(4, (int64_t[]){6, 3, 3, 3}));
  // 4 input channels do not split into groups of 3.
  CHECK(tpr_convolution(g, x, w, 2, NULL, NULL, NULL, NULL, NULL, 1, 1,
                        TPR_DTYPE_F32) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  CHECK(tpr_reduce_window(g, x, x, TPR_REDUCE_SUM, NULL, NULL, NULL, NULL,
                          NULL, NULL) == TPR_VALUE_NONE);
  tpr_graph_reset(g);
  x = tpr_parameter(g, f32(2, (int64_t[]){4, 4}));
  tpr_value_t i0 = tpr_constant_i64(g, TPR_DTYPE_S32, 0);
  // init dtype differs; negative padding
  CHECK(tpr_reduce_window(g, x, i0, TPR_REDUCE_MAX, (int64_t[]){2, 2}, NULL,
                          NULL, NULL, NULL, NULL) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_reset(g);
  x = tpr_parameter(g, f32(2, (int64_t[]){4, 4}));
  CHECK(tpr_reduce_window(g, x, tpr_constant_f64(g, TPR_DTYPE_F32, 0),
                          TPR_REDUCE_SUM, (int64_t[]){2, 2}, NULL, NULL, NULL,
                          (int64_t[]){-1, 0}, NULL) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_free(g);
}

// Compiles and runs |g| (f32 parameters |a|, |b|), copying result 0 out.
static tpr_status_t run2(const tpr_graph_t* g, const float* a, const float* b,
                         float* out, size_t out_bytes) {
  tpr_client_t* c;
  TPR_RETURN_IF_ERROR(fixture_client(1, &c));
  char* text;
  size_t len;
  tpr_executable_t* exe = NULL;
  tpr_buffer_t* in[2] = {NULL, NULL};
  tpr_buffer_t* res = NULL;
  tpr_status_t s = tpr_graph_emit_stablehlo(g, &text, &len);
  if (tpr_status_is_ok(s)) {
    s = tpr_executable_compile(c, text, len, &exe);
    if (!tpr_status_is_ok(s)) fprintf(stderr, "%s\n", text);
    tpr_free(text);
  }
  const float* args[2] = {a, b};
  int n = tpr_graph_num_parameters(g);
  for (int i = 0; i < n && tpr_status_is_ok(s); i++) {
    const tpr_type_t* t = tpr_value_type(g, i);
    s = tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, t->dims, t->rank, args[i],
                             &in[i]);
  }
  if (tpr_status_is_ok(s))
    s = tpr_executable_execute(exe, 0, in, (size_t)n, NULL, &res, true);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(res, out, out_bytes);
  tpr_buffer_release(res);
  for (int i = 0; i < 2; i++) tpr_buffer_release(in[i]);
  tpr_executable_release(exe);
  tpr_client_destroy(c);
  return s;
}

TPR_TEST(graph_nn_convolution_runs_on_plugin) {
  // x [1, 2, 5, 4] * w [3, 2, 2, 2], stride 2, padding 1.
  enum { H = 5, W = 4, KH = 2, KW = 2, C = 2, O = 3 };
  float x[C * H * W], w[O * C * KH * KW];
  for (int i = 0; i < C * H * W; i++) x[i] = (float)((i * 7) % 11) - 5;
  for (int i = 0; i < O * C * KH * KW; i++) w[i] = (float)((i * 5) % 7) - 3;
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t xv = tpr_parameter(g, f32(4, (int64_t[]){1, C, H, W}));
  tpr_value_t wv = tpr_parameter(g, f32(4, (int64_t[]){O, C, KH, KW}));
  int64_t s[2] = {2, 2}, p[2] = {1, 1};
  tpr_value_t y = tpr_convolution(g, xv, wv, 2, s, p, p, NULL, NULL, 1, 1,
                                  TPR_DTYPE_F32);
  tpr_graph_add_result(g, y);
  const tpr_type_t* t = tpr_value_type(g, y);
  int OH = (int)t->dims[2], OW = (int)t->dims[3];
  CHECK(OH == 3 && OW == 3);
  float out[O * 3 * 3], ref[O * 3 * 3];
  for (int o = 0; o < O; o++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++) {
        float acc = 0;
        for (int c = 0; c < C; c++)
          for (int kh = 0; kh < KH; kh++)
            for (int kw = 0; kw < KW; kw++) {
              int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              acc += x[(c * H + ih) * W + iw] * w[((o * C + c) * KH + kh) * KW + kw];
            }
        ref[(o * OH + oh) * OW + ow] = acc;
      }
  CHECK_OK(run2(g, x, w, out, sizeof out));
  for (int i = 0; i < O * OH * OW; i++) CHECK(out[i] == ref[i]);
  tpr_graph_free(g);
}

TPR_TEST(graph_nn_reduce_window_runs_on_plugin) {
  // max over 2x2 windows, stride 1, base dilation 2 on the last dim, padded
  // by one -inf column on the right: x [3, 2] -> dilated [3, 3] -> padded
  // [3, 4] -> result [2, 3].
  float x[6] = {1, 5, -2, 3, 4, -1};
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t xv = tpr_parameter(g, f32(2, (int64_t[]){3, 2}));
  tpr_value_t y = tpr_reduce_window(
      g, xv, tpr_constant_lowest(g, TPR_DTYPE_F32), TPR_REDUCE_MAX,
      (int64_t[]){2, 2}, NULL, (int64_t[]){1, 2}, NULL, (int64_t[]){0, 0},
      (int64_t[]){0, 1});
  tpr_graph_add_result(g, y);
  const tpr_type_t* t = tpr_value_type(g, y);
  CHECK(t->dims[0] == 2 && t->dims[1] == 3);
  // dilated rows with padding (init fills holes): [1 -inf 5 -inf],
  // [-2 -inf 3 -inf], [4 -inf -1 -inf]
  float want[6] = {1, 5, 5, 4, 3, 3}, out[6];
  CHECK_OK(run2(g, x, NULL, out, sizeof out));
  for (int i = 0; i < 6; i++) CHECK(out[i] == want[i]);
  tpr_graph_free(g);
}
