//===--- tpr/program.h - whole-graph programs (torch.compile) -------------===//
//
// A program is one graph built from a whole captured graph (an FX graph from
// torch.compile) with the same lowering rules as eager, compiled once into
// one executable through the eager executor's caches (memory and disk), and
// run many times on storages.
//
// Inputs are dense tensors. Each becomes a rank-1 parameter holding the
// whole storage (a storage's buffer is rank-1), reshaped in the graph, so an
// input that is exactly its storage (contiguous, offset 0, same dtype and
// element count as the buffer) is passed without a copy. Callers
// materialise other windows first (tpr_program_input_ok says which).
//
// An output may be the new value of an input (an input mutation, e.g. an
// optimizer's in-place update): run() swaps it into that input's storage,
// and the input's buffer is donated so XLA updates it in place.
//
//   tpr_program_t* p;  tpr_value_t in[2];
//   tpr_program_create(types, 2, &p, in);
//   tpr_value_t y = tpr_binary(tpr_program_graph(p), TPR_BINARY_ADD, in[0], in[1]);
//   tpr_program_add_output(p, y, -1);      // fresh output
//   tpr_program_add_output(p, y, 0);       // also the new value of input 0
//   tpr_program_compile(p, "add");
//   tpr_program_run(p, device, input_storages, output_storages);
//
//===----------------------------------------------------------------------===//
#ifndef TPR_PROGRAM_H_
#define TPR_PROGRAM_H_

#include "tpr/eager.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpr_program tpr_program_t;

// A program with inputs of |input_types|; out_inputs[i] receives the graph
// value of input i (dense, of input_types[i]) to build the body on.
tpr_status_t tpr_program_create(const tpr_type_t* input_types, int num_inputs,
                                tpr_program_t** out_program,
                                tpr_value_t* out_inputs) TPR_MUST_USE_RESULT;
void tpr_program_free(tpr_program_t* program);  // NULL is fine

// The graph to build the body on (with tpr_lower and the builders).
tpr_graph_t* tpr_program_graph(tpr_program_t* program);

// Appends output |v|. |mutates| >= 0 makes it the new value of that input
// (v must have the input's type); -1 makes it a fresh output.
tpr_status_t tpr_program_add_output(tpr_program_t* program, tpr_value_t v,
                                    int mutates) TPR_MUST_USE_RESULT;
int tpr_program_num_outputs(const tpr_program_t* program);
// The type of output |index|.
const tpr_type_t* tpr_program_output_type(const tpr_program_t* program,
                                          int index);

// Starts compiling the program on a thread of its own when no cache holds
// its executable (nothing to do under tiered compilation); the program's
// graph is sealed. tpr_program_compile then waits for it. Errors surface at
// tpr_program_compile.
tpr_status_t tpr_program_compile_start(tpr_program_t* program, const char* name);
// Where a cache holds the program's executable, gets it without waiting:
// from memory at once, from the disk cache on a thread of its own (runs
// launched meanwhile wait for the code; an entry that fails its checks is
// compiled there instead). Sets *out_started when either happened (or a
// compile or load is already under way); otherwise nothing started and
// tpr_program_compile compiles. The program's graph is sealed.
tpr_status_t tpr_program_load_start(tpr_program_t* program, const char* name,
                                    bool* out_started) TPR_MUST_USE_RESULT;
// Waits until no such compile or load runs (|timeout_seconds| <= 0: however
// long it takes); false if the time passed first.
bool tpr_program_wait_for_compiles(double timeout_seconds);

// Checks the graph and gets its executable (memory cache, disk cache, or a
// compile). |name| names the program in compile logs and errors. Sets
// *out_compiled when the plugin compiled it (no cached executable).
tpr_status_t tpr_program_compile(tpr_program_t* program, const char* name,
                                 bool* out_compiled) TPR_MUST_USE_RESULT;

// Whether |ref| can be passed as input |index| as it is: it is exactly its
// storage and the storage holds a buffer of its dtype and size.
bool tpr_program_input_ok(const tpr_program_t* program, int index,
                          const tpr_tensor_ref_t* ref);

// Runs on device |device|. inputs[i] are the input storages (each must pass
// tpr_program_input_ok; checked again here). outputs[i] receive fresh
// buffers for the fresh outputs, in order (storages of the right byte size,
// NULL to drop one); mutated inputs' storages receive their new values, and
// their old buffers are donated unless the storage is also another input.
tpr_status_t tpr_program_run(tpr_program_t* program, int device,
                             tpr_storage_t* const* inputs,
                             tpr_storage_t* const* outputs)
    TPR_MUST_USE_RESULT;

typedef struct tpr_program_stats {
  int64_t programs_compiled;  // tpr_program_compile calls that compiled
  int64_t programs_cached;    // ... that found a cached executable
  int64_t runs;
  int64_t donated_buffers;    // input buffers donated to in-place updates
} tpr_program_stats_t;

void tpr_program_get_stats(tpr_program_stats_t* out);
void tpr_program_reset_stats(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TPR_PROGRAM_H_
