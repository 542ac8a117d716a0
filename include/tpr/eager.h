//===--- tpr/eager.h - storages and the eager op executor -----------------===//
//
// The bridge between PyTorch's storage model and opaque PJRT buffers.
//
// A tpr_storage_t is one PyTorch storage: a byte count, a device, and (once
// something was written) one rank-1 device buffer of some element type. A
// tensor is a strided window into a storage (tpr_tensor_ref_t). Storages
// materialise lazily: the allocator only learns a byte count, and the first
// write decides the buffer's element type.
//
// tpr_eager_run executes one ATen op: it builds a graph that reads every
// input window from its storage buffer, applies the lowering rule, writes
// each result into its target window, and swaps the new buffers into the
// target storages, so every alias of a storage sees the write. The graph is
// hashed and its executable cached, so a repeated op signature compiles
// once. In fused mode (below) the op is appended to a pending graph that
// runs later, at a cut. Execution is asynchronous unless the context runs in launch-blocking
// mode; a computation's error then surfaces when a result is read.
//
// The executor is thread-safe (one lock): PyTorch runs backward on its own
// thread.
//
//===----------------------------------------------------------------------===//
#ifndef TPR_EAGER_H_
#define TPR_EAGER_H_

#include "tpr/lower.h"
#include "tpr/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

//===--- the process-wide device context ----------------------------------===//

typedef struct tpr_eager_options {
  const char* plugin_spec;           // see tpr_plugin_discover; NULL = auto
  const char* const* search_dirs;    // where plugin wheels live
  size_t num_search_dirs;
  int64_t cpu_device_count;          // CPU plugin: virtual devices (0 = 1)
  bool launch_blocking;              // wait for every op, report errors there
  bool synchronous_launch;           // no launch thread (tpr_client_options_t)
  bool release_host_memory;          // CPU plugin: keep malloc's defaults
  bool fused;                        // start in fused eager mode
  int64_t fuse_max_ops;              // fused graph size bound (0 = default)
  const char* cache_dir;             // persistent executable cache; NULL/"" off
  int64_t cache_max_bytes;           // its size bound (0 = 2 GiB)
  int64_t memory_cache_max_nodes;    // in-memory executable cache bound, in
                                     // graph nodes (0 = 4Mi)
} tpr_eager_options_t;

// Loads the plugin and creates the client, once. Later calls return the
// first call's status (a failed init is remembered, with its message).
tpr_status_t tpr_eager_init(const tpr_eager_options_t* options)
    TPR_MUST_USE_RESULT;
bool tpr_eager_is_initialized(void);
// True in a process forked after its parent started the device: the client
// it inherited cannot run anything (its threads stayed in the parent).
bool tpr_eager_in_bad_fork(void);
// FAILED_PRECONDITION naming the 'spawn' start method in such a process.
tpr_status_t tpr_eager_check_process(void) TPR_MUST_USE_RESULT;
// The client, or NULL before a successful init.
tpr_client_t* tpr_eager_client(void);
void tpr_eager_set_launch_blocking(bool on);
bool tpr_eager_launch_blocking(void);

//===--- storages ----------------------------------------------------------===//

typedef struct tpr_storage tpr_storage_t;

// A storage of |nbytes| on device |ordinal|, with no buffer yet.
tpr_status_t tpr_storage_create(int ordinal, size_t nbytes,
                                tpr_storage_t** out_storage)
    TPR_MUST_USE_RESULT;
tpr_storage_t* tpr_storage_retain(tpr_storage_t* storage);
// NULL is fine. Takes the executor lock (a dying storage leaves the pending
// graph), so never call it with that lock held.
void tpr_storage_release(tpr_storage_t* storage);
size_t tpr_storage_nbytes(const tpr_storage_t* storage);
int tpr_storage_device(const tpr_storage_t* storage);
// The current buffer (borrowed), or NULL if never written.
tpr_buffer_t* tpr_storage_buffer(const tpr_storage_t* storage);
// Grows or shrinks to |nbytes|, keeping the common prefix of the contents.
tpr_status_t tpr_storage_resize(tpr_storage_t* storage, size_t nbytes)
    TPR_MUST_USE_RESULT;
// Bytes of device memory held by live storage buffers on |ordinal|.
int64_t tpr_storage_bytes_in_use(int ordinal);

//===--- tensors: strided windows into storages ---------------------------===//

typedef struct tpr_tensor_ref {
  tpr_storage_t* storage;  // borrowed
  tpr_dtype_t dtype;
  int32_t rank;
  int64_t sizes[TPR_MAX_RANK];
  int64_t strides[TPR_MAX_RANK];  // in elements
  int64_t offset;                 // storage offset, in elements
} tpr_tensor_ref_t;

int64_t tpr_tensor_ref_numel(const tpr_tensor_ref_t* ref);

// Copies dense row-major host data (|ref|'s dtype and sizes) into the window.
tpr_status_t tpr_tensor_write_host(const tpr_tensor_ref_t* ref,
                                   const void* data, size_t size)
    TPR_MUST_USE_RESULT;
// As tpr_tensor_write_host, but lends |data| to the runtime instead of
// copying it where the device works in host memory (tpr_buffer_lend_host:
// on_done(ctx) runs exactly once, when |data| is the caller's again; until
// then it must be neither written nor freed).
tpr_status_t tpr_tensor_lend_host(const tpr_tensor_ref_t* ref, void* data,
                                  size_t size, void (*on_done)(void* ctx),
                                  void* ctx) TPR_MUST_USE_RESULT;
// Strict eager's fill of a whole storage from the host: |item| (|item_size|
// bytes, the window's dtype) repeated over it, uploaded instead of run as a
// program, so a first zeros() or full() of a shape compiles nothing. Sets
// *filled, or leaves it false for the caller's program to do the fill: in
// fused mode (a fill costs nothing inside the pending graph), for a window
// that is not its whole storage, and above a size where the device's own
// fill is cheaper than the copy (1 MiB where device memory is host memory,
// 64 KiB across a bus).
tpr_status_t tpr_tensor_fill_host(const tpr_tensor_ref_t* ref, const void* item,
                                  size_t item_size, bool* filled)
    TPR_MUST_USE_RESULT;
// Copies the window to dense row-major host memory; waits for pending work.
tpr_status_t tpr_tensor_read_host(const tpr_tensor_ref_t* ref, void* data,
                                  size_t size) TPR_MUST_USE_RESULT;
// Waits until the window's value is computed: pending work that writes
// its storage has run and the buffer is ready. Returns that work's error.
tpr_status_t tpr_tensor_await(const tpr_tensor_ref_t* ref) TPR_MUST_USE_RESULT;
// Where device memory is host memory: the window's bytes in place, once
// pending work that writes it has run, if the window is dense (row-major,
// the buffer's dtype). *out_hold is a reference that keeps them valid
// (release it with tpr_buffer_release); until then nothing may write the
// storage. Otherwise sets both to NULL: read with tpr_tensor_read_host.
tpr_status_t tpr_tensor_host_view(const tpr_tensor_ref_t* ref,
                                  const void** out_data,
                                  tpr_buffer_t** out_hold) TPR_MUST_USE_RESULT;
// As tpr_tensor_host_view, but never waits: true, with the bytes and their
// hold, only if the window's value is already computed (no pending work
// writes it, its buffer is ready) and the device offers host pointers.
bool tpr_tensor_host_view_ready(const tpr_tensor_ref_t* ref, const void** out_data,
                                tpr_buffer_t** out_hold);
// Waits until every buffer of the device is ready (torch.tpu.synchronize).
tpr_status_t tpr_eager_synchronize(int ordinal) TPR_MUST_USE_RESULT;

//===--- running ATen ops -------------------------------------------------===//

// One argument of an op call. |arg| holds the kind and the plain values
// (ints, doubles, lists, dtype, ...) exactly as the rule will see them; the
// executor fills arg.value/arg.values from the fields below.
typedef struct tpr_eager_arg {
  tpr_arg_t arg;
  const tpr_tensor_ref_t* tensor;          // TENSOR (unless is_scalar)
  tpr_buffer_t* buffer;  // TENSOR alternative: a dense device buffer of
                         // exactly the argument's type (borrowed)
  const tpr_tensor_ref_t* const* tensors;  // TENSOR_LIST, arg.count entries,
                                           // NULL for None
  tpr_dtype_t scalar_dtype;                // TENSOR with arg.is_scalar:
  union {                                  // F64, S64, BOOL (or C128: re/im)
    double d;
    int64_t i;
    bool b;
    double c[2];
  } scalar;
  uint64_t rng_state[2];  // GENERATOR: (seed, offset)
} tpr_eager_arg_t;

typedef struct tpr_eager_call {
  const char* op_name;  // the rule to run, e.g. "aten::add.Tensor"
  int device;
  const tpr_eager_arg_t* args;
  int32_t num_args;
  const tpr_type_t* out_types;  // from PyTorch's meta kernels
  int32_t num_outs;
  // The window each result is written into (fresh outputs are windows over
  // new, unwritten storages), one per output. Must be non-overlapping.
  const tpr_tensor_ref_t* const* out_targets;
  // Optional rule override (NULL: look op_name up in the rule table), and
  // data it reads from its context (a kernel). Calls with an override never
  // replay a remembered plan, so the data need not be in any signature.
  tpr_lower_fn_t lower;
  const void* rule_data;
} tpr_eager_call_t;

tpr_status_t tpr_eager_run(const tpr_eager_call_t* call) TPR_MUST_USE_RESULT;

// A rule for device-to-device copies: args[0] converted to out_types[0]'s
// dtype and broadcast to its shape.
tpr_status_t tpr_eager_lower_copy(tpr_lower_ctx_t* ctx);

//===--- fused eager -------------------------------------------------------===//
//
// In fused mode tpr_eager_run only appends the op to a pending graph; the
// graph is compiled (cached by hash) and run at a cut: a host read, a
// synchronize, a size limit, a device or mode change, or an explicit flush.

// Why a pending graph was cut (metrics).
typedef enum tpr_cut_cause {
  TPR_CUT_HOST_READ = 0,   // .cpu(), .item(), printing, data-dependent shapes
  TPR_CUT_HOST_WRITE,      // a host copy into a storage the graph touches
  TPR_CUT_SYNCHRONIZE,     // torch.tpu.synchronize()
  TPR_CUT_SIZE_LIMIT,      // the graph reached its op bound
  TPR_CUT_DEVICE_CHANGE,   // an op on another device
  TPR_CUT_MODE_CHANGE,     // leaving fused mode
  TPR_CUT_RESIZE,          // a storage the graph touches changed size
  TPR_CUT_EXPLICIT,        // tpr_eager_flush from the API (mark_step)
  TPR_CUT_OTHER,           // anything that reads storages directly
  TPR_CUT_LOOP,            // a repeating op sequence reached a point where
                           // a size-limit cut happened before, so loops
                           // without a sync reuse a few graphs
  TPR_CUT_COUNT_
} tpr_cut_cause_t;

const char* tpr_cut_cause_name(tpr_cut_cause_t cause);

// Turning fused mode off runs the pending graph (its status is returned).
tpr_status_t tpr_eager_set_fused(bool on) TPR_MUST_USE_RESULT;
bool tpr_eager_fused(void);
// The graph is cut once it holds |n| ops (<= 0: the default, 1024).
void tpr_eager_set_fuse_max_ops(int64_t n);
// Compiles and runs the pending graph, if any; no-op in strict mode.
tpr_status_t tpr_eager_flush(tpr_cut_cause_t cause) TPR_MUST_USE_RESULT;

// Runs pending work, waits for it, and frees the in-memory executable cache
// and the executor's scratch memory (they regrow on demand).
tpr_status_t tpr_eager_trim(void) TPR_MUST_USE_RESULT;

//===--- the persistent executable cache ---------------------------------===//
//
// Executables compiled by this process are also written under
// <cache_dir>/<plugin id>/, and a later process loads them instead of
// compiling. Entries that do not verify are deleted and recompiled; an
// unusable folder turns the cache off with one warning.

typedef struct tpr_disk_cache_stats {
  int64_t hits;
  int64_t misses;
  int64_t writes;
  int64_t corrupt;    // entries found damaged or foreign (and recompiled)
  int64_t evictions;  // entries removed to stay under the size bound
  bool disabled;
} tpr_disk_cache_stats_t;

// (Re)points the cache at |root| ("" or NULL: off). Needs an initialized
// context (the plugin's identity is part of the path).
void tpr_disk_cache_configure(const char* root, int64_t max_bytes);
void tpr_disk_cache_get_stats(tpr_disk_cache_stats_t* out);
void tpr_disk_cache_reset_stats(void);
// The folder in use ("" when off). Borrowed.
const char* tpr_disk_cache_dir(void);

//===--- counters ---------------------------------------------------------===//

typedef struct tpr_eager_stats {
  int64_t ops;             // tpr_eager_run calls that executed or were fused
  int64_t cache_hits;      // executable found in memory
  int64_t cache_misses;    // not in memory: loaded from disk or compiled
  int64_t replayed_ops;    // strict ops run from a remembered plan (hits too)
  int64_t cached_executables;
  int64_t cache_evictions;  // executables dropped to stay under the bound
  int64_t fused_ops;       // ops appended to a pending graph in fused mode
  int64_t fused_graphs;    // pending graphs run (one per cut)
  int64_t host_fills;      // fills uploaded from the host (tpr_tensor_fill_host)
  int64_t cuts[TPR_CUT_COUNT_];  // cuts by cause
  int64_t pending_ops;     // ops waiting in the pending graph now
  int64_t donated_buffers;  // storage buffers updated in place by donation
} tpr_eager_stats_t;

void tpr_eager_get_stats(tpr_eager_stats_t* out);

// Tiered compilation (TORCH_TPU_TIERED_COMPILE): new programs run from a
// quick first-tier compile while a background thread compiles them fully.
typedef struct tpr_tierup_stats {
  int64_t pending;   // programs still running their first tier's code
  int64_t failures;  // full compiles that failed (the first tier stays)
} tpr_tierup_stats_t;
void tpr_eager_get_tierup_stats(tpr_tierup_stats_t* out);
// Blocks until no background compile is queued or running (each finished
// executable is on disk by then), or until |timeout_seconds| have passed
// (<= 0: no limit); returns whether none is left. Call without the
// executor lock.
bool tpr_eager_wait_for_upgrades(double timeout_seconds);
void tpr_eager_reset_stats(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TPR_EAGER_H_
