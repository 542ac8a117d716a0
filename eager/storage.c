// Storages: one PyTorch storage = a byte count + one rank-1 device buffer.
#include <stdlib.h>
#include <string.h>

#include "eager/internal.h"

#define MAX_DEVICES 64
static atomic_llong bytes_in_use[MAX_DEVICES];

static void account(tpr_buffer_t* b, int sign) {
  if (!b) return;
  int d = tpr_buffer_device(b);
  if (d >= 0 && d < MAX_DEVICES)
    atomic_fetch_add(&bytes_in_use[d], sign * (long long)tpr_buffer_byte_size(b));
}

tpr_status_t tpr_storage_create(int ordinal, size_t nbytes,
                                tpr_storage_t** out_storage) {
  *out_storage = NULL;
  tpr_storage_t* s = (tpr_storage_t*)tpr_calloc(1, sizeof *s);
  if (!s) return TPR_ERR(RESOURCE_EXHAUSTED, "out of host memory for a storage");
  atomic_init(&s->ref, 1);
  s->device = ordinal;
  s->nbytes = nbytes;
  *out_storage = s;
  return tpr_ok_status();
}

tpr_storage_t* tpr_storage_retain(tpr_storage_t* s) {
  if (s) atomic_fetch_add(&s->ref, 1);
  return s;
}

void tpr_storage_release(tpr_storage_t* s) {
  if (!s || atomic_fetch_sub(&s->ref, 1) != 1) return;
  tpr_eager_lock();
  tpr_fused_forget_storage(s);
  tpr_eager_unlock();
  account(s->buffer, -1);
  tpr_buffer_release(s->buffer);
  tpr_free(s);
}

size_t tpr_storage_nbytes(const tpr_storage_t* s) { return s->nbytes; }
int tpr_storage_device(const tpr_storage_t* s) { return s->device; }
tpr_buffer_t* tpr_storage_buffer(const tpr_storage_t* s) { return s->buffer; }

int64_t tpr_storage_bytes_in_use(int ordinal) {
  if (ordinal < 0 || ordinal >= MAX_DEVICES) return 0;
  return atomic_load(&bytes_in_use[ordinal]);
}

void tpr_storage_swap_buffer(tpr_storage_t* s, tpr_buffer_t* buffer) {
  account(buffer, +1);
  account(s->buffer, -1);
  tpr_buffer_release(s->buffer);
  s->buffer = buffer;
  s->lost = false;
}

int64_t tpr_tensor_ref_numel(const tpr_tensor_ref_t* ref) {
  int64_t n = 1;
  for (int i = 0; i < ref->rank; i++) n *= ref->sizes[i];
  return n;
}
