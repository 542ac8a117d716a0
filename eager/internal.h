// Private state shared by the eager executor's files.
#ifndef TPR_EAGER_INTERNAL_H_
#define TPR_EAGER_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "tpr/eager.h"

struct tpr_storage {
  atomic_int ref;
  int device;
  size_t nbytes;
  // Guarded by the executor lock: swapped by writes, read by every op.
  tpr_buffer_t* buffer;
  int32_t slot;  // index in the pending graph's slots (validated there)
  bool lost;     // a fused graph that wrote it failed
};

// The executor lock: guards storage buffers, the graph, the cache, stats.
void tpr_eager_lock(void);
void tpr_eager_unlock(void);

// Replaces the storage's buffer (takes ownership of |buffer|); lock held.
void tpr_storage_swap_buffer(tpr_storage_t* storage, tpr_buffer_t* buffer);

// In-memory executable cache keyed by a 128-bit graph hash; lock held.
tpr_executable_t* tpr_exec_cache_find(const uint64_t key[2]);
// Takes a reference to |exe|. |weight| (the graph's node count) counts
// against the cache's bound; least recently used entries are evicted.
tpr_status_t tpr_exec_cache_insert(const uint64_t key[2],
                                   tpr_executable_t* exe, int64_t weight);
int64_t tpr_exec_cache_evictions(void);
void tpr_exec_cache_set_max_weight(int64_t weight);  // <= 0: default
size_t tpr_exec_cache_size(void);
void tpr_exec_cache_clear(void);

// The cached executable for |graph| (hashed to |key|): from the in-memory
// cache, else the disk cache (then kept in memory too); *out NULL when
// neither holds it. Borrowed from the cache; lock held.
tpr_status_t tpr_eager_find_executable_locked(const tpr_graph_t* graph,
                                              const uint64_t key[2],
                                              tpr_executable_t** out);
// Keeps |exe|, compiled from |graph|, in both caches; lock held.
tpr_status_t tpr_eager_keep_executable_locked(const tpr_graph_t* graph,
                                              const uint64_t key[2],
                                              tpr_executable_t* exe);
// Seconds on a monotonic clock.
double tpr_now_seconds(void);

// The executable for |graph| (hashed): from the in-memory cache, else the
// disk cache, else compiled and stored in both. |what| names it in compile
// logs. The returned executable is borrowed from the cache; lock held.
tpr_status_t tpr_eager_get_executable_locked(tpr_graph_t* graph,
                                             const char* what,
                                             tpr_executable_t** out);

// Tiered compilation (tierup.c). tpr_tierup_enqueue takes |text| (the
// program |exe| was compiled from at the first tier) and upgrades |exe| in
// the background, then stores it on disk under |key|; lock held.
bool tpr_tierup_enabled(void);
// Waits until *|count| (guarded by |mu|, |changed| signalled as it falls) is
// 0; |timeout_seconds| <= 0: however long it takes. False if the time passed.
bool tpr_wait_for_zero(pthread_mutex_t* mu, pthread_cond_t* changed, const int* count,
                       double timeout_seconds);
tpr_status_t tpr_tierup_enqueue(const uint64_t key[2], tpr_executable_t* exe, char* text,
                                size_t len);

// Persistent cache entries (disk_cache.c); lock held.
tpr_status_t tpr_disk_cache_load(const uint64_t key[2], tpr_executable_t** out);
void tpr_disk_cache_store(const uint64_t key[2], tpr_executable_t* exe);
// A load in two halves, for a thread of its own: tpr_disk_cache_entry (lock
// held) says whether |key| has an entry and where (|path|, at least 4200
// bytes); tpr_disk_cache_read (any thread, no lock) loads it; then
// tpr_disk_cache_count_read (lock held) counts the outcome, deletes an entry
// that failed a check and marks a loaded one recently used.
bool tpr_disk_cache_entry(const uint64_t key[2], char* path, size_t cap);
tpr_status_t tpr_disk_cache_read(const char* path, const uint64_t key[2],
                                 tpr_executable_t** out, bool* corrupt);
void tpr_disk_cache_count_read(const char* path, bool loaded, bool corrupt);

// tpr_eager_flush with the executor lock held. Anything that reads or
// replaces storage->buffer outside tpr_eager_run must call it first.
tpr_status_t tpr_fused_flush_locked(tpr_cut_cause_t cause);

// tpr_fused_flush_locked, but only when the pending graph reads or writes
// |storage| (its buffer is then current); lock held.
tpr_status_t tpr_fused_settle_locked(const tpr_storage_t* storage,
                                     tpr_cut_cause_t cause);

// Drops a dying storage from the pending graph; lock held.
void tpr_fused_forget_storage(tpr_storage_t* storage);

// Uploaded Scalar arguments, cached by value (exec.c); borrowed; lock held.
tpr_status_t tpr_scalar_buffer(int device, tpr_dtype_t dtype, const void* value,
                               tpr_buffer_t** out);
tpr_buffer_t* tpr_scalar_buffer_peek(int device, tpr_dtype_t dtype,
                                     const void* value);  // NULL if absent
// Strict-mode replay (replay.c); lock held. tpr_replay_signature computes
// the call's signature (false: never replayed); tpr_replay_run runs a
// remembered plan (*ran false: none); tpr_replay_record remembers how the
// call's graph, about to run as |exe|, took its parameters and results.
bool tpr_replay_signature(const tpr_eager_call_t* call, uint64_t* hash);
tpr_status_t tpr_replay_run(const tpr_eager_call_t* call, uint64_t hash, bool* ran);
void tpr_replay_record(const tpr_eager_call_t* call, uint64_t hash,
                       tpr_executable_t* exe, tpr_buffer_t* const* params,
                       int num_params, tpr_storage_t* const* result_storages,
                       const int32_t* result_params, int num_results);
void tpr_replay_clear(void);
// Which parameters an execution donates (|donate|, one per parameter): each
// one a result updates in place (|result_params|: per result, its
// parameter or -1) that is passed once and held by |refs| references (the
// storage's and the caller's) besides the in-flight queue's. Executor lock
// held.
void tpr_eager_choose_donations(tpr_buffer_t* const* params, int num_params,
                                const int32_t* result_params, int num_results,
                                int refs, bool* donate);
// The bytes of the results that took new buffers (not a donated one).
size_t tpr_eager_fresh_bytes(tpr_buffer_t* const* results, const int32_t* result_params,
                             int num_results, const bool* donate);
// Bounded queue of in-flight results; synchronize drains it. The bound in
// bytes counts eager results, and the results of programs that nothing else
// holds any more.
// |bytes|: what its launch allocated (in-place results take none).
void tpr_pending_push(tpr_buffer_t* buffer, size_t bytes);  // retains
// Whether |b| may be donated to an execution that updates it in place:
// held by exactly |refs| references besides this queue's (the storage's and
// the caller's), so that nothing else can see the update.
bool tpr_pending_can_donate(const tpr_buffer_t* b, int refs);
// The same for a program's launch: |first| is awaited (retains); |fresh|,
// taken over with a reference to each, lists the results it allocated,
// |bytes| in all.
void tpr_pending_push_results(tpr_buffer_t* first, tpr_buffer_t** fresh, int num_fresh,
                              size_t bytes);
// Before a launch that allocates its results at once: awaits those in
// flight if the ones replaced since pass the run-ahead bound.
void tpr_pending_reserve(void);
// How many times the bound made the host wait for launches in flight.
int64_t tpr_pending_wait_count(void);
tpr_status_t tpr_pending_drain(void);

#endif  // TPR_EAGER_INTERNAL_H_
