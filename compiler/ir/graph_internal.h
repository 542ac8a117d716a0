//===--- compiler/ir/graph_internal.h - the graph's storage ---------------===//
//
// Private to compiler/ir and compiler/stablehlo. A graph is a handful of
// growable arrays, never one malloc per node:
//
//   nodes[]     op kind, a small |sub| field (unary op, direction, dim, ...),
//               and offsets into the three payload arrays below;
//   operands[]  the operand value ids of every node, back to back;
//   ints[]      the int64 attribute lists of every node, back to back;
//   data[]      constant bytes (row-major, little-endian element bytes);
//   values      one entry per result: (node, result index, type), kept in
//               fixed blocks of TPR_VALUE_BLOCK that never move, so the
//               pointer tpr_value_type returns stays valid while the graph
//               grows (rule code holds it across builder calls).
//
// A value id indexes the values. A multi-result node (argreduce,
// rng_bit_generator) owns consecutive value ids first_value .. +n-1, so
// "result i of node n" costs nothing. Payloads are addressed by offsets, so
// growth by realloc never invalidates a node. Every array and block is kept
// across tpr_graph_reset. All structs are zero-initialised before use so the
// hash can read them as bytes.
//
//===----------------------------------------------------------------------===//
#ifndef TPR_COMPILER_IR_GRAPH_INTERNAL_H_
#define TPR_COMPILER_IR_GRAPH_INTERNAL_H_

#include "tpr/graph.h"

typedef enum tpr_op_e {
  TPR_OP_PARAMETER,        // sub = parameter index
  TPR_OP_CONSTANT,         // data = element bytes of the result type
  TPR_OP_IOTA,             // sub = dimension
  TPR_OP_CONVERT,
  TPR_OP_BITCAST_CONVERT,
  TPR_OP_BROADCAST_IN_DIM, // ints = broadcast_dimensions
  TPR_OP_RESHAPE,
  TPR_OP_TRANSPOSE,        // ints = permutation
  TPR_OP_SLICE,            // ints = start[r], limit[r], strides[r]
  TPR_OP_DYNAMIC_SLICE,    // operands = v, starts...; ints = sizes
  TPR_OP_DYNAMIC_UPDATE_SLICE,  // operands = v, update, starts...
  TPR_OP_CONCATENATE,      // sub = dimension
  TPR_OP_PAD,              // operands = v, pad value; ints = low, high, interior
  TPR_OP_REVERSE,          // ints = dimensions
  TPR_OP_UNARY,            // sub = tpr_unary_op_t
  TPR_OP_BINARY,           // sub = tpr_binary_op_t
  TPR_OP_COMPARE,          // sub = tpr_compare_dir_t
  TPR_OP_SELECT,
  TPR_OP_CLAMP,            // operands = lo, v, hi
  TPR_OP_REDUCE,           // sub = tpr_reduce_op_t; ints = dimensions
  TPR_OP_ARGREDUCE,        // sub = dim; ints = {is_max}; results: values, s64 indices
  TPR_OP_DOT_GENERAL,      // ints = nb, nc, lhs_batch, rhs_batch, lhs_contract, rhs_contract
  TPR_OP_GATHER,           // ints: see tpr_gather_dims_t
  TPR_OP_SCATTER,          // sub = accumulate; ints: see tpr_scatter_dims_t
  TPR_OP_RNG_BIT_GENERATOR,  // results: new state u64[2], bits
  // sorting and FFT (builders_sort.c)
  TPR_OP_SORT,             // sub = dimension; ints = {descending}; one result per operand
  TPR_OP_FFT,              // sub = tpr_fft_type_t; ints = fft_length
  TPR_OP_SCATTER_REDUCE,   // sub = tpr_reduce_op_t (SUM..MIN); ints as SCATTER
  TPR_OP_CONVOLUTION,      // ints: see tpr_conv_attrs_t
  TPR_OP_REDUCE_WINDOW,    // operands = v, init; sub = tpr_reduce_op_t;
                           // ints = dims, strides, base/window dilations,
                           // pad low, pad high (rank each)
  // linear algebra (builders_linalg.c)
  TPR_OP_CHOLESKY,         // ints = {lower}
  TPR_OP_TRIANGULAR_SOLVE, // operands = a, b; ints = {left_side, lower,
                           // unit_diagonal, transpose_a}
  // control flow (builders_while.c)
  TPR_OP_REGION_ARGS,      // the block arguments of a region (one result
                           // each); ints = {index of the first node after
                           // the region}
  TPR_OP_WHILE,            // operands = init[k], cond predicate, body
                           // results[k]; sub = k; ints = {cond args node,
                           // body args node}; results: the final values
  // bounded dynamism (builders.c)
  TPR_OP_SET_DIMENSION_SIZE,  // sub = dimension; ints = {restore};
                              // operands = v, size (enter) or v (restore)
  TPR_OP_OPTIMIZATION_BARRIER,  // one operand, its value unchanged
  // cross-replica collectives (builders_collective.c); ints start with
  // num_groups, group_size, then the replica ids (row-major)
  TPR_OP_ALL_REDUCE,       // sub = tpr_reduce_op_t
  TPR_OP_ALL_GATHER,       // sub = dimension
  TPR_OP_REDUCE_SCATTER,   // sub = tpr_reduce_op_t; ints end with the dimension
  TPR_OP_ALL_TO_ALL,       // ints end with split and concat dimensions
  TPR_OP_COLLECTIVE_PERMUTE,  // ints = num_pairs, (source, target) pairs
  // kernels (compiler/stablehlo/kernel.c)
  TPR_OP_CALL,             // sub = index into graph->kernels; data = the
                           // kernel's hash; operands = its inputs
  TPR_OP_COUNT_
} tpr_op_t;

typedef struct tpr_node {
  int32_t op;            // tpr_op_t
  int32_t sub;           // per-op small attribute (see tpr_op_t)
  int32_t num_operands;
  int32_t num_ints;
  int32_t num_results;
  int32_t first_value;   // value id of result 0
  int32_t scope;         // 0 at top level, else 1 + the index of the
                         // REGION_ARGS node of the enclosing region
  uint32_t operands;     // offset into graph->operands
  uint32_t ints;         // offset into graph->ints
  uint64_t data;         // offset into graph->data
  uint64_t data_size;
} tpr_node_t;

#define TPR_VALUE_BLOCK_LOG2 7
#define TPR_VALUE_BLOCK (1 << TPR_VALUE_BLOCK_LOG2)

typedef struct tpr_value_info {
  int32_t node;
  int32_t index;  // result index within the node
  tpr_type_t type;
} tpr_value_info_t;

struct tpr_graph {
  tpr_node_t* nodes;
  int32_t num_nodes, cap_nodes;
  tpr_value_info_t** value_blocks;  // each TPR_VALUE_BLOCK entries
  int32_t num_values, num_blocks, cap_blocks;
  tpr_value_t* operands;
  int32_t num_operands, cap_operands;
  int64_t* ints;
  int32_t num_ints, cap_ints;
  uint8_t* data;
  size_t data_size, data_cap;
  tpr_value_t* results;
  int32_t* aliases;  // per result: aliased parameter or -1
  int32_t num_results, cap_results;
  int32_t num_params;
  tpr_value_t* check_values;  // run-time checks (tpr_graph_add_check)
  char** check_messages;      // owned
  int32_t num_checks, cap_checks;
  tpr_kernel_t** kernels;  // called kernels, one reference each
  int32_t num_kernels, cap_kernels;
  int32_t scope;        // scope of the nodes being added (see tpr_node_t)
  tpr_status_t status;  // first error, or OK
};

// Gather / scatter dimension numbers, stored flat in ints[] as
// [n_a, n_b, n_c, index_vector_dim, n_d, a..., b..., c..., d...] where for
// gather a = offset_dims, b = collapsed_slice_dims, c = start_index_map,
// d = slice_sizes; for scatter a = update_window_dims, b =
// inserted_window_dims, c = scatter_dims_to_operand_dims, d unused (0).
typedef struct tpr_dimnums {
  int64_t index_vector_dim;
  int32_t n[4];
  const int64_t* list[4];
} tpr_dimnums_t;

void tpr_dimnums_decode(const int64_t* ints, tpr_dimnums_t* out);

// Convolution attributes, stored flat in ints[] as [ns, feature_group_count,
// batch_group_count, strides[ns], pad_low[ns], pad_high[ns],
// lhs_dilation[ns], rhs_dilation[ns]].
typedef struct tpr_conv_attrs {
  int ns;
  int64_t feature_group_count, batch_group_count;
  const int64_t *strides, *pad_low, *pad_high, *lhs_dilation, *rhs_dilation;
} tpr_conv_attrs_t;

static inline void tpr_conv_attrs_decode(const int64_t* ints,
                                         tpr_conv_attrs_t* out) {
  int ns = (int)ints[0];
  out->ns = ns;
  out->feature_group_count = ints[1];
  out->batch_group_count = ints[2];
  out->strides = ints + 3;
  out->pad_low = out->strides + ns;
  out->pad_high = out->pad_low + ns;
  out->lhs_dilation = out->pad_high + ns;
  out->rhs_dilation = out->lhs_dilation + ns;
}

// The value |v| (which must be in range).
static inline tpr_value_info_t* tpr_graph_value(const tpr_graph_t* g,
                                                tpr_value_t v) {
  return &g->value_blocks[v >> TPR_VALUE_BLOCK_LOG2]
                         [v & (TPR_VALUE_BLOCK - 1)];
}

static inline const tpr_node_t* tpr_graph_node_of(const tpr_graph_t* g,
                                                  tpr_value_t v) {
  return &g->nodes[tpr_graph_value(g, v)->node];
}

// Appends a node with |num_results| results of |result_types|; returns the
// first result's value id or TPR_VALUE_NONE (out of memory: sticky error).
tpr_value_t tpr_graph_add_node(tpr_graph_t* g, tpr_op_t op, int32_t sub,
                               const tpr_value_t* operands, int num_operands,
                               const int64_t* ints, int num_ints,
                               const void* data, size_t data_size,
                               const tpr_type_t* result_types,
                               int num_results);

// Checks that |v| is a value of |g|. On failure records an error naming
// |who| (unless one is already recorded) and returns NULL.
const tpr_type_t* tpr_graph_operand(tpr_graph_t* g, tpr_value_t v,
                                    const char* who, int index);

// Encodes |x| as the element bytes of |dtype| (rounding to nearest even;
// complex: real part x). |out| has room for 16 bytes.
void tpr_encode_f64(tpr_dtype_t dtype, double x, void* out);
void tpr_encode_i64(tpr_dtype_t dtype, int64_t x, void* out);

// The 128-bit hash graphs are keyed by (graph.c), for other byte strings
// too: a kernel's text and signature.
typedef struct tpr_hash128 {
  uint64_t a, b;
} tpr_hash128_t;
void tpr_hash128_init(tpr_hash128_t* h);
void tpr_hash128_bytes(tpr_hash128_t* h, const void* data, size_t n);
void tpr_hash128_final(const tpr_hash128_t* h, uint64_t out[2]);

// Growable NUL-terminated text (emit.c): a failed allocation sets |oom|,
// and later appends do nothing. Zero-initialise; the caller frees |p|.
typedef struct tpr_text {
  char* p;
  size_t n, cap;
  bool oom;
} tpr_text_t;
void tpr_text_append(tpr_text_t* t, const char* s, size_t len);

#endif  // TPR_COMPILER_IR_GRAPH_INTERNAL_H_
