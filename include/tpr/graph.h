//===--- tpr/graph.h - the SSA graph every computation goes through -------===//
//
// One small SSA graph is filled three ways (strict eager: one ATen op per
// graph; fused eager: many; torch.compile: a whole FX graph), hashed to key
// the executable caches, and emitted as StableHLO text for the plugin.
//
// Values are small integers (tpr_value_t) naming node results inside one
// graph. Builders check their operands and compute the result type; on a
// bad operand they record a sticky error in the graph and return
// TPR_VALUE_NONE, and every later builder given TPR_VALUE_NONE also returns
// it. Rule code is therefore written straight-line and checks
// tpr_graph_status() once at the end.
//
// Builders never broadcast or promote implicitly: binary operands have equal
// types (callers insert tpr_broadcast_in_dim / tpr_convert). This keeps the
// IR a direct image of StableHLO. A builder call that would be a no-op
// (reshape to the same shape, identity transpose or slice, convert to the
// same dtype, broadcast to the same shape, concatenate of one value) adds no
// node and returns its operand.
//
//   tpr_graph_t* g;  tpr_graph_create(&g);
//   tpr_type_t t = tpr_type_make(TPR_DTYPE_F32, 2, (int64_t[]){64, 64});
//   tpr_value_t x = tpr_parameter(g, t);
//   tpr_value_t y = tpr_unary(g, TPR_UNARY_EXP, x);
//   tpr_graph_add_result(g, y);
//   char* text; size_t len;
//   TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(g, &text, &len));
//
//===----------------------------------------------------------------------===//
#ifndef TPR_GRAPH_H_
#define TPR_GRAPH_H_

#include "tpr/base.h"
#include "tpr/runtime.h"  // TPR_MAX_RANK

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpr_type {
  tpr_dtype_t dtype;
  int32_t rank;
  int64_t dims[TPR_MAX_RANK];
} tpr_type_t;

// Builds a type; |dims| may be NULL when rank is 0.
tpr_type_t tpr_type_make(tpr_dtype_t dtype, int rank, const int64_t* dims);
tpr_type_t tpr_type_scalar(tpr_dtype_t dtype);
int64_t tpr_type_numel(const tpr_type_t* type);
bool tpr_type_equal(const tpr_type_t* a, const tpr_type_t* b);
// "f32[2,3]" into |buf|; returns buf.
char* tpr_type_format(const tpr_type_t* type, char* buf, size_t cap);

typedef int32_t tpr_value_t;
#define TPR_VALUE_NONE ((tpr_value_t)-1)

typedef struct tpr_graph tpr_graph_t;

tpr_status_t tpr_graph_create(tpr_graph_t** out_graph) TPR_MUST_USE_RESULT;
void tpr_graph_free(tpr_graph_t* graph);
// Empties the graph but keeps its memory, for reuse on the hot path.
void tpr_graph_reset(tpr_graph_t* graph);

// A point in a graph's construction to roll back to: an op that fails half
// way through its rule leaves the graph as it was (fused eager keeps one
// graph across many ops).
typedef struct tpr_graph_mark {
  int32_t nodes, values, operands, ints, params, checks, kernels;
  size_t data;
} tpr_graph_mark_t;

tpr_graph_mark_t tpr_graph_get_mark(const tpr_graph_t* graph);
// Drops every node and parameter added after |mark| and clears the error.
// Results must not have been added since.
void tpr_graph_rollback(tpr_graph_t* graph, const tpr_graph_mark_t* mark);
int32_t tpr_graph_num_nodes(const tpr_graph_t* graph);

// The first error recorded by a builder, or OK. The returned status is a
// fresh copy owned by the caller.
tpr_status_t tpr_graph_status(const tpr_graph_t* graph) TPR_MUST_USE_RESULT;
bool tpr_graph_ok(const tpr_graph_t* graph);
// Records an error (first one wins) and returns TPR_VALUE_NONE.
tpr_value_t tpr_graph_fail(tpr_graph_t* graph, tpr_status_code_t code,
                           const char* fmt, ...) TPR_PRINTF_LIKE(3, 4);

// The type of |v|; never NULL (TPR_VALUE_NONE or an unknown id give a type
// with TPR_DTYPE_INVALID and rank 0). The pointer stays valid while the
// graph grows, until tpr_graph_reset or tpr_graph_free.
const tpr_type_t* tpr_value_type(const tpr_graph_t* graph, tpr_value_t v);

//===--- parameters and results -------------------------------------------===//

// Adds the next entry-function argument (%argN, N = number of parameters
// added before).
tpr_value_t tpr_parameter(tpr_graph_t* graph, tpr_type_t type);
int tpr_graph_num_parameters(const tpr_graph_t* graph);
// Appends |v| to the results of @main; returns the result index.
int tpr_graph_add_result(tpr_graph_t* graph, tpr_value_t v);
int tpr_graph_num_results(const tpr_graph_t* graph);
tpr_value_t tpr_graph_result(const tpr_graph_t* graph, int index);
// Declares that parameter |param_index| may be donated to result
// |result_index| (emitted as tf.aliasing_output); types must match.
void tpr_graph_alias(tpr_graph_t* graph, int param_index, int result_index);
// The parameter aliased to result |result_index|, or -1.
int tpr_graph_result_alias(const tpr_graph_t* graph, int result_index);

// Run-time checks: conditions only the data can decide (a boolean mask
// selecting as many places as there are rows to write there;
// _assert_async). |ok| is a bool scalar; |fmt| says what failed. Programs
// (tpr/program.h) compute them with the results and fail a run whose check
// is false; other executors refuse graphs that have any. Not in the hash:
// whoever runs them makes them results.
void tpr_graph_add_check(tpr_graph_t* graph, tpr_value_t ok, const char* fmt, ...)
    TPR_PRINTF_LIKE(3, 4);
int tpr_graph_num_checks(const tpr_graph_t* graph);
tpr_value_t tpr_graph_check_value(const tpr_graph_t* graph, int index);
const char* tpr_graph_check_message(const tpr_graph_t* graph, int index);

//===--- hashing and emission --------------------------------------------===//

// A 128-bit structural hash (ops, types, attributes, constants, results,
// aliases) for cache keys. Equal graphs hash equal regardless of the order
// of unrelated builder calls is NOT promised; equal call sequences are.
// A graph holding an error never hashes like a good one. Allocates nothing;
// well under a microsecond for an eager-sized graph.
void tpr_graph_hash(const tpr_graph_t* graph, uint64_t out[2]);

// Writes the graph as a StableHLO module in MLIR generic form with a
// `func.func public @main`. *out_text is tpr_malloc'd and NUL-terminated.
// Returns the graph's error if it has one. f32/f64/complex dot_generals
// carry precision HIGHEST (PyTorch's f32 matmul, no TF32/bf16 passes).
tpr_status_t tpr_graph_emit_stablehlo(const tpr_graph_t* graph,
                                      char** out_text, size_t* out_size)
    TPR_MUST_USE_RESULT;

//===--- constants and shapes --------------------------------------------===//

// Rank-0 constants of |dtype| (converted from the given C value; for bool,
// nonzero is true).
tpr_value_t tpr_constant_f64(tpr_graph_t* graph, tpr_dtype_t dtype, double v);
tpr_value_t tpr_constant_i64(tpr_graph_t* graph, tpr_dtype_t dtype, int64_t v);
// A dense constant of |type| from row-major host bytes (copied).
tpr_value_t tpr_constant_dense(tpr_graph_t* graph, tpr_type_t type,
                               const void* data);
// The smallest / largest finite-or-infinite value of dtype (-inf/+inf for
// floats, min/max for integers, false/true for bool): reduction inits.
tpr_value_t tpr_constant_lowest(tpr_graph_t* graph, tpr_dtype_t dtype);
tpr_value_t tpr_constant_highest(tpr_graph_t* graph, tpr_dtype_t dtype);

tpr_value_t tpr_iota(tpr_graph_t* graph, tpr_type_t type, int64_t dimension);
// Complex to real takes the real part (XLA has no complex -> real convert).
tpr_value_t tpr_convert(tpr_graph_t* graph, tpr_value_t v, tpr_dtype_t dtype);
// Reinterprets bits. Between sizes (real types, not bool), as StableHLO: a
// wider element becomes a new minor dim of (from/to) narrower ones, and a
// minor dim of (to/from) narrower ones becomes one wider element. bool <->
// 1-byte types is a value convert (0/1; nonzero -> true): StableHLO's i1 has
// no byte layout. Complex <-> real is UNIMPLEMENTED (XLA rejects it).
tpr_value_t tpr_bitcast_convert(tpr_graph_t* graph, tpr_value_t v,
                                tpr_dtype_t dtype);
// stablehlo.broadcast_in_dim: operand dim i maps to result dim
// |broadcast_dims|[i]; operand dims are 1 or equal to the result dim.
tpr_value_t tpr_broadcast_in_dim(tpr_graph_t* graph, tpr_value_t v,
                                 int rank, const int64_t* dims,
                                 const int64_t* broadcast_dims);
// NumPy-style: right-aligns |v| against dims and broadcasts.
tpr_value_t tpr_broadcast_to(tpr_graph_t* graph, tpr_value_t v, int rank,
                             const int64_t* dims);
tpr_value_t tpr_reshape(tpr_graph_t* graph, tpr_value_t v, int rank,
                        const int64_t* dims);
tpr_value_t tpr_transpose(tpr_graph_t* graph, tpr_value_t v,
                          const int64_t* permutation);
tpr_value_t tpr_slice(tpr_graph_t* graph, tpr_value_t v, const int64_t* start,
                      const int64_t* limit, const int64_t* strides);
// |starts| are rank-0 integer values, one per dimension.
tpr_value_t tpr_dynamic_slice(tpr_graph_t* graph, tpr_value_t v,
                              const tpr_value_t* starts, const int64_t* sizes);
tpr_value_t tpr_dynamic_update_slice(tpr_graph_t* graph, tpr_value_t v,
                                     tpr_value_t update,
                                     const tpr_value_t* starts);
tpr_value_t tpr_concatenate(tpr_graph_t* graph, const tpr_value_t* values,
                            int count, int64_t dimension);
tpr_value_t tpr_pad(tpr_graph_t* graph, tpr_value_t v, tpr_value_t pad_value,
                    const int64_t* low, const int64_t* high,
                    const int64_t* interior);
tpr_value_t tpr_reverse(tpr_graph_t* graph, tpr_value_t v,
                        const int64_t* dims, int num_dims);

// Bounded dynamism. |v| holds an array padded to its static size (the
// bound) along |dimension|; its first |size| (a rank-0 s32 value) entries
// are real. The result has v's type, but XLA tracks the runtime size from
// here on through elementwise ops, broadcasts, reductions and dots, so
// they ignore the padding (one executable for every size up to the bound).
// It does NOT survive a reshape that splits or merges that dimension (XLA
// then silently reads the padding): callers must keep such ops away from
// dynamic dimensions.
tpr_value_t tpr_set_dimension_size(tpr_graph_t* graph, tpr_value_t v,
                                   tpr_value_t size, int64_t dimension);
// Ends the dynamic size of |dimension| (back to the full bound), so a
// result leaves the program as a static array laid out at the bound; the
// entries past the runtime size are unspecified.
tpr_value_t tpr_set_dimension_static(tpr_graph_t* graph, tpr_value_t v,
                                     int64_t dimension);

//===--- elementwise -----------------------------------------------------===//

// Ops that a supported plugin computes wrong are built another way (each
// names the plugin, its version and the failing case) unless
// TORCH_TPU_PLUGIN_WORKAROUNDS=0, which shows what the plugin itself computes:
// how `python -m torch_tpu.info --check` tells whether a newer plugin still
// needs them. Read once.
bool tpr_plugin_workarounds(void);

typedef enum tpr_unary_op_e {
  TPR_UNARY_NEG, TPR_UNARY_ABS, TPR_UNARY_SIGN, TPR_UNARY_NOT,
  TPR_UNARY_EXP, TPR_UNARY_EXPM1, TPR_UNARY_LOG, TPR_UNARY_LOG1P,
  TPR_UNARY_SQRT, TPR_UNARY_RSQRT, TPR_UNARY_CBRT,
  TPR_UNARY_TANH, TPR_UNARY_LOGISTIC, TPR_UNARY_SIN, TPR_UNARY_COS,
  TPR_UNARY_TAN, TPR_UNARY_FLOOR, TPR_UNARY_CEIL,
  TPR_UNARY_ROUND_NEAREST_EVEN, TPR_UNARY_ROUND_NEAREST_AFZ,
  TPR_UNARY_IS_FINITE,  // result bool
  TPR_UNARY_POPCNT, TPR_UNARY_CLZ,
  TPR_UNARY_REAL, TPR_UNARY_IMAG,  // complex -> float
  // chlo ops (decomposed by XLA's legalization)
  TPR_UNARY_ERF, TPR_UNARY_ERFC, TPR_UNARY_ERF_INV, TPR_UNARY_LGAMMA,
  TPR_UNARY_DIGAMMA, TPR_UNARY_ASIN, TPR_UNARY_ACOS, TPR_UNARY_ATAN,
  TPR_UNARY_SINH, TPR_UNARY_COSH, TPR_UNARY_ASINH, TPR_UNARY_ACOSH,
  TPR_UNARY_ATANH,
  TPR_UNARY_BESSEL_I1E,  // chlo: exp(-|x|) I1(x)
  TPR_UNARY_COUNT_
} tpr_unary_op_t;

typedef enum tpr_binary_op_e {
  TPR_BINARY_ADD, TPR_BINARY_SUB, TPR_BINARY_MUL, TPR_BINARY_DIV,
  TPR_BINARY_REM, TPR_BINARY_POW, TPR_BINARY_MAX, TPR_BINARY_MIN,
  TPR_BINARY_ATAN2, TPR_BINARY_AND, TPR_BINARY_OR, TPR_BINARY_XOR,
  TPR_BINARY_SHIFT_LEFT, TPR_BINARY_SHIFT_RIGHT_ARITHMETIC,
  TPR_BINARY_SHIFT_RIGHT_LOGICAL,
  TPR_BINARY_NEXTAFTER,  // chlo
  TPR_BINARY_POLYGAMMA,  // chlo: polygamma(n, x), n a float of x's type
  TPR_BINARY_ZETA,       // chlo: Hurwitz zeta(x, q)
  TPR_BINARY_COMPLEX,    // f32/f64 (re, im) -> c64/c128
  TPR_BINARY_COUNT_
} tpr_binary_op_t;

typedef enum tpr_compare_dir_e {
  TPR_CMP_EQ, TPR_CMP_NE, TPR_CMP_LT, TPR_CMP_LE, TPR_CMP_GT, TPR_CMP_GE,
} tpr_compare_dir_t;

// Result type = operand type (IS_FINITE: bool; REAL/IMAG, and ABS of a
// complex: the float part).
tpr_value_t tpr_unary(tpr_graph_t* graph, tpr_unary_op_t op, tpr_value_t v);
// Operands must have equal types; result has that type (COMPLEX: the
// complex type with that part type).
tpr_value_t tpr_binary(tpr_graph_t* graph, tpr_binary_op_t op, tpr_value_t a,
                       tpr_value_t b);
// Equal operand types; result bool of the same shape. Floats compare with
// FLOAT semantics (NaN != NaN), signed ints SIGNED, unsigned and bool
// UNSIGNED.
tpr_value_t tpr_compare(tpr_graph_t* graph, tpr_compare_dir_t dir,
                        tpr_value_t a, tpr_value_t b);
// |pred| is bool of the same shape as the branches (or rank 0).
tpr_value_t tpr_select(tpr_graph_t* graph, tpr_value_t pred,
                       tpr_value_t on_true, tpr_value_t on_false);
tpr_value_t tpr_clamp(tpr_graph_t* graph, tpr_value_t lo, tpr_value_t v,
                      tpr_value_t hi);

//===--- reductions, contractions ----------------------------------------===//

typedef enum tpr_reduce_op_e {
  TPR_REDUCE_SUM, TPR_REDUCE_PROD, TPR_REDUCE_MAX, TPR_REDUCE_MIN,
  TPR_REDUCE_AND, TPR_REDUCE_OR,
} tpr_reduce_op_t;

// Reduces |dims| away (result rank = rank - num_dims), with the op's
// identity as init. Accumulates in the operand dtype: callers convert
// bf16/f16 to f32 first where PyTorch accumulates in f32.
tpr_value_t tpr_reduce(tpr_graph_t* graph, tpr_value_t v, tpr_reduce_op_t op,
                       const int64_t* dims, int num_dims);

// A max reduction without tpr_reduce's NaN guard, whose second reduction
// costs as much as the max: XLA:CPU's max may skip a NaN, so a slice holding
// one can give the max of its other elements. Only for callers whose result
// turns NaN anyway where the slice holds one (softmax, logsumexp: the NaN
// survives exp(x - max) and the slice's sum spreads it).
tpr_value_t tpr_reduce_max_unguarded(tpr_graph_t* graph, tpr_value_t v,
                                     const int64_t* dims, int num_dims);

// XLA:CPU rewrites a sum over an operand's minor dims into a reduce-window
// and a second reduction, several times slower than PyTorch's row kernels
// (layer norm, softmax), while the XLA:CPU of some plugins runs a
// matrix-vector product as a loop fused with its operand's producer. When
// on (the eager runtime turns it on for those, see eager/context.c), an f32
// sum over trailing dims is built as a dot_general with a ones vector (the
// dims reshaped to one first) where that was measured to pay: at least two
// rows of at most 4K elements, 16K elements in all. Process-wide; off by
// default.
void tpr_graph_set_row_sums_as_dots(bool on);

// Max/min with index along |dim| (removed from the result). Ties take the
// smallest index and NaN wins, as in PyTorch. Indices are s64.
void tpr_argreduce(tpr_graph_t* graph, tpr_value_t v, int64_t dim,
                   bool is_max, tpr_value_t* out_values,
                   tpr_value_t* out_indices);

// stablehlo.dot_general. Result: batch dims, then lhs free dims, then rhs
// free dims, with element type |result_dtype| (operands may be narrower,
// e.g. bf16 x bf16 -> f32).
tpr_value_t tpr_dot_general(tpr_graph_t* graph, tpr_value_t lhs,
                            tpr_value_t rhs, int num_batch,
                            const int64_t* lhs_batch, const int64_t* rhs_batch,
                            int num_contract, const int64_t* lhs_contract,
                            const int64_t* rhs_contract,
                            tpr_dtype_t result_dtype);

// XLA:CPU packs a dot's right operand block by block, and that packing is
// slow when the operand contracts along its minor dimension: x @ W.t() with
// few rows in x (a linear layer on a short batch) spent a third of a small
// transformer's forward there. When on (the eager runtime turns it on for
// CPU plugins), a 2-D product whose right operand is an odd number of
// transposes of a value W and whose left side has fewer rows than the result
// has columns is built as transpose(W @ x^T), the transpose behind an
// optimization barrier so that XLA does not fold it back into the dot.
// Process-wide; off by default.
void tpr_graph_set_swap_transposed_dots(bool on);

// stablehlo.optimization_barrier on one value: XLA may not move or fold
// computations across it.
tpr_value_t tpr_optimization_barrier(tpr_graph_t* graph, tpr_value_t v);

//===--- indexing --------------------------------------------------------===//

// Elements of the rank-1 |v| at |indices| (any rank, integer dtype):
// result[i...] = v[indices[i...]]. Out-of-range indices are clamped
// (XLA semantics); callers check bounds where PyTorch requires it.
tpr_value_t tpr_take_1d(tpr_graph_t* graph, tpr_value_t v, tpr_value_t indices);
// The rank-1 |v| with v[indices[i...]] = updates[i...] (or += when
// |accumulate|). |updates| has the shape of |indices|.
tpr_value_t tpr_put_1d(tpr_graph_t* graph, tpr_value_t v, tpr_value_t indices,
                       tpr_value_t updates, bool accumulate);
// torch.gather semantics along |dim| (index has the operand's rank).
tpr_value_t tpr_gather_along(tpr_graph_t* graph, tpr_value_t v, int64_t dim,
                             tpr_value_t index);
// torch.scatter / scatter_add semantics along |dim|.
tpr_value_t tpr_scatter_along(tpr_graph_t* graph, tpr_value_t v, int64_t dim,
                              tpr_value_t index, tpr_value_t src,
                              bool accumulate);
// Slices of |v| along |dim| at |indices|: index_select / embedding. Indices
// may have any rank k: the result replaces dim |dim| by the k index dims.
tpr_value_t tpr_index_select(tpr_graph_t* graph, tpr_value_t v, int64_t dim,
                             tpr_value_t indices);

// Whole windows of |v| at the coordinates |coords| (integer [B..., m]) of
// its |m| distinct dims |index_dims| (column i of coords indexes dim
// index_dims[i]): the result is [B..., the other dims of v in order]. No
// operand transpose, whatever dims are indexed. Out-of-range coordinates
// are clamped (XLA semantics); callers check bounds.
tpr_value_t tpr_gather_windows(tpr_graph_t* graph, tpr_value_t v,
                               const int64_t* index_dims, int m,
                               tpr_value_t coords);
// |v| with those windows replaced by (or, |accumulate|, added to)
// |updates| [B..., the other dims of v in order]. Out-of-range windows are
// dropped. The operand is updated where it lies: with a donated, aliased
// buffer the update costs the updates, not the operand.
tpr_value_t tpr_scatter_windows(tpr_graph_t* graph, tpr_value_t v,
                                const int64_t* index_dims, int m,
                                tpr_value_t coords, tpr_value_t updates,
                                bool accumulate);

//===--- random ----------------------------------------------------------===//

// stablehlo.rng_bit_generator (THREE_FRY) from a u64[2] |state|: returns
// random bits of |type| (an unsigned integer dtype) and the new state.
// Types narrower than 64 bits are 64-bit words bitcast into k = 64 / width
// elements each: a minor dim divisible by k holds dim / k words, any other
// shape takes the first numel elements of ceil(numel / k) words.
void tpr_rng_bits(tpr_graph_t* graph, tpr_value_t state, tpr_type_t type,
                  tpr_value_t* out_bits, tpr_value_t* out_new_state);

//===--- sorting, scans, FFT (builders_sort.c) ----------------------------===//

// stablehlo.sort: |count| (1..8) operands of one shape, permuted together
// along |dimension| so that operand 0 is in order (ascending, or descending
// when |descending|). The sort is stable: equal keys keep their order.
// Floats order as in PyTorch: NaN above +inf (last ascending, first
// descending), -0.0 equal to 0.0. out_values[i] gets operand i permuted;
// sorting by an iota operand gives the indices.
void tpr_sort(tpr_graph_t* graph, const tpr_value_t* operands, int count,
              int64_t dimension, bool descending, tpr_value_t* out_values);

typedef enum tpr_scan_op_e {
  TPR_SCAN_SUM, TPR_SCAN_PROD, TPR_SCAN_MAX, TPR_SCAN_MIN,
  TPR_SCAN_LOGADDEXP,  // log(exp(a) + exp(b)); floats only
} tpr_scan_op_t;

// Inclusive prefix scan along |dimension|: out[i] = v[0] op ... op v[i]
// (from the end, out[i] = v[i] op ... op v[n-1], when |reverse|). Same type
// as |v|, accumulated in v's dtype: callers convert bf16/f16 to f32 first
// where PyTorch accumulates in f32. MAX/MIN propagate NaN. Built from
// ceil(log2 n) pad/slice/elementwise steps, so the combination order is a
// tree, not left to right.
tpr_value_t tpr_scan(tpr_graph_t* graph, tpr_value_t v, int64_t dimension,
                     tpr_scan_op_t op, bool reverse);
// Running max (or min) along |dimension| and the s64 index where each was
// attained; ties and NaN take the latest index (PyTorch's cummax/cummin).
void tpr_scan_arg(tpr_graph_t* graph, tpr_value_t v, int64_t dimension,
                  bool is_max, tpr_value_t* out_values,
                  tpr_value_t* out_indices);

typedef enum tpr_fft_type_e {
  TPR_FFT_FFT, TPR_FFT_IFFT,  // complex -> complex
  TPR_FFT_RFFT,               // f32/f64 -> c64/c128, last dim n/2+1
  TPR_FFT_IRFFT,              // complex (last dim n/2+1) -> real, last dim n
} tpr_fft_type_t;

// stablehlo.fft over the trailing |num_dims| (1..3) dims with lengths
// |lengths| (the transform sizes; for IRFFT the real output sizes).
// Unnormalised forward, 1/n-normalised inverse, as XLA defines them.
tpr_value_t tpr_fft(tpr_graph_t* graph, tpr_value_t v, tpr_fft_type_t type,
                    const int64_t* lengths, int num_dims);

// torch.scatter_reduce along |dim| (rank >= 1) with |op| one of SUM, PROD,
// MAX, MIN: v[..., index[i...], ...] = op(v[...], src[i...]) for every
// element of the index-shaped block of src, duplicates combined in an
// unspecified order. MAX/MIN propagate NaN. Indices out of range are
// dropped (XLA semantics); callers check bounds where PyTorch requires it.
tpr_value_t tpr_scatter_reduce_along(tpr_graph_t* graph, tpr_value_t v,
                                     int64_t dim, tpr_value_t index,
                                     tpr_value_t src, tpr_reduce_op_t op);
//===--- spatial (convolution, windows) ----------------------------------===//
//
// Spatial ops use PyTorch's layouts: input and result [N, C, spatial...],
// kernel [O, I, spatial...], with |num_spatial| spatial dims (1 to
// TPR_MAX_RANK - 2). Per-dim attribute arrays have num_spatial entries (or
// the operand's rank for reduce_window); NULL means the default (stride and
// dilations 1, padding 0).

// stablehlo.convolution of |lhs| [N, C, s...] with |rhs| [O, C/groups, k...]
// into [N / batch_group_count, O, o...] of |result_dtype| (operands may be
// narrower, e.g. bf16 x bf16 -> f32; f32 and f64 carry precision HIGHEST, as
// dot_general). |lhs_dilation| > 1 dilates the input (transposed
// convolution); |pad_low|/|pad_high| may be negative (cropping).
// feature_group_count divides C and O; batch_group_count divides N and O
// (one of them is 1).
tpr_value_t tpr_convolution(tpr_graph_t* graph, tpr_value_t lhs,
                            tpr_value_t rhs, int num_spatial,
                            const int64_t* window_strides,
                            const int64_t* pad_low, const int64_t* pad_high,
                            const int64_t* lhs_dilation,
                            const int64_t* rhs_dilation,
                            int64_t feature_group_count,
                            int64_t batch_group_count,
                            tpr_dtype_t result_dtype);

// stablehlo.reduce_window over every dim of |v| with |op| (SUM, MAX or MIN)
// starting from the rank-0 |init| (v's dtype): result dim i is
// floor((padded_i - dilated_window_i) / stride_i) + 1, where padded_i is the
// base-dilated size plus padding (padding >= 0; windows reaching into the
// padding see |init|). Accumulates in v's dtype; no NaN special-casing.
tpr_value_t tpr_reduce_window(tpr_graph_t* graph, tpr_value_t v,
                              tpr_value_t init, tpr_reduce_op_t op,
                              const int64_t* window_dims,
                              const int64_t* window_strides,
                              const int64_t* base_dilations,
                              const int64_t* window_dilations,
                              const int64_t* pad_low, const int64_t* pad_high);

//===--- linear algebra (builders_linalg.c) -------------------------------===//
//
// Matrices are the last two dims of f32/f64 operands; leading dims are a
// batch (equal in both operands, no broadcasting).

// stablehlo.cholesky of the symmetric positive definite |a| [..., n, n]:
// the lower (or upper) factor, read from that triangle only. The other
// triangle of the result is unspecified (callers mask it). A matrix that is
// not positive definite yields NaNs from the failing column on.
tpr_value_t tpr_cholesky(tpr_graph_t* graph, tpr_value_t a, bool lower);
// stablehlo.triangular_solve: X with op(a) X = b (|left_side|) or
// X op(a) = b, where a [..., m, m] is lower (or upper) triangular, its
// diagonal taken as ones when |unit_diagonal|, op(a) = a^T when
// |transpose_a|. b is [..., m, k] (left) or [..., k, m]; X has b's type.
tpr_value_t tpr_triangular_solve(tpr_graph_t* graph, tpr_value_t a,
                                 tpr_value_t b, bool left_side, bool lower,
                                 bool unit_diagonal, bool transpose_a);

//===--- control flow (builders_while.c) ----------------------------------===//

// Fills a region: |args| are its block arguments; it writes its results.
typedef void (*tpr_region_fn_t)(tpr_graph_t* graph, void* user,
                                const tpr_value_t* args, tpr_value_t* results);

// stablehlo.while over |count| (1..TPR_WHILE_MAX) loop-carried values
// starting at |init|: while cond(values) (one rank-0 bool result) holds,
// values = body(values) (results of the argument types). Regions capture
// nothing: they use only their arguments and nodes built inside them (loop
// invariants travel as carried values); a builder given an outside value
// inside a region, or a region value outside it, records an error.
// out[i] gets the final value i. Regions may nest.
#define TPR_WHILE_MAX 16
void tpr_while(tpr_graph_t* graph, int count, const tpr_value_t* init,
               tpr_region_fn_t cond, tpr_region_fn_t body, void* user,
               tpr_value_t* out);

//===--- kernels: StableHLO from elsewhere (compiler/stablehlo/kernel.c) --===//
//
// A kernel is StableHLO text written outside the builders (a JAX function's
// lowering, a Pallas kernel in interpret mode, hand-written MLIR): func.func
// definitions, optionally inside a module, pretty or generic form, one of
// them the entry. A graph calls it like an op (func.call); the emitter
// appends its functions, renamed k<hash>_<name> and private, to the module.
// Kernels are immutable and reference counted (thread-safe); graphs retain
// the kernels they call.
#define TPR_KERNEL_MAX_ARGS 64
typedef struct tpr_kernel tpr_kernel_t;
// Checks the entry's signature in |text| against |inputs| -> |outputs|
// (at least one output) and prepares the renamed text. |name| names the
// kernel in errors; |entry| NULL means "main". Text with attribute or type
// aliases (debug locations) is refused.
tpr_status_t tpr_kernel_create(const char* name, const char* text, size_t size,
                               const char* entry, const tpr_type_t* inputs,
                               int num_inputs, const tpr_type_t* outputs,
                               int num_outputs, tpr_kernel_t** out_kernel)
    TPR_MUST_USE_RESULT;
tpr_kernel_t* tpr_kernel_retain(tpr_kernel_t* kernel);
void tpr_kernel_release(tpr_kernel_t* kernel);  // NULL is fine
const char* tpr_kernel_name(const tpr_kernel_t* kernel);
// The renamed definitions, and the entry's new symbol (without '@').
const char* tpr_kernel_text(const tpr_kernel_t* kernel);
const char* tpr_kernel_entry(const tpr_kernel_t* kernel);
int tpr_kernel_num_inputs(const tpr_kernel_t* kernel);
int tpr_kernel_num_outputs(const tpr_kernel_t* kernel);
const tpr_type_t* tpr_kernel_input_type(const tpr_kernel_t* kernel, int index);
const tpr_type_t* tpr_kernel_output_type(const tpr_kernel_t* kernel, int index);
// A 128-bit hash of the text, entry and signature (part of graph hashes).
void tpr_kernel_hash(const tpr_kernel_t* kernel, uint64_t out[2]);
// Calls |kernel| on |args| (exactly its input types); out[i] gets output i.
void tpr_call_kernel(tpr_graph_t* graph, tpr_kernel_t* kernel,
                     const tpr_value_t* args, int num_args, tpr_value_t* out);

//===--- views over flat storage ------------------------------------------===//
//
// A PyTorch storage lives on the device as one rank-1 buffer of its element
// type. A tensor is a strided window into it. These read and write such
// windows; contiguous and permuted windows become slice/reshape/transpose,
// others a gather/scatter with computed indices.

// The window (sizes, strides, offset in elements) of the rank-1 |base| as a
// dense value of shape |sizes|. |dtype| may differ from base's if the sizes
// match (bitcast) or if one is complex and the other its part type (a
// complex element is two adjacent parts: view_as_real / view_as_complex);
// else UNIMPLEMENTED. A window reaching outside the base is
// INVALID_ARGUMENT. The whole base read as itself returns |base|.
tpr_value_t tpr_view_read(tpr_graph_t* graph, tpr_value_t base,
                          tpr_dtype_t dtype, int rank, const int64_t* sizes,
                          const int64_t* strides, int64_t offset);
// The rank-1 |base| with the window replaced by |value| (shape |sizes|,
// converted to base's dtype by bitcast if needed). Overlapping windows
// (zero or aliasing strides) are INVALID_ARGUMENT. Writing the whole base
// returns |value| reshaped; an empty window returns |base|.
tpr_value_t tpr_view_write(tpr_graph_t* graph, tpr_value_t base, int rank,
                           const int64_t* sizes, const int64_t* strides,
                           int64_t offset, tpr_value_t value);

//===--- cross-replica collectives (builders_collective.c) ---------------===//
//
// The device transport's programs: each runs on every replica at once (a
// program compiled by tpr_executable_compile_replicated and launched by
// tpr_executable_execute_replicated), and |groups| partitions the replica
// ids as StableHLO's replica_groups: |num_groups| rows of |group_size| ids.
// Every replica lists every group, including those it is not in.

typedef struct tpr_replica_groups {
  int32_t num_groups;
  int32_t group_size;
  const int64_t* ids;  // num_groups * group_size replica ids, row-major
} tpr_replica_groups_t;

// Elementwise |op| (SUM, PROD, MAX, MIN; AND, OR on bool and integers) over
// the group; every member gets the result.
tpr_value_t tpr_all_reduce(tpr_graph_t* graph, tpr_value_t v, tpr_reduce_op_t op,
                           const tpr_replica_groups_t* groups);
// The members' values concatenated along |dim|, in group order.
tpr_value_t tpr_all_gather(tpr_graph_t* graph, tpr_value_t v, int dim,
                           const tpr_replica_groups_t* groups);
// all_reduce, then member k keeps the k-th of group_size equal slices along
// |dim| (which group_size must divide).
tpr_value_t tpr_reduce_scatter(tpr_graph_t* graph, tpr_value_t v, tpr_reduce_op_t op,
                               int dim, const tpr_replica_groups_t* groups);
// Member k's value split in group_size slices along |split_dim|; slice j
// goes to member j, which concatenates what it receives along |concat_dim|.
tpr_value_t tpr_all_to_all(tpr_graph_t* graph, tpr_value_t v, int split_dim,
                           int concat_dim, const tpr_replica_groups_t* groups);
// Replica pairs[2i] sends to pairs[2i+1]; a replica no pair sends to gets
// zeros. No replica appears twice as a source or twice as a target.
tpr_value_t tpr_collective_permute(tpr_graph_t* graph, tpr_value_t v, int num_pairs,
                                   const int64_t* pairs);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TPR_GRAPH_H_
