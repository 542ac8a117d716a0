// Convolutions, forward and backward, 1-d to 3-d, strided, padded, dilated,
// grouped and transposed, on stablehlo.convolution. bf16/f16 convolve in f32
// and round once (PyTorch's CPU kernels accumulate in f32 too).
//
// A transposed convolution is the adjoint of a plain one: it dilates its
// input by the stride (lhs_dilation), pads by d*(k-1)-p (plus output_padding
// on the high side) and convolves with the kernel flipped and its in/out
// channels swapped per group. Backward passes reuse the two directions:
//   plain:      d_input = transposed(d_out, w), d_weight = wgrad(x, d_out)
//   transposed: d_input = plain(d_out, w),      d_weight = wgrad(d_out, x)
// where wgrad convolves the batch dims away (channels as batch, batch as
// features; batch_group_count keeps groups apart).
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)

typedef struct {
  int ns;  // spatial dims
  int64_t stride[TPR_MAX_RANK], pad[TPR_MAX_RANK], dil[TPR_MAX_RANK];
  int64_t out_pad[TPR_MAX_RANK];
  bool transposed;
  int64_t groups;
} conv_t;

// An int[] argument of one or ns entries into out[ns]; |dflt| if None.
static bool spatial_list(const lw_ctx_t* ctx, int i, int ns, int64_t dflt,
                         int64_t* out) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  for (int d = 0; d < ns; d++) out[d] = dflt;
  if (a->kind == TPR_ARG_NONE) return true;
  if (a->kind != TPR_ARG_INT_LIST || (a->count != 1 && a->count != ns))
    return false;
  for (int d = 0; d < ns; d++) out[d] = a->ints[a->count == 1 ? 0 : d];
  return true;
}

// Reads (stride, padding, dilation, transposed, output_padding, groups)
// starting at argument |first|; |weight| fixes the spatial rank.
static tpr_status_t conv_params(const lw_ctx_t* ctx, int first,
                                const tpr_type_t* weight, conv_t* c) {
  c->ns = weight ? weight->rank - 2 : 0;
  if (c->ns < 1 || c->ns > 3)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "only 1-d, 2-d and 3-d convolutions");
  if (!spatial_list(ctx, first, c->ns, 1, c->stride) ||
      !spatial_list(ctx, first + 1, c->ns, 0, c->pad) ||
      !spatial_list(ctx, first + 2, c->ns, 1, c->dil) ||
      !spatial_list(ctx, first + 4, c->ns, 0, c->out_pad))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "stride/padding/dilation/output_padding need 1 or %d entries",
                   c->ns);
  c->transposed = lw_bool(ctx, first + 3, false);
  c->groups = lw_int(ctx, first + 5, 1);
  for (int d = 0; d < c->ns; d++)
    if (c->stride[d] < 1 || c->dil[d] < 1 || c->pad[d] < 0 || c->out_pad[d] < 0)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                     "stride and dilation must be positive, padding >= 0");
  if (c->groups < 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "groups must be positive");
  return tpr_ok_status();
}

// The dtype convolutions compute in: f32 for f16/bf16, else the dtype
// itself (floats only).
static tpr_status_t conv_dtype(const lw_ctx_t* ctx, tpr_dtype_t d,
                               tpr_dtype_t* out) {
  *out = lw_opmath(d);
  if (!tpr_dtype_is_float(*out))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs floating tensors");
  return tpr_ok_status();
}

// Plain convolution of x [N, C, s...] with w [O, C/g, k...].
static tpr_value_t conv_plain(tpr_graph_t* g, const conv_t* c, tpr_value_t x,
                              tpr_value_t w) {
  tpr_dtype_t d = tpr_value_type(g, x)->dtype;
  return tpr_convolution(g, x, w, c->ns, c->stride, c->pad, c->pad, NULL,
                         c->dil, c->groups, 1, d);
}

// Transposed convolution of x [N, Cin, s...] with w [Cin, Cout/g, k...]
// into a result with spatial sizes |out_sizes|.
static tpr_value_t conv_transposed(tpr_graph_t* g, const conv_t* c,
                                   tpr_value_t x, tpr_value_t w,
                                   const int64_t* out_sizes) {
  const tpr_type_t* xt = tpr_value_type(g, x);
  const tpr_type_t* wt = tpr_value_type(g, w);
  int ns = c->ns;
  int64_t grp = c->groups, cin = wt->dims[0], cog = wt->dims[1];
  if (cin % grp) {
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "transposed convolution: %lld input channels do not "
                          "split into %lld groups",
                          (long long)cin, (long long)grp);
  }
  // [Cin, Cout/g, k] -> [g, Cin/g, Cout/g, k] -> [g, Cout/g, Cin/g, k]
  // -> [Cout, Cin/g, k], flipped spatially.
  int64_t dims[TPR_MAX_RANK + 1], perm[TPR_MAX_RANK + 1], flip[3];
  dims[0] = grp;
  dims[1] = cin / grp;
  dims[2] = cog;
  perm[0] = 0, perm[1] = 2, perm[2] = 1;
  for (int i = 0; i < ns; i++) {
    dims[3 + i] = wt->dims[2 + i];
    perm[3 + i] = 3 + i;
    flip[i] = 2 + i;
  }
  tpr_value_t k = tpr_reshape(g, w, ns + 3, dims);
  k = tpr_transpose(g, k, perm);
  int64_t kd[TPR_MAX_RANK];
  kd[0] = grp * cog;
  kd[1] = cin / grp;
  for (int i = 0; i < ns; i++) kd[2 + i] = wt->dims[2 + i];
  k = tpr_reverse(g, tpr_reshape(g, k, ns + 2, kd), flip, ns);
  int64_t lo[3], hi[3];
  for (int i = 0; i < ns; i++) {
    int64_t span = c->dil[i] * (wt->dims[2 + i] - 1);
    lo[i] = span - c->pad[i];
    // The high side pads up to the size asked for (output_padding).
    int64_t base = (xt->dims[2 + i] - 1) * c->stride[i] + 1;
    hi[i] = out_sizes[i] + span - base - lo[i];
  }
  return tpr_convolution(g, x, k, ns, NULL, lo, hi, c->stride, c->dil, grp, 1,
                         xt->dtype);
}

// d_weight of a plain convolution whose input is |u| [N, Cu, s...] and whose
// output gradient is |dz| [N, Cz, o...]: [Cz, Cu/g, k...] for kernel sizes
// |ksz|.
static tpr_value_t conv_wgrad(tpr_graph_t* g, const conv_t* c, tpr_value_t u,
                              tpr_value_t dz, const int64_t* ksz) {
  const tpr_type_t* ut = tpr_value_type(g, u);
  const tpr_type_t* zt = tpr_value_type(g, dz);
  int ns = c->ns;
  int64_t perm[TPR_MAX_RANK] = {1, 0, 2, 3, 4, 5, 6, 7};
  tpr_value_t lhs = tpr_transpose(g, u, perm);   // [Cu, N, s...]
  tpr_value_t rhs = tpr_transpose(g, dz, perm);  // [Cz, N, o...]
  int64_t lo[3], hi[3];
  for (int i = 0; i < ns; i++) {
    lo[i] = c->pad[i];
    hi[i] = (ksz[i] - 1) * c->dil[i] + (zt->dims[2 + i] - 1) * c->stride[i] +
            1 - ut->dims[2 + i] - c->pad[i];
  }
  // [Cu/g, Cz, k...] -> [Cz, Cu/g, k...]
  tpr_value_t r = tpr_convolution(g, lhs, rhs, ns, c->dil, lo, hi, NULL,
                                  c->stride, 1, c->groups, ut->dtype);
  return tpr_transpose(g, r, perm);
}

static tpr_value_t add_bias(tpr_graph_t* g, tpr_value_t y, tpr_value_t b) {
  const tpr_type_t* yt = tpr_value_type(g, y);
  int64_t one = 1;
  b = tpr_broadcast_in_dim(g, lw_cast(g, b, yt->dtype), yt->rank, yt->dims, &one);
  return lw_add(g, y, b);
}

// convolution / _convolution(input, weight, bias?, stride, padding,
// dilation, transposed, output_padding, groups, ...)
static tpr_status_t lower_convolution(lw_ctx_t* ctx) {
  const tpr_type_t* xt = lw_arg_type(ctx, 0);
  const tpr_type_t* wt = lw_arg_type(ctx, 1);
  const tpr_type_t* out = &ctx->out_types[0];
  conv_t c;
  if (!xt || !wt)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs input and weight tensors");
  TPR_RETURN_IF_ERROR(conv_params(ctx, 3, wt, &c));
  if (xt->rank != c.ns + 2 || out->rank != c.ns + 2)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a batched input");
  tpr_dtype_t d;
  TPR_RETURN_IF_ERROR(conv_dtype(ctx, out->dtype, &d));
  tpr_graph_t* g = G;
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), d);
  tpr_value_t w = lw_cast(g, lw_value(ctx, 1), d);
  tpr_value_t y = c.transposed ? conv_transposed(g, &c, x, w, out->dims + 2)
                               : conv_plain(g, &c, x, w);
  if (lw_is_tensor(ctx, 2)) y = add_bias(g, y, lw_value(ctx, 2));
  return lw_ret(ctx, y);
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride,
// padding, dilation, transposed, output_padding, groups, output_mask)
//   -> (grad_input, grad_weight, grad_bias); masked-off results are zeros.
static tpr_status_t lower_convolution_backward(lw_ctx_t* ctx) {
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  const tpr_type_t* xt = lw_arg_type(ctx, 1);
  const tpr_type_t* wt = lw_arg_type(ctx, 2);
  if (!gt || !xt || !wt)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs grad_output, input and weight tensors");
  conv_t c;
  TPR_RETURN_IF_ERROR(conv_params(ctx, 4, wt, &c));
  if (xt->rank != c.ns + 2 || gt->rank != c.ns + 2)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a batched input");
  tpr_dtype_t d;
  TPR_RETURN_IF_ERROR(conv_dtype(ctx, xt->dtype, &d));
  const tpr_arg_t* mask = lw_arg(ctx, 10);
  bool want[3] = {true, true, true};
  if (mask->kind == TPR_ARG_BOOL_LIST)
    for (int i = 0; i < 3 && i < mask->count; i++) want[i] = mask->bools[i];
  tpr_graph_t* g = G;
  tpr_value_t go = lw_cast(g, lw_value(ctx, 0), d);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 1), d);
  tpr_value_t w = lw_cast(g, lw_value(ctx, 2), d);
  for (int i = 0, slot = 0; i < 3; i++) {
    // Masked-off results are absent (see lower.h), or zeros if PyTorch
    // asked for all three.
    bool all = ctx->num_outs == 3;
    if (!want[i] && !all) continue;
    int o = all ? i : slot++;
    if (o >= ctx->num_outs) break;
    const tpr_type_t* ot = &ctx->out_types[o];
    tpr_value_t r;
    if (!want[i]) {
      r = lw_full(g, 0, ot->dtype, ot);
    } else if (i == 0) {
      r = c.transposed ? conv_plain(g, &c, go, w)
                       : conv_transposed(g, &c, go, w, xt->dims + 2);
      // An output_padding >= stride (allowed when < dilation) leaves rows
      // that no input position reached: crop them.
      int64_t zero[TPR_MAX_RANK] = {0};
      r = tpr_slice(g, r, zero, xt->dims, NULL);
    } else if (i == 1) {
      r = c.transposed ? conv_wgrad(g, &c, go, x, wt->dims + 2)
                       : conv_wgrad(g, &c, x, go, wt->dims + 2);
    } else {
      int64_t dims[TPR_MAX_RANK], n = 0;
      for (int k = 0; k < gt->rank; k++)
        if (k != 1) dims[n++] = k;
      r = tpr_reduce(g, go, TPR_REDUCE_SUM, dims, (int)n);
    }
    lw_set(ctx, o, r);
  }
  return lw_done(ctx);
}

LW_DEFINE_TABLE(conv,
    LW_RULE("convolution", lower_convolution),
    LW_RULE("convolution.out", lower_convolution),
    LW_RULE("_convolution", lower_convolution),
    LW_RULE("_convolution.out", lower_convolution),
    LW_RULE("convolution_backward", lower_convolution_backward),
    LW_RULE("convolution_backward.out", lower_convolution_backward),
);
