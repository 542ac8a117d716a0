// tpr_while: a stablehlo.while whose regions are stored in the graph's own
// node array, between REGION_ARGS nodes and the WHILE node:
//
//   [REGION_ARGS cond] cond nodes [REGION_ARGS body] body nodes [WHILE]
//
// Every node records its scope, and tpr_graph_operand rejects operands from
// another scope, so a region can neither capture an outer value nor leak
// one of its own. The emitter prints region nodes inside the while op.
#include <string.h>

#include "compiler/ir/graph_internal.h"

// Opens a region whose block arguments have |types|; returns the index of
// its REGION_ARGS node (or -1) and its first argument in *first.
static int32_t open_region(tpr_graph_t* g, const tpr_type_t* types, int count,
                           tpr_value_t* first) {
  int32_t idx = g->num_nodes;
  int64_t end = 0;  // patched by close_region
  int32_t outer = g->scope;
  g->scope = idx + 1;  // the arguments belong to the region
  *first = tpr_graph_add_node(g, TPR_OP_REGION_ARGS, 0, NULL, 0, &end, 1, NULL,
                              0, types, count);
  if (*first == TPR_VALUE_NONE) {
    g->scope = outer;
    return -1;
  }
  return idx;
}

static void close_region(tpr_graph_t* g, int32_t idx, int32_t outer_scope) {
  g->ints[g->nodes[idx].ints] = g->num_nodes;
  g->scope = outer_scope;
}

// Runs |fn| in a new region; checks its |nres| results (types |want|, or a
// rank-0 bool when want is NULL). Returns the REGION_ARGS index or -1.
static int32_t build_region(tpr_graph_t* g, const tpr_type_t* types, int count,
                            tpr_region_fn_t fn, void* user, tpr_value_t* res,
                            int nres, const tpr_type_t* want,
                            const char* what) {
  int32_t outer = g->scope;
  tpr_value_t first;
  int32_t idx = open_region(g, types, count, &first);
  if (idx < 0) return -1;
  tpr_value_t args[TPR_WHILE_MAX];
  for (int i = 0; i < count; i++) args[i] = first + i;
  for (int i = 0; i < nres; i++) res[i] = TPR_VALUE_NONE;
  fn(g, user, args, res);
  for (int i = 0; i < nres && tpr_graph_ok(g); i++) {
    const tpr_type_t* t = tpr_graph_operand(g, res[i], what, i);
    if (!t) break;
    tpr_type_t b = tpr_type_scalar(TPR_DTYPE_BOOL);
    const tpr_type_t* w = want ? &want[i] : &b;
    if (!tpr_type_equal(t, w)) {
      char x[96], y[96];
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "%s: result %d is %s, expected %s",
                     what, i, tpr_type_format(t, x, sizeof x),
                     tpr_type_format(w, y, sizeof y));
    }
  }
  close_region(g, idx, outer);
  return tpr_graph_ok(g) ? idx : -1;
}

void tpr_while(tpr_graph_t* g, int count, const tpr_value_t* init,
               tpr_region_fn_t cond, tpr_region_fn_t body, void* user,
               tpr_value_t* out) {
  for (int i = 0; out && i < count && i < TPR_WHILE_MAX; i++)
    out[i] = TPR_VALUE_NONE;
  if (!tpr_graph_ok(g)) return;
  if (count < 1 || count > TPR_WHILE_MAX || !init || !cond || !body || !out) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                   "tpr_while: needs 1 to %d values, cond, body and outputs "
                   "(got %d values)",
                   TPR_WHILE_MAX, count);
    return;
  }
  tpr_type_t types[TPR_WHILE_MAX];
  for (int i = 0; i < count; i++) {
    const tpr_type_t* t = tpr_graph_operand(g, init[i], "tpr_while", i);
    if (!t) return;
    types[i] = *t;
  }
  tpr_value_t ops[2 * TPR_WHILE_MAX + 1];
  memcpy(ops, init, (size_t)count * sizeof *init);
  int32_t ci = build_region(g, types, count, cond, user, &ops[count], 1, NULL,
                            "tpr_while cond");
  if (ci < 0) return;
  int32_t bi = build_region(g, types, count, body, user, &ops[count + 1],
                            count, types, "tpr_while body");
  if (bi < 0) return;
  int64_t ints[2] = {ci, bi};
  tpr_value_t first = tpr_graph_add_node(g, TPR_OP_WHILE, count, ops,
                                         2 * count + 1, ints, 2, NULL, 0,
                                         types, count);
  if (first == TPR_VALUE_NONE) return;
  for (int i = 0; i < count; i++) out[i] = first + i;
}
