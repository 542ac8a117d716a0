//===--- tpr/runtime.h - PJRT plugins, clients, buffers, executables ------===//
//
// A small C API over the PJRT C API. It loads a PJRT plugin (XLA's CPU
// plugin, XLA's CUDA plugin or libtpu), creates a client, moves arrays between
// host and device, compiles StableHLO text and runs the executables.
//
// Ownership follows CoreFoundation rules: _create/_load/_compile/_from_host
// return a +1 reference; getters borrow; keepers call _retain. Buffers and
// executables are reference counted and thread-safe to retain/release.
// A plugin stays loaded for the life of the process. No PJRT type or
// PJRT_Error* crosses this header.
//
//   tpr_plugin_t* plugin;  tpr_client_t* client;  tpr_executable_t* exe;
//   TPR_RETURN_IF_ERROR(tpr_plugin_load(path, &plugin));
//   TPR_RETURN_IF_ERROR(tpr_client_create(plugin, &options, &client));
//   TPR_RETURN_IF_ERROR(tpr_executable_compile(client, text, len, &exe));
//   TPR_RETURN_IF_ERROR(tpr_buffer_from_host(client, 0, TPR_DTYPE_F32,
//                                            dims, 2, host, &x));
//   TPR_RETURN_IF_ERROR(tpr_executable_execute(exe, 0, &x, 1, NULL, &y));
//   TPR_RETURN_IF_ERROR(tpr_buffer_to_host(y, out, sizeof out));
//
//===----------------------------------------------------------------------===//
#ifndef TPR_RUNTIME_H_
#define TPR_RUNTIME_H_

#include "tpr/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPR_MAX_RANK 16  // PyTorch allows 64, CUDA kernels 25; models reach 10

typedef struct tpr_plugin tpr_plugin_t;
typedef struct tpr_client tpr_client_t;
typedef struct tpr_buffer tpr_buffer_t;
typedef struct tpr_executable tpr_executable_t;

//===--- plugins ----------------------------------------------------------===//

typedef enum tpr_plugin_kind_e {
  TPR_PLUGIN_KIND_OTHER = 0,
  TPR_PLUGIN_KIND_CPU = 1,
  TPR_PLUGIN_KIND_CUDA = 2,
  TPR_PLUGIN_KIND_TPU = 3,
} tpr_plugin_kind_t;

// Finds a plugin library. |spec| is NULL or "" (automatic: libtpu when a TPU
// is present, the CUDA plugin when installed and a GPU is present, else the
// CPU plugin), "cpu", "cuda", "tpu", or a path to a .so. Known wheel layouts
// are looked up under each of |search_dirs| (site-packages folders).
// On success *out_path is a tpr_malloc'd string the caller frees with
// tpr_free. NOT_FOUND names the package to install.
tpr_status_t tpr_plugin_discover(const char* spec,
                                 const char* const* search_dirs,
                                 size_t num_search_dirs, char** out_path)
    TPR_MUST_USE_RESULT;

// dlopens |path|, checks the PJRT API major version and that the minor
// version is one we support, and calls PJRT_Plugin_Initialize. Loading the
// same path twice returns the same plugin. Plugins are never unloaded.
tpr_status_t tpr_plugin_load(const char* path, tpr_plugin_t** out_plugin)
    TPR_MUST_USE_RESULT;

typedef struct tpr_plugin_info {
  const char* path;
  tpr_plugin_kind_t kind;  // guessed from the path and platform name
  int api_major;
  int api_minor;
  // From PJRT_Plugin_Attributes where the plugin reports them, else -1s.
  int64_t xla_version;
  int64_t stablehlo_current_version[3];
  int64_t stablehlo_minimum_version[3];
} tpr_plugin_info_t;

void tpr_plugin_get_info(const tpr_plugin_t* plugin, tpr_plugin_info_t* out);

//===--- clients and devices ---------------------------------------------===//

typedef struct tpr_client_options {
  // CPU plugin only: number of virtual devices; 0 keeps the plugin default.
  int64_t cpu_device_count;
  // Make every PJRT execute call on the caller's thread. By default a
  // thread of the client's makes them in issue order, so the caller goes
  // on to its next op while the last one runs.
  bool synchronous_launch;
  // CPU plugin only: leave glibc's malloc thresholds alone. By default the
  // client raises them (see tpr_client_create), because device buffers are
  // blocks of this process's heap.
  bool release_host_memory;
} tpr_client_options_t;

void tpr_client_options_initialize(tpr_client_options_t* options);

// Creates a client. Only options the plugin kind understands are passed (the
// CPU plugin rejects unknown names).
tpr_status_t tpr_client_create(tpr_plugin_t* plugin,
                               const tpr_client_options_t* options,
                               tpr_client_t** out_client) TPR_MUST_USE_RESULT;
// Destroys the client. All buffers and executables must be released first.
void tpr_client_destroy(tpr_client_t* client);

tpr_plugin_t* tpr_client_plugin(const tpr_client_t* client);
const char* tpr_client_platform_name(const tpr_client_t* client);     // "cpu"
const char* tpr_client_platform_version(const tpr_client_t* client);
// Addressable devices, indexed by ordinal 0..count-1.
int tpr_client_device_count(const tpr_client_t* client);
const char* tpr_client_device_kind(const tpr_client_t* client, int ordinal);
int64_t tpr_client_device_id(const tpr_client_t* client, int ordinal);

typedef struct tpr_memory_stats {
  int64_t bytes_in_use;       // live device buffers on this device
  int64_t peak_bytes_in_use;  // high-water mark since the last reset
  int64_t bytes_limit;        // total memory usable by the device
  int64_t bytes_free;         // what it can still allocate (see below)
  int64_t num_buffers;        // live buffers on this device
  bool from_plugin;           // false: the runtime's own accounting
} tpr_memory_stats_t;

// Real memory figures. From PJRT_Device_MemoryStats when the plugin reports
// them; otherwise (the CPU plugin) the runtime's own count of the bytes of
// live buffers, with bytes_limit = physical memory of the host (or its
// cgroup's limit). bytes_free = bytes_limit - bytes_in_use, and on a CPU
// plugin no more than the host has available now (MemAvailable, the
// cgroup's limit less its usage): other processes use that memory too.
tpr_status_t tpr_client_memory_stats(tpr_client_t* client, int ordinal,
                                     tpr_memory_stats_t* out)
    TPR_MUST_USE_RESULT;
void tpr_client_reset_peak_memory(tpr_client_t* client, int ordinal);

// CPU plugin: returns free heap pages to the operating system where glibc
// can (malloc_trim: the main heap, and free blocks inside thread heaps; a
// thread heap's top is returned on its next large free). Other plugins:
// nothing to do.
void tpr_client_empty_cache(tpr_client_t* client);

//===--- buffers ----------------------------------------------------------===//

// Copies dense row-major |data| to a new device buffer of |dtype|[dims] on
// device |ordinal|. |data| may be reused as soon as this returns.
tpr_status_t tpr_buffer_from_host(tpr_client_t* client, int ordinal,
                                  tpr_dtype_t dtype, const int64_t* dims,
                                  int rank, const void* data,
                                  tpr_buffer_t** out_buffer)
    TPR_MUST_USE_RESULT;

// Lends dense row-major |data| to a new device buffer of |dtype|[dims].
// Where device memory is host memory (the CPU plugin) the buffer lives in
// |data| itself, with no copy, when |data| is 64-byte aligned; otherwise the
// plugin copies. on_done(ctx) runs exactly once when the runtime no longer
// needs |data|: before this returns if it copied or failed, else when the
// buffer and anything that took its memory over (a donation) are gone,
// possibly on another thread. Until then the caller must neither write nor
// free |data|.
tpr_status_t tpr_buffer_lend_host(tpr_client_t* client, int ordinal,
                                  tpr_dtype_t dtype, const int64_t* dims,
                                  int rank, void* data,
                                  void (*on_done)(void* ctx), void* ctx,
                                  tpr_buffer_t** out_buffer)
    TPR_MUST_USE_RESULT;

// Waits for |buffer| and copies it to |dst| as dense row-major bytes.
// |dst_size| must equal tpr_buffer_byte_size. Returns the error of the
// computation that produced the buffer, if it failed.
tpr_status_t tpr_buffer_to_host(tpr_buffer_t* buffer, void* dst,
                                size_t dst_size) TPR_MUST_USE_RESULT;

// Where device memory is host memory (the CPU plugin): waits for |buffer|
// and sets *out_data to its dense row-major bytes, readable while the
// caller holds a reference and nothing donates the buffer. Elsewhere, or
// for an empty buffer, sets NULL (copy with tpr_buffer_to_host instead).
tpr_status_t tpr_buffer_host_pointer(tpr_buffer_t* buffer,
                                     const void** out_data)
    TPR_MUST_USE_RESULT;

// Blocks until |buffer| is ready; returns the producing computation's error.
tpr_status_t tpr_buffer_await(tpr_buffer_t* buffer) TPR_MUST_USE_RESULT;
// Whether |buffer| holds its value now, computed without error: launched,
// and its ready event complete. Never waits.
bool tpr_buffer_is_ready(tpr_buffer_t* buffer);

tpr_buffer_t* tpr_buffer_retain(tpr_buffer_t* buffer);
void tpr_buffer_release(tpr_buffer_t* buffer);  // NULL is fine

tpr_dtype_t tpr_buffer_dtype(const tpr_buffer_t* buffer);
int tpr_buffer_rank(const tpr_buffer_t* buffer);
const int64_t* tpr_buffer_dims(const tpr_buffer_t* buffer);
int64_t tpr_buffer_numel(const tpr_buffer_t* buffer);
size_t tpr_buffer_byte_size(const tpr_buffer_t* buffer);  // numel * itemsize
int tpr_buffer_device(const tpr_buffer_t* buffer);         // ordinal
tpr_client_t* tpr_buffer_client(const tpr_buffer_t* buffer);
// True once the buffer was donated to an execution (its contents are gone).
bool tpr_buffer_is_donated(const tpr_buffer_t* buffer);
// References held (tpr_buffer_retain), less those of launches still queued
// on the launch thread: a moment's value when other threads hold some.
int tpr_buffer_holders(const tpr_buffer_t* buffer);

//===--- executables ------------------------------------------------------===//

// Compiles a StableHLO module (text, "mlir" format, entry @main) as a
// portable executable: one compile runs on any device of the client.
tpr_status_t tpr_executable_compile(tpr_client_t* client, const char* mlir,
                                    size_t mlir_size,
                                    tpr_executable_t** out_executable)
    TPR_MUST_USE_RESULT;

// Tiered compilation. The first tier compiles in a fraction of the time
// and runs slower (XLA:CPU with its LLVM optimisation off; other plugins
// may ignore the setting); tpr_executable_upgrade then compiles |mlir|, the
// same module, fully and swaps that code in, so every holder of the
// executable runs the full tier from its next launch. The upgrade may run
// on any thread while the executable is being launched; the first tier's
// code is freed with the executable.
tpr_status_t tpr_executable_compile_first_tier(tpr_client_t* client, const char* mlir,
                                               size_t mlir_size,
                                               tpr_executable_t** out_executable)
    TPR_MUST_USE_RESULT;
bool tpr_executable_is_first_tier(const tpr_executable_t* executable);
tpr_status_t tpr_executable_upgrade(tpr_executable_t* executable, const char* mlir,
                                    size_t mlir_size) TPR_MUST_USE_RESULT;

// Serializes for a persistent cache; *out_data is tpr_malloc'd.
tpr_status_t tpr_executable_serialize(tpr_executable_t* executable,
                                      void** out_data, size_t* out_size)
    TPR_MUST_USE_RESULT;
tpr_status_t tpr_executable_deserialize(tpr_client_t* client, const void* data,
                                        size_t size,
                                        tpr_executable_t** out_executable)
    TPR_MUST_USE_RESULT;

size_t tpr_executable_num_outputs(const tpr_executable_t* executable);

// An executable whose code comes later (a compile still running): its
// outputs' types are known now (|dtypes| as tpr_dtype_t values, ranks, and
// dims row by row, TPR_MAX_RANK per output), so launches can be queued on
// it; each waits until tpr_executable_fulfil gives it code, and fails with
// the compile's error if that failed. Its arguments are not checked against
// a signature.
tpr_status_t tpr_executable_create_pending(tpr_client_t* client, size_t num_outputs,
                                           const int32_t* dtypes, const int32_t* ranks,
                                           const int64_t* dims,
                                           tpr_executable_t** out_executable)
    TPR_MUST_USE_RESULT;
// Whether |executable| has its code (always, unless pending and unfulfilled).
bool tpr_executable_has_code(tpr_executable_t* executable);
// Gives pending |executable| the code of |compiled| (moved out of it; its
// outputs' types must equal the pending ones), or, with |compiled| NULL,
// the failure |error| (consumed). Once per pending executable, on any thread.
void tpr_executable_fulfil(tpr_executable_t* executable, tpr_executable_t* compiled,
                           tpr_status_t error);

// Runs |executable| on device |ordinal|. |outputs| receives num_outputs new
// buffers (+1 each). |donate| (may be NULL) marks arguments whose buffers the
// program may reuse for outputs (the module must declare the aliasing); a
// donated buffer is dead afterwards and must not be read again. Execution is
// asynchronous: errors of the computation surface when an output is awaited
// or read (an execution given a failed output fails the same way), unless
// |wait| is set, in which case this runs after everything issued before it,
// waits for the outputs and returns the error here.
tpr_status_t tpr_executable_execute(tpr_executable_t* executable, int ordinal,
                                    tpr_buffer_t* const* args, size_t num_args,
                                    const bool* donate, tpr_buffer_t** outputs,
                                    bool wait) TPR_MUST_USE_RESULT;

// Compiles a program of |num_replicas| replicas (1 to 127; its collectives
// span them: tpr_all_reduce and friends) with replica i on device i.
tpr_status_t tpr_executable_compile_replicated(tpr_client_t* client, const char* mlir,
                                               size_t mlir_size, int num_replicas,
                                               tpr_executable_t** out_executable)
    TPR_MUST_USE_RESULT;

// Runs a replicated executable on devices 0..num_replicas-1 in one launch
// (the replicas meet in XLA's rendezvous: launching them one after another
// from one thread would deadlock) and waits for it. |args| holds one row of
// |num_args| buffers per replica, each on its replica's device; |outputs|
// receives one row of num_outputs new buffers per replica.
tpr_status_t tpr_executable_execute_replicated(tpr_executable_t* executable,
                                               tpr_buffer_t* const* args, size_t num_args,
                                               tpr_buffer_t** outputs) TPR_MUST_USE_RESULT;

tpr_executable_t* tpr_executable_retain(tpr_executable_t* executable);
void tpr_executable_release(tpr_executable_t* executable);  // NULL is fine

//===--- counters ---------------------------------------------------------===//

typedef struct tpr_runtime_stats {
  int64_t compiles;         // compiles a caller waited for, first tiers included
  double compile_seconds;
  // Of those, the ones made on a thread marked by
  // tpr_runtime_mark_background_thread (torch.compile's side-by-side
  // compiles): callers wait for them later, if at all.
  int64_t background_compiles;
  double background_compile_seconds;
  int64_t first_tier_compiles;
  int64_t upgrades;         // background full compiles of first tiers
  double upgrade_seconds;
  int64_t executions;
  int64_t h2d_transfers;
  int64_t h2d_bytes;
  int64_t d2h_transfers;
  int64_t d2h_bytes;
} tpr_runtime_stats_t;

void tpr_runtime_get_stats(tpr_runtime_stats_t* out);
// Counts the compiles this thread makes as background ones from now on.
void tpr_runtime_mark_background_thread(void);
void tpr_runtime_reset_stats(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TPR_RUNTIME_H_
