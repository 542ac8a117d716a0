// The launch thread: executions in issue order, off the caller's thread.
//
// PJRT_LoadedExecutable_Execute runs small programs inline on the calling
// thread (XLA:CPU), which makes the host pay for every op twice: once to
// build it, once to run it. Here the caller enqueues the call and gets
// output buffers at once (their PJRT buffers come later); one thread per
// client makes the PJRT calls in FIFO order, so an input made by an earlier
// call is always there when a later one runs. Anything that needs the PJRT
// buffer itself (a host read, a ready event) waits for its producer first
// (tpr_buffer_resolve).
//
// Waiting: the thread spins briefly after running out of work, then sleeps;
// a waiter spins briefly, then sleeps. Both spins are short so that neither
// steals a core from the plugin's own threads for long.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: clock_gettime
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pjrt/internal.h"

#define QUEUE_CAPACITY 1024   // power of two
#define INLINE_BUFFERS 12     // args + outputs kept in the entry itself
#define SPIN_NS 40000         // how long either side spins before sleeping
#define PAUSE_SPINS 256       // busy pauses before spinning turns to yields

typedef struct launch {
  int64_t seq;
  tpr_executable_t* exe;  // retained
  int ordinal;
  size_t num_args, num_outputs;
  tpr_buffer_t** args;     // retained; [num_args], then outputs (retained)
  bool* donate;            // NULL or [num_args]
  void* heap;              // the arrays when they do not fit inline
  tpr_buffer_t* inline_buffers[INLINE_BUFFERS];
  bool inline_donate[INLINE_BUFFERS];
} launch_t;

struct tpr_launcher {
  pthread_mutex_t lock;
  pthread_cond_t work;  // the thread sleeps here
  pthread_cond_t done;  // waiters sleep here
  pthread_t thread;
  bool thread_running;
  bool stopping;
  bool sleeping;           // the thread waits on |work|; guarded by lock
  atomic_int waiters;      // threads asleep (or about to be) on |done|
  // The last sequence number handed out: written under the lock, read
  // without it by the thread's spin as a hint.
  atomic_llong enqueued_seq;
  atomic_llong done_seq;   // every launch up to here has run
  int64_t head, tail;      // queue[head..tail) pending; under lock
  // PJRT buffers released by other threads, destroyed here: the thread
  // that allocated them frees them, which keeps malloc's per-thread caches
  // warm on both sides. Under lock; |spare| is the thread's other array.
  const PJRT_Api* api;
  PJRT_Buffer** dead;
  size_t num_dead, cap_dead;
  PJRT_Buffer** spare;
  size_t cap_spare;
  launch_t queue[QUEUE_CAPACITY];
};

static _Thread_local bool on_launch_thread;

// One step of a spin: a pause at first, then a yield of the core, so that
// on a machine with more runnable threads than cores the thread being
// waited for gets to run.
static inline void spin_step(int n) {
  if (n >= PAUSE_SPINS) {
    sched_yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

//===--- the thread -------------------------------------------------------===//

static void run_one(launch_t* l) {
  tpr_executable_t* e = l->exe;
  tpr_buffer_t** outs = l->args + l->num_args;
  tpr_status_t s = tpr_ok_status();
  // A failed input fails the call, as PJRT propagates errors through
  // buffers: its outputs carry the first cause.
  for (size_t i = 0; i < l->num_args && tpr_status_is_ok(s); i++) {
    const tpr_buffer_t* a = l->args[i];
    if (a->failure)
      s = tpr_status_make(tpr_status_code(a->failure),
                          "an input of this computation failed: %s",
                          tpr_status_message(a->failure));
    else if (!a->buffer)
      s = TPR_ERR(INTERNAL, "input %zu was never computed", i);
  }
  PJRT_Buffer* stack_out[INLINE_BUFFERS];
  PJRT_Buffer** out = stack_out;
  if (tpr_status_is_ok(s) && l->num_outputs > INLINE_BUFFERS) {
    out = (PJRT_Buffer**)tpr_malloc(l->num_outputs * sizeof *out);
    if (!out) s = TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (tpr_status_is_ok(s))
    s = tpr_executable_run(e, l->ordinal, l->args, l->num_args, l->donate,
                           out, NULL);
  for (size_t i = 0; i < l->num_outputs; i++) {
    if (tpr_status_is_ok(s)) {
      outs[i]->buffer = out[i];
    } else {
      outs[i]->failure = tpr_status_make(tpr_status_code(s), "%s",
                                         tpr_status_message(s));
    }
  }
  if (out != stack_out) tpr_free(out);
  tpr_status_free(s);
}

static void release_one(launch_t* l) {
  for (size_t i = 0; i < l->num_args + l->num_outputs; i++) {
    if (l->args[i]) atomic_fetch_sub_explicit(&l->args[i]->queued, 1, memory_order_release);
    tpr_buffer_release(l->args[i]);
  }
  tpr_executable_release(l->exe);
  tpr_free(l->heap);
}

static bool idle(const tpr_launcher_t* q) {
  return q->head == q->tail && q->num_dead == 0;
}

// Destroys the buried buffers; called and returns with the lock held.
static void destroy_dead(tpr_launcher_t* q) {
  PJRT_Buffer** mine = q->dead;
  size_t n = q->num_dead, cap = q->cap_dead;
  q->dead = q->spare;
  q->cap_dead = q->cap_spare;
  q->num_dead = 0;
  pthread_mutex_unlock(&q->lock);
  for (size_t i = 0; i < n; i++) tpr_pjrt_buffer_destroy(q->api, mine[i]);
  pthread_mutex_lock(&q->lock);
  q->spare = mine;
  q->cap_spare = cap;
}

static void* thread_main(void* arg) {
  tpr_launcher_t* q = (tpr_launcher_t*)arg;
  on_launch_thread = true;
  pthread_mutex_lock(&q->lock);
  for (;;) {
    if (q->num_dead) {
      destroy_dead(q);
      continue;
    }
    if (q->head == q->tail) {
      if (q->stopping) break;
      // Spin a while outside the lock: the next op usually comes within
      // microseconds, and sleeping costs a wake-up system call per op.
      pthread_mutex_unlock(&q->lock);
      int64_t until = tpr_now_ns() + SPIN_NS;
      int64_t seen = atomic_load_explicit(&q->done_seq, memory_order_relaxed);
      bool more = false;
      for (int n = 0; !more; n++) {
        spin_step(n);
        more = atomic_load_explicit(&q->enqueued_seq, memory_order_relaxed) != seen;
        if ((n & 15) == 15 && tpr_now_ns() > until) break;
      }
      pthread_mutex_lock(&q->lock);
      if (idle(q) && !q->stopping) {
        q->sleeping = true;
        while (idle(q) && !q->stopping) pthread_cond_wait(&q->work, &q->lock);
        q->sleeping = false;
      }
      continue;
    }
    launch_t l = q->queue[q->head % QUEUE_CAPACITY];
    // The slot is copied out: producers may reuse it once head moves.
    q->head++;
    pthread_mutex_unlock(&q->lock);
    if (l.heap == NULL) {  // arrays pointed into the slot: repoint
      l.args = l.inline_buffers;
      if (l.donate) l.donate = l.inline_donate;
    }
    run_one(&l);
    // The launch's references go before it counts as done: whoever waited
    // for it then sees the buffers' counts the launch left.
    int64_t seq = l.seq;
    release_one(&l);
    atomic_store(&q->done_seq, seq);
    if (atomic_load(&q->waiters) > 0) {
      pthread_mutex_lock(&q->lock);
      pthread_cond_broadcast(&q->done);
      pthread_mutex_unlock(&q->lock);
    }
    pthread_mutex_lock(&q->lock);
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

//===--- the callers' side ------------------------------------------------===//

static void wait_done(tpr_launcher_t* q, int64_t seq) {
  if (atomic_load(&q->done_seq) >= seq) return;
  int64_t until = tpr_now_ns() + SPIN_NS;
  for (int n = 0; atomic_load(&q->done_seq) < seq; n++) {
    spin_step(n);
    if ((n & 15) == 15 && tpr_now_ns() > until) break;
  }
  if (atomic_load(&q->done_seq) >= seq) return;
  pthread_mutex_lock(&q->lock);
  atomic_fetch_add(&q->waiters, 1);
  while (atomic_load(&q->done_seq) < seq) pthread_cond_wait(&q->done, &q->lock);
  atomic_fetch_sub(&q->waiters, 1);
  pthread_mutex_unlock(&q->lock);
}

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static tpr_launcher_t* registry[16];
static int num_registered;

// A forked child has no launch thread: whatever the parent had queued will
// never run there. The child's launchers start over (new thread on the
// next launch) and the parent's queued outputs report that they were lost.
static void after_fork_in_child(void) {
  for (int i = 0; i < num_registered; i++) {
    tpr_launcher_t* q = registry[i];
    if (!q) continue;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
    q->thread_running = false;
    q->sleeping = false;
    atomic_store(&q->waiters, 0);
    q->head = q->tail;  // the parent's entries are abandoned (leaked)
    q->num_dead = 0;
    atomic_store(&q->done_seq, atomic_load(&q->enqueued_seq));
  }
}

static void register_launcher(tpr_launcher_t* q, bool add) {
  static bool hooked;
  pthread_mutex_lock(&registry_lock);
  if (!hooked) {
    pthread_atfork(NULL, NULL, after_fork_in_child);
    hooked = true;
  }
  if (add) {
    for (int i = 0; i < num_registered; i++)
      if (!registry[i]) { registry[i] = q; q = NULL; break; }
    if (q && num_registered < (int)(sizeof registry / sizeof registry[0]))
      registry[num_registered++] = q;
  } else {
    for (int i = 0; i < num_registered; i++)
      if (registry[i] == q) registry[i] = NULL;
  }
  pthread_mutex_unlock(&registry_lock);
}

tpr_launcher_t* tpr_launcher_create(const PJRT_Api* api) {
  tpr_launcher_t* q = (tpr_launcher_t*)tpr_calloc(1, sizeof *q);
  if (!q) return NULL;
  q->api = api;
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->work, NULL);
  pthread_cond_init(&q->done, NULL);
  atomic_init(&q->waiters, 0);
  atomic_init(&q->done_seq, 0);
  atomic_init(&q->enqueued_seq, 0);
  register_launcher(q, true);
  return q;
}

void tpr_launcher_drain(tpr_launcher_t* q) {
  if (!q) return;
  pthread_mutex_lock(&q->lock);
  int64_t last = atomic_load(&q->enqueued_seq);
  pthread_mutex_unlock(&q->lock);
  wait_done(q, last);
}

void tpr_launcher_destroy(tpr_launcher_t* q) {
  if (!q) return;
  pthread_mutex_lock(&q->lock);
  q->stopping = true;
  pthread_cond_signal(&q->work);
  bool joined = q->thread_running;
  pthread_mutex_unlock(&q->lock);
  if (joined) pthread_join(q->thread, NULL);  // it drains the queue first
  register_launcher(q, false);
  for (size_t i = 0; i < q->num_dead; i++)  // (no thread ever ran)
    tpr_pjrt_buffer_destroy(q->api, q->dead[i]);
  free(q->dead);
  free(q->spare);
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->work);
  pthread_cond_destroy(&q->done);
  tpr_free(q);
}

bool tpr_launcher_bury(tpr_launcher_t* q, PJRT_Buffer* buffer) {
  if (on_launch_thread) return false;  // it destroys its own at once
  pthread_mutex_lock(&q->lock);
  bool taken = q->thread_running && !q->stopping;
  if (taken && q->num_dead == q->cap_dead) {
    size_t cap = q->cap_dead ? 2 * q->cap_dead : 64;
    // (Plain realloc: the arrays live as long as the client, and tests
    // count tpr_malloc blocks per test.)
    PJRT_Buffer** grown = (PJRT_Buffer**)realloc(q->dead, cap * sizeof *grown);
    if (grown) {
      q->dead = grown;
      q->cap_dead = cap;
    } else {
      taken = false;
    }
  }
  if (taken) {
    q->dead[q->num_dead++] = buffer;
    if (q->sleeping) pthread_cond_signal(&q->work);
  }
  pthread_mutex_unlock(&q->lock);
  return taken;
}

bool tpr_buffer_launched(const tpr_buffer_t* b) {
  return !b->seq || atomic_load(&b->client->launcher->done_seq) >= b->seq;
}

void tpr_buffer_resolve_wait(tpr_buffer_t* b) {
  wait_done(b->client->launcher, b->seq);
}

tpr_status_t tpr_launcher_enqueue(tpr_launcher_t* q, tpr_executable_t* e,
                                  int ordinal, tpr_buffer_t* const* args,
                                  size_t num_args, const bool* donate,
                                  tpr_buffer_t** outputs, bool* taken) {
  *taken = false;
  size_t nout = e->num_outputs, nbuf = num_args + nout;
  launch_t l = {.exe = e, .ordinal = ordinal, .num_args = num_args,
                .num_outputs = nout};
  if (nbuf > INLINE_BUFFERS) {
    l.heap = tpr_malloc(nbuf * sizeof(tpr_buffer_t*) + num_args + 1);
    if (!l.heap) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
    l.args = (tpr_buffer_t**)l.heap;
    if (donate) l.donate = (bool*)(l.args + nbuf);
  } else {
    l.args = l.inline_buffers;
    if (donate) l.donate = l.inline_donate;
  }
  if (donate) memcpy(l.donate, donate, num_args);

  pthread_mutex_lock(&q->lock);
  if (!q->thread_running && !q->stopping) {
    if (pthread_create(&q->thread, NULL, thread_main, q) == 0)
      q->thread_running = true;
  }
  if (!q->thread_running) {  // no thread: the caller runs it itself
    pthread_mutex_unlock(&q->lock);
    tpr_free(l.heap);
    return tpr_ok_status();
  }
  while (q->tail - q->head == QUEUE_CAPACITY) {  // full: wait for room
    int64_t oldest = atomic_load(&q->enqueued_seq) - QUEUE_CAPACITY + 1;
    pthread_mutex_unlock(&q->lock);
    wait_done(q, oldest);
    pthread_mutex_lock(&q->lock);
  }
  l.seq = atomic_fetch_add(&q->enqueued_seq, 1) + 1;
  tpr_status_t s = tpr_ok_status();
  size_t made = 0;
  for (; made < nout; made++) {
    s = tpr_buffer_pending(e->client, ordinal, &e->sigs[made], l.seq,
                           &outputs[made]);
    if (!tpr_status_is_ok(s)) break;
  }
  if (!tpr_status_is_ok(s)) {
    // Nothing of this launch reached the queue: its number is given back.
    atomic_fetch_sub(&q->enqueued_seq, 1);
    pthread_mutex_unlock(&q->lock);
    for (size_t i = 0; i < made; i++) {
      tpr_buffer_release(outputs[i]);
      outputs[i] = NULL;
    }
    tpr_free(l.heap);
    return s;
  }
  for (size_t i = 0; i < num_args; i++) l.args[i] = tpr_buffer_retain(args[i]);
  for (size_t i = 0; i < nout; i++)
    l.args[num_args + i] = tpr_buffer_retain(outputs[i]);
  for (size_t i = 0; i < num_args + nout; i++)  // (counted before the thread can see them)
    if (l.args[i]) atomic_fetch_add_explicit(&l.args[i]->queued, 1, memory_order_relaxed);
  tpr_executable_retain(e);
  q->queue[q->tail % QUEUE_CAPACITY] = l;
  q->tail++;
  if (q->sleeping) pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->lock);
  *taken = true;
  return tpr_ok_status();
}
