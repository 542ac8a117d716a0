// The eager executor: one ATen op -> one graph (view reads, the lowering
// rule, view write-backs) -> a cached executable -> buffers swapped into
// the written storages.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eager/internal.h"

// Per-storage state while one op's graph is built.
typedef struct slot {
  tpr_storage_t* storage;
  tpr_value_t base;     // parameter holding the storage's buffer, or NONE
  tpr_value_t current;  // value after this op's writes, or NONE
} slot_t;

// Scratch reused across calls (all guarded by the executor lock).
static tpr_graph_t* graph;
static slot_t* slots;
static int num_slots, cap_slots;
static tpr_buffer_t** params;
static bool* param_owned;
static int num_params, cap_params;
static tpr_arg_t* args;
static int cap_args;
static tpr_value_t* list_values;
static int num_list_values, cap_list_values;
static int* result_slots;  // slot index of each graph result
static int cap_results;
static tpr_buffer_t** results;
static int cap_result_buffers;

static tpr_eager_stats_t stats;
static int job_device;  // device of the op being built

#define GROW(ptr, cap, need)                                                \
  do {                                                                      \
    if ((need) > (cap)) {                                                   \
      int nc_ = (cap) ? (cap) * 2 : 16;                                     \
      while (nc_ < (need)) nc_ *= 2;                                        \
      void* np_ = tpr_realloc((ptr), (size_t)nc_ * sizeof *(ptr));          \
      if (!np_) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");   \
      (ptr) = np_;                                                          \
      (cap) = nc_;                                                          \
    }                                                                       \
  } while (0)

static void release_params(void) {
  for (int i = 0; i < num_params; i++)
    if (param_owned[i]) tpr_buffer_release(params[i]);
  num_params = 0;
}

// Adds |buffer| as the next parameter; takes ownership when |owned|.
static tpr_status_t add_param(tpr_buffer_t* buffer, bool owned,
                              tpr_value_t* out) {
  if (num_params + 1 > cap_params) {
    int nc = cap_params ? cap_params * 2 : 16;
    tpr_buffer_t** p = tpr_realloc(params, (size_t)nc * sizeof *p);
    if (!p) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
    params = p;
    bool* o = tpr_realloc(param_owned, (size_t)nc * sizeof *o);
    if (!o) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
    param_owned = o;
    cap_params = nc;
  }
  params[num_params] = buffer;
  param_owned[num_params] = owned;
  num_params++;
  *out = tpr_parameter(graph, tpr_type_make(tpr_buffer_dtype(buffer),
                                            tpr_buffer_rank(buffer),
                                            tpr_buffer_dims(buffer)));
  return tpr_ok_status();
}

static tpr_status_t upload_param(tpr_dtype_t dtype, int rank,
                                 const int64_t* dims, const void* data,
                                 tpr_value_t* out) {
  tpr_buffer_t* b = NULL;
  TPR_RETURN_IF_ERROR(tpr_buffer_from_host(tpr_eager_client(), job_device, dtype, dims,
                                           rank, data, &b));
  tpr_status_t s = add_param(b, true, out);
  if (!tpr_status_is_ok(s)) tpr_buffer_release(b);
  return s;
}

static tpr_status_t get_slot(tpr_storage_t* storage, slot_t** out) {
  for (int i = 0; i < num_slots; i++)
    if (slots[i].storage == storage) {
      *out = &slots[i];
      return tpr_ok_status();
    }
  GROW(slots, cap_slots, num_slots + 1);
  slot_t* s = &slots[num_slots++];
  s->storage = storage;
  s->base = TPR_VALUE_NONE;
  s->current = TPR_VALUE_NONE;
  *out = s;
  return tpr_ok_status();
}

// Makes the slot's storage contents a value of the graph: its buffer as a
// parameter, or, for a never-written storage, zeros made in the graph (no
// upload, and nothing at all when the op overwrites the whole storage).
static tpr_status_t ensure_base(slot_t* slot, tpr_dtype_t dtype_if_new) {
  if (slot->base != TPR_VALUE_NONE) return tpr_ok_status();
  if (slot->storage->buffer)
    return add_param(slot->storage->buffer, false, &slot->base);
  size_t item = tpr_dtype_size(dtype_if_new);
  if (!item) return TPR_ERR(INVALID_ARGUMENT, "unsupported dtype %d", (int)dtype_if_new);
  int64_t numel = (int64_t)(slot->storage->nbytes / item);
  slot->base = tpr_broadcast_in_dim(
      graph, tpr_constant_i64(graph, dtype_if_new, 0), 1, &numel, NULL);
  return tpr_ok_status();
}

static bool is_contiguous(const tpr_tensor_ref_t* r) {
  int64_t expected = 1;
  for (int i = r->rank - 1; i >= 0; i--) {
    if (r->sizes[i] != 1 && r->strides[i] != expected) return false;
    expected *= r->sizes[i];
  }
  return true;
}

static bool covers_storage(const tpr_tensor_ref_t* r) {
  return r->offset == 0 && is_contiguous(r) &&
         (size_t)tpr_tensor_ref_numel(r) * tpr_dtype_size(r->dtype) ==
             r->storage->nbytes;
}

static tpr_status_t read_ref(const tpr_tensor_ref_t* r, tpr_value_t* out) {
  if (tpr_tensor_ref_numel(r) == 0) {
    *out = tpr_broadcast_in_dim(graph, tpr_constant_i64(graph, r->dtype, 0),
                                r->rank, r->sizes, NULL);
    return tpr_ok_status();
  }
  slot_t* slot;
  TPR_RETURN_IF_ERROR(get_slot(r->storage, &slot));
  TPR_RETURN_IF_ERROR(ensure_base(slot, r->dtype));
  tpr_value_t src = slot->current != TPR_VALUE_NONE ? slot->current : slot->base;
  *out = tpr_view_read(graph, src, r->dtype, r->rank, r->sizes, r->strides,
                       r->offset);
  return tpr_ok_status();
}

static tpr_status_t write_ref(const tpr_tensor_ref_t* r, tpr_value_t v) {
  slot_t* slot;
  TPR_RETURN_IF_ERROR(get_slot(r->storage, &slot));
  if (covers_storage(r)) {
    int64_t n = tpr_tensor_ref_numel(r);
    slot->current = tpr_reshape(graph, v, 1, &n);
    return tpr_ok_status();
  }
  TPR_RETURN_IF_ERROR(ensure_base(slot, r->dtype));
  tpr_value_t dst = slot->current != TPR_VALUE_NONE ? slot->current : slot->base;
  slot->current = tpr_view_write(graph, dst, r->rank, r->sizes, r->strides,
                                 r->offset, v);
  return tpr_ok_status();
}

static tpr_status_t build_args(const tpr_eager_call_t* call) {
  GROW(args, cap_args, call->num_args);
  num_list_values = 0;
  for (int i = 0; i < call->num_args; i++) {
    const tpr_eager_arg_t* ea = &call->args[i];
    tpr_arg_t* a = &args[i];
    *a = ea->arg;
    switch (a->kind) {
      case TPR_ARG_TENSOR:
        if (a->is_scalar) {
          TPR_RETURN_IF_ERROR(
              upload_param(ea->scalar_dtype, 0, NULL, &ea->scalar, &a->value));
        } else if (ea->buffer) {
          TPR_RETURN_IF_ERROR(add_param(ea->buffer, false, &a->value));
        } else {
          TPR_RETURN_IF_ERROR(read_ref(ea->tensor, &a->value));
        }
        break;
      case TPR_ARG_TENSOR_LIST:
        num_list_values += a->count;
        GROW(list_values, cap_list_values, num_list_values);
        break;
      case TPR_ARG_GENERATOR: {
        int64_t two = 2;
        TPR_RETURN_IF_ERROR(
            upload_param(TPR_DTYPE_U64, 1, &two, ea->rng_state, &a->value));
        break;
      }
      default:
        break;
    }
  }
  // Lists second: list_values may move while it grows above.
  int base = 0;
  for (int i = 0; i < call->num_args; i++) {
    const tpr_eager_arg_t* ea = &call->args[i];
    tpr_arg_t* a = &args[i];
    if (a->kind != TPR_ARG_TENSOR_LIST) continue;
    for (int k = 0; k < a->count; k++) {
      tpr_value_t v = TPR_VALUE_NONE;
      if (ea->tensors[k]) TPR_RETURN_IF_ERROR(read_ref(ea->tensors[k], &v));
      list_values[base + k] = v;
    }
    a->values = list_values + base;
    base += a->count;
  }
  return tpr_ok_status();
}

static tpr_status_t check_outs(const tpr_lower_ctx_t* ctx) {
  char want[96], got[96];
  for (int i = 0; i < ctx->num_outs; i++) {
    const tpr_type_t* t = tpr_value_type(ctx->graph, ctx->outs[i]);
    if (!t || !tpr_type_equal(t, &ctx->out_types[i]))
      return TPR_ERR(INTERNAL, "%s: result %d is %s, PyTorch expects %s",
                     ctx->op_name, i, t ? tpr_type_format(t, got, sizeof got) : "none",
                     tpr_type_format(&ctx->out_types[i], want, sizeof want));
  }
  return tpr_ok_status();
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The executable for the graph: from memory, else from the disk cache, else
// compiled (and written to both).
tpr_status_t tpr_eager_get_executable_locked(tpr_graph_t* graph,
                                             const char* op_name,
                                             tpr_executable_t** out) {
  uint64_t key[2];
  tpr_graph_hash(graph, key);
  tpr_executable_t* exe = tpr_exec_cache_find(key);
  if (exe) {
    stats.cache_hits++;
    *out = exe;
    return tpr_ok_status();
  }
  stats.cache_misses++;
  tpr_status_t s = tpr_disk_cache_load(key, &exe);
  bool from_disk = tpr_status_is_ok(s);
  tpr_status_free(s);
  if (!from_disk) {
    char* text = NULL;
    size_t len = 0;
    TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(graph, &text, &len));
    if (getenv("TORCH_TPU_DUMP_STABLEHLO")) fprintf(stderr, "%s\n", text);
    double t0 = now_seconds();
    s = tpr_executable_compile(tpr_eager_client(), text, len, &exe);
    tpr_free(text);
    TPR_RETURN_IF_ERROR(s);
    if (getenv("TORCH_TPU_LOG_COMPILES"))
      fprintf(stderr, "torch_tpu: compiled %s (%zu bytes of StableHLO) in %.1f ms\n",
              op_name, len, 1e3 * (now_seconds() - t0));
    tpr_disk_cache_store(key, exe);
  }
  s = tpr_exec_cache_insert(key, exe);
  tpr_executable_release(exe);  // the cache keeps its own reference
  TPR_RETURN_IF_ERROR(s);
  *out = exe;
  return tpr_ok_status();
}

static tpr_status_t run_locked(const tpr_eager_call_t* call) {
  if (!tpr_eager_client())
    return TPR_ERR(FAILED_PRECONDITION, "the tpu runtime is not initialized");
  if (!graph) TPR_RETURN_IF_ERROR(tpr_graph_create(&graph));
  tpr_graph_reset(graph);
  num_slots = 0;
  job_device = call->device;
  TPR_RETURN_IF_ERROR(build_args(call));

  tpr_value_t outs_local[16];
  tpr_value_t* outs = outs_local;
  if (call->num_outs > 16) {
    outs = tpr_malloc((size_t)call->num_outs * sizeof *outs);
    if (!outs) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (int i = 0; i < call->num_outs; i++) outs[i] = TPR_VALUE_NONE;
  tpr_lower_ctx_t ctx = {graph, call->op_name, args, call->num_args,
                         call->out_types, call->num_outs, outs};
  tpr_status_t s;
  if (call->lower) {
    s = call->lower(&ctx);
    if (tpr_status_is_ok(s)) s = tpr_graph_status(graph);
    if (tpr_status_is_ok(s)) s = check_outs(&ctx);
  } else {
    s = tpr_lower(&ctx);
  }
  for (int i = 0; tpr_status_is_ok(s) && i < call->num_outs; i++) {
    const tpr_tensor_ref_t* t = call->out_targets[i];
    if (t && tpr_tensor_ref_numel(t) > 0) s = write_ref(t, outs[i]);
  }
  if (outs != outs_local) tpr_free(outs);
  TPR_RETURN_IF_ERROR(s);

  // One result per written storage.
  int num_results = 0;
  for (int i = 0; i < num_slots; i++) {
    if (slots[i].current == TPR_VALUE_NONE || slots[i].current == slots[i].base)
      continue;
    GROW(result_slots, cap_results, num_results + 1);
    result_slots[num_results++] = i;
    tpr_graph_add_result(graph, slots[i].current);
  }
  TPR_RETURN_IF_ERROR(tpr_graph_status(graph));
  if (num_results == 0) return tpr_ok_status();

  tpr_executable_t* exe;
  TPR_RETURN_IF_ERROR(tpr_eager_get_executable_locked(graph, call->op_name, &exe));
  GROW(results, cap_result_buffers, num_results);
  TPR_RETURN_IF_ERROR(tpr_executable_execute(exe, call->device, params,
                                             (size_t)num_params, NULL, results,
                                             tpr_eager_launch_blocking()));
  stats.ops++;
  tpr_pending_push(results[0]);
  for (int i = 0; i < num_results; i++)
    tpr_storage_swap_buffer(slots[result_slots[i]].storage, results[i]);
  return tpr_ok_status();
}

tpr_status_t tpr_eager_run(const tpr_eager_call_t* call) {
  tpr_eager_lock();
  tpr_status_t s = run_locked(call);
  release_params();
  tpr_eager_unlock();
  if (!tpr_status_is_ok(s) && !strstr(tpr_status_message(s), call->op_name))
    s = tpr_status_annotate(s, "%s", call->op_name);
  return s;
}

void tpr_eager_get_stats(tpr_eager_stats_t* out) {
  tpr_eager_lock();
  *out = stats;
  out->cached_executables = (int64_t)tpr_exec_cache_size();
  tpr_eager_unlock();
}

void tpr_eager_reset_stats(void) {
  tpr_eager_lock();
  memset(&stats, 0, sizeof stats);
  tpr_eager_unlock();
}

//===--- host transfers and resizing --------------------------------------===//

static tpr_status_t lower_identity(tpr_lower_ctx_t* ctx) {
  ctx->outs[0] = ctx->args[0].value;
  return tpr_ok_status();
}

tpr_status_t tpr_eager_lower_copy(tpr_lower_ctx_t* ctx) {
  const tpr_type_t* out = &ctx->out_types[0];
  tpr_value_t v = tpr_convert(ctx->graph, ctx->args[0].value, out->dtype);
  ctx->outs[0] = tpr_broadcast_to(ctx->graph, v, out->rank, out->dims);
  return tpr_ok_status();
}

static bool ref_is_whole_buffer(const tpr_tensor_ref_t* r, tpr_buffer_t* b) {
  return b && r->offset == 0 && is_contiguous(r) &&
         tpr_buffer_dtype(b) == r->dtype &&
         tpr_buffer_numel(b) == tpr_tensor_ref_numel(r);
}

static tpr_type_t ref_type(const tpr_tensor_ref_t* r) {
  return tpr_type_make(r->dtype, r->rank, r->sizes);
}

tpr_status_t tpr_tensor_write_host(const tpr_tensor_ref_t* ref,
                                   const void* data, size_t size) {
  int64_t numel = tpr_tensor_ref_numel(ref);
  if ((size_t)numel * tpr_dtype_size(ref->dtype) != size)
    return TPR_ERR(INVALID_ARGUMENT, "host copy of %zu bytes into a tensor of %lld %s elements",
                   size, (long long)numel, tpr_dtype_name(ref->dtype));
  if (numel == 0) return tpr_ok_status();
  if (!tpr_eager_client())
    return TPR_ERR(FAILED_PRECONDITION, "the tpu runtime is not initialized");
  tpr_buffer_t* b = NULL;
  if (covers_storage(ref)) {
    TPR_RETURN_IF_ERROR(tpr_buffer_from_host(tpr_eager_client(), ref->storage->device,
                                             ref->dtype, &numel, 1, data, &b));
    tpr_eager_lock();
    tpr_storage_swap_buffer(ref->storage, b);
    tpr_eager_unlock();
    return tpr_ok_status();
  }
  TPR_RETURN_IF_ERROR(tpr_buffer_from_host(tpr_eager_client(), ref->storage->device,
                                           ref->dtype, ref->sizes, ref->rank, data, &b));
  tpr_eager_arg_t a = {0};
  a.arg.kind = TPR_ARG_TENSOR;
  a.buffer = b;
  tpr_type_t t = ref_type(ref);
  const tpr_tensor_ref_t* targets[1] = {ref};
  tpr_eager_call_t call = {"tpu::copy_from_host", ref->storage->device, &a, 1,
                           &t, 1, targets, lower_identity};
  tpr_status_t s = tpr_eager_run(&call);
  tpr_buffer_release(b);
  return s;
}

tpr_status_t tpr_tensor_read_host(const tpr_tensor_ref_t* ref, void* data,
                                  size_t size) {
  int64_t numel = tpr_tensor_ref_numel(ref);
  if ((size_t)numel * tpr_dtype_size(ref->dtype) != size)
    return TPR_ERR(INVALID_ARGUMENT, "host copy of a tensor of %lld %s elements into %zu bytes",
                   (long long)numel, tpr_dtype_name(ref->dtype), size);
  if (numel == 0) return tpr_ok_status();
  tpr_eager_lock();
  tpr_buffer_t* b = tpr_buffer_retain(ref->storage->buffer);
  tpr_eager_unlock();
  if (!b) {  // never written: PyTorch's empty() may hold anything; zeros
    memset(data, 0, size);
    return tpr_ok_status();
  }
  if (!ref_is_whole_buffer(ref, b)) {
    tpr_buffer_release(b);
    // Materialise the window densely in a scratch storage, then read that.
    tpr_storage_t* tmp;
    TPR_RETURN_IF_ERROR(tpr_storage_create(ref->storage->device, size, &tmp));
    tpr_tensor_ref_t dense = *ref;
    dense.storage = tmp;
    dense.offset = 0;
    int64_t st = 1;
    for (int i = ref->rank - 1; i >= 0; i--) {
      dense.strides[i] = st;
      st *= ref->sizes[i];
    }
    tpr_eager_arg_t a = {0};
    a.arg.kind = TPR_ARG_TENSOR;
    a.tensor = ref;
    tpr_type_t t = ref_type(ref);
    const tpr_tensor_ref_t* targets[1] = {&dense};
    tpr_eager_call_t call = {"tpu::copy_to_host", ref->storage->device, &a, 1,
                             &t, 1, targets, lower_identity};
    tpr_status_t s = tpr_eager_run(&call);
    if (!tpr_status_is_ok(s)) {
      tpr_storage_release(tmp);
      return s;
    }
    b = tpr_buffer_retain(tmp->buffer);
    tpr_storage_release(tmp);
  }
  tpr_status_t s = tpr_buffer_to_host(b, data, size);
  tpr_buffer_release(b);
  return s;
}

static tpr_status_t lower_resize(tpr_lower_ctx_t* ctx) {
  tpr_value_t v = ctx->args[0].value;
  int64_t have = tpr_value_type(ctx->graph, v)->dims[0];
  int64_t want = ctx->out_types[0].dims[0];
  if (want <= have) {
    int64_t start = 0, one = 1;
    ctx->outs[0] = tpr_slice(ctx->graph, v, &start, &want, &one);
  } else {
    int64_t lo = 0, hi = want - have, in = 0;
    tpr_dtype_t dt = tpr_value_type(ctx->graph, v)->dtype;
    ctx->outs[0] = tpr_pad(ctx->graph, v, tpr_constant_i64(ctx->graph, dt, 0),
                           &lo, &hi, &in);
  }
  return tpr_ok_status();
}

tpr_status_t tpr_storage_resize(tpr_storage_t* storage, size_t nbytes) {
  tpr_eager_lock();
  tpr_buffer_t* b = storage->buffer;
  size_t old = storage->nbytes;
  tpr_dtype_t dt = b ? tpr_buffer_dtype(b) : TPR_DTYPE_INVALID;
  size_t item = b ? tpr_dtype_size(dt) : 1;
  int64_t have = b ? tpr_buffer_numel(b) : 0;
  storage->nbytes = nbytes;
  tpr_eager_unlock();
  if (!b || nbytes == old) return tpr_ok_status();
  if (nbytes % item != 0) {
    tpr_eager_lock();
    storage->nbytes = old;
    tpr_eager_unlock();
    return TPR_ERR(UNIMPLEMENTED, "resizing a storage of %s elements to %zu bytes",
                   tpr_dtype_name(dt), nbytes);
  }
  tpr_tensor_ref_t src = {storage, dt, 1, {have}, {1}, 0};
  tpr_tensor_ref_t dst = {storage, dt, 1, {(int64_t)(nbytes / item)}, {1}, 0};
  if (dst.sizes[0] == 0) {
    tpr_eager_lock();
    tpr_storage_swap_buffer(storage, NULL);
    tpr_eager_unlock();
    return tpr_ok_status();
  }
  tpr_eager_arg_t a = {0};
  a.arg.kind = TPR_ARG_TENSOR;
  a.tensor = &src;
  tpr_type_t t = ref_type(&dst);
  const tpr_tensor_ref_t* targets[1] = {&dst};
  tpr_eager_call_t call = {"tpu::resize_storage", storage->device, &a, 1, &t, 1,
                           targets, lower_resize};
  return tpr_eager_run(&call);
}

//===--- fused eager -------------------------------------------------------===//

static atomic_bool fused_mode;

const char* tpr_cut_cause_name(tpr_cut_cause_t cause) {
  static const char* names[TPR_CUT_COUNT_] = {
      "host_read", "host_write", "synchronize", "size_limit", "device_change",
      "mode_change", "resize", "explicit", "other"};
  return (unsigned)cause < TPR_CUT_COUNT_ ? names[cause] : "unknown";
}

tpr_status_t tpr_fused_flush_locked(tpr_cut_cause_t cause) {
  (void)cause;
  return tpr_ok_status();
}

tpr_status_t tpr_eager_flush(tpr_cut_cause_t cause) {
  tpr_eager_lock();
  tpr_status_t s = tpr_fused_flush_locked(cause);
  tpr_eager_unlock();
  return s;
}

void tpr_eager_set_fused(bool on) {
  if (!on && atomic_load(&fused_mode)) tpr_status_free(tpr_eager_flush(TPR_CUT_MODE_CHANGE));
  atomic_store(&fused_mode, on);
}

bool tpr_eager_fused(void) { return atomic_load(&fused_mode); }
