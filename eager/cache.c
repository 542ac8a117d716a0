// In-memory executable cache: open addressing on a 128-bit graph hash,
// bounded by total weight (graph nodes) and by entry count, with
// least-recently-used eviction: fused eager can produce many large graphs,
// and each executable holds compiled code in its own memory mappings (a
// process has a limited number of those).
#include <stdlib.h>
#include <string.h>

#include "eager/internal.h"

typedef struct entry {
  uint64_t key[2];
  tpr_executable_t* exe;  // NULL = empty slot
  uint64_t last_used;
  int64_t weight;
} entry_t;

static entry_t* table;
static size_t capacity;  // power of two
static size_t count;
static uint64_t tick;
static int64_t total_weight;
static int64_t max_weight = 4 << 20;
static int64_t evictions;
static const size_t kMaxEntries = 4096;

static size_t slot_of(const uint64_t key[2], size_t cap) {
  return (size_t)(key[0] ^ (key[1] * 0x9E3779B97F4A7C15ull)) & (cap - 1);
}

tpr_executable_t* tpr_exec_cache_find(const uint64_t key[2]) {
  if (!capacity) return NULL;
  for (size_t i = slot_of(key, capacity);; i = (i + 1) & (capacity - 1)) {
    entry_t* e = &table[i];
    if (!e->exe) return NULL;
    if (e->key[0] == key[0] && e->key[1] == key[1]) {
      e->last_used = ++tick;
      return e->exe;
    }
  }
}

// Moves the live entries of the table into a fresh one of |new_cap|.
static tpr_status_t rehash(size_t new_cap) {
  entry_t* t = (entry_t*)tpr_calloc(new_cap, sizeof(entry_t));
  if (!t) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory for the executable cache");
  for (size_t i = 0; i < capacity; i++) {
    if (!table[i].exe) continue;
    size_t j = slot_of(table[i].key, new_cap);
    while (t[j].exe) j = (j + 1) & (new_cap - 1);
    t[j] = table[i];
  }
  tpr_free(table);
  table = t;
  capacity = new_cap;
  return tpr_ok_status();
}

static int by_last_used(const void* a, const void* b) {
  uint64_t x = **(const uint64_t* const*)a, y = **(const uint64_t* const*)b;
  return x < y ? -1 : x > y;
}

// Evicts least recently used entries until the weight and the count are at
// 3/4 of their bounds, never the newest one (its caller is about to run it).
static tpr_status_t evict(void) {
  uint64_t** order = (uint64_t**)tpr_malloc(count * sizeof *order);
  if (!order) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory for the executable cache");
  size_t n = 0;
  for (size_t i = 0; i < capacity; i++)
    if (table[i].exe) order[n++] = &table[i].last_used;
  qsort(order, n, sizeof *order, by_last_used);
  for (size_t k = 0; k + 1 < n && (total_weight > max_weight / 4 * 3 ||
                                    count > kMaxEntries / 4 * 3);
       k++) {
    entry_t* e = (entry_t*)((char*)order[k] - offsetof(entry_t, last_used));
    total_weight -= e->weight;
    tpr_executable_release(e->exe);
    e->exe = NULL;
    count--;
    evictions++;
  }
  tpr_free(order);
  return rehash(capacity);  // removal breaks probe chains: rebuild them
}

tpr_status_t tpr_exec_cache_insert(const uint64_t key[2], tpr_executable_t* exe,
                                   int64_t weight) {
  if ((count + 1) * 2 > capacity)
    TPR_RETURN_IF_ERROR(rehash(capacity ? capacity * 2 : 256));
  size_t i = slot_of(key, capacity);
  while (table[i].exe) i = (i + 1) & (capacity - 1);
  table[i] = (entry_t){{key[0], key[1]}, tpr_executable_retain(exe), ++tick, weight};
  count++;
  total_weight += weight;
  if ((total_weight > max_weight || count > kMaxEntries) && count > 1) return evict();
  return tpr_ok_status();
}

size_t tpr_exec_cache_size(void) { return count; }
int64_t tpr_exec_cache_evictions(void) { return evictions; }

void tpr_exec_cache_set_max_weight(int64_t weight) {
  max_weight = weight > 0 ? weight : 4 << 20;
}

void tpr_exec_cache_clear(void) {
  for (size_t i = 0; i < capacity; i++) tpr_executable_release(table[i].exe);
  tpr_free(table);
  table = NULL;
  capacity = count = 0;
  total_weight = 0;
}
