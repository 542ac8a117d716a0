// The device transport's collective programs on one CPU client with 2
// devices, where XLA:CPU runs them across its devices: each builder's
// StableHLO, compiled for 2 replicas and launched on both at once.
#include <math.h>

#include "test_runtime_fixture.h"

static const int64_t kPair[2] = {0, 1};
static const tpr_replica_groups_t kBoth = {1, 2, kPair};

typedef tpr_value_t (*build_fn)(tpr_graph_t* g, tpr_value_t x);

// Runs build(x) on replica 0 with x = in0 and replica 1 with x = in1 (n
// floats each); each replica's result (out_n floats) lands in out[r].
static tpr_status_t run2(build_fn build, const float* in0, const float* in1, int64_t n,
                         float* out0, float* out1, int64_t out_n) {
  tpr_client_t* c = NULL;
  tpr_graph_t* g = NULL;
  tpr_executable_t* exe = NULL;
  tpr_buffer_t* args[2] = {NULL, NULL};
  tpr_buffer_t* outs[2] = {NULL, NULL};
  char* text = NULL;
  size_t len = 0;
  tpr_status_t s = fixture_client(2, &c);
  if (tpr_status_is_ok(s)) s = tpr_graph_create(&g);
  if (tpr_status_is_ok(s)) {
    tpr_value_t x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, &n));
    tpr_graph_add_result(g, build(g, x));
    s = tpr_graph_emit_stablehlo(g, &text, &len);
  }
  if (tpr_status_is_ok(s)) s = tpr_executable_compile_replicated(c, text, len, 2, &exe);
  if (tpr_status_is_ok(s)) s = fixture_f32(c, 0, in0, n, &args[0]);
  if (tpr_status_is_ok(s)) s = fixture_f32(c, 1, in1, n, &args[1]);
  if (tpr_status_is_ok(s)) s = tpr_executable_execute_replicated(exe, args, 1, outs);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(outs[0], out0, (size_t)out_n * 4);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(outs[1], out1, (size_t)out_n * 4);
  for (int r = 0; r < 2; r++) {
    tpr_buffer_release(args[r]);
    tpr_buffer_release(outs[r]);
  }
  tpr_free(text);
  tpr_executable_release(exe);
  tpr_graph_free(g);
  tpr_client_destroy(c);
  return s;
}

static bool equal(const float* a, const float* b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i] != b[i]) return false;
  return true;
}

static const float kIn0[4] = {1, 2, 3, 4}, kIn1[4] = {10, 20, 30, 40};

static tpr_value_t sum_all(tpr_graph_t* g, tpr_value_t x) {
  return tpr_all_reduce(g, x, TPR_REDUCE_SUM, &kBoth);
}
static tpr_value_t max_all(tpr_graph_t* g, tpr_value_t x) {
  return tpr_all_reduce(g, x, TPR_REDUCE_MAX, &kBoth);
}
static tpr_value_t gather0(tpr_graph_t* g, tpr_value_t x) {
  return tpr_all_gather(g, x, 0, &kBoth);
}
static tpr_value_t scatter0(tpr_graph_t* g, tpr_value_t x) {
  return tpr_reduce_scatter(g, x, TPR_REDUCE_SUM, 0, &kBoth);
}
static tpr_value_t a2a(tpr_graph_t* g, tpr_value_t x) {
  return tpr_all_to_all(g, x, 0, 0, &kBoth);
}
static tpr_value_t swap(tpr_graph_t* g, tpr_value_t x) {
  static const int64_t pairs[4] = {0, 1, 1, 0};
  return tpr_collective_permute(g, x, 2, pairs);
}
static tpr_value_t shift(tpr_graph_t* g, tpr_value_t x) {  // only 0 -> 1
  static const int64_t pairs[2] = {0, 1};
  return tpr_collective_permute(g, x, 1, pairs);
}
// A collective inside ordinary computation: all_reduce(2x) + 1.
static tpr_value_t fused(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t two = tpr_broadcast_in_dim(g, tpr_constant_f64(g, TPR_DTYPE_F32, 2), 1,
                                         tpr_value_type(g, x)->dims, NULL);
  tpr_value_t y = tpr_all_reduce(g, tpr_binary(g, TPR_BINARY_MUL, x, two), TPR_REDUCE_SUM, &kBoth);
  tpr_value_t one = tpr_broadcast_in_dim(g, tpr_constant_f64(g, TPR_DTYPE_F32, 1), 1,
                                         tpr_value_type(g, x)->dims, NULL);
  return tpr_binary(g, TPR_BINARY_ADD, y, one);
}

TPR_TEST(collective_all_reduce_on_two_devices) {
  float o0[4], o1[4];
  CHECK_OK(run2(sum_all, kIn0, kIn1, 4, o0, o1, 4));
  const float want[4] = {11, 22, 33, 44};
  CHECK(equal(o0, want, 4) && equal(o1, want, 4));
  CHECK_OK(run2(max_all, kIn0, (const float[]){0, 5, -1, 9}, 4, o0, o1, 4));
  const float want_max[4] = {1, 5, 3, 9};
  CHECK(equal(o0, want_max, 4) && equal(o1, want_max, 4));
  CHECK_OK(run2(fused, kIn0, kIn1, 4, o0, o1, 4));
  const float want_fused[4] = {23, 45, 67, 89};
  CHECK(equal(o0, want_fused, 4) && equal(o1, want_fused, 4));
}

TPR_TEST(collective_all_gather_reduce_scatter_all_to_all) {
  float g0[8], g1[8];
  CHECK_OK(run2(gather0, kIn0, kIn1, 4, g0, g1, 8));
  const float want_g[8] = {1, 2, 3, 4, 10, 20, 30, 40};
  CHECK(equal(g0, want_g, 8) && equal(g1, want_g, 8));
  float r0[2], r1[2];
  CHECK_OK(run2(scatter0, kIn0, kIn1, 4, r0, r1, 2));
  CHECK(equal(r0, (const float[]){11, 22}, 2) && equal(r1, (const float[]){33, 44}, 2));
  float a0[4], a1[4];
  CHECK_OK(run2(a2a, kIn0, kIn1, 4, a0, a1, 4));
  CHECK(equal(a0, (const float[]){1, 2, 10, 20}, 4) && equal(a1, (const float[]){3, 4, 30, 40}, 4));
}

TPR_TEST(collective_permute_on_two_devices) {
  float p0[4], p1[4];
  CHECK_OK(run2(swap, kIn0, kIn1, 4, p0, p1, 4));
  CHECK(equal(p0, kIn1, 4) && equal(p1, kIn0, 4));
  CHECK_OK(run2(shift, kIn0, kIn1, 4, p0, p1, 4));  // nobody sends to 0: zeros
  CHECK(equal(p0, (const float[]){0, 0, 0, 0}, 4) && equal(p1, kIn0, 4));
}

static const int64_t kTwice[2] = {0, 0};
static tpr_value_t scatter_odd(tpr_graph_t* g, tpr_value_t x) {  // 3 rows over 2
  return tpr_reduce_scatter(g, x, TPR_REDUCE_SUM, 0, &kBoth);
}
static tpr_value_t same_replica_twice(tpr_graph_t* g, tpr_value_t x) {
  return tpr_all_reduce(g, x, TPR_REDUCE_SUM, &(tpr_replica_groups_t){1, 2, kTwice});
}
static tpr_value_t and_of_floats(tpr_graph_t* g, tpr_value_t x) {
  return tpr_all_reduce(g, x, TPR_REDUCE_AND, &kBoth);
}
static tpr_value_t gather_dim1_of_1d(tpr_graph_t* g, tpr_value_t x) {
  return tpr_all_gather(g, x, 1, &kBoth);
}
static tpr_value_t permute_twice_to(tpr_graph_t* g, tpr_value_t x) {
  static const int64_t pairs[4] = {0, 1, 1, 1};
  return tpr_collective_permute(g, x, 2, pairs);
}

TPR_TEST(collective_builders_reject_bad_groups) {
  build_fn bad[] = {scatter_odd, same_replica_twice, and_of_floats, gather_dim1_of_1d,
                    permute_twice_to};
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  int64_t n = 3;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tpr_graph_reset(g);
    tpr_value_t x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, &n));
    CHECK(bad[i](g, x) == TPR_VALUE_NONE);
    CHECK_STATUS(tpr_graph_status(g), TPR_INVALID_ARGUMENT);
  }
  tpr_graph_free(g);
}

TPR_TEST(collective_programs_need_the_replicated_launch) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(2, &c));
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  int64_t n = 4;
  tpr_value_t x = tpr_parameter(g, tpr_type_make(TPR_DTYPE_F32, 1, &n));
  tpr_graph_add_result(g, sum_all(g, x));
  char* text;
  size_t len;
  CHECK_OK(tpr_graph_emit_stablehlo(g, &text, &len));
  CHECK(strstr(text, "mhlo.num_replicas = 2 : i32") != NULL);
  tpr_executable_t* exe = NULL;
  CHECK_STATUS(tpr_executable_compile_replicated(c, text, len, 3, &exe), TPR_INVALID_ARGUMENT);
  CHECK_OK(tpr_executable_compile_replicated(c, text, len, 2, &exe));
  tpr_buffer_t* b;
  CHECK_OK(fixture_f32(c, 0, kIn0, 4, &b));
  tpr_buffer_t* out = NULL;
  // one device alone would wait in XLA's rendezvous for the other: refused
  CHECK_STATUS(tpr_executable_execute(exe, 0, &b, 1, NULL, &out, true), TPR_INVALID_ARGUMENT);
  // both replicas' arguments on device 0: refused before the launch
  tpr_buffer_t* both[2] = {b, b};
  tpr_buffer_t* outs[2];
  CHECK_STATUS(tpr_executable_execute_replicated(exe, both, 1, outs), TPR_INVALID_ARGUMENT);
  tpr_buffer_release(b);
  tpr_executable_release(exe);
  tpr_free(text);
  tpr_graph_free(g);
  tpr_client_destroy(c);
}
