// The process-wide device context: plugin, client, executor lock, the queue
// of in-flight results.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "eager/internal.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
static tpr_client_t* client;
static tpr_status_t init_error;  // remembered failure, owned here
static bool initialized;
static atomic_bool launch_blocking;

void tpr_eager_lock(void) { pthread_mutex_lock(&exec_lock); }
void tpr_eager_unlock(void) { pthread_mutex_unlock(&exec_lock); }

static tpr_status_t status_copy(tpr_status_t s) {
  if (tpr_status_is_ok(s)) return s;
  return tpr_status_make(tpr_status_code(s), "%s", tpr_status_message(s));
}

static tpr_status_t do_init(const tpr_eager_options_t* o) {
  char* path = NULL;
  TPR_RETURN_IF_ERROR(tpr_plugin_discover(o->plugin_spec, o->search_dirs,
                                          o->num_search_dirs, &path));
  tpr_plugin_t* plugin = NULL;
  tpr_status_t s = tpr_plugin_load(path, &plugin);
  tpr_free(path);
  TPR_RETURN_IF_ERROR(s);
  tpr_client_options_t co;
  tpr_client_options_initialize(&co);
  co.cpu_device_count = o->cpu_device_count > 0 ? o->cpu_device_count : 1;
  co.synchronous_launch = o->synchronous_launch;
  co.release_host_memory = o->release_host_memory;
  tpr_plugin_info_t info;
  tpr_plugin_get_info(plugin, &info);
  tpr_graph_set_swap_transposed_dots(info.kind == TPR_PLUGIN_KIND_CPU);
  // Row sums as products pay where XLA:CPU fuses a matrix-vector product
  // into the loop of its operand's producer, as the XLA of xla-cpu-pjrt
  // (PJRT C API 0.81) does; the newer one of lammps-jax-pjrt-cpu (0.115)
  // runs the product on its own, and layer norm got slower there. Plugins
  // newer than the one measured to pay keep the reductions.
  enum { kNewestApiMinorFusingProducts = 81 };
  tpr_graph_set_row_sums_as_dots(
      info.kind == TPR_PLUGIN_KIND_CPU && info.api_major == 0 &&
      info.api_minor <= kNewestApiMinorFusingProducts);
  return tpr_client_create(plugin, &co, &client);
}

// A process forked after the device started holds the parent's client but
// none of its threads (the plugin's thread pools, our launch threads):
// nothing it ran would ever finish. As with CUDA, it may not use the device.
static atomic_bool forked_after_init;

static void after_fork_in_child(void) {
  if (client) atomic_store(&forked_after_init, true);
}

bool tpr_eager_in_bad_fork(void) { return atomic_load(&forked_after_init); }

tpr_status_t tpr_eager_check_process(void) {
  if (!atomic_load(&forked_after_init)) return tpr_ok_status();
  return TPR_ERR(FAILED_PRECONDITION,
                 "Cannot re-initialize tpu in forked subprocess. To use tpu with "
                 "multiprocessing, you must use the 'spawn' start method (this process "
                 "was forked after its parent started the tpu device)");
}

tpr_status_t tpr_eager_init(const tpr_eager_options_t* options) {
  pthread_mutex_lock(&init_lock);
  if (atomic_load(&forked_after_init)) {
    pthread_mutex_unlock(&init_lock);
    return tpr_eager_check_process();
  }
  if (!initialized) {
    if (options->launch_blocking) atomic_store(&launch_blocking, true);
    init_error = do_init(options);
    initialized = true;
    pthread_atfork(NULL, NULL, after_fork_in_child);
    if (tpr_status_is_ok(init_error)) {
      tpr_disk_cache_configure(options->cache_dir, options->cache_max_bytes);
      tpr_eager_set_fuse_max_ops(options->fuse_max_ops);
      tpr_exec_cache_set_max_weight(options->memory_cache_max_nodes);
      if (options->fused) tpr_status_free(tpr_eager_set_fused(true));
    }
  }
  tpr_status_t s = status_copy(init_error);
  pthread_mutex_unlock(&init_lock);
  return s;
}

bool tpr_eager_is_initialized(void) { return client != NULL; }
tpr_client_t* tpr_eager_client(void) { return client; }
void tpr_eager_set_launch_blocking(bool on) { atomic_store(&launch_blocking, on); }
bool tpr_eager_launch_blocking(void) { return atomic_load(&launch_blocking); }

//===--- in-flight results ------------------------------------------------===//
//
// Results of recent executions, oldest first. synchronize() awaits them all;
// when the queue is full (in count or bytes) the oldest half is awaited,
// which bounds how far the host runs ahead of the device (like a CUDA launch
// queue).

#define PENDING_MAX 256
// Also bounded in bytes: a result the host has since replaced (an in-place
// update, a freed temporary) stays in memory while it waits here, so large
// ones make run-ahead cost memory a CUDA stream would not (training a 49M
// GPT in strict mode peaked at 3.5 GiB unbounded, 1.15 GiB at this bound,
// at the same speed). Small ops, where run-ahead pays, rarely reach it.
// A compiled program's results count only once replaced (see
// counted_bytes_locked): a compiled backward's launch waited 0.1 s for its
// forward, whose results it reads, and gained no memory by it.
#define PENDING_MAX_BYTES ((size_t)64 << 20)

typedef struct pending_entry {
  tpr_buffer_t* buffer;   // the launch's first result, awaited (retained)
  tpr_buffer_t** fresh;   // a program's new results (retained); NULL: |buffer| alone
  int num_fresh;
  size_t bytes;           // what the launch allocated
} pending_entry_t;

static pending_entry_t pending[PENDING_MAX];
static int pending_count;
static size_t pending_bytes;  // their sum: results the host runs ahead with
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t pending_waits;  // times the bound made the host wait

// The bytes in flight the bound counts; pending_lock held. An eager op's
// result counts whatever holds it (strict mode runs far ahead in small
// steps, and its in-place updates replace results faster than the launch
// thread issues them). A program's new results count once nothing but this
// queue holds them (replaced or freed since the launch): launches still
// queued on the launch thread hold their inputs and outputs without memory
// of their own, and results still in use (a forward's activations, which its
// backward reads) take their memory however long the host waits.
static size_t counted_bytes_locked(void) {
  size_t sum = 0;
  for (int i = 0; i < pending_count; i++) {
    const pending_entry_t* e = &pending[i];
    if (!e->fresh) {
      sum += e->bytes;
      continue;
    }
    for (int k = 0; k < e->num_fresh; k++) {
      const tpr_buffer_t* b = e->fresh[k];
      // (The first result is held twice here: as |buffer| and in |fresh|.)
      int ours = b == e->buffer ? 2 : 1;
      if (tpr_buffer_holders(b) == ours && !tpr_buffer_is_donated(b))
        sum += tpr_buffer_byte_size(b);
    }
  }
  return sum;
}

static bool over_bound_locked(void) {
  return pending_bytes > PENDING_MAX_BYTES && counted_bytes_locked() > PENDING_MAX_BYTES;
}

static void entry_release(pending_entry_t* e) {
  for (int k = 0; k < e->num_fresh; k++) tpr_buffer_release(e->fresh[k]);
  tpr_free(e->fresh);
  e->fresh = NULL;
  e->num_fresh = 0;
}

static tpr_status_t await_oldest(int n, tpr_buffer_t** taken) {
  // Called with pending_lock held: moves the n oldest out.
  for (int i = 0; i < n; i++) {
    taken[i] = pending[i].buffer;
    pending_bytes -= pending[i].bytes;
    entry_release(&pending[i]);
  }
  memmove(pending, pending + n, (size_t)(pending_count - n) * sizeof pending[0]);
  pending_count -= n;
  return tpr_ok_status();
}

static tpr_status_t await_all(tpr_buffer_t** bufs, int n) {
  tpr_status_t first = tpr_ok_status();
  for (int i = 0; i < n; i++) {
    // A donated buffer was consumed by a later execution, which waited for
    // it; there is nothing left to wait for.
    if (!tpr_buffer_is_donated(bufs[i]))
      first = tpr_status_join(first, tpr_buffer_await(bufs[i]));
    tpr_buffer_release(bufs[i]);
  }
  return first;
}

// Queues one launch: |fresh| (retained, owned by the entry) NULL for an
// entry of |buffer| alone.
static void push_entry(tpr_buffer_t* buffer, tpr_buffer_t** fresh, int num_fresh,
                       size_t bytes) {
  tpr_buffer_t* taken[PENDING_MAX / 2];
  int n = 0;
  pthread_mutex_lock(&pending_lock);
  if (pending_count == PENDING_MAX || (pending_count > 1 && over_bound_locked())) {
    n = pending_count / 2;
    (void)await_oldest(n, taken);
    pending_waits++;
  }
  pending[pending_count++] = (pending_entry_t){tpr_buffer_retain(buffer), fresh, num_fresh,
                                               bytes};
  pending_bytes += bytes;
  pthread_mutex_unlock(&pending_lock);
  // Bounding the run-ahead needs only the newest of the oldest half: an
  // await per buffer (an event object each) cost a tenth of a small op.
  // synchronize() still awaits every one. Errors of these computations also
  // live in the storages' buffers and surface when those are read; here we
  // only wait.
  if (n) {
    tpr_status_free(await_all(taken + n - 1, 1));
    for (int i = 0; i < n - 1; i++) tpr_buffer_release(taken[i]);
  }
}

void tpr_pending_push(tpr_buffer_t* buffer, size_t bytes) {
  push_entry(buffer, NULL, 0, bytes);
}

bool tpr_pending_can_donate(const tpr_buffer_t* b, int refs) {
  if (!b || tpr_buffer_is_donated(b)) return false;
  int holders = tpr_buffer_holders(b);
  if (holders <= refs) return holders == refs;  // (no scan: none of them is ours)
  int held = 0;  // this queue's references: it only awaits, which a donated
                 // buffer no longer needs
  pthread_mutex_lock(&pending_lock);
  for (int i = 0; i < pending_count; i++) {
    held += pending[i].buffer == b;
    for (int k = 0; k < pending[i].num_fresh; k++) held += pending[i].fresh[k] == b;
  }
  pthread_mutex_unlock(&pending_lock);
  return holders - held == refs;
}

void tpr_pending_push_results(tpr_buffer_t* first, tpr_buffer_t** fresh, int num_fresh,
                              size_t bytes) {
  // (No list, out of memory: the entry counts as |first| alone.)
  push_entry(first, fresh, fresh ? num_fresh : 0, bytes);
}

// A whole-graph program's results are all allocated at its launch, so
// bounding after the launch (as push does) comes too late for its large
// ones: a compiled training step's next forward would allocate its
// activations while the last backward and optimizer programs still hold
// the ones they replaced. When those pass the bound, the launches in
// flight are awaited first.
void tpr_pending_reserve(void) {
  tpr_buffer_t* taken[PENDING_MAX];
  int n = 0;
  pthread_mutex_lock(&pending_lock);
  if (pending_count > 0 && over_bound_locked()) {
    n = pending_count;
    (void)await_oldest(n, taken);
    pending_waits++;
  }
  pthread_mutex_unlock(&pending_lock);
  if (n) tpr_status_free(await_all(taken, n));  // errors surface at reads
}

int64_t tpr_pending_wait_count(void) {
  pthread_mutex_lock(&pending_lock);
  int64_t n = pending_waits;
  pthread_mutex_unlock(&pending_lock);
  return n;
}

tpr_status_t tpr_pending_drain(void) {
  tpr_buffer_t* taken[PENDING_MAX];
  pthread_mutex_lock(&pending_lock);
  int n = pending_count;
  (void)await_oldest(n, taken);
  pthread_mutex_unlock(&pending_lock);
  return await_all(taken, n);
}

tpr_status_t tpr_eager_synchronize(int ordinal) {
  (void)ordinal;
  TPR_RETURN_IF_ERROR(tpr_eager_flush(TPR_CUT_SYNCHRONIZE));  // (checks the process)
  return tpr_pending_drain();
}
