//===--- compiler/lower/rules_hf.c - ops Hugging Face models reach --------===//
//
// Weight normalisation (the convolutional position embeddings of wav2vec2,
// HuBERT, SEW and relatives; torch.nn.utils weight_norm):
// _weight_norm_interface and its backward.
//
//===----------------------------------------------------------------------===//
#include "lower_internal.h"

#define G (ctx->graph)

// Shared setup: the dims of v other than |dim| (the ones a weight norm
// reduces) and the float type computations run in.
typedef struct {
  int64_t dims[TPR_MAX_RANK];
  int n;
  tpr_type_t full;  // v's shape in the compute dtype
} wn_t;

static tpr_status_t wn_prep(lw_ctx_t* ctx, int v_arg, int dim_arg, int outs, wn_t* w) {
  const tpr_type_t* vt = lw_arg_type(ctx, v_arg);
  if (!vt || vt->rank < 1 || ctx->num_outs != outs)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a weight of rank >= 1");
  int64_t dim = lw_wrap_dim(lw_int(ctx, dim_arg, 0), vt->rank);
  if (dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  tpr_dtype_t acc = lw_opmath(ctx->out_types[0].dtype);
  if (!tpr_dtype_is_float(acc))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating weight");
  w->n = 0;
  for (int64_t d = 0; d < vt->rank; d++)
    if (d != dim) w->dims[w->n++] = d;
  w->full = *vt;
  w->full.dtype = acc;
  return tpr_ok_status();
}

// Argument |i| in the compute dtype, reshaped to the reduced shape of |like|
// (g and the saved norms keep size-1 dims where v is reduced).
static tpr_value_t wn_reduced_arg(lw_ctx_t* ctx, int i, tpr_value_t like) {
  tpr_type_t t = *tpr_value_type(G, like);
  return lw_reshape_to(G, lw_cast(G, lw_value(ctx, i), t.dtype), &t);
}

// _weight_norm_interface(v, g, dim=0) -> (v * g / ||v||, ||v||): the 2-norm
// over every dim but |dim|, shaped like g.
static tpr_status_t lower_weight_norm(lw_ctx_t* ctx) {
  wn_t w;
  TPR_RETURN_IF_ERROR(wn_prep(ctx, 0, 2, 2, &w));
  if (!lw_is_tensor(ctx, 1)) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs g");
  tpr_graph_t* g = G;
  tpr_value_t v = lw_cast(g, lw_value(ctx, 0), w.full.dtype);
  tpr_value_t norms = lw_un(g, TPR_UNARY_SQRT,
                            tpr_reduce(g, lw_mul(g, v, v), TPR_REDUCE_SUM, w.dims, w.n));
  tpr_value_t scale = lw_div(g, wn_reduced_arg(ctx, 1, norms), norms);
  lw_set(ctx, 0, lw_mul(g, v, lw_unreduce(g, scale, &w.full, w.dims, w.n)));
  lw_set(ctx, 1, norms);
  return lw_done(ctx);
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)
// -> (grad_v, grad_g), with s = sum(grad_w * v) over the reduced dims:
// grad_g = s / norms, grad_v = g / norms * (grad_w - v * s / norms^2).
static tpr_status_t lower_weight_norm_backward(lw_ctx_t* ctx) {
  wn_t w;
  TPR_RETURN_IF_ERROR(wn_prep(ctx, 1, 4, 2, &w));
  if (!lw_is_tensor(ctx, 0) || !lw_is_tensor(ctx, 2) || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad_w, saved_g and saved_norms");
  tpr_graph_t* g = G;
  tpr_value_t gw = lw_cast(g, lw_value(ctx, 0), w.full.dtype);
  tpr_value_t v = lw_cast(g, lw_value(ctx, 1), w.full.dtype);
  tpr_value_t s = tpr_reduce(g, lw_mul(g, gw, v), TPR_REDUCE_SUM, w.dims, w.n);
  tpr_value_t norms = wn_reduced_arg(ctx, 3, s);
  tpr_value_t gg = wn_reduced_arg(ctx, 2, s);
  tpr_value_t coef = lw_div(g, s, lw_mul(g, norms, norms));
  tpr_value_t inner = lw_sub(g, gw, lw_mul(g, v, lw_unreduce(g, coef, &w.full, w.dims, w.n)));
  tpr_value_t grad_v = lw_mul(g, lw_unreduce(g, lw_div(g, gg, norms), &w.full, w.dims, w.n), inner);
  lw_set(ctx, 0, grad_v);
  lw_set(ctx, 1, lw_div(g, s, norms));
  return lw_done(ctx);
}

LW_DEFINE_TABLE(hf,
    LW_RULE("_weight_norm_interface", lower_weight_norm),
    LW_RULE("_weight_norm_interface_backward", lower_weight_norm_backward));
