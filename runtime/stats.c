// Process-wide runtime counters (tpr_runtime_get_stats). Lock-free atomics:
// execute and transfer paths bump them from any thread.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <stdatomic.h>
#include <time.h>

#include "runtime/internal.h"

static atomic_llong compiles, compile_ns, executions;
static atomic_llong background_compiles, background_ns;
static _Thread_local bool background_thread;
static atomic_llong first_tier_compiles, upgrades, upgrade_ns;
static atomic_llong h2d_transfers, h2d_bytes, d2h_transfers, d2h_bytes;

int64_t tpr_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void tpr_stats_note_compile(int64_t ns) {
  atomic_fetch_add_explicit(&compiles, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&compile_ns, ns, memory_order_relaxed);
  if (background_thread) {
    atomic_fetch_add_explicit(&background_compiles, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&background_ns, ns, memory_order_relaxed);
  }
}
void tpr_runtime_mark_background_thread(void) { background_thread = true; }
void tpr_stats_note_first_tier(void) {
  atomic_fetch_add_explicit(&first_tier_compiles, 1, memory_order_relaxed);
}
void tpr_stats_note_upgrade(int64_t ns) {
  atomic_fetch_add_explicit(&upgrades, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&upgrade_ns, ns, memory_order_relaxed);
}
void tpr_stats_note_execution(void) {
  atomic_fetch_add_explicit(&executions, 1, memory_order_relaxed);
}
void tpr_stats_note_h2d(int64_t bytes) {
  atomic_fetch_add_explicit(&h2d_transfers, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h2d_bytes, bytes, memory_order_relaxed);
}
void tpr_stats_note_d2h(int64_t bytes) {
  atomic_fetch_add_explicit(&d2h_transfers, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&d2h_bytes, bytes, memory_order_relaxed);
}

void tpr_runtime_get_stats(tpr_runtime_stats_t* out) {
  out->compiles = atomic_load(&compiles);
  out->compile_seconds = (double)atomic_load(&compile_ns) * 1e-9;
  out->background_compiles = atomic_load(&background_compiles);
  out->background_compile_seconds = (double)atomic_load(&background_ns) * 1e-9;
  out->first_tier_compiles = atomic_load(&first_tier_compiles);
  out->upgrades = atomic_load(&upgrades);
  out->upgrade_seconds = (double)atomic_load(&upgrade_ns) * 1e-9;
  out->executions = atomic_load(&executions);
  out->h2d_transfers = atomic_load(&h2d_transfers);
  out->h2d_bytes = atomic_load(&h2d_bytes);
  out->d2h_transfers = atomic_load(&d2h_transfers);
  out->d2h_bytes = atomic_load(&d2h_bytes);
}

void tpr_runtime_reset_stats(void) {
  atomic_store(&compiles, 0);
  atomic_store(&compile_ns, 0);
  atomic_store(&background_compiles, 0);
  atomic_store(&background_ns, 0);
  atomic_store(&first_tier_compiles, 0);
  atomic_store(&upgrades, 0);
  atomic_store(&upgrade_ns, 0);
  atomic_store(&executions, 0);
  atomic_store(&h2d_transfers, 0);
  atomic_store(&h2d_bytes, 0);
  atomic_store(&d2h_transfers, 0);
  atomic_store(&d2h_bytes, 0);
}
