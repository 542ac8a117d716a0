// The eager executor: one ATen op -> one graph (view reads, the lowering
// rule, view write-backs) -> a cached executable -> buffers swapped into
// the written storages.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eager/internal.h"

// Per-storage state while the pending graph is built.
typedef struct slot {
  tpr_storage_t* storage;  // NULL once the storage died (its value is dropped)
  tpr_value_t base;        // parameter holding the storage's buffer, or NONE
  tpr_value_t current;     // value after the graph's writes, or NONE
  int param;               // index of |base| among the parameters, or -1
} slot_t;

// A slot's state before the op being built changed it (for rollback).
typedef struct undo {
  int32_t slot;
  tpr_value_t base, current;
} undo_t;

// The pending graph and its bookkeeping (all guarded by the executor lock).
// Strict mode runs it after every op; fused mode at a cut.
static tpr_graph_t* graph;
static int graph_device;      // device of the pending ops
static int graph_ops;         // ops appended since the last run
static char graph_op_name[96];  // the last op appended (for logs)
static slot_t* slots;
static int num_slots, cap_slots;
static tpr_buffer_t** params;  // one reference each
static int num_params, cap_params;
static undo_t* undo_log;
static int num_undo, cap_undo;
static int op_first_slot;  // slots below existed before the current op
static tpr_arg_t* args;
static int cap_args;
static tpr_value_t* list_values;
static int num_list_values, cap_list_values;
static int* result_slots;  // slot index of each graph result
static int cap_results;
static tpr_buffer_t** results;
static int cap_result_buffers;
static int32_t* result_params;  // per result: the parameter it updates in place, or -1
static int cap_result_params;
static bool* donate;            // per parameter
static int cap_donate;

static tpr_eager_stats_t stats;
// Strict mode: the call whose graph is being built, to be remembered for
// replay under its signature (NULL: not recordable).
static const tpr_eager_call_t* record_call;
static uint64_t record_hash;
static tpr_storage_t** result_storages;
static int cap_result_storages;
static atomic_bool fused_mode;
static int64_t fuse_max_ops = 1024;
static char lost_reason[256];  // why poisoned storages lost their value

// Loop alignment. A loop with no sync point would otherwise be cut only by
// the size bound, at a different place in each iteration, so every graph
// would be new. The executor hashes a sliding window of the last LOOP_WINDOW
// op signatures and remembers the windows where size-limit cuts happened
// (anchors); later it cuts wherever an anchor recurs, once the graph is at
// least half the bound. In a loop the cuts then settle on a fixed set of
// places and every graph is found in the cache (also when one iteration is
// longer than the bound: it is split the same way each time).
#define LOOP_WINDOW 16
#define MAX_ANCHORS 32
static uint64_t op_window[LOOP_WINDOW];
static unsigned op_window_pos;
static uint64_t loop_anchors[MAX_ANCHORS];
static int num_anchors, next_anchor;
static int64_t size_cut_compiles;  // compiles of graphs cut by size

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

static bool fusing(void) {
  return atomic_load(&fused_mode) && !tpr_eager_launch_blocking();
}

static void release_params_from(int first) {
  for (int i = first; i < num_params; i++) tpr_buffer_release(params[i]);
  num_params = first;
}

// Forgets the pending graph (its parameters are released).
static void reset_pending(void) {
  release_params_from(0);
  num_slots = 0;
  graph_ops = 0;
  if (graph) tpr_graph_reset(graph);
}

// Adds |buffer| as the next parameter, taking over the caller's reference.
static tpr_status_t add_param(tpr_buffer_t* buffer, tpr_value_t* out) {
  if (num_params + 1 > cap_params) {
    int nc = cap_params ? cap_params * 2 : 16;
    tpr_buffer_t** p = tpr_realloc(params, (size_t)nc * sizeof *p);
    if (!p) {
      tpr_buffer_release(buffer);
      return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
    }
    params = p;
    cap_params = nc;
  }
  params[num_params++] = buffer;
  *out = tpr_parameter(graph, tpr_type_make(tpr_buffer_dtype(buffer),
                                            tpr_buffer_rank(buffer),
                                            tpr_buffer_dims(buffer)));
  return tpr_ok_status();
}

// Uploaded Scalar arguments, reused by value: most ops pass the same few
// scalars (alpha=1, eps, a learning rate), and a host-to-device transfer per
// op would dominate small ops. Buffers are immutable, so sharing is safe.
#define SCALAR_CACHE_SIZE 64
static struct scalar_entry {
  tpr_buffer_t* buffer;  // NULL = empty
  int device;
  tpr_dtype_t dtype;
  uint64_t bits[2];
} scalar_cache[SCALAR_CACHE_SIZE];

static struct scalar_entry* scalar_entry(int device, tpr_dtype_t dtype,
                                          const void* value, uint64_t bits[2]) {
  bits[0] = bits[1] = 0;
  memcpy(bits, value, tpr_dtype_size(dtype) <= 16 ? tpr_dtype_size(dtype) : 16);
  // A full 64-bit mix (splitmix64's finalizer): the common scalars are
  // doubles like 1.0, 2.0 and 0.5 whose bits differ only at the top, and a
  // multiplicative hash sends them all to one slot.
  uint64_t h = bits[0] ^ (bits[1] * 0x9E3779B97F4A7C15ull) ^
               ((uint64_t)dtype << 48) ^ ((uint64_t)(uint32_t)device << 56);
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  return &scalar_cache[h % SCALAR_CACHE_SIZE];
}

tpr_buffer_t* tpr_scalar_buffer_peek(int device, tpr_dtype_t dtype,
                                     const void* value) {
  uint64_t bits[2];
  struct scalar_entry* e = scalar_entry(device, dtype, value, bits);
  return e->buffer && e->device == device && e->dtype == dtype &&
                 e->bits[0] == bits[0] && e->bits[1] == bits[1]
             ? e->buffer
             : NULL;
}

tpr_status_t tpr_scalar_buffer(int device, tpr_dtype_t dtype, const void* value,
                               tpr_buffer_t** out) {
  *out = tpr_scalar_buffer_peek(device, dtype, value);
  if (*out) return tpr_ok_status();
  uint64_t bits[2];
  struct scalar_entry* e = scalar_entry(device, dtype, value, bits);
  tpr_buffer_t* b = NULL;
  TPR_RETURN_IF_ERROR(
      tpr_buffer_from_host(tpr_eager_client(), device, dtype, NULL, 0, value, &b));
  tpr_buffer_release(e->buffer);
  *e = (struct scalar_entry){b, device, dtype, {bits[0], bits[1]}};
  *out = b;
  return tpr_ok_status();
}

static tpr_status_t scalar_param(tpr_dtype_t dtype, const void* value,
                                 tpr_value_t* out) {
  tpr_buffer_t* b;
  TPR_RETURN_IF_ERROR(tpr_scalar_buffer(graph_device, dtype, value, &b));
  return add_param(tpr_buffer_retain(b), out);
}

static void clear_scalar_cache(void) {
  for (int i = 0; i < SCALAR_CACHE_SIZE; i++) {
    tpr_buffer_release(scalar_cache[i].buffer);
    scalar_cache[i].buffer = NULL;
  }
}

static tpr_status_t upload_param(tpr_dtype_t dtype, int rank,
                                 const int64_t* dims, const void* data,
                                 tpr_value_t* out) {
  tpr_buffer_t* b = NULL;
  TPR_RETURN_IF_ERROR(tpr_buffer_from_host(tpr_eager_client(), graph_device,
                                           dtype, dims, rank, data, &b));
  return add_param(b, out);
}

static slot_t* find_slot(const tpr_storage_t* storage) {
  int i = storage->slot;
  return i >= 0 && i < num_slots && slots[i].storage == storage ? &slots[i]
                                                                 : NULL;
}

static tpr_status_t get_slot(tpr_storage_t* storage, slot_t** out) {
  slot_t* found = find_slot(storage);
  if (found) {
    *out = found;
    return tpr_ok_status();
  }
  GROW(slots, cap_slots, num_slots + 1);
  storage->slot = num_slots;
  slot_t* s = &slots[num_slots++];
  s->storage = storage;
  s->base = TPR_VALUE_NONE;
  s->current = TPR_VALUE_NONE;
  s->param = -1;
  *out = s;
  return tpr_ok_status();
}

// Remembers a slot's state before the current op changes it.
static tpr_status_t save_slot(const slot_t* slot) {
  int32_t i = (int32_t)(slot - slots);
  if (i >= op_first_slot) return tpr_ok_status();  // dropped on rollback
  GROW(undo_log, cap_undo, num_undo + 1);
  undo_log[num_undo++] = (undo_t){i, slot->base, slot->current};
  return tpr_ok_status();
}

static tpr_status_t lost_error(void) {
  return TPR_ERR(FAILED_PRECONDITION,
                 "this tensor's value was lost because a fused graph that "
                 "wrote it failed: %s", lost_reason);
}

// Makes the slot's storage contents a value of the graph: its buffer as a
// parameter, or, for a never-written storage, zeros made in the graph (no
// upload, and nothing at all when the op overwrites the whole storage).
static tpr_status_t ensure_base(slot_t* slot, tpr_dtype_t dtype_if_new) {
  if (slot->base != TPR_VALUE_NONE) return tpr_ok_status();
  if (slot->storage->lost) return lost_error();
  TPR_RETURN_IF_ERROR(save_slot(slot));
  if (slot->storage->buffer) {
    slot->param = num_params;
    return add_param(tpr_buffer_retain(slot->storage->buffer), &slot->base);
  }
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
    TPR_RETURN_IF_ERROR(save_slot(slot));
    int64_t n = tpr_tensor_ref_numel(r);
    slot->current = tpr_reshape(graph, v, 1, &n);
    return tpr_ok_status();
  }
  TPR_RETURN_IF_ERROR(ensure_base(slot, r->dtype));
  TPR_RETURN_IF_ERROR(save_slot(slot));
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
              scalar_param(ea->scalar_dtype, &ea->scalar, &a->value));
        } else if (ea->buffer) {
          TPR_RETURN_IF_ERROR(add_param(tpr_buffer_retain(ea->buffer), &a->value));
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

double tpr_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tpr_status_t tpr_eager_find_executable_locked(const tpr_graph_t* graph,
                                              const uint64_t key[2],
                                              tpr_executable_t** out) {
  *out = tpr_exec_cache_find(key);
  if (*out) {
    stats.cache_hits++;
    return tpr_ok_status();
  }
  stats.cache_misses++;
  tpr_executable_t* exe = NULL;
  tpr_status_t s = tpr_disk_cache_load(key, &exe);
  bool from_disk = tpr_status_is_ok(s);
  tpr_status_free(s);
  if (!from_disk) return tpr_ok_status();
  s = tpr_exec_cache_insert(key, exe, 16 + tpr_graph_num_nodes(graph));
  tpr_executable_release(exe);  // the cache keeps its own reference
  if (tpr_status_is_ok(s)) *out = exe;
  return s;
}

tpr_status_t tpr_eager_keep_executable_locked(const tpr_graph_t* graph,
                                              const uint64_t key[2],
                                              tpr_executable_t* exe) {
  tpr_disk_cache_store(key, exe);
  return tpr_exec_cache_insert(key, exe, 16 + tpr_graph_num_nodes(graph));
}

// The executable for the graph: from memory, else from the disk cache, else
// compiled (and written to both).
tpr_status_t tpr_eager_get_executable_locked(tpr_graph_t* graph,
                                             const char* what,
                                             tpr_executable_t** out) {
  uint64_t key[2];
  tpr_graph_hash(graph, key);
  tpr_executable_t* exe = NULL;
  TPR_RETURN_IF_ERROR(tpr_eager_find_executable_locked(graph, key, &exe));
  if (exe) {
    *out = exe;
    return tpr_ok_status();
  }
  char* text = NULL;
  size_t len = 0;
  TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(graph, &text, &len));
  if (getenv("TORCH_TPU_DUMP_STABLEHLO")) fprintf(stderr, "%s\n", text);
  double t0 = tpr_now_seconds();
  bool tiered = tpr_tierup_enabled();
  tpr_status_t s = tiered ? tpr_executable_compile_first_tier(tpr_eager_client(), text, len, &exe)
                          : tpr_executable_compile(tpr_eager_client(), text, len, &exe);
  if (!tpr_status_is_ok(s)) {
    tpr_free(text);
    return s;
  }
  if (getenv("TORCH_TPU_LOG_COMPILES"))
    fprintf(stderr, "torch_tpu: compiled %s (%zu bytes of StableHLO%s) in %.1f ms\n",
            what, len, tiered ? ", first tier" : "", 1e3 * (tpr_now_seconds() - t0));
  if (tiered) {
    s = tpr_tierup_enqueue(key, exe, text, len);  // takes |text|
    if (tpr_status_is_ok(s))
      s = tpr_exec_cache_insert(key, exe, 16 + tpr_graph_num_nodes(graph));
  } else {
    tpr_free(text);
    s = tpr_eager_keep_executable_locked(graph, key, exe);
  }
  tpr_executable_release(exe);  // the cache keeps its own reference
  TPR_RETURN_IF_ERROR(s);
  *out = exe;
  return tpr_ok_status();
}

void tpr_eager_choose_donations(tpr_buffer_t* const* params, int num_params,
                                const int32_t* result_params, int num_results,
                                int refs, bool* donate) {
  for (int i = 0; i < num_params; i++) donate[i] = false;
  for (int r = 0; r < num_results; r++) {
    int p = result_params[r];
    if (p < 0 || p >= num_params) continue;
    bool once = true;  // PJRT rejects a donated buffer passed twice
    for (int j = 0; j < num_params && once; j++) once = j == p || params[j] != params[p];
    donate[p] = once && tpr_pending_can_donate(params[p], refs);
    stats.donated_buffers += donate[p];
  }
}

size_t tpr_eager_fresh_bytes(tpr_buffer_t* const* results, const int32_t* result_params,
                             int num_results, const bool* donate) {
  size_t bytes = 0;
  for (int r = 0; r < num_results; r++)
    if (result_params[r] < 0 || !donate[result_params[r]])
      bytes += tpr_buffer_byte_size(results[r]);
  return bytes;
}

// Compiles (or finds) and runs the pending graph, then swaps its results
// into the storages it wrote. Storages that died meanwhile are not results.
static tpr_status_t execute_pending(void) {
  int num_results = 0;
  for (int i = 0; i < num_slots; i++) {
    const slot_t* sl = &slots[i];
    if (!sl->storage || sl->current == TPR_VALUE_NONE || sl->current == sl->base)
      continue;
    GROW(result_slots, cap_results, num_results + 1);
    GROW(result_params, cap_result_params, num_results + 1);
    result_slots[num_results] = i;
    result_params[num_results++] = -1;
    tpr_graph_add_result(graph, sl->current);
  }
  TPR_RETURN_IF_ERROR(tpr_graph_status(graph));
  if (num_results == 0) return tpr_ok_status();
  // A storage's new value takes the place of its old buffer (an alias the
  // program is compiled with), so that updating a window of a large storage
  // (a KV cache's slots, an optimizer's state) costs the window when the
  // buffer can be donated. Where it cannot, the runtime copies it first.
  for (int r = 0; r < num_results; r++) {
    const slot_t* sl = &slots[result_slots[r]];
    if (sl->param < 0 || sl->param >= num_params) continue;
    const tpr_buffer_t* b = params[sl->param];
    tpr_type_t pt = tpr_type_make(tpr_buffer_dtype(b), tpr_buffer_rank(b),
                                  tpr_buffer_dims(b));
    const tpr_type_t* rt = tpr_value_type(graph, sl->current);
    if (!rt || !tpr_type_equal(rt, &pt)) continue;
    tpr_graph_alias(graph, sl->param, r);
    result_params[r] = sl->param;
  }
  TPR_RETURN_IF_ERROR(tpr_graph_status(graph));
  // (Formatting costs as much as a small op's bookkeeping: strict mode
  // names the graph by its op.)
  char fused_what[128];
  const char* what = graph_op_name;
  if (graph_ops > 1) {
    snprintf(fused_what, sizeof fused_what, "a fused graph of %d ops (last %s)",
             graph_ops, graph_op_name);
    what = fused_what;
  }
  tpr_executable_t* exe;
  TPR_RETURN_IF_ERROR(tpr_eager_get_executable_locked(graph, what, &exe));
  GROW(results, cap_result_buffers, num_results);
  if (record_call) {
    GROW(result_storages, cap_result_storages, num_results);
    for (int i = 0; i < num_results; i++)
      result_storages[i] = slots[result_slots[i]].storage;
    tpr_replay_record(record_call, record_hash, exe, params, num_params,
                      result_storages, result_params, num_results);
  }
  GROW(donate, cap_donate, num_params);
  tpr_eager_choose_donations(params, num_params, result_params, num_results, 2, donate);
  TPR_RETURN_IF_ERROR(tpr_executable_execute(exe, graph_device, params,
                                             (size_t)num_params, donate, results,
                                             tpr_eager_launch_blocking()));
  tpr_pending_push(results[0],
                   tpr_eager_fresh_bytes(results, result_params, num_results, donate));
  for (int i = 0; i < num_results; i++)
    tpr_storage_swap_buffer(slots[result_slots[i]].storage, results[i]);
  return tpr_ok_status();
}

// Runs the pending graph. A failure in fused mode happens after the ops
// returned, so the storages they wrote are marked lost rather than left
// holding stale values.
static tpr_status_t run_pending(bool poison_on_error) {
  if (graph_ops == 0) return tpr_ok_status();
  tpr_status_t s = execute_pending();
  if (!tpr_status_is_ok(s) && poison_on_error) {
    snprintf(lost_reason, sizeof lost_reason, "%s", tpr_status_message(s));
    for (int i = 0; i < num_slots; i++)
      if (slots[i].storage && slots[i].current != TPR_VALUE_NONE &&
          slots[i].current != slots[i].base)
        slots[i].storage->lost = true;
  }
  reset_pending();
  return s;
}

tpr_status_t tpr_fused_flush_locked(tpr_cut_cause_t cause) {
  if (graph_ops == 0) return tpr_ok_status();
  if ((unsigned)cause < TPR_CUT_COUNT_) stats.cuts[cause]++;
  stats.fused_graphs++;
  return run_pending(true);
}

static void rollback_op(const tpr_graph_mark_t* mark, int first_param) {
  tpr_graph_rollback(graph, mark);
  release_params_from(first_param);
  for (int i = num_undo - 1; i >= 0; i--) {
    slots[undo_log[i].slot].base = undo_log[i].base;
    slots[undo_log[i].slot].current = undo_log[i].current;
  }
  num_slots = op_first_slot;
}

// Appends the op to the pending graph: reads of its inputs, the rule,
// writes of its results.
static tpr_status_t append_op(const tpr_eager_call_t* call) {
  TPR_RETURN_IF_ERROR(build_args(call));
  tpr_value_t outs_local[16];
  tpr_value_t* outs = outs_local;
  if (call->num_outs > 16) {
    outs = tpr_malloc((size_t)call->num_outs * sizeof *outs);
    if (!outs) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (int i = 0; i < call->num_outs; i++) outs[i] = TPR_VALUE_NONE;
  tpr_lower_ctx_t ctx = {graph, call->op_name, args, call->num_args,
                         call->out_types, call->num_outs, outs, call->rule_data};
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
  if (tpr_status_is_ok(s)) s = tpr_graph_status(graph);
  // Run-time checks are for whole-graph programs; eager gives its ops
  // inputs that need none (boolean masks arrive as indices).
  if (tpr_status_is_ok(s) && tpr_graph_num_checks(graph) > 0)
    s = TPR_ERR(UNIMPLEMENTED, "%s: needs a run-time check (%s), which eager does not run",
                call->op_name, tpr_graph_check_message(graph, 0));
  return s;
}

static uint64_t op_signature(const tpr_eager_call_t* call) {
  uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
  for (const char* p = call->op_name; *p; p++) MIX((unsigned char)*p);
  MIX(call->num_args);
  for (int i = 0; i < call->num_outs; i++) {
    const tpr_type_t* t = &call->out_types[i];
    MIX(t->dtype);
    for (int d = 0; d < t->rank; d++) MIX(t->dims[d]);
  }
#undef MIX
  return h;
}

// Hash of the last LOOP_WINDOW signatures after appending |sig|.
static uint64_t push_op_window(uint64_t sig) {
  op_window[op_window_pos++ % LOOP_WINDOW] = sig;
  uint64_t h = 0;
  for (unsigned i = 0; i < LOOP_WINDOW; i++)
    h = (h ^ op_window[(op_window_pos + i) % LOOP_WINDOW]) * 0x100000001B3ull + i;
  return h;
}

// Cuts a fused graph at the size bound, or where a loop repeats.
static tpr_status_t maybe_cut(uint64_t window) {
  if (graph_ops >= fuse_max_ops) {
    bool known = false;
    for (int i = 0; i < num_anchors && !known; i++) known = loop_anchors[i] == window;
    if (!known) {
      loop_anchors[next_anchor] = window;
      next_anchor = (next_anchor + 1) % MAX_ANCHORS;
      if (num_anchors < MAX_ANCHORS) num_anchors++;
    }
    int64_t compiles_before = stats.cache_misses;
    tpr_status_t s = tpr_fused_flush_locked(TPR_CUT_SIZE_LIMIT);
    if (stats.cache_misses > compiles_before && ++size_cut_compiles == 8)
      fprintf(stderr,
              "torch_tpu: fused graphs keep reaching the size bound (%lld ops) "
              "and compiling; call torch_tpu.mark_step() once per training "
              "step, or raise TORCH_TPU_FUSE_MAX_OPS\n",
              (long long)fuse_max_ops);
    return s;
  }
  if (graph_ops < fuse_max_ops / 2) return tpr_ok_status();
  for (int i = 0; i < num_anchors; i++)
    if (loop_anchors[i] == window) return tpr_fused_flush_locked(TPR_CUT_LOOP);
  return tpr_ok_status();
}

static tpr_status_t device_mismatch(const tpr_eager_call_t* call, const char* what,
                                    int index, int device) {
  return TPR_ERR(FAILED_PRECONDITION,
                 "Expected all tensors to be on the same device, but got %s %d is on "
                 "tpu:%d, different from the op's device tpu:%d",
                 what, index, device, call->device);
}

// Every tensor an op reads or writes lives on the device it runs on: an
// argument on another device would otherwise surface only when the program
// runs (in fused mode, at a later sync point).
static tpr_status_t check_devices(const tpr_eager_call_t* call) {
  int ndev = tpr_client_device_count(tpr_eager_client());
  if (call->device < 0 || call->device >= ndev)
    return TPR_ERR(OUT_OF_RANGE, "tpu device index %d is out of range: %d device(s)",
                   call->device, ndev);
  for (int i = 0; i < call->num_args; i++) {
    const tpr_eager_arg_t* ea = &call->args[i];
    if (ea->arg.kind == TPR_ARG_TENSOR && !ea->arg.is_scalar) {
      int d = ea->buffer   ? tpr_buffer_device(ea->buffer)
              : ea->tensor ? ea->tensor->storage->device
                           : call->device;
      if (d != call->device) return device_mismatch(call, "argument", i, d);
    } else if (ea->arg.kind == TPR_ARG_TENSOR_LIST) {
      for (int k = 0; k < ea->arg.count; k++)
        if (ea->tensors[k] && ea->tensors[k]->storage->device != call->device)
          return device_mismatch(call, "list argument", i,
                                 ea->tensors[k]->storage->device);
    }
  }
  for (int i = 0; i < call->num_outs; i++)
    if (call->out_targets[i] && call->out_targets[i]->storage->device != call->device)
      return device_mismatch(call, "result", i, call->out_targets[i]->storage->device);
  return tpr_ok_status();
}

static tpr_status_t run_locked(const tpr_eager_call_t* call) {
  if (!tpr_eager_client())
    return TPR_ERR(FAILED_PRECONDITION, "the tpu runtime is not initialized");
  TPR_RETURN_IF_ERROR(check_devices(call));
  if (!graph) TPR_RETURN_IF_ERROR(tpr_graph_create(&graph));
  bool fused = fusing();
  // Ops recorded in fused mode still pending after a switch to strict or
  // debug mode (e.g. launch blocking turned on directly) run first, as a
  // fused graph of their own.
  if (graph_ops > 0 && !fused)
    TPR_RETURN_IF_ERROR(tpr_fused_flush_locked(TPR_CUT_MODE_CHANGE));
  if (graph_ops > 0 && call->device != graph_device)
    TPR_RETURN_IF_ERROR(tpr_fused_flush_locked(TPR_CUT_DEVICE_CHANGE));
  graph_device = call->device;

  record_call = NULL;
  if (!fused) {
    uint64_t h;
    if (tpr_replay_signature(call, &h)) {
      bool ran;
      TPR_RETURN_IF_ERROR(tpr_replay_run(call, h, &ran));
      if (ran) {
        stats.ops++;
        stats.cache_hits++;
        stats.replayed_ops++;
        return tpr_ok_status();
      }
      record_call = call;
      record_hash = h;
    }
  }

  tpr_graph_mark_t mark = tpr_graph_get_mark(graph);
  int first_param = num_params;
  op_first_slot = num_slots;
  num_undo = 0;
  tpr_status_t s = append_op(call);
  if (!tpr_status_is_ok(s)) {
    record_call = NULL;
    rollback_op(&mark, first_param);
    return s;
  }
  graph_ops++;
  size_t name_len = strlen(call->op_name);
  if (name_len >= sizeof graph_op_name) name_len = sizeof graph_op_name - 1;
  memcpy(graph_op_name, call->op_name, name_len);
  graph_op_name[name_len] = '\0';
  if (!fused) {
    s = run_pending(false);
    record_call = NULL;
    if (tpr_status_is_ok(s)) stats.ops++;
    return s;
  }
  stats.ops++;
  stats.fused_ops++;
  return maybe_cut(push_op_window(op_signature(call)));
}

tpr_status_t tpr_eager_run(const tpr_eager_call_t* call) {
  TPR_RETURN_IF_ERROR(tpr_eager_check_process());
  tpr_eager_lock();
  tpr_status_t s = run_locked(call);
  tpr_eager_unlock();
  if (!tpr_status_is_ok(s) && !strstr(tpr_status_message(s), call->op_name))
    s = tpr_status_annotate(s, "%s", call->op_name);
  return s;
}

tpr_status_t tpr_fused_settle_locked(const tpr_storage_t* storage,
                                     tpr_cut_cause_t cause) {
  return storage && find_slot(storage) ? tpr_fused_flush_locked(cause)
                                       : tpr_ok_status();
}

void tpr_fused_forget_storage(tpr_storage_t* storage) {
  slot_t* slot = find_slot(storage);
  if (slot) slot->storage = NULL;
}

tpr_status_t tpr_eager_trim(void) {
  TPR_RETURN_IF_ERROR(tpr_eager_flush(TPR_CUT_OTHER));
  TPR_RETURN_IF_ERROR(tpr_pending_drain());
  tpr_eager_lock();
  tpr_exec_cache_clear();
  tpr_replay_clear();
  clear_scalar_cache();
  tpr_graph_free(graph);
  graph = NULL;
#define FREE_ARRAY(p, cap) (tpr_free(p), (p) = NULL, (cap) = 0)
  FREE_ARRAY(slots, cap_slots);
  FREE_ARRAY(params, cap_params);
  FREE_ARRAY(undo_log, cap_undo);
  FREE_ARRAY(args, cap_args);
  FREE_ARRAY(list_values, cap_list_values);
  FREE_ARRAY(result_slots, cap_results);
  FREE_ARRAY(result_params, cap_result_params);
  FREE_ARRAY(donate, cap_donate);
  FREE_ARRAY(results, cap_result_buffers);
  FREE_ARRAY(result_storages, cap_result_storages);
#undef FREE_ARRAY
  tpr_eager_unlock();
  return tpr_ok_status();
}

void tpr_eager_get_stats(tpr_eager_stats_t* out) {
  tpr_eager_lock();
  *out = stats;
  out->cached_executables = (int64_t)tpr_exec_cache_size();
  out->cache_evictions = tpr_exec_cache_evictions();
  out->pending_ops = graph_ops;
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

// Writes host |data| into the window; |on_done| non-NULL lends |data| to
// the runtime (tpr_buffer_lend_host) instead of copying it.
static tpr_status_t write_host(const tpr_tensor_ref_t* ref, void* data,
                               size_t size, void (*on_done)(void*),
                               void* ctx) {
  int64_t numel = tpr_tensor_ref_numel(ref);
  tpr_status_t s = tpr_ok_status();
  if ((size_t)numel * tpr_dtype_size(ref->dtype) != size)
    s = TPR_ERR(INVALID_ARGUMENT, "host copy of %zu bytes into a tensor of %lld %s elements",
                size, (long long)numel, tpr_dtype_name(ref->dtype));
  else if (numel > 0 && !tpr_eager_client())
    s = TPR_ERR(FAILED_PRECONDITION, "the tpu runtime is not initialized");
  if (!tpr_status_is_ok(s) || numel == 0) {
    if (on_done) on_done(ctx);
    return s;
  }
  // A write covering the storage replaces its buffer; any other lands
  // through a temporary buffer of the window's shape.
  bool whole = covers_storage(ref);
  const int64_t* dims = whole ? &numel : ref->sizes;
  int rank = whole ? 1 : ref->rank;
  tpr_buffer_t* b = NULL;
  TPR_RETURN_IF_ERROR(
      on_done ? tpr_buffer_lend_host(tpr_eager_client(), ref->storage->device, ref->dtype,
                                     dims, rank, data, on_done, ctx, &b)
              : tpr_buffer_from_host(tpr_eager_client(), ref->storage->device, ref->dtype,
                                     dims, rank, data, &b));
  if (whole) {
    tpr_eager_lock();
    // The pending graph may read the old contents: run it first.
    s = tpr_fused_settle_locked(ref->storage, TPR_CUT_HOST_WRITE);
    tpr_storage_swap_buffer(ref->storage, b);
    tpr_eager_unlock();
    return s;
  }
  tpr_eager_arg_t a = {0};
  a.arg.kind = TPR_ARG_TENSOR;
  a.buffer = b;
  tpr_type_t t = ref_type(ref);
  const tpr_tensor_ref_t* targets[1] = {ref};
  tpr_eager_call_t call = {"tpu::copy_from_host", ref->storage->device, &a, 1,
                           &t, 1, targets, lower_identity};
  s = tpr_eager_run(&call);
  tpr_buffer_release(b);
  return s;
}

tpr_status_t tpr_tensor_write_host(const tpr_tensor_ref_t* ref,
                                   const void* data, size_t size) {
  // (Only read: the copying path never writes |data|.)
  return write_host(ref, (void*)data, size, NULL, NULL);
}

tpr_status_t tpr_tensor_lend_host(const tpr_tensor_ref_t* ref, void* data,
                                  size_t size, void (*on_done)(void* ctx),
                                  void* ctx) {
  if (!on_done) return TPR_ERR(INVALID_ARGUMENT, "on_done is NULL");
  return write_host(ref, data, size, on_done, ctx);
}

// The largest fill made on the host and uploaded. Where device memory is
// host memory, a fill of 4 KiB to 1 MiB takes 0.006-0.06 ms against the
// compiled fill's 0.011-0.034 ms (and saves its 20-35 ms compile), a 16 MiB
// one 4-8x longer than the compiled fill (the host writes it twice, into
// fresh pages); across a bus only small ones are cheaper than a launch.
enum { kHostFillMaxBytesCpu = 1 << 20, kHostFillMaxBytesBus = 64 << 10 };

static bool device_memory_is_host_memory(void) {
  tpr_plugin_info_t info;
  tpr_plugin_get_info(tpr_client_plugin(tpr_eager_client()), &info);
  return info.kind == TPR_PLUGIN_KIND_CPU;
}

tpr_status_t tpr_tensor_fill_host(const tpr_tensor_ref_t* ref, const void* item,
                                  size_t item_size, bool* filled) {
  *filled = false;
  if (!item || item_size != tpr_dtype_size(ref->dtype))
    return TPR_ERR(INVALID_ARGUMENT, "fill item of %zu bytes for a %s tensor", item_size,
                   tpr_dtype_name(ref->dtype));
  size_t nbytes = ref->storage->nbytes;
  if (tpr_eager_fused() || !tpr_eager_client() || nbytes == 0 || !covers_storage(ref))
    return tpr_ok_status();
  if (nbytes > (device_memory_is_host_memory() ? kHostFillMaxBytesCpu : kHostFillMaxBytesBus))
    return tpr_ok_status();
  unsigned char* data = tpr_malloc(nbytes);
  if (!data) return TPR_ERR(RESOURCE_EXHAUSTED, "fill of %zu bytes: out of host memory", nbytes);
  const unsigned char* b = item;
  bool bytes_equal = true;
  for (size_t i = 1; i < item_size; i++) bytes_equal &= b[i] == b[0];
  if (bytes_equal) {
    memset(data, b[0], nbytes);
  } else {  // doubling copies: log2(n) memcpys
    memcpy(data, item, item_size);
    for (size_t have = item_size; have < nbytes;) {
      size_t n = have < nbytes - have ? have : nbytes - have;
      memcpy(data + have, data, n);
      have += n;
    }
  }
  tpr_status_t s = write_host(ref, data, nbytes, NULL, NULL);
  tpr_free(data);
  if (tpr_status_is_ok(s)) {
    *filled = true;
    tpr_eager_lock();
    stats.ops++;
    stats.host_fills++;
    tpr_eager_unlock();
  }
  return s;
}

// The storage's buffer once pending work that writes it has run (a new
// reference, or NULL if never written).
static tpr_status_t settled_buffer(tpr_storage_t* storage, tpr_buffer_t** out) {
  *out = NULL;
  TPR_RETURN_IF_ERROR(tpr_eager_check_process());
  tpr_eager_lock();
  tpr_status_t s = tpr_fused_settle_locked(storage, TPR_CUT_HOST_READ);
  if (tpr_status_is_ok(s) && storage->lost) s = lost_error();
  if (tpr_status_is_ok(s)) *out = tpr_buffer_retain(storage->buffer);
  tpr_eager_unlock();
  return s;
}

tpr_status_t tpr_tensor_read_host(const tpr_tensor_ref_t* ref, void* data,
                                  size_t size) {
  int64_t numel = tpr_tensor_ref_numel(ref);
  if ((size_t)numel * tpr_dtype_size(ref->dtype) != size)
    return TPR_ERR(INVALID_ARGUMENT, "host copy of a tensor of %lld %s elements into %zu bytes",
                   (long long)numel, tpr_dtype_name(ref->dtype), size);
  if (numel == 0) return tpr_ok_status();
  tpr_buffer_t* b;
  TPR_RETURN_IF_ERROR(settled_buffer(ref->storage, &b));
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
    if (tpr_status_is_ok(s)) s = settled_buffer(tmp, &b);
    tpr_storage_release(tmp);
    TPR_RETURN_IF_ERROR(s);
  }
  tpr_status_t s = tpr_buffer_to_host(b, data, size);
  tpr_buffer_release(b);
  return s;
}

tpr_status_t tpr_tensor_await(const tpr_tensor_ref_t* ref) {
  tpr_buffer_t* b;
  TPR_RETURN_IF_ERROR(settled_buffer(ref->storage, &b));
  if (!b) return tpr_ok_status();  // never written: nothing to wait for
  tpr_status_t s = tpr_buffer_await(b);
  tpr_buffer_release(b);
  return s;
}

// The window's bytes in |b| (a buffer holding its storage), or NULL unless
// the window is dense whole elements of the buffer's own dtype and the
// device offers host pointers. Awaits |b|.
static tpr_status_t window_bytes(const tpr_tensor_ref_t* ref, tpr_buffer_t* b,
                                 const void** out_data) {
  *out_data = NULL;
  int64_t numel = tpr_tensor_ref_numel(ref);
  if (!b || numel == 0 || !is_contiguous(ref) || tpr_buffer_dtype(b) != ref->dtype ||
      ref->offset < 0 || ref->offset + numel > tpr_buffer_numel(b))
    return tpr_ok_status();
  const void* base;
  TPR_RETURN_IF_ERROR(tpr_buffer_host_pointer(b, &base));
  if (base) *out_data = (const char*)base + (size_t)ref->offset * tpr_dtype_size(ref->dtype);
  return tpr_ok_status();
}

tpr_status_t tpr_tensor_host_view(const tpr_tensor_ref_t* ref,
                                  const void** out_data,
                                  tpr_buffer_t** out_hold) {
  if (!out_data || !out_hold)
    return TPR_ERR(INVALID_ARGUMENT, "out_data or out_hold is NULL");
  *out_data = NULL;
  *out_hold = NULL;
  if (tpr_tensor_ref_numel(ref) == 0 || !is_contiguous(ref)) return tpr_ok_status();
  tpr_buffer_t* b;
  TPR_RETURN_IF_ERROR(settled_buffer(ref->storage, &b));
  tpr_status_t s = window_bytes(ref, b, out_data);
  if (*out_data)
    *out_hold = b;
  else
    tpr_buffer_release(b);
  return s;
}

bool tpr_tensor_host_view_ready(const tpr_tensor_ref_t* ref, const void** out_data,
                                tpr_buffer_t** out_hold) {
  *out_data = NULL;
  *out_hold = NULL;
  if (tpr_tensor_ref_numel(ref) == 0 || !is_contiguous(ref)) return false;
  tpr_eager_lock();
  // A storage the pending fused graph writes is not computed yet.
  tpr_buffer_t* b = find_slot(ref->storage) || ref->storage->lost
                        ? NULL
                        : tpr_buffer_retain(ref->storage->buffer);
  tpr_eager_unlock();
  if (b && tpr_buffer_is_ready(b))  // ready: window_bytes does not wait
    tpr_status_free(window_bytes(ref, b, out_data));
  if (*out_data)
    *out_hold = b;
  else
    tpr_buffer_release(b);
  return *out_data != NULL;
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
  tpr_status_t settled = tpr_fused_settle_locked(storage, TPR_CUT_RESIZE);
  if (!tpr_status_is_ok(settled)) {
    tpr_eager_unlock();
    return settled;
  }
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

const char* tpr_cut_cause_name(tpr_cut_cause_t cause) {
  static const char* names[TPR_CUT_COUNT_] = {
      "host_read", "host_write", "synchronize", "size_limit", "device_change",
      "mode_change", "resize", "explicit", "other", "loop"};
  return (unsigned)cause < TPR_CUT_COUNT_ ? names[cause] : "unknown";
}

tpr_status_t tpr_eager_flush(tpr_cut_cause_t cause) {
  TPR_RETURN_IF_ERROR(tpr_eager_check_process());
  tpr_eager_lock();
  tpr_status_t s = tpr_fused_flush_locked(cause);
  tpr_eager_unlock();
  return s;
}

tpr_status_t tpr_eager_set_fused(bool on) {
  tpr_status_t s = tpr_ok_status();
  if (!on) s = tpr_eager_flush(TPR_CUT_MODE_CHANGE);
  tpr_eager_lock();
  num_anchors = next_anchor = 0;
  tpr_eager_unlock();
  atomic_store(&fused_mode, on);
  return s;
}

bool tpr_eager_fused(void) { return atomic_load(&fused_mode); }

void tpr_eager_set_fuse_max_ops(int64_t n) {
  tpr_eager_lock();
  fuse_max_ops = n > 0 ? n : 1024;
  tpr_eager_unlock();
}
