// In-memory executable cache: open addressing on a 128-bit graph hash.
#include <string.h>

#include "eager/internal.h"

typedef struct entry {
  uint64_t key[2];
  tpr_executable_t* exe;  // NULL = empty slot
} entry_t;

static entry_t* table;
static size_t capacity;  // power of two
static size_t count;

static size_t slot_of(const uint64_t key[2], size_t cap) {
  return (size_t)(key[0] ^ (key[1] * 0x9E3779B97F4A7C15ull)) & (cap - 1);
}

tpr_executable_t* tpr_exec_cache_find(const uint64_t key[2]) {
  if (!capacity) return NULL;
  for (size_t i = slot_of(key, capacity);; i = (i + 1) & (capacity - 1)) {
    entry_t* e = &table[i];
    if (!e->exe) return NULL;
    if (e->key[0] == key[0] && e->key[1] == key[1]) return e->exe;
  }
}

static tpr_status_t grow(void) {
  size_t new_cap = capacity ? capacity * 2 : 256;
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

tpr_status_t tpr_exec_cache_insert(const uint64_t key[2], tpr_executable_t* exe) {
  if ((count + 1) * 2 > capacity) TPR_RETURN_IF_ERROR(grow());
  size_t i = slot_of(key, capacity);
  while (table[i].exe) i = (i + 1) & (capacity - 1);
  table[i].key[0] = key[0];
  table[i].key[1] = key[1];
  table[i].exe = tpr_executable_retain(exe);
  count++;
  return tpr_ok_status();
}

size_t tpr_exec_cache_size(void) { return count; }
