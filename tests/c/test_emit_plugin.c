// The emitter against the real PJRT plugin (TORCH_TPU_PJRT_PLUGIN): the
// oldest XLA we target is the parser that matters. Every sample graph must
// compile; view reads and writes (fixed and random windows) must match a
// plain C reference; constants must come back bit-exact.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_emit_samples.h"
#include "test_runtime_fixture.h"
#include "tpr/graph.h"

static tpr_status_t compile_graph(tpr_client_t* c, const tpr_graph_t* g,
                                  tpr_executable_t** out) {
  char* text;
  size_t len;
  TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(g, &text, &len));
  tpr_status_t s = tpr_executable_compile(c, text, len, out);
  if (!tpr_status_is_ok(s) && getenv("TPR_EMIT_VERBOSE"))
    fprintf(stderr, "%s\n", text);
  tpr_free(text);
  return s;
}

TPR_TEST(emit_plugin_compiles_every_sample) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_sample_t s;
  char json[1024];
  int failed = 0, count = 0;
  for (int i = 0; tpr_sample_get(i, &s, json, sizeof json); i++) {
    tpr_graph_reset(g);
    s.build(g, s.arg);
    tpr_executable_t* exe = NULL;
    tpr_status_t st = compile_graph(c, g, &exe);
    if (!tpr_status_is_ok(st)) {
      fprintf(stderr, "  sample %s: %.600s\n", s.name, tpr_status_message(st));
      failed++;
    }
    tpr_status_free(st);
    tpr_executable_release(exe);
    count++;
  }
  tpr_graph_free(g);
  tpr_client_destroy(c);
  CHECK(failed == 0);
  CHECK(count > 30);
}

// Runs |g| with f32 arguments; outputs are copied into |out| (f32 each).
static tpr_status_t run_f32(tpr_client_t* c, const tpr_graph_t* g, int nargs,
                            const float* const* args, const int64_t* arg_n,
                            float* out, int64_t out_n) {
  tpr_executable_t* exe;
  TPR_RETURN_IF_ERROR(compile_graph(c, g, &exe));
  tpr_buffer_t* in[2] = {NULL, NULL};
  tpr_buffer_t* res = NULL;
  tpr_status_t s = tpr_ok_status();
  for (int i = 0; i < nargs && tpr_status_is_ok(s); i++) {
    const tpr_type_t* t = tpr_value_type(g, i);  // parameters come first
    s = tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, t->dims, t->rank, args[i],
                             &in[i]);
    (void)arg_n;
  }
  if (tpr_status_is_ok(s))
    s = tpr_executable_execute(exe, 0, in, (size_t)nargs, NULL, &res, true);
  if (tpr_status_is_ok(s))
    s = tpr_buffer_to_host(res, out, (size_t)out_n * sizeof(float));
  tpr_buffer_release(res);
  for (int i = 0; i < 2; i++) tpr_buffer_release(in[i]);
  tpr_executable_release(exe);
  return s;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static int64_t rnd(int64_t n) {  // [0, n)
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (int64_t)((rng_state >> 33) % (uint64_t)n);
}

// Checks one window against the C reference; sets *tpr_failed_ on mismatch.
static void check_view(tpr_client_t* c, tpr_graph_t* g, const view_case_t* vc,
                       int* tpr_failed_) {
  int64_t numel = 1;
  for (int k = 0; k < vc->rank; k++) numel *= vc->sizes[k];
  float base[256], value[256], want[256], got[256];
  for (int64_t i = 0; i < vc->n; i++) base[i] = (float)i + 0.5f;
  for (int64_t i = 0; i < numel; i++) value[i] = -(float)i - 1.0f;
  // Reference: walk the window in row-major order.
  memcpy(want, base, sizeof(float) * (size_t)vc->n);
  int64_t idx[4] = {0};
  bool overlap = false;
  uint8_t hit[256] = {0};
  for (int64_t e = 0; e < numel; e++) {
    int64_t a = vc->offset;
    for (int k = 0; k < vc->rank; k++) a += idx[k] * vc->strides[k];
    if (vc->write) {
      overlap |= hit[a];
      hit[a] = 1;
      want[a] = value[e];
    } else {
      want[e] = base[a];
    }
    for (int k = vc->rank - 1; k >= 0; k--) {
      if (++idx[k] < vc->sizes[k]) break;
      idx[k] = 0;
    }
  }
  tpr_graph_reset(g);
  s_view(g, vc);
  if (vc->write && overlap) {
    CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
    return;
  }
  tpr_status_t st = tpr_graph_status(g);
  if (!tpr_status_is_ok(st)) {
    fprintf(stderr, "  view n=%lld rank %d offset %lld: %s\n",
            (long long)vc->n, vc->rank, (long long)vc->offset,
            tpr_status_message(st));
    tpr_status_free(st);
    *tpr_failed_ = 1;
    return;
  }
  const float* args[2] = {base, value};
  int64_t an[2] = {vc->n, numel};
  int64_t out_n = vc->write ? vc->n : numel;
  CHECK_OK(run_f32(c, g, vc->write ? 2 : 1, args, an, got, out_n));
  if (memcmp(got, want, sizeof(float) * (size_t)out_n) != 0) {
    fprintf(stderr, "  %s mismatch: n=%lld sizes/strides:", vc->write ? "write" : "read",
            (long long)vc->n);
    for (int k = 0; k < vc->rank; k++)
      fprintf(stderr, " %lld/%lld", (long long)vc->sizes[k], (long long)vc->strides[k]);
    fprintf(stderr, " offset %lld\n", (long long)vc->offset);
    *tpr_failed_ = 1;
  }
}

TPR_TEST(emit_plugin_views_match_reference) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  int bad = 0;
  for (size_t i = 0; i < sizeof kViews / sizeof kViews[0]; i++) {
    int f = 0;
    check_view(c, g, &kViews[i], &f);
    bad += f;
  }
  // Random windows: ranks 0-4, sizes 0-4, strides 0-7 (0 only for reads).
  for (int t = 0; t < 160; t++) {
    view_case_t vc = {0};
    vc.write = t % 2;
    vc.rank = (int)rnd(5);
    int64_t extent = 0;
    bool empty = false;
    for (int k = 0; k < vc.rank; k++) {
      vc.sizes[k] = rnd(5);
      vc.strides[k] = rnd(8);
      if (vc.write && vc.strides[k] == 0 && vc.sizes[k] > 1 && rnd(4)) vc.strides[k] = 1;
      empty |= vc.sizes[k] == 0;
      if (vc.sizes[k]) extent += (vc.sizes[k] - 1) * vc.strides[k];
    }
    if (rnd(3) == 0 && vc.rank >= 2) {  // a permuted contiguous layout
      int64_t s = 1;
      for (int k = vc.rank - 1; k >= 0; k--) {
        vc.strides[(k + 1) % vc.rank] = s;
        s *= vc.sizes[(k + 1) % vc.rank] ? vc.sizes[(k + 1) % vc.rank] : 1;
      }
      extent = 0;
      for (int k = 0; k < vc.rank; k++)
        if (vc.sizes[k]) extent += (vc.sizes[k] - 1) * vc.strides[k];
    }
    vc.offset = rnd(4);
    vc.n = vc.offset + extent + 1 + rnd(3);
    if (empty) vc.n = 4;
    int f = 0;
    check_view(c, g, &vc, &f);
    bad += f;
  }
  tpr_graph_free(g);
  tpr_client_destroy(c);
  CHECK(bad == 0);
}

TPR_TEST(emit_plugin_constants_roundtrip) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  float f[6] = {1.5f, -0.0f, NAN, INFINITY, -INFINITY, 1e-45f};
  uint32_t nan_payload = 0x7FC00123u;
  memcpy(&f[2], &nan_payload, 4);
  tpr_graph_add_result(g, tpr_constant_dense(g, tpr_type_make(TPR_DTYPE_F32, 1,
                                                              (int64_t[]){6}),
                                             f));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_BF16, -3.140625));
  tpr_graph_add_result(g, tpr_constant_f64(g, TPR_DTYPE_F16, 1e-7));
  tpr_graph_add_result(g, tpr_constant_i64(g, TPR_DTYPE_U64, -1));
  tpr_graph_add_result(g, tpr_constant_lowest(g, TPR_DTYPE_S64));
  tpr_executable_t* exe;
  CHECK_OK(compile_graph(c, g, &exe));
  tpr_buffer_t* out[5] = {0};
  tpr_status_t s = tpr_executable_execute(exe, 0, NULL, 0, NULL, out, true);
  float gf[6] = {0};
  uint16_t bf = 0, h = 0;
  uint64_t u = 0;
  int64_t lo = 0;
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(out[0], gf, sizeof gf);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(out[1], &bf, 2);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(out[2], &h, 2);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(out[3], &u, 8);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(out[4], &lo, 8);
  for (int i = 0; i < 5; i++) tpr_buffer_release(out[i]);
  tpr_executable_release(exe);
  tpr_graph_free(g);
  tpr_client_destroy(c);
  CHECK_OK(s);
  CHECK(memcmp(gf, f, sizeof f) == 0);  // NaN payload and -0 included
  CHECK(bf == 0xC049);                  // -3.140625 in bf16
  CHECK(h == 0x0002);                   // 1e-7 -> f16 subnormal 2 * 2^-24
  CHECK(u == UINT64_MAX);
  CHECK(lo == INT64_MIN);
}

// The valid graphs of the builder fuzzer must all compile and run (on zero
// inputs): builders accept nothing the plugin's StableHLO verifier or XLA
// rejects.
TPR_TEST(emit_plugin_compiles_fuzzed_graphs) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  // TPR_FUZZ_ROUNDS / TPR_FUZZ_SEED widen the search when hunting bugs.
  const char* env_rounds = getenv("TPR_FUZZ_ROUNDS");
  const char* env_seed = getenv("TPR_FUZZ_SEED");
  int rounds = env_rounds ? atoi(env_rounds) : 4000;
  uint64_t state = env_seed ? strtoull(env_seed, NULL, 0) : 0x2545F4914F6CDD1Dull;
  if (!state) state = 1;
  int compiled = 0, failed = 0;
  for (int round = 0; round < rounds; round++) {
    tpr_graph_reset(g);
    tpr_fuzz_graph(g, &state);
    if (!tpr_graph_ok(g)) continue;
    tpr_executable_t* exe = NULL;
    tpr_status_t s = compile_graph(c, g, &exe);
    if (!tpr_status_is_ok(s)) {
      if (failed++ < 5) {
        char* text;
        size_t len;
        tpr_status_t e = tpr_graph_emit_stablehlo(g, &text, &len);
        fprintf(stderr, "  %.400s\n%s\n", tpr_status_message(s),
                tpr_status_is_ok(e) ? text : "");
        if (tpr_status_is_ok(e)) tpr_free(text);
        tpr_status_free(e);
      }
    } else {
      compiled++;
      // Run it on zeros: nothing may abort or fail at execution either.
      static const uint8_t zeros[1024];
      tpr_buffer_t* in[3] = {NULL, NULL, NULL};
      tpr_buffer_t* out = NULL;
      for (int i = 0; i < 3 && tpr_status_is_ok(s); i++) {
        const tpr_type_t* t = tpr_value_type(g, i);  // parameters 0..2
        s = tpr_buffer_from_host(c, 0, t->dtype, t->dims, t->rank, zeros,
                                 &in[i]);
      }
      if (tpr_status_is_ok(s))
        s = tpr_executable_execute(exe, 0, in, 3, NULL, &out, true);
      if (!tpr_status_is_ok(s) && failed++ < 5)
        fprintf(stderr, "  run: %.400s\n", tpr_status_message(s));
      tpr_buffer_release(out);
      for (int i = 0; i < 3; i++) tpr_buffer_release(in[i]);
    }
    tpr_status_free(s);
    tpr_executable_release(exe);
  }
  tpr_graph_free(g);
  tpr_client_destroy(c);
  printf("  fuzz: %d graphs compiled, %d rejected\n", compiled, failed);
  CHECK(failed == 0);
}

// x @ W.t() built swapped (transpose(W @ x^T) behind a barrier) gives the
// product a plain C loop gives; with the policy off, or when x has as many
// rows as the result has columns, no barrier is built.
static bool swapped_dot_case(tpr_client_t* c, bool on, int64_t m, int64_t n,
                             bool* has_barrier) {
  enum { K = 4 };
  float x[8 * K], w[8 * K], got[64], want[64];
  for (int64_t i = 0; i < m * K; i++) x[i] = (float)(i % 7) - 3.0f;
  for (int64_t i = 0; i < n * K; i++) w[i] = (float)(i % 5) * 0.5f - 1.0f;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0;
      for (int k = 0; k < K; k++) acc += x[i * K + k] * w[j * K + k];
      want[i * n + j] = acc;
    }
  tpr_graph_set_swap_transposed_dots(on);
  tpr_graph_t* g;
  if (!tpr_status_is_ok(tpr_graph_create(&g))) return false;
  tpr_value_t vx = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){m, K}));
  tpr_value_t vw = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){n, K}));
  static const int64_t kT[2] = {1, 0}, kOne = 1, kZero = 0;
  tpr_graph_add_result(g, tpr_dot_general(g, vx, tpr_transpose(g, vw, kT), 0,
                                          NULL, NULL, 1, &kOne, &kZero,
                                          TPR_DTYPE_F32));
  tpr_graph_set_swap_transposed_dots(false);
  char* text = NULL;
  bool ok = tpr_status_is_ok(tpr_graph_emit_stablehlo(g, &text, NULL));
  *has_barrier = ok && strstr(text, "stablehlo.optimization_barrier") != NULL;
  tpr_free(text);
  const float* args[2] = {x, w};
  ok = ok && tpr_status_is_ok(run_f32(c, g, 2, args, NULL, got, m * n));
  tpr_graph_free(g);
  for (int64_t i = 0; ok && i < m * n; i++) ok = got[i] == want[i];
  return ok;
}

TPR_TEST(emit_plugin_swapped_transposed_dot_matches_reference) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  bool barrier = false;
  CHECK(swapped_dot_case(c, true, 2, 8, &barrier));
  CHECK(barrier);
  CHECK(swapped_dot_case(c, false, 2, 8, &barrier));
  CHECK(!barrier);
  CHECK(swapped_dot_case(c, true, 8, 8, &barrier));  // m == n: kept as is
  CHECK(!barrier);
  tpr_client_destroy(c);
  // Two transposes give back the stored layout: nothing to swap.
  tpr_graph_set_swap_transposed_dots(true);
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  static const int64_t kT[2] = {1, 0}, kOne = 1, kZero = 0;
  tpr_value_t x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){2, 4}));
  tpr_value_t v = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){4, 8}));
  tpr_value_t vv = tpr_transpose(g, tpr_transpose(g, v, kT), kT);
  tpr_graph_add_result(g, tpr_dot_general(g, x, vv, 0, NULL, NULL, 1, &kOne,
                                          &kZero, TPR_DTYPE_F32));
  tpr_graph_set_swap_transposed_dots(false);
  char* text = NULL;
  CHECK_OK(tpr_graph_emit_stablehlo(g, &text, NULL));
  CHECK(strstr(text, "optimization_barrier") == NULL);
  tpr_free(text);
  tpr_graph_free(g);
}

// An f32 sum over |dims| of a [d0, d1, d2] parameter, built with the
// row-sum policy |on|, gives a C loop's sums (the values are quarters, so
// every order of addition is exact); *is_dot says whether it became a
// product.
static bool row_sum_case(tpr_client_t* c, bool on, const int64_t shape[3],
                         const int64_t* dims, int num_dims, bool* is_dot) {
  int64_t n = shape[0] * shape[1] * shape[2];
  float* x = malloc((size_t)n * sizeof(float));
  float* got = malloc((size_t)n * sizeof(float));
  float* want = calloc((size_t)n, sizeof(float));
  bool ok = x && got && want;
  bool reduced[3] = {false, false, false};
  for (int j = 0; j < num_dims; j++) reduced[dims[j]] = true;
  int64_t out_n = 0;
  for (int64_t i = 0; ok && i < n; i++) {
    x[i] = (float)(i % 13 - 6) * 0.25f;
    int64_t idx[3] = {i / (shape[1] * shape[2]), i / shape[2] % shape[1],
                      i % shape[2]};
    int64_t o = 0;
    for (int d = 0; d < 3; d++)
      if (!reduced[d]) o = o * shape[d] + idx[d];
    want[o] += x[i];
    if (o + 1 > out_n) out_n = o + 1;
  }
  tpr_graph_set_row_sums_as_dots(on);
  tpr_graph_t* g = NULL;
  ok = ok && tpr_status_is_ok(tpr_graph_create(&g));
  if (ok) {
    tpr_value_t v = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 3, shape));
    tpr_graph_add_result(g, tpr_reduce(g, v, TPR_REDUCE_SUM, dims, num_dims));
  }
  tpr_graph_set_row_sums_as_dots(false);
  char* text = NULL;
  ok = ok && tpr_status_is_ok(tpr_graph_emit_stablehlo(g, &text, NULL));
  *is_dot = ok && strstr(text, "stablehlo.dot_general") != NULL;
  tpr_free(text);
  const float* args[1] = {x};
  ok = ok && tpr_status_is_ok(run_f32(c, g, 1, args, NULL, got, out_n));
  for (int64_t i = 0; ok && i < out_n; i++) ok = got[i] == want[i];
  tpr_graph_free(g);
  free(x);
  free(got);
  free(want);
  return ok;
}

TPR_TEST(emit_plugin_row_sums_as_dots_match_reference) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  static const int64_t kRows[3] = {8, 16, 256}, kLast = 2, kLastTwo[2] = {2, 1};
  bool dot = false;
  // Trailing dims of enough elements: a product when on, a reduction when off.
  CHECK(row_sum_case(c, true, kRows, &kLast, 1, &dot));
  CHECK(dot);
  CHECK(row_sum_case(c, false, kRows, &kLast, 1, &dot));
  CHECK(!dot);
  CHECK(row_sum_case(c, true, kRows, kLastTwo, 2, &dot));  // merged first
  CHECK(dot);
  // A leading dim, a middle one, a sum to a scalar, too few elements and
  // rows longer than 4K stay reductions.
  static const int64_t kFirst = 0, kMiddle = 1, kAll[3] = {0, 1, 2};
  CHECK(row_sum_case(c, true, kRows, &kFirst, 1, &dot));
  CHECK(!dot);
  CHECK(row_sum_case(c, true, kRows, &kMiddle, 1, &dot));
  CHECK(!dot);
  CHECK(row_sum_case(c, true, kRows, kAll, 3, &dot));
  CHECK(!dot);
  static const int64_t kSmall[3] = {2, 8, 64}, kLong[3] = {1, 8, 8192};
  CHECK(row_sum_case(c, true, kSmall, &kLast, 1, &dot));
  CHECK(!dot);
  CHECK(row_sum_case(c, true, kLong, &kLast, 1, &dot));
  CHECK(!dot);
  tpr_client_destroy(c);
}

// Draws of |type| and of 64-bit words from one state, on the plugin: result
// 0 the draw, result 1 the words (|words| of them).
static tpr_status_t rng_case(tpr_client_t* c, tpr_type_t type, int64_t words,
                             void* bits, size_t bytes, uint64_t* word_out) {
  tpr_graph_t* g;
  TPR_RETURN_IF_ERROR(tpr_graph_create(&g));
  static const uint64_t kState[2] = {42, 7};
  int64_t two = 2;
  tpr_value_t st = tpr_constant_dense(g, tpr_type_make(TPR_DTYPE_U64, 1, &two), kState);
  tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, &two));
  tpr_value_t b, w, ns;
  tpr_rng_bits(g, st, type, &b, &ns);
  tpr_rng_bits(g, st, tpr_type_make(TPR_DTYPE_U64, 1, &words), &w, &ns);
  tpr_graph_add_result(g, b);
  tpr_graph_add_result(g, w);
  float in[2] = {0, 0};
  tpr_status_t s = fixture_run1(c, g, in, 2, 0, bits, bytes);
  if (tpr_status_is_ok(s))
    s = fixture_run1(c, g, in, 2, 1, word_out, (size_t)words * sizeof(uint64_t));
  tpr_graph_free(g);
  return s;
}

// Narrow draws are the 64-bit words' bytes in memory order, whether the
// minor dim holds whole words or the words are cut to an odd count.
TPR_TEST(emit_plugin_narrow_random_bits_are_word_bytes) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  uint64_t words[4];
  uint32_t u32[8];
  int64_t d24[2] = {2, 4}, d5 = 5, d13 = 13;
  CHECK_OK(rng_case(c, tpr_type_make(TPR_DTYPE_U32, 2, d24), 4, u32, sizeof u32, words));
  CHECK(memcmp(u32, words, sizeof u32) == 0);
  CHECK(words[0] != words[1]);
  uint32_t odd[5];
  CHECK_OK(rng_case(c, tpr_type_make(TPR_DTYPE_U32, 1, &d5), 3, odd, sizeof odd, words));
  CHECK(memcmp(odd, words, sizeof odd) == 0);
  uint8_t u8[13];
  CHECK_OK(rng_case(c, tpr_type_make(TPR_DTYPE_U8, 1, &d13), 2, u8, sizeof u8, words));
  CHECK(memcmp(u8, words, sizeof u8) == 0);
  tpr_client_destroy(c);
}

// m + (g - m) / 2 with m a reshaped parameter aliased to the result: the
// reshape is written once per use (so XLA can update m in place without
// copying it first), and the values are a C loop's.
TPR_TEST(emit_plugin_parameter_views_written_per_use) {
  enum { N = 64 };
  float m[N], gr[N], got[N];
  for (int i = 0; i < N; i++) {
    m[i] = (float)(i % 9) - 4.0f;
    gr[i] = (float)(i % 4) * 0.25f;
  }
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  static const int64_t kFlat[1] = {N}, kSquare[2] = {8, 8};
  tpr_value_t pm = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, kFlat));
  tpr_value_t pg = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, kFlat));
  tpr_value_t vm = tpr_reshape(g, pm, 2, kSquare);
  tpr_value_t vg = tpr_reshape(g, pg, 2, kSquare);  // one use: left alone
  tpr_value_t half = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 0.5),
                                      2, kSquare);
  tpr_value_t step = tpr_binary(g, TPR_BINARY_MUL,
                                tpr_binary(g, TPR_BINARY_SUB, vg, vm), half);
  tpr_value_t r = tpr_binary(g, TPR_BINARY_ADD, vm, step);
  tpr_graph_add_result(g, tpr_reshape(g, r, 1, kFlat));
  tpr_graph_alias(g, 0, 0);
  char* text = NULL;
  CHECK_OK(tpr_graph_emit_stablehlo(g, &text, NULL));
  int m_views = 0, g_views = 0;
  static const char kView[] = "\"stablehlo.reshape\"(";
  for (const char* q = text; (q = strstr(q, kView)); q++) {
    m_views += strncmp(q + strlen(kView), "%arg0)", 6) == 0;
    g_views += strncmp(q + strlen(kView), "%arg1)", 6) == 0;
  }
  CHECK(m_views == 2 && g_views == 1);
  tpr_free(text);
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  const float* args[2] = {m, gr};
  CHECK_OK(run_f32(c, g, 2, args, NULL, got, N));
  for (int i = 0; i < N; i++) CHECK(got[i] == m[i] + (gr[i] - m[i]) * 0.5f);
  tpr_client_destroy(c);
  tpr_graph_free(g);
}

//===--- kernels: StableHLO from elsewhere, called from a graph ------------===//

// A pretty module the way a user writes one: a public entry calling a helper.
static const char kPrettyKernel[] =
    "module @user attributes {mhlo.num_partitions = 1 : i32} {\n"
    "  func.func @main(%x: tensor<4xf32> {mhlo.layout_mode = \"default\"}) "
    "-> (tensor<4xf32> {jax.result_info = \"result\"}) {\n"
    "    %0 = func.call @twice(%x) : (tensor<4xf32>) -> tensor<4xf32>\n"
    "    %1 = stablehlo.exponential %0 : tensor<4xf32>\n"
    "    return %1 : tensor<4xf32>\n"
    "  }\n"
    "  func.func private @twice(%y: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = stablehlo.add %y, %y : tensor<4xf32>\n"
    "    return %0 : tensor<4xf32>\n"
    "  }\n"
    "}\n";

// The same names, another body (generic form, as JAX's MLIR prints it):
// two kernels whose functions are both called main and twice.
static const char kGenericKernel[] =
    "\"func.func\"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, "
    "sym_name = \"main\", sym_visibility = \"public\"}> ({\n"
    "^bb0(%arg0: tensor<4xf32>):\n"
    "  %0 = \"func.call\"(%arg0) <{callee = @twice}> : (tensor<4xf32>) -> tensor<4xf32>\n"
    "  \"func.return\"(%0) : (tensor<4xf32>) -> ()\n"
    "}) : () -> ()\n"
    "\"func.func\"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, "
    "sym_name = \"twice\", sym_visibility = \"private\"}> ({\n"
    "^bb0(%arg0: tensor<4xf32>):\n"
    "  %0 = \"stablehlo.multiply\"(%arg0, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> "
    "tensor<4xf32>\n"
    "  \"func.return\"(%0) : (tensor<4xf32>) -> ()\n"
    "}) : () -> ()\n";

TPR_TEST(kernel_text_is_renamed_and_checked) {
  tpr_type_t t4 = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){4});
  tpr_type_t t5 = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){5});
  tpr_kernel_t* k;
  CHECK_OK(tpr_kernel_create("user::exp2x", kPrettyKernel, strlen(kPrettyKernel), NULL, &t4, 1,
                             &t4, 1, &k));
  const char* text = tpr_kernel_text(k);
  const char* entry = tpr_kernel_entry(k);
  CHECK(entry[0] == 'k' && strstr(entry, "_main") != NULL);
  CHECK(strstr(text, "module") == NULL);  // the wrapper is gone
  CHECK(strstr(text, "func.func private @k") != NULL);
  CHECK(strstr(text, "@twice") == NULL && strstr(text, "_twice(%x)") != NULL);
  // The same text gives the same names; another signature does not.
  tpr_kernel_t* again;
  CHECK_OK(tpr_kernel_create("user::exp2x", kPrettyKernel, strlen(kPrettyKernel), "main",
                             &t4, 1, &t4, 1, &again));
  CHECK(strcmp(tpr_kernel_entry(again), entry) == 0);
  tpr_kernel_release(again);
  tpr_kernel_release(k);

  // Declared types that disagree with the text name the kernel and both types.
  tpr_status_t s = tpr_kernel_create("user::exp2x", kPrettyKernel, strlen(kPrettyKernel), NULL,
                                     &t5, 1, &t4, 1, &k);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK(strstr(tpr_status_message(s), "user::exp2x") != NULL);
  CHECK(strstr(tpr_status_message(s), "tensor<4xf32>") != NULL);
  CHECK(strstr(tpr_status_message(s), "tensor<5xf32>") != NULL);
  tpr_status_free(s);
  s = tpr_kernel_create("g", kGenericKernel, strlen(kGenericKernel), NULL, &t4, 1, &t5, 1, &k);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK(strstr(tpr_status_message(s), "result 0") != NULL);
  tpr_status_free(s);
  s = tpr_kernel_create("g", kGenericKernel, strlen(kGenericKernel), NULL, &t4, 1, NULL, 0, &k);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  tpr_status_free(s);
  s = tpr_kernel_create("g", kGenericKernel, strlen(kGenericKernel), "nope", &t4, 1, &t4, 1, &k);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK(strstr(tpr_status_message(s), "nope") != NULL);
  tpr_status_free(s);
  // Debug locations live in aliases outside the module: refused, with advice.
  static const char kAliased[] = "#loc1 = loc(\"x\")\nmodule {\n}\n";
  s = tpr_kernel_create("a", kAliased, strlen(kAliased), NULL, &t4, 1, &t4, 1, &k);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK(strstr(tpr_status_message(s), "debug info") != NULL);
  tpr_status_free(s);
  s = tpr_kernel_create("e", "", 0, NULL, &t4, 1, &t4, 1, &k);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  tpr_status_free(s);
}

// User text may be anything: every prefix of the samples, and each with one
// byte changed to a bracket, quote or symbol sigil, is accepted or refused
// with a status, never read past its end (ASan).
TPR_TEST(kernel_text_survives_truncation_and_corruption) {
  tpr_type_t t4 = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){4});
  const char* samples[] = {kPrettyKernel, kGenericKernel};
  static const char kBytes[] = "{}()<>\"@%:-";
  int accepted = 0;
  for (int k = 0; k < 2; k++) {
    size_t n = strlen(samples[k]);
    char* copy = (char*)malloc(n);
    for (size_t len = 0; len <= n; len++) {
      for (int b = -1; b < (int)sizeof kBytes - 1; b++) {
        memcpy(copy, samples[k], n);
        if (b >= 0 && len < n) copy[len] = kBytes[b];
        size_t size = b >= 0 ? n : len;
        tpr_kernel_t* kernel = NULL;
        tpr_status_t s = tpr_kernel_create("fuzz", copy, size, NULL, &t4, 1, &t4, 1, &kernel);
        if (tpr_status_is_ok(s)) accepted++;
        tpr_status_free(s);
        tpr_kernel_release(kernel);
      }
    }
    free(copy);
  }
  CHECK(accepted > 0);
}

TPR_TEST(kernel_calls_compile_and_run) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_type_t t4 = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){4});
  tpr_kernel_t *exp2x, *square;
  CHECK_OK(tpr_kernel_create("user::exp2x", kPrettyKernel, strlen(kPrettyKernel), NULL, &t4, 1,
                             &t4, 1, &exp2x));
  CHECK_OK(tpr_kernel_create("user::square", kGenericKernel, strlen(kGenericKernel), NULL,
                             &t4, 1, &t4, 1, &square));
  // y = square(exp2x(x)) + exp2x(x + 1): both kernels define main and twice,
  // and exp2x is called twice.
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, t4);
  tpr_value_t a, b, d;
  tpr_call_kernel(g, exp2x, &x, 1, &a);
  tpr_call_kernel(g, square, &a, 1, &b);
  tpr_value_t x1 = tpr_binary(g, TPR_BINARY_ADD, x,
                              tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 1.0), 1,
                                               (int64_t[]){4}));
  tpr_call_kernel(g, exp2x, &x1, 1, &d);
  tpr_graph_add_result(g, tpr_binary(g, TPR_BINARY_ADD, b, d));
  CHECK_OK(tpr_graph_status(g));
  // Kernels are part of the hash.
  uint64_t h1[2], h2[2];
  tpr_graph_hash(g, h1);
  float xs[4] = {0.0f, 0.5f, -1.0f, 0.25f}, got[4];
  const float* args[1] = {xs};
  CHECK_OK(run_f32(c, g, 1, args, NULL, got, 4));
  for (int i = 0; i < 4; i++) {
    double e = exp(2.0 * xs[i]);
    double want = e * e + exp(2.0 * (xs[i] + 1.0));
    CHECK(fabs(got[i] - want) <= 1e-5 * fabs(want));
  }
  // The same graph with the other kernel in the first call hashes apart.
  tpr_graph_reset(g);
  x = tpr_parameter(g, t4);
  tpr_call_kernel(g, square, &x, 1, &a);
  tpr_call_kernel(g, square, &a, 1, &b);
  x1 = tpr_binary(g, TPR_BINARY_ADD, x,
                  tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 1.0), 1,
                                   (int64_t[]){4}));
  tpr_call_kernel(g, exp2x, &x1, 1, &d);
  tpr_graph_add_result(g, tpr_binary(g, TPR_BINARY_ADD, b, d));
  tpr_graph_hash(g, h2);
  CHECK(h1[0] != h2[0] || h1[1] != h2[1]);
  // A wrong argument type is a graph error naming the kernel.
  tpr_graph_reset(g);
  tpr_value_t wide = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){5}));
  tpr_call_kernel(g, exp2x, &wide, 1, &a);
  CHECK(a == TPR_VALUE_NONE);
  tpr_status_t s = tpr_graph_status(g);
  CHECK(strstr(tpr_status_message(s), "user::exp2x") != NULL);
  tpr_status_free(s);
  // Rolling back past a call drops its reference; freeing drops the rest.
  tpr_graph_reset(g);
  x = tpr_parameter(g, t4);
  tpr_graph_mark_t m = tpr_graph_get_mark(g);
  tpr_call_kernel(g, square, &x, 1, &a);
  tpr_graph_rollback(g, &m);
  tpr_graph_free(g);
  tpr_kernel_release(exp2x);
  tpr_kernel_release(square);
  tpr_client_destroy(c);
}
