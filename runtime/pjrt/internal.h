//===--- runtime/pjrt/internal.h - the runtime's objects ------------------===//
//
// The structs behind the opaque handles of tpr/runtime.h, and the helpers
// shared by runtime/pjrt/*.c. Only files in runtime/pjrt/ include this.
//
//===----------------------------------------------------------------------===//
#ifndef TPR_RUNTIME_PJRT_INTERNAL_H_
#define TPR_RUNTIME_PJRT_INTERNAL_H_

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "runtime/internal.h"
#include "runtime/pjrt/abi.h"
#include "tpr/runtime.h"

// Process-lifetime; lives in a static table (loader.c), never freed.
typedef struct tpr_launcher tpr_launcher_t;

struct tpr_plugin {
  char path[PATH_MAX];
  void* handle;  // dlopen
  const PJRT_Api* api;
  tpr_plugin_info_t info;  // info.path == path
};

// One addressable device, with the runtime's own memory accounting.
typedef struct tpr_device_slot {
  PJRT_Device* device;
  int64_t id;
  char* kind;  // tpr_malloc'd
  atomic_llong bytes_in_use;
  atomic_llong peak_bytes_in_use;
  atomic_llong num_buffers;
} tpr_device_slot_t;

struct tpr_client {
  tpr_plugin_t* plugin;
  const PJRT_Api* api;
  PJRT_Client* client;
  char* platform_name;     // tpr_malloc'd
  char* platform_version;  // tpr_malloc'd
  int num_devices;
  tpr_device_slot_t* devices;  // [num_devices], tpr_malloc'd
  int64_t host_memory_bytes;   // physical RAM, for CPU bytes_limit
  // 0: not asked yet; 1: PJRT_Device_MemoryStats works; 2: it does not.
  atomic_int plugin_memory_stats;
  // CPU plugins: device memory is host memory, so to_host copies straight
  // from PJRT_Buffer_UnsafePointer. Cleared if the plugin refuses it.
  atomic_bool host_pointer_reads;
  tpr_launcher_t* launcher;  // NULL: executions run on the caller's thread
};

struct tpr_buffer {
  atomic_int refs;
  // Of |refs|, those held by launches queued on the launch thread (as an
  // input or an output), given back as each is issued.
  atomic_int queued;
  // Donated to an execution (in issue order: set when the execution is
  // issued); the PJRT buffer is gone, or will be once it runs.
  atomic_bool dead;
  int8_t dtype;
  int8_t rank;
  int16_t device;  // ordinal
  tpr_client_t* client;
  // The output of queued launch |seq| (0: none): |buffer| or |failure| is
  // set by the launch thread, and valid once tpr_buffer_resolve says so.
  int64_t seq;
  PJRT_Buffer* buffer;   // owned
  tpr_status_t failure;  // owned; the computation that made it failed
  int64_t dims[TPR_MAX_RANK];
};

// The code a pending executable waits for (tpr_executable_create_pending).
typedef struct tpr_pending_code {
  pthread_mutex_t lock;
  pthread_cond_t ready;
  bool done;             // |loaded| or |failure| is set
  tpr_status_t failure;  // owned
} tpr_pending_code_t;

struct tpr_executable {
  atomic_int refs;
  tpr_client_t* client;
  tpr_pending_code_t* pending;  // owned; NULL for an executable made with its code
  // Owned. Replaced once by tpr_executable_upgrade (a launch thread reads
  // it meanwhile); the code it replaced stays in |first_tier_code|.
  _Atomic(PJRT_LoadedExecutable*) loaded;
  PJRT_LoadedExecutable* first_tier_code;  // owned; NULL until upgraded
  atomic_bool first_tier;  // compiled by tpr_executable_compile_first_tier, not upgraded
  size_t num_outputs;
  int num_params;            // -1: unknown (no signature in the text)
  int num_replicas;          // 0: portable (one device, any); else replica i on device i
  tpr_tensor_sig_t* params;  // [num_params], after outputs in |sigs|
  tpr_tensor_sig_t sigs[];   // [num_outputs] outputs, then params
};

//===--- error.c: the one place where PJRT_Error* becomes a status --------===//

// Converts |error| (consumed; NULL gives OK) to a status.
tpr_status_t tpr_pjrt_status(const PJRT_Api* api, PJRT_Error* error)
    TPR_MUST_USE_RESULT;
// Awaits |event| (NULL is OK), destroys it, returns its error.
tpr_status_t tpr_pjrt_event_await_destroy(const PJRT_Api* api,
                                          PJRT_Event* event)
    TPR_MUST_USE_RESULT;
// Destroys |event| (NULL is fine) without waiting; errors are dropped.
void tpr_pjrt_event_destroy(const PJRT_Api* api, PJRT_Event* event);
void tpr_pjrt_buffer_destroy(const PJRT_Api* api, PJRT_Buffer* buffer);

//===--- client.c / buffer.c ----------------------------------------------===//

// Accounts a live buffer of |bytes| on |ordinal| (+1) or its end (-1).
void tpr_client_account(tpr_client_t* client, int ordinal, int64_t bytes,
                        int sign);
// Wraps a PJRT buffer (ownership moves in; destroyed on failure).
tpr_status_t tpr_buffer_wrap(tpr_client_t* client, int ordinal,
                             PJRT_Buffer* pjrt, const tpr_tensor_sig_t* sig,
                             tpr_buffer_t** out_buffer) TPR_MUST_USE_RESULT;

// A buffer that launch |seq| will fill (accounted like a live one).
tpr_status_t tpr_buffer_pending(tpr_client_t* client, int ordinal,
                                const tpr_tensor_sig_t* sig, int64_t seq,
                                tpr_buffer_t** out_buffer) TPR_MUST_USE_RESULT;
// Waits for the computation that makes |buffer|, if it is queued, and
// returns its error; then buffer->buffer is the PJRT buffer.
tpr_status_t tpr_buffer_resolve(tpr_buffer_t* buffer) TPR_MUST_USE_RESULT;

//===--- executable.c -----------------------------------------------------===//

// Makes the PJRT call for |args| (their PJRT buffers must exist), writing
// e->num_outputs PJRT buffers to |out|; |done| (may be NULL) receives the
// completion event. Does not touch |args|' donation state.
tpr_status_t tpr_executable_run(tpr_executable_t* e, int ordinal,
                                tpr_buffer_t* const* args, size_t num_args,
                                const bool* donate, PJRT_Buffer** out,
                                PJRT_Event** done) TPR_MUST_USE_RESULT;

//===--- launch.c: executions off the caller's thread ---------------------===//

tpr_launcher_t* tpr_launcher_create(const PJRT_Api* api);  // NULL: no memory
// Runs what is queued, then stops the thread.
void tpr_launcher_destroy(tpr_launcher_t* launcher);
// Hands |buffer| to the thread to destroy (false: destroy it yourself).
bool tpr_launcher_bury(tpr_launcher_t* launcher, PJRT_Buffer* buffer);
// Waits until every launch issued so far has run.
void tpr_launcher_drain(tpr_launcher_t* launcher);
// Waits until the launch that makes |buffer| (buffer->seq) has run.
void tpr_buffer_resolve_wait(tpr_buffer_t* buffer);
// Whether |buffer|'s queued execution has been launched (no wait).
bool tpr_buffer_launched(const tpr_buffer_t* buffer);
// Queues an execution (arguments already checked); fills |outputs| with
// pending buffers. *taken false with OK: no thread could be started and
// the caller must run it itself.
tpr_status_t tpr_launcher_enqueue(tpr_launcher_t* launcher,
                                  tpr_executable_t* e, int ordinal,
                                  tpr_buffer_t* const* args, size_t num_args,
                                  const bool* donate, tpr_buffer_t** outputs,
                                  bool* taken) TPR_MUST_USE_RESULT;

#endif  // TPR_RUNTIME_PJRT_INTERNAL_H_
