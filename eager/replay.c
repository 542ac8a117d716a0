// Strict-mode replay: an op whose call looks exactly like an earlier one
// builds the same graph, so after the first time its executable and the
// origin of each parameter are remembered under the call's signature, and
// repeats skip the graph build, the graph hash and the cache lookup.
//
// The signature holds everything the graph depends on: the op name; every
// argument's kind and value (ints, floats, bools, strings, lists, dtypes;
// Scalars only by dtype, their values are parameters); each tensor window's
// dtype, sizes, strides, offset and storage size, whether the storage holds a
// buffer and that buffer's type, and which windows share a storage; the
// result types and result windows. Signatures are compared byte for byte.
// Calls with a generator or a rule override always take the full path.
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "eager/internal.h"

typedef enum { SRC_STORAGE, SRC_SCALAR, SRC_BUFFER } src_kind_t;

typedef struct {
  uint8_t kind;   // src_kind_t
  int32_t index;  // SRC_STORAGE: window index; else argument index
} param_src_t;

typedef struct {
  uint8_t* key;  // NULL: empty
  size_t key_len;
  uint64_t hash;
  tpr_executable_t* exe;  // one reference
  int num_params, num_results;
  param_src_t* params;
  int32_t* results;  // window index each result is written into
  int32_t* result_params;  // parameter each result updates in place, or -1
} plan_t;

#define NUM_PLANS 512
static plan_t plans[NUM_PLANS];

// The signature of the current call and its tensor windows, in order:
// tensor arguments, tensor list entries, then result targets.
static uint8_t* key;
static size_t key_len, key_cap;
static const tpr_tensor_ref_t** windows;
static int num_windows, cap_windows;
static bool key_ok;

static void put(const void* p, size_t n) {
  if (!key_ok) return;
  if (key_len + n > key_cap) {
    size_t nc = key_cap ? key_cap * 2 : 1024;
    while (nc < key_len + n) nc *= 2;
    uint8_t* k = tpr_realloc(key, nc);
    if (!k) {
      key_ok = false;
      return;
    }
    key = k;
    key_cap = nc;
  }
  memcpy(key + key_len, p, n);
  key_len += n;
}

#define PUT(v) put(&(v), sizeof(v))

static void put_window(const tpr_tensor_ref_t* r) {
  if (!key_ok) return;
  if (num_windows + 1 > cap_windows) {
    int nc = cap_windows ? cap_windows * 2 : 16;
    const tpr_tensor_ref_t** w = tpr_realloc(windows, (size_t)nc * sizeof *w);
    if (!w) {
      key_ok = false;
      return;
    }
    windows = w;
    cap_windows = nc;
  }
  // Which earlier window shares this storage (-1: none).
  int32_t alias = -1;
  for (int i = 0; i < num_windows && alias < 0; i++)
    if (windows[i]->storage == r->storage) alias = i;
  windows[num_windows++] = r;
  const tpr_storage_t* s = r->storage;
  if (s->lost) key_ok = false;  // the full path raises the error
  // One packed record per window (a field-by-field key costs as much as
  // the graph build this replaces).
  struct {
    int32_t alias, dtype, rank, state, buf_dtype, buf_rank;
    int64_t offset, nbytes, buf_numel;
    int64_t dims[2 * TPR_MAX_RANK];
  } w;
  memset(&w, 0, sizeof w);
  w.alias = alias;
  w.dtype = (int32_t)r->dtype;
  w.rank = r->rank;
  w.offset = r->offset;
  w.nbytes = (int64_t)s->nbytes;
  w.state = s->buffer ? 1 : 0;
  if (s->buffer) {
    w.buf_dtype = (int32_t)tpr_buffer_dtype(s->buffer);
    w.buf_rank = (int32_t)tpr_buffer_rank(s->buffer);
    w.buf_numel = 1;
    for (int i = 0; i < w.buf_rank; i++) w.buf_numel *= tpr_buffer_dims(s->buffer)[i];
  }
  int rank = r->rank < TPR_MAX_RANK ? r->rank : TPR_MAX_RANK;
  memcpy(w.dims, r->sizes, sizeof(int64_t) * (size_t)rank);
  memcpy(w.dims + rank, r->strides, sizeof(int64_t) * (size_t)rank);
  put(&w, offsetof(__typeof__(w), dims) + sizeof(int64_t) * 2 * (size_t)rank);
  if (s->buffer && w.buf_rank > 1)  // (storages usually hold flat buffers)
    put(tpr_buffer_dims(s->buffer), sizeof(int64_t) * (size_t)w.buf_rank);
}

static void put_buffer_type(tpr_buffer_t* b) {
  tpr_dtype_t d = tpr_buffer_dtype(b);
  int32_t r = (int32_t)tpr_buffer_rank(b);
  PUT(d);
  PUT(r);
  put(tpr_buffer_dims(b), sizeof(int64_t) * (size_t)r);
}

static void put_arg(const tpr_eager_arg_t* ea) {
  const tpr_arg_t* a = &ea->arg;
  uint8_t kind = (uint8_t)a->kind;
  PUT(kind);
  switch (a->kind) {
    case TPR_ARG_NONE:
      break;
    case TPR_ARG_TENSOR:
      PUT(a->is_scalar);
      if (a->is_scalar) {
        PUT(ea->scalar_dtype);
      } else if (ea->buffer) {
        put_buffer_type(ea->buffer);
      } else {
        put_window(ea->tensor);
      }
      break;
    case TPR_ARG_TENSOR_LIST:
      PUT(a->is_scalar);
      PUT(a->count);
      for (int k = 0; k < a->count; k++) {
        uint8_t present = ea->tensors[k] != NULL;
        PUT(present);
        if (present) put_window(ea->tensors[k]);
      }
      break;
    case TPR_ARG_INT:
      PUT(a->i);
      break;
    case TPR_ARG_DOUBLE:
      PUT(a->d);
      break;
    case TPR_ARG_BOOL:
      PUT(a->b);
      break;
    case TPR_ARG_INT_LIST:
      PUT(a->count);
      put(a->ints, sizeof(int64_t) * (size_t)a->count);
      break;
    case TPR_ARG_DOUBLE_LIST:
      PUT(a->count);
      put(a->doubles, sizeof(double) * (size_t)a->count);
      break;
    case TPR_ARG_BOOL_LIST:
      PUT(a->count);
      put(a->bools, sizeof(bool) * (size_t)a->count);
      break;
    case TPR_ARG_DTYPE:
      PUT(a->dtype);
      break;
    case TPR_ARG_STRING:
      put(a->s, a->s ? strlen(a->s) + 1 : 0);
      break;
    default:  // generators (fresh state each call), unknown kinds
      key_ok = false;
      break;
  }
}

// Eight bytes at a time (the key is a few hundred bytes).
static uint64_t hash_key(void) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key_len;
  size_t i = 0;
  for (; i + 8 <= key_len; i += 8) {
    uint64_t w;
    memcpy(&w, key + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  memcpy(&tail, key + i, key_len - i);
  h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

bool tpr_replay_signature(const tpr_eager_call_t* call, uint64_t* hash) {
  key_len = 0;
  num_windows = 0;
  key_ok = call->lower == NULL;
  put(call->op_name, strlen(call->op_name) + 1);
  PUT(call->device);
  PUT(call->num_args);
  for (int i = 0; i < call->num_args && key_ok; i++) put_arg(&call->args[i]);
  PUT(call->num_outs);
  for (int i = 0; i < call->num_outs && key_ok; i++) {
    const tpr_type_t* t = &call->out_types[i];
    int32_t head[3] = {(int32_t)t->dtype, t->rank, call->out_targets[i] != NULL};
    PUT(head);
    put(t->dims, sizeof(int64_t) * (size_t)t->rank);
    if (head[2]) put_window(call->out_targets[i]);
  }
  if (!key_ok) return false;
  *hash = hash_key();
  return true;
}

static plan_t* find_plan(uint64_t hash) {
  plan_t* p = &plans[hash % NUM_PLANS];
  if (p->key && p->hash == hash && p->key_len == key_len &&
      memcmp(p->key, key, key_len) == 0)
    return p;
  return NULL;
}

static void free_plan(plan_t* p) {
  tpr_free(p->key);
  tpr_free(p->params);
  tpr_free(p->results);
  tpr_free(p->result_params);
  tpr_executable_release(p->exe);
  memset(p, 0, sizeof *p);
}

void tpr_replay_record(const tpr_eager_call_t* call, uint64_t hash,
                       tpr_executable_t* exe, tpr_buffer_t* const* params,
                       int num_params, tpr_storage_t* const* result_storages,
                       const int32_t* result_params, int num_results) {
  param_src_t* srcs = tpr_malloc(sizeof *srcs * (size_t)(num_params ? num_params : 1));
  int32_t* res = tpr_malloc(sizeof *res * (size_t)(num_results ? num_results : 1));
  int32_t* inplace = tpr_malloc(sizeof *inplace * (size_t)(num_results ? num_results : 1));
  uint8_t* k = tpr_malloc(key_len);
  if (!srcs || !res || !inplace || !k) goto fail;
  memcpy(inplace, result_params, sizeof *inplace * (size_t)num_results);
  // Where each parameter came from. A buffer that could have come from two
  // places (the same buffer in two roles) is not recorded: a later call
  // may separate them.
  // Scalar arguments of equal value share one cached buffer (addmm's beta
  // and alpha): the graph took one parameter per Scalar argument, in
  // argument order, so each goes to the next Scalar argument not yet used.
  int next_scalar = 0;
  for (int i = 0; i < num_params; i++) {
    int found = 0;
    for (int w = 0; w < num_windows; w++) {
      if (windows[w]->storage->buffer != params[i]) continue;
      if (found && srcs[i].kind == SRC_STORAGE &&
          windows[srcs[i].index]->storage == windows[w]->storage)
        continue;  // another window of the same storage
      srcs[i] = (param_src_t){SRC_STORAGE, w};
      found++;
    }
    bool scalar_found = false;
    for (int a = 0; a < call->num_args; a++) {
      const tpr_eager_arg_t* ea = &call->args[a];
      if (ea->arg.kind != TPR_ARG_TENSOR) continue;
      tpr_buffer_t* b = NULL;
      if (ea->arg.is_scalar) {
        if (a < next_scalar || scalar_found) continue;
        b = tpr_scalar_buffer_peek(call->device, ea->scalar_dtype, &ea->scalar);
      } else if (ea->buffer) {
        b = ea->buffer;
      }
      if (!b || b != params[i]) continue;
      srcs[i] = (param_src_t){ea->arg.is_scalar ? SRC_SCALAR : SRC_BUFFER, a};
      if (ea->arg.is_scalar) {
        scalar_found = true;
        next_scalar = a + 1;
      }
      found++;
    }
    if (found != 1) goto fail;
  }
  for (int r = 0; r < num_results; r++) {
    res[r] = -1;
    for (int w = 0; w < num_windows && res[r] < 0; w++)
      if (windows[w]->storage == result_storages[r]) res[r] = w;
    if (res[r] < 0) goto fail;
  }
  memcpy(k, key, key_len);
  plan_t* p = &plans[hash % NUM_PLANS];
  free_plan(p);
  *p = (plan_t){k, key_len, hash, tpr_executable_retain(exe), num_params,
                num_results, srcs, res, inplace};
  return;
fail:
  tpr_free(srcs);
  tpr_free(res);
  tpr_free(inplace);
  tpr_free(k);
}

tpr_status_t tpr_replay_run(const tpr_eager_call_t* call, uint64_t hash,
                            bool* ran) {
  *ran = false;
  plan_t* p = find_plan(hash);
  if (!p) return tpr_ok_status();
  enum { kLocal = 64 };  // (foreach ops over a few parameters)
  tpr_buffer_t* local_params[kLocal];
  tpr_buffer_t* local_results[kLocal];
  bool donate[kLocal];
  if (p->num_params > kLocal || p->num_results > kLocal) return tpr_ok_status();
  // Scalar buffers are held for the call: fetching the next scalar may
  // evict an earlier one from the scalar cache, which releases it.
  tpr_buffer_t* held[kLocal];
  int num_held = 0;
  tpr_status_t st = tpr_ok_status();
  bool complete = true;
  for (int i = 0; i < p->num_params && complete && tpr_status_is_ok(st); i++) {
    const param_src_t* s = &p->params[i];
    const tpr_eager_arg_t* ea = &call->args[s->index];
    tpr_buffer_t* b = NULL;
    switch (s->kind) {
      case SRC_STORAGE:
        b = windows[s->index]->storage->buffer;
        break;
      case SRC_SCALAR:
        st = tpr_scalar_buffer(call->device, ea->scalar_dtype, &ea->scalar, &b);
        if (b) held[num_held++] = tpr_buffer_retain(b);
        break;
      default:
        b = ea->buffer;
        break;
    }
    complete = b != NULL;  // (the signature says it has one)
    local_params[i] = b;
  }
  if (complete && tpr_status_is_ok(st)) {
    // (The storages hold their buffers; this call takes no reference.)
    tpr_eager_choose_donations(local_params, p->num_params, p->result_params,
                               p->num_results, 1, donate);
    st = tpr_executable_execute(p->exe, call->device, local_params,
                                (size_t)p->num_params, donate, local_results,
                                tpr_eager_launch_blocking());
  }
  for (int i = 0; i < num_held; i++) tpr_buffer_release(held[i]);
  if (!complete || !tpr_status_is_ok(st)) return st;
  if (p->num_results > 0)
    tpr_pending_push(local_results[0], tpr_eager_fresh_bytes(local_results, p->result_params,
                                                             p->num_results, donate));
  for (int r = 0; r < p->num_results; r++)
    tpr_storage_swap_buffer(windows[p->results[r]]->storage, local_results[r]);
  *ran = true;
  return tpr_ok_status();
}

void tpr_replay_clear(void) {
  for (int i = 0; i < NUM_PLANS; i++) free_plan(&plans[i]);
  tpr_free(key);
  tpr_free(windows);
  key = NULL;
  windows = NULL;
  key_len = key_cap = 0;
  num_windows = cap_windows = 0;
}
