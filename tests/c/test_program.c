// Whole-graph programs: build, compile through the caches, run on
// storages, write mutated inputs back by donation.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: mkdtemp
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eager/internal.h"
#include "harness.h"
#include "tpr/program.h"

static tpr_status_t init_eager(void) {
  const char* path = tpr_test_plugin_path();
  if (!path) return TPR_ERR(FAILED_PRECONDITION, "TORCH_TPU_PJRT_PLUGIN is not set");
  tpr_eager_options_t o = {0};
  o.plugin_spec = path;
  return tpr_eager_init(&o);
}

static tpr_tensor_ref_t dense_ref(tpr_storage_t* s, int64_t rows, int64_t cols) {
  tpr_tensor_ref_t r = {s, TPR_DTYPE_F32, 2, {rows, cols}, {cols, 1}, 0};
  return r;
}

// y = a + b (fresh), a <- 2a (in place), on 2x3 f32 inputs.
static tpr_status_t build(tpr_program_t** out) {
  tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){2, 3});
  tpr_type_t types[2] = {t, t};
  tpr_value_t in[2];
  TPR_RETURN_IF_ERROR(tpr_program_create(types, 2, out, in));
  tpr_graph_t* g = tpr_program_graph(*out);
  tpr_value_t y = tpr_binary(g, TPR_BINARY_ADD, in[0], in[1]);
  tpr_value_t two = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 2.0), 2, t.dims);
  TPR_RETURN_IF_ERROR(tpr_program_add_output(*out, y, -1));
  return tpr_program_add_output(*out, tpr_binary(g, TPR_BINARY_MUL, in[0], two), 0);
}

TPR_TEST(program_runs_and_updates_inputs_in_place) {
  CHECK_OK(init_eager());
  // The context and the cached executable live for the process.
  tpr_program_t* p = NULL;
  CHECK_OK(build(&p));
  CHECK_OK(tpr_program_compile(p, "test_program", NULL));
  tpr_program_free(p);
  tpr_test_keep_allocations();
  tpr_program_reset_stats();

  CHECK_OK(build(&p));
  CHECK(tpr_program_num_outputs(p) == 2);
  bool compiled = true;
  CHECK_OK(tpr_program_compile(p, "test_program", &compiled));
  CHECK(!compiled);  // the same graph reuses the cached executable

  float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {10, 20, 30, 40, 50, 60}, got[6];
  tpr_storage_t *a, *b, *y;
  CHECK_OK(tpr_storage_create(0, sizeof av, &a));
  CHECK_OK(tpr_storage_create(0, sizeof bv, &b));
  CHECK_OK(tpr_storage_create(0, sizeof got, &y));
  tpr_tensor_ref_t ar = dense_ref(a, 2, 3), br = dense_ref(b, 2, 3), yr = dense_ref(y, 2, 3);
  CHECK(!tpr_program_input_ok(p, 0, &ar));  // never written: no buffer yet
  CHECK_OK(tpr_tensor_write_host(&ar, av, sizeof av));
  CHECK_OK(tpr_tensor_write_host(&br, bv, sizeof bv));
  CHECK(tpr_program_input_ok(p, 0, &ar) && tpr_program_input_ok(p, 1, &br));

  tpr_storage_t* ins[2] = {a, b};
  tpr_storage_t* outs[1] = {y};
  for (int step = 1; step <= 2; step++) {
    CHECK_OK(tpr_program_run(p, 0, ins, outs));
    CHECK_OK(tpr_tensor_read_host(&yr, got, sizeof got));
    // y = a_before + b; a doubles every run.
    float scale = (float)(1 << (step - 1));
    for (int i = 0; i < 6; i++) CHECK(got[i] == av[i] * scale + bv[i]);
    CHECK_OK(tpr_tensor_read_host(&ar, got, sizeof got));
    for (int i = 0; i < 6; i++) CHECK(got[i] == av[i] * 2 * scale);
  }
  CHECK_OK(tpr_eager_synchronize(0));  // donated buffers in the queue are fine

  // The same storage as both inputs: no donation, still correct.
  tpr_storage_t* same[2] = {a, a};
  CHECK_OK(tpr_program_run(p, 0, same, outs));
  CHECK_OK(tpr_tensor_read_host(&yr, got, sizeof got));
  for (int i = 0; i < 6; i++) CHECK(got[i] == av[i] * 8);
  CHECK_OK(tpr_tensor_read_host(&ar, got, sizeof got));
  for (int i = 0; i < 6; i++) CHECK(got[i] == av[i] * 8);

  tpr_program_stats_t st;
  tpr_program_get_stats(&st);
  CHECK(st.runs == 3 && st.donated_buffers == 2);

  // A window that is not its whole storage is refused, not misread.
  tpr_storage_t* big;
  CHECK_OK(tpr_storage_create(0, 2 * sizeof av, &big));
  tpr_tensor_ref_t bigr = {big, TPR_DTYPE_F32, 1, {12}, {1}, 0};
  float twelve[12] = {0};
  CHECK_OK(tpr_tensor_write_host(&bigr, twelve, sizeof twelve));
  tpr_tensor_ref_t part = dense_ref(big, 2, 3);
  CHECK(!tpr_program_input_ok(p, 0, &part));
  tpr_storage_t* bad[2] = {big, b};
  CHECK_STATUS(tpr_program_run(p, 0, bad, outs), TPR_INVALID_ARGUMENT);
  CHECK_OK(tpr_eager_synchronize(0));  // releases the queued results

  tpr_storage_release(big);
  tpr_storage_release(a);
  tpr_storage_release(b);
  tpr_storage_release(y);
  tpr_program_free(p);
}

// y = a * k: a graph of its own per |k|.
static tpr_status_t build_scale(double k, tpr_program_t** out) {
  tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){4});
  tpr_value_t in;
  TPR_RETURN_IF_ERROR(tpr_program_create(&t, 1, out, &in));
  tpr_graph_t* g = tpr_program_graph(*out);
  tpr_value_t kv = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, k), 1, t.dims);
  return tpr_program_add_output(*out, tpr_binary(g, TPR_BINARY_MUL, in, kv), -1);
}

// build_scale's float32 [4] values: a storage holding |v| (NULL: none yet)
// and a read of one.
static tpr_tensor_ref_t vec4_ref(tpr_storage_t* s) {
  return (tpr_tensor_ref_t){s, TPR_DTYPE_F32, 1, {4}, {1}, 0};
}

static tpr_status_t vec4(const float* v, tpr_storage_t** out) {
  TPR_RETURN_IF_ERROR(tpr_storage_create(0, 4 * sizeof(float), out));
  tpr_tensor_ref_t r = vec4_ref(*out);
  return v ? tpr_tensor_write_host(&r, v, 4 * sizeof(float)) : tpr_ok_status();
}

static tpr_status_t read_vec4(tpr_storage_t* s, float* out) {
  tpr_tensor_ref_t r = vec4_ref(s);
  return tpr_tensor_read_host(&r, out, 4 * sizeof(float));
}

// Runs |p| (y = a * k) on {1, 2, -3, 4} and checks the values; the run is
// issued at once, before any wait for code still loading or compiling.
static void check_scale_run(tpr_program_t* p, float k, int* tpr_failed_) {
  float av[4] = {1, 2, -3, 4}, got[4];
  tpr_storage_t *a = NULL, *y = NULL;
  CHECK_OK(vec4(av, &a));
  CHECK_OK(vec4(NULL, &y));
  tpr_storage_t* ins[1] = {a};
  tpr_storage_t* outs[1] = {y};
  CHECK_OK(tpr_program_run(p, 0, ins, outs));
  CHECK_OK(read_vec4(y, got));
  for (int i = 0; i < 4; i++) CHECK(got[i] == av[i] * k);
  CHECK_OK(tpr_eager_synchronize(0));
  tpr_storage_release(a);
  tpr_storage_release(y);
}

TPR_TEST(program_compiles_in_the_background) {
  CHECK_OK(init_eager());
  tpr_program_reset_stats();
  tpr_program_t *p, *q, *r;
  CHECK_OK(build_scale(3.25, &p));
  CHECK_OK(build_scale(-1.5, &q));
  CHECK_OK(tpr_program_compile_start(p, "scale_a"));
  CHECK_OK(tpr_program_compile_start(q, "scale_b"));  // both compile at once
  CHECK_OK(tpr_program_compile_start(p, "scale_a"));  // started already: nothing
  bool compiled = false;
  CHECK_OK(tpr_program_compile(p, "scale_a", &compiled));
  CHECK(compiled);
  CHECK_OK(tpr_program_compile(q, "scale_b", &compiled));
  CHECK(compiled);
  check_scale_run(q, -1.5f, tpr_failed_);
  if (*tpr_failed_) return;
  tpr_program_free(p);
  tpr_program_free(q);
  tpr_test_keep_allocations();  // the executable cache lives for the process
  // The executable went to the cache: the same graph again compiles nothing.
  CHECK_OK(build_scale(3.25, &r));
  CHECK_OK(tpr_program_compile_start(r, "scale_a"));
  CHECK_OK(tpr_program_compile(r, "scale_a", &compiled));
  CHECK(!compiled);
  tpr_program_stats_t st;
  tpr_program_get_stats(&st);
  CHECK(st.programs_compiled == 2 && st.programs_cached == 1);
  tpr_program_free(r);
  // Freed while its compile runs: the compile is awaited and dropped.
  CHECK_OK(build_scale(7.75, &r));
  CHECK_OK(tpr_program_compile_start(r, "scale_c"));
  tpr_program_free(r);
}

// Runs issued while the background compile is still going: the caller
// does not wait; the launches wait for the code, give the right values,
// and the compile thread keeps the executable in the caches itself.
TPR_TEST(program_runs_before_its_background_compile_ends) {
  CHECK_OK(init_eager());
  tpr_program_reset_stats();
  tpr_program_t *p, *r;
  CHECK_OK(build_scale(2.5, &p));
  CHECK_OK(tpr_program_compile_start(p, "scale_pending"));
  float av[4] = {1, 2, -3, 4}, got[4];
  tpr_storage_t *a, *y, *z;
  CHECK_OK(vec4(av, &a));
  CHECK_OK(vec4(NULL, &y));
  CHECK_OK(vec4(NULL, &z));
  tpr_storage_t* ins[1] = {a};
  tpr_storage_t* outs[1] = {y};
  CHECK_OK(tpr_program_run(p, 0, ins, outs));
  tpr_storage_t* ins2[1] = {y};  // reads the first run's output
  tpr_storage_t* outs2[1] = {z};
  CHECK_OK(tpr_program_run(p, 0, ins2, outs2));
  CHECK_OK(read_vec4(z, got));
  for (int i = 0; i < 4; i++) CHECK(got[i] == av[i] * 2.5f * 2.5f);
  bool compiled = false;
  CHECK_OK(tpr_program_compile(p, "scale_pending", &compiled));
  CHECK(compiled);
  CHECK_OK(tpr_program_run(p, 0, ins, outs));  // the program's own executable now
  CHECK_OK(tpr_eager_synchronize(0));
  tpr_storage_release(a);
  tpr_storage_release(y);
  tpr_storage_release(z);
  tpr_program_free(p);
  tpr_test_keep_allocations();  // the executable cache lives for the process
  CHECK_OK(build_scale(2.5, &r));
  CHECK_OK(tpr_program_compile(r, "scale_pending", &compiled));
  CHECK(!compiled);  // kept in the cache by the compile thread
  tpr_program_stats_t st;
  tpr_program_get_stats(&st);
  CHECK(st.programs_compiled == 1 && st.programs_cached == 1);
  tpr_runtime_stats_t rs;
  tpr_runtime_get_stats(&rs);
  CHECK(rs.background_compiles >= 1 && rs.background_compile_seconds > 0);
  tpr_program_free(r);
}

// The entry files of the disk cache rooted at |root|, one level below it.
static int overwrite_entries(const char* root, const char* with) {
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "for f in %s/*/*.xla; do printf '%%s' '%s' > \"$f\"; done", root, with);
  return system(cmd);
}

// A program whose executable is on disk loads it on a thread of its own:
// runs go ahead before it is there; a damaged entry is compiled there
// instead (and written again); without an entry nothing starts.
TPR_TEST(program_loads_from_the_disk_cache_in_the_background) {
  CHECK_OK(init_eager());
  char root[] = "/tmp/tpr_test_load_XXXXXX";
  CHECK(mkdtemp(root) != NULL);
  tpr_disk_cache_configure(root, 1 << 30);
  tpr_disk_cache_reset_stats();
  tpr_program_reset_stats();
  tpr_program_t* p = NULL;
  bool started = true, compiled = false;
  CHECK_OK(build_scale(5.5, &p));
  CHECK_OK(tpr_program_load_start(p, "scale_disk", &started));
  CHECK(!started);  // in no cache: only a compile makes it
  CHECK_OK(tpr_program_compile(p, "scale_disk", &compiled));
  CHECK(compiled);
  tpr_program_free(p);
  CHECK_OK(tpr_eager_trim());  // memory cache emptied: the disk holds it
  tpr_test_keep_allocations();

  CHECK_OK(build_scale(5.5, &p));
  CHECK_OK(tpr_program_load_start(p, "scale_disk", &started));
  CHECK(started);
  check_scale_run(p, 5.5f, tpr_failed_);
  if (*tpr_failed_) return;
  CHECK_OK(tpr_program_compile(p, "scale_disk", &compiled));
  CHECK(!compiled);
  tpr_disk_cache_stats_t ds;
  tpr_disk_cache_get_stats(&ds);
  CHECK(ds.hits == 1 && ds.corrupt == 0 && ds.writes == 1);
  tpr_program_free(p);
  CHECK_OK(tpr_eager_trim());

  CHECK(overwrite_entries(root, "not an executable") == 0);
  CHECK_OK(build_scale(5.5, &p));
  CHECK_OK(tpr_program_load_start(p, "scale_disk", &started));
  CHECK(started);  // the entry is there; its checks run on the thread
  check_scale_run(p, 5.5f, tpr_failed_);
  if (*tpr_failed_) return;
  CHECK_OK(tpr_program_compile(p, "scale_disk", &compiled));
  CHECK(compiled);
  tpr_disk_cache_get_stats(&ds);
  CHECK(ds.corrupt == 1 && ds.writes == 2);  // deleted, compiled, written again
  tpr_program_free(p);
  CHECK_OK(tpr_eager_trim());

  CHECK_OK(build_scale(5.5, &p));  // the rewritten entry loads
  CHECK_OK(tpr_program_load_start(p, "scale_disk", &started));
  CHECK(started);
  CHECK_OK(tpr_program_compile(p, "scale_disk", &compiled));
  CHECK(!compiled);
  check_scale_run(p, 5.5f, tpr_failed_);
  if (*tpr_failed_) return;
  tpr_program_free(p);
  tpr_program_stats_t st;
  tpr_program_get_stats(&st);
  CHECK(st.programs_compiled == 2 && st.programs_cached == 2);

  tpr_disk_cache_configure("", 0);  // off: nothing on disk to start from
  CHECK_OK(tpr_eager_trim());
  CHECK_OK(build_scale(5.5, &p));
  CHECK_OK(tpr_program_load_start(p, "scale_disk", &started));
  CHECK(!started);
  tpr_program_free(p);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  CHECK(system(cmd) == 0);
}

// y = x * 3 on |n| f32 values, x and y dense vectors.
static tpr_status_t build_big_scale(int64_t n, tpr_program_t** out) {
  tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){n});
  tpr_value_t in;
  TPR_RETURN_IF_ERROR(tpr_program_create(&t, 1, out, &in));
  tpr_graph_t* g = tpr_program_graph(*out);
  tpr_value_t k = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 3.0), 1, t.dims);
  return tpr_program_add_output(*out, tpr_binary(g, TPR_BINARY_MUL, in, k), -1);
}

// The bound on results in flight (64 MiB) counts only results nothing else
// holds: launches whose results are all kept run ahead without waiting;
// launches whose results replace each other wait once those pass it. The
// decision is the bytes', so it is counted; the pause after each launch
// lets the launch thread issue it (a result of a launch still queued there
// has no memory yet, and counts as held).
TPR_TEST(program_run_ahead_waits_only_for_replaced_results) {
  CHECK_OK(init_eager());
  const int64_t n = 4 << 20;  // 16 MiB a result
  const int runs = 8;         // 128 MiB in flight without a wait
  float* host = malloc((size_t)n * sizeof(float));
  CHECK(host != NULL);
  // Pass 0 runs it all once, unchecked: what it leaves (the executable
  // cache, the launch thread's lists of buffers to free) lives for the
  // process. Pass 1 checks.
  for (int pass = 0; pass < 2; pass++) {
    int count = pass ? runs : 1;
    tpr_program_t* p = NULL;
    CHECK_OK(build_big_scale(n, &p));
    CHECK_OK(tpr_program_compile(p, "big_scale", NULL));
    tpr_storage_t* x = NULL;
    tpr_storage_t* ys[8] = {NULL};
    for (int64_t i = 0; i < n; i++) host[i] = 1.0f;
    CHECK_OK(tpr_storage_create(0, (size_t)n * 4, &x));
    tpr_tensor_ref_t xr = {x, TPR_DTYPE_F32, 1, {n}, {1}, 0};
    CHECK_OK(tpr_tensor_write_host(&xr, host, (size_t)n * sizeof(float)));
    for (int i = 0; i < count; i++) CHECK_OK(tpr_storage_create(0, (size_t)n * 4, &ys[i]));
    tpr_storage_t* ins[1] = {x};
    CHECK_OK(tpr_eager_synchronize(0));
    int64_t before = tpr_pending_wait_count();
    for (int i = 0; i < count; i++) {  // every result kept
      tpr_storage_t* outs[1] = {ys[i]};
      CHECK_OK(tpr_program_run(p, 0, ins, outs));
    }
    CHECK(tpr_pending_wait_count() == before);
    CHECK_OK(tpr_eager_synchronize(0));
    before = tpr_pending_wait_count();
    for (int i = 0; i < count; i++) {  // each result replaces the one before
      tpr_storage_t* outs[1] = {ys[0]};
      CHECK_OK(tpr_program_run(p, 0, ins, outs));
      nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    CHECK(!pass || tpr_pending_wait_count() > before);
    tpr_tensor_ref_t yr = {ys[0], TPR_DTYPE_F32, 1, {n}, {1}, 0};
    CHECK_OK(tpr_tensor_read_host(&yr, host, (size_t)n * sizeof(float)));
    CHECK(host[0] == 3.0f && host[n - 1] == 3.0f);
    CHECK_OK(tpr_eager_synchronize(0));
    tpr_storage_release(x);
    for (int i = 0; i < count; i++) tpr_storage_release(ys[i]);
    tpr_program_free(p);
    CHECK_OK(tpr_eager_synchronize(0));
    if (!pass) tpr_test_keep_allocations();
  }
  free(host);
}

TPR_TEST(program_rejects_bad_outputs) {
  tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){4});
  tpr_type_t u = tpr_type_make(TPR_DTYPE_S32, 1, (int64_t[]){4});
  tpr_type_t types[2] = {t, u};
  tpr_value_t in[2];
  tpr_program_t* p = NULL;
  CHECK_OK(tpr_program_create(types, 2, &p, in));
  CHECK_STATUS(tpr_program_add_output(p, in[0], 1), TPR_INVALID_ARGUMENT);  // type
  CHECK_STATUS(tpr_program_add_output(p, in[0], 5), TPR_INVALID_ARGUMENT);  // range
  CHECK_STATUS(tpr_program_add_output(p, TPR_VALUE_NONE, -1), TPR_INVALID_ARGUMENT);
  CHECK_STATUS(tpr_program_run(p, 0, NULL, NULL), TPR_FAILED_PRECONDITION);
  tpr_program_free(p);
}

// Runs one view rule on x = [[0,1,2],[3,4,5]] and reads the result.
static tpr_status_t run_view_rule(const char* op, const tpr_arg_t* extra, int num_extra,
                                  tpr_type_t out_type, float* got) {
  tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){2, 3});
  tpr_program_t* p = NULL;
  tpr_value_t in;
  TPR_RETURN_IF_ERROR(tpr_program_create(&t, 1, &p, &in));
  tpr_arg_t args[6] = {{.kind = TPR_ARG_TENSOR, .value = in}};
  for (int i = 0; i < num_extra; i++) args[1 + i] = extra[i];
  tpr_value_t out = TPR_VALUE_NONE;
  tpr_lower_ctx_t ctx = {tpr_program_graph(p), op, args, 1 + num_extra, &out_type, 1, &out};
  tpr_status_t s = tpr_lower(&ctx);
  if (tpr_status_is_ok(s)) s = tpr_program_add_output(p, out, -1);
  if (tpr_status_is_ok(s)) s = tpr_program_compile(p, op, NULL);
  tpr_storage_t *x = NULL, *y = NULL;
  size_t ybytes = (size_t)tpr_type_numel(&out_type) * sizeof(float);
  if (tpr_status_is_ok(s)) s = tpr_storage_create(0, 6 * sizeof(float), &x);
  if (tpr_status_is_ok(s)) s = tpr_storage_create(0, ybytes, &y);
  float xv[6] = {0, 1, 2, 3, 4, 5};
  tpr_tensor_ref_t xr = {x, TPR_DTYPE_F32, 1, {6}, {1}, 0};
  tpr_tensor_ref_t yr = {y, TPR_DTYPE_F32, 1, {(int64_t)(ybytes / sizeof(float))}, {1}, 0};
  if (tpr_status_is_ok(s)) s = tpr_tensor_write_host(&xr, xv, sizeof xv);
  if (tpr_status_is_ok(s)) s = tpr_program_run(p, 0, &x, &y);
  if (tpr_status_is_ok(s)) s = tpr_tensor_read_host(&yr, got, ybytes);
  tpr_status_free(tpr_eager_synchronize(0));
  tpr_storage_release(x);
  tpr_storage_release(y);
  tpr_program_free(p);
  return s;
}

TPR_TEST(program_view_rules_give_dense_values) {
  CHECK_OK(init_eager());
  float got[6];
  int64_t perm[2] = {1, 0};
  tpr_arg_t dims = {.kind = TPR_ARG_INT_LIST, .ints = perm, .count = 2};
  CHECK_OK(run_view_rule("aten::permute", &dims, 1,
                         tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){3, 2}), got));
  CHECK(got[0] == 0 && got[1] == 3 && got[2] == 1 && got[5] == 5);
  tpr_arg_t slice[4] = {{.kind = TPR_ARG_INT, .i = 1}, {.kind = TPR_ARG_INT, .i = -2},
                        {.kind = TPR_ARG_NONE}, {.kind = TPR_ARG_INT, .i = 1}};
  CHECK_OK(run_view_rule("aten::slice.Tensor", slice, 4,
                         tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){2, 2}), got));
  CHECK(got[0] == 1 && got[1] == 2 && got[2] == 4 && got[3] == 5);
  tpr_arg_t select[2] = {{.kind = TPR_ARG_INT, .i = 0}, {.kind = TPR_ARG_INT, .i = -1}};
  CHECK_OK(run_view_rule("aten::select.int", select, 2,
                         tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){3}), got));
  CHECK(got[0] == 3 && got[1] == 4 && got[2] == 5);
  tpr_arg_t diag[3] = {{.kind = TPR_ARG_INT, .i = 1}, {.kind = TPR_ARG_INT, .i = 0},
                       {.kind = TPR_ARG_INT, .i = 1}};
  CHECK_OK(run_view_rule("aten::diagonal", diag, 3,
                         tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){2}), got));
  CHECK(got[0] == 1 && got[1] == 5);
  // Each rule's executable stays in the process-wide cache.
  tpr_test_keep_allocations();
}

// y = 2x with two run-time checks: min(x) > 0, then sum(x) < 100.
static tpr_status_t build_checked(tpr_program_t** p) {
  tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 1, (int64_t[]){4});
  tpr_value_t x;
  TPR_RETURN_IF_ERROR(tpr_program_create(&t, 1, p, &x));
  tpr_graph_t* g = tpr_program_graph(*p);
  int64_t all = 0;
  tpr_value_t lo = tpr_reduce(g, x, TPR_REDUCE_MIN, &all, 1);
  tpr_value_t sum = tpr_reduce(g, x, TPR_REDUCE_SUM, &all, 1);
  tpr_graph_add_check(g, tpr_compare(g, TPR_CMP_GT, lo, tpr_constant_f64(g, TPR_DTYPE_F32, 0)),
                      "x must be positive");
  tpr_graph_add_check(g, tpr_compare(g, TPR_CMP_LT, sum, tpr_constant_f64(g, TPR_DTYPE_F32, 100)),
                      "sum(x) must stay under %d", 100);
  tpr_value_t two = tpr_broadcast_to(g, tpr_constant_f64(g, TPR_DTYPE_F32, 2.0), 1, t.dims);
  return tpr_program_add_output(*p, tpr_binary(g, TPR_BINARY_MUL, x, two), -1);
}

TPR_TEST(program_runtime_checks_fail_the_run_with_the_first_message) {
  CHECK_OK(init_eager());
  tpr_program_t* p = NULL;
  CHECK_OK(build_checked(&p));
  CHECK_OK(tpr_program_compile(p, "test_checks", NULL));
  tpr_program_free(p);
  tpr_test_keep_allocations();  // the cached executable lives on

  CHECK_OK(build_checked(&p));
  tpr_graph_t* g = tpr_program_graph(p);
  CHECK(tpr_graph_num_checks(g) == 2);
  CHECK_STR_CONTAINS(tpr_graph_check_message(g, 1), "under 100");
  CHECK(tpr_program_num_outputs(p) == 1);  // the checks' result is not one
  CHECK_OK(tpr_program_compile(p, "test_checks", NULL));

  tpr_storage_t *xs, *ys;
  CHECK_OK(tpr_storage_create(0, 16, &xs));
  CHECK_OK(tpr_storage_create(0, 16, &ys));
  tpr_tensor_ref_t xr = {xs, TPR_DTYPE_F32, 1, {4}, {1}, 0}, yr = xr;
  yr.storage = ys;
  const float cases[3][4] = {{1, 2, 3, 4}, {1, -2, 300, 4}, {1, 2, 300, 4}};
  const char* want[3] = {NULL, "x must be positive", "sum(x) must stay under 100"};
  for (int c = 0; c < 3; c++) {
    CHECK_OK(tpr_tensor_write_host(&xr, cases[c], sizeof cases[c]));
    tpr_status_t s = tpr_program_run(p, 0, &xs, &ys);
    if (!want[c]) {
      CHECK_OK(s);
      float got[4];
      CHECK_OK(tpr_tensor_read_host(&yr, got, sizeof got));
      for (int i = 0; i < 4; i++) CHECK(got[i] == 2 * cases[c][i]);
      continue;
    }
    CHECK(tpr_status_code(s) == TPR_FAILED_PRECONDITION);
    CHECK_STR_CONTAINS(tpr_status_message(s), want[c]);
    tpr_status_free(s);
  }
  CHECK_OK(tpr_eager_synchronize(0));
  tpr_storage_release(xs);
  tpr_storage_release(ys);
  tpr_program_free(p);
}

// Rolling a graph back drops the checks added since the mark.
TPR_TEST(graph_rollback_drops_checks) {
  tpr_graph_t* g = NULL;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t b = tpr_constant_i64(g, TPR_DTYPE_BOOL, 1);
  tpr_graph_add_check(g, b, "kept");
  tpr_graph_mark_t m = tpr_graph_get_mark(g);
  tpr_graph_add_check(g, b, "dropped");
  tpr_graph_add_check(g, tpr_constant_f64(g, TPR_DTYPE_F32, 1), "not bool");
  CHECK(!tpr_graph_ok(g));
  tpr_graph_rollback(g, &m);
  CHECK(tpr_graph_ok(g) && tpr_graph_num_checks(g) == 1);
  CHECK_STR_CONTAINS(tpr_graph_check_message(g, 0), "kept");
  tpr_graph_reset(g);
  CHECK(tpr_graph_num_checks(g) == 0);
  tpr_graph_free(g);
}
