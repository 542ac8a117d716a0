// The core's single allocation policy; counts live blocks for leak tests.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tpr/base.h"

static atomic_llong live_blocks;

void* tpr_malloc(size_t size) {
  void* p = malloc(size ? size : 1);
  if (p) atomic_fetch_add(&live_blocks, 1);
  return p;
}

void* tpr_calloc(size_t count, size_t size) {
  void* p = calloc(count ? count : 1, size ? size : 1);
  if (p) atomic_fetch_add(&live_blocks, 1);
  return p;
}

void* tpr_realloc(void* ptr, size_t size) {
  if (!ptr) return tpr_malloc(size);
  return realloc(ptr, size ? size : 1);
}

void tpr_free(void* ptr) {
  if (!ptr) return;
  atomic_fetch_sub(&live_blocks, 1);
  free(ptr);
}

char* tpr_strdup(const char* s) {
  size_t n = strlen(s) + 1;
  char* p = (char*)tpr_malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

int64_t tpr_live_allocations(void) { return atomic_load(&live_blocks); }
