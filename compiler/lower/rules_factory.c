// Factories, fills and copies. full/zeros/ones reach eager mode as empty +
// fill_, so fill_ carries most of the load; the functional factories are
// here for torch.compile graphs.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

// Output 0 = argument |i| converted to the out dtype, broadcast to its shape.
static tpr_status_t splat_arg(lw_ctx_t* ctx, int i) {
  if (!lw_is_tensor(ctx, i))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d must be a tensor", i);
  const tpr_type_t* t = lw_arg_type(ctx, i);
  // Nothing to write (a copy between tensors without elements).
  if (tpr_type_numel(OUT) == 0 && t->rank <= OUT->rank)
    return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_value_t v = lw_cast(G, lw_value(ctx, i), OUT->dtype);
  if (t->rank > OUT->rank || tpr_type_numel(t) == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "value does not broadcast");
  return lw_ret(ctx, tpr_broadcast_to(G, v, OUT->rank, OUT->dims));
}

static tpr_status_t constant(lw_ctx_t* ctx, double c) {
  return lw_ret(ctx, lw_full(G, c, OUT->dtype, OUT));
}

// fill(self, value) / fill_: value at argument 1.
static tpr_status_t lower_fill(lw_ctx_t* ctx) { return splat_arg(ctx, 1); }
// full(size, fill_value, ...) / full_like(self, fill_value, ...)
static tpr_status_t lower_full(lw_ctx_t* ctx) { return splat_arg(ctx, 1); }
// scalar_tensor(s, ...)
static tpr_status_t lower_scalar_tensor(lw_ctx_t* ctx) {
  return splat_arg(ctx, 0);
}
tpr_status_t lw_rule_zero(lw_ctx_t* ctx) { return constant(ctx, 0); }
static tpr_status_t lower_ones(lw_ctx_t* ctx) { return constant(ctx, 1); }

// copy_(self, src, non_blocking) / copy: src in self's dtype and shape.
tpr_status_t lw_rule_copy(lw_ctx_t* ctx) { return splat_arg(ctx, 1); }

// _to_copy(self, ...), clone(self, ...), _unsafe_view(self, size): the input
// in the out dtype (and shape, for the view).
tpr_status_t lw_rule_identity(lw_ctx_t* ctx) {
  if (!lw_is_tensor(ctx, 0))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  return lw_ret(ctx, lw_value(ctx, 0));  // lw_set converts and reshapes
}

// arange.start_out(start, end, step) and the functional forms, whose
// leading Scalar arguments are (end), (start, end) or (start, end, step):
// out[i] = start + i * step, computed in PyTorch's CPU accumulation type
// (double for float, float for half types, int64 for integers).
static tpr_status_t lower_arange(lw_ctx_t* ctx) {
  int n = 0;
  while (n < 3 && lw_is_tensor(ctx, n)) n++;
  if (n == 0 || OUT->rank != 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs scalar bounds and a 1-d out");
  tpr_dtype_t od = OUT->dtype;
  tpr_dtype_t acc;
  if (od == TPR_DTYPE_F32 || od == TPR_DTYPE_F64) acc = TPR_DTYPE_F64;
  else if (tpr_dtype_is_float(od)) acc = TPR_DTYPE_F32;
  else if (lw_is_int(od)) acc = TPR_DTYPE_S64;
  else return lw_fail(ctx, TPR_UNIMPLEMENTED, "arange into %s", tpr_dtype_name(od));
  tpr_type_t shape = *OUT;
  shape.dtype = acc;
  tpr_value_t i = tpr_iota(G, shape, 0);
  tpr_value_t start = n >= 2 ? lw_in(ctx, 0, acc, &shape) : lw_k(G, i, 0);
  tpr_value_t step = n >= 3 ? lw_in(ctx, 2, acc, &shape) : lw_k(G, i, 1);
  return lw_ret(ctx, lw_add(G, start, lw_mul(G, i, step)));
}

#define FIO(n, fn) LW_RULE(n, fn), LW_RULE(n "_", fn), LW_RULE(n ".out", fn)

LW_DEFINE_TABLE(factory,
    LW_RULE("fill.Scalar", lower_fill), LW_RULE("fill_.Scalar", lower_fill),
    LW_RULE("fill.Scalar_out", lower_fill), LW_RULE("fill.Tensor", lower_fill),
    LW_RULE("fill_.Tensor", lower_fill), LW_RULE("fill.Tensor_out", lower_fill),
    FIO("zero", lw_rule_zero),
    LW_RULE("zeros", lw_rule_zero), LW_RULE("zeros.out", lw_rule_zero),
    LW_RULE("zeros_like", lw_rule_zero), LW_RULE("zeros_like.out", lw_rule_zero),
    LW_RULE("ones", lower_ones), LW_RULE("ones.out", lower_ones),
    LW_RULE("ones_like", lower_ones), LW_RULE("ones_like.out", lower_ones),
    LW_RULE("full", lower_full), LW_RULE("full.out", lower_full),
    LW_RULE("full_like", lower_full), LW_RULE("full_like.out", lower_full),
    LW_RULE("scalar_tensor", lower_scalar_tensor),
    LW_RULE("scalar_tensor.out", lower_scalar_tensor),
    LW_RULE("arange", lower_arange), LW_RULE("arange.out", lower_arange),
    LW_RULE("arange.start", lower_arange),
    LW_RULE("arange.start_step", lower_arange),
    LW_RULE("arange.start_out", lower_arange),
    LW_RULE("copy_", lw_rule_copy), LW_RULE("copy", lw_rule_copy),
    LW_RULE("copy.out", lw_rule_copy),
    LW_RULE("_to_copy", lw_rule_identity), LW_RULE("_to_copy.out", lw_rule_identity),
    LW_RULE("clone", lw_rule_identity), LW_RULE("clone.out", lw_rule_identity),
    LW_RULE("lift_fresh_copy", lw_rule_identity),
    LW_RULE("lift_fresh_copy.out", lw_rule_identity),
    LW_RULE("_unsafe_view", lw_rule_identity),
    LW_RULE("_unsafe_view.out", lw_rule_identity),
    LW_RULE("positive", lw_rule_identity));
