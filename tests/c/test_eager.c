// The eager executor: strict and fused modes over one process-wide context.
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tpr/eager.h"
#include "eager/internal.h"
#include "tpr/graph.h"

static tpr_status_t init_context(void) {
  const char* path = tpr_test_plugin_path();
  if (!path) return TPR_ERR(FAILED_PRECONDITION, "TORCH_TPU_PJRT_PLUGIN is not set");
  tpr_eager_options_t o = {0};
  o.plugin_spec = path;
  TPR_RETURN_IF_ERROR(tpr_eager_init(&o));
  tpr_test_keep_allocations();  // the client lives as long as the process
  return tpr_ok_status();
}

static tpr_tensor_ref_t vec_ref(tpr_storage_t* s, int64_t n) {
  tpr_tensor_ref_t r = {s, TPR_DTYPE_F32, 1, {n}, {1}, 0};
  return r;
}

// out = a + b (or a * b), through an explicit lowering.
static tpr_status_t lower_add(tpr_lower_ctx_t* c) {
  c->outs[0] = tpr_binary(c->graph, TPR_BINARY_ADD, c->args[0].value, c->args[1].value);
  return tpr_ok_status();
}
static tpr_status_t lower_mul(tpr_lower_ctx_t* c) {
  c->outs[0] = tpr_binary(c->graph, TPR_BINARY_MUL, c->args[0].value, c->args[1].value);
  return tpr_ok_status();
}
static tpr_status_t lower_identity_test(tpr_lower_ctx_t* c) {
  c->outs[0] = c->args[0].value;
  return tpr_ok_status();
}
// Emits nodes, then fails: the executor must roll them back.
static tpr_status_t lower_fail_late(tpr_lower_ctx_t* c) {
  (void)tpr_unary(c->graph, TPR_UNARY_NEG, c->args[0].value);
  return TPR_ERR(UNIMPLEMENTED, "test: rule gave up");
}

// out = op(a, b): through |fn|, or (NULL) the rule table's rule for |name|.
static tpr_status_t run_binary(const char* name, tpr_lower_fn_t fn,
                               const tpr_tensor_ref_t* a, const tpr_tensor_ref_t* b,
                               const tpr_tensor_ref_t* out) {
  tpr_eager_arg_t args[2];
  memset(args, 0, sizeof args);
  args[0].arg.kind = args[1].arg.kind = TPR_ARG_TENSOR;
  args[0].tensor = a;
  args[1].tensor = b;
  tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, out->rank, out->sizes);
  const tpr_tensor_ref_t* targets[1] = {out};
  tpr_eager_call_t call = {name, 0, args, 2, &t, 1, targets, fn};
  return tpr_eager_run(&call);
}

static tpr_status_t binary(tpr_lower_fn_t fn, const tpr_tensor_ref_t* a,
                           const tpr_tensor_ref_t* b, const tpr_tensor_ref_t* out) {
  // Distinct names per rule, as ATen ops have (loop detection keys on them).
  const char* name = fn == lower_add ? "test::add" : fn == lower_mul ? "test::mul" : "test::other";
  return run_binary(name, fn, a, b, out);
}

static tpr_status_t new_vec(const float* v, int64_t n, tpr_storage_t** s) {
  TPR_RETURN_IF_ERROR(tpr_storage_create(0, (size_t)n * 4, s));
  tpr_tensor_ref_t r = vec_ref(*s, n);
  return v ? tpr_tensor_write_host(&r, v, (size_t)n * 4) : tpr_ok_status();
}

TPR_TEST(eager_fused_defers_until_read) {
  CHECK_OK(init_context());
  CHECK_OK(tpr_eager_set_fused(true));
  float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40}, out[4];
  tpr_storage_t *a, *b, *t, *y;
  CHECK_OK(new_vec(av, 4, &a));
  CHECK_OK(new_vec(bv, 4, &b));
  CHECK_OK(new_vec(NULL, 4, &t));
  CHECK_OK(new_vec(NULL, 4, &y));
  tpr_tensor_ref_t ra = vec_ref(a, 4), rb = vec_ref(b, 4), rt = vec_ref(t, 4),
                   ry = vec_ref(y, 4);
  tpr_eager_reset_stats();
  CHECK_OK(binary(lower_add, &ra, &rb, &rt));  // t = a + b
  CHECK_OK(binary(lower_mul, &rt, &ra, &ry));  // y = t * a
  // In-place through a view: y[1:3] += b[0:2]
  tpr_tensor_ref_t yv = {y, TPR_DTYPE_F32, 1, {2}, {1}, 1};
  tpr_tensor_ref_t bv2 = {b, TPR_DTYPE_F32, 1, {2}, {1}, 0};
  CHECK_OK(binary(lower_add, &yv, &bv2, &yv));
  tpr_eager_stats_t st;
  tpr_eager_get_stats(&st);
  CHECK(st.pending_ops == 3 && st.fused_graphs == 0);
  CHECK(tpr_storage_buffer(y) == NULL);  // nothing ran yet
  tpr_storage_release(t);  // dies before the cut: not a result
  CHECK_OK(tpr_tensor_read_host(&ry, out, sizeof out));
  tpr_eager_get_stats(&st);
  CHECK(st.fused_graphs == 1 && st.cuts[TPR_CUT_HOST_READ] == 1 && st.pending_ops == 0);
  float want[4] = {11, 44 + 10, 99 + 20, 176};
  for (int i = 0; i < 4; i++) CHECK(out[i] == want[i]);
  CHECK_OK(tpr_eager_set_fused(false));
  tpr_storage_release(a);
  tpr_storage_release(b);
  tpr_storage_release(y);
  CHECK_OK(tpr_eager_trim());
}

TPR_TEST(eager_fused_failed_op_rolls_back) {
  CHECK_OK(init_context());
  CHECK_OK(tpr_eager_set_fused(true));
  float av[3] = {1, 2, 3}, out[3];
  tpr_storage_t *a, *y;
  CHECK_OK(new_vec(av, 3, &a));
  CHECK_OK(new_vec(NULL, 3, &y));
  tpr_tensor_ref_t ra = vec_ref(a, 3), ry = vec_ref(y, 3);
  CHECK_OK(binary(lower_add, &ra, &ra, &ry));  // y = 2a
  tpr_eager_stats_t before, after;
  tpr_eager_get_stats(&before);
  // A failing op that reads and would write a storage new to the graph.
  tpr_storage_t* z;
  CHECK_OK(new_vec(av, 3, &z));
  tpr_tensor_ref_t rz = vec_ref(z, 3);
  CHECK_STATUS(binary(lower_fail_late, &rz, &ry, &ra), TPR_UNIMPLEMENTED);
  tpr_eager_get_stats(&after);
  CHECK(after.pending_ops == before.pending_ops);
  CHECK_OK(binary(lower_mul, &ry, &ra, &ry));  // y = 2a * a
  CHECK_OK(tpr_eager_flush(TPR_CUT_EXPLICIT));
  CHECK_OK(tpr_tensor_read_host(&ry, out, sizeof out));
  for (int i = 0; i < 3; i++) CHECK(out[i] == 2 * av[i] * av[i]);
  CHECK_OK(tpr_tensor_read_host(&ra, out, sizeof out));  // a untouched
  for (int i = 0; i < 3; i++) CHECK(out[i] == av[i]);
  CHECK_OK(tpr_eager_set_fused(false));
  tpr_storage_release(a);
  tpr_storage_release(y);
  tpr_storage_release(z);
  CHECK_OK(tpr_eager_trim());
}

TPR_TEST(eager_fused_host_write_and_size_limit) {
  CHECK_OK(init_context());
  CHECK_OK(tpr_eager_set_fused(true));
  tpr_eager_set_fuse_max_ops(2);
  float av[2] = {1, 2}, bv[2] = {5, 7}, out[2];
  tpr_storage_t *a, *y;
  CHECK_OK(new_vec(av, 2, &a));
  CHECK_OK(new_vec(NULL, 2, &y));
  tpr_tensor_ref_t ra = vec_ref(a, 2), ry = vec_ref(y, 2);
  tpr_eager_reset_stats();
  CHECK_OK(binary(lower_add, &ra, &ra, &ry));  // y = 2a (pending)
  // Overwriting a (which the pending graph reads) runs the graph first.
  CHECK_OK(tpr_tensor_write_host(&ra, bv, sizeof bv));
  tpr_eager_stats_t st;
  tpr_eager_get_stats(&st);
  CHECK(st.cuts[TPR_CUT_HOST_WRITE] == 1);
  CHECK_OK(binary(lower_add, &ry, &ra, &ry));  // y = 2*av + bv
  CHECK_OK(binary(lower_add, &ry, &ra, &ry));  // second op: the size bound
  tpr_eager_get_stats(&st);
  CHECK(st.cuts[TPR_CUT_SIZE_LIMIT] == 1 && st.pending_ops == 0);
  CHECK_OK(tpr_tensor_read_host(&ry, out, sizeof out));
  for (int i = 0; i < 2; i++) CHECK(out[i] == 2 * av[i] + 2 * bv[i]);
  tpr_eager_set_fuse_max_ops(0);
  CHECK_OK(tpr_eager_set_fused(false));
  tpr_storage_release(a);
  tpr_storage_release(y);
  CHECK_OK(tpr_eager_trim());
}

// A whole storage filled from the host: ordered after the work queued
// before it, a repeated multi-byte item laid out whole (odd count: the
// doubling copy's last piece is partial); a window, fused mode and a wrong
// item size leave the fill to the caller.
TPR_TEST(eager_fill_host_replaces_whole_storages_only) {
  CHECK_OK(init_context());
  float av[5] = {1, 2, 3, 4, 5}, out[5];
  tpr_storage_t *a, *y;
  CHECK_OK(new_vec(av, 5, &a));
  CHECK_OK(new_vec(NULL, 5, &y));
  tpr_tensor_ref_t ra = vec_ref(a, 5), ry = vec_ref(y, 5);
  tpr_eager_reset_stats();
  CHECK_OK(binary(lower_add, &ra, &ra, &ry));  // y = 2a, before the fill
  float item = -1.25f;
  bool filled = false;
  CHECK_OK(tpr_tensor_fill_host(&ra, &item, sizeof item, &filled));
  CHECK(filled);
  CHECK_OK(tpr_tensor_read_host(&ry, out, sizeof out));
  for (int i = 0; i < 5; i++) CHECK(out[i] == 2 * av[i]);
  CHECK_OK(tpr_tensor_read_host(&ra, out, sizeof out));
  for (int i = 0; i < 5; i++) CHECK(out[i] == item);
  tpr_eager_stats_t st;
  tpr_eager_get_stats(&st);
  CHECK(st.host_fills == 1);

  tpr_tensor_ref_t tail = vec_ref(a, 3);
  tail.offset = 2;
  CHECK_OK(tpr_tensor_fill_host(&tail, &item, sizeof item, &filled));
  CHECK(!filled);
  CHECK_OK(tpr_eager_set_fused(true));
  CHECK_OK(tpr_tensor_fill_host(&ra, &item, sizeof item, &filled));
  CHECK(!filled);
  CHECK_OK(tpr_eager_set_fused(false));
  double wide = 0;
  CHECK_STATUS(tpr_tensor_fill_host(&ra, &wide, sizeof wide, &filled), TPR_INVALID_ARGUMENT);
  CHECK(!filled);
  tpr_eager_get_stats(&st);
  CHECK(st.host_fills == 1);
  tpr_storage_release(a);
  tpr_storage_release(y);
  CHECK_OK(tpr_eager_trim());
}

// A window's bytes in place without a wait: only once its value is
// computed, never for a result the pending fused graph has yet to make.
TPR_TEST(eager_host_view_ready_never_waits) {
  CHECK_OK(init_context());
  float av[3] = {1, 2, 3};
  tpr_storage_t *a, *y;
  CHECK_OK(new_vec(av, 3, &a));
  CHECK_OK(new_vec(NULL, 3, &y));
  tpr_tensor_ref_t ra = vec_ref(a, 3), ry = vec_ref(y, 3);
  CHECK_OK(tpr_tensor_await(&ra));
  const void* data = NULL;
  tpr_buffer_t* hold = NULL;
  bool host_pointers = tpr_tensor_host_view_ready(&ra, &data, &hold);
  tpr_plugin_info_t info;
  tpr_plugin_get_info(tpr_client_plugin(tpr_eager_client()), &info);
  CHECK(host_pointers || info.kind != TPR_PLUGIN_KIND_CPU);  // CPU plugins offer them
  if (host_pointers) {
    CHECK(memcmp(data, av, sizeof av) == 0);
    tpr_buffer_release(hold);
  }
  CHECK_OK(tpr_eager_set_fused(true));
  CHECK_OK(binary(lower_add, &ra, &ra, &ry));  // pending in the fused graph
  CHECK(!tpr_tensor_host_view_ready(&ry, &data, &hold));
  CHECK(data == NULL && hold == NULL);
  CHECK_OK(tpr_eager_set_fused(false));  // runs the graph
  CHECK_OK(tpr_tensor_await(&ry));
  if (host_pointers) {
    CHECK(tpr_tensor_host_view_ready(&ry, &data, &hold));
    for (int i = 0; i < 3; i++) CHECK(((const float*)data)[i] == 2 * av[i]);
    tpr_buffer_release(hold);
  }
  tpr_tensor_ref_t strided = vec_ref(a, 2);
  strided.strides[0] = 2;
  CHECK(!tpr_tensor_host_view_ready(&strided, &data, &hold));
  tpr_storage_release(a);
  tpr_storage_release(y);
  CHECK_OK(tpr_eager_trim());
}

// A loop body over vectors a and b: op |k| of |body_len|.
typedef tpr_status_t (*loop_op_fn)(int k, const tpr_tensor_ref_t* a,
                                   const tpr_tensor_ref_t* b);

// Runs |iters| iterations of a |body_len|-op body in fused mode with the size
// bound |max_ops| and no sync point; reports the cache misses halfway and at
// the end, the stats, and a's final value.
static tpr_status_t run_unsynced_loop(int64_t max_ops, int iters, int body_len,
                                      loop_op_fn op, int64_t* misses_mid,
                                      tpr_eager_stats_t* st, float out[2]) {
  TPR_RETURN_IF_ERROR(tpr_eager_set_fused(true));
  tpr_eager_set_fuse_max_ops(max_ops);
  float ones[2] = {1, 1};
  tpr_storage_t *a = NULL, *b = NULL;
  tpr_status_t s = new_vec(ones, 2, &a);
  if (tpr_status_is_ok(s)) s = new_vec(ones, 2, &b);
  tpr_tensor_ref_t ra = vec_ref(a, 2), rb = vec_ref(b, 2);
  tpr_eager_reset_stats();
  for (int it = 0; it < iters && tpr_status_is_ok(s); it++) {
    for (int k = 0; k < body_len && tpr_status_is_ok(s); k++) s = op(k, &ra, &rb);
    if (it == iters / 2) {
      tpr_eager_get_stats(st);
      *misses_mid = st->cache_misses;
    }
  }
  tpr_eager_get_stats(st);
  if (tpr_status_is_ok(s)) s = tpr_tensor_read_host(&ra, out, 2 * sizeof(float));
  tpr_eager_set_fuse_max_ops(0);
  s = tpr_status_join(s, tpr_eager_set_fused(false));
  tpr_storage_release(a);
  tpr_storage_release(b);
  return s;
}

// 3 adds into a, 4 squarings of b: 7 ops, a period not dividing the bound.
static tpr_status_t seven_op_body(int k, const tpr_tensor_ref_t* a,
                                  const tpr_tensor_ref_t* b) {
  return k < 3 ? binary(lower_add, a, b, a) : binary(lower_mul, b, b, b);
}

TPR_TEST(eager_fused_loop_without_sync_reuses_one_graph) {
  CHECK_OK(init_context());
  int64_t misses_mid = 0;
  tpr_eager_stats_t st;
  float out[2];
  CHECK_OK(run_unsynced_loop(40, 100, 7, seven_op_body, &misses_mid, &st, out));
  CHECK(st.cuts[TPR_CUT_LOOP] >= 10);
  CHECK(st.cache_misses == misses_mid);  // nothing new after warm-up
  CHECK(st.cache_misses <= 3);  // the first cut, the loop graph, and maybe one in between
  CHECK(out[0] == 301.0f);  // b stays 1 (1*1), a gains 3 per iteration
  CHECK_OK(tpr_eager_trim());
}

TPR_TEST(eager_executable_cache_evicts_least_recently_used) {
  CHECK_OK(init_context());
  tpr_exec_cache_set_max_weight(200);  // a few one-op graphs
  tpr_eager_reset_stats();
  float v[64] = {0}, out[64];
  tpr_storage_t* keep;
  CHECK_OK(new_vec(v, 1, &keep));
  tpr_tensor_ref_t rk = vec_ref(keep, 1);
  for (int n = 1; n <= 40; n++) {  // 40 shapes: 40 graphs
    tpr_storage_t* s;
    CHECK_OK(new_vec(v, n, &s));
    tpr_tensor_ref_t r = vec_ref(s, n);
    CHECK_OK(binary(lower_add, &r, &r, &r));
    CHECK_OK(binary(lower_add, &rk, &rk, &rk));  // stays recently used
    tpr_storage_release(s);
  }
  tpr_eager_stats_t st;
  tpr_eager_get_stats(&st);
  CHECK(st.cache_evictions > 0);
  CHECK(st.cached_executables < 40);
  int64_t misses = st.cache_misses;
  CHECK_OK(binary(lower_add, &rk, &rk, &rk));
  tpr_eager_get_stats(&st);
  CHECK(st.cache_misses == misses);  // the hot graph survived eviction
  CHECK_OK(tpr_tensor_read_host(&rk, out, 4));
  tpr_exec_cache_set_max_weight(0);
  tpr_storage_release(keep);
  CHECK_OK(tpr_eager_trim());
}

// 27 ops into a (5 runs of alternating adds and multiplies), longer than
// the bound.
static tpr_status_t long_body(int k, const tpr_tensor_ref_t* a,
                              const tpr_tensor_ref_t* b) {
  return binary((k % 5 + k / 5) % 2 ? lower_add : lower_mul, a, b, a);
}

TPR_TEST(eager_fused_loop_longer_than_the_bound_settles) {
  CHECK_OK(init_context());
  int64_t misses_mid = 0;
  tpr_eager_stats_t st;
  float out[2];
  CHECK_OK(run_unsynced_loop(10, 60, 27, long_body, &misses_mid, &st, out));
  CHECK(st.cache_misses == misses_mid);  // settled: nothing new compiles
  CHECK(st.cache_misses <= 12);
  CHECK_OK(tpr_eager_trim());
}

// Strict ops found by the rule table (no explicit lowering) replay from a
// remembered plan: in order, and a storage dropped right after its op is
// fine.
static tpr_status_t rule_mul(const tpr_tensor_ref_t* a, const tpr_tensor_ref_t* b,
                             const tpr_tensor_ref_t* out, const char* name) {
  return run_binary(name, NULL, a, b, out);
}

TPR_TEST(eager_replays_keep_order_and_references) {
  CHECK_OK(init_context());
  CHECK_OK(tpr_eager_set_fused(false));
  const float one[2] = {1, 1}, two[2] = {2, 2}, ab[2] = {1, 2};
  tpr_storage_t *x, *w, *a;
  CHECK_OK(new_vec(one, 2, &x));
  CHECK_OK(new_vec(two, 2, &w));
  CHECK_OK(new_vec(ab, 2, &a));
  tpr_tensor_ref_t rx = vec_ref(x, 2), rw = vec_ref(w, 2), ra = vec_ref(a, 2);
  tpr_eager_stats_t before, after;
  tpr_eager_get_stats(&before);
  // In place, each op reads what the one before wrote: 2^20.
  for (int i = 0; i < 20; i++) CHECK_OK(rule_mul(&rx, &rw, &rx, "aten::mul_.Tensor"));
  // Many results, each storage dropped as soon as the next exists.
  tpr_storage_t* last = NULL;
  for (int i = 0; i < 600; i++) {
    tpr_storage_t* o;
    CHECK_OK(tpr_storage_create(0, 8, &o));
    tpr_tensor_ref_t ro = vec_ref(o, 2);
    CHECK_OK(rule_mul(&ra, &rw, &ro, "aten::mul.Tensor"));
    tpr_storage_release(last);
    last = o;
  }
  tpr_storage_release(w);
  float got[2];
  tpr_tensor_ref_t rl = vec_ref(last, 2);
  CHECK_OK(tpr_tensor_read_host(&rl, got, sizeof got));
  CHECK(got[0] == 2 && got[1] == 4);
  CHECK_OK(tpr_tensor_read_host(&rx, got, sizeof got));
  CHECK(got[0] == 1048576.0f && got[1] == 1048576.0f);
  tpr_eager_get_stats(&after);
  CHECK(after.replayed_ops - before.replayed_ops >= 600);
  tpr_storage_release(last);
  tpr_storage_release(x);
  tpr_storage_release(a);
  CHECK_OK(tpr_eager_trim());
}

// A write into a window of a storage that nothing else holds donates the
// storage's buffer (the update happens in place, replayed calls too); a
// buffer someone else holds (a host view here) is left alone, and what they
// see does not change.
TPR_TEST(eager_updates_in_place_unless_held) {
  CHECK_OK(init_context());
  CHECK_OK(tpr_eager_set_fused(false));
  enum { N = 1 << 16 };
  float* init = tpr_malloc(N * sizeof(float));
  float* got = tpr_malloc(N * sizeof(float));
  CHECK(init && got);
  for (int i = 0; i < N; i++) init[i] = (float)i;
  const float two[2] = {2, 2};
  tpr_storage_t *x, *w;
  CHECK_OK(new_vec(init, N, &x));
  CHECK_OK(new_vec(two, 2, &w));
  tpr_tensor_ref_t rw = vec_ref(w, 2);
  // x[10:12] *= 2, then x[100:102] *= 2 (one plan, replayed), 3 times each
  tpr_tensor_ref_t v1 = {x, TPR_DTYPE_F32, 1, {2}, {1}, 10};
  tpr_tensor_ref_t v2 = {x, TPR_DTYPE_F32, 1, {2}, {1}, 100};
  tpr_eager_stats_t before, after;
  tpr_eager_get_stats(&before);
  for (int i = 0; i < 3; i++) CHECK_OK(rule_mul(&v1, &rw, &v1, "aten::mul_.Tensor"));
  for (int i = 0; i < 3; i++) CHECK_OK(rule_mul(&v2, &rw, &v2, "aten::mul_.Tensor"));
  tpr_tensor_ref_t rx = vec_ref(x, N);
  CHECK_OK(tpr_tensor_read_host(&rx, got, N * sizeof(float)));
  tpr_eager_get_stats(&after);
  CHECK(after.donated_buffers - before.donated_buffers == 6);
  CHECK(after.replayed_ops - before.replayed_ops >= 4);
  for (int i = 0; i < N; i++) {
    float want = init[i] * ((i >= 10 && i < 12) || (i >= 100 && i < 102) ? 8.0f : 1.0f);
    CHECK(got[i] == want);
  }
  // Held by a host view: copied, not donated; the view keeps its values.
  const void* data = NULL;
  tpr_buffer_t* hold = NULL;
  if (tpr_tensor_host_view_ready(&rx, &data, &hold)) {
    tpr_eager_get_stats(&before);
    CHECK_OK(rule_mul(&v1, &rw, &v1, "aten::mul_.Tensor"));
    CHECK_OK(tpr_tensor_await(&rx));
    tpr_eager_get_stats(&after);
    CHECK(after.donated_buffers == before.donated_buffers);
    CHECK(((const float*)data)[10] == 80.0f);  // the old value
    tpr_buffer_release(hold);
    CHECK_OK(tpr_tensor_read_host(&rx, got, N * sizeof(float)));
    CHECK(got[10] == 160.0f && got[11] == 176.0f && got[12] == 12.0f);
  }
  tpr_free(init);
  tpr_free(got);
  tpr_storage_release(x);
  tpr_storage_release(w);
  CHECK_OK(tpr_eager_trim());
}

// Every tensor of a call lives on the device it runs on; a call naming a
// device the client lacks is refused. Both before anything is recorded, in
// strict and in fused mode.
TPR_TEST(eager_call_on_another_device_is_refused) {
  CHECK_OK(init_context());
  float av[2] = {1, 2}, got[2];
  tpr_storage_t *a, *y;
  CHECK_OK(new_vec(av, 2, &a));
  CHECK_OK(new_vec(NULL, 2, &y));
  tpr_tensor_ref_t ra = vec_ref(a, 2), ry = vec_ref(y, 2);
  for (int fused = 0; fused < 2; fused++) {
    CHECK_OK(tpr_eager_set_fused(fused));
    tpr_eager_stats_t before, after;
    tpr_eager_get_stats(&before);
    // A storage of another device (the client has one: only its device
    // number says so), as an argument and as the result.
    a->device = 1;
    tpr_status_t s = binary(lower_add, &ra, &ra, &ry);
    CHECK(tpr_status_code(s) == TPR_FAILED_PRECONDITION);
    CHECK(strstr(tpr_status_message(s), "test::add") &&
          strstr(tpr_status_message(s), "same device") &&
          strstr(tpr_status_message(s), "tpu:1") && strstr(tpr_status_message(s), "tpu:0"));
    tpr_status_free(s);
    a->device = 0;
    y->device = 1;
    CHECK_STATUS(binary(lower_add, &ra, &ra, &ry), TPR_FAILED_PRECONDITION);
    y->device = 0;
    tpr_eager_get_stats(&after);
    CHECK(after.ops == before.ops && after.pending_ops == before.pending_ops);
    // A device number past the client's.
    tpr_eager_arg_t args[1];
    memset(args, 0, sizeof args);
    args[0].arg.kind = TPR_ARG_TENSOR;
    args[0].tensor = &ra;
    tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 1, ry.sizes);
    const tpr_tensor_ref_t* targets[1] = {&ry};
    tpr_eager_call_t call = {"test::add", 5, args, 1, &t, 1, targets, lower_identity_test};
    CHECK_STATUS(tpr_eager_run(&call), TPR_OUT_OF_RANGE);
    // The same op on its own device runs.
    CHECK_OK(binary(lower_add, &ra, &ra, &ry));
    CHECK_OK(tpr_tensor_read_host(&ry, got, sizeof got));
    CHECK(got[0] == 2 && got[1] == 4);
  }
  CHECK_OK(tpr_eager_set_fused(false));
  tpr_storage_release(a);
  tpr_storage_release(y);
  CHECK_OK(tpr_eager_trim());
}
