// grid_sampler_2d: samples input [N,C,H,W] at the normalized (x, y) points
// of grid [N,Ho,Wo,2], as PyTorch's CPU kernel does. Coordinates and
// weights are computed in f32 per output point; each tap gathers its
// values from the input flattened to [N,C,H*W] with flat indices per
// batch. Taps outside the input contribute 0 (their values are selected
// away, so inf/NaN there never leak through a zero weight).
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)

enum { GS_BILINEAR = 0, GS_NEAREST = 1, GS_BICUBIC = 2 };
enum { GS_ZEROS = 0, GS_BORDER = 1, GS_REFLECTION = 2 };

typedef struct {
  lw_ctx_t* ctx;
  tpr_value_t x;  // f32 [N,C,H*W]
  int64_t n, c, h, w, l;
  int pad;
  bool align;
  int mode;
  bool empty;          // nothing to compute (no batch, channel or point)
  tpr_value_t gxy[2];  // the grid's x and y [N,L]
} gs_t;

// grid_sampler_unnormalize: [-1, 1] -> pixel coordinates.
static tpr_value_t gs_unnormalize(tpr_graph_t* g, tpr_value_t v, int64_t size,
                                  bool align) {
  if (align)
    return lw_mul(g, lw_add(g, v, lw_k(g, v, 1.0)),
                  lw_k(g, v, (double)(size - 1) / 2.0));
  double s = (double)size / 2.0;
  return lw_add(g, lw_mul(g, v, lw_k(g, v, s)), lw_k(g, v, s - 0.5));
}

// clip_coordinates of the vectorized CPU kernel: NaN becomes 0.
static tpr_value_t gs_clip(tpr_graph_t* g, tpr_value_t v, int64_t size) {
  tpr_value_t c = lw_min(g, lw_max(g, v, lw_k(g, v, 0.0)),
                         lw_k(g, v, (double)(size - 1)));
  return lw_sel(g, lw_isnan(g, v), lw_k(g, v, 0.0), c);
}

// reflect_coordinates of the vectorized CPU kernel (twice_low, twice_high
// as in GridSampler.h): the same trunc-and-subtract steps, so huge or
// infinite coordinates (NaN here, 0 after the clip) land where the CPU's do.
static tpr_value_t gs_reflect(tpr_graph_t* g, tpr_value_t v, int64_t twice_low,
                              int64_t twice_high) {
  if (twice_low == twice_high) return lw_k(g, v, 0.0);
  tpr_value_t low = lw_k(g, v, (double)twice_low / 2.0);
  tpr_value_t span2 = lw_k(g, v, (double)(twice_high - twice_low));
  tpr_value_t a = lw_un(g, TPR_UNARY_ABS, lw_sub(g, v, low));
  tpr_value_t flips = lw_trunc(g, lw_div(g, a, span2));
  tpr_value_t extra = lw_sub(g, a, lw_mul(g, flips, span2));
  return lw_add(g, lw_min(g, extra, lw_sub(g, span2, extra)), low);
}

// compute_coordinates: the padding mode applied to a pixel coordinate.
static tpr_value_t gs_pad(const gs_t* s, tpr_value_t v, int64_t size) {
  tpr_graph_t* g = s->ctx->graph;
  if (s->pad == GS_BORDER) return gs_clip(g, v, size);
  if (s->pad == GS_REFLECTION) {
    v = s->align ? gs_reflect(g, v, 0, 2 * (size - 1))
                 : gs_reflect(g, v, -1, 2 * size - 1);
    return gs_clip(g, v, size);
  }
  return v;
}

static tpr_value_t gs_bcast(tpr_graph_t* g, const gs_t* s, tpr_value_t v) {
  int64_t dims[3] = {s->n, s->c, s->l}, bd[2] = {0, 2};
  return tpr_broadcast_in_dim(g, v, 3, dims, bd);
}

// Whether the integer-valued pixel coordinates (ix, iy) [N,L] are inside
// the input, and their flat index into H*W (clamped into range).
static tpr_value_t gs_loc(const gs_t* s, tpr_value_t ix, tpr_value_t iy,
                          tpr_value_t* flat) {
  tpr_graph_t* g = s->ctx->graph;
  tpr_value_t in = tpr_binary(
      g, TPR_BINARY_AND,
      tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GE, ix, 0.0),
                 lw_cmpk(g, TPR_CMP_LE, ix, (double)(s->w - 1))),
      tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GE, iy, 0.0),
                 lw_cmpk(g, TPR_CMP_LE, iy, (double)(s->h - 1))));
  tpr_value_t xi = lw_cast(g, gs_clip(g, ix, s->w), TPR_DTYPE_S64);
  tpr_value_t yi = lw_cast(g, gs_clip(g, iy, s->h), TPR_DTYPE_S64);
  *flat = lw_add(g, lw_mul(g, yi, lw_k(g, yi, (double)s->w)), xi);
  return in;
}

// The input values [N,C,L] at the integer-valued pixel coordinates (ix, iy)
// [N,L]; 0 where outside the input.
static tpr_value_t gs_tap(const gs_t* s, tpr_value_t ix, tpr_value_t iy) {
  tpr_graph_t* g = s->ctx->graph;
  tpr_value_t flat;
  tpr_value_t in = gs_loc(s, ix, iy, &flat);
  tpr_value_t v = tpr_gather_along(g, s->x, 2, gs_bcast(g, s, flat));
  return lw_sel(g, gs_bcast(g, s, in), v, lw_k(g, v, 0.0));
}

static tpr_value_t gs_wmul(const gs_t* s, tpr_value_t v, tpr_value_t w) {
  return lw_mul(s->ctx->graph, v, gs_bcast(s->ctx->graph, s, w));
}

// cubic convolution coefficients (A = -0.75), as upsample_bicubic2d.
static tpr_value_t gs_cubic1(tpr_graph_t* g, tpr_value_t x) {
  const double A = -0.75;
  tpr_value_t t = lw_sub(g, lw_mul(g, lw_k(g, x, A + 2), x), lw_k(g, x, A + 3));
  return lw_add(g, lw_mul(g, lw_mul(g, t, x), x), lw_k(g, x, 1.0));
}
static tpr_value_t gs_cubic2(tpr_graph_t* g, tpr_value_t x) {
  const double A = -0.75;
  tpr_value_t t = lw_sub(g, lw_mul(g, lw_k(g, x, A), x), lw_k(g, x, 5 * A));
  t = lw_add(g, lw_mul(g, t, x), lw_k(g, x, 8 * A));
  return lw_sub(g, lw_mul(g, t, x), lw_k(g, x, 4 * A));
}
static void gs_cubic_coeffs(tpr_graph_t* g, tpr_value_t t, tpr_value_t out[4]) {
  tpr_value_t one = lw_k(g, t, 1.0);
  out[0] = gs_cubic2(g, lw_add(g, t, one));
  out[1] = gs_cubic1(g, t);
  out[2] = gs_cubic1(g, lw_sub(g, one, t));
  out[3] = gs_cubic2(g, lw_sub(g, lw_k(g, t, 2.0), t));
}

// Reads input [N,C,H,W] (argument |ii|), grid [N,Ho,Wo,2] (ii + 1) and the
// modes (ii + 2..4) into *s (input flattened to [N,C,H*W]).
static tpr_status_t gs_setup(lw_ctx_t* ctx, int ii, gs_t* s) {
  const tpr_type_t* it = lw_arg_type(ctx, ii);
  const tpr_type_t* gt = lw_arg_type(ctx, ii + 1);
  if (!it || !gt || it->rank != 4 || gt->rank != 4 || gt->dims[3] != 2 ||
      gt->dims[0] != it->dims[0])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "grid_sampler_2d: expected input [N,C,H,W], grid [N,Ho,Wo,2]");
  int mode = (int)lw_int(ctx, ii + 2, 0);
  int pad = (int)lw_int(ctx, ii + 3, 0);
  if (mode < 0 || mode > 2 || pad < 0 || pad > 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "grid_sampler_2d: bad interpolation or padding mode");
  if (it->dtype != TPR_DTYPE_F32 && it->dtype != TPR_DTYPE_BF16 &&
      it->dtype != TPR_DTYPE_F16 && it->dtype != TPR_DTYPE_F64)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "grid_sampler_2d: dtype");
  *s = (gs_t){ctx, 0, it->dims[0], it->dims[1], it->dims[2], it->dims[3],
              gt->dims[1] * gt->dims[2], pad, lw_bool(ctx, ii + 4, false), mode};
  s->empty = s->n == 0 || s->c == 0 || s->l == 0;
  if (s->empty) return tpr_ok_status();
  if (s->h < 1 || s->w < 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grid_sampler_2d: empty input");
  tpr_dtype_t ct = lw_opmath(it->dtype);
  s->x = tpr_reshape(G, lw_cast(G, lw_value(ctx, ii), ct), 3,
                     (int64_t[]){s->n, s->c, s->h * s->w});
  tpr_value_t grid = lw_cast(G, lw_value(ctx, ii + 1), ct);
  for (int k = 0; k < 2; k++) {
    int64_t st[4] = {0, 0, 0, k}, lim[4] = {s->n, gt->dims[1], gt->dims[2], k + 1};
    int64_t one[4] = {1, 1, 1, 1};
    s->gxy[k] = tpr_reshape(G, tpr_slice(G, grid, st, lim, one), 2,
                            (int64_t[]){s->n, s->l});
  }
  return tpr_ok_status();
}

static tpr_status_t lower_grid_sampler_2d(lw_ctx_t* ctx) {
  gs_t s;
  TPR_RETURN_IF_ERROR(gs_setup(ctx, 0, &s));
  int mode = s.mode;
  tpr_value_t* gxy = s.gxy;
  const tpr_type_t* ot = &ctx->out_types[0];
  if (s.empty || tpr_type_numel(ot) == 0)
    return lw_ret(ctx, lw_full(G, 0.0, ot->dtype, ot));
  tpr_value_t x = gs_unnormalize(G, gxy[0], s.w, s.align);
  tpr_value_t y = gs_unnormalize(G, gxy[1], s.h, s.align);
  tpr_value_t out;
  if (mode == GS_BICUBIC) {
    tpr_value_t x0 = lw_un(G, TPR_UNARY_FLOOR, x);
    tpr_value_t y0 = lw_un(G, TPR_UNARY_FLOOR, y);
    tpr_value_t cx[4], cy[4];
    gs_cubic_coeffs(G, lw_sub(G, x, x0), cx);
    gs_cubic_coeffs(G, lw_sub(G, y, y0), cy);
    tpr_value_t tx[4], ty[4];
    for (int i = 0; i < 4; i++) {
      tx[i] = gs_pad(&s, lw_add(G, x0, lw_k(G, x0, i - 1.0)), s.w);
      ty[i] = gs_pad(&s, lw_add(G, y0, lw_k(G, y0, i - 1.0)), s.h);
    }
    out = 0;
    for (int j = 0; j < 4; j++) {
      tpr_value_t row = 0;
      for (int i = 0; i < 4; i++) {
        tpr_value_t t = gs_wmul(&s, gs_tap(&s, tx[i], ty[j]), cx[i]);
        row = i ? lw_add(G, row, t) : t;
      }
      row = gs_wmul(&s, row, cy[j]);
      out = j ? lw_add(G, out, row) : row;
    }
  } else {
    x = gs_pad(&s, x, s.w);
    y = gs_pad(&s, y, s.h);
    if (mode == GS_NEAREST) {
      out = gs_tap(&s, lw_un(G, TPR_UNARY_ROUND_NEAREST_EVEN, x),
                   lw_un(G, TPR_UNARY_ROUND_NEAREST_EVEN, y));
    } else {
      tpr_value_t xw = lw_un(G, TPR_UNARY_FLOOR, x);
      tpr_value_t yn = lw_un(G, TPR_UNARY_FLOOR, y);
      tpr_value_t xe = lw_add(G, xw, lw_k(G, xw, 1.0));
      tpr_value_t ys = lw_add(G, yn, lw_k(G, yn, 1.0));
      tpr_value_t w = lw_sub(G, x, xw), e = lw_sub(G, lw_k(G, w, 1.0), w);
      tpr_value_t n = lw_sub(G, y, yn), so = lw_sub(G, lw_k(G, n, 1.0), n);
      out = gs_wmul(&s, gs_tap(&s, xw, yn), lw_mul(G, so, e));
      out = lw_add(G, out, gs_wmul(&s, gs_tap(&s, xe, yn), lw_mul(G, so, w)));
      out = lw_add(G, out, gs_wmul(&s, gs_tap(&s, xw, ys), lw_mul(G, n, e)));
      out = lw_add(G, out, gs_wmul(&s, gs_tap(&s, xe, ys), lw_mul(G, n, w)));
    }
  }
  return lw_ret(ctx, out);  // [N,C,L] -> [N,C,Ho,Wo]
}

//===--- backward ----------------------------------------------------------===//

// The source coordinate of a grid value and d coordinate / d grid, as the
// vectorized CPU kernel's apply_get_grad: clipping counts the borders as
// outside (gradient 0 there); reflection flips the sign on odd reflections.
static tpr_value_t gs_coord_grad(const gs_t* s, tpr_value_t v, int64_t size,
                                 tpr_value_t* mult) {
  tpr_graph_t* g = s->ctx->graph;
  double scale = s->align ? (double)(size - 1) / 2.0 : (double)size / 2.0;
  tpr_value_t x = gs_unnormalize(g, v, size, s->align);
  *mult = lw_k(g, x, scale);
  if (s->pad == GS_ZEROS) return x;
  if (s->pad == GS_REFLECTION) {
    double low = s->align ? 0.0 : -0.5;
    double span2 = s->align ? 2.0 * (double)(size - 1) : 2.0 * (double)size;
    if (span2 == 0) {
      *mult = lw_k(g, x, 0);
      return lw_k(g, x, 0);
    }
    tpr_value_t in = lw_sub(g, x, lw_k(g, x, low));
    tpr_value_t a = lw_un(g, TPR_UNARY_ABS, in);
    tpr_value_t flips = lw_trunc(g, lw_div(g, a, lw_k(g, a, span2)));
    tpr_value_t extra = lw_sub(g, a, lw_mul(g, flips, lw_k(g, a, span2)));
    tpr_value_t refl = lw_sub(g, lw_k(g, extra, span2), extra);
    tpr_value_t more = lw_cmp(g, TPR_CMP_GT, extra, refl);
    x = lw_add(g, lw_sel(g, more, refl, extra), lw_k(g, x, low));
    tpr_value_t flip = tpr_binary(g, TPR_BINARY_XOR, more, lw_cmpk(g, TPR_CMP_LT, in, 0));
    *mult = lw_mul(g, *mult, lw_sel(g, flip, lw_k(g, x, -1), lw_k(g, x, 1)));
  }
  tpr_value_t inside = tpr_binary(g, TPR_BINARY_AND, lw_cmpk(g, TPR_CMP_GT, x, 0),
                                  lw_cmpk(g, TPR_CMP_LT, x, (double)(size - 1)));
  *mult = lw_sel(g, inside, *mult, lw_k(g, x, 0));
  return gs_clip(g, x, size);
}

// grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode,
// padding_mode, align_corners, output_mask) -> (grad_input, grad_grid), for
// bilinear and nearest. grad_input adds each tap's share of the output
// gradient (scatter-add); grad_grid is the weights' derivative times the
// taps, summed over channels (0 for nearest).
static tpr_status_t lower_grid_sampler_2d_backward(lw_ctx_t* ctx) {
  gs_t s;
  TPR_RETURN_IF_ERROR(gs_setup(ctx, 1, &s));
  if (s.mode == GS_BICUBIC)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "bicubic backward is not supported");
  // output_mask switches grad_input off only: grad_grid is always returned
  // (PyTorch's CPU kernel and meta function do so; RAFT's lookups ask for
  // grad_input alone).
  const tpr_arg_t* mask = lw_arg(ctx, 6);
  bool want[2] = {mask->kind != TPR_ARG_BOOL_LIST || mask->count < 1 || mask->bools[0], true};
  if (ctx->num_outs != 1 + want[0])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "%d results for an output_mask of %d",
                   (int)ctx->num_outs, 1 + want[0]);
  if (s.empty) return lw_ret_zeros(ctx);
  tpr_graph_t* g = G;
  tpr_dtype_t ct = tpr_value_type(g, s.x)->dtype;
  int64_t ncl[3] = {s.n, s.c, s.l};
  tpr_value_t go = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), ct), 3, ncl);
  tpr_value_t mx, my;
  tpr_value_t x = gs_coord_grad(&s, s.gxy[0], s.w, &mx);
  tpr_value_t y = gs_coord_grad(&s, s.gxy[1], s.h, &my);
  tpr_value_t gin = lw_full(g, 0, ct, &(tpr_type_t){ct, 3, {s.n, s.c, s.h * s.w}});
  tpr_value_t gx = TPR_VALUE_NONE, gy = TPR_VALUE_NONE;
  if (s.mode == GS_NEAREST) {
    tpr_value_t flat;
    tpr_value_t in = gs_loc(&s, lw_un(g, TPR_UNARY_ROUND_NEAREST_EVEN, x),
                            lw_un(g, TPR_UNARY_ROUND_NEAREST_EVEN, y), &flat);
    tpr_value_t src = lw_sel(g, gs_bcast(g, &s, in), go, lw_k(g, go, 0));
    gin = tpr_scatter_along(g, gin, 2, gs_bcast(g, &s, flat), src, true);
    gx = gy = lw_k(g, x, 0);
  } else {
    tpr_value_t x0 = lw_un(g, TPR_UNARY_FLOOR, x), y0 = lw_un(g, TPR_UNARY_FLOOR, y);
    tpr_value_t w = lw_sub(g, x, x0), e = lw_sub(g, lw_k(g, w, 1), w);
    tpr_value_t n = lw_sub(g, y, y0), so = lw_sub(g, lw_k(g, n, 1), n);
    // Corners nw, ne, sw, se: position, weight, d weight / dx, / dy.
    tpr_value_t cx[4] = {x0, lw_add(g, x0, lw_k(g, x0, 1)), x0, lw_add(g, x0, lw_k(g, x0, 1))};
    tpr_value_t cy[4] = {y0, y0, lw_add(g, y0, lw_k(g, y0, 1)), lw_add(g, y0, lw_k(g, y0, 1))};
    tpr_value_t wt[4] = {lw_mul(g, so, e), lw_mul(g, so, w), lw_mul(g, n, e), lw_mul(g, n, w)};
    tpr_value_t dx[4] = {lw_un(g, TPR_UNARY_NEG, so), so, lw_un(g, TPR_UNARY_NEG, n), n};
    tpr_value_t dy[4] = {lw_un(g, TPR_UNARY_NEG, e), lw_un(g, TPR_UNARY_NEG, w), e, w};
    int64_t d1 = 1;
    for (int k = 0; k < 4; k++) {
      tpr_value_t flat;
      tpr_value_t in = gs_bcast(g, &s, gs_loc(&s, cx[k], cy[k], &flat));
      tpr_value_t src = lw_sel(g, in, gs_wmul(&s, go, wt[k]), lw_k(g, go, 0));
      gin = tpr_scatter_along(g, gin, 2, gs_bcast(g, &s, flat), src, true);
      // go * tap value, summed over channels
      tpr_value_t gv = tpr_reduce(g, lw_mul(g, go, gs_tap(&s, cx[k], cy[k])), TPR_REDUCE_SUM,
                                  &d1, 1);
      tpr_value_t tx = lw_mul(g, gv, dx[k]), ty = lw_mul(g, gv, dy[k]);
      gx = k ? lw_add(g, gx, tx) : tx;
      gy = k ? lw_add(g, gy, ty) : ty;
    }
  }
  int slot = 0;
  if (want[0]) lw_set(ctx, slot++, gin);  // [N,C,H*W] -> input's shape
  if (want[1]) {
    int64_t nl1[3] = {s.n, s.l, 1};
    tpr_value_t parts[2] = {tpr_reshape(g, lw_mul(g, gx, mx), 3, nl1),
                            tpr_reshape(g, lw_mul(g, gy, my), 3, nl1)};
    lw_set(ctx, slot, tpr_concatenate(g, parts, 2, 2));  // -> [N,Ho,Wo,2]
  }
  return lw_done(ctx);
}

LW_DEFINE_TABLE(grid,
    LW_RULE("grid_sampler_2d_backward", lower_grid_sampler_2d_backward),
    LW_RULE("grid_sampler_2d_backward.out", lower_grid_sampler_2d_backward),
    LW_RULE("grid_sampler_2d", lower_grid_sampler_2d),
    LW_RULE("grid_sampler_2d.out", lower_grid_sampler_2d),
);
