// Builders of the cross-replica collectives of graph.h. Same contract as
// builders.c: sticky errors naming the builder and its operand types,
// TPR_VALUE_NONE propagates.
#include <stdlib.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"

#define TB 96
#define MAX_IDS 1024  // replica ids in one call's groups

#define OPERAND(t, v, who, i)                                  \
  const tpr_type_t* t = tpr_graph_operand(g, (v), (who), (i)); \
  if (!t) return TPR_VALUE_NONE

#define FAIL(...) return tpr_graph_fail(g, TPR_INVALID_ARGUMENT, __VA_ARGS__)

// Checks |groups| (non-empty rows of equal size, ids >= 0, each id once)
// and writes {num_groups, group_size, ids...} to |ints|; returns the count
// written or -1 after recording an error.
static int encode_groups(tpr_graph_t* g, const char* who, const tpr_replica_groups_t* groups,
                         int64_t* ints) {
  if (!groups || groups->num_groups < 1 || groups->group_size < 1 || !groups->ids) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: replica groups must be non-empty", who);
    return -1;
  }
  int64_t n = (int64_t)groups->num_groups * groups->group_size;
  if (n > MAX_IDS) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: %lld replica ids (at most %d)", who,
                   (long long)n, MAX_IDS);
    return -1;
  }
  ints[0] = groups->num_groups;
  ints[1] = groups->group_size;
  for (int64_t i = 0; i < n; i++) {
    int64_t id = groups->ids[i];
    if (id < 0 || id >= MAX_IDS) {
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: replica id %lld out of range", who,
                     (long long)id);
      return -1;
    }
    for (int64_t j = 0; j < i; j++) {
      if (groups->ids[j] == id) {
        tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: replica %lld is in two groups", who,
                       (long long)id);
        return -1;
      }
    }
    ints[2 + i] = id;
  }
  return (int)(2 + n);
}

static bool reduce_applies(tpr_reduce_op_t op, tpr_dtype_t d) {
  switch (op) {
    case TPR_REDUCE_SUM:
    case TPR_REDUCE_PROD:
      return true;
    case TPR_REDUCE_MAX:
    case TPR_REDUCE_MIN:
      return !tpr_dtype_is_complex(d);
    case TPR_REDUCE_AND:
    case TPR_REDUCE_OR:
      return !tpr_dtype_is_float(d) && !tpr_dtype_is_complex(d);
    default:
      return false;
  }
}

static bool check_dim(tpr_graph_t* g, const char* who, const char* what, int dim,
                      const tpr_type_t* t) {
  if (dim >= 0 && dim < t->rank) return true;
  char b[TB];
  tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: %s %d out of range for %s", who, what, dim,
                 tpr_type_format(t, b, TB));
  return false;
}

// The operand of a collective over |groups| with its checks: |v|'s type,
// each of |dims| in range, the groups encoded in |ints|. Returns the number
// of ints written, or -1 after recording an error.
static int collective_operand(tpr_graph_t* g, const char* who, tpr_value_t v,
                              const int* dims, int num_dims,
                              const tpr_replica_groups_t* groups, int64_t* ints,
                              const tpr_type_t** out_type) {
  if (!tpr_graph_ok(g)) return -1;
  const tpr_type_t* t = tpr_graph_operand(g, v, who, 0);
  if (!t) return -1;
  for (int i = 0; i < num_dims; i++)
    if (!check_dim(g, who, "dim", dims[i], t)) return -1;
  *out_type = t;
  return encode_groups(g, who, groups, ints);
}

tpr_value_t tpr_all_reduce(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op,
                           const tpr_replica_groups_t* groups) {
  const char* who = "tpr_all_reduce";
  const tpr_type_t* t;
  int64_t ints[2 + MAX_IDS];
  int k = collective_operand(g, who, v, NULL, 0, groups, ints, &t);
  if (k < 0) return TPR_VALUE_NONE;
  char b[TB];
  if (!reduce_applies(op, t->dtype))
    FAIL("%s: reduce op %d does not apply to %s", who, (int)op, tpr_type_format(t, b, TB));
  return tpr_graph_add_node(g, TPR_OP_ALL_REDUCE, op, &v, 1, ints, k, NULL, 0, t, 1);
}

tpr_value_t tpr_all_gather(tpr_graph_t* g, tpr_value_t v, int dim,
                           const tpr_replica_groups_t* groups) {
  const tpr_type_t* t;
  int64_t ints[2 + MAX_IDS];
  int k = collective_operand(g, "tpr_all_gather", v, &dim, 1, groups, ints, &t);
  if (k < 0) return TPR_VALUE_NONE;
  tpr_type_t r = *t;
  r.dims[dim] *= groups->group_size;
  return tpr_graph_add_node(g, TPR_OP_ALL_GATHER, dim, &v, 1, ints, k, NULL, 0, &r, 1);
}

tpr_value_t tpr_reduce_scatter(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op, int dim,
                               const tpr_replica_groups_t* groups) {
  const char* who = "tpr_reduce_scatter";
  const tpr_type_t* t;
  int64_t ints[3 + MAX_IDS];
  int k = collective_operand(g, who, v, &dim, 1, groups, ints, &t);
  if (k < 0) return TPR_VALUE_NONE;
  char b[TB];
  if (!reduce_applies(op, t->dtype))
    FAIL("%s: reduce op %d does not apply to %s", who, (int)op, tpr_type_format(t, b, TB));
  if (t->dims[dim] % groups->group_size)
    FAIL("%s: dim %d of %s does not split over %d replicas", who, dim,
         tpr_type_format(t, b, TB), groups->group_size);
  ints[k++] = dim;
  tpr_type_t r = *t;
  r.dims[dim] /= groups->group_size;
  return tpr_graph_add_node(g, TPR_OP_REDUCE_SCATTER, op, &v, 1, ints, k, NULL, 0, &r, 1);
}

tpr_value_t tpr_all_to_all(tpr_graph_t* g, tpr_value_t v, int split_dim, int concat_dim,
                           const tpr_replica_groups_t* groups) {
  const char* who = "tpr_all_to_all";
  const tpr_type_t* t;
  int64_t ints[4 + MAX_IDS];
  int k = collective_operand(g, who, v, (const int[]){split_dim, concat_dim}, 2, groups, ints, &t);
  if (k < 0) return TPR_VALUE_NONE;
  char b[TB];
  if (t->dims[split_dim] % groups->group_size)
    FAIL("%s: split dim %d of %s does not split over %d replicas", who, split_dim,
         tpr_type_format(t, b, TB), groups->group_size);
  ints[k++] = split_dim;
  ints[k++] = concat_dim;
  tpr_type_t r = *t;
  r.dims[split_dim] /= groups->group_size;
  r.dims[concat_dim] *= groups->group_size;
  return tpr_graph_add_node(g, TPR_OP_ALL_TO_ALL, 0, &v, 1, ints, k, NULL, 0, &r, 1);
}

tpr_value_t tpr_collective_permute(tpr_graph_t* g, tpr_value_t v, int num_pairs,
                                   const int64_t* pairs) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const char* who = "tpr_collective_permute";
  OPERAND(t, v, who, 0);
  if (num_pairs < 1 || num_pairs > MAX_IDS / 2 || !pairs)
    FAIL("%s: %d source/target pairs (1 to %d)", who, num_pairs, MAX_IDS / 2);
  int64_t ints[1 + MAX_IDS];
  ints[0] = num_pairs;
  for (int i = 0; i < 2 * num_pairs; i++) {
    if (pairs[i] < 0 || pairs[i] >= MAX_IDS)
      FAIL("%s: replica id %lld out of range", who, (long long)pairs[i]);
    for (int j = i % 2; j < i; j += 2)
      if (pairs[j] == pairs[i])
        FAIL("%s: replica %lld is a %s twice", who, (long long)pairs[i],
             i % 2 ? "target" : "source");
    ints[1 + i] = pairs[i];
  }
  return tpr_graph_add_node(g, TPR_OP_COLLECTIVE_PERMUTE, 0, &v, 1, ints, 1 + 2 * num_pairs,
                            NULL, 0, t, 1);
}
