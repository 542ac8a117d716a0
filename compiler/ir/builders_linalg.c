// Builders of the matrix factorization ops of graph.h ("linear algebra"):
// stablehlo.cholesky and stablehlo.triangular_solve, XLA's two native
// decompositions. Same contract as builders.c: sticky errors naming the
// builder and its operand types, TPR_VALUE_NONE propagates.
#include "compiler/ir/graph_internal.h"

#define TB 96

static bool is_real_float(tpr_dtype_t d) {
  return d == TPR_DTYPE_F32 || d == TPR_DTYPE_F64;
}

tpr_value_t tpr_cholesky(tpr_graph_t* g, tpr_value_t a, bool lower) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const tpr_type_t* t = tpr_graph_operand(g, a, "tpr_cholesky", 0);
  if (!t) return TPR_VALUE_NONE;
  char b[TB];
  if (t->rank < 2 || t->dims[t->rank - 1] != t->dims[t->rank - 2] ||
      !is_real_float(t->dtype))
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_cholesky: needs f32/f64 square matrices, got %s",
                          tpr_type_format(t, b, TB));
  int64_t lo = lower;
  return tpr_graph_add_node(g, TPR_OP_CHOLESKY, 0, &a, 1, &lo, 1, NULL, 0, t,
                            1);
}

tpr_value_t tpr_triangular_solve(tpr_graph_t* g, tpr_value_t a, tpr_value_t b,
                                 bool left_side, bool lower,
                                 bool unit_diagonal, bool transpose_a) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const tpr_type_t* ta = tpr_graph_operand(g, a, "tpr_triangular_solve", 0);
  const tpr_type_t* tb =
      ta ? tpr_graph_operand(g, b, "tpr_triangular_solve", 1) : NULL;
  if (!tb) return TPR_VALUE_NONE;
  int r = ta->rank;
  bool ok = r >= 2 && tb->rank == r && ta->dtype == tb->dtype &&
            is_real_float(ta->dtype) && ta->dims[r - 1] == ta->dims[r - 2] &&
            tb->dims[left_side ? r - 2 : r - 1] == ta->dims[r - 1];
  for (int i = 0; ok && i < r - 2; i++) ok = ta->dims[i] == tb->dims[i];
  if (!ok) {
    char x[TB], y[TB];
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "tpr_triangular_solve: %s and %s do not fit (%s)",
                          tpr_type_format(ta, x, TB), tpr_type_format(tb, y, TB),
                          left_side ? "left" : "right");
  }
  tpr_value_t ops[2] = {a, b};
  int64_t flags[4] = {left_side, lower, unit_diagonal, transpose_a};
  return tpr_graph_add_node(g, TPR_OP_TRIANGULAR_SOLVE, 0, ops, 2, flags, 4,
                            NULL, 0, tb, 1);
}
