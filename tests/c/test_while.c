// tpr_while: region scoping errors, emitted text, and loops run on the
// plugin against plain C loops (including a nested while).
#include <math.h>

#include "harness.h"
#include "test_runtime_fixture.h"
#include "tpr/graph.h"

// cond: i < limit (args: i s64[], limit s64[], acc f32[4])
static void cond_lt(tpr_graph_t* g, void* user, const tpr_value_t* a,
                    tpr_value_t* r) {
  r[0] = tpr_compare(g, TPR_CMP_LT, a[0], a[1]);
}

// body: acc = acc * 0.5 + i; i += 1
static void body_halve_add(tpr_graph_t* g, void* user, const tpr_value_t* a,
                           tpr_value_t* r) {
  const tpr_type_t* t = tpr_value_type(g, a[2]);
  tpr_value_t fi = tpr_convert(g, a[0], TPR_DTYPE_F32);
  tpr_value_t half = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 0.5),
                                      t->rank, t->dims);
  tpr_value_t acc = tpr_binary(g, TPR_BINARY_MUL, a[2], half);
  acc = tpr_binary(g, TPR_BINARY_ADD, acc, tpr_broadcast_to(g, fi, t->rank, t->dims));
  r[0] = tpr_binary(g, TPR_BINARY_ADD, a[0], tpr_constant_i64(g, TPR_DTYPE_S64, 1));
  r[1] = a[1];
  r[2] = acc;
}

// A graph looping |body| |trips| times over x f32[4] (carried: i, trips, x),
// run on the plugin; checks the emitted text has a while op.
static tpr_status_t run_loop(tpr_region_fn_t body, int64_t trips,
                             const float* x, float* out) {
  tpr_graph_t* g;
  TPR_RETURN_IF_ERROR(tpr_graph_create(&g));
  tpr_value_t xv = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){4}));
  tpr_value_t init[3] = {tpr_constant_i64(g, TPR_DTYPE_S64, 0),
                         tpr_constant_i64(g, TPR_DTYPE_S64, trips), xv};
  tpr_value_t res[3];
  tpr_while(g, 3, init, cond_lt, body, NULL, res);
  tpr_graph_add_result(g, res[2]);
  char* text = NULL;
  size_t len;
  tpr_status_t s = tpr_graph_emit_stablehlo(g, &text, &len);
  if (tpr_status_is_ok(s) && !strstr(text, "stablehlo.while"))
    s = TPR_ERR(INTERNAL, "no stablehlo.while in the emitted text");
  tpr_free(text);
  tpr_client_t* c = NULL;
  if (tpr_status_is_ok(s)) s = fixture_client(1, &c);
  if (tpr_status_is_ok(s)) s = fixture_run1(c, g, x, 4, 0, out, 4 * sizeof(float));
  tpr_client_destroy(c);
  tpr_graph_free(g);
  return s;
}

TPR_TEST(while_runs_on_plugin) {
  float x[4] = {1, -2, 3.5f, 100}, out[4];
  CHECK_OK(run_loop(body_halve_add, 300, x, out));
  for (int k = 0; k < 4; k++) {
    float want = x[k];
    for (int i = 0; i < 300; i++) want = want * 0.5f + (float)i;
    CHECK(out[k] == want);
  }
}

// Nested: each outer step runs an inner loop of 300 steps on acc.
static void body_outer(tpr_graph_t* g, void* user, const tpr_value_t* a,
                       tpr_value_t* r) {
  tpr_value_t init[3] = {tpr_constant_i64(g, TPR_DTYPE_S64, 0),
                         tpr_constant_i64(g, TPR_DTYPE_S64, 300), a[2]};
  tpr_value_t in[3];
  tpr_while(g, 3, init, cond_lt, body_halve_add, NULL, in);
  r[0] = tpr_binary(g, TPR_BINARY_ADD, a[0], tpr_constant_i64(g, TPR_DTYPE_S64, 1));
  r[1] = a[1];
  r[2] = in[2];
}

TPR_TEST(while_nested_runs_on_plugin) {
  float x[4] = {0, 1, -1, 7}, out[4];
  CHECK_OK(run_loop(body_outer, 3, x, out));
  for (int k = 0; k < 4; k++) {
    float want = x[k];
    for (int o = 0; o < 3; o++)
      for (int i = 0; i < 300; i++) want = want * 0.5f + (float)i;
    CHECK(out[k] == want);
  }
}

static tpr_value_t g_outer;  // an outer value the bad body tries to capture

static void body_captures(tpr_graph_t* g, void* user, const tpr_value_t* a,
                          tpr_value_t* r) {
  r[0] = tpr_binary(g, TPR_BINARY_ADD, a[0], g_outer);
}

static void body_leaks(tpr_graph_t* g, void* user, const tpr_value_t* a,
                       tpr_value_t* r) {
  *(tpr_value_t*)user = r[0] = tpr_binary(g, TPR_BINARY_ADD, a[0], a[0]);
}

static void cond_true(tpr_graph_t* g, void* user, const tpr_value_t* a,
                      tpr_value_t* r) {
  r[0] = tpr_constant_i64(g, TPR_DTYPE_BOOL, 1);
}

static void cond_not_bool(tpr_graph_t* g, void* user, const tpr_value_t* a,
                          tpr_value_t* r) {
  r[0] = a[0];
}

TPR_TEST(while_scoping_errors) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_type_t s = tpr_type_scalar(TPR_DTYPE_F32);
  tpr_value_t x = tpr_parameter(g, s), out;
  g_outer = x;
  tpr_while(g, 1, &x, cond_true, body_captures, NULL, &out);
  CHECK(out == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);

  tpr_graph_reset(g);
  x = tpr_parameter(g, s);
  tpr_value_t leaked = TPR_VALUE_NONE;
  tpr_while(g, 1, &x, cond_true, body_leaks, &leaked, &out);
  CHECK_OK(tpr_graph_status(g));
  CHECK(tpr_unary(g, TPR_UNARY_EXP, leaked) == TPR_VALUE_NONE);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);

  tpr_graph_reset(g);
  x = tpr_parameter(g, s);
  tpr_while(g, 1, &x, cond_not_bool, body_leaks, &leaked, &out);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  tpr_graph_reset(g);
  x = tpr_parameter(g, s);
  tpr_while(g, 0, &x, cond_true, body_leaks, &leaked, &out);
  CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  // The graph is usable at top level again after a failed region.
  tpr_graph_reset(g);
  x = tpr_parameter(g, s);
  CHECK(tpr_graph_add_result(g, tpr_unary(g, TPR_UNARY_EXP, x)) == 0);
  CHECK_OK(tpr_graph_status(g));
  tpr_graph_free(g);
}
