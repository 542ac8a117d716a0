// Device buffers: host transfers, readiness, reference counts.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <stdint.h>
#include <string.h>

#include "runtime/pjrt/internal.h"

static size_t sig_byte_size(int dtype, int rank, const int64_t* dims) {
  size_t n = tpr_dtype_size((tpr_dtype_t)dtype);
  for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
  return n;
}

tpr_status_t tpr_buffer_wrap(tpr_client_t* client, int ordinal,
                             PJRT_Buffer* pjrt, const tpr_tensor_sig_t* sig,
                             tpr_buffer_t** out_buffer) {
  tpr_buffer_t* b = (tpr_buffer_t*)tpr_malloc(sizeof *b);
  if (!b) {
    tpr_pjrt_buffer_destroy(client->api, pjrt);
    return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  atomic_init(&b->refs, 1);  // (PJRT buffer NULL: a pending one)
  atomic_init(&b->queued, 0);
  atomic_init(&b->dead, false);
  b->dtype = (int8_t)sig->dtype;
  b->rank = (int8_t)sig->rank;
  b->device = (int16_t)ordinal;
  b->client = client;
  b->seq = 0;
  b->buffer = pjrt;
  b->failure = tpr_ok_status();
  memcpy(b->dims, sig->dims, sizeof b->dims);
  tpr_client_account(client, ordinal, (int64_t)tpr_buffer_byte_size(b), +1);
  *out_buffer = b;
  return tpr_ok_status();
}

tpr_status_t tpr_buffer_pending(tpr_client_t* client, int ordinal,
                                const tpr_tensor_sig_t* sig, int64_t seq,
                                tpr_buffer_t** out_buffer) {
  TPR_RETURN_IF_ERROR(tpr_buffer_wrap(client, ordinal, NULL, sig, out_buffer));
  (*out_buffer)->seq = seq;
  return tpr_ok_status();
}

tpr_status_t tpr_buffer_resolve(tpr_buffer_t* b) {
  if (b->seq) tpr_buffer_resolve_wait(b);
  if (b->failure)
    return tpr_status_make(tpr_status_code(b->failure), "%s",
                           tpr_status_message(b->failure));
  if (!b->buffer)  // queued in a parent process that then forked
    return TPR_ERR(FAILED_PRECONDITION,
                   "this %s buffer's computation was queued before the "
                   "process forked and never ran in this process",
                   tpr_dtype_name((tpr_dtype_t)b->dtype));
  return tpr_ok_status();
}

// Checks a host array's description and fills |sig| and |bytes|: the
// plugin aborts on an invalid element type, so it is never shown one.
static tpr_status_t host_array_sig(tpr_client_t* client, int ordinal,
                                   tpr_dtype_t dtype, const int64_t* dims,
                                   int rank, const void* data,
                                   tpr_tensor_sig_t* sig, size_t* bytes) {
  if (!client) return TPR_ERR(INVALID_ARGUMENT, "client is NULL");
  if (ordinal < 0 || ordinal >= client->num_devices)
    return TPR_ERR(INVALID_ARGUMENT, "device ordinal %d out of range [0, %d)",
                   ordinal, client->num_devices);
  if (!tpr_dtype_is_valid(dtype) || tpr_dtype_size(dtype) == 0)
    return TPR_ERR(INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
  if (rank < 0 || rank > TPR_MAX_RANK)
    return TPR_ERR(INVALID_ARGUMENT, "rank %d not in [0, %d]", rank,
                   TPR_MAX_RANK);
  if (rank > 0 && !dims) return TPR_ERR(INVALID_ARGUMENT, "dims is NULL");
  *sig = (tpr_tensor_sig_t){.dtype = dtype, .rank = rank};
  size_t n = tpr_dtype_size(dtype);
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return TPR_ERR(INVALID_ARGUMENT, "negative dim %lld",
                     (long long)dims[i]);
    if (!tpr_mul_size(n, (size_t)dims[i], &n) || n > INT64_MAX)
      return TPR_ERR(INVALID_ARGUMENT, "array of %s too large",
                     tpr_dtype_name(dtype));
    sig->dims[i] = dims[i];
  }
  if (!data && n > 0) return TPR_ERR(INVALID_ARGUMENT, "data is NULL");
  *bytes = n;
  return tpr_ok_status();
}

static const int64_t kZero = 0;  // any valid address for empty arrays

static tpr_status_t from_host(tpr_client_t* client, int ordinal,
                              const tpr_tensor_sig_t* sig, size_t bytes,
                              const void* data,
                              PJRT_HostBufferSemantics semantics,
                              PJRT_Event** done, tpr_buffer_t** out_buffer) {
  const PJRT_Api* api = client->api;
  PJRT_Client_BufferFromHostBuffer_Args a = {
      .struct_size = sizeof a,
      .client = client->client,
      .data = data ? data : &kZero,
      .type = sig->dtype,
      .dims = sig->rank ? sig->dims : NULL,
      .num_dims = (size_t)sig->rank,
      .host_buffer_semantics = semantics,
      .device = client->devices[ordinal].device,
  };
  TPR_RETURN_IF_ERROR(
      tpr_pjrt_status(api, api->Client_BufferFromHostBuffer(&a)));
  if (done)
    *done = a.done_with_host_buffer;
  else
    tpr_pjrt_event_destroy(api, a.done_with_host_buffer);
  tpr_stats_note_h2d((int64_t)bytes);
  return tpr_buffer_wrap(client, ordinal, a.buffer, sig, out_buffer);
}

tpr_status_t tpr_buffer_from_host(tpr_client_t* client, int ordinal,
                                  tpr_dtype_t dtype, const int64_t* dims,
                                  int rank, const void* data,
                                  tpr_buffer_t** out_buffer) {
  if (!out_buffer) return TPR_ERR(INVALID_ARGUMENT, "out_buffer is NULL");
  *out_buffer = NULL;
  tpr_tensor_sig_t sig;
  size_t bytes;
  TPR_RETURN_IF_ERROR(
      host_array_sig(client, ordinal, dtype, dims, rank, data, &sig, &bytes));
  // kImmutableOnlyDuringCall: the plugin copies before returning, so |data|
  // is free at once and there is nothing to wait for.
  return from_host(client, ordinal, &sig, bytes, data,
                   PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, NULL,
                   out_buffer);
}

typedef struct lend {
  const PJRT_Api* api;
  void (*on_done)(void*);
  void* ctx;
} lend_t;

static void lend_returned(PJRT_Error* error, void* arg) {
  lend_t* l = (lend_t*)arg;
  // Nothing to report: the memory is the caller's again either way.
  if (error) tpr_status_free(tpr_pjrt_status(l->api, error));
  l->on_done(l->ctx);
  tpr_free(l);
}

tpr_status_t tpr_buffer_lend_host(tpr_client_t* client, int ordinal,
                                  tpr_dtype_t dtype, const int64_t* dims,
                                  int rank, void* data,
                                  void (*on_done)(void* ctx), void* ctx,
                                  tpr_buffer_t** out_buffer) {
  tpr_status_t s = tpr_ok_status();
  if (!out_buffer) s = TPR_ERR(INVALID_ARGUMENT, "out_buffer is NULL");
  if (!on_done && tpr_status_is_ok(s))
    s = TPR_ERR(INVALID_ARGUMENT, "on_done is NULL");
  if (!tpr_status_is_ok(s)) {
    if (on_done) on_done(ctx);
    return s;
  }
  *out_buffer = NULL;
  tpr_tensor_sig_t sig;
  size_t bytes = 0;
  s = host_array_sig(client, ordinal, dtype, dims, rank, data, &sig, &bytes);
  // The buffer can live in |data| itself where device memory is host
  // memory: the CPU plugin aliases 64-byte aligned dense arrays (it copies
  // others). kMutableZeroCopy, because an execution may later take the
  // buffer over by donation and write its result there.
  const PJRT_Api* api = tpr_status_is_ok(s) ? client->api : NULL;
  bool alias = api && bytes > 0 &&
               client->plugin->info.kind == TPR_PLUGIN_KIND_CPU &&
               ((uintptr_t)data % 64) == 0 && TPR_PJRT_HAS(api, Event_OnReady);
  lend_t* l = alias ? (lend_t*)tpr_malloc(sizeof *l) : NULL;
  if (!l) {  // a copy: |data| is the caller's again when this returns
    if (tpr_status_is_ok(s))
      s = from_host(client, ordinal, &sig, bytes, data,
                    PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, NULL,
                    out_buffer);
    on_done(ctx);
    return s;
  }
  *l = (lend_t){.api = api, .on_done = on_done, .ctx = ctx};
  PJRT_Event* done = NULL;
  s = from_host(client, ordinal, &sig, bytes, data,
                PJRT_HostBufferSemantics_kMutableZeroCopy, &done, out_buffer);
  if (!tpr_status_is_ok(s)) {
    tpr_free(l);
    on_done(ctx);
    return s;
  }
  // The event fires once the plugin lets go of |data|: at once if it
  // copied after all, else when the memory's last owner is destroyed.
  PJRT_Event_OnReady_Args r = {.struct_size = sizeof r,
                               .event = done,
                               .callback = lend_returned,
                               .user_arg = l};
  tpr_status_t rs = tpr_pjrt_status(api, api->Event_OnReady(&r));
  if (!tpr_status_is_ok(rs)) {
    // No callback will come: wait for the plugin to let go of |data| by
    // dropping the buffer, then report the failure.
    tpr_buffer_release(*out_buffer);
    *out_buffer = NULL;
    tpr_status_free(tpr_pjrt_event_await_destroy(api, done));
    tpr_free(l);
    on_done(ctx);
    return rs;
  }
  tpr_pjrt_event_destroy(api, done);
  return tpr_ok_status();
}

static tpr_status_t check_alive(const tpr_buffer_t* b) {
  if (atomic_load_explicit(&b->dead, memory_order_acquire))
    return TPR_ERR(FAILED_PRECONDITION,
                   "buffer %s[%d dims] was donated to an execution and can no "
                   "longer be used",
                   tpr_dtype_name((tpr_dtype_t)b->dtype), b->rank);
  return tpr_ok_status();
}

bool tpr_buffer_is_donated(const tpr_buffer_t* buffer) {
  return buffer && atomic_load_explicit(&buffer->dead, memory_order_acquire);
}

int tpr_buffer_holders(const tpr_buffer_t* buffer) {
  if (!buffer) return 0;
  int queued = atomic_load_explicit(&buffer->queued, memory_order_acquire);
  return atomic_load_explicit(&buffer->refs, memory_order_acquire) - queued;
}

tpr_status_t tpr_buffer_await(tpr_buffer_t* buffer) {
  if (!buffer) return TPR_ERR(INVALID_ARGUMENT, "buffer is NULL");
  TPR_RETURN_IF_ERROR(check_alive(buffer));
  TPR_RETURN_IF_ERROR(tpr_buffer_resolve(buffer));
  const PJRT_Api* api = buffer->client->api;
  PJRT_Buffer_ReadyEvent_Args a = {.struct_size = sizeof a,
                                   .buffer = buffer->buffer};
  TPR_RETURN_IF_ERROR(tpr_pjrt_status(api, api->Buffer_ReadyEvent(&a)));
  return tpr_pjrt_event_await_destroy(api, a.event);
}

bool tpr_buffer_is_ready(tpr_buffer_t* buffer) {
  if (!buffer || tpr_buffer_is_donated(buffer) || !tpr_buffer_launched(buffer) ||
      !tpr_status_is_ok(buffer->failure) || !buffer->buffer)
    return false;
  const PJRT_Api* api = buffer->client->api;
  PJRT_Buffer_ReadyEvent_Args a = {.struct_size = sizeof a, .buffer = buffer->buffer};
  tpr_status_t s = tpr_pjrt_status(api, api->Buffer_ReadyEvent(&a));
  if (!tpr_status_is_ok(s)) {
    tpr_status_free(s);
    return false;
  }
  PJRT_Event_IsReady_Args r = {.struct_size = sizeof r, .event = a.event};
  s = tpr_pjrt_status(api, api->Event_IsReady(&r));
  bool ready = tpr_status_is_ok(s) && r.is_ready;
  tpr_status_free(s);
  // A ready event may still carry the computation's error: only an awaited
  // one says which (tpr_buffer_await, for those that want it).
  if (ready) {
    PJRT_Event_Await_Args w = {.struct_size = sizeof w, .event = a.event};
    tpr_status_t e = tpr_pjrt_status(api, api->Event_Await(&w));
    ready = tpr_status_is_ok(e);
    tpr_status_free(e);
  }
  tpr_pjrt_event_destroy(api, a.event);
  return ready;
}

tpr_status_t tpr_buffer_to_host(tpr_buffer_t* buffer, void* dst,
                                size_t dst_size) {
  if (!buffer) return TPR_ERR(INVALID_ARGUMENT, "buffer is NULL");
  TPR_RETURN_IF_ERROR(check_alive(buffer));
  size_t bytes = tpr_buffer_byte_size(buffer);
  if (dst_size != bytes)
    return TPR_ERR(INVALID_ARGUMENT,
                   "to_host of %s buffer: dst_size %zu, buffer has %zu bytes",
                   tpr_dtype_name((tpr_dtype_t)buffer->dtype), dst_size,
                   bytes);
  if (bytes == 0) return tpr_buffer_await(buffer);  // nothing to copy
  if (!dst) return TPR_ERR(INVALID_ARGUMENT, "dst is NULL");
  TPR_RETURN_IF_ERROR(tpr_buffer_resolve(buffer));
  const PJRT_Api* api = buffer->client->api;

  // CPU: wait for the buffer, then copy from its host address. About 10x
  // faster than PJRT_Buffer_ToHostBuffer for small arrays (which goes through
  // a literal and a future). XLA:CPU keeps arrays dense row-major (default
  // layouts; PRED as one byte per element), the layout promised here. Our
  // reference keeps the PJRT buffer alive during the copy.
  if (atomic_load_explicit(&buffer->client->host_pointer_reads,
                           memory_order_relaxed)) {
    TPR_RETURN_IF_ERROR(tpr_buffer_await(buffer));
    PJRT_Buffer_UnsafePointer_Args p = {.struct_size = sizeof p,
                                        .buffer = buffer->buffer};
    tpr_status_t s = tpr_pjrt_status(api, api->Buffer_UnsafePointer(&p));
    if (tpr_status_is_ok(s) && p.buffer_pointer) {
      memcpy(dst, (const void*)p.buffer_pointer, bytes);
      tpr_stats_note_d2h((int64_t)bytes);
      return tpr_ok_status();
    }
    tpr_status_free(s);  // not offered: use the general path from now on
    atomic_store(&buffer->client->host_pointer_reads, false);
  }

  // Ask for dense row-major explicitly: TPU's device layouts are not, and
  // the plugin's default host layout follows the device's.
  int64_t minor_to_major[TPR_MAX_RANK];
  for (int i = 0; i < buffer->rank; i++)
    minor_to_major[i] = buffer->rank - 1 - i;
  PJRT_Buffer_MemoryLayout layout = {
      .struct_size = sizeof layout,
      .tiled = {.struct_size = sizeof(PJRT_Buffer_MemoryLayout_Tiled),
                .minor_to_major = minor_to_major,
                .minor_to_major_size = (size_t)buffer->rank},
      .type = PJRT_Buffer_MemoryLayout_Type_Tiled,
  };
  PJRT_Buffer_ToHostBuffer_Args a = {.struct_size = sizeof a,
                                     .src = buffer->buffer,
                                     .host_layout = &layout,
                                     .dst = dst,
                                     .dst_size = dst_size};
  TPR_RETURN_IF_ERROR(tpr_pjrt_status(api, api->Buffer_ToHostBuffer(&a)));
  TPR_RETURN_IF_ERROR(tpr_pjrt_event_await_destroy(api, a.event));
  tpr_stats_note_d2h((int64_t)bytes);
  return tpr_ok_status();
}

tpr_status_t tpr_buffer_host_pointer(tpr_buffer_t* buffer,
                                     const void** out_data) {
  if (!out_data) return TPR_ERR(INVALID_ARGUMENT, "out_data is NULL");
  *out_data = NULL;
  if (!buffer) return TPR_ERR(INVALID_ARGUMENT, "buffer is NULL");
  if (!atomic_load_explicit(&buffer->client->host_pointer_reads,
                            memory_order_relaxed) ||
      tpr_buffer_byte_size(buffer) == 0)
    return tpr_ok_status();
  TPR_RETURN_IF_ERROR(tpr_buffer_await(buffer));
  const PJRT_Api* api = buffer->client->api;
  PJRT_Buffer_UnsafePointer_Args p = {.struct_size = sizeof p,
                                      .buffer = buffer->buffer};
  tpr_status_t s = tpr_pjrt_status(api, api->Buffer_UnsafePointer(&p));
  if (!tpr_status_is_ok(s)) {  // not offered after all: copy from now on
    tpr_status_free(s);
    atomic_store(&buffer->client->host_pointer_reads, false);
    return tpr_ok_status();
  }
  *out_data = (const void*)p.buffer_pointer;
  return tpr_ok_status();
}

tpr_buffer_t* tpr_buffer_retain(tpr_buffer_t* buffer) {
  if (buffer) atomic_fetch_add_explicit(&buffer->refs, 1, memory_order_relaxed);
  return buffer;
}

void tpr_buffer_release(tpr_buffer_t* buffer) {
  if (!buffer) return;
  if (atomic_fetch_sub_explicit(&buffer->refs, 1, memory_order_acq_rel) != 1)
    return;
  // A donated buffer was already taken off the accounting when it died.
  if (!atomic_load(&buffer->dead))
    tpr_client_account(buffer->client, buffer->device,
                       (int64_t)tpr_buffer_byte_size(buffer), -1);
  tpr_launcher_t* launcher = buffer->client->launcher;
  if (buffer->buffer &&
      !(launcher && tpr_launcher_bury(launcher, buffer->buffer)))
    tpr_pjrt_buffer_destroy(buffer->client->api, buffer->buffer);
  tpr_status_free(buffer->failure);
  tpr_free(buffer);
}

tpr_dtype_t tpr_buffer_dtype(const tpr_buffer_t* b) {
  return (tpr_dtype_t)b->dtype;
}
int tpr_buffer_rank(const tpr_buffer_t* b) { return b->rank; }
const int64_t* tpr_buffer_dims(const tpr_buffer_t* b) { return b->dims; }
int64_t tpr_buffer_numel(const tpr_buffer_t* b) {
  int64_t n = 1;
  for (int i = 0; i < b->rank; i++) n *= b->dims[i];
  return n;
}
size_t tpr_buffer_byte_size(const tpr_buffer_t* b) {
  return sig_byte_size(b->dtype, b->rank, b->dims);
}
int tpr_buffer_device(const tpr_buffer_t* b) { return b->device; }
tpr_client_t* tpr_buffer_client(const tpr_buffer_t* b) { return b->client; }
