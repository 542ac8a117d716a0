// Kernel times on the plugin under test of graphs whose row sums are built
// as reductions and as products with a ones vector
// (tpr_graph_set_row_sums_as_dots; softmax's max without its NaN guard on
// the product side, as the softmax rule builds it). A short version runs in
// every test run (both forms compile, run and agree); for figures:
//
//   TPR_ROW_SUM_BENCH=200 TORCH_TPU_PJRT_PLUGIN=... build/tpr_tests \
//     row_sum_bench
//
// prints, per graph, the median microseconds of one synchronous execution,
// the lower of four medians taken in turns with the other form.
#define _XOPEN_SOURCE 700  // clock_gettime
#include <math.h>
#include <stdlib.h>

#include "runtime/internal.h"
#include "test_runtime_fixture.h"

enum kind { ROW_SUM, LAYER_NORM, SOFTMAX };

// x minus its row mean, over the last dim.
static tpr_value_t centred(tpr_graph_t* g, tpr_value_t x, const tpr_type_t* t,
                           int64_t last, const int64_t* keep) {
  tpr_value_t s = tpr_reduce(g, x, TPR_REDUCE_SUM, &last, 1);
  tpr_value_t n = tpr_constant_f64(g, TPR_DTYPE_F32, (double)t->dims[last]);
  tpr_value_t m = tpr_binary(g, TPR_BINARY_DIV, s,
                             tpr_broadcast_in_dim(g, n, t->rank - 1, t->dims, NULL));
  return tpr_binary(g, TPR_BINARY_SUB, x,
                    tpr_broadcast_in_dim(g, m, t->rank, t->dims, keep));
}

static void build(tpr_graph_t* g, enum kind k, const tpr_type_t* t, bool dots) {
  tpr_value_t x = tpr_parameter(g, *t);
  int64_t last = t->rank - 1, keep[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) keep[i] = i;
  tpr_value_t out;
  if (k == ROW_SUM) {
    out = tpr_reduce(g, x, TPR_REDUCE_SUM, &last, 1);
  } else if (k == LAYER_NORM) {
    tpr_value_t d = centred(g, x, t, last, keep);
    tpr_value_t var = tpr_reduce(g, tpr_binary(g, TPR_BINARY_MUL, d, d),
                                 TPR_REDUCE_SUM, &last, 1);
    tpr_value_t scale = tpr_constant_f64(g, TPR_DTYPE_F32, 1.0 / (double)t->dims[last]);
    tpr_value_t eps = tpr_constant_f64(g, TPR_DTYPE_F32, 1e-5);
    var = tpr_binary(g, TPR_BINARY_MUL, var,
                     tpr_broadcast_in_dim(g, scale, t->rank - 1, t->dims, NULL));
    tpr_value_t rstd = tpr_unary(
        g, TPR_UNARY_RSQRT,
        tpr_binary(g, TPR_BINARY_ADD, var,
                   tpr_broadcast_in_dim(g, eps, t->rank - 1, t->dims, NULL)));
    out = tpr_binary(g, TPR_BINARY_MUL, d,
                     tpr_broadcast_in_dim(g, rstd, t->rank, t->dims, keep));
  } else {
    tpr_value_t m = dots ? tpr_reduce_max_unguarded(g, x, &last, 1)
                         : tpr_reduce(g, x, TPR_REDUCE_MAX, &last, 1);
    tpr_value_t e = tpr_unary(
        g, TPR_UNARY_EXP,
        tpr_binary(g, TPR_BINARY_SUB, x,
                   tpr_broadcast_in_dim(g, m, t->rank, t->dims, keep)));
    tpr_value_t s = tpr_reduce(g, e, TPR_REDUCE_SUM, &last, 1);
    out = tpr_binary(g, TPR_BINARY_DIV, e,
                     tpr_broadcast_in_dim(g, s, t->rank, t->dims, keep));
  }
  tpr_graph_add_result(g, out);
}

static int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

typedef struct form {
  tpr_executable_t* exe;
  tpr_buffer_t* out;  // of the last run
  double best_us;
} form_t;

static tpr_status_t compile_form(tpr_client_t* c, enum kind k,
                                 const tpr_type_t* t, bool dots, form_t* f) {
  tpr_graph_set_row_sums_as_dots(dots);
  tpr_graph_t* g;
  tpr_status_t s = tpr_graph_create(&g);
  if (tpr_status_is_ok(s)) build(g, k, t, dots);
  tpr_graph_set_row_sums_as_dots(false);
  if (!tpr_status_is_ok(s)) return s;
  char* text = NULL;
  size_t len = 0;
  s = tpr_graph_emit_stablehlo(g, &text, &len);
  tpr_graph_free(g);
  if (tpr_status_is_ok(s)) s = tpr_executable_compile(c, text, len, &f->exe);
  tpr_free(text);
  f->best_us = INFINITY;
  return s;
}

// Median microseconds of |iters| synchronous runs, kept if the lowest yet.
static tpr_status_t time_form(form_t* f, tpr_buffer_t* in, int iters,
                              int64_t* ns) {
  for (int i = 0; i < iters; i++) {
    tpr_buffer_release(f->out);
    f->out = NULL;
    int64_t t0 = tpr_now_ns();
    TPR_RETURN_IF_ERROR(
        tpr_executable_execute(f->exe, 0, &in, 1, NULL, &f->out, true));
    ns[i] = tpr_now_ns() - t0;
  }
  qsort(ns, (size_t)iters, sizeof *ns, cmp_i64);
  double us = (double)ns[iters / 2] / 1e3;
  if (us < f->best_us) f->best_us = us;
  return tpr_ok_status();
}

TPR_TEST(row_sum_bench) {
  const char* env = getenv("TPR_ROW_SUM_BENCH");
  int iters = env ? atoi(env) : 3;
  if (iters < 3) iters = 3;
  static const struct {
    const char* name;
    enum kind kind;
    int rank;
    int64_t dims[4];
  } kCases[] = {
      {"sum(-1)", ROW_SUM, 2, {1024, 64}},
      {"sum(-1)", ROW_SUM, 2, {1024, 256}},
      {"sum(-1)", ROW_SUM, 2, {1024, 4096}},
      {"sum(-1)", ROW_SUM, 2, {16384, 128}},
      {"layer norm", LAYER_NORM, 3, {8, 128, 256}},
      {"softmax", SOFTMAX, 4, {8, 4, 128, 128}},
  };
  int n_cases = env ? (int)(sizeof kCases / sizeof kCases[0]) : 1;
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  int64_t* ns = calloc((size_t)iters, sizeof *ns);
  CHECK(ns != NULL);
  bool ok = true;
  for (int i = 0; i < n_cases && ok; i++) {
    tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, kCases[i].rank, kCases[i].dims);
    int64_t n = tpr_type_numel(&t);
    float* host = malloc((size_t)n * sizeof(float));
    ok = host != NULL;
    for (int64_t j = 0; ok && j < n; j++) host[j] = (float)(j * 7919 % 1000) / 500.0f - 1.0f;
    tpr_buffer_t* in = NULL;
    form_t forms[2] = {{0}};
    tpr_status_t s = ok ? tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, t.dims, t.rank,
                                               host, &in)
                        : tpr_ok_status();
    for (int d = 0; d < 2 && tpr_status_is_ok(s); d++)
      s = compile_form(c, kCases[i].kind, &t, d == 1, &forms[d]);
    for (int round = 0; round < 4 && tpr_status_is_ok(s); round++)
      for (int d = 0; d < 2 && tpr_status_is_ok(s); d++)
        s = time_form(&forms[d], in, iters, ns);
    // Both forms give the same values, to float32 reassociation.
    int64_t out_n = kCases[i].kind == ROW_SUM ? n / t.dims[t.rank - 1] : n;
    float* got[2] = {malloc((size_t)out_n * sizeof(float)),
                     malloc((size_t)out_n * sizeof(float))};
    for (int d = 0; d < 2 && tpr_status_is_ok(s); d++)
      s = got[d] ? tpr_buffer_to_host(forms[d].out, got[d], (size_t)out_n * sizeof(float))
                 : TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
    for (int64_t j = 0; tpr_status_is_ok(s) && ok && j < out_n; j++)
      ok = fabsf(got[0][j] - got[1][j]) <= 1e-5f * (1.0f + fabsf(got[0][j]));
    if (tpr_status_is_ok(s) && env) {
      char shape[64];
      tpr_type_format(&t, shape, sizeof shape);
      printf("  %-10s %-22s reduce %8.1f us  dot %8.1f us  %.2fx\n",
             kCases[i].name, shape, forms[0].best_us, forms[1].best_us,
             forms[0].best_us / forms[1].best_us);
    }
    if (!tpr_status_is_ok(s)) {
      fprintf(stderr, "  %s: %s\n", kCases[i].name, tpr_status_message(s));
      ok = false;
    }
    tpr_status_free(s);
    for (int d = 0; d < 2; d++) {
      tpr_buffer_release(forms[d].out);
      tpr_executable_release(forms[d].exe);
      free(got[d]);
    }
    tpr_buffer_release(in);
    free(host);
  }
  free(ns);
  tpr_client_destroy(c);
  CHECK(ok);
}
