// Tiered compilation: a program the process has never seen is compiled at
// XLA's first tier and runs at once; one background thread recompiles it
// fully, swaps the code into the same executable (every holder: the
// in-memory cache, strict replay plans, compiled programs) and writes only
// the full code to the disk cache. A first step of many small programs then
// pays a fraction of XLA's compile time, and the steady state runs the code
// it always did.
//
// Off by default, on with TORCH_TPU_TIERED_COMPILE=1: XLA:CPU's first tier
// rounds some results differently from its full code (the suite saw an
// int64 linspace one off, a Linear's output change bits), so a program's
// results would depend on whether its upgrade had finished, within one
// process and between a cold and a warm one. Measured on the CPU plugin:
// the first strict training step of bench/cold_start.py 3.5 -> 3.1 s, fused
// 2.1 -> 1.7 s, a first randn 180 -> 68 ms.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: clock_gettime
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "eager/internal.h"

typedef struct job {
  struct job* next;
  tpr_executable_t* exe;  // retained
  uint64_t key[2];
  char* text;  // tpr_malloc'd StableHLO, owned
  size_t len;
} job_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static job_t *head, *tail;
static int unfinished;  // queued or compiling
static bool thread_started;
static int64_t failures;
static int enabled = -1;  // -1: not decided yet

bool tpr_tierup_enabled(void) {
  if (enabled < 0) {
    const char* env = getenv("TORCH_TPU_TIERED_COMPILE");
    enabled = env && *env && strcmp(env, "0") != 0;
  }
  return enabled > 0;
}

static void run_job(job_t* j, bool eager_locked) {
  tpr_status_t s = tpr_executable_upgrade(j->exe, j->text, j->len);
  if (tpr_status_is_ok(s)) {
    if (!eager_locked) tpr_eager_lock();
    tpr_disk_cache_store(j->key, j->exe);
    if (!eager_locked) tpr_eager_unlock();
  } else {
    // The first tier keeps running: slower, still correct.
    pthread_mutex_lock(&lock);
    failures++;
    pthread_mutex_unlock(&lock);
    if (getenv("TORCH_TPU_LOG_COMPILES"))
      fprintf(stderr, "torch_tpu: the full compile of a program failed, its first tier "
                      "stays: %s\n", tpr_status_message(s));
    tpr_status_free(s);
  }
  tpr_executable_release(j->exe);
  tpr_free(j->text);
  tpr_free(j);
}

static void* worker(void* arg) {
  (void)arg;
  // Below the threads a step waits on: the upgrade is never urgent.
  (void)setpriority(PRIO_PROCESS, 0, 10);  // Linux: this thread only
  pthread_mutex_lock(&lock);
  for (;;) {
    while (!head) pthread_cond_wait(&work, &lock);
    job_t* j = head;
    head = j->next;
    if (!head) tail = NULL;
    pthread_mutex_unlock(&lock);
    run_job(j, false);
    pthread_mutex_lock(&lock);
    if (--unfinished == 0) pthread_cond_broadcast(&idle);
  }
  return NULL;
}

tpr_status_t tpr_tierup_enqueue(const uint64_t key[2], tpr_executable_t* exe, char* text,
                                size_t len) {
  job_t* j = (job_t*)tpr_malloc(sizeof *j);
  if (!j) {
    tpr_free(text);
    return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory for a background compile");
  }
  *j = (job_t){NULL, tpr_executable_retain(exe), {key[0], key[1]}, text, len};
  pthread_mutex_lock(&lock);
  if (!thread_started) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      pthread_mutex_unlock(&lock);
      // No thread: the caller's thread does the upgrade, as an untiered
      // compile would have.
      run_job(j, true);
      return tpr_ok_status();
    }
    thread_started = true;
  }
  if (tail)
    tail->next = j;
  else
    head = j;
  tail = j;
  unfinished++;
  pthread_cond_signal(&work);
  pthread_mutex_unlock(&lock);
  return tpr_ok_status();
}

bool tpr_wait_for_zero(pthread_mutex_t* mu, pthread_cond_t* changed, const int* count,
                       double timeout_seconds) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  if (timeout_seconds > 0) {
    double whole = (double)(int64_t)timeout_seconds;
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((timeout_seconds - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(mu);
  while (*count) {
    if (timeout_seconds <= 0)
      pthread_cond_wait(changed, mu);
    else if (pthread_cond_timedwait(changed, mu, &until) != 0)
      break;
  }
  bool done = *count == 0;
  pthread_mutex_unlock(mu);
  return done;
}

bool tpr_eager_wait_for_upgrades(double timeout_seconds) {
  return tpr_wait_for_zero(&lock, &idle, &unfinished, timeout_seconds);
}

void tpr_eager_get_tierup_stats(tpr_tierup_stats_t* out) {
  pthread_mutex_lock(&lock);
  out->pending = unfinished;
  out->failures = failures;
  pthread_mutex_unlock(&lock);
}
