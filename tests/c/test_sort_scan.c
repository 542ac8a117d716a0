// tpr_sort, tpr_scan, tpr_scan_arg and tpr_fft: type checks, sticky errors,
// and results on the PJRT plugin against plain C references (NaN order,
// stability, descending, reverse scans, cummax ties).
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "test_runtime_fixture.h"
#include "tpr/graph.h"

static tpr_type_t f32v(int64_t n) { return tpr_type_make(TPR_DTYPE_F32, 1, &n); }

TPR_TEST(sort_types_and_errors) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  int64_t d23[2] = {2, 3};
  tpr_value_t x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, d23));
  tpr_value_t i = tpr_iota(g, tpr_type_make(TPR_DTYPE_S64, 2, d23), 1);
  tpr_value_t ops[2] = {x, i}, outs[2];
  tpr_sort(g, ops, 2, 1, true, outs);
  CHECK(outs[0] != TPR_VALUE_NONE && outs[1] != TPR_VALUE_NONE);
  CHECK(tpr_value_type(g, outs[1])->dtype == TPR_DTYPE_S64);
  tpr_value_t s = tpr_scan(g, x, 0, TPR_SCAN_LOGADDEXP, true);
  CHECK(tpr_type_equal(tpr_value_type(g, s), tpr_value_type(g, x)));
  tpr_value_t fv, fi;
  tpr_scan_arg(g, x, 1, false, &fv, &fi);
  CHECK(tpr_value_type(g, fi)->dtype == TPR_DTYPE_S64);
  int64_t len = 3;
  tpr_value_t r = tpr_fft(g, x, TPR_FFT_RFFT, &len, 1);
  CHECK(tpr_value_type(g, r)->dtype == TPR_DTYPE_C64);
  CHECK(tpr_value_type(g, r)->dims[1] == 2);
  CHECK_OK(tpr_graph_status(g));
  // A shape mismatch is a sticky INVALID_ARGUMENT; later builders no-op.
  tpr_value_t bad[2] = {x, tpr_parameter(g, f32v(6))};
  tpr_sort(g, bad, 2, 0, false, outs);
  CHECK(outs[0] == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  CHECK(tpr_scan(g, x, 0, TPR_SCAN_SUM, false) == TPR_VALUE_NONE);
  tpr_graph_reset(g);
  x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_S32, 2, d23));
  CHECK(tpr_scan(g, x, 1, TPR_SCAN_LOGADDEXP, false) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_reset(g);
  x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, d23));
  CHECK(tpr_scan(g, x, 2, TPR_SCAN_SUM, false) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_reset(g);
  x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, d23));
  len = 4;  // complex FFT of a real operand
  CHECK(tpr_fft(g, x, TPR_FFT_FFT, &len, 1) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_free(g);
}

TPR_TEST(sort_scan_on_plugin) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  enum { N = 9 };
  const float in[N] = {3, NAN, 1, 3, -0.0f, 0.0f, NAN, -INFINITY, 2};
  // Stable ascending: -inf, -0, 0, 1, 2, 3, 3, nan, nan.
  const int32_t want_asc[N] = {7, 4, 5, 2, 8, 0, 3, 1, 6};
  const int32_t want_desc[N] = {1, 6, 0, 3, 8, 2, 4, 5, 7};
  for (int desc = 0; desc < 2; desc++) {
    tpr_graph_reset(g);
    int64_t n = N;
    tpr_value_t x = tpr_parameter(g, f32v(N));
    tpr_value_t ops[2] = {x, tpr_iota(g, tpr_type_make(TPR_DTYPE_S32, 1, &n), 0)};
    tpr_value_t outs[2];
    tpr_sort(g, ops, 2, 0, desc, outs);
    tpr_graph_add_result(g, outs[0]);
    tpr_graph_add_result(g, outs[1]);
    int32_t got[N];
    CHECK_OK(fixture_run1(c, g, in, N, 1, got, sizeof got));
    CHECK(memcmp(got, desc ? want_desc : want_asc, sizeof got) == 0);
  }
  // Scans against a sequential reference, forward and reverse.
  const float v[N] = {1, 2, -3, 0.5f, 4, -1, 2, 0.25f, 3};
  for (int rev = 0; rev < 2; rev++) {
    for (int op = TPR_SCAN_SUM; op <= TPR_SCAN_LOGADDEXP; op++) {
      tpr_graph_reset(g);
      tpr_value_t x = tpr_parameter(g, f32v(N));
      tpr_graph_add_result(g, tpr_scan(g, x, 0, (tpr_scan_op_t)op, rev));
      float got[N], want[N], acc = 0;
      for (int k = 0; k < N; k++) {
        int i = rev ? N - 1 - k : k;
        float e = v[i];
        acc = k == 0                       ? e
              : op == TPR_SCAN_SUM         ? acc + e
              : op == TPR_SCAN_PROD        ? acc * e
              : op == TPR_SCAN_MAX         ? fmaxf(acc, e)
              : op == TPR_SCAN_MIN         ? fminf(acc, e)
                                           : logf(expf(acc) + expf(e));
        want[i] = acc;
      }
      CHECK_OK(fixture_run1(c, g, v, N, 0, got, sizeof got));
      for (int i = 0; i < N; i++) CHECK(fabsf(got[i] - want[i]) < 1e-4f);
    }
  }
  // cummax: ties take the later index; a NaN sticks, later NaNs move it.
  const float m[N] = {1, 1, 0, 2, NAN, 5, NAN, 1, 2};
  const int64_t want_idx[N] = {0, 1, 1, 3, 4, 4, 6, 6, 6};
  tpr_graph_reset(g);
  tpr_value_t x = tpr_parameter(g, f32v(N)), mv, mi;
  tpr_scan_arg(g, x, 0, true, &mv, &mi);
  tpr_graph_add_result(g, mi);
  int64_t got_idx[N];
  CHECK_OK(fixture_run1(c, g, m, N, 0, got_idx, sizeof got_idx));
  CHECK(memcmp(got_idx, want_idx, sizeof got_idx) == 0);
  // rfft of a constant: all energy in bin 0.
  tpr_graph_reset(g);
  x = tpr_parameter(g, f32v(8));
  int64_t len = 8;
  tpr_graph_add_result(g, tpr_fft(g, x, TPR_FFT_RFFT, &len, 1));
  const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  float spec[10];
  CHECK_OK(fixture_run1(c, g, ones, 8, 0, spec, sizeof spec));
  CHECK(fabsf(spec[0] - 8) < 1e-5f && fabsf(spec[2]) < 1e-5f);
  tpr_graph_free(g);
  tpr_client_destroy(c);
}
