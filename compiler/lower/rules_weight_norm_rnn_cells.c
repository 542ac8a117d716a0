//===--- compiler/lower/rules_weight_norm_rnn_cells.c - weight norm, RNN cells ===//
//
// Weight normalisation (the convolutional position embeddings of wav2vec2,
// HuBERT, SEW and relatives; torch.nn.utils weight_norm):
// _weight_norm_interface and its backward.
// The fused LSTM and GRU cells (_thnn_fused_lstm_cell, _thnn_fused_gru_cell):
// PyTorch's LSTM, GRU, LSTMCell and GRUCell pick them for every accelerator
// device (EnCodec, Mimi-style codecs, Bark's coarse model); they and their
// backwards have no CPU kernel, so they cannot fall back.
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

// The |n| gate blocks of a (B, n*H) value, each (B, H), in order.
static void cell_chunks(tpr_graph_t* g, tpr_value_t v, int64_t batch, int64_t h, int n,
                        tpr_value_t* out) {
  for (int k = 0; k < n; k++) {
    int64_t start[2] = {0, k * h}, limit[2] = {batch, (k + 1) * h}, step[2] = {1, 1};
    out[k] = tpr_slice(g, v, start, limit, step);
  }
}

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?,
// hidden_bias?) -> (hy, cy, workspace). Gates are laid out [i, f, g, o] along
// dim 1 (4H); cy = sigmoid(f) * cx + sigmoid(i) * tanh(g), hy = sigmoid(o) *
// tanh(cy). The workspace holds the activated gates in the same layout, as the
// CUDA kernel stores them for _thnn_fused_lstm_cell_backward_impl.
static tpr_status_t lower_fused_lstm_cell(lw_ctx_t* ctx) {
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  const tpr_type_t* ct = lw_arg_type(ctx, 2);
  if (!gt || !lw_arg_type(ctx, 1) || !ct || gt->rank != 2 || ct->rank != 2 ||
      ctx->num_outs != 3 || gt->dims[1] != 4 * ct->dims[1])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs (B, 4H) gates and a (B, H) cell");
  tpr_graph_t* g = G;
  tpr_dtype_t acc = lw_opmath(ctx->out_types[0].dtype);
  tpr_type_t full = *gt;
  full.dtype = acc;
  tpr_value_t gates = lw_add(g, lw_in(ctx, 0, acc, &full), lw_in(ctx, 1, acc, &full));
  for (int b = 3; b <= 4; b++)  // biases are (4H,), broadcast over the batch
    if (lw_is_tensor(ctx, b)) gates = lw_add(g, gates, lw_in(ctx, b, acc, &full));
  tpr_value_t part[4];
  cell_chunks(g, gates, gt->dims[0], ct->dims[1], 4, part);
  for (int k = 0; k < 4; k++)
    part[k] = lw_un(g, k == 2 ? TPR_UNARY_TANH : TPR_UNARY_LOGISTIC, part[k]);
  tpr_value_t cx = lw_cast(g, lw_value(ctx, 2), acc);
  tpr_value_t cy = lw_add(g, lw_mul(g, part[1], cx), lw_mul(g, part[0], part[2]));
  lw_set(ctx, 0, lw_mul(g, part[3], lw_un(g, TPR_UNARY_TANH, cy)));
  lw_set(ctx, 1, cy);
  lw_set(ctx, 2, tpr_concatenate(g, part, 4, 1));
  return lw_done(ctx);
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace,
// has_bias) -> (grad_gates, grad_cx, grad_bias if has_bias). With the
// activated gates i, f, g, o from the workspace and t = tanh(cy):
// dc = grad_cy + grad_hy * o * (1 - t^2); the gate gradients are
// [dc * g * i(1-i), dc * cx * f(1-f), dc * i * (1-g^2), grad_hy * t * o(1-o)],
// grad_cx = dc * f and grad_bias sums the gate gradients over the batch.
static tpr_status_t lower_fused_lstm_cell_backward(lw_ctx_t* ctx) {
  const tpr_type_t* ct = lw_arg_type(ctx, 2);
  const tpr_type_t* wt = lw_arg_type(ctx, 4);
  if (!ct || !wt || !lw_arg_type(ctx, 3) || ct->rank != 2 || wt->rank != 2 ||
      ctx->num_outs < 2 || wt->dims[1] != 4 * ct->dims[1])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a (B, H) cell and a (B, 4H) workspace");
  tpr_graph_t* g = G;
  tpr_dtype_t acc = lw_opmath(ctx->out_types[0].dtype);
  tpr_type_t cell = *ct;
  cell.dtype = acc;
  tpr_value_t gate[4];
  cell_chunks(g, lw_cast(g, lw_value(ctx, 4), acc), ct->dims[0], ct->dims[1], 4, gate);
  tpr_value_t cx = lw_cast(g, lw_value(ctx, 2), acc);
  tpr_value_t t = lw_un(g, TPR_UNARY_TANH, lw_cast(g, lw_value(ctx, 3), acc));
  tpr_value_t ghy = lw_is_tensor(ctx, 0) ? lw_in(ctx, 0, acc, &cell) : lw_full(g, 0, acc, &cell);
  tpr_value_t gcy = lw_is_tensor(ctx, 1) ? lw_in(ctx, 1, acc, &cell) : lw_full(g, 0, acc, &cell);
  tpr_value_t one = lw_k(g, t, 1.0);
  // d sigmoid = s(1-s), d tanh = 1-y^2
  tpr_value_t dsig[4], dc;
  for (int k = 0; k < 4; k++) dsig[k] = lw_mul(g, gate[k], lw_sub(g, one, gate[k]));
  dc = lw_add(g, gcy, lw_mul(g, lw_mul(g, ghy, gate[3]), lw_sub(g, one, lw_mul(g, t, t))));
  tpr_value_t grads[4] = {
      lw_mul(g, lw_mul(g, dc, gate[2]), dsig[0]),
      lw_mul(g, lw_mul(g, dc, cx), dsig[1]),
      lw_mul(g, lw_mul(g, dc, gate[0]), lw_sub(g, one, lw_mul(g, gate[2], gate[2]))),
      lw_mul(g, lw_mul(g, ghy, t), dsig[3]),
  };
  tpr_value_t gg = tpr_concatenate(g, grads, 4, 1);
  lw_set(ctx, 0, gg);
  lw_set(ctx, 1, lw_mul(g, dc, gate[1]));
  if (ctx->num_outs > 2) {
    int64_t d0 = 0;
    lw_set(ctx, 2, tpr_reduce(g, gg, TPR_REDUCE_SUM, &d0, 1));
  }
  return lw_done(ctx);
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?,
// hidden_bias?) -> (hy, workspace). Gates are laid out [r, z, n] along dim 1
// (3H), biases (3H,) added to their side: r = sigmoid(i_r + h_r),
// z = sigmoid(i_z + h_z), n = tanh(i_n + r * h_n), hy = n + z * (hx - n).
// The workspace (B, 5H) is [r, z, n, hx, h_n], the layout the CUDA kernel
// keeps for _thnn_fused_gru_cell_backward (h_n with its bias: the reset gate's
// gradient needs it).
static tpr_status_t lower_fused_gru_cell(lw_ctx_t* ctx) {
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  const tpr_type_t* ht = lw_arg_type(ctx, 2);
  if (!gt || !lw_arg_type(ctx, 1) || !ht || gt->rank != 2 || ht->rank != 2 ||
      ctx->num_outs != 2 || gt->dims[1] != 3 * ht->dims[1])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs (B, 3H) gates and a (B, H) hidden state");
  tpr_graph_t* g = G;
  tpr_dtype_t acc = lw_opmath(ctx->out_types[0].dtype);
  tpr_type_t full = *gt;
  full.dtype = acc;
  tpr_value_t side[2];  // input and hidden gates, each with its own bias
  for (int s = 0; s < 2; s++) {
    side[s] = lw_in(ctx, s, acc, &full);
    if (lw_is_tensor(ctx, 3 + s)) side[s] = lw_add(g, side[s], lw_in(ctx, 3 + s, acc, &full));
  }
  int64_t batch = gt->dims[0], h = ht->dims[1];
  tpr_value_t in[3], hid[3];
  cell_chunks(g, side[0], batch, h, 3, in);
  cell_chunks(g, side[1], batch, h, 3, hid);
  tpr_value_t r = lw_un(g, TPR_UNARY_LOGISTIC, lw_add(g, in[0], hid[0]));
  tpr_value_t z = lw_un(g, TPR_UNARY_LOGISTIC, lw_add(g, in[1], hid[1]));
  tpr_value_t n = lw_un(g, TPR_UNARY_TANH, lw_add(g, in[2], lw_mul(g, r, hid[2])));
  tpr_value_t hx = lw_cast(g, lw_value(ctx, 2), acc);
  lw_set(ctx, 0, lw_add(g, n, lw_mul(g, z, lw_sub(g, hx, n))));
  tpr_value_t ws[5] = {r, z, n, hx, hid[2]};
  lw_set(ctx, 1, tpr_concatenate(g, ws, 5, 1));
  return lw_done(ctx);
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) ->
// (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias?,
// grad_hidden_bias?). With r, z, n, hx, h_n from the workspace and
// dn = grad_hy * (1 - z) * (1 - n^2) (through the tanh):
// dr = dn * h_n * r(1-r), dz = grad_hy * (hx - n) * z(1-z);
// grad_input_gates = [dr, dz, dn], grad_hidden_gates = [dr, dz, dn * r],
// grad_hx = grad_hy * z, and the bias gradients sum the gate gradients over
// the batch (PyTorch leaves them undefined without biases: no result slots).
static tpr_status_t lower_fused_gru_cell_backward(lw_ctx_t* ctx) {
  const tpr_type_t* ht = lw_arg_type(ctx, 0);
  const tpr_type_t* wt = lw_arg_type(ctx, 1);
  if (!ht || !wt || ht->rank != 2 || wt->rank != 2 || wt->dims[1] != 5 * ht->dims[1] ||
      (ctx->num_outs != 3 && ctx->num_outs != 5))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a (B, H) gradient and a (B, 5H) workspace");
  tpr_graph_t* g = G;
  tpr_dtype_t acc = lw_opmath(ctx->out_types[0].dtype);
  tpr_value_t w[5];  // r, z, n, hx, h_n
  cell_chunks(g, lw_cast(g, lw_value(ctx, 1), acc), ht->dims[0], ht->dims[1], 5, w);
  tpr_value_t go = lw_cast(g, lw_value(ctx, 0), acc);
  tpr_value_t one = lw_k(g, go, 1.0);
  tpr_value_t r = w[0], z = w[1], n = w[2];
  tpr_value_t dn = lw_mul(g, lw_mul(g, go, lw_sub(g, one, z)), lw_sub(g, one, lw_mul(g, n, n)));
  tpr_value_t dr = lw_mul(g, lw_mul(g, dn, w[4]), lw_mul(g, r, lw_sub(g, one, r)));
  tpr_value_t dz = lw_mul(g, lw_mul(g, go, lw_sub(g, w[3], n)), lw_mul(g, z, lw_sub(g, one, z)));
  tpr_value_t gi[3] = {dr, dz, dn}, gh[3] = {dr, dz, lw_mul(g, dn, r)};
  tpr_value_t grad[2] = {tpr_concatenate(g, gi, 3, 1), tpr_concatenate(g, gh, 3, 1)};
  lw_set(ctx, 0, grad[0]);
  lw_set(ctx, 1, grad[1]);
  lw_set(ctx, 2, lw_mul(g, go, z));
  if (ctx->num_outs == 5) {
    int64_t d0 = 0;
    for (int s = 0; s < 2; s++) lw_set(ctx, 3 + s, tpr_reduce(g, grad[s], TPR_REDUCE_SUM, &d0, 1));
  }
  return lw_done(ctx);
}

LW_DEFINE_TABLE(weight_norm_rnn_cells,
    LW_RULE("_thnn_fused_gru_cell", lower_fused_gru_cell),
    LW_RULE("_thnn_fused_gru_cell_backward", lower_fused_gru_cell_backward),
    LW_RULE("_thnn_fused_lstm_cell", lower_fused_lstm_cell),
    LW_RULE("_thnn_fused_lstm_cell_backward_impl", lower_fused_lstm_cell_backward),
    LW_RULE("_weight_norm_interface", lower_weight_norm),
    LW_RULE("_weight_norm_interface_backward", lower_weight_norm_backward));
