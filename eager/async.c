// Asynchronous dispatch of replayed strict-mode ops.
//
// A replayed op needs no graph work, only PJRT's execute, which costs about
// as much as everything else the host does for the op. So the host thread
// queues it (executable, where each parameter comes from, the storages the
// results go to) and a worker thread executes the queue in order, like a
// CUDA stream: the host runs ahead while the device work is issued.
//
// Ownership: a queued op holds a reference to its executable, its parameter
// buffers and storages and its result storages. The worker is the only one
// to touch those storages' buffers while anything is queued; every other
// path to a storage buffer goes through tpr_async_drain_locked first (via
// the fused settle/flush calls), so it sees the queue empty. The storage's
// buffer *type* (which replay signatures read) is set on the host thread at
// queue time. A storage whose last reference the worker drops is freed by
// the host thread (freeing takes the executor lock the host may hold while
// it waits for the worker). An execute failure marks the op's results lost
// and is reported by the next drain.
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "eager/internal.h"

#define QUEUE_LEN 256
#define MAX_REFS 64

typedef struct {
  tpr_executable_t* exe;
  int device;
  int num_params, num_results;
  tpr_storage_t* param_storage[MAX_REFS];  // or NULL: param_buffer
  tpr_buffer_t* param_buffer[MAX_REFS];
  tpr_storage_t* result[MAX_REFS];
} work_t;

static work_t queue[QUEUE_LEN];
static atomic_llong queued, done;  // ops ever queued / executed
static pthread_t worker;
static bool worker_running;
static atomic_bool worker_stop, worker_sleeping;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;   // worker: work
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;   // host: progress
static atomic_int enabled = -1;                          // -1: not read yet

// Storages the worker dropped the last reference to, and results of failed
// ops; the host thread handles both at the next drain.
static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;
static tpr_storage_t** dead;
static int num_dead, cap_dead;
static tpr_storage_t** failed;
static int num_failed, cap_failed;
static tpr_status_t first_error;

static bool push_side(tpr_storage_t*** list, int* n, int* cap, tpr_storage_t* s) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 64;
    tpr_storage_t** l = tpr_realloc(*list, sizeof **list * (size_t)nc);
    if (!l) return false;
    *list = l;
    *cap = nc;
  }
  (*list)[(*n)++] = s;
  return true;
}

static void worker_release(tpr_storage_t* s) {
  if (atomic_fetch_sub(&s->ref, 1) != 1) return;
  pthread_mutex_lock(&side_lock);
  bool kept = push_side(&dead, &num_dead, &cap_dead, s);
  pthread_mutex_unlock(&side_lock);
  if (!kept) atomic_store(&s->ref, 1);  // (out of memory: leaked, not freed twice)
}

static void run_one(work_t* w) {
  tpr_buffer_t* params[MAX_REFS];
  tpr_buffer_t* results[MAX_REFS];
  tpr_status_t s = tpr_ok_status();
  for (int i = 0; i < w->num_params && tpr_status_is_ok(s); i++) {
    params[i] = w->param_storage[i] ? w->param_storage[i]->buffer : w->param_buffer[i];
    if (!params[i])
      s = TPR_ERR(FAILED_PRECONDITION, "a parameter's buffer was lost by an earlier failure");
  }
  if (tpr_status_is_ok(s))
    s = tpr_executable_execute(w->exe, w->device, params, (size_t)w->num_params, NULL,
                               results, false);
  if (tpr_status_is_ok(s)) {
    if (w->num_results > 0) tpr_pending_push(results[0]);
    for (int r = 0; r < w->num_results; r++)
      tpr_storage_swap_buffer_only(w->result[r], results[r]);
  } else {
    pthread_mutex_lock(&side_lock);
    if (tpr_status_is_ok(first_error)) {
      first_error = s;
      s = tpr_ok_status();
    }
    for (int r = 0; r < w->num_results; r++)
      if (push_side(&failed, &num_failed, &cap_failed, w->result[r]))
        tpr_storage_retain(w->result[r]);
    pthread_mutex_unlock(&side_lock);
    tpr_status_free(s);
  }
  tpr_executable_release(w->exe);
  for (int i = 0; i < w->num_params; i++) {
    if (w->param_storage[i])
      worker_release(w->param_storage[i]);
    else
      tpr_buffer_release(w->param_buffer[i]);
  }
  for (int r = 0; r < w->num_results; r++) worker_release(w->result[r]);
}

static void* worker_main(void* arg) {
  (void)arg;
  for (;;) {
    long long next = atomic_load(&done);
    // Spin a little before sleeping: ops usually come back to back.
    for (int spin = 0; atomic_load(&queued) == next && spin < 20000; spin++)
      if ((spin & 255) == 255) sched_yield();
    if (atomic_load(&queued) == next) {
      pthread_mutex_lock(&wake_lock);
      atomic_store(&worker_sleeping, true);
      while (atomic_load(&queued) == next && !atomic_load(&worker_stop))
        pthread_cond_wait(&wake, &wake_lock);
      atomic_store(&worker_sleeping, false);
      pthread_mutex_unlock(&wake_lock);
      if (atomic_load(&queued) == next) return NULL;  // stopping, nothing left
    }
    run_one(&queue[next % QUEUE_LEN]);
    atomic_store(&done, next + 1);
    pthread_mutex_lock(&wake_lock);
    pthread_cond_broadcast(&idle);
    pthread_mutex_unlock(&wake_lock);
  }
}

static void wait_done(long long target) {
  for (int spin = 0; atomic_load(&done) < target && spin < 20000; spin++)
    if ((spin & 255) == 255) sched_yield();
  if (atomic_load(&done) >= target) return;
  pthread_mutex_lock(&wake_lock);
  while (atomic_load(&done) < target) pthread_cond_wait(&idle, &wake_lock);
  pthread_mutex_unlock(&wake_lock);
}

static void stop_worker(void) {
  if (!worker_running) return;
  wait_done(atomic_load(&queued));
  pthread_mutex_lock(&wake_lock);
  atomic_store(&worker_stop, true);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&wake_lock);
  pthread_join(worker, NULL);
  worker_running = false;
  atomic_store(&worker_stop, false);
}

// fork: the child has no worker thread; the parent's queue is empty by then.
static void before_fork(void) { wait_done(atomic_load(&queued)); }
static void in_child(void) { worker_running = false; }

bool tpr_async_enabled(void) {
  int e = atomic_load(&enabled);
  if (e < 0) {
    const char* v = getenv("TORCH_TPU_ASYNC");
    e = !(v && strcmp(v, "0") == 0);
    atomic_store(&enabled, e);
  }
  return e && !tpr_eager_launch_blocking();
}

tpr_status_t tpr_async_enqueue(tpr_executable_t* exe, int device,
                               tpr_storage_t* const* param_storages,
                               tpr_buffer_t* const* param_buffers, int num_params,
                               tpr_storage_t* const* results, int num_results) {
  if (num_params > MAX_REFS || num_results > MAX_REFS)
    return TPR_ERR(INVALID_ARGUMENT, "too many parameters to queue");
  if (!worker_running) {
    static bool hooks;
    if (!hooks) {
      atexit(stop_worker);
      pthread_atfork(before_fork, NULL, in_child);
      hooks = true;
    }
    if (pthread_create(&worker, NULL, worker_main, NULL) != 0)
      return TPR_ERR(RESOURCE_EXHAUSTED, "cannot start the dispatch thread");
    worker_running = true;
  }
  long long n = atomic_load(&queued);
  if (n - atomic_load(&done) >= QUEUE_LEN) wait_done(n - QUEUE_LEN + 1);
  work_t* w = &queue[n % QUEUE_LEN];
  w->exe = tpr_executable_retain(exe);
  w->device = device;
  w->num_params = num_params;
  w->num_results = num_results;
  for (int i = 0; i < num_params; i++) {
    w->param_storage[i] = tpr_storage_retain(param_storages[i]);
    w->param_buffer[i] = param_storages[i] ? NULL : tpr_buffer_retain(param_buffers[i]);
  }
  for (int r = 0; r < num_results; r++) w->result[r] = tpr_storage_retain(results[r]);
  atomic_store(&queued, n + 1);
  if (atomic_load(&worker_sleeping)) {
    pthread_mutex_lock(&wake_lock);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&wake_lock);
  }
  return tpr_ok_status();
}

tpr_status_t tpr_async_drain_locked(void) {
  if (!worker_running) return tpr_ok_status();
  wait_done(atomic_load(&queued));
  pthread_mutex_lock(&side_lock);
  tpr_storage_t** d = dead;
  int nd = num_dead;
  tpr_storage_t** f = failed;
  int nf = num_failed;
  tpr_status_t err = first_error;
  dead = failed = NULL;
  num_dead = cap_dead = num_failed = cap_failed = 0;
  first_error = tpr_ok_status();
  pthread_mutex_unlock(&side_lock);
  for (int i = 0; i < nd; i++) tpr_storage_destroy_locked(d[i]);
  if (!tpr_status_is_ok(err)) {
    err = tpr_status_annotate(err, "an op dispatched earlier failed");
    tpr_eager_note_lost(tpr_status_message(err));
  }
  for (int i = 0; i < nf; i++) {
    f[i]->lost = true;
    if (atomic_fetch_sub(&f[i]->ref, 1) == 1) tpr_storage_destroy_locked(f[i]);
  }
  tpr_free(d);
  tpr_free(f);
  return err;
}
