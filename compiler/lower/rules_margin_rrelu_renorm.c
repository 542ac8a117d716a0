// Margin losses with their backward, rrelu_with_noise and
// embedding_renorm_, as PyTorch's CPU kernels compute them
// (aten/src/ATen/native/LossMulti*.cpp, Activation.cpp, Embedding.cpp). Losses: one row per sample, input [N, C] or [C]. Reductions: 0 none, 1 mean, 2 sum. Targets are not
// bounds-checked on the device (as the other index ops in strict eager):
// out-of-range targets are clamped into range.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

enum { RED_NONE = 0, RED_MEAN = 1 };

typedef struct {
  int64_t n, c;
  tpr_dtype_t cd;   // compute dtype
  tpr_value_t x;    // [N, C] in cd
  tpr_value_t col;  // s64 [N, C] column index
} rows_t;

// Input |i| as [N, C] rows in the opmath dtype of |dtype| (a 0-d input is
// one sample of one class).
static tpr_status_t load_rows(lw_ctx_t* ctx, int i, tpr_dtype_t dtype,
                              rows_t* r) {
  const tpr_type_t* t = lw_arg_type(ctx, i);
  if (!t || t->rank > 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "input must be 0-d, 1-d or 2-d");
  r->cd = lw_opmath(dtype);
  if (!tpr_dtype_is_float(r->cd))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(dtype));
  r->n = t->rank == 2 ? t->dims[0] : 1;
  r->c = t->rank ? t->dims[t->rank - 1] : 1;
  if (r->c < 1 && r->n > 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "input has no classes");
  int64_t dims[2] = {r->n, r->c};
  r->x = tpr_reshape(G, lw_cast(G, lw_value(ctx, i), r->cd), 2, dims);
  r->col = tpr_iota(G, (tpr_type_t){TPR_DTYPE_S64, 2, {r->n, r->c}}, 1);
  return tpr_ok_status();
}

// A [N] or [N, C] s64 target, clamped to [0, C-1] where |clamp|.
static tpr_value_t load_target(lw_ctx_t* ctx, int i, const rows_t* r, int rank,
                               bool clamp) {
  int64_t dims[2] = {r->n, r->c};
  tpr_value_t t = tpr_reshape(G, lw_cast(G, lw_value(ctx, i), TPR_DTYPE_S64),
                              rank, dims);
  if (!clamp) return t;
  return lw_min(G, lw_max(G, t, lw_k(G, t, 0)), lw_k(G, t, (double)(r->c - 1)));
}

// The upstream gradient as [N, C] (per row for reduction none), with the
// mean's 1/N folded in, times |scale|.
static tpr_value_t grad_rows(lw_ctx_t* ctx, int i, const rows_t* r,
                             int64_t red, double scale) {
  tpr_value_t go = lw_cast(G, lw_value(ctx, i), r->cd);
  int64_t dims[2] = {r->n, r->c}, bd = 0;
  if (red == RED_NONE && tpr_type_numel(lw_type(ctx, go)) == r->n && r->n != 1) {
    go = tpr_reshape(G, go, 1, &r->n);
    go = tpr_broadcast_in_dim(G, go, 2, dims, &bd);
  } else {
    go = tpr_reshape(G, go, 0, NULL);
    go = tpr_broadcast_in_dim(G, go, 2, dims, NULL);
  }
  if (red == RED_MEAN) scale /= (double)(r->n ? r->n : 1);
  return lw_mul(G, go, lw_k(G, go, scale));
}

static tpr_value_t row_sum(tpr_graph_t* g, tpr_value_t v, int64_t dim) {
  return tpr_reduce(g, v, TPR_REDUCE_SUM, &dim, 1);
}

//===--- multi_margin_loss ------------------------------------------------===//

typedef struct {
  rows_t r;
  tpr_value_t z;      // margin - x[y] + x  [N, C]
  tpr_value_t act;    // z > 0 and column != y
  tpr_value_t p1;     // rank-0: p == 1 (else p == 2)
  tpr_value_t w;      // weight[y] broadcast [N, C], or NONE
  tpr_value_t is_y;   // column == y
} mm_t;

// Arguments from |a|: self, target, p, margin, weight.
static tpr_status_t mm_setup(lw_ctx_t* ctx, int a, mm_t* s) {
  const tpr_type_t* xt = lw_arg_type(ctx, a);
  if (!xt || !lw_is_tensor(ctx, a + 1) || !lw_is_tensor(ctx, a + 2) ||
      !lw_is_tensor(ctx, a + 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, target, p and margin");
  TPR_RETURN_IF_ERROR(load_rows(ctx, a, xt->dtype, &s->r));
  rows_t* r = &s->r;
  int64_t dims[2] = {r->n, r->c}, bd = 0;
  tpr_value_t y = load_target(ctx, a + 1, r, 1, true);
  tpr_value_t y2 = tpr_broadcast_in_dim(G, y, 2, dims, &bd);
  s->is_y = lw_cmp(G, TPR_CMP_EQ, r->col, y2);
  tpr_value_t xy = tpr_gather_along(G, r->x, 1, tpr_reshape(G, y, 2, (int64_t[]){r->n, 1}));
  xy = tpr_broadcast_in_dim(G, tpr_reshape(G, xy, 1, &r->n), 2, dims, &bd);
  tpr_value_t margin = lw_splat(G, lw_value(ctx, a + 3), r->x);
  s->z = lw_add(G, lw_sub(G, margin, xy), r->x);
  s->act = tpr_binary(G, TPR_BINARY_AND, lw_cmpk(G, TPR_CMP_GT, s->z, 0),
                      lw_un(G, TPR_UNARY_NOT, s->is_y));
  tpr_value_t p = lw_cast(G, lw_value(ctx, a + 2), r->cd);
  s->p1 = lw_cmpk(G, TPR_CMP_EQ, p, 1);
  s->w = TPR_VALUE_NONE;
  if (lw_is_tensor(ctx, a + 4)) {
    tpr_value_t w = lw_cast(G, lw_value(ctx, a + 4), r->cd);
    s->w = tpr_broadcast_in_dim(G, tpr_take_1d(G, w, y), 2, dims, &bd);
  }
  return tpr_ok_status();
}

// multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1)
static tpr_status_t lower_multi_margin_loss(lw_ctx_t* ctx) {
  mm_t s;
  TPR_RETURN_IF_ERROR(mm_setup(ctx, 0, &s));
  tpr_graph_t* g = G;
  tpr_value_t h = lw_sel(g, s.p1, s.z, lw_mul(g, s.z, s.z));
  h = lw_sel(g, s.act, h, lw_k(g, h, 0));
  if (s.w != TPR_VALUE_NONE) h = lw_mul(g, h, s.w);
  tpr_value_t loss = row_sum(g, h, 1);
  loss = lw_div(g, loss, lw_k(g, loss, (double)s.r.c));
  return lw_ret(ctx, lw_loss_reduction(g, loss, lw_int(ctx, 5, RED_MEAN)));
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight,
// reduction)
static tpr_status_t lower_multi_margin_loss_backward(lw_ctx_t* ctx) {
  mm_t s;
  TPR_RETURN_IF_ERROR(mm_setup(ctx, 1, &s));
  tpr_graph_t* g = G;
  const rows_t* r = &s.r;
  int64_t dims[2] = {r->n, r->c}, bd = 0;
  tpr_value_t go = grad_rows(ctx, 0, r, lw_int(ctx, 6, RED_MEAN), 1.0 / (double)r->c);
  tpr_value_t d = lw_sel(g, s.p1, lw_k(g, s.z, 1), lw_mul(g, s.z, lw_k(g, s.z, 2)));
  d = lw_sel(g, s.act, d, lw_k(g, d, 0));
  if (s.w != TPR_VALUE_NONE) d = lw_mul(g, d, s.w);
  tpr_value_t tot = tpr_broadcast_in_dim(g, row_sum(g, d, 1), 2, dims, &bd);
  d = lw_sel(g, s.is_y, lw_un(g, TPR_UNARY_NEG, tot), d);
  return lw_ret(ctx, lw_mul(g, d, go));
}

//===--- multilabel_margin_loss --------------------------------------------===//

typedef struct {
  rows_t r;
  tpr_value_t is_target;  // bool [N, C]
  tpr_value_t act;        // bool [N, T, C]: valid target t, non-target j, z > 0
  tpr_value_t z;          // 1 - x[y_t] + x[j]  [N, T, C]
  tpr_value_t onehot;     // bool [N, T, C]: valid target t is class c
} ml_t;

// self at |a|, target at a+1. Targets end at the first negative entry.
static tpr_status_t ml_setup(lw_ctx_t* ctx, int a, ml_t* s) {
  const tpr_type_t* xt = lw_arg_type(ctx, a);
  const tpr_type_t* tt = lw_arg_type(ctx, a + 1);
  if (!xt || !tt || xt->rank != tt->rank ||
      memcmp(xt->dims, tt->dims, (size_t)xt->rank * sizeof(int64_t)))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "target must have the input's shape");
  TPR_RETURN_IF_ERROR(load_rows(ctx, a, xt->dtype, &s->r));
  rows_t* r = &s->r;
  tpr_graph_t* g = G;
  int64_t n = r->n, c = r->c;
  tpr_value_t raw = load_target(ctx, a + 1, r, 2, false);
  tpr_value_t ended = tpr_scan(g, lw_cast(g, lw_cmpk(g, TPR_CMP_LT, raw, 0), TPR_DTYPE_S32),
                               1, TPR_SCAN_MAX, false);
  tpr_value_t valid = lw_cmpk(g, TPR_CMP_EQ, ended, 0);  // [N, T]
  tpr_value_t y = lw_min(g, lw_max(g, raw, lw_k(g, raw, 0)), lw_k(g, raw, (double)(c - 1)));
  int64_t ntc[3] = {n, c, c};
  static const int64_t kNT[2] = {0, 1}, kNC[2] = {0, 2};
  tpr_value_t cls = tpr_iota(g, (tpr_type_t){TPR_DTYPE_S64, 3, {n, c, c}}, 2);
  s->onehot = tpr_binary(
      g, TPR_BINARY_AND,
      lw_cmp(g, TPR_CMP_EQ, tpr_broadcast_in_dim(g, y, 3, ntc, kNT), cls),
      tpr_broadcast_in_dim(g, valid, 3, ntc, kNT));
  int64_t d1 = 1;
  s->is_target = tpr_reduce(g, s->onehot, TPR_REDUCE_OR, &d1, 1);
  tpr_value_t xy = tpr_gather_along(g, r->x, 1, y);  // [N, T]
  xy = tpr_broadcast_in_dim(g, xy, 3, ntc, kNT);
  s->z = lw_add(g, lw_sub(g, lw_k(g, xy, 1), xy),
                tpr_broadcast_in_dim(g, r->x, 3, ntc, kNC));
  tpr_value_t keep = tpr_binary(
      g, TPR_BINARY_AND, tpr_broadcast_in_dim(g, valid, 3, ntc, kNT),
      lw_un(g, TPR_UNARY_NOT, tpr_broadcast_in_dim(g, s->is_target, 3, ntc, kNC)));
  s->act = tpr_binary(g, TPR_BINARY_AND, keep, lw_cmpk(g, TPR_CMP_GT, s->z, 0));
  return tpr_ok_status();
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
static tpr_status_t lower_multilabel_margin_loss_forward(lw_ctx_t* ctx) {
  if (ctx->num_outs != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "expects output and is_target");
  ml_t s;
  TPR_RETURN_IF_ERROR(ml_setup(ctx, 0, &s));
  tpr_graph_t* g = G;
  int64_t dd[2] = {1, 2};
  tpr_value_t h = lw_sel(g, s.act, s.z, lw_k(g, s.z, 0));
  tpr_value_t loss = tpr_reduce(g, h, TPR_REDUCE_SUM, dd, 2);
  loss = lw_div(g, loss, lw_k(g, loss, (double)s.r.c));
  lw_set(ctx, 0, lw_loss_reduction(g, loss, lw_int(ctx, 2, RED_MEAN)));
  lw_set(ctx, 1, s.is_target);
  return lw_done(ctx);
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction,
// is_target): +1/C at each active non-target j, -1/C at the target for each
// of its active pairs.
static tpr_status_t lower_multilabel_margin_loss_backward(lw_ctx_t* ctx) {
  ml_t s;
  TPR_RETURN_IF_ERROR(ml_setup(ctx, 1, &s));
  tpr_graph_t* g = G;
  const rows_t* r = &s.r;
  int64_t n = r->n, c = r->c, ntc[3] = {n, c, c};
  static const int64_t kNT[2] = {0, 1};
  tpr_value_t a = lw_cast(g, s.act, r->cd);
  tpr_value_t plus = row_sum(g, a, 1);  // [N, C] over targets t
  tpr_value_t per_t = row_sum(g, a, 2);  // [N, T] active pairs of target t
  tpr_value_t minus = row_sum(
      g, lw_mul(g, lw_cast(g, s.onehot, r->cd), tpr_broadcast_in_dim(g, per_t, 3, ntc, kNT)), 1);
  tpr_value_t go = grad_rows(ctx, 0, r, lw_int(ctx, 3, RED_MEAN), 1.0 / (double)c);
  return lw_ret(ctx, lw_mul(g, lw_sub(g, plus, minus), go));
}

//===--- rrelu_with_noise --------------------------------------------------===//

// rrelu_with_noise(self, noise!, lower, upper, training, generator) and
// rrelu_with_noise_functional (-> output, noise). Training, as the CPU: for
// x <= 0 a slope r ~ U[lower, upper) from the device generator, output x r
// and noise r; elsewhere output x, noise 1. Otherwise leaky_relu with slope
// (lower + upper) / 2 and noise unchanged. Results: output (unless written
// in place as self), then noise.
static tpr_status_t lower_rrelu_with_noise(lw_ctx_t* ctx) {
  const tpr_type_t* xt = lw_arg_type(ctx, 0);
  const tpr_type_t* nt = lw_arg_type(ctx, 1);
  if (!xt || !nt || !lw_is_tensor(ctx, 2) || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self, noise, lower and upper");
  if (!tpr_dtype_is_float(xt->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(xt->dtype));
  if (ctx->num_outs != 2 || tpr_type_numel(nt) != tpr_type_numel(xt))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "expects output and a noise like self");
  tpr_graph_t* g = G;
  tpr_dtype_t cd = lw_opmath(xt->dtype);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), cd);
  tpr_value_t lo = lw_splat(g, lw_value(ctx, 2), x);
  tpr_value_t hi = lw_splat(g, lw_value(ctx, 3), x);
  tpr_value_t neg = lw_cmpk(g, TPR_CMP_LE, x, 0);
  tpr_value_t out, noise;
  if (lw_bool(ctx, 4, false)) {
    tpr_value_t st = lw_generator(ctx);
    if (st == TPR_VALUE_NONE)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs the generator state");
    tpr_dtype_t acc;
    tpr_value_t u = lw_cast(g, lw_uniform01(ctx, st, xt, xt->dtype, &acc), cd);
    tpr_value_t r = lw_add(g, lw_mul(g, u, lw_sub(g, hi, lo)), lo);
    out = lw_sel(g, neg, lw_mul(g, x, r), x);
    noise = lw_sel(g, neg, r, lw_k(g, r, 1));
  } else {
    tpr_value_t slope = lw_mul(g, lw_add(g, lo, hi), lw_k(g, lo, 0.5));
    out = lw_sel(g, lw_cmpk(g, TPR_CMP_GT, x, 0), x, lw_mul(g, x, slope));
    noise = lw_value(ctx, 1);
  }
  lw_set(ctx, 0, out);
  lw_set(ctx, 1, noise);
  return lw_done(ctx);
}

//===--- embedding_renorm_ -------------------------------------------------===//

// p-norms of the rows of |x| [V, D] (at::norm's cases), as [V].
static tpr_value_t row_norms(tpr_graph_t* g, tpr_value_t x, double p) {
  int64_t d1 = 1;
  tpr_value_t a = lw_un(g, TPR_UNARY_ABS, x);
  if (isinf(p))
    return tpr_reduce(g, a, p > 0 ? TPR_REDUCE_MAX : TPR_REDUCE_MIN, &d1, 1);
  if (p == 0) return row_sum(g, lw_cast(g, lw_nonzero(g, a), tpr_value_type(g, x)->dtype), 1);
  if (p == 1) return row_sum(g, a, 1);
  if (p == 2) return lw_un(g, TPR_UNARY_SQRT, row_sum(g, lw_mul(g, a, a), 1));
  tpr_value_t s = row_sum(g, tpr_binary(g, TPR_BINARY_POW, a, lw_k(g, a, p)), 1);
  return tpr_binary(g, TPR_BINARY_POW, s, lw_k(g, s, 1.0 / p));
}

// embedding_renorm_(self!, indices, max_norm, norm_type): every row named
// in |indices| whose norm exceeds max_norm is scaled by
// max_norm / (norm + 1e-7), the scale computed in double and applied in
// the row's dtype, as on the CPU.
static tpr_status_t lower_embedding_renorm(lw_ctx_t* ctx) {
  const tpr_type_t* wt = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, 1);
  if (!wt || !it || wt->rank != 2 || !lw_is_int(it->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a 2-d self and integer indices");
  if (!tpr_dtype_is_float(wt->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(wt->dtype));
  tpr_graph_t* g = G;
  int64_t v = wt->dims[0], k = tpr_type_numel(it);
  double max_norm = lw_double(ctx, 2, 0), p = lw_double(ctx, 3, 2);
  tpr_dtype_t cd = lw_opmath(wt->dtype);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), cd);
  tpr_value_t idx = tpr_reshape(g, lw_cast(g, lw_value(ctx, 1), TPR_DTYPE_S64), 1, &k);
  int64_t vk[2] = {v, k}, d0 = 0, d1 = 1;
  tpr_value_t rows = tpr_iota(g, (tpr_type_t){TPR_DTYPE_S64, 2, {v, k}}, 0);
  tpr_value_t named = tpr_reduce(
      g, lw_cmp(g, TPR_CMP_EQ, rows, tpr_broadcast_in_dim(g, idx, 2, vk, &d1)),
      TPR_REDUCE_OR, &d1, 1);
  tpr_value_t norm = lw_cast(g, row_norms(g, x, p), TPR_DTYPE_F64);
  tpr_value_t scale = lw_div(g, lw_k(g, norm, max_norm), lw_add(g, norm, lw_k(g, norm, 1e-7)));
  tpr_value_t apply = tpr_binary(g, TPR_BINARY_AND, named,
                                 lw_cmpk(g, TPR_CMP_GT, norm, max_norm));
  scale = lw_cast(g, lw_sel(g, apply, scale, lw_k(g, scale, 1)), wt->dtype);
  tpr_value_t w = lw_value(ctx, 0);
  tpr_value_t out = lw_mul(g, w, tpr_broadcast_in_dim(g, scale, 2, wt->dims, &d0));
  return lw_ret(ctx, out);
}

//===--- grid_sampler_3d ---------------------------------------------------===//
//
// input [N,C,D,H,W] sampled at grid [N,Do,Ho,Wo,3] (x -> W, y -> H, z -> D)
// with PyTorch's scalar CPU kernel (GridSampler.h): its clip sends NaN to
// the far edge (std::min/std::max), its reflection counts flips in an int
// (a count past INT_MAX, undefined behaviour there, is read as even, what
// x86 gives in most cases), and a corner outside the input adds nothing
// whatever its weight. Bilinear (trilinear) or nearest.

typedef struct {
  lw_ctx_t* ctx;
  tpr_value_t x;  // [N, C, D*H*W] in the compute dtype
  int64_t n, c, size[3], l;  // size: W, H, D
  int pad;
  bool align;
  int mode;             // 0 trilinear, 1 nearest
  bool empty;           // no element to compute
  tpr_value_t gxyz[3];  // the grid's x, y, z [N, L]
} gs3_t;

static tpr_value_t gs3_clip(tpr_graph_t* g, tpr_value_t v, int64_t size) {
  tpr_value_t hi = lw_k(g, v, (double)(size - 1));
  return lw_sel(g, lw_isnan(g, v), hi, lw_min(g, lw_max(g, v, lw_k(g, v, 0)), hi));
}

// The reflected coordinate; with |sign|, whether its derivative is -1 (the
// side of the first reflection and the count of flips disagree).
static tpr_value_t gs3_reflect(tpr_graph_t* g, tpr_value_t v, int64_t twice_low,
                               int64_t twice_high, tpr_value_t* sign) {
  if (twice_low == twice_high) return lw_k(g, v, 0);
  tpr_value_t lo = lw_k(g, v, (double)twice_low / 2);
  tpr_value_t span = lw_k(g, v, (double)(twice_high - twice_low) / 2);
  tpr_value_t in = lw_sub(g, v, lo);
  tpr_value_t a = lw_un(g, TPR_UNARY_ABS, in);
  tpr_value_t extra = tpr_binary(g, TPR_BINARY_REM, a, span);
  tpr_value_t flips = lw_un(g, TPR_UNARY_FLOOR, lw_div(g, a, span));
  tpr_value_t half = lw_mul(g, flips, lw_k(g, flips, 0.5));
  tpr_value_t odd = tpr_binary(
      g, TPR_BINARY_AND, lw_cmp(g, TPR_CMP_NE, lw_un(g, TPR_UNARY_FLOOR, half), half),
      lw_cmpk(g, TPR_CMP_LT, flips, 2147483648.0));
  if (sign) *sign = tpr_binary(g, TPR_BINARY_XOR, odd, lw_cmpk(g, TPR_CMP_LT, in, 0));
  return lw_add(g, lw_sel(g, odd, lw_sub(g, span, extra), extra), lo);
}

// grid_sampler_unnormalize along axis |k|: [-1, 1] -> voxel coordinates;
// with |scale|, their derivative (a constant).
static tpr_value_t gs3_unnormalize(const gs3_t* s, tpr_value_t v, int k, tpr_value_t* scale) {
  tpr_graph_t* g = s->ctx->graph;
  const int64_t size = s->size[k];
  tpr_value_t one = lw_k(g, v, 1);
  if (scale) *scale = lw_k(g, v, s->align ? (double)(size - 1) / 2 : (double)size / 2);
  if (s->align)
    return lw_mul(g, lw_div(g, lw_add(g, v, one), lw_k(g, v, 2)),
                  lw_k(g, v, (double)(size - 1)));
  return lw_div(g, lw_sub(g, lw_mul(g, lw_add(g, v, one), lw_k(g, v, (double)size)), one),
                lw_k(g, v, 2));
}

// grid_sampler_compute_source_index along axis |k| (0: W, 1: H, 2: D).
static tpr_value_t gs3_source(const gs3_t* s, tpr_value_t v, int k) {
  tpr_graph_t* g = s->ctx->graph;
  int64_t size = s->size[k];
  v = gs3_unnormalize(s, v, k, NULL);
  if (s->pad == 1) return gs3_clip(g, v, size);
  if (s->pad == 2) {
    v = s->align ? gs3_reflect(g, v, 0, 2 * (size - 1), NULL)
                 : gs3_reflect(g, v, -1, 2 * size - 1, NULL);
    return gs3_clip(g, v, size);
  }
  return v;
}

static tpr_value_t gs3_bcast(tpr_graph_t* g, const gs3_t* s, tpr_value_t v) {
  int64_t dims[3] = {s->n, s->c, s->l}, bd[2] = {0, 2};
  return tpr_broadcast_in_dim(g, v, 3, dims, bd);
}

// Whether integer-valued corner (ix, iy, iz) [N, L] lies inside the input;
// *flat gets its flat index (clamped inside).
static tpr_value_t gs3_loc(const gs3_t* s, const tpr_value_t* at, tpr_value_t* flat) {
  tpr_graph_t* g = s->ctx->graph;
  tpr_value_t in = TPR_VALUE_NONE;
  *flat = TPR_VALUE_NONE;
  for (int k = 2; k >= 0; k--) {
    tpr_value_t ok = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GE, at[k], 0),
                                lw_cmpk(g, TPR_CMP_LE, at[k], (double)(s->size[k] - 1)));
    in = k == 2 ? ok : tpr_binary(g, TPR_BINARY_AND, in, ok);
    tpr_value_t i = lw_cast(g, gs3_clip(g, at[k], s->size[k]), TPR_DTYPE_S64);
    *flat = k == 2 ? i : lw_add(g, lw_mul(g, *flat, lw_k(g, *flat, (double)s->size[k])), i);
  }
  return in;
}

// weight * input at integer-valued corner (ix, iy, iz) [N, L], or 0 outside.
static tpr_value_t gs3_tap(const gs3_t* s, const tpr_value_t* at, tpr_value_t w) {
  tpr_graph_t* g = s->ctx->graph;
  tpr_value_t flat;
  tpr_value_t in = gs3_loc(s, at, &flat);
  tpr_value_t v = tpr_gather_along(g, s->x, 2, gs3_bcast(g, s, flat));
  if (w != TPR_VALUE_NONE) v = lw_mul(g, v, gs3_bcast(g, s, w));
  return lw_sel(g, gs3_bcast(g, s, in), v, lw_k(g, v, 0));
}

// Checks input (argument |ii|) and grid (|ii| + 1), the modes (|ii| + 2,
// + 3, + 4) and fills |s|.
static tpr_status_t gs3_setup(lw_ctx_t* ctx, int ii, gs3_t* s) {
  const tpr_type_t *it = lw_arg_type(ctx, ii), *gt = lw_arg_type(ctx, ii + 1);
  int mode = (int)lw_int(ctx, ii + 2, 0);
  int pad = (int)lw_int(ctx, ii + 3, 0);
  bool shapes = it && gt && it->rank == 5 && gt->rank == 5 &&
                gt->dims[4] == 3 && gt->dims[0] == it->dims[0];
  if (!shapes || mode < 0 || mode > 1 || pad < 0 || pad > 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "expected input [N,C,D,H,W], grid [N,Do,Ho,Wo,3], bilinear "
                   "or nearest interpolation and padding mode 0..2");
  if (!tpr_dtype_is_float(it->dtype) || tpr_dtype_is_complex(it->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(it->dtype));
  *s = (gs3_t){ctx, 0, it->dims[0], it->dims[1], {it->dims[4], it->dims[3], it->dims[2]},
               gt->dims[1] * gt->dims[2] * gt->dims[3], pad, lw_bool(ctx, ii + 4, false),
               mode, false, {0, 0, 0}};
  s->empty = s->n * s->c * s->l == 0;
  if (s->empty) return TPR_OK;
  if (s->size[0] < 1 || s->size[1] < 1 || s->size[2] < 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "empty input");
  tpr_graph_t* g = G;
  tpr_dtype_t cd = lw_opmath(it->dtype);
  s->x = tpr_reshape(g, lw_cast(g, lw_value(ctx, ii), cd), 3,
                     (int64_t[]){s->n, s->c, s->size[0] * s->size[1] * s->size[2]});
  tpr_value_t grid = tpr_reshape(g, lw_cast(g, lw_value(ctx, ii + 1), cd), 3,
                                 (int64_t[]){s->n, s->l, 3});
  for (int k = 0; k < 3; k++) {
    int64_t st[3] = {0, 0, k}, lim[3] = {s->n, s->l, k + 1}, one[3] = {1, 1, 1};
    s->gxyz[k] = tpr_reshape(g, tpr_slice(g, grid, st, lim, one), 2, (int64_t[]){s->n, s->l});
  }
  return TPR_OK;
}

// The trilinear corners of points p[3]: the lower corner and the weights
// toward it and away from it along each axis.
typedef struct {
  tpr_value_t p0[3], f1[3], f0[3];  // floor(p), p - p0, p0 + 1 - p
} gs3_cell_t;

static void gs3_cell(tpr_graph_t* g, const tpr_value_t* p, gs3_cell_t* cell) {
  for (int k = 0; k < 3; k++) {
    cell->p0[k] = lw_un(g, TPR_UNARY_FLOOR, p[k]);
    cell->f1[k] = lw_sub(g, p[k], cell->p0[k]);
    cell->f0[k] = lw_sub(g, lw_add(g, cell->p0[k], lw_k(g, cell->p0[k], 1)), p[k]);
  }
}

// Corner |c| of the cell (bit k steps axis k: x, y, z; the CPU's order tnw,
// tne, tsw, tse, bnw, bne, bsw, bse): its position at[3] and per-axis
// weights wk[3]; returns their product, the corner's weight.
static tpr_value_t gs3_corner(tpr_graph_t* g, const gs3_cell_t* cell, int c, tpr_value_t* at,
                              tpr_value_t* wk) {
  for (int k = 0; k < 3; k++) {
    bool up = (c >> k) & 1;
    at[k] = up ? lw_add(g, cell->p0[k], lw_k(g, cell->p0[k], 1)) : cell->p0[k];
    wk[k] = up ? cell->f1[k] : cell->f0[k];
  }
  return lw_mul(g, lw_mul(g, wk[0], wk[1]), wk[2]);
}

static tpr_status_t lower_grid_sampler_3d(lw_ctx_t* ctx) {
  gs3_t s;
  TPR_RETURN_IF_ERROR(gs3_setup(ctx, 0, &s));
  if (s.empty || tpr_type_numel(OUT) == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_graph_t* g = G;
  tpr_value_t p[3];
  for (int k = 0; k < 3; k++) p[k] = gs3_source(&s, s.gxyz[k], k);
  tpr_value_t out;
  if (s.mode == 1) {
    tpr_value_t at[3];
    for (int k = 0; k < 3; k++) at[k] = lw_un(g, TPR_UNARY_ROUND_NEAREST_EVEN, p[k]);
    out = gs3_tap(&s, at, TPR_VALUE_NONE);
  } else {
    gs3_cell_t cell;
    gs3_cell(g, p, &cell);
    out = TPR_VALUE_NONE;
    for (int c = 0; c < 8; c++) {
      tpr_value_t at[3], wk[3];
      tpr_value_t t = gs3_tap(&s, at, gs3_corner(g, &cell, c, at, wk));
      out = c ? lw_add(g, out, t) : t;
    }
  }
  return lw_ret(ctx, out);  // [N,C,L] -> [N,C,Do,Ho,Wo]
}

// The source coordinate along axis |k| and d coordinate / d grid (*mult),
// as the scalar CPU kernel's grid_sampler_compute_source_index_set_grad:
// clipping gives 0 on and past the borders (NaN passes with its gradient),
// reflection flips the sign when the flips and the side disagree.
static tpr_value_t gs3_source_grad(const gs3_t* s, tpr_value_t v, int k, tpr_value_t* mult) {
  tpr_graph_t* g = s->ctx->graph;
  const int64_t size = s->size[k];
  tpr_value_t x = gs3_unnormalize(s, v, k, mult);
  if (s->pad == 0) return x;
  if (s->pad == 2) {
    const int64_t lo2 = s->align ? 0 : -1, hi2 = s->align ? 2 * (size - 1) : 2 * size - 1;
    if (lo2 == hi2) {
      *mult = lw_k(g, x, 0);
      return lw_k(g, x, 0);
    }
    tpr_value_t flip;
    x = gs3_reflect(g, x, lo2, hi2, &flip);
    *mult = lw_mul(g, *mult, lw_sel(g, flip, lw_k(g, x, -1), lw_k(g, x, 1)));
  }
  tpr_value_t low = lw_cmpk(g, TPR_CMP_LE, x, 0);
  tpr_value_t high = lw_cmpk(g, TPR_CMP_GE, x, (double)(size - 1));
  *mult = lw_sel(g, tpr_binary(g, TPR_BINARY_OR, low, high), lw_k(g, x, 0), *mult);
  return lw_sel(g, low, lw_k(g, x, 0), lw_sel(g, high, lw_k(g, x, (double)(size - 1)), x));
}

// grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode,
// padding_mode, align_corners, output_mask) -> (grad_input, grad_grid), for
// trilinear and nearest, as the CPU kernel: grad_input adds each corner's
// share of the output gradient (scatter-add); grad_grid is each corner's
// value times its weight's derivative, summed over corners and channels (0
// for nearest).
static tpr_status_t lower_grid_sampler_3d_backward(lw_ctx_t* ctx) {
  gs3_t s;
  TPR_RETURN_IF_ERROR(gs3_setup(ctx, 1, &s));
  bool want[2];
  TPR_RETURN_IF_ERROR(lw_output_mask(ctx, 6, 2, want));
  if (s.empty) return lw_ret_zeros(ctx);
  tpr_graph_t* g = G;
  const tpr_dtype_t cd = tpr_value_type(g, s.x)->dtype;
  int64_t ncl[3] = {s.n, s.c, s.l}, d1 = 1;
  tpr_value_t go = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), cd), 3, ncl);
  tpr_value_t p[3], mult[3], gk[3];
  for (int k = 0; k < 3; k++) p[k] = gs3_source_grad(&s, s.gxyz[k], k, &mult[k]);
  tpr_type_t gin_t = {cd, 3, {s.n, s.c, s.size[0] * s.size[1] * s.size[2]}};
  tpr_value_t gin = lw_full(g, 0, cd, &gin_t);
  if (s.mode == 1) {
    tpr_value_t at[3], flat;
    for (int k = 0; k < 3; k++) {
      at[k] = lw_un(g, TPR_UNARY_ROUND_NEAREST_EVEN, p[k]);
      gk[k] = lw_k(g, p[k], 0);
    }
    tpr_value_t in = gs3_bcast(g, &s, gs3_loc(&s, at, &flat));
    gin = tpr_scatter_along(g, gin, 2, gs3_bcast(g, &s, flat),
                            lw_sel(g, in, go, lw_k(g, go, 0)), true);
  } else {
    gs3_cell_t cell;
    gs3_cell(g, p, &cell);
    for (int k = 0; k < 3; k++) gk[k] = TPR_VALUE_NONE;
    for (int c = 0; c < 8; c++) {
      tpr_value_t at[3], wk[3], flat;
      tpr_value_t w = gs3_corner(g, &cell, c, at, wk);
      tpr_value_t in = gs3_bcast(g, &s, gs3_loc(&s, at, &flat));
      tpr_value_t share = lw_mul(g, go, gs3_bcast(g, &s, w));
      gin = tpr_scatter_along(g, gin, 2, gs3_bcast(g, &s, flat),
                              lw_sel(g, in, share, lw_k(g, share, 0)), true);
      // go * the corner's value, summed over channels: [N, L]
      tpr_value_t gv = tpr_reduce(g, lw_mul(g, go, gs3_tap(&s, at, TPR_VALUE_NONE)),
                                  TPR_REDUCE_SUM, &d1, 1);
      for (int k = 0; k < 3; k++) {
        tpr_value_t dw = lw_mul(g, wk[(k + 1) % 3], wk[(k + 2) % 3]);
        if (!((c >> k) & 1)) dw = lw_un(g, TPR_UNARY_NEG, dw);
        tpr_value_t t = lw_mul(g, gv, dw);
        gk[k] = gk[k] == TPR_VALUE_NONE ? t : lw_add(g, gk[k], t);
      }
    }
  }
  int slot = 0;
  if (want[0]) {
    lw_set(ctx, slot, lw_reshape_to(g, lw_cast(g, gin, ctx->out_types[slot].dtype),
                                    &ctx->out_types[slot]));
    slot++;
  }
  if (want[1]) {
    int64_t nl1[3] = {s.n, s.l, 1};
    tpr_value_t parts[3];
    for (int k = 0; k < 3; k++) parts[k] = tpr_reshape(g, lw_mul(g, gk[k], mult[k]), 3, nl1);
    tpr_value_t gg = lw_cast(g, tpr_concatenate(g, parts, 3, 2), ctx->out_types[slot].dtype);
    lw_set(ctx, slot, lw_reshape_to(g, gg, &ctx->out_types[slot]));  // [N,Do,Ho,Wo,3]
  }
  return lw_done(ctx);
}

//===--- _cdist_backward, _pdist_backward ----------------------------------===//

// d dist / d x1 for diff = x1 - x2 at distance |dist| (all [..., P, R, M]),
// by the CPU kernel's cases (Distance.cpp): p = 0 none; p = 1 sign; p < 2
// sign |diff|^(p-1) / dist^(p-1) (0 where dist = 0, or diff = 0 for p < 1);
// p = 2 diff / dist; p > 2 diff |diff|^(p-2) / dist^(p-1); inf: sign where
// |diff| attains dist. Zero distance gives 0 except for p = 1 and inf.
static tpr_value_t dist_grad(tpr_graph_t* g, tpr_value_t diff, tpr_value_t dist,
                             double p) {
  tpr_value_t zero = lw_k(g, diff, 0);
  tpr_value_t a = lw_un(g, TPR_UNARY_ABS, diff), sgn = lw_un(g, TPR_UNARY_SIGN, diff);
  if (p == 0) return zero;
  if (p == 1) return sgn;
  if (isinf(p)) return lw_sel(g, lw_cmp(g, TPR_CMP_EQ, a, dist), sgn, zero);
  tpr_value_t r;
  if (p == 2) {
    r = lw_div(g, diff, dist);
  } else {
    tpr_value_t den = tpr_binary(g, TPR_BINARY_POW, dist, lw_k(g, dist, p - 1));
    tpr_value_t num = p < 2 ? lw_mul(g, sgn, tpr_binary(g, TPR_BINARY_POW, a, lw_k(g, a, p - 1)))
                            : lw_mul(g, diff, tpr_binary(g, TPR_BINARY_POW, a, lw_k(g, a, p - 2)));
    r = lw_div(g, num, den);
  }
  tpr_value_t z = lw_cmpk(g, TPR_CMP_EQ, dist, 0);
  if (p < 1) z = tpr_binary(g, TPR_BINARY_OR, z, lw_cmpk(g, TPR_CMP_EQ, diff, 0));
  return lw_sel(g, z, zero, r);
}

// sum_r grad[..., i, r] * dist_grad(x1[..., i, :] - x2[..., r, :]) for x1
// [..., P, M], x2 [..., R, M], grad and dist [..., P, R] (all one batch).
static tpr_value_t cdist_grad_rows(tpr_graph_t* g, tpr_value_t x1, tpr_value_t x2,
                                   tpr_value_t grad, tpr_value_t dist, double p) {
  const tpr_type_t* t1 = tpr_value_type(g, x1);
  int nb = t1->rank - 2;
  int64_t P = t1->dims[nb], M = t1->dims[nb + 1];
  int64_t R = tpr_value_type(g, x2)->dims[nb];
  int64_t full[TPR_MAX_RANK], m1[TPR_MAX_RANK], m2[TPR_MAX_RANK], mg[TPR_MAX_RANK];
  for (int i = 0; i < nb; i++) full[i] = m1[i] = m2[i] = mg[i] = i;
  full[nb] = P, full[nb + 1] = R, full[nb + 2] = M;
  for (int i = 0; i < nb; i++) full[i] = t1->dims[i];
  m1[nb] = nb, m1[nb + 1] = nb + 2;      // x1: P, M
  m2[nb] = nb + 1, m2[nb + 1] = nb + 2;  // x2: R, M
  mg[nb] = nb, mg[nb + 1] = nb + 1;      // grad, dist: P, R
  int r = nb + 3;
  tpr_value_t diff = lw_sub(g, tpr_broadcast_in_dim(g, x1, r, full, m1),
                            tpr_broadcast_in_dim(g, x2, r, full, m2));
  tpr_value_t d = dist_grad(g, diff, tpr_broadcast_in_dim(g, dist, r, full, mg), p);
  d = lw_mul(g, d, tpr_broadcast_in_dim(g, grad, r, full, mg));
  return row_sum(g, d, nb + 1);
}

// _cdist_backward(grad, x1, x2, p, cdist): the gradient for x1, in x1's
// batch-expanded shape (autograd reduces broadcasting).
static tpr_status_t lower_cdist_backward(lw_ctx_t* ctx) {
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  const tpr_type_t* t1 = lw_arg_type(ctx, 1);
  const tpr_type_t* t2 = lw_arg_type(ctx, 2);
  if (!gt || !t1 || !t2 || !lw_is_tensor(ctx, 4) || OUT->rank < 2 || gt->rank != OUT->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad, x1, x2 and cdist of one batch");
  if (!tpr_dtype_is_float(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(OUT->dtype));
  tpr_graph_t* g = G;
  if (tpr_type_numel(OUT) == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  int nb = OUT->rank - 2;
  tpr_type_t s2 = *OUT;  // x2 in the batch of the result
  s2.dims[nb] = t2->dims[t2->rank - 2];
  s2.dims[nb + 1] = t2->dims[t2->rank - 1];
  tpr_value_t x1 = lw_in(ctx, 1, cd, OUT), x2 = lw_in(ctx, 2, cd, &s2);
  tpr_value_t grad = lw_in(ctx, 0, cd, gt), dist = lw_in(ctx, 4, cd, gt);
  return lw_ret(ctx, cdist_grad_rows(g, x1, x2, grad, dist, lw_double(ctx, 3, 2)));
}

// _pdist_backward(grad, self, p, pdist): pdist lists the pairs i < j of the
// N rows in row-major order. Spread grad and pdist to symmetric [N, N]
// matrices (zero diagonal); each pair then acts on both rows, as in cdist
// of self with itself.
static tpr_status_t lower_pdist_backward(lw_ctx_t* ctx) {
  const tpr_type_t* xt = lw_arg_type(ctx, 1);
  if (!xt || xt->rank != 2 || !lw_is_tensor(ctx, 0) || !lw_is_tensor(ctx, 3))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad, a 2-d self and pdist");
  if (!tpr_dtype_is_float(xt->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(xt->dtype));
  tpr_graph_t* g = G;
  int64_t n = xt->dims[0], k = n * (n - 1) / 2;
  if (tpr_type_numel(OUT) == 0 || k == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_dtype_t cd = lw_opmath(xt->dtype);
  tpr_type_t nn = {TPR_DTYPE_S64, 2, {n, n}};
  tpr_value_t i = tpr_iota(g, nn, 0), j = tpr_iota(g, nn, 1);
  tpr_value_t lo = lw_min(g, i, j), hi = lw_max(g, i, j);
  // pair (lo, hi), lo < hi: k = lo (2n - lo - 1) / 2 + hi - lo - 1
  tpr_value_t pos = lw_add(g, lw_div(g, lw_mul(g, lo, lw_sub(g, lw_k(g, lo, (double)(2 * n - 1)), lo)),
                                     lw_k(g, lo, 2)),
                           lw_sub(g, lw_sub(g, hi, lo), lw_k(g, lo, 1)));
  tpr_value_t off = lw_cmp(g, TPR_CMP_NE, i, j);
  pos = lw_sel(g, off, pos, lw_k(g, pos, 0));
  tpr_value_t gv = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), cd), 1, &k);
  tpr_value_t dv = tpr_reshape(g, lw_cast(g, lw_value(ctx, 3), cd), 1, &k);
  tpr_value_t gm = tpr_take_1d(g, gv, pos), dm = tpr_take_1d(g, dv, pos);
  gm = lw_sel(g, off, gm, lw_k(g, gm, 0));
  dm = lw_sel(g, off, dm, lw_k(g, dm, 0));
  tpr_value_t x = lw_cast(g, lw_value(ctx, 1), cd);
  return lw_ret(ctx, cdist_grad_rows(g, x, x, gm, dm, lw_double(ctx, 2, 2)));
}

//===--- igamma, igammac ---------------------------------------------------===//
//
// Regularized incomplete gamma P(a, x) and Q(a, x) = 1 - P with PyTorch's
// special cases (calc_igamma / calc_igammac in Math.h). Elsewhere the series
// P = x^a e^-x / Gamma(a+1) sum_n x^n / ((a+1)...(a+n)) where x < a + 1, and
// Lentz's continued fraction for Q otherwise, each run in a while loop until
// every element using it has converged (at most IG_MAX_ITER steps). The
// loops compute in float64 whatever the dtype, so float32 results are the
// correctly rounded ones, not those of a float32 recurrence.

enum { IG_MAX_ITER = 20000 };
enum { IG_IT, IG_A, IG_X, IG_USE, IG_S1, IG_S2, IG_S3, IG_COUNT };

// Converged where the last step changed the result by under 2^-53.
static tpr_value_t ig_pending(tpr_graph_t* g, const tpr_value_t* a, tpr_value_t step) {
  tpr_value_t busy = tpr_binary(g, TPR_BINARY_AND, a[IG_USE],
                                lw_cmp(g, TPR_CMP_GT, step, lw_k(g, step, 0x1p-53)));
  tpr_value_t any = lw_reduce_all(g, busy, TPR_REDUCE_OR);
  tpr_value_t more = lw_cmpk(g, TPR_CMP_LT, a[IG_IT], IG_MAX_ITER);
  return tpr_binary(g, TPR_BINARY_AND, any, more);
}

// Series: S1 = term, S2 = sum (relative step |term / sum|).
static void ig_series_cond(tpr_graph_t* g, void* user, const tpr_value_t* a,
                           tpr_value_t* r) {
  tpr_value_t step = lw_un(g, TPR_UNARY_ABS, lw_div(g, a[IG_S1], a[IG_S2]));
  r[0] = ig_pending(g, a, lw_sel(g, lw_isnan(g, step), lw_k(g, step, 0), step));
}

static void ig_series_body(tpr_graph_t* g, void* user, const tpr_value_t* a,
                           tpr_value_t* r) {
  tpr_value_t it = lw_add(g, a[IG_IT], tpr_constant_i64(g, TPR_DTYPE_S64, 1));
  tpr_value_t n = lw_splat(g, it, a[IG_A]);
  tpr_value_t term = lw_mul(g, a[IG_S1], lw_div(g, a[IG_X], lw_add(g, a[IG_A], n)));
  memcpy(r, a, IG_COUNT * sizeof *r);
  r[IG_IT] = it;
  r[IG_S1] = term;
  r[IG_S2] = lw_add(g, a[IG_S2], term);
}

// Continued fraction (modified Lentz): S1 = c, S2 = d, S3 = h; the step is
// |c d - 1|, kept in h's update.
static tpr_value_t ig_tiny(tpr_graph_t* g, tpr_value_t v) {
  tpr_value_t t = lw_k(g, v, 1e-300);
  return lw_sel(g, lw_cmp(g, TPR_CMP_LT, lw_un(g, TPR_UNARY_ABS, v), t), t, v);
}

static void ig_cf_step(tpr_graph_t* g, const tpr_value_t* a, tpr_value_t* c,
                       tpr_value_t* d, tpr_value_t* del, tpr_value_t* it) {
  *it = lw_add(g, a[IG_IT], tpr_constant_i64(g, TPR_DTYPE_S64, 1));
  tpr_value_t i = lw_splat(g, *it, a[IG_A]);
  tpr_value_t an = lw_mul(g, lw_un(g, TPR_UNARY_NEG, i), lw_sub(g, i, a[IG_A]));
  tpr_value_t b = lw_add(g, lw_sub(g, lw_add(g, a[IG_X], lw_k(g, i, 1)), a[IG_A]),
                         lw_add(g, i, i));
  *d = lw_div(g, lw_k(g, b, 1), ig_tiny(g, lw_add(g, lw_mul(g, an, a[IG_S2]), b)));
  *c = ig_tiny(g, lw_add(g, b, lw_div(g, an, a[IG_S1])));
  *del = lw_mul(g, *c, *d);
}

static void ig_cf_cond(tpr_graph_t* g, void* user, const tpr_value_t* a,
                       tpr_value_t* r) {
  tpr_value_t c, d, del, it;
  ig_cf_step(g, a, &c, &d, &del, &it);
  tpr_value_t step = lw_un(g, TPR_UNARY_ABS, lw_sub(g, del, lw_k(g, del, 1)));
  // The first step always runs (iteration 0 has no previous one).
  tpr_value_t first = lw_cmpk(g, TPR_CMP_EQ, a[IG_IT], 0);
  r[0] = tpr_binary(g, TPR_BINARY_OR, first,
                    ig_pending(g, a, lw_sel(g, lw_isnan(g, step), lw_k(g, step, 0), step)));
}

static void ig_cf_body(tpr_graph_t* g, void* user, const tpr_value_t* a,
                       tpr_value_t* r) {
  tpr_value_t c, d, del, it;
  ig_cf_step(g, a, &c, &d, &del, &it);
  memcpy(r, a, IG_COUNT * sizeof *r);
  r[IG_IT] = it;
  r[IG_S1] = c;
  r[IG_S2] = d;
  r[IG_S3] = lw_mul(g, a[IG_S3], del);
}

static tpr_status_t igamma_rule(lw_ctx_t* ctx, bool upper) {
  if (!tpr_dtype_is_float(OUT->dtype) || tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a real floating dtype, got %s",
                   tpr_dtype_name(OUT->dtype));
  tpr_graph_t* g = G;
  const tpr_dtype_t F = TPR_DTYPE_F64;
  tpr_value_t a = lw_in(ctx, 0, F, OUT), x = lw_in(ctx, 1, F, OUT);
  if (tpr_type_numel(OUT) == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_value_t zero = lw_k(g, a, 0), one = lw_k(g, a, 1);
  tpr_value_t series = lw_cmp(g, TPR_CMP_LT, x, lw_add(g, a, one));
  // log(x^a e^-x / Gamma(a)), shared by both branches.
  tpr_value_t logpre = lw_sub(g, lw_sub(g, lw_mul(g, a, lw_un(g, TPR_UNARY_LOG, x)), x),
                              lw_un(g, TPR_UNARY_LGAMMA, a));
  tpr_value_t pre = lw_un(g, TPR_UNARY_EXP, logpre);
  tpr_value_t inv_a = lw_div(g, one, a);
  tpr_value_t s_init[IG_COUNT] = {tpr_constant_i64(g, TPR_DTYPE_S64, 0), a, x, series,
                                  inv_a, inv_a, zero};
  tpr_value_t s_out[IG_COUNT];
  tpr_while(g, IG_COUNT, s_init, ig_series_cond, ig_series_body, NULL, s_out);
  tpr_value_t p_series = lw_mul(g, pre, s_out[IG_S2]);
  // Lentz: b0 = x + 1 - a, c = huge, d = 1 / b0, h = d.
  tpr_value_t b0 = ig_tiny(g, lw_sub(g, lw_add(g, x, one), a));
  tpr_value_t d0 = lw_div(g, one, b0);
  tpr_value_t c_init[IG_COUNT] = {tpr_constant_i64(g, TPR_DTYPE_S64, 0), a, x,
                                  lw_un(g, TPR_UNARY_NOT, series), lw_k(g, a, 1e300), d0, d0};
  tpr_value_t c_out[IG_COUNT];
  tpr_while(g, IG_COUNT, c_init, ig_cf_cond, ig_cf_body, NULL, c_out);
  tpr_value_t q_cf = lw_mul(g, pre, c_out[IG_S3]);
  tpr_value_t r = upper ? lw_sel(g, series, lw_sub(g, one, p_series), q_cf)
                        : lw_sel(g, series, p_series, lw_sub(g, one, q_cf));
  // PyTorch's special cases, last wins.
  tpr_value_t nan = lw_k(g, a, NAN);
  tpr_value_t full = upper ? zero : one, none = upper ? one : zero;
  tpr_value_t xinf = lw_cmpk(g, TPR_CMP_EQ, x, INFINITY);
  tpr_value_t ainf = lw_cmpk(g, TPR_CMP_EQ, a, INFINITY);
  r = lw_sel(g, xinf, full, r);
  r = lw_sel(g, ainf, lw_sel(g, xinf, nan, none), r);
  r = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, x, 0), none, r);
  tpr_value_t a0 = lw_cmpk(g, TPR_CMP_EQ, a, 0);
  r = lw_sel(g, a0, lw_sel(g, lw_cmpk(g, TPR_CMP_GT, x, 0), full, nan), r);
  tpr_value_t neg = tpr_binary(g, TPR_BINARY_OR, lw_cmpk(g, TPR_CMP_LT, x, 0),
                               lw_cmpk(g, TPR_CMP_LT, a, 0));
  neg = tpr_binary(g, TPR_BINARY_OR, neg, tpr_binary(g, TPR_BINARY_OR, lw_isnan(g, a),
                                                     lw_isnan(g, x)));
  return lw_ret(ctx, lw_sel(g, neg, nan, r));
}

static tpr_status_t lower_igamma(lw_ctx_t* ctx) { return igamma_rule(ctx, false); }
static tpr_status_t lower_igammac(lw_ctx_t* ctx) { return igamma_rule(ctx, true); }

//===--- embedding_bag backward --------------------------------------------===//

typedef struct {
  int64_t n, b, d;      // indices, bags (grad rows), embedding dim
  tpr_value_t idx;      // s64 [N]
  tpr_value_t bag;      // s64 [N], clamped into [0, B-1]
  tpr_value_t live;     // bool [N]: in a bag, not padding
} eb_t;

// grad [B, D] at |gi|, indices at |ii|, offset2bag at |oi|.
static tpr_status_t eb_setup(lw_ctx_t* ctx, int gi, int ii, int oi, int64_t pad,
                             eb_t* e) {
  const tpr_type_t* gt = lw_arg_type(ctx, gi);
  const tpr_type_t* it = lw_arg_type(ctx, ii);
  const tpr_type_t* ot = lw_arg_type(ctx, oi);
  if (!gt || !it || !ot || gt->rank != 2 || it->rank != 1 || ot->rank != 1 ||
      ot->dims[0] != it->dims[0])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs grad [B, D], indices [N] and offset2bag [N]");
  if (!tpr_dtype_is_float(gt->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating grad, got %s",
                   tpr_dtype_name(gt->dtype));
  tpr_graph_t* g = G;
  e->n = it->dims[0], e->b = gt->dims[0], e->d = gt->dims[1];
  e->idx = lw_cast(g, lw_value(ctx, ii), TPR_DTYPE_S64);
  tpr_value_t bag = lw_cast(g, lw_value(ctx, oi), TPR_DTYPE_S64);
  e->live = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GE, bag, 0),
                       lw_cmpk(g, TPR_CMP_LT, bag, (double)e->b));
  if (pad >= 0)
    e->live = tpr_binary(g, TPR_BINARY_AND, e->live,
                         lw_cmpk(g, TPR_CMP_NE, e->idx, (double)pad));
  e->bag = lw_min(g, lw_max(g, bag, lw_k(g, bag, 0)), lw_k(g, bag, (double)(e->b - 1)));
  return tpr_ok_status();
}

// The weight gradient [num_weights, D] of sum/mean/max bags. Arguments from
// |gi|: grad, indices, (offsets,) offset2bag, bag_size, maximum_indices,
// num_weights, scale_grad_by_freq, mode, (sparse,) per_sample_weights,
// padding_idx; |has_offsets| says whether the offsets/sparse slots exist.
static tpr_status_t eb_dense_backward(lw_ctx_t* ctx, bool has_offsets) {
  int k = has_offsets ? 1 : 0;
  int i_o2b = 2 + k, i_bs = 3 + k, i_mi = 4 + k, i_sf = 6 + k, i_mode = 7 + k;
  int i_psw = 8 + 2 * k, i_pad = 9 + 2 * k;
  if (has_offsets && lw_bool(ctx, 9, false))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "sparse gradients are not supported");
  int64_t mode = lw_int(ctx, i_mode, 0), pad = lw_int(ctx, i_pad, -1);
  eb_t e;
  TPR_RETURN_IF_ERROR(eb_setup(ctx, 0, 1, i_o2b, pad, &e));
  if (OUT->rank != 2 || OUT->dims[1] != e.d)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad grad_weight shape");
  tpr_graph_t* g = G;
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t grad = lw_cast(g, lw_value(ctx, 0), cd);
  tpr_value_t zeros = lw_full(g, 0, cd, &(tpr_type_t){cd, 2, {OUT->dims[0], e.d}});
  if (e.n == 0 || e.b == 0) return lw_ret(ctx, zeros);
  int64_t nd[2] = {e.n, e.d}, bd[2] = {e.b, e.d}, d0 = 0, d1 = 1;
  tpr_value_t bs = lw_cast(g, lw_value(ctx, i_bs), TPR_DTYPE_S64);
  int64_t nbs = tpr_type_numel(lw_type(ctx, bs));
  if (nbs < e.b) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bag_size is too short");
  bs = tpr_slice(g, bs, &d0, &e.b, &d1);  // the meta kernel may add one entry
  if (mode == 2) {
    // Each nonempty bag's gradient goes to the row that held its maximum.
    tpr_value_t mi = lw_cast(g, lw_value(ctx, i_mi), TPR_DTYPE_S64);
    tpr_value_t full = tpr_broadcast_in_dim(g, lw_cmpk(g, TPR_CMP_GT, bs, 0), 2, bd, &d0);
    tpr_value_t src = lw_sel(g, full, grad, lw_k(g, grad, 0));
    mi = lw_sel(g, full, mi, lw_k(g, mi, 0));
    return lw_ret(ctx, tpr_scatter_along(g, zeros, 0, mi, src, true));
  }
  tpr_value_t scale = lw_full(g, 1, cd, &(tpr_type_t){cd, 1, {e.n}});
  // Divided by each index's own frequency, as documented and on CUDA (the
  // CPU kernel reads the count of another index there).
  if (lw_bool(ctx, i_sf, false)) {
    int64_t nn[2] = {e.n, e.n};
    tpr_value_t eq = lw_cmp(g, TPR_CMP_EQ, tpr_broadcast_in_dim(g, e.idx, 2, nn, &d0),
                            tpr_broadcast_in_dim(g, e.idx, 2, nn, &d1));
    scale = lw_div(g, scale, row_sum(g, lw_cast(g, eq, cd), 1));
  }
  if (mode == 1) {
    tpr_value_t cnt = lw_cast(g, tpr_take_1d(g, bs, e.bag), cd);
    scale = lw_sel(g, lw_cmpk(g, TPR_CMP_NE, cnt, 0), lw_div(g, scale, cnt), scale);
  }
  if (lw_is_tensor(ctx, i_psw))
    scale = lw_mul(g, scale, lw_cast(g, lw_value(ctx, i_psw), cd));
  scale = lw_sel(g, e.live, scale, lw_k(g, scale, 0));
  tpr_value_t rows = lw_mul(g, tpr_index_select(g, grad, 0, e.bag),
                            tpr_broadcast_in_dim(g, scale, 2, nd, &d0));
  tpr_value_t where = tpr_broadcast_in_dim(g, e.idx, 2, nd, &d0);
  return lw_ret(ctx, tpr_scatter_along(g, zeros, 0, where, rows, true));
}

static tpr_status_t lower_embedding_bag_backward(lw_ctx_t* ctx) {
  return eb_dense_backward(ctx, true);
}
static tpr_status_t lower_embedding_bag_dense_backward(lw_ctx_t* ctx) {
  return eb_dense_backward(ctx, false);
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets,
// offset2bag, mode, padding_idx): sum mode only; each sample's gradient is
// its bag's gradient dotted with its embedding row (0 for padding).
static tpr_status_t lower_embedding_bag_psw_backward(lw_ctx_t* ctx) {
  if (lw_int(ctx, 5, 0) != 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "per_sample_weights are only supported for mode='sum'");
  eb_t e;
  TPR_RETURN_IF_ERROR(eb_setup(ctx, 0, 2, 4, lw_int(ctx, 6, -1), &e));
  const tpr_type_t* wt = lw_arg_type(ctx, 1);
  if (!wt || wt->rank != 2 || wt->dims[1] != e.d)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "weight must be [V, D]");
  tpr_graph_t* g = G;
  if (e.n == 0 || e.b == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  tpr_value_t gr = tpr_index_select(g, lw_cast(g, lw_value(ctx, 0), cd), 0, e.bag);
  tpr_value_t w = tpr_index_select(g, lw_cast(g, lw_value(ctx, 1), cd), 0, e.idx);
  tpr_value_t dot = row_sum(g, lw_mul(g, gr, w), 1);
  return lw_ret(ctx, lw_sel(g, e.live, dot, lw_k(g, dot, 0)));
}

//===--- activation backwards ----------------------------------------------===//

// glu_backward(grad_output, self, dim): self = [a, b] halves along dim,
// glu = a sigmoid(b); d/da = sigmoid(b), d/db = a sigmoid(b) (1 - sigmoid(b)).
static tpr_status_t lower_glu_backward(lw_ctx_t* ctx) {
  const tpr_type_t* xt = lw_arg_type(ctx, 1);
  if (!xt || !lw_is_tensor(ctx, 0) || xt->rank < 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad_output and self");
  if (!tpr_dtype_is_float(xt->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(xt->dtype));
  int64_t dim = lw_wrap_dim(lw_int(ctx, 2, -1), xt->rank);
  if (dim < 0 || xt->dims[dim] % 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range or of odd size");
  tpr_graph_t* g = G;
  tpr_dtype_t cd = lw_opmath(xt->dtype);
  tpr_value_t x = lw_cast(g, lw_value(ctx, 1), cd);
  int64_t lo[TPR_MAX_RANK] = {0}, mid[TPR_MAX_RANK], hi[TPR_MAX_RANK], one[TPR_MAX_RANK];
  for (int i = 0; i < xt->rank; i++) mid[i] = hi[i] = xt->dims[i], one[i] = 1;
  mid[dim] = xt->dims[dim] / 2;
  tpr_value_t a = tpr_slice(g, x, lo, mid, one);
  int64_t lo2[TPR_MAX_RANK] = {0};
  lo2[dim] = mid[dim];
  tpr_value_t b = tpr_slice(g, x, lo2, hi, one);
  tpr_value_t go = lw_cast(g, lw_value(ctx, 0), cd);
  tpr_value_t sig = lw_un(g, TPR_UNARY_LOGISTIC, b);
  tpr_value_t ga = lw_mul(g, sig, go);
  tpr_value_t gb = lw_mul(g, lw_mul(g, lw_mul(g, lw_sub(g, lw_k(g, sig, 1), sig), sig), a), go);
  tpr_value_t parts[2] = {ga, gb};
  return lw_ret(ctx, tpr_concatenate(g, parts, 2, dim));
}

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self,
// grad_weight), both in the broadcast shape (autograd reduces the weight's).
static tpr_status_t lower_prelu_kernel_backward(lw_ctx_t* ctx) {
  if (ctx->num_outs != 2 || !lw_is_tensor(ctx, 0) || !lw_is_tensor(ctx, 1) ||
      !lw_is_tensor(ctx, 2))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs grad_output, self and weight");
  if (!tpr_dtype_is_float(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating dtype, got %s",
                   tpr_dtype_name(OUT->dtype));
  tpr_graph_t* g = G;
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  const tpr_type_t* shape = &ctx->out_types[1];
  tpr_value_t go = lw_in(ctx, 0, cd, shape), x = lw_in(ctx, 1, cd, shape);
  tpr_value_t w = lw_in(ctx, 2, cd, shape);
  tpr_value_t pos = lw_cmpk(g, TPR_CMP_GT, x, 0);
  lw_set(ctx, 0, lw_reshape_to(g, lw_sel(g, pos, go, lw_mul(g, w, go)), OUT));
  lw_set(ctx, 1, lw_sel(g, pos, lw_k(g, go, 0), lw_mul(g, x, go)));
  return lw_done(ctx);
}

LW_DEFINE_TABLE(margin_rrelu_renorm,
    LW_RULE("glu_backward", lower_glu_backward),
    LW_RULE("glu_backward.grad_input", lower_glu_backward),
    LW_RULE("_prelu_kernel_backward", lower_prelu_kernel_backward),
    LW_RULE("_embedding_bag_backward", lower_embedding_bag_backward),
    LW_RULE("_embedding_bag_dense_backward", lower_embedding_bag_dense_backward),
    LW_RULE("_embedding_bag_dense_backward.out", lower_embedding_bag_dense_backward),
    LW_RULE("_embedding_bag_per_sample_weights_backward", lower_embedding_bag_psw_backward),
    LW_RULE("_embedding_bag_per_sample_weights_backward.out", lower_embedding_bag_psw_backward),
    LW_RULE("igamma", lower_igamma), LW_RULE("igamma.out", lower_igamma),
    LW_RULE("igamma_", lower_igamma),
    LW_RULE("igammac", lower_igammac), LW_RULE("igammac.out", lower_igammac),
    LW_RULE("igammac_", lower_igammac),
    LW_RULE("_cdist_backward", lower_cdist_backward),
    LW_RULE("_cdist_backward.out", lower_cdist_backward),
    LW_RULE("_pdist_backward", lower_pdist_backward),
    LW_RULE("_pdist_backward.out", lower_pdist_backward),
    LW_RULE("grid_sampler_3d", lower_grid_sampler_3d),
    LW_RULE("grid_sampler_3d_backward", lower_grid_sampler_3d_backward),
    LW_RULE("grid_sampler_3d.out", lower_grid_sampler_3d),
    LW_RULE("embedding_renorm_", lower_embedding_renorm),
    LW_RULE("embedding_renorm", lower_embedding_renorm),
    LW_RULE("embedding_renorm.out", lower_embedding_renorm),
    LW_RULE("rrelu_with_noise", lower_rrelu_with_noise),
    LW_RULE("rrelu_with_noise_", lower_rrelu_with_noise),
    LW_RULE("rrelu_with_noise_functional", lower_rrelu_with_noise),
    LW_RULE("multi_margin_loss", lower_multi_margin_loss),
    LW_RULE("multi_margin_loss.out", lower_multi_margin_loss),
    LW_RULE("multi_margin_loss_backward", lower_multi_margin_loss_backward),
    LW_RULE("multi_margin_loss_backward.grad_input", lower_multi_margin_loss_backward),
    LW_RULE("multilabel_margin_loss_forward", lower_multilabel_margin_loss_forward),
    LW_RULE("multilabel_margin_loss_forward.output", lower_multilabel_margin_loss_forward),
    LW_RULE("multilabel_margin_loss_backward", lower_multilabel_margin_loss_backward),
    LW_RULE("multilabel_margin_loss_backward.grad_input", lower_multilabel_margin_loss_backward));
