// The launch thread: executions issued back to back run in issue order off
// the caller's thread; host reads, donation, failures and the synchronous
// paths see them in that order.
#include "runtime/pjrt/internal.h"
#include "test_runtime_fixture.h"

static tpr_status_t client_with(bool synchronous, tpr_client_t** out) {
  tpr_client_options_t options;
  tpr_client_options_initialize(&options);
  options.cpu_device_count = 1;
  options.synchronous_launch = synchronous;
  return fixture_client_with(&options, out);
}

// acc = acc + x, |n| times, each call reading the previous call's output
// (dropped by the caller at once), more calls than the queue holds.
TPR_TEST(launch_chain_runs_in_issue_order) {
  for (int synchronous = 0; synchronous < 2; synchronous++) {
    tpr_client_t* c;
    CHECK_OK(client_with(synchronous, &c));
    CHECK((c->launcher == NULL) == synchronous);
    tpr_executable_t* e;
    CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
    float x[4] = {1, 2, 0.5f, -1}, zero[4] = {0}, r[4];
    tpr_buffer_t *bx, *acc;
    CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
    CHECK_OK(fixture_f32(c, 0, zero, 4, &acc));
    enum { kCalls = 3000 };
    for (int i = 0; i < kCalls; i++) {
      tpr_buffer_t* args[2] = {acc, bx};
      tpr_buffer_t* next;
      CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &next, false));
      CHECK(tpr_buffer_rank(next) == 1 && tpr_buffer_dims(next)[0] == 4);
      tpr_buffer_release(acc);
      acc = next;
    }
    CHECK_OK(tpr_buffer_to_host(acc, r, sizeof r));
    for (int k = 0; k < 4; k++) CHECK(r[k] == kCalls * x[k]);
    // A waiting call after queued ones sees their results.
    tpr_buffer_t* args[2] = {acc, bx};
    tpr_buffer_t* last;
    CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &last, true));
    CHECK_OK(tpr_buffer_to_host(last, r, sizeof r));
    for (int k = 0; k < 4; k++) CHECK(r[k] == (kCalls + 1) * x[k]);
    tpr_buffer_release(last);
    tpr_buffer_release(acc);
    tpr_memory_stats_t m;
    CHECK_OK(tpr_client_memory_stats(c, 0, &m));
    CHECK(m.num_buffers == 1);  // every intermediate is gone
    tpr_buffer_release(bx);
    tpr_executable_release(e);
    tpr_client_destroy(c);
  }
}

// In-place accumulation: each call donates the previous output. The input
// is dead as soon as the call is issued, before it has run.
TPR_TEST(launch_donation_in_issue_order) {
  tpr_client_t* c;
  CHECK_OK(client_with(false, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, DONATING_ADD, &e));
  float x[4] = {1, 1, 2, 3}, r[4];
  tpr_buffer_t *acc, *bx;
  CHECK_OK(fixture_f32(c, 0, x, 4, &acc));
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  bool donate[2] = {true, false};
  for (int i = 0; i < 500; i++) {
    tpr_buffer_t* args[2] = {acc, bx};
    tpr_buffer_t* next;
    CHECK_OK(tpr_executable_execute(e, 0, args, 2, donate, &next, false));
    CHECK(tpr_buffer_is_donated(acc));
    CHECK_STATUS(tpr_buffer_to_host(acc, r, sizeof r), TPR_FAILED_PRECONDITION);
    tpr_buffer_release(acc);
    acc = next;
  }
  CHECK_OK(tpr_buffer_to_host(acc, r, sizeof r));
  for (int k = 0; k < 4; k++) CHECK(r[k] == 501 * x[k]);
  tpr_memory_stats_t m;
  CHECK_OK(tpr_client_memory_stats(c, 0, &m));
  CHECK(m.num_buffers == 2);
  tpr_buffer_release(acc);
  tpr_buffer_release(bx);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

// A computation that failed poisons what reads its outputs, queued or not,
// and the error reaches whoever reads them.
TPR_TEST(launch_failure_reaches_readers) {
  tpr_client_t* c;
  CHECK_OK(client_with(false, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  float x[4] = {1, 2, 3, 4}, r[4];
  tpr_buffer_t *bx, *bad;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  tpr_tensor_sig_t sig = {.dtype = TPR_DTYPE_F32, .rank = 1, .dims = {4}};
  CHECK_OK(tpr_buffer_pending(c, 0, &sig, 0, &bad));
  bad->failure = TPR_ERR(RESOURCE_EXHAUSTED, "simulated device failure");

  tpr_buffer_t* args[2] = {bx, bad};
  tpr_buffer_t *out, *out2;
  CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &out, false));
  tpr_buffer_t* args2[2] = {out, bx};
  CHECK_OK(tpr_executable_execute(e, 0, args2, 2, NULL, &out2, false));
  tpr_status_t s = tpr_buffer_to_host(out2, r, sizeof r);
  CHECK(tpr_status_code(s) == TPR_RESOURCE_EXHAUSTED);
  CHECK_STR_CONTAINS(tpr_status_message(s), "simulated device failure");
  CHECK_STR_CONTAINS(tpr_status_message(s), "an input of this computation failed");
  tpr_status_free(s);
  CHECK_STATUS(tpr_buffer_await(out), TPR_RESOURCE_EXHAUSTED);
  // The waiting path reports it at the call.
  tpr_buffer_t* out3 = NULL;
  CHECK_STATUS(tpr_executable_execute(e, 0, args, 2, NULL, &out3, true),
               TPR_RESOURCE_EXHAUSTED);
  CHECK(out3 == NULL);
  // Good inputs still work afterwards.
  tpr_buffer_t* good[2] = {bx, bx};
  CHECK_OK(tpr_executable_execute(e, 0, good, 2, NULL, &out3, false));
  CHECK_OK(tpr_buffer_to_host(out3, r, sizeof r));
  CHECK(r[0] == 2 && r[3] == 8);
  tpr_buffer_release(out3);
  tpr_buffer_release(out2);
  tpr_buffer_release(out);
  tpr_buffer_release(bad);
  tpr_buffer_release(bx);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

// Destroying the client runs what is still queued first: no output is left
// pending, and the buffers' memory is returned.
TPR_TEST(launch_destroy_drains_the_queue) {
  tpr_client_t* c;
  CHECK_OK(client_with(false, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  float x[4] = {1, 2, 3, 4};
  tpr_buffer_t* bx;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  for (int i = 0; i < 100; i++) {
    tpr_buffer_t* args[2] = {bx, bx};
    tpr_buffer_t* out;
    CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &out, false));
    tpr_buffer_release(out);
  }
  tpr_buffer_release(bx);
  tpr_executable_release(e);
  tpr_client_destroy(c);  // the harness checks that nothing leaked
}

// Fulfils a pending executable from another thread after a moment, as a
// background compile does.
typedef struct {
  tpr_executable_t* pending;
  tpr_executable_t* compiled;
} fulfil_later_t;

static void* fulfil_later(void* arg) {
  fulfil_later_t* f = arg;
  struct timespec nap = {0, 20 * 1000 * 1000};
  nanosleep(&nap, NULL);
  tpr_executable_fulfil(f->pending, f->compiled, tpr_ok_status());
  return NULL;
}

// Launches queued on an executable whose code is still compiling: the
// caller goes on, each launch (and those queued behind it) waits for the
// code, results are right; on the synchronous path the call itself waits.
TPR_TEST(launch_waits_for_pending_code) {
  for (int synchronous = 0; synchronous < 2; synchronous++) {
    tpr_client_t* c;
    CHECK_OK(client_with(synchronous, &c));
    int32_t dtype = TPR_DTYPE_F32, rank = 1;
    int64_t dims[TPR_MAX_RANK] = {4};
    tpr_executable_t *pending, *compiled;
    CHECK_OK(tpr_executable_create_pending(c, 1, &dtype, &rank, dims, &pending));
    CHECK(tpr_executable_num_outputs(pending) == 1);
    CHECK_OK(fixture_compile(c, ADD_F32_4, &compiled));
    float x[4] = {1, 2, 0.5f, -1}, r[4];
    tpr_buffer_t *bx, *once, *twice;
    CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
    fulfil_later_t f = {pending, compiled};
    pthread_t t;
    if (synchronous) CHECK(pthread_create(&t, NULL, fulfil_later, &f) == 0);
    tpr_buffer_t* args[2] = {bx, bx};
    CHECK_OK(tpr_executable_execute(pending, 0, args, 2, NULL, &once, false));
    CHECK(tpr_buffer_rank(once) == 1 && tpr_buffer_dims(once)[0] == 4);
    tpr_buffer_t* args2[2] = {once, bx};
    CHECK_OK(tpr_executable_execute(pending, 0, args2, 2, NULL, &twice, false));
    if (!synchronous) {
      CHECK(!tpr_buffer_is_ready(twice));  // nothing can run before the code
      CHECK(pthread_create(&t, NULL, fulfil_later, &f) == 0);
    }
    CHECK_OK(tpr_buffer_to_host(twice, r, sizeof r));
    for (int k = 0; k < 4; k++) CHECK(r[k] == 3 * x[k]);
    pthread_join(t, NULL);
    // Fulfilled, it runs as any executable, and waits for nothing.
    tpr_buffer_t* again;
    CHECK_OK(tpr_executable_execute(pending, 0, args, 2, NULL, &again, true));
    CHECK_OK(tpr_buffer_to_host(again, r, sizeof r));
    for (int k = 0; k < 4; k++) CHECK(r[k] == 2 * x[k]);
    tpr_buffer_release(again);
    tpr_buffer_release(twice);
    tpr_buffer_release(once);
    tpr_buffer_release(bx);
    tpr_executable_release(compiled);  // its code moved to |pending|
    tpr_executable_release(pending);
    tpr_client_destroy(c);
  }
}

// A failed compile, or code whose outputs differ from the pending types,
// fails the queued launches' outputs with that cause; nothing hangs.
TPR_TEST(launch_on_pending_code_that_fails) {
  tpr_client_t* c;
  CHECK_OK(client_with(false, &c));
  float x[4] = {1, 2, 3, 4}, r[5];
  tpr_buffer_t* bx;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  for (int wrong_code = 0; wrong_code < 2; wrong_code++) {
    int32_t dtype = TPR_DTYPE_F32, rank = 1;
    int64_t dims[TPR_MAX_RANK] = {wrong_code ? 5 : 4};
    tpr_executable_t *pending, *compiled = NULL;
    CHECK_OK(tpr_executable_create_pending(c, 1, &dtype, &rank, dims, &pending));
    tpr_buffer_t* args[2] = {bx, bx};
    tpr_buffer_t *out, *after;
    CHECK_OK(tpr_executable_execute(pending, 0, args, 2, NULL, &out, false));
    tpr_buffer_t* args2[2] = {out, out};
    CHECK_OK(tpr_executable_execute(pending, 0, args2, 2, NULL, &after, false));
    if (wrong_code) {
      CHECK_OK(fixture_compile(c, ADD_F32_4, &compiled));
      tpr_executable_fulfil(pending, compiled, tpr_ok_status());
    } else {
      tpr_executable_fulfil(pending, NULL, TPR_ERR(INVALID_ARGUMENT, "no such op"));
    }
    tpr_status_t s = tpr_buffer_to_host(after, r, (wrong_code ? 5 : 4) * sizeof(float));
    CHECK(!tpr_status_is_ok(s));
    CHECK(strstr(tpr_status_message(s), wrong_code ? "differ" : "no such op") != NULL);
    tpr_status_free(s);
    tpr_buffer_release(after);
    tpr_buffer_release(out);
    tpr_executable_release(compiled);
    tpr_executable_release(pending);
  }
  tpr_buffer_release(bx);
  tpr_client_destroy(c);
}
