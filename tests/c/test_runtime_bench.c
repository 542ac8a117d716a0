// Latency figures of the runtime on the plugin under test. Runs a short
// version in every test run (a sanity bound); for real numbers run it alone,
// in a fresh process, so plugin loading is measured too:
//
//   TPR_RUNTIME_BENCH=1000 TORCH_TPU_PJRT_PLUGIN=... build/tpr_tests
//     runtime_bench
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <stdlib.h>

#include "runtime/internal.h"
#include "test_runtime_fixture.h"

static int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

static double median_us(int64_t* ns, int n) {
  qsort(ns, (size_t)n, sizeof *ns, cmp_i64);
  return (double)ns[n / 2] / 1e3;
}

TPR_TEST(runtime_bench_latency) {
  const char* env = getenv("TPR_RUNTIME_BENCH");
  int iters = env ? atoi(env) : 50;
  if (iters < 10) iters = 10;
  int64_t* ns = (int64_t*)calloc((size_t)iters, sizeof *ns);
  CHECK(ns != NULL);

  int64_t t0 = tpr_now_ns();
  tpr_plugin_t* plugin;
  tpr_status_t s = fixture_plugin(&plugin);
  int64_t t_load = tpr_now_ns() - t0;
  if (!tpr_status_is_ok(s)) free(ns);
  CHECK_OK(s);
  tpr_client_options_t options;
  tpr_client_options_initialize(&options);
  options.cpu_device_count = 1;
  tpr_client_t* c;
  t0 = tpr_now_ns();
  s = tpr_client_create(plugin, &options, &c);
  int64_t t_client = tpr_now_ns() - t0;
  if (!tpr_status_is_ok(s)) free(ns);
  CHECK_OK(s);

  tpr_executable_t* e;
  t0 = tpr_now_ns();
  s = fixture_compile(c, ADD_F32_4, &e);
  int64_t t_compile = tpr_now_ns() - t0;
  CHECK_OK(s);
  // A second, different module: compile cost once XLA is warmed up.
  tpr_executable_t* e2;
  t0 = tpr_now_ns();
  s = fixture_compile(
      c,
      "module @mul { func.func public @main(%arg0: tensor<4xf32>, %arg1: "
      "tensor<4xf32>) -> (tensor<4xf32>) {\n"
      "  %0 = \"stablehlo.multiply\"(%arg0, %arg1) : (tensor<4xf32>, "
      "tensor<4xf32>) -> tensor<4xf32>\n"
      "  \"func.return\"(%0) : (tensor<4xf32>) -> ()\n} }\n",
      &e2);
  int64_t t_compile2 = tpr_now_ns() - t0;
  CHECK_OK(s);
  void* blob;
  size_t blob_size;
  CHECK_OK(tpr_executable_serialize(e2, &blob, &blob_size));
  tpr_executable_release(e2);
  t0 = tpr_now_ns();
  s = tpr_executable_deserialize(c, blob, blob_size, &e2);
  int64_t t_deserialize = tpr_now_ns() - t0;
  tpr_free(blob);
  CHECK_OK(s);
  tpr_executable_release(e2);

  float x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8}, r[4];
  tpr_buffer_t *bx, *by, *out;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  CHECK_OK(fixture_f32(c, 0, y, 4, &by));
  tpr_buffer_t* args[2] = {bx, by};
  for (int i = 0; i < 20; i++) {  // warm up
    CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &out, true));
    tpr_buffer_release(out);
  }

  // 1. Execute only, asynchronous, then await the output.
  for (int i = 0; i < iters; i++) {
    t0 = tpr_now_ns();
    s = tpr_executable_execute(e, 0, args, 2, NULL, &out, false);
    if (tpr_status_is_ok(s)) s = tpr_buffer_await(out);
    ns[i] = tpr_now_ns() - t0;
    tpr_buffer_release(out);
    CHECK_OK(s);
  }
  double us_exec = median_us(ns, iters);
  // 2. Execute with wait=true (device_complete_event awaited).
  for (int i = 0; i < iters; i++) {
    t0 = tpr_now_ns();
    s = tpr_executable_execute(e, 0, args, 2, NULL, &out, true);
    ns[i] = tpr_now_ns() - t0;
    tpr_buffer_release(out);
    CHECK_OK(s);
  }
  double us_exec_wait = median_us(ns, iters);
  // 3. Execute only, no wait: the enqueue cost.
  for (int i = 0; i < iters; i++) {
    t0 = tpr_now_ns();
    s = tpr_executable_execute(e, 0, args, 2, NULL, &out, false);
    ns[i] = tpr_now_ns() - t0;
    tpr_status_free(tpr_buffer_await(out));
    tpr_buffer_release(out);
    CHECK_OK(s);
  }
  double us_enqueue = median_us(ns, iters);
  // 4. Host -> device -> execute -> host, fresh buffers each time.
  for (int i = 0; i < iters; i++) {
    tpr_buffer_t *hx = NULL, *hy = NULL, *ho = NULL;
    t0 = tpr_now_ns();
    s = fixture_f32(c, 0, x, 4, &hx);
    if (tpr_status_is_ok(s)) s = fixture_f32(c, 0, y, 4, &hy);
    tpr_buffer_t* hargs[2] = {hx, hy};
    if (tpr_status_is_ok(s))
      s = tpr_executable_execute(e, 0, hargs, 2, NULL, &ho, false);
    if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(ho, r, sizeof r);
    ns[i] = tpr_now_ns() - t0;
    tpr_buffer_release(hx);
    tpr_buffer_release(hy);
    tpr_buffer_release(ho);
    CHECK_OK(s);
    CHECK(r[2] == 10);
  }
  double us_full = median_us(ns, iters);
  // 5. One host -> device and one device -> host transfer of f32[4].
  for (int i = 0; i < iters; i++) {
    tpr_buffer_t* hx = NULL;
    t0 = tpr_now_ns();
    s = fixture_f32(c, 0, x, 4, &hx);
    ns[i] = tpr_now_ns() - t0;
    tpr_buffer_release(hx);
    CHECK_OK(s);
  }
  double us_h2d = median_us(ns, iters);
  for (int i = 0; i < iters; i++) {
    t0 = tpr_now_ns();
    s = tpr_buffer_to_host(bx, r, sizeof r);
    ns[i] = tpr_now_ns() - t0;
    CHECK_OK(s);
  }
  double us_d2h = median_us(ns, iters);

  tpr_plugin_info_t info;
  tpr_plugin_get_info(plugin, &info);
  printf("  bench PJRT 0.%d (%s), medians of %d:\n"
         "    dlopen+init %.1f ms (0 if already loaded), client create "
         "%.1f ms\n"
         "    compile add f32[4] %.1f ms (first), %.1f ms (second module); "
         "deserialize %.2f ms\n"
         "    execute+await %.1f us, execute(wait) %.1f us, enqueue only "
         "%.1f us\n"
         "    h2d+h2d+execute+d2h %.1f us; h2d %.1f us; d2h %.1f us\n",
         info.api_minor, info.path, iters, t_load / 1e6, t_client / 1e6,
         t_compile / 1e6, t_compile2 / 1e6, t_deserialize / 1e6, us_exec,
         us_exec_wait, us_enqueue, us_full, us_h2d, us_d2h);
  free(ns);
  // A sanity bound, far above any healthy figure.
  CHECK(us_full < 100000);
  tpr_buffer_release(bx);
  tpr_buffer_release(by);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}
