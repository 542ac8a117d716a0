// tpr_cholesky and tpr_triangular_solve: type checks, sticky errors, and
// results on the PJRT plugin against hand-computed factors.
#include <math.h>

#include "harness.h"
#include "test_runtime_fixture.h"
#include "tpr/graph.h"

static tpr_type_t f32m(int64_t b, int64_t m, int64_t n) {
  int64_t d[3] = {b, m, n};
  return tpr_type_make(TPR_DTYPE_F32, 3, d);
}

TPR_TEST(linalg_types_and_errors) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t a = tpr_parameter(g, f32m(2, 3, 3));
  tpr_value_t b = tpr_parameter(g, f32m(2, 3, 4));
  tpr_value_t l = tpr_cholesky(g, a, true);
  CHECK(tpr_type_equal(tpr_value_type(g, l), tpr_value_type(g, a)));
  tpr_value_t x = tpr_triangular_solve(g, l, b, true, true, false, true);
  CHECK(tpr_type_equal(tpr_value_type(g, x), tpr_value_type(g, b)));
  CHECK_OK(tpr_graph_status(g));
  // b [2,3,4] on the right of a [2,3,3] does not fit; later builders no-op.
  CHECK(tpr_triangular_solve(g, a, b, false, true, false, false) ==
        TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  CHECK(tpr_cholesky(g, a, true) == TPR_VALUE_NONE);
  tpr_graph_reset(g);
  CHECK(tpr_cholesky(g, tpr_parameter(g, f32m(1, 2, 3)), false) ==
        TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_reset(g);
  int64_t d[2] = {2, 2};
  tpr_value_t ai = tpr_parameter(g, tpr_type_make(TPR_DTYPE_S32, 2, d));
  CHECK(tpr_cholesky(g, ai, true) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_free(g);
}

// Runs |g| (one f32[1,2,2] parameter) on |in|; result 0 to |out|.
static tpr_status_t run(tpr_client_t* c, tpr_graph_t* g, const float* in,
                        float* out) {
  char* text;
  size_t len;
  TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(g, &text, &len));
  tpr_executable_t* exe = NULL;
  tpr_status_t s = tpr_executable_compile(c, text, len, &exe);
  tpr_free(text);
  tpr_buffer_t* arg = NULL;
  tpr_buffer_t* res[1] = {NULL};
  int64_t dims[3] = {1, 2, 2};
  if (tpr_status_is_ok(s))
    s = tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, dims, 3, in, &arg);
  if (tpr_status_is_ok(s))
    s = tpr_executable_execute(exe, 0, &arg, 1, NULL, res, true);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(res[0], out, 4 * sizeof(float));
  tpr_buffer_release(res[0]);
  tpr_buffer_release(arg);
  tpr_executable_release(exe);
  return s;
}

TPR_TEST(linalg_on_plugin) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  // A = [[4, 2], [2, 5]] = L L^T with L = [[2, 0], [1, 2]].
  const float a[4] = {4, 2, 2, 5};
  tpr_value_t x = tpr_parameter(g, f32m(1, 2, 2));
  tpr_graph_add_result(g, tpr_cholesky(g, x, true));
  float got[4];
  CHECK_OK(run(c, g, a, got));
  CHECK(fabsf(got[0] - 2) < 1e-6f && fabsf(got[2] - 1) < 1e-6f &&
        fabsf(got[3] - 2) < 1e-6f);
  // L^T X = I (transpose_a) gives X = L^-T = [[0.5, -0.25], [0, 0.5]].
  tpr_graph_reset(g);
  x = tpr_parameter(g, f32m(1, 2, 2));
  tpr_value_t l = tpr_cholesky(g, x, true);
  tpr_value_t eye = tpr_convert(
      g,
      tpr_compare(g, TPR_CMP_EQ,
                  tpr_iota(g, tpr_type_make(TPR_DTYPE_S32, 3,
                                            (int64_t[]){1, 2, 2}), 1),
                  tpr_iota(g, tpr_type_make(TPR_DTYPE_S32, 3,
                                            (int64_t[]){1, 2, 2}), 2)),
      TPR_DTYPE_F32);
  tpr_graph_add_result(g, tpr_triangular_solve(g, l, eye, true, true, false,
                                               true));
  CHECK_OK(run(c, g, a, got));
  CHECK(fabsf(got[0] - 0.5f) < 1e-6f && fabsf(got[1] + 0.25f) < 1e-6f &&
        fabsf(got[2]) < 1e-6f && fabsf(got[3] - 0.5f) < 1e-6f);
  tpr_graph_free(g);
  tpr_client_destroy(c);
}
