// Device buffers: host transfers, readiness, reference counts.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
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

tpr_status_t tpr_buffer_from_host(tpr_client_t* client, int ordinal,
                                  tpr_dtype_t dtype, const int64_t* dims,
                                  int rank, const void* data,
                                  tpr_buffer_t** out_buffer) {
  if (!out_buffer) return TPR_ERR(INVALID_ARGUMENT, "out_buffer is NULL");
  *out_buffer = NULL;
  if (!client) return TPR_ERR(INVALID_ARGUMENT, "client is NULL");
  if (ordinal < 0 || ordinal >= client->num_devices)
    return TPR_ERR(INVALID_ARGUMENT, "device ordinal %d out of range [0, %d)",
                   ordinal, client->num_devices);
  // An invalid element type makes the plugin abort: check it here.
  if (!tpr_dtype_is_valid(dtype) || tpr_dtype_size(dtype) == 0)
    return TPR_ERR(INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
  if (rank < 0 || rank > TPR_MAX_RANK)
    return TPR_ERR(INVALID_ARGUMENT, "rank %d not in [0, %d]", rank,
                   TPR_MAX_RANK);
  if (rank > 0 && !dims) return TPR_ERR(INVALID_ARGUMENT, "dims is NULL");
  tpr_tensor_sig_t sig = {.dtype = dtype, .rank = rank};
  size_t bytes = tpr_dtype_size(dtype);
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return TPR_ERR(INVALID_ARGUMENT, "negative dim %lld",
                     (long long)dims[i]);
    if (!tpr_mul_size(bytes, (size_t)dims[i], &bytes) || bytes > INT64_MAX)
      return TPR_ERR(INVALID_ARGUMENT, "array of %s too large",
                     tpr_dtype_name(dtype));
    sig.dims[i] = dims[i];
  }
  if (!data && bytes > 0) return TPR_ERR(INVALID_ARGUMENT, "data is NULL");
  static const int64_t kZero = 0;  // any valid address for empty arrays

  // kImmutableOnlyDuringCall: the plugin copies before returning, so |data|
  // is free at once and there is nothing to wait for. (The CPU plugin's
  // zero-copy path needs 64-byte aligned data the caller keeps alive, which
  // this API does not promise.)
  const PJRT_Api* api = client->api;
  PJRT_Client_BufferFromHostBuffer_Args a = {
      .struct_size = sizeof a,
      .client = client->client,
      .data = data ? data : &kZero,
      .type = dtype,
      .dims = rank ? sig.dims : NULL,
      .num_dims = (size_t)rank,
      .host_buffer_semantics =
          PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
      .device = client->devices[ordinal].device,
  };
  TPR_RETURN_IF_ERROR(
      tpr_pjrt_status(api, api->Client_BufferFromHostBuffer(&a)));
  tpr_pjrt_event_destroy(api, a.done_with_host_buffer);
  tpr_stats_note_h2d((int64_t)bytes);
  return tpr_buffer_wrap(client, ordinal, a.buffer, &sig, out_buffer);
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
