// Executables: compile StableHLO text, (de)serialize, execute.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <string.h>

#include "runtime/pjrt/internal.h"

// Serialized xla.CompileOptionsProto, never empty (empty options make XLA
// CHECK-fail: DeviceAssignment(0, 0)):
//   1a 04 20 01 28 01   executable_build_options {num_replicas: 1,
//                                                 num_partitions: 1}
//   20 01               compile_portable_executable: true
// A portable executable runs on any device, picked by execute_device.
static const char kCompileOptions[] = {0x1a, 0x04, 0x20, 0x01,
                                       0x28, 0x01, 0x20, 0x01};

// The first tier of a tiered compile: kCompileOptions plus
// env_option_overrides (field 7, a map entry per option) that make XLA:CPU
// skip most of its LLVM optimisation. Small programs compile 2-9x faster
// and run up to 2x slower; tpr_executable_upgrade later swaps in the full
// code. Each entry: 3a <len> { 0a <len> name, 12 02 <value> } with value
// 18 00 (int_field 0) or 10 01 (bool_field true).
static const char kFirstTierOptions[] =
    "\x1a\x04\x20\x01\x28\x01\x20\x01"
    "\x3a\x24\x0a\x1e" "xla_backend_optimization_level" "\x12\x02\x18\x00"
    "\x3a\x27\x0a\x21" "xla_llvm_disable_expensive_passes" "\x12\x02\x10\x01";

// Arrays of this many arguments/outputs live on the stack in execute.
#define TPR_EXECUTE_STACK_ARGS 16

//===--- building the handle ----------------------------------------------===//

// Reads output types and dims from |loaded|; takes ownership of |loaded|
// (destroyed on failure). |params| may be NULL when num_params is -1.
static tpr_status_t wrap_loaded(tpr_client_t* client,
                                PJRT_LoadedExecutable* loaded,
                                const tpr_tensor_sig_t* params, int num_params,
                                tpr_executable_t** out) {
  const PJRT_Api* api = client->api;
  tpr_executable_t* e = NULL;
  PJRT_LoadedExecutable_GetExecutable_Args g = {.struct_size = sizeof g,
                                                .loaded_executable = loaded};
  tpr_status_t s = tpr_pjrt_status(api, api->LoadedExecutable_GetExecutable(&g));
  PJRT_Executable_NumOutputs_Args n = {.struct_size = sizeof n,
                                       .executable = g.executable};
  PJRT_Executable_OutputElementTypes_Args t = {.struct_size = sizeof t,
                                               .executable = g.executable};
  PJRT_Executable_OutputDimensions_Args d = {.struct_size = sizeof d,
                                             .executable = g.executable};
  if (tpr_status_is_ok(s))
    s = tpr_pjrt_status(api, api->Executable_NumOutputs(&n));
  if (tpr_status_is_ok(s))
    s = tpr_pjrt_status(api, api->Executable_OutputElementTypes(&t));
  if (tpr_status_is_ok(s))
    s = tpr_pjrt_status(api, api->Executable_OutputDimensions(&d));
  if (tpr_status_is_ok(s) &&
      (t.num_output_types != n.num_outputs || d.num_outputs != n.num_outputs))
    s = TPR_ERR(INTERNAL, "plugin reports %zu outputs, %zu types, %zu shapes",
                n.num_outputs, t.num_output_types, d.num_outputs);
  size_t num_sigs = n.num_outputs + (size_t)(num_params > 0 ? num_params : 0);
  if (tpr_status_is_ok(s)) {
    e = (tpr_executable_t*)tpr_malloc(sizeof *e +
                                      num_sigs * sizeof(tpr_tensor_sig_t));
    if (!e) s = TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  size_t dim_at = 0;
  for (size_t i = 0; tpr_status_is_ok(s) && i < n.num_outputs; i++) {
    int dtype = t.output_types[i];
    size_t rank = d.dim_sizes[i];
    if (!tpr_dtype_is_valid((tpr_dtype_t)dtype) || rank > TPR_MAX_RANK) {
      s = TPR_ERR(UNIMPLEMENTED,
                  "output %zu has element type %d and rank %zu; the runtime "
                  "supports its dtypes up to rank %d",
                  i, dtype, rank, TPR_MAX_RANK);
      break;
    }
    tpr_tensor_sig_t* sig = &e->sigs[i];
    memset(sig, 0, sizeof *sig);
    sig->dtype = dtype;
    sig->rank = (int32_t)rank;
    for (size_t k = 0; k < rank; k++) sig->dims[k] = d.dims[dim_at + k];
    dim_at += rank;
  }
  if (g.executable) {
    PJRT_Executable_Destroy_Args x = {.struct_size = sizeof x,
                                      .executable = g.executable};
    s = tpr_status_join(s, tpr_pjrt_status(api, api->Executable_Destroy(&x)));
  }
  if (!tpr_status_is_ok(s)) {
    tpr_free(e);
    PJRT_LoadedExecutable_Destroy_Args x = {.struct_size = sizeof x,
                                            .executable = loaded};
    tpr_status_free(tpr_pjrt_status(api, api->LoadedExecutable_Destroy(&x)));
    return s;
  }
  atomic_init(&e->refs, 1);
  e->client = client;
  e->pending = NULL;
  e->loaded = loaded;
  e->first_tier_code = NULL;
  atomic_init(&e->first_tier, false);
  e->num_outputs = n.num_outputs;
  e->num_params = num_params;
  e->num_replicas = 0;
  e->params = e->sigs + n.num_outputs;
  if (num_params > 0)
    memcpy(e->params, params, (size_t)num_params * sizeof *params);
  *out = e;
  return tpr_ok_status();
}

//===--- compile ----------------------------------------------------------===//

// |upgrade|: a background recompile, counted apart from the compiles a
// caller waits for.
static tpr_status_t compile_with(tpr_client_t* client, const char* mlir, size_t mlir_size,
                                 const char* options, size_t options_size, bool upgrade,
                                 tpr_executable_t** out_executable) {
  if (!out_executable)
    return TPR_ERR(INVALID_ARGUMENT, "out_executable is NULL");
  *out_executable = NULL;
  if (!client) return TPR_ERR(INVALID_ARGUMENT, "client is NULL");
  if (!mlir || mlir_size == 0)
    return TPR_ERR(INVALID_ARGUMENT, "empty StableHLO module");

  // The parameter types, for checking arguments at execute time.
  tpr_tensor_sig_t stack_params[TPR_EXECUTE_STACK_ARGS];
  tpr_tensor_sig_t* params = stack_params;
  int num_params = tpr_mlir_main_signature(mlir, mlir_size, stack_params,
                                           TPR_EXECUTE_STACK_ARGS);
  if (num_params > TPR_EXECUTE_STACK_ARGS) {
    params = (tpr_tensor_sig_t*)tpr_malloc((size_t)num_params *
                                           sizeof *params);
    if (!params) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
    tpr_mlir_main_signature(mlir, mlir_size, params, num_params);
  }

  const PJRT_Api* api = client->api;
  PJRT_Program program = {.struct_size = sizeof program,
                          .code = (char*)mlir,
                          .code_size = mlir_size,
                          .format = "mlir",
                          .format_size = 4};
  PJRT_Client_Compile_Args a = {.struct_size = sizeof a,
                                .client = client->client,
                                .program = &program,
                                .compile_options = options,
                                .compile_options_size = options_size};
  int64_t t0 = tpr_now_ns();
  tpr_status_t s = tpr_pjrt_status(api, api->Client_Compile(&a));
  if (upgrade)
    tpr_stats_note_upgrade(tpr_now_ns() - t0);
  else
    tpr_stats_note_compile(tpr_now_ns() - t0);
  if (tpr_status_code(s) == TPR_UNKNOWN) {
    // XLA reports parse and verifier errors in the program as UNKNOWN; the
    // program is the caller's argument.
    tpr_status_t t = TPR_ERR(INVALID_ARGUMENT, "%s", tpr_status_message(s));
    tpr_status_free(s);
    s = t;
  }
  if (tpr_status_is_ok(s))
    s = wrap_loaded(client, a.executable, params, num_params, out_executable);
  if (params != stack_params) tpr_free(params);
  return tpr_status_annotate(s, "compiling a StableHLO module (%zu bytes)",
                             mlir_size);
}

tpr_status_t tpr_executable_compile(tpr_client_t* client, const char* mlir,
                                    size_t mlir_size,
                                    tpr_executable_t** out_executable) {
  return compile_with(client, mlir, mlir_size, kCompileOptions, sizeof kCompileOptions,
                      false, out_executable);
}

tpr_status_t tpr_executable_compile_first_tier(tpr_client_t* client, const char* mlir,
                                               size_t mlir_size,
                                               tpr_executable_t** out_executable) {
  TPR_RETURN_IF_ERROR(compile_with(client, mlir, mlir_size, kFirstTierOptions,
                                   sizeof kFirstTierOptions - 1, false, out_executable));
  atomic_store(&(*out_executable)->first_tier, true);
  tpr_stats_note_first_tier();
  return tpr_ok_status();
}

bool tpr_executable_is_first_tier(const tpr_executable_t* executable) {
  return atomic_load(&((tpr_executable_t*)executable)->first_tier);
}

static bool sig_equal(const tpr_tensor_sig_t* a, const tpr_tensor_sig_t* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int32_t k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return false;
  return true;
}

tpr_status_t tpr_executable_upgrade(tpr_executable_t* executable, const char* mlir,
                                    size_t mlir_size) {
  if (!executable) return TPR_ERR(INVALID_ARGUMENT, "executable is NULL");
  if (!tpr_executable_is_first_tier(executable))
    return TPR_ERR(FAILED_PRECONDITION, "the executable is not a first-tier compile");
  tpr_executable_t* full = NULL;
  TPR_RETURN_IF_ERROR(compile_with(executable->client, mlir, mlir_size, kCompileOptions,
                                   sizeof kCompileOptions, true, &full));
  bool same = full->num_outputs == executable->num_outputs &&
              full->num_params == executable->num_params;
  // Outputs, then parameters (when the text had a signature).
  size_t num_sigs = full->num_outputs + (size_t)(full->num_params > 0 ? full->num_params : 0);
  for (size_t i = 0; same && i < num_sigs; i++)
    same = sig_equal(&full->sigs[i], &executable->sigs[i]);
  if (!same) {
    tpr_executable_release(full);
    return TPR_ERR(INVALID_ARGUMENT,
                   "the upgrade's program has another signature than the first tier's");
  }
  // A launch may be reading |loaded| right now on another thread: the first
  // tier's code stays until the executable itself goes (its last holder,
  // which also outlives every queued launch).
  executable->first_tier_code = executable->loaded;
  executable->loaded = full->loaded;
  atomic_store(&executable->first_tier, false);
  full->loaded = NULL;
  tpr_executable_release(full);
  return tpr_ok_status();
}

tpr_status_t tpr_executable_compile_replicated(tpr_client_t* client, const char* mlir,
                                               size_t mlir_size, int num_replicas,
                                               tpr_executable_t** out_executable) {
  if (out_executable) *out_executable = NULL;
  if (!client) return TPR_ERR(INVALID_ARGUMENT, "client is NULL");
  // One varint byte holds the count; a replica per device of the client.
  if (num_replicas < 1 || num_replicas > 127 || num_replicas > client->num_devices)
    return TPR_ERR(INVALID_ARGUMENT, "%d replicas on a client of %d devices (1 to %d)",
                   num_replicas, client->num_devices,
                   client->num_devices < 127 ? client->num_devices : 127);
  //   1a 04 20 NN 28 01   executable_build_options {num_replicas: NN,
  //                                                 num_partitions: 1}
  // Not portable: replica i runs on device i (the default assignment).
  const char options[] = {0x1a, 0x04, 0x20, (char)num_replicas, 0x28, 0x01};
  TPR_RETURN_IF_ERROR(
      compile_with(client, mlir, mlir_size, options, sizeof options, false, out_executable));
  (*out_executable)->num_replicas = num_replicas;
  return tpr_ok_status();
}

//===--- serialize --------------------------------------------------------===//
//
// Our format wraps the plugin's bytes so that a persistent cache can detect
// truncation or corruption (the plugin trusts what it is given) and keeps the
// parameter types:
//   "TPRX" | u32 version | u64 FNV-1a of everything after this field |
//   i32 num_params | u32 0 | num_params x tpr_tensor_sig_t | plugin bytes

#define TPR_SERIAL_MAGIC "TPRX"
#define TPR_SERIAL_VERSION 1u
#define TPR_SERIAL_HEADER 24

static uint64_t fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

tpr_status_t tpr_executable_serialize(tpr_executable_t* executable,
                                      void** out_data, size_t* out_size) {
  if (!out_data || !out_size)
    return TPR_ERR(INVALID_ARGUMENT, "NULL output argument");
  *out_data = NULL;
  *out_size = 0;
  if (!executable) return TPR_ERR(INVALID_ARGUMENT, "executable is NULL");
  const PJRT_Api* api = executable->client->api;
  if (!atomic_load(&executable->loaded))
    return TPR_ERR(FAILED_PRECONDITION, "the executable has no code yet");
  if (!TPR_PJRT_HAS(api, Executable_Serialize))
    return TPR_ERR(UNIMPLEMENTED, "the PJRT plugin cannot serialize");
  PJRT_LoadedExecutable_GetExecutable_Args g = {
      .struct_size = sizeof g, .loaded_executable = executable->loaded};
  TPR_RETURN_IF_ERROR(
      tpr_pjrt_status(api, api->LoadedExecutable_GetExecutable(&g)));
  PJRT_Executable_Serialize_Args a = {.struct_size = sizeof a,
                                      .executable = g.executable};
  tpr_status_t s = tpr_pjrt_status(api, api->Executable_Serialize(&a));
  if (tpr_status_is_ok(s)) {
    int32_t np = executable->num_params;
    size_t params_bytes = np > 0 ? (size_t)np * sizeof(tpr_tensor_sig_t) : 0;
    size_t total = TPR_SERIAL_HEADER + params_bytes + a.serialized_bytes_size;
    unsigned char* out = (unsigned char*)tpr_malloc(total);
    if (!out) {
      s = TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
    } else {
      uint32_t version = TPR_SERIAL_VERSION, zero = 0;
      memcpy(out, TPR_SERIAL_MAGIC, 4);
      memcpy(out + 4, &version, 4);
      memcpy(out + 16, &np, 4);
      memcpy(out + 20, &zero, 4);
      if (params_bytes) memcpy(out + 24, executable->params, params_bytes);
      memcpy(out + 24 + params_bytes, a.serialized_bytes,
             a.serialized_bytes_size);
      uint64_t h = fnv1a(out + 16, total - 16);
      memcpy(out + 8, &h, 8);
      *out_data = out;
      *out_size = total;
    }
    if (a.serialized_executable_deleter)
      a.serialized_executable_deleter(a.serialized_executable);
  }
  PJRT_Executable_Destroy_Args x = {.struct_size = sizeof x,
                                    .executable = g.executable};
  s = tpr_status_join(s, tpr_pjrt_status(api, api->Executable_Destroy(&x)));
  if (!tpr_status_is_ok(s) && *out_data) {
    tpr_free(*out_data);
    *out_data = NULL;
    *out_size = 0;
  }
  return s;
}

tpr_status_t tpr_executable_deserialize(tpr_client_t* client, const void* data,
                                        size_t size,
                                        tpr_executable_t** out_executable) {
  if (!out_executable)
    return TPR_ERR(INVALID_ARGUMENT, "out_executable is NULL");
  *out_executable = NULL;
  if (!client || (!data && size)) return TPR_ERR(INVALID_ARGUMENT, "NULL");
  const unsigned char* p = (const unsigned char*)data;
  uint32_t version;
  uint64_t h;
  int32_t np;
  if (size < TPR_SERIAL_HEADER || memcmp(p, TPR_SERIAL_MAGIC, 4) != 0)
    return TPR_ERR(DATA_LOSS, "not a serialized torch_tpu executable");
  memcpy(&version, p + 4, 4);
  memcpy(&h, p + 8, 8);
  memcpy(&np, p + 16, 4);
  if (version != TPR_SERIAL_VERSION)
    return TPR_ERR(DATA_LOSS, "serialized executable has version %u, not %u",
                   version, TPR_SERIAL_VERSION);
  if (h != fnv1a(p + 16, size - 16))
    return TPR_ERR(DATA_LOSS, "serialized executable is corrupt (checksum)");
  size_t params_bytes = np > 0 ? (size_t)np * sizeof(tpr_tensor_sig_t) : 0;
  if (np < -1 || params_bytes > size - TPR_SERIAL_HEADER)
    return TPR_ERR(DATA_LOSS, "serialized executable is corrupt (params)");
  if (!TPR_PJRT_HAS(client->api, Executable_DeserializeAndLoad))
    return TPR_ERR(UNIMPLEMENTED, "the PJRT plugin cannot deserialize");
  tpr_tensor_sig_t* params = NULL;
  if (params_bytes) {  // copied: |data| need not be aligned
    params = (tpr_tensor_sig_t*)tpr_malloc(params_bytes);
    if (!params) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
    memcpy(params, p + TPR_SERIAL_HEADER, params_bytes);
  }
  const PJRT_Api* api = client->api;
  PJRT_Executable_DeserializeAndLoad_Args a = {
      .struct_size = sizeof a,
      .client = client->client,
      .serialized_executable = (const char*)p + TPR_SERIAL_HEADER + params_bytes,
      .serialized_executable_size = size - TPR_SERIAL_HEADER - params_bytes};
  tpr_status_t s = tpr_pjrt_status(api, api->Executable_DeserializeAndLoad(&a));
  if (tpr_status_is_ok(s))
    s = wrap_loaded(client, a.loaded_executable, params, np, out_executable);
  tpr_free(params);
  return tpr_status_annotate(s, "loading a serialized executable");
}

//===--- execute ----------------------------------------------------------===//

size_t tpr_executable_num_outputs(const tpr_executable_t* executable) {
  return executable->num_outputs;
}

static tpr_status_t check_args(const tpr_executable_t* e, int ordinal,
                               tpr_buffer_t* const* args, size_t num_args,
                               const bool* donate) {
  if (e->num_params >= 0 && num_args != (size_t)e->num_params)
    return TPR_ERR(INVALID_ARGUMENT, "executable takes %d arguments, got %zu",
                   e->num_params, num_args);
  for (size_t i = 0; i < num_args; i++) {
    const tpr_buffer_t* b = args[i];
    if (!b) return TPR_ERR(INVALID_ARGUMENT, "argument %zu is NULL", i);
    if (b->client != e->client)
      return TPR_ERR(INVALID_ARGUMENT, "argument %zu is of another client", i);
    if (b->device != ordinal)
      return TPR_ERR(INVALID_ARGUMENT,
                     "argument %zu is on device %d, execution on device %d",
                     i, b->device, ordinal);
    if (atomic_load_explicit(&b->dead, memory_order_acquire))
      return TPR_ERR(FAILED_PRECONDITION,
                     "argument %zu was donated to an earlier execution", i);
    if (e->num_params >= 0) {
      const tpr_tensor_sig_t* p = &e->params[i];
      bool same = p->dtype == b->dtype && p->rank == b->rank;
      for (int k = 0; same && k < p->rank; k++)
        same = p->dims[k] == b->dims[k];
      if (!same)
        return TPR_ERR(INVALID_ARGUMENT,
                       "argument %zu is %s of rank %d, the program wants %s "
                       "of rank %d (or other dims)",
                       i, tpr_dtype_name((tpr_dtype_t)b->dtype), b->rank,
                       tpr_dtype_name((tpr_dtype_t)p->dtype), p->rank);
    }
    if (donate && donate[i]) {  // PJRT rejects donating one buffer twice
      for (size_t j = 0; j < num_args; j++)
        if (j != i && args[j] == b)
          return TPR_ERR(INVALID_ARGUMENT,
                         "argument %zu is donated but also passed as %zu", i,
                         j);
    }
  }
  return tpr_ok_status();
}

// Waits for a pending executable's code; its compile's error otherwise.
static tpr_status_t await_code(tpr_executable_t* e) {
  tpr_pending_code_t* p = e->pending;
  pthread_mutex_lock(&p->lock);
  while (!p->done) pthread_cond_wait(&p->ready, &p->lock);
  tpr_status_t s = p->failure ? tpr_status_make(tpr_status_code(p->failure),
                                                "compiling this program failed: %s",
                                                tpr_status_message(p->failure))
                              : tpr_ok_status();
  pthread_mutex_unlock(&p->lock);
  return s;
}

tpr_status_t tpr_executable_run(tpr_executable_t* e, int ordinal,
                                tpr_buffer_t* const* args, size_t num_args,
                                const bool* donate, PJRT_Buffer** out,
                                PJRT_Event** done) {
  size_t nout = e->num_outputs;
  for (size_t i = 0; i < nout; i++) out[i] = NULL;
  if (e->pending) TPR_RETURN_IF_ERROR(await_code(e));
  // Argument and non-donatable index arrays: on the stack for small calls,
  // one heap block otherwise.
  PJRT_Buffer* stack_in[TPR_EXECUTE_STACK_ARGS];
  int64_t stack_keep[TPR_EXECUTE_STACK_ARGS];
  PJRT_Buffer** in = stack_in;
  int64_t* keep = stack_keep;
  void* heap = NULL;
  if (num_args > TPR_EXECUTE_STACK_ARGS) {
    heap = tpr_malloc(num_args * (sizeof *in + sizeof *keep));
    if (!heap) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
    keep = (int64_t*)heap;
    in = (PJRT_Buffer**)(keep + num_args);
  }
  size_t num_keep = 0;
  for (size_t i = 0; i < num_args; i++) {
    in[i] = args[i]->buffer;
    if (!donate || !donate[i]) keep[num_keep++] = (int64_t)i;
  }

  const PJRT_Api* api = e->client->api;
  PJRT_ExecuteOptions options = {
      .struct_size = sizeof options,
      .non_donatable_input_indices = num_keep ? keep : NULL,
      .num_non_donatable_input_indices = num_keep,
  };
  PJRT_Buffer* const* arg_lists[1] = {in};
  PJRT_Buffer** out_lists[1] = {out};
  PJRT_LoadedExecutable_Execute_Args a = {
      .struct_size = sizeof a,
      .executable = e->loaded,
      .options = &options,
      .argument_lists = arg_lists,
      .num_devices = 1,
      .num_args = num_args,
      .output_lists = out_lists,
      // Only when waiting: the event costs a future per call otherwise.
      .device_complete_events = done,
      .execute_device = e->client->devices[ordinal].device,
  };
  tpr_status_t s = tpr_pjrt_status(api, api->LoadedExecutable_Execute(&a));
  tpr_free(heap);
  if (!tpr_status_is_ok(s)) {
    for (size_t i = 0; i < nout; i++) {
      tpr_pjrt_buffer_destroy(api, out[i]);
      out[i] = NULL;
    }
    return tpr_status_annotate(s, "executing on device %d", ordinal);
  }
  tpr_stats_note_execution();
  return tpr_ok_status();
}

// The donated arguments are gone (in issue order) once their execution is
// issued, whatever happens to it.
static void mark_donated(tpr_client_t* client, int ordinal,
                         tpr_buffer_t* const* args, size_t num_args,
                         const bool* donate) {
  if (!donate) return;
  for (size_t i = 0; i < num_args; i++) {
    if (!donate[i]) continue;
    bool was_dead = atomic_exchange(&args[i]->dead, true);
    if (!was_dead)
      tpr_client_account(client, ordinal,
                         (int64_t)tpr_buffer_byte_size(args[i]), -1);
  }
}

tpr_status_t tpr_executable_execute(tpr_executable_t* executable, int ordinal,
                                    tpr_buffer_t* const* args, size_t num_args,
                                    const bool* donate, tpr_buffer_t** outputs,
                                    bool wait) {
  if (!executable) return TPR_ERR(INVALID_ARGUMENT, "executable is NULL");
  tpr_executable_t* e = executable;
  tpr_client_t* client = e->client;
  size_t nout = e->num_outputs;
  if (ordinal < 0 || ordinal >= client->num_devices)
    return TPR_ERR(INVALID_ARGUMENT, "device ordinal %d out of range [0, %d)",
                   ordinal, client->num_devices);
  if ((num_args && !args) || (nout && !outputs))
    return TPR_ERR(INVALID_ARGUMENT, "args or outputs is NULL");
  for (size_t i = 0; i < nout; i++) outputs[i] = NULL;
  if (e->num_replicas > 0)
    return TPR_ERR(INVALID_ARGUMENT, "executable of %d replicas: run it with "
                   "tpr_executable_execute_replicated", e->num_replicas);
  TPR_RETURN_IF_ERROR(check_args(e, ordinal, args, num_args, donate));

  if (!wait && client->launcher) {
    bool taken = false;
    TPR_RETURN_IF_ERROR(tpr_launcher_enqueue(client->launcher, e, ordinal, args,
                                             num_args, donate, outputs,
                                             &taken));
    if (taken) {
      mark_donated(client, ordinal, args, num_args, donate);
      return tpr_ok_status();
    }
  }

  // On this thread: after everything queued, with every argument there.
  if (client->launcher) tpr_launcher_drain(client->launcher);
  for (size_t i = 0; i < num_args; i++) {
    tpr_status_t r = tpr_buffer_resolve(args[i]);
    if (!tpr_status_is_ok(r))
      return tpr_status_annotate(r, "argument %zu", i);
  }
  PJRT_Buffer* stack_out[TPR_EXECUTE_STACK_ARGS];
  PJRT_Buffer** out = stack_out;
  if (nout > TPR_EXECUTE_STACK_ARGS) {
    out = (PJRT_Buffer**)tpr_malloc(nout * sizeof *out);
    if (!out) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  PJRT_Event* done = NULL;
  tpr_status_t s =
      tpr_executable_run(e, ordinal, args, num_args, donate, out,
                         wait ? &done : NULL);
  if (!tpr_status_is_ok(s)) {
    if (out != stack_out) tpr_free(out);
    return s;
  }
  mark_donated(client, ordinal, args, num_args, donate);
  const PJRT_Api* api = client->api;
  for (size_t i = 0; i < nout; i++) {
    if (tpr_status_is_ok(s)) {
      s = tpr_buffer_wrap(client, ordinal, out[i], &e->sigs[i], &outputs[i]);
    } else {
      tpr_pjrt_buffer_destroy(api, out[i]);
    }
  }
  if (out != stack_out) tpr_free(out);
  s = tpr_status_join(s, tpr_pjrt_event_await_destroy(api, done));
  if (!tpr_status_is_ok(s)) {
    for (size_t i = 0; i < nout; i++) {
      tpr_buffer_release(outputs[i]);
      outputs[i] = NULL;
    }
  }
  return s;
}

tpr_status_t tpr_executable_execute_replicated(tpr_executable_t* executable,
                                               tpr_buffer_t* const* args, size_t num_args,
                                               tpr_buffer_t** outputs) {
  if (!executable) return TPR_ERR(INVALID_ARGUMENT, "executable is NULL");
  tpr_executable_t* e = executable;
  int reps = e->num_replicas;
  if (reps < 1)
    return TPR_ERR(INVALID_ARGUMENT,
                   "executable is not replicated (tpr_executable_compile_replicated)");
  size_t nout = e->num_outputs;
  if ((num_args && !args) || (nout && !outputs))
    return TPR_ERR(INVALID_ARGUMENT, "args or outputs is NULL");
  for (size_t i = 0; i < (size_t)reps * nout; i++) outputs[i] = NULL;
  for (int r = 0; r < reps; r++)
    TPR_RETURN_IF_ERROR(tpr_status_annotate(check_args(e, r, args + r * num_args, num_args, NULL),
                                            "replica %d", r));
  tpr_client_t* client = e->client;
  if (client->launcher) tpr_launcher_drain(client->launcher);
  for (size_t i = 0; i < (size_t)reps * num_args; i++)
    TPR_RETURN_IF_ERROR(tpr_buffer_resolve(args[i]));
  // One block: per replica its argument and output lists and events.
  size_t per = num_args * sizeof(PJRT_Buffer*) + nout * sizeof(PJRT_Buffer*);
  void* heap = tpr_malloc((size_t)reps * (per + 2 * sizeof(void*) + sizeof(PJRT_Event*)) + 1);
  if (!heap) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  PJRT_Buffer*** in_lists = (PJRT_Buffer***)heap;
  PJRT_Buffer*** out_lists = in_lists + reps;
  PJRT_Event** done = (PJRT_Event**)(out_lists + reps);
  PJRT_Buffer** cells = (PJRT_Buffer**)(done + reps);
  for (int r = 0; r < reps; r++) {
    in_lists[r] = cells + (size_t)r * (num_args + nout);
    out_lists[r] = in_lists[r] + num_args;
    for (size_t i = 0; i < num_args; i++) in_lists[r][i] = args[r * num_args + i]->buffer;
    for (size_t i = 0; i < nout; i++) out_lists[r][i] = NULL;
    done[r] = NULL;
  }
  const PJRT_Api* api = client->api;
  PJRT_ExecuteOptions options = {.struct_size = sizeof options};
  PJRT_LoadedExecutable_Execute_Args a = {
      .struct_size = sizeof a,
      .executable = e->loaded,
      .options = &options,
      .argument_lists = (PJRT_Buffer* const* const*)in_lists,
      .num_devices = (size_t)reps,
      .num_args = num_args,
      .output_lists = (PJRT_Buffer** const*)out_lists,
      .device_complete_events = done,
      .execute_device = NULL,  // every replica, on its assigned device
  };
  tpr_status_t s = tpr_pjrt_status(api, api->LoadedExecutable_Execute(&a));
  if (tpr_status_is_ok(s)) tpr_stats_note_execution();
  for (int r = 0; r < reps; r++) {
    for (size_t i = 0; i < nout; i++) {
      PJRT_Buffer* b = out_lists[r][i];
      if (tpr_status_is_ok(s) && b)
        s = tpr_buffer_wrap(client, r, b, &e->sigs[i], &outputs[r * nout + i]);
      else
        tpr_pjrt_buffer_destroy(api, b);
    }
    if (done[r]) s = tpr_status_join(s, tpr_pjrt_event_await_destroy(api, done[r]));
  }
  tpr_free(heap);
  if (!tpr_status_is_ok(s)) {
    for (size_t i = 0; i < (size_t)reps * nout; i++) {
      tpr_buffer_release(outputs[i]);
      outputs[i] = NULL;
    }
  }
  return tpr_status_annotate(s, "executing on %d replicas", reps);
}

tpr_status_t tpr_executable_create_pending(tpr_client_t* client, size_t num_outputs,
                                           const int32_t* dtypes, const int32_t* ranks,
                                           const int64_t* dims,
                                           tpr_executable_t** out_executable) {
  *out_executable = NULL;
  if (!client || (num_outputs && (!dtypes || !ranks || !dims)))
    return TPR_ERR(INVALID_ARGUMENT, "bad pending executable");
  for (size_t i = 0; i < num_outputs; i++)
    if (!tpr_dtype_is_valid((tpr_dtype_t)dtypes[i]) || ranks[i] < 0 ||
        ranks[i] > TPR_MAX_RANK)
      return TPR_ERR(INVALID_ARGUMENT, "pending output %zu has dtype %d and rank %d", i,
                     dtypes[i], ranks[i]);
  tpr_executable_t* e = (tpr_executable_t*)tpr_calloc(
      1, sizeof *e + num_outputs * sizeof(tpr_tensor_sig_t));
  tpr_pending_code_t* p = (tpr_pending_code_t*)tpr_calloc(1, sizeof *p);
  if (!e || !p) {
    tpr_free(e);
    tpr_free(p);
    return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->ready, NULL);
  for (size_t i = 0; i < num_outputs; i++) {
    e->sigs[i].dtype = dtypes[i];
    e->sigs[i].rank = ranks[i];
    for (int k = 0; k < ranks[i]; k++) e->sigs[i].dims[k] = dims[i * TPR_MAX_RANK + k];
  }
  atomic_init(&e->refs, 1);
  e->client = client;
  e->pending = p;
  atomic_init(&e->first_tier, false);
  e->num_outputs = num_outputs;
  e->num_params = -1;
  e->params = e->sigs + num_outputs;
  *out_executable = e;
  return tpr_ok_status();
}

bool tpr_executable_has_code(tpr_executable_t* executable) {
  tpr_pending_code_t* p = executable->pending;
  if (!p) return true;
  pthread_mutex_lock(&p->lock);
  bool done = p->done && !p->failure;
  pthread_mutex_unlock(&p->lock);
  return done;
}

void tpr_executable_fulfil(tpr_executable_t* executable, tpr_executable_t* compiled,
                           tpr_status_t error) {
  tpr_executable_t* e = executable;
  tpr_pending_code_t* p = e->pending;
  if (compiled && tpr_status_is_ok(error)) {
    bool same = compiled->num_outputs == e->num_outputs && compiled->num_replicas == 0;
    for (size_t i = 0; same && i < e->num_outputs; i++)
      same = sig_equal(&compiled->sigs[i], &e->sigs[i]);
    if (same) {
      e->loaded = compiled->loaded;  // published by the lock below
      compiled->loaded = NULL;
    } else {
      error = TPR_ERR(INTERNAL, "the compiled program's outputs differ from the "
                                "types its launches were queued with");
    }
  } else if (tpr_status_is_ok(error)) {
    error = TPR_ERR(INTERNAL, "a pending executable got no code");
  }
  pthread_mutex_lock(&p->lock);
  p->failure = error;
  p->done = true;
  pthread_cond_broadcast(&p->ready);
  pthread_mutex_unlock(&p->lock);
}

tpr_executable_t* tpr_executable_retain(tpr_executable_t* executable) {
  if (executable)
    atomic_fetch_add_explicit(&executable->refs, 1, memory_order_relaxed);
  return executable;
}

void tpr_executable_release(tpr_executable_t* executable) {
  if (!executable) return;
  if (atomic_fetch_sub_explicit(&executable->refs, 1, memory_order_acq_rel) !=
      1)
    return;
  const PJRT_Api* api = executable->client->api;
  PJRT_LoadedExecutable* code[2] = {executable->loaded, executable->first_tier_code};
  for (int i = 0; i < 2; i++) {
    if (!code[i]) continue;
    PJRT_LoadedExecutable_Destroy_Args x = {.struct_size = sizeof x, .executable = code[i]};
    tpr_status_free(tpr_pjrt_status(api, api->LoadedExecutable_Destroy(&x)));
  }
  if (executable->pending) {
    pthread_mutex_destroy(&executable->pending->lock);
    pthread_cond_destroy(&executable->pending->ready);
    tpr_status_free(executable->pending->failure);
    tpr_free(executable->pending);
  }
  tpr_free(executable);
}
