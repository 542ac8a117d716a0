//===--- runtime/internal.h - shared by the runtime's own files -----------===//
//
// Not a public header: counters and the @main signature reader, used by
// runtime/pjrt/*.c. Nothing PJRT appears here.
//
//===----------------------------------------------------------------------===//
#ifndef TPR_RUNTIME_INTERNAL_H_
#define TPR_RUNTIME_INTERNAL_H_

#include "tpr/runtime.h"

// Process-wide counters behind tpr_runtime_get_stats (stats.c).
void tpr_stats_note_compile(int64_t nanoseconds);
void tpr_stats_note_first_tier(void);  // one of the compiles noted was a first tier
void tpr_stats_note_upgrade(int64_t nanoseconds);
void tpr_stats_note_execution(void);
void tpr_stats_note_h2d(int64_t bytes);
void tpr_stats_note_d2h(int64_t bytes);
int64_t tpr_now_ns(void);  // CLOCK_MONOTONIC

// Tests: turns the CPU fast path of tpr_buffer_to_host (a copy from the
// buffer's host address) on or off, so the general PJRT_Buffer_ToHostBuffer
// path is tested on CPU too. Returns whether the path was on.
bool tpr_client_debug_set_host_pointer_reads(tpr_client_t* client, bool on);

// The type of one array: dtype (tpr_dtype_t value) and dims.
typedef struct tpr_tensor_sig {
  int32_t dtype;
  int32_t rank;
  int64_t dims[TPR_MAX_RANK];
} tpr_tensor_sig_t;

// Reads the parameter types of `func.func ... @main(...)` from StableHLO
// text in the pretty function syntax (mlir_signature.c). Writes up to
// |max_sigs| entries to |sigs| (may be NULL) and returns the number of
// parameters, or -1 when the text is in another form (generic op syntax,
// bytecode, dynamic dims, unknown element types): then the caller has no
// signature and leaves checking to the plugin.
int tpr_mlir_main_signature(const char* text, size_t size,
                            tpr_tensor_sig_t* sigs, int max_sigs);

#endif  // TPR_RUNTIME_INTERNAL_H_
