// The graph: types, storage, sticky errors, parameters/results, hashing.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"

//===--- types -------------------------------------------------------------===//

tpr_type_t tpr_type_make(tpr_dtype_t dtype, int rank, const int64_t* dims) {
  tpr_type_t t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  // An out-of-range rank is kept (builders reject it) but never overflows.
  int n = rank < 0 ? 0 : rank > TPR_MAX_RANK ? TPR_MAX_RANK : rank;
  if (dims) memcpy(t.dims, dims, (size_t)n * sizeof(int64_t));
  return t;
}

tpr_type_t tpr_type_scalar(tpr_dtype_t dtype) {
  return tpr_type_make(dtype, 0, NULL);
}

int64_t tpr_type_numel(const tpr_type_t* t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank && i < TPR_MAX_RANK; i++) n *= t->dims[i];
  return n;
}

bool tpr_type_equal(const tpr_type_t* a, const tpr_type_t* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank && i < TPR_MAX_RANK; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

char* tpr_type_format(const tpr_type_t* t, char* buf, size_t cap) {
  if (!cap) return buf;
  size_t n = (size_t)snprintf(buf, cap, "%s[", tpr_dtype_name(t->dtype));
  int rank = t->rank < 0 ? 0 : t->rank > TPR_MAX_RANK ? TPR_MAX_RANK : t->rank;
  for (int i = 0; i < rank && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld",
                          (long long)t->dims[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

//===--- lifecycle ---------------------------------------------------------===//

tpr_status_t tpr_graph_create(tpr_graph_t** out_graph) {
  *out_graph = NULL;
  tpr_graph_t* g = (tpr_graph_t*)tpr_calloc(1, sizeof *g);
  if (!g) return TPR_ERR(RESOURCE_EXHAUSTED, "tpr_graph_create: out of memory");
  *out_graph = g;
  return tpr_ok_status();
}

static void drop_checks(tpr_graph_t* g, int32_t keep) {
  for (int32_t i = keep; i < g->num_checks; i++) tpr_free(g->check_messages[i]);
  g->num_checks = keep;
}

static void drop_kernels(tpr_graph_t* g, int32_t keep) {
  for (int32_t i = keep; i < g->num_kernels; i++) tpr_kernel_release(g->kernels[i]);
  g->num_kernels = keep;
}

void tpr_graph_free(tpr_graph_t* g) {
  if (!g) return;
  drop_checks(g, 0);
  drop_kernels(g, 0);
  tpr_free(g->kernels);
  tpr_free(g->check_values);
  tpr_free(g->check_messages);
  tpr_free(g->nodes);
  for (int i = 0; i < g->num_blocks; i++) tpr_free(g->value_blocks[i]);
  tpr_free(g->value_blocks);
  tpr_free(g->operands);
  tpr_free(g->ints);
  tpr_free(g->data);
  tpr_free(g->results);
  tpr_free(g->aliases);
  tpr_status_free(g->status);
  tpr_free(g);
}

void tpr_graph_reset(tpr_graph_t* g) {
  g->num_nodes = g->num_values = g->num_operands = g->num_ints = 0;
  g->num_results = g->num_params = 0;
  drop_checks(g, 0);
  drop_kernels(g, 0);
  g->scope = 0;
  g->data_size = 0;
  tpr_status_free(g->status);
  g->status = tpr_ok_status();
}

tpr_graph_mark_t tpr_graph_get_mark(const tpr_graph_t* g) {
  tpr_graph_mark_t m = {g->num_nodes, g->num_values, g->num_operands, g->num_ints,
                        g->num_params, g->num_checks,  g->num_kernels,
                        g->data_size};
  return m;
}

void tpr_graph_rollback(tpr_graph_t* g, const tpr_graph_mark_t* m) {
  g->num_nodes = m->nodes;
  g->num_values = m->values;
  g->num_operands = m->operands;
  g->num_ints = m->ints;
  g->num_params = m->params;
  drop_checks(g, m->checks);
  drop_kernels(g, m->kernels);
  g->data_size = m->data;
  tpr_status_free(g->status);
  g->status = tpr_ok_status();
}

int32_t tpr_graph_num_nodes(const tpr_graph_t* g) { return g->num_nodes; }

//===--- errors ------------------------------------------------------------===//

bool tpr_graph_ok(const tpr_graph_t* g) { return tpr_status_is_ok(g->status); }

tpr_status_t tpr_graph_status(const tpr_graph_t* g) {
  if (tpr_status_is_ok(g->status)) return tpr_ok_status();
  return tpr_status_make(tpr_status_code(g->status), "%s",
                         tpr_status_message(g->status));
}

tpr_value_t tpr_graph_fail(tpr_graph_t* g, tpr_status_code_t code,
                           const char* fmt, ...) {
  if (!tpr_status_is_ok(g->status) || code == TPR_OK) return TPR_VALUE_NONE;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  g->status = tpr_status_make(code, "%s", msg);
  return TPR_VALUE_NONE;
}

const tpr_type_t* tpr_value_type(const tpr_graph_t* g, tpr_value_t v) {
  static const tpr_type_t kInvalid = {TPR_DTYPE_INVALID, 0, {0}};
  if (v < 0 || v >= g->num_values) return &kInvalid;
  return &tpr_graph_value(g, v)->type;
}

const tpr_type_t* tpr_graph_operand(tpr_graph_t* g, tpr_value_t v,
                                    const char* who, int index) {
  if (v >= 0 && v < g->num_values) {
    // Regions capture nothing: a value is used only in its own scope.
    if (tpr_graph_node_of(g, v)->scope == g->scope)
      return &tpr_graph_value(g, v)->type;
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "%s: operand #%d (%d) belongs to another region", who,
                   index, (int)v);
    return NULL;
  }
  if (v == TPR_VALUE_NONE)
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: operand #%d is TPR_VALUE_NONE",
                   who, index);
  else
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "%s: operand #%d (%d) is not a value of this graph", who,
                   index, (int)v);
  return NULL;
}

//===--- storage -----------------------------------------------------------===//

// Grows *|p| (|elem|-byte items, capacity *|cap|) to hold |need| items.
static bool grow(void** p, size_t* cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  size_t bytes;
  if (!tpr_mul_size(n, elem, &bytes)) return false;
  void* q = tpr_realloc(*p, bytes);
  if (!q) return false;
  *p = q;
  *cap = n;
  return true;
}

static bool grow32(void** p, int32_t* cap, size_t need, size_t elem) {
  if (need > (size_t)INT32_MAX) return false;
  size_t c = (size_t)*cap;
  bool ok = grow(p, &c, need, elem);
  if (ok) *cap = c > (size_t)INT32_MAX ? INT32_MAX : (int32_t)c;
  return ok;
}

// Makes room for |n| more values (blocks never move once allocated).
static bool reserve_values(tpr_graph_t* g, int n) {
  int64_t need = (int64_t)g->num_values + n;
  if (need > INT32_MAX / 2) return false;
  while (need > (int64_t)g->num_blocks * TPR_VALUE_BLOCK) {
    if (!grow32((void**)&g->value_blocks, &g->cap_blocks,
                (size_t)g->num_blocks + 1, sizeof(tpr_value_info_t*)))
      return false;
    tpr_value_info_t* b = (tpr_value_info_t*)tpr_malloc(
        TPR_VALUE_BLOCK * sizeof(tpr_value_info_t));
    if (!b) return false;
    g->value_blocks[g->num_blocks++] = b;
  }
  return true;
}

tpr_value_t tpr_graph_add_node(tpr_graph_t* g, tpr_op_t op, int32_t sub,
                               const tpr_value_t* operands, int num_operands,
                               const int64_t* ints, int num_ints,
                               const void* data, size_t data_size,
                               const tpr_type_t* result_types,
                               int num_results) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  if (!grow32((void**)&g->nodes, &g->cap_nodes, (size_t)g->num_nodes + 1,
              sizeof(tpr_node_t)) ||
      !reserve_values(g, num_results) ||
      !grow32((void**)&g->operands, &g->cap_operands,
              (size_t)g->num_operands + (size_t)num_operands,
              sizeof(tpr_value_t)) ||
      !grow32((void**)&g->ints, &g->cap_ints,
              (size_t)g->num_ints + (size_t)num_ints, sizeof(int64_t)) ||
      (data_size && !grow((void**)&g->data, &g->data_cap,
                          g->data_size + data_size, 1)))
    return tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED,
                          "graph: out of memory adding a node");
  tpr_node_t* n = &g->nodes[g->num_nodes];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->sub = sub;
  n->num_operands = num_operands;
  n->num_ints = num_ints;
  n->num_results = num_results;
  n->first_value = g->num_values;
  n->scope = g->scope;
  n->operands = (uint32_t)g->num_operands;
  n->ints = (uint32_t)g->num_ints;
  n->data = g->data_size;
  n->data_size = data_size;
  if (num_operands)
    memcpy(g->operands + g->num_operands, operands,
           (size_t)num_operands * sizeof(tpr_value_t));
  if (num_ints)
    memcpy(g->ints + g->num_ints, ints, (size_t)num_ints * sizeof(int64_t));
  if (data_size) memcpy(g->data + g->data_size, data, data_size);
  for (int i = 0; i < num_results; i++) {
    tpr_value_info_t* v = tpr_graph_value(g, g->num_values + i);
    v->node = g->num_nodes;
    v->index = i;
    // Re-make the type so that dims past rank are zero (hashed as bytes).
    v->type = tpr_type_make(result_types[i].dtype, result_types[i].rank,
                            result_types[i].dims);
  }
  g->num_operands += num_operands;
  g->num_ints += num_ints;
  g->data_size += data_size;
  g->num_values += num_results;
  g->num_nodes++;
  return n->first_value;
}

void tpr_dimnums_decode(const int64_t* ints, tpr_dimnums_t* out) {
  out->n[0] = (int32_t)ints[0];
  out->n[1] = (int32_t)ints[1];
  out->n[2] = (int32_t)ints[2];
  out->index_vector_dim = ints[3];
  out->n[3] = (int32_t)ints[4];
  const int64_t* p = ints + 5;
  for (int i = 0; i < 4; i++) {
    out->list[i] = p;
    p += out->n[i];
  }
}

//===--- parameters and results -------------------------------------------===//

tpr_value_t tpr_parameter(tpr_graph_t* g, tpr_type_t type) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  char buf[128];
  if (g->scope)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_parameter: not allowed inside a region");
  if (!tpr_dtype_is_valid(type.dtype) || type.rank < 0 ||
      type.rank > TPR_MAX_RANK)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_parameter: invalid type %s (rank %d)",
                          tpr_type_format(&type, buf, sizeof buf), type.rank);
  for (int i = 0; i < type.rank; i++)
    if (type.dims[i] < 0)
      return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                            "tpr_parameter: negative dimension in %s",
                            tpr_type_format(&type, buf, sizeof buf));
  return tpr_graph_add_node(g, TPR_OP_PARAMETER, g->num_params++, NULL, 0,
                            NULL, 0, NULL, 0, &type, 1);
}

int tpr_graph_num_parameters(const tpr_graph_t* g) { return g->num_params; }

int tpr_graph_add_result(tpr_graph_t* g, tpr_value_t v) {
  if (!tpr_graph_ok(g)) return -1;
  if (!tpr_graph_operand(g, v, "tpr_graph_add_result", 0)) return -1;
  size_t cap = (size_t)g->cap_results;
  void* r = g->results;
  if (!grow(&r, &cap, (size_t)g->num_results + 1, sizeof(tpr_value_t))) {
    tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "graph: out of memory");
    return -1;
  }
  g->results = (tpr_value_t*)r;
  size_t cap2 = (size_t)g->cap_results;
  void* a = g->aliases;
  if (!grow(&a, &cap2, (size_t)g->num_results + 1, sizeof(int32_t))) {
    tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "graph: out of memory");
    return -1;
  }
  g->aliases = (int32_t*)a;
  g->cap_results = (int32_t)(cap < cap2 ? cap : cap2);
  g->results[g->num_results] = v;
  g->aliases[g->num_results] = -1;
  return g->num_results++;
}

int tpr_graph_num_results(const tpr_graph_t* g) { return g->num_results; }

void tpr_graph_add_check(tpr_graph_t* g, tpr_value_t ok, const char* fmt, ...) {
  if (!tpr_graph_ok(g)) return;
  const tpr_type_t* t = tpr_graph_operand(g, ok, "tpr_graph_add_check", 0);
  if (!t) return;
  if (t->dtype != TPR_DTYPE_BOOL || t->rank != 0) {
    char b[96];
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "tpr_graph_add_check: %s is not a bool scalar",
                   tpr_type_format(t, b, sizeof b));
    return;
  }
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  // Both arrays grow from the same capacity; the smaller new one is kept.
  size_t cap = (size_t)g->cap_checks, cap2 = cap, need = (size_t)g->num_checks + 1;
  void* v = g->check_values;
  bool grown = grow(&v, &cap, need, sizeof(tpr_value_t));
  g->check_values = v;
  void* m = g->check_messages;
  grown = grown && grow(&m, &cap2, need, sizeof(char*));
  g->check_messages = m;
  char* copy = grown ? tpr_malloc(strlen(msg) + 1) : NULL;
  if (!copy) {
    tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "graph: out of memory");
    return;
  }
  g->cap_checks = (int32_t)(cap < cap2 ? cap : cap2);
  strcpy(copy, msg);
  g->check_values[g->num_checks] = ok;
  g->check_messages[g->num_checks++] = copy;
}

int tpr_graph_num_checks(const tpr_graph_t* g) { return g->num_checks; }

tpr_value_t tpr_graph_check_value(const tpr_graph_t* g, int index) {
  return index >= 0 && index < g->num_checks ? g->check_values[index] : TPR_VALUE_NONE;
}

const char* tpr_graph_check_message(const tpr_graph_t* g, int index) {
  return index >= 0 && index < g->num_checks ? g->check_messages[index] : "";
}

tpr_value_t tpr_graph_result(const tpr_graph_t* g, int index) {
  if (index < 0 || index >= g->num_results) return TPR_VALUE_NONE;
  return g->results[index];
}

void tpr_graph_alias(tpr_graph_t* g, int param_index, int result_index) {
  if (!tpr_graph_ok(g)) return;
  if (param_index < 0 || param_index >= g->num_params || result_index < 0 ||
      result_index >= g->num_results) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "tpr_graph_alias: parameter %d / result %d out of range "
                   "(%d parameters, %d results)",
                   param_index, result_index, g->num_params, g->num_results);
    return;
  }
  // Parameters are the first nodes whose sub is their index; find the value.
  const tpr_type_t* pt = NULL;
  for (int i = 0; i < g->num_nodes; i++)
    if (g->nodes[i].op == TPR_OP_PARAMETER && g->nodes[i].sub == param_index) {
      pt = &tpr_graph_value(g, g->nodes[i].first_value)->type;
      break;
    }
  const tpr_type_t* rt = &tpr_graph_value(g, g->results[result_index])->type;
  char b1[128], b2[128];
  if (!pt || !tpr_type_equal(pt, rt)) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "tpr_graph_alias: parameter %d (%s) and result %d (%s) "
                   "differ in type",
                   param_index, pt ? tpr_type_format(pt, b1, sizeof b1) : "?",
                   result_index, tpr_type_format(rt, b2, sizeof b2));
    return;
  }
  for (int i = 0; i < g->num_results; i++)
    if (i != result_index && g->aliases[i] == param_index) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                     "tpr_graph_alias: parameter %d is already aliased to "
                     "result %d",
                     param_index, i);
      return;
    }
  g->aliases[result_index] = param_index;
}

int tpr_graph_result_alias(const tpr_graph_t* g, int result_index) {
  if (result_index < 0 || result_index >= g->num_results) return -1;
  return g->aliases[result_index];
}

//===--- hashing -----------------------------------------------------------===//
//
// Two independent 64-bit lanes over the raw bytes of every array (all
// structs are zero-initialised, so padding and unused dims are zero). Lane 1
// is a multiply-xorshift over 8-byte words, lane 2 a rotate-multiply with
// other constants and seed; both end in a murmur3 finaliser. Array lengths
// are mixed in, so the concatenation is unambiguous.

typedef tpr_hash128_t hash_state_t;

static inline uint64_t rotl64(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

static inline void hash_word(hash_state_t* h, uint64_t w) {
  h->a = (h->a ^ w) * 0x9E3779B97F4A7C15ull;
  h->a ^= h->a >> 32;
  h->b = rotl64(h->b + w * 0xC2B2AE3D27D4EB4Full, 31) * 0x87C37B91114253D5ull;
}

static void hash_bytes(hash_state_t* h, const void* p, size_t n) {
  const uint8_t* s = (const uint8_t*)p;
  hash_word(h, (uint64_t)n);
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    hash_word(h, w);
    s += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    memcpy(&w, s, n);
    hash_word(h, w ^ ((uint64_t)n << 56));
  }
}

static uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  k *= 0xC4CEB9FE1A85EC53ull;
  k ^= k >> 33;
  return k;
}

void tpr_hash128_init(tpr_hash128_t* h) {
  h->a = 0x243F6A8885A308D3ull;
  h->b = 0x13198A2E03707344ull;
}

void tpr_hash128_bytes(tpr_hash128_t* h, const void* data, size_t n) {
  hash_bytes(h, data, n);
}

void tpr_hash128_final(const tpr_hash128_t* h, uint64_t out[2]) {
  out[0] = fmix64(h->a ^ rotl64(h->b, 17));
  out[1] = fmix64(h->b + 0x5851F42D4C957F2Dull * h->a);
}

void tpr_graph_hash(const tpr_graph_t* g, uint64_t out[2]) {
  hash_state_t h;
  tpr_hash128_init(&h);
  hash_word(&h, (uint64_t)g->num_params);
  hash_bytes(&h, g->nodes, (size_t)g->num_nodes * sizeof(tpr_node_t));
  hash_bytes(&h, g->operands, (size_t)g->num_operands * sizeof(tpr_value_t));
  hash_bytes(&h, g->ints, (size_t)g->num_ints * sizeof(int64_t));
  hash_bytes(&h, g->data, g->data_size);
  hash_word(&h, (uint64_t)g->num_values);
  for (int32_t v = 0; v < g->num_values; v += TPR_VALUE_BLOCK) {
    int32_t n = g->num_values - v;
    if (n > TPR_VALUE_BLOCK) n = TPR_VALUE_BLOCK;
    hash_bytes(&h, tpr_graph_value(g, v), (size_t)n * sizeof(tpr_value_info_t));
  }
  hash_bytes(&h, g->results, (size_t)g->num_results * sizeof(tpr_value_t));
  hash_bytes(&h, g->aliases, (size_t)g->num_results * sizeof(int32_t));
  // An errored graph never equals a good one.
  hash_word(&h, tpr_graph_ok(g) ? 0 : 0xE7707ull);
  tpr_hash128_final(&h, out);
}
