// Pooling, resampling and padding over the trailing |ns| spatial dims
// (leading dims are batch/channels, so unbatched inputs work too). All
// compute in opmath and round once.
//
// Three building blocks keep this small:
//  * separable linear maps: adaptive average pooling, every upsample mode
//    and the reflection/replication pads are, per spatial dim, a fixed
//    [out, in] matrix computed here on the host. Forward multiplies by it
//    (pure selections gather instead, which is exact even for inf/NaN),
//    backward by its transpose.
//  * window gathers: max pooling (plain and adaptive) gathers each window's
//    elements per dim with a host-computed [out, window] index table, takes
//    the first maximum (NaN wins) and reports its flat position within the
//    input plane, as PyTorch's indices; backward scatter-adds there.
//  * reduce_window: average pooling sums windows; its backward sums the
//    stride-dilated output gradient over flipped windows.
#include <stdlib.h>

#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define MAXS 3  // spatial dims

// An int[] argument of one or ns entries into out[ns]; |dflt| for [] or None.
static bool ilist(const lw_ctx_t* ctx, int i, int ns, int64_t dflt,
                  int64_t* out) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  for (int d = 0; d < ns; d++) out[d] = dflt;
  if (a->kind == TPR_ARG_NONE || (a->kind == TPR_ARG_INT_LIST && a->count == 0))
    return true;
  if (a->kind != TPR_ARG_INT_LIST || (a->count != 1 && a->count != ns))
    return false;
  for (int d = 0; d < ns; d++) out[d] = a->ints[a->count == 1 ? 0 : d];
  return true;
}

// Scratch for host tables; freed by the rule.
typedef struct {
  void* p[2 * MAXS + 2];
  int n;
} scratch_t;

static void* scratch_alloc(scratch_t* s, size_t bytes) {
  if (s->n >= (int)(sizeof s->p / sizeof s->p[0])) return NULL;
  void* p = tpr_malloc(bytes ? bytes : 1);
  if (p) memset(p, 0, bytes ? bytes : 1);
  return s->p[s->n++] = p;
}
static void scratch_free(scratch_t* s) {
  for (int i = 0; i < s->n; i++) tpr_free(s->p[i]);
  s->n = 0;
}

// Checks the input has at least ns+1 dims (PyTorch wants batch or channel)
// and a floating opmath type.
static tpr_status_t spatial_input(const lw_ctx_t* ctx, int i, int ns,
                                  tpr_type_t* out) {
  const tpr_type_t* t = lw_arg_type(ctx, i);
  if (!t || t->rank < ns + 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs a tensor with %d spatial dims and a channel dim", ns);
  *out = *t;
  out->dtype = lw_opmath(t->dtype);
  if (!tpr_dtype_is_float(out->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating input");
  return tpr_ok_status();
}

//===--- separable maps ----------------------------------------------------===//

// v with dim |dim| (size m->in) mapped through the [out, in] matrix |m|
// (or its transpose: size out -> in).
static tpr_value_t map_dim(tpr_graph_t* g, tpr_value_t v, int dim,
                           const double* m, int64_t out, int64_t in,
                           bool transpose) {
  const tpr_type_t* t = tpr_value_type(g, v);
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  tpr_dtype_t d = t->dtype;
  int rank = t->rank;
  // Host tables are f64; the constant folds the convert away.
  tpr_value_t mv = lw_cast(
      g, tpr_constant_dense(g, tpr_type_make(TPR_DTYPE_F64, 2, (int64_t[]){out, in}), m),
      d);
  int64_t lc = dim, rc = transpose ? 0 : 1;
  tpr_value_t r = tpr_dot_general(g, v, mv, 0, NULL, NULL, 1, &lc, &rc, d);
  // The new dim comes last: move it back.
  int64_t perm[TPR_MAX_RANK];
  for (int i = 0, k = 0; i < rank; i++) perm[i] = i == dim ? rank - 1 : k++;
  return tpr_transpose(g, r, perm);
}

// v with dim |dim| replaced by v[idx[j]] (an exact selection).
static tpr_value_t select_dim(tpr_graph_t* g, tpr_value_t v, int dim,
                              const int64_t* idx, int64_t n) {
  tpr_value_t iv = tpr_constant_dense(g, tpr_type_make(TPR_DTYPE_S64, 1, &n), idx);
  return tpr_index_select(g, v, dim, iv);
}

// One spatial dim's map: |m| is [out, in]; |idx| (out entries) is set when
// the map is a pure selection.
typedef struct {
  int64_t in, out;
  double* m;
  int64_t* idx;
} dimmap_t;

static bool dimmap_alloc(scratch_t* s, dimmap_t* dm, int64_t in, int64_t out,
                         bool selection) {
  dm->in = in;
  dm->out = out;
  dm->m = (double*)scratch_alloc(s, (size_t)(in * out) * sizeof(double));
  dm->idx = selection ? (int64_t*)scratch_alloc(s, (size_t)out * sizeof(int64_t))
                      : NULL;
  return dm->m && (!selection || dm->idx);
}

static void dimmap_pick(dimmap_t* dm, int64_t o, int64_t i) {
  dm->m[o * dm->in + i] = 1;
  if (dm->idx) dm->idx[o] = i;
}

// Applies the maps to the trailing ns dims of v (forward, or backward with
// the transposes).
static tpr_value_t apply_maps(tpr_graph_t* g, tpr_value_t v, int ns,
                              const dimmap_t* dm, bool backward) {
  int rank = tpr_value_type(g, v)->rank;
  for (int d = 0; d < ns; d++) {
    int dim = rank - ns + d;
    if (!backward && dm[d].idx)
      v = select_dim(g, v, dim, dm[d].idx, dm[d].out);
    else
      v = map_dim(g, v, dim, dm[d].m, dm[d].out, dm[d].in, backward);
  }
  return v;
}

//===--- adaptive average pooling ------------------------------------------===//

static int64_t adaptive_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
static int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

static bool adaptive_avg_map(scratch_t* s, dimmap_t* dm, int64_t in,
                             int64_t out) {
  if (!dimmap_alloc(s, dm, in, out, false)) return false;
  for (int64_t o = 0; o < out; o++) {
    int64_t a = adaptive_start(o, in, out), b = adaptive_end(o, in, out);
    for (int64_t i = a; i < b; i++) dm->m[o * in + i] = 1.0 / (double)(b - a);
  }
  return true;
}

// _adaptive_avg_pool{2,3}d(self, output_size) and
// _adaptive_avg_pool{2,3}d_backward(grad_output, self)
static tpr_status_t adaptive_avg(lw_ctx_t* ctx, int ns, bool backward) {
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, backward ? 1 : 0, ns, &xt));
  const tpr_type_t* ot = backward ? lw_arg_type(ctx, 0) : &ctx->out_types[0];
  if (!ot || ot->rank != xt.rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grad_output rank differs from self");
  scratch_t s = {0};
  dimmap_t dm[MAXS] = {{0}};
  for (int d = 0; d < ns; d++) {
    int64_t in = xt.dims[xt.rank - ns + d], out = ot->dims[ot->rank - ns + d];
    if (!adaptive_avg_map(&s, &dm[d], in, out)) {
      scratch_free(&s);
      return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of host memory");
    }
  }
  tpr_value_t v = lw_cast(G, lw_value(ctx, 0), xt.dtype);
  v = apply_maps(G, v, ns, dm, backward);
  scratch_free(&s);
  return lw_ret(ctx, v);
}
static tpr_status_t lower_adaptive_avg2d(lw_ctx_t* c) { return adaptive_avg(c, 2, false); }
static tpr_status_t lower_adaptive_avg3d(lw_ctx_t* c) { return adaptive_avg(c, 3, false); }
static tpr_status_t lower_adaptive_avg2d_bw(lw_ctx_t* c) { return adaptive_avg(c, 2, true); }
static tpr_status_t lower_adaptive_avg3d_bw(lw_ctx_t* c) { return adaptive_avg(c, 3, true); }

//===--- upsampling --------------------------------------------------------===//

enum { UP_NEAREST, UP_NEAREST_EXACT, UP_LINEAR, UP_CUBIC, UP_LINEAR_AA, UP_CUBIC_AA };

// PyTorch's compute_scales_value / area_pixel_compute_scale (in float, as
// its kernels compute them for float inputs).
static double up_scale(int mode, bool align, double given, int64_t in,
                       int64_t out) {
  if (mode >= UP_LINEAR && align)
    return out > 1 ? (double)(float)((double)(in - 1) / (double)(out - 1)) : 0;
  if (given > 0) return (double)(float)(1.0 / given);
  return (double)((float)in / (float)out);
}

static double cubic1(double x, double a) {
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
static double cubic2(double x, double a) {
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// |v| rounded to float unless |wide|: host arithmetic in the kernel's dtype.
static double rnd(double v, bool wide) { return wide ? v : (double)(float)v; }

// Antialiased weights of output |o| (PyTorch's _compute_weights_aa with the
// triangle filter, or under |cubic| Keys' cubic with a = -0.5 and twice the
// support; in the input's opmath dtype as its CPU kernel): the filter widens
// by the scale when downsampling, and each output's taps are normalized to
// sum to 1.
static void aa_row(double* row, int64_t o, int64_t in, double sc, bool wide,
                   bool cubic) {
  double half = cubic ? 2.0 : 1.0;  // interp_size / 2
  double support = sc >= 1.0 ? half * sc : half;
  double invscale = sc >= 1.0 ? rnd(1.0 / sc, wide) : 1.0;
  double center = rnd(sc * rnd((double)o + 0.5, wide), wide);
  int64_t xmin = (int64_t)rnd(rnd(center - support, wide) + 0.5, wide);
  if (xmin < 0) xmin = 0;
  int64_t xmax = (int64_t)rnd(rnd(center + support, wide) + 0.5, wide);
  if (xmax > in) xmax = in;
  int64_t n = clampi(xmax - xmin, 0, (int64_t)ceil(support) * 2 + 1);
  double w[128], total = 0;
  if (n > 128) n = 128;  // scales past 31 are rejected by the caller
  for (int64_t j = 0; j < n; j++) {
    double x = rnd(rnd(rnd((double)(j + xmin) - center, wide) + 0.5, wide) * invscale, wide);
    x = fabs(x);
    if (cubic)
      w[j] = x < 1.0 ? rnd(cubic1(x, -0.5), wide) : x < 2.0 ? rnd(cubic2(x, -0.5), wide) : 0.0;
    else
      w[j] = x < 1.0 ? rnd(1.0 - x, wide) : 0.0;
    total = rnd(total + w[j], wide);
  }
  for (int64_t j = 0; j < n; j++) row[xmin + j] = total != 0 ? rnd(w[j] / total, wide) : w[j];
}

// scale * (o + 0.5) - 0.5, rounded once: PyTorch's CPU kernels (built for
// AVX2 and AVX-512, with FMA) and CUDA's contract it into a fused
// multiply-add, and rounding the product first puts some source
// coordinates an ulp away (255.69446 instead of 255.69444 for output row 200
// of 345 -> 270 rows: 2.6e-4 off on pixels 9 apart).
static float centered_source(float sc, int64_t o) {
  return fmaf(sc, (float)o + 0.5f, -0.5f);
}

static bool up_map(scratch_t* s, dimmap_t* dm, int mode, bool align,
                   double given, int64_t in, int64_t out, bool wide) {
  bool sel = mode == UP_NEAREST || mode == UP_NEAREST_EXACT;
  if (!dimmap_alloc(s, dm, in, out, sel)) return false;
  float sc = (float)up_scale(mode, align, given, in, out);
  // (linear and cubic scales of float64 inputs: in double)
  double wide_sc = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                   : given > 0 ? 1.0 / given : (double)in / (double)out;
  for (int64_t o = 0; o < out; o++) {
    if (sel) {
      float src = mode == UP_NEAREST ? (float)o * sc : ((float)o + 0.5f) * sc;
      int64_t i = (int64_t)floorf(src);
      dimmap_pick(dm, o, i < in - 1 ? i : in - 1);
      continue;
    }
    double* row = dm->m + o * in;
    if (mode == UP_LINEAR_AA || mode == UP_CUBIC_AA) {
      // f64 inputs compute the scale in double too.
      double dsc = wide ? wide_sc : sc;
      aa_row(row, o, in, dsc, wide, mode == UP_CUBIC_AA);
    } else if (mode == UP_LINEAR) {
      // Source coordinates and weights in the input's opmath type, as
      // PyTorch's kernels compute them: double for float64 inputs.
      double src = wide ? (align ? wide_sc * (double)o : fma(wide_sc, (double)o + 0.5, -0.5))
                        : (double)(align ? sc * (float)o : centered_source(sc, o));
      if (!align && src < 0) src = 0;
      int64_t i0 = (int64_t)src;
      int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      double l1 = wide ? src - (double)i0 : (double)((float)src - (float)i0);
      double l0 = wide ? 1.0 - l1 : (double)(1.0f - (float)l1);
      row[i0] += l0;
      row[i1] += l1;
    } else {  // bicubic, A = -0.75, border indices clamped
      double src = wide ? (align ? wide_sc * (double)o : fma(wide_sc, (double)o + 0.5, -0.5))
                        : (double)(align ? sc * (float)o : centered_source(sc, o));
      int64_t i = (int64_t)floor(src);
      double t = wide ? src - (double)i : (double)((float)src - (float)i), a = -0.75;
      double w[4] = {cubic2(t + 1, a), cubic1(t, a), cubic1(1 - t, a),
                     cubic2(2 - t, a)};
      for (int k = 0; k < 4; k++) row[clampi(i - 1 + k, 0, in - 1)] += w[k];
    }
  }
  return true;
}

typedef struct {
  const char* name;
  int mode, ns;
  bool backward, align;  // align: the schema has align_corners
} up_op_t;

static const up_op_t kUpOps[] = {
    {"aten::upsample_nearest1d", UP_NEAREST, 1, false, false},
    {"aten::upsample_nearest2d", UP_NEAREST, 2, false, false},
    {"aten::upsample_nearest3d", UP_NEAREST, 3, false, false},
    {"aten::_upsample_nearest_exact1d", UP_NEAREST_EXACT, 1, false, false},
    {"aten::_upsample_nearest_exact2d", UP_NEAREST_EXACT, 2, false, false},
    {"aten::_upsample_nearest_exact3d", UP_NEAREST_EXACT, 3, false, false},
    {"aten::upsample_linear1d", UP_LINEAR, 1, false, true},
    {"aten::upsample_bilinear2d", UP_LINEAR, 2, false, true},
    {"aten::upsample_trilinear3d", UP_LINEAR, 3, false, true},
    {"aten::upsample_bicubic2d", UP_CUBIC, 2, false, true},
    {"aten::_upsample_bilinear2d_aa", UP_LINEAR_AA, 2, false, true},
    {"aten::_upsample_bicubic2d_aa", UP_CUBIC_AA, 2, false, true},
};

// Finds the op by the overload name's base ("..._backward.grad_input").
static const up_op_t* up_find(const char* op_name, bool* backward) {
  for (size_t i = 0; i < sizeof kUpOps / sizeof kUpOps[0]; i++) {
    size_t n = strlen(kUpOps[i].name);
    if (strncmp(op_name, kUpOps[i].name, n) != 0) continue;
    const char* rest = op_name + n;
    if (*rest == 0 || *rest == '.') {
      *backward = false;
      return &kUpOps[i];
    }
    if (strncmp(rest, "_backward", 9) == 0 && (rest[9] == 0 || rest[9] == '.')) {
      *backward = true;
      return &kUpOps[i];
    }
  }
  return NULL;
}

// Forward: (self, output_size, [align_corners], scales...)
// Backward: (grad_output, output_size, input_size, [align_corners], scales...)
static tpr_status_t lower_upsample(lw_ctx_t* ctx) {
  bool bw;
  const up_op_t* op = up_find(ctx->op_name, &bw);
  if (!op) return lw_fail(ctx, TPR_INTERNAL, "not an upsample op");
  int ns = op->ns;
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, 0, ns, &xt));
  const tpr_type_t* ot = &ctx->out_types[0];
  const tpr_type_t* small = bw ? ot : &xt;  // the input side
  const tpr_type_t* big = bw ? &xt : ot;    // the output side
  int a = bw ? 3 : 2;
  bool align = op->align && lw_bool(ctx, a, false);
  int sc = a + (op->align ? 1 : 0);
  scratch_t s = {0};
  dimmap_t dm[MAXS] = {{0}};
  for (int d = 0; d < ns; d++) {
    int64_t in = small->dims[small->rank - ns + d];
    int64_t out = big->dims[big->rank - ns + d];
    double given = lw_double(ctx, sc + d, -1);
    if ((op->mode == UP_LINEAR_AA || op->mode == UP_CUBIC_AA) && up_scale(op->mode, align, given, in, out) > 31) {
      scratch_free(&s);
      return lw_fail(ctx, TPR_UNIMPLEMENTED, "antialiased downscaling by more than 31");
    }
    if (in < 1 || !up_map(&s, &dm[d], op->mode, align, given, in, out,
                          xt.dtype == TPR_DTYPE_F64)) {
      scratch_free(&s);
      return lw_fail(ctx, in < 1 ? TPR_INVALID_ARGUMENT : TPR_RESOURCE_EXHAUSTED,
                     in < 1 ? "empty input" : "out of host memory");
    }
  }
  tpr_value_t v = lw_cast(G, lw_value(ctx, 0), xt.dtype);
  v = apply_maps(G, v, ns, dm, bw);
  scratch_free(&s);
  return lw_ret(ctx, v);
}

//===--- reflection / replication padding ----------------------------------===//

// {reflection,replication}_pad{1,2,3}d(self, padding) and their
// _backward(grad_output, self, padding). padding lists the last dim first.
static tpr_status_t pad_common(lw_ctx_t* ctx, int ns, bool reflect,
                               bool backward) {
  int xi = backward ? 1 : 0;
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, xi, ns, &xt));
  const tpr_arg_t* p = lw_arg(ctx, xi + 1);
  if (p->kind != TPR_ARG_INT_LIST || p->count != 2 * ns)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "padding needs %d entries", 2 * ns);
  scratch_t s = {0};
  dimmap_t dm[MAXS] = {{0}};
  for (int d = 0; d < ns; d++) {
    int64_t in = xt.dims[xt.rank - ns + d];
    int64_t lo = p->ints[2 * (ns - 1 - d)], hi = p->ints[2 * (ns - 1 - d) + 1];
    int64_t out = in + lo + hi;
    if (in < 1 || out < 0 || (reflect && (lo >= in || hi >= in))) {
      scratch_free(&s);
      return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                     "padding (%lld, %lld) does not fit a dim of size %lld",
                     (long long)lo, (long long)hi, (long long)in);
    }
    if (!dimmap_alloc(&s, &dm[d], in, out, true)) {
      scratch_free(&s);
      return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of host memory");
    }
    for (int64_t o = 0; o < out; o++) {
      int64_t i = o - lo;
      if (reflect) {
        if (i < 0) i = -i;
        if (i >= in) i = 2 * (in - 1) - i;
      }
      dimmap_pick(&dm[d], o, clampi(i, 0, in - 1));
    }
  }
  tpr_value_t v = lw_cast(G, lw_value(ctx, 0), xt.dtype);
  v = apply_maps(G, v, ns, dm, backward);
  scratch_free(&s);
  return lw_ret(ctx, v);
}
#define PAD_RULES(ns)                                                        \
  static tpr_status_t lower_reflection_pad##ns(lw_ctx_t* c) {                \
    return pad_common(c, ns, true, false);                                   \
  }                                                                          \
  static tpr_status_t lower_reflection_pad##ns##_bw(lw_ctx_t* c) {           \
    return pad_common(c, ns, true, true);                                    \
  }                                                                          \
  static tpr_status_t lower_replication_pad##ns(lw_ctx_t* c) {               \
    return pad_common(c, ns, false, false);                                  \
  }                                                                          \
  static tpr_status_t lower_replication_pad##ns##_bw(lw_ctx_t* c) {          \
    return pad_common(c, ns, false, true);                                   \
  }
PAD_RULES(1)
PAD_RULES(2)
PAD_RULES(3)

//===--- max pooling -------------------------------------------------------===//

// Gathers windows: v [B..., s...] with, per spatial dim d, a table
// idx_d[out_d][len_d] of positions -> [B..., out..., prod len].
static tpr_value_t gather_windows(tpr_graph_t* g, tpr_value_t v, int ns,
                                  int64_t* const* idx, const int64_t* out,
                                  const int64_t* len) {
  int nb = tpr_value_type(g, v)->rank - ns;
  for (int d = 0; d < ns; d++) {
    int64_t dims[2] = {out[d], len[d]};
    tpr_value_t iv = tpr_constant_dense(
        g, tpr_type_make(TPR_DTYPE_S64, 2, dims), idx[d]);
    // dim nb + 2d (earlier dims already expanded to pairs)
    v = tpr_index_select(g, v, nb + 2 * d, iv);
  }
  // [B..., o0, l0, o1, l1, ...] -> [B..., o..., l...] -> merge the l's
  int64_t perm[TPR_MAX_RANK], dims[TPR_MAX_RANK];
  int r = 0;
  if (nb + 2 * ns > TPR_MAX_RANK)
    return tpr_graph_fail(g, TPR_UNIMPLEMENTED, "max pooling: too many dims");
  const tpr_type_t* t = tpr_value_type(g, v);
  for (int i = 0; i < nb; i++) perm[r++] = i;
  for (int d = 0; d < ns; d++) perm[r++] = nb + 2 * d;
  for (int d = 0; d < ns; d++) perm[r++] = nb + 2 * d + 1;
  v = tpr_transpose(g, v, perm);
  int64_t k = 1;
  for (int d = 0; d < ns; d++) k *= len[d];
  for (int i = 0; i < nb; i++) dims[i] = t->dims[i];
  for (int d = 0; d < ns; d++) dims[nb + d] = out[d];
  dims[nb + ns] = k;
  return tpr_reshape(g, v, nb + ns + 1, dims);
}

// Max over windows and the flat input-plane index of the first maximum.
// |idx| holds positions in the input padded by |pad_lo| (padding reads
// -inf and is never picked over real data).
static void max_windows(lw_ctx_t* ctx, const tpr_type_t* xt, int ns,
                        int64_t* const* idx, const int64_t* out,
                        const int64_t* len, const int64_t* pad_lo,
                        const int64_t* pad_hi) {
  tpr_graph_t* g = G;
  int nb = xt->rank - ns;
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), xt->dtype);
  // Flat positions within the spatial plane, -1 in the padding.
  tpr_type_t pt = tpr_type_make(TPR_DTYPE_S64, ns, xt->dims + nb);
  tpr_value_t pos = tpr_constant_i64(g, TPR_DTYPE_S64, 0);
  pos = tpr_broadcast_in_dim(g, pos, ns, pt.dims, NULL);
  int64_t stride = 1;
  for (int d = ns - 1; d >= 0; d--) {
    tpr_value_t io = lw_mul(g, tpr_iota(g, pt, d),
                            lw_k(g, tpr_iota(g, pt, d), (double)stride));
    pos = lw_add(g, pos, io);
    stride *= pt.dims[d];
  }
  int64_t lo[TPR_MAX_RANK] = {0}, hi[TPR_MAX_RANK] = {0};
  for (int d = 0; d < ns; d++) lo[nb + d] = pad_lo[d], hi[nb + d] = pad_hi[d];
  x = tpr_pad(g, x, tpr_constant_lowest(g, xt->dtype), lo, hi, NULL);
  pos = tpr_pad(g, pos, tpr_constant_i64(g, TPR_DTYPE_S64, -1), lo + nb,
                hi + nb, NULL);
  tpr_value_t xw = gather_windows(g, x, ns, idx, out, len);
  tpr_value_t pw = gather_windows(g, pos, ns, idx, out, len);
  const tpr_type_t* wt = tpr_value_type(g, xw);
  pw = tpr_broadcast_to(g, pw, wt->rank, wt->dims);
  tpr_value_t vals, kidx;
  tpr_argreduce(g, xw, wt->rank - 1, true, &vals, &kidx);
  // indices: pw[..., kidx]
  tpr_type_t kt = *tpr_value_type(g, kidx);
  kt.dims[kt.rank++] = 1;
  tpr_value_t sel = tpr_gather_along(g, pw, wt->rank - 1, lw_reshape_to(g, kidx, &kt));
  lw_set(ctx, 0, vals);
  if (ctx->num_outs > 1) lw_set(ctx, 1, sel);
}

// max_pool{2,3}d_with_indices(self, kernel_size, stride=[], padding=0,
// dilation=1, ceil_mode=False) -> (out, indices)
static tpr_status_t max_pool(lw_ctx_t* ctx, int ns) {
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, 0, ns, &xt));
  int64_t k[MAXS], s[MAXS], p[MAXS], dl[MAXS];
  if (!ilist(ctx, 1, ns, 1, k) || !ilist(ctx, 2, ns, 0, s) ||
      !ilist(ctx, 3, ns, 0, p) || !ilist(ctx, 4, ns, 1, dl))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad kernel/stride/padding/dilation");
  const tpr_type_t* ot = &ctx->out_types[0];
  scratch_t sc = {0};
  int64_t* idx[MAXS];
  int64_t out[MAXS], hi[MAXS];
  for (int d = 0; d < ns; d++) {
    if (s[d] == 0) s[d] = k[d];
    int64_t in = xt.dims[xt.rank - ns + d];
    out[d] = ot->dims[ot->rank - ns + d];
    if (k[d] < 1 || s[d] < 1 || dl[d] < 1 || p[d] < 0 || p[d] > k[d] / 2) {
      scratch_free(&sc);
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad kernel/stride/padding/dilation");
    }
    int64_t need = out[d] ? (out[d] - 1) * s[d] + (k[d] - 1) * dl[d] + 1 : 0;
    hi[d] = need > in + p[d] ? need - in - p[d] : 0;
    idx[d] = (int64_t*)scratch_alloc(&sc, (size_t)(out[d] * k[d]) * sizeof(int64_t));
    if (!idx[d]) {
      scratch_free(&sc);
      return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of host memory");
    }
    for (int64_t o = 0; o < out[d]; o++)
      for (int64_t j = 0; j < k[d]; j++) idx[d][o * k[d] + j] = o * s[d] + j * dl[d];
  }
  max_windows(ctx, &xt, ns, idx, out, k, p, hi);
  scratch_free(&sc);
  return lw_done(ctx);
}
static tpr_status_t lower_max_pool2d(lw_ctx_t* c) { return max_pool(c, 2); }
static tpr_status_t lower_max_pool3d(lw_ctx_t* c) { return max_pool(c, 3); }

// adaptive_max_pool{2,3}d(self, output_size) -> (out, indices). Windows of
// unequal length repeat their last element (it cannot change the first
// maximum).
static tpr_status_t adaptive_max(lw_ctx_t* ctx, int ns) {
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, 0, ns, &xt));
  const tpr_type_t* ot = &ctx->out_types[0];
  scratch_t sc = {0};
  int64_t* idx[MAXS];
  int64_t out[MAXS], len[MAXS], zero[MAXS] = {0};
  for (int d = 0; d < ns; d++) {
    int64_t in = xt.dims[xt.rank - ns + d];
    out[d] = ot->dims[ot->rank - ns + d];
    len[d] = 1;
    for (int64_t o = 0; o < out[d]; o++) {
      int64_t n = adaptive_end(o, in, out[d]) - adaptive_start(o, in, out[d]);
      if (n > len[d]) len[d] = n;
    }
    idx[d] = (int64_t*)scratch_alloc(&sc, (size_t)(out[d] * len[d]) * sizeof(int64_t));
    if (!idx[d]) {
      scratch_free(&sc);
      return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of host memory");
    }
    for (int64_t o = 0; o < out[d]; o++) {
      int64_t a = adaptive_start(o, in, out[d]), b = adaptive_end(o, in, out[d]);
      for (int64_t j = 0; j < len[d]; j++)
        idx[d][o * len[d] + j] = a + j < b ? a + j : b - 1;
    }
  }
  max_windows(ctx, &xt, ns, idx, out, len, zero, zero);
  scratch_free(&sc);
  return lw_done(ctx);
}
static tpr_status_t lower_adaptive_max2d(lw_ctx_t* c) { return adaptive_max(c, 2); }
static tpr_status_t lower_adaptive_max3d(lw_ctx_t* c) { return adaptive_max(c, 3); }

// fractional_max_pool{2,3}d(self, kernel_size, output_size, random_samples)
// -> (out, indices). Each plane (leading index p) has its own windows: along
// spatial dim d, with u its random sample, alpha = (in - k) / (out - 1) and
// window i starting at trunc((i + u) * alpha) - trunc(u * alpha), the last
// at in - k. The samples are ordered [W, H] in 2-d and [T, H, W] in 3-d, as
// the CPU kernel reads them, and the starts are computed in the input dtype
// as it does (each bf16 step rounded: an optimization barrier keeps XLA from
// skipping the roundings). Windows are gathered by flat position within the
// plane; the first maximum wins.
static tpr_status_t fractional_max(lw_ctx_t* ctx, int ns) {
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, 0, ns, &xt));
  const tpr_type_t* st = lw_arg_type(ctx, 3);
  int64_t k[MAXS], out[MAXS];
  if (!ilist(ctx, 1, ns, 1, k) || !ilist(ctx, 2, ns, 1, out) || !st || ctx->num_outs != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs kernel_size, output_size and samples");
  tpr_graph_t* g = G;
  const int nb = xt.rank - ns;
  int64_t planes = 1, plane = 1, nwin = 1, nout = 1;
  for (int i = 0; i < nb; i++) planes *= xt.dims[i];
  for (int d = 0; d < ns; d++) {
    int64_t in = xt.dims[nb + d];
    if (k[d] < 1 || out[d] < 1 || out[d] + k[d] - 1 > in)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "pool size too large for the input");
    plane *= in, nwin *= k[d], nout *= out[d];
  }
  // Plane p reads sample row p (an unbatched input reads batch 0's rows).
  int64_t rows = 1;
  for (int i = 0; i + 1 < st->rank; i++) rows *= st->dims[i];
  if (st->rank < 1 || st->dims[st->rank - 1] != ns || rows < planes)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "random_samples must hold %lld rows of %d",
                   (long long)planes, ns);
  const tpr_dtype_t sd = ctx->out_types[0].dtype;  // the CPU computes starts in it
  int64_t sdims[2] = {rows, ns}, r0[2] = {0, 0}, r1[2] = {planes, ns}, r1s[2] = {1, 1};
  tpr_value_t samples = tpr_slice(g, tpr_reshape(g, lw_cast(g, lw_value(ctx, 3), sd), 2, sdims),
                                  r0, r1, r1s);
  const bool narrow = sd == TPR_DTYPE_BF16 || sd == TPR_DTYPE_F16;
  // Full index space [P, out..., k...]; flat positions add up over the dims.
  int64_t full[TPR_MAX_RANK];
  if (1 + 2 * ns > TPR_MAX_RANK) return lw_fail(ctx, TPR_UNIMPLEMENTED, "too many dims");
  full[0] = planes;
  for (int d = 0; d < ns; d++) full[1 + d] = out[d], full[1 + ns + d] = k[d];
  tpr_value_t pos = TPR_VALUE_NONE;
  int64_t stride = plane;
  for (int d = 0; d < ns; d++) {
    int64_t in = xt.dims[nb + d];
    stride /= in;
    int col = ns == 2 ? 1 - d : d;  // 2-d samples are [W, H]
    int64_t s0[2] = {0, col}, s1[2] = {planes, col + 1}, one[2] = {1, 1};
    int64_t pd[2] = {planes, out[d]};
    tpr_type_t pt = tpr_type_make(sd, 2, pd);
    tpr_value_t u = tpr_broadcast_to(g, tpr_slice(g, samples, s0, s1, one), 2, pd);
    tpr_value_t alpha = lw_div(g, lw_full(g, (double)(in - k[d]), sd, &pt),
                               lw_full(g, (double)(out[d] > 1 ? out[d] - 1 : 1), sd, &pt));
    tpr_value_t i = tpr_convert(g, tpr_iota(g, tpr_type_make(TPR_DTYPE_S64, 2, pd), 1), sd);
    tpr_value_t a = lw_add(g, i, u), b = lw_mul(g, u, alpha);
    if (narrow) a = tpr_optimization_barrier(g, a), alpha = tpr_optimization_barrier(g, alpha);
    a = lw_mul(g, a, alpha);
    if (narrow) a = tpr_optimization_barrier(g, a), b = tpr_optimization_barrier(g, b);
    tpr_value_t start = lw_sub(g, tpr_convert(g, a, TPR_DTYPE_S64), tpr_convert(g, b, TPR_DTYPE_S64));
    tpr_value_t is_last = lw_cmpk(g, TPR_CMP_EQ, tpr_iota(g, tpr_type_make(TPR_DTYPE_S64, 2, pd), 1),
                                  (double)(out[d] - 1));
    start = lw_sel(g, is_last, lw_k(g, start, (double)(in - k[d])), start);
    // start[p, o] + j, at dims (0, 1 + d, 1 + ns + d) of the full space
    int64_t wd[3] = {planes, out[d], k[d]}, bdims[3] = {0, 1 + d, 1 + ns + d};
    int64_t sd3[3] = {planes, out[d], 1};
    tpr_value_t w = lw_add(g, tpr_broadcast_to(g, tpr_reshape(g, start, 3, sd3), 3, wd),
                           tpr_iota(g, tpr_type_make(TPR_DTYPE_S64, 3, wd), 2));
    w = lw_mul(g, w, lw_k(g, w, (double)stride));
    w = tpr_broadcast_in_dim(g, w, 1 + 2 * ns, full, bdims);
    pos = d == 0 ? w : lw_add(g, pos, w);
  }
  int64_t flat[2] = {planes, nout * nwin}, win[3] = {planes, nout, nwin}, xd[2] = {planes, plane};
  tpr_value_t x = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), xt.dtype), 2, xd);
  tpr_value_t posw = tpr_reshape(g, pos, 3, win);
  tpr_value_t xw = tpr_reshape(g, tpr_gather_along(g, x, 1, tpr_reshape(g, pos, 2, flat)), 3, win);
  tpr_value_t vals, kidx;
  tpr_argreduce(g, xw, 2, true, &vals, &kidx);
  int64_t kd[3] = {planes, nout, 1};
  lw_set(ctx, 0, vals);
  lw_set(ctx, 1, tpr_gather_along(g, posw, 2, tpr_reshape(g, kidx, 3, kd)));
  return lw_done(ctx);
}
static tpr_status_t lower_fractional_max2d(lw_ctx_t* c) { return fractional_max(c, 2); }
static tpr_status_t lower_fractional_max3d(lw_ctx_t* c) { return fractional_max(c, 3); }

// Scatter-adds grad_output (arg 0) at |indices| (flat positions within the
// input plane of self, arg 1) into zeros of self's shape.
static tpr_status_t scatter_back(lw_ctx_t* ctx, int ns, int indices_arg) {
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, 1, ns, &xt));
  const tpr_type_t* gt = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, indices_arg);
  if (!gt || !it || gt->rank != xt.rank || it->rank != xt.rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grad_output/indices do not fit self");
  tpr_graph_t* g = G;
  int nb = xt.rank - ns;
  int64_t fd[TPR_MAX_RANK], gd[TPR_MAX_RANK];
  int64_t plane = 1, oplane = 1;
  for (int i = 0; i < nb; i++) fd[i] = gd[i] = xt.dims[i];
  for (int d = 0; d < ns; d++) plane *= xt.dims[nb + d], oplane *= gt->dims[nb + d];
  fd[nb] = plane;
  gd[nb] = oplane;
  tpr_value_t go = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), xt.dtype), nb + 1, gd);
  tpr_value_t ix = tpr_reshape(g, lw_cast(g, lw_value(ctx, indices_arg), TPR_DTYPE_S64),
                               nb + 1, gd);
  tpr_type_t ft = tpr_type_make(xt.dtype, nb + 1, fd);
  tpr_value_t r = tpr_scatter_along(g, lw_full(g, 0, xt.dtype, &ft), nb, ix, go, true);
  return lw_ret(ctx, r);
}
// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size,
// stride, padding, dilation, ceil_mode, indices)
static tpr_status_t lower_max_pool2d_bw(lw_ctx_t* c) { return scatter_back(c, 2, 7); }
static tpr_status_t lower_max_pool3d_bw(lw_ctx_t* c) { return scatter_back(c, 3, 7); }
// adaptive_max_pool{2,3}d_backward(grad_output, self, indices)
static tpr_status_t lower_adaptive_max2d_bw(lw_ctx_t* c) { return scatter_back(c, 2, 2); }
static tpr_status_t lower_adaptive_max3d_bw(lw_ctx_t* c) { return scatter_back(c, 3, 2); }
// fractional_max_pool{2,3}d_backward(grad_output, self, kernel_size,
// output_size, indices)
static tpr_status_t lower_fractional_max2d_bw(lw_ctx_t* c) { return scatter_back(c, 2, 4); }
static tpr_status_t lower_fractional_max3d_bw(lw_ctx_t* c) { return scatter_back(c, 3, 4); }

//===--- average pooling ---------------------------------------------------===//

typedef struct {
  int ns, nb;
  int64_t k[MAXS], s[MAXS], p[MAXS], in[MAXS], out[MAXS];
  bool count_include_pad;
  int64_t divisor;  // 0: none
} avg_t;

// Args from |first|: kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override.
static tpr_status_t avg_params(lw_ctx_t* ctx, int first, int ns,
                               const tpr_type_t* xt, const tpr_type_t* ot,
                               avg_t* a) {
  a->ns = ns;
  a->nb = xt->rank - ns;
  if (!ilist(ctx, first, ns, 1, a->k) || !ilist(ctx, first + 1, ns, 0, a->s) ||
      !ilist(ctx, first + 2, ns, 0, a->p))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad kernel/stride/padding");
  a->count_include_pad = lw_bool(ctx, first + 4, true);
  a->divisor = lw_is_none(ctx, first + 5) ? 0 : lw_int(ctx, first + 5, 0);
  for (int d = 0; d < ns; d++) {
    if (a->s[d] == 0) a->s[d] = a->k[d];
    a->in[d] = xt->dims[a->nb + d];
    a->out[d] = ot->dims[a->nb + d];
    if (a->k[d] < 1 || a->s[d] < 1 || a->p[d] < 0 || a->p[d] > a->k[d] / 2)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad kernel/stride/padding");
  }
  return tpr_ok_status();
}

// Per-output-position divisors (PyTorch's: the window clipped to the
// padded input, or to the input without count_include_pad), as a constant
// of the output's shape.
static tpr_value_t avg_divisor(tpr_graph_t* g, const avg_t* a,
                               const tpr_type_t* full) {
  tpr_dtype_t dt = full->dtype;
  if (a->divisor)
    return lw_full(g, (double)a->divisor, dt, full);
  int64_t n = 1;
  for (int d = 0; d < a->ns; d++) n *= a->out[d];
  double* divs = (double*)tpr_malloc((size_t)n * sizeof(double) + 1);
  if (!divs) return tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "avg_pool: out of memory");
  for (int64_t f = 0; f < n; f++) {
    int64_t rem = f, div = 1;
    for (int d = a->ns - 1; d >= 0; d--) {
      int64_t o = rem % a->out[d];
      rem /= a->out[d];
      int64_t st = o * a->s[d] - a->p[d];
      int64_t en = st + a->k[d] < a->in[d] + a->p[d] ? st + a->k[d] : a->in[d] + a->p[d];
      int64_t pool = en - st;
      if (st < 0) st = 0;
      if (en > a->in[d]) en = a->in[d];
      div *= a->count_include_pad ? pool : en - st;
    }
    divs[f] = (double)div;
  }
  tpr_value_t c = lw_cast(g, tpr_constant_dense(g, tpr_type_make(TPR_DTYPE_F64, a->ns,
                                                                 full->dims + a->nb),
                                                divs),
                          dt);
  tpr_free(divs);
  return tpr_broadcast_to(g, c, full->rank, full->dims);
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override)
static tpr_status_t avg_pool(lw_ctx_t* ctx, int ns) {
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, 0, ns, &xt));
  tpr_type_t ot = ctx->out_types[0];
  avg_t a;
  TPR_RETURN_IF_ERROR(avg_params(ctx, 1, ns, &xt, &ot, &a));
  ot.dtype = xt.dtype;
  tpr_graph_t* g = G;
  int64_t w[TPR_MAX_RANK], st[TPR_MAX_RANK], lo[TPR_MAX_RANK], hi[TPR_MAX_RANK];
  int64_t lim[TPR_MAX_RANK], zero[TPR_MAX_RANK] = {0};
  for (int i = 0; i < xt.rank; i++) w[i] = st[i] = 1, lo[i] = hi[i] = 0, lim[i] = ot.dims[i];
  for (int d = 0; d < ns; d++) {
    int i = a.nb + d;
    w[i] = a.k[d], st[i] = a.s[d], lo[i] = a.p[d];
    int64_t need = (a.out[d] - 1) * a.s[d] + a.k[d] - a.in[d] - a.p[d];
    hi[i] = need > 0 ? need : 0;
  }
  tpr_value_t x = lw_cast(g, lw_value(ctx, 0), xt.dtype);
  tpr_value_t sum = tpr_reduce_window(g, x, tpr_constant_f64(g, xt.dtype, 0),
                                      TPR_REDUCE_SUM, w, st, NULL, NULL, lo, hi);
  sum = tpr_slice(g, sum, zero, lim, NULL);
  return lw_ret(ctx, lw_div(g, sum, avg_divisor(g, &a, &ot)));
}
static tpr_status_t lower_avg_pool2d(lw_ctx_t* c) { return avg_pool(c, 2); }
static tpr_status_t lower_avg_pool3d(lw_ctx_t* c) { return avg_pool(c, 3); }

// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding,
// ceil_mode, count_include_pad, divisor_override): each input position
// sums grad/divisor over the windows holding it, i.e. a window sum over
// the stride-dilated gradient padded by k-1-p.
static tpr_status_t avg_pool_bw(lw_ctx_t* ctx, int ns) {
  tpr_type_t xt;
  TPR_RETURN_IF_ERROR(spatial_input(ctx, 1, ns, &xt));
  const tpr_type_t* gtp = lw_arg_type(ctx, 0);
  if (!gtp || gtp->rank != xt.rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "grad_output rank differs from self");
  tpr_type_t gt = *gtp;
  gt.dtype = xt.dtype;
  avg_t a;
  TPR_RETURN_IF_ERROR(avg_params(ctx, 2, ns, &xt, &gt, &a));
  tpr_graph_t* g = G;
  tpr_value_t go = lw_div(g, lw_cast(g, lw_value(ctx, 0), xt.dtype),
                          avg_divisor(g, &a, &gt));
  int64_t w[TPR_MAX_RANK], bd[TPR_MAX_RANK], lo[TPR_MAX_RANK], hi[TPR_MAX_RANK];
  int64_t lim[TPR_MAX_RANK], zero[TPR_MAX_RANK] = {0};
  for (int i = 0; i < xt.rank; i++) w[i] = bd[i] = 1, lo[i] = hi[i] = 0, lim[i] = xt.dims[i];
  for (int d = 0; d < ns; d++) {
    int i = a.nb + d;
    w[i] = a.k[d], bd[i] = a.s[d], lo[i] = a.k[d] - 1 - a.p[d];
    int64_t h = a.in[d] + a.p[d] - (a.out[d] - 1) * a.s[d] - 1;
    hi[i] = h > 0 ? h : 0;
  }
  tpr_value_t r = tpr_reduce_window(g, go, tpr_constant_f64(g, xt.dtype, 0),
                                    TPR_REDUCE_SUM, w, NULL, bd, NULL, lo, hi);
  return lw_ret(ctx, tpr_slice(g, r, zero, lim, NULL));
}
static tpr_status_t lower_avg_pool2d_bw(lw_ctx_t* c) { return avg_pool_bw(c, 2); }
static tpr_status_t lower_avg_pool3d_bw(lw_ctx_t* c) { return avg_pool_bw(c, 3); }

//===--- im2col / col2im, pixel shuffle -------------------------------------===//

// The per-dim selection of im2col: position o*stride + j*dilation of the
// zero-padded input for the flattened (o, j), o over |out|, j over |k|.
static bool unfold_map(scratch_t* s, dimmap_t* dm, int64_t in_padded,
                       int64_t out, int64_t k, int64_t st, int64_t dl) {
  if (!dimmap_alloc(s, dm, in_padded, out * k, true)) return false;
  for (int64_t o = 0; o < out; o++)
    for (int64_t j = 0; j < k; j++) dimmap_pick(dm, o * k + j, o * st + j * dl);
  return true;
}

// im2col(self, kernel_size, dilation, padding, stride): [N?, C, H, W] ->
// [N?, C*kh*kw, L]; col2im(self, output_size, kernel_size, dilation,
// padding, stride) is its adjoint (overlapping patches add up).
static tpr_status_t fold_common(lw_ctx_t* ctx, bool col2im) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_type_t* ot = &ctx->out_types[0];
  int a = col2im ? 2 : 1;
  int64_t k[2], dl[2], p[2], st[2], img[2];
  if (!t || !ilist(ctx, a, 2, 1, k) || !ilist(ctx, a + 1, 2, 1, dl) ||
      !ilist(ctx, a + 2, 2, 0, p) || !ilist(ctx, a + 3, 2, 1, st) ||
      (col2im && !ilist(ctx, 1, 2, 0, img)))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad sizes");
  tpr_dtype_t dt = lw_opmath(t->dtype);
  if (!tpr_dtype_is_float(dt))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "needs a floating input");
  const tpr_type_t* im = col2im ? ot : t;  // the image side
  int nb = im->rank - 3;                   // 0 or 1 batch dims
  if (!col2im) img[0] = im->dims[nb + 1], img[1] = im->dims[nb + 2];
  int64_t out[2], hp[2];
  for (int d = 0; d < 2; d++) {
    hp[d] = img[d] + 2 * p[d];
    int64_t span = dl[d] * (k[d] - 1) + 1;
    out[d] = hp[d] >= span ? (hp[d] - span) / st[d] + 1 : 0;
    if (k[d] < 1 || dl[d] < 1 || st[d] < 1 || p[d] < 0 || out[d] < 1)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "kernel does not fit the image");
  }
  int64_t c = im->dims[nb];
  scratch_t s = {0};
  dimmap_t dm[2];
  for (int d = 0; d < 2; d++)
    if (!unfold_map(&s, &dm[d], hp[d], out[d], k[d], st[d], dl[d])) {
      scratch_free(&s);
      return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of host memory");
    }
  tpr_graph_t* g = G;
  tpr_value_t v = lw_cast(g, lw_value(ctx, 0), dt);
  int64_t six[8], perm[8];
  for (int i = 0; i < nb; i++) six[i] = im->dims[0], perm[i] = i;
  // [C, oh, kh, ow, kw] <-> [C, kh, kw, oh, ow] (after the batch dims)
  static const int64_t kPerm[5] = {0, 2, 4, 1, 3};
  for (int i = 0; i < 5; i++) perm[nb + i] = nb + kPerm[i];
  if (!col2im) {
    int64_t lo[4] = {0}, hi[4] = {0};
    lo[nb + 1] = hi[nb + 1] = p[0];
    lo[nb + 2] = hi[nb + 2] = p[1];
    v = tpr_pad(g, v, tpr_constant_f64(g, dt, 0), lo, hi, NULL);
    v = apply_maps(g, v, 2, dm, false);  // [N?, C, oh*kh, ow*kw]
    int64_t d5[5] = {c, out[0], k[0], out[1], k[1]};
    memcpy(six + nb, d5, sizeof d5);
    v = tpr_transpose(g, tpr_reshape(g, v, nb + 5, six), perm);
  } else {
    int64_t d5[5] = {c, k[0], k[1], out[0], out[1]};
    memcpy(six + nb, d5, sizeof d5);
    int64_t inv[8];
    for (int i = 0; i < nb + 5; i++) inv[perm[i]] = i;
    v = tpr_transpose(g, tpr_reshape(g, v, nb + 5, six), inv);
    int64_t d4[4];
    for (int i = 0; i < nb; i++) d4[i] = six[i];
    d4[nb] = c, d4[nb + 1] = out[0] * k[0], d4[nb + 2] = out[1] * k[1];
    v = apply_maps(g, tpr_reshape(g, v, nb + 3, d4), 2, dm, true);
    int64_t st0[4] = {0}, lim[4];
    for (int i = 0; i < nb + 1; i++) lim[i] = ot->dims[i];
    st0[nb + 1] = p[0], st0[nb + 2] = p[1];
    lim[nb + 1] = p[0] + img[0], lim[nb + 2] = p[1] + img[1];
    v = tpr_slice(g, v, st0, lim, NULL);
  }
  scratch_free(&s);
  return lw_ret(ctx, v);  // lw_set merges the trailing dims
}
static tpr_status_t lower_im2col(lw_ctx_t* c) { return fold_common(c, false); }
static tpr_status_t lower_col2im(lw_ctx_t* c) { return fold_common(c, true); }

// pixel_shuffle(self, r): [*, C*r*r, H, W] -> [*, C, H*r, W*r];
// pixel_unshuffle(self, r) the inverse. Pure data movement.
static tpr_status_t shuffle_common(lw_ctx_t* ctx, bool unshuffle) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t r = lw_int(ctx, 1, 1);
  if (!t || t->rank < 3 || t->rank + 2 > TPR_MAX_RANK || r < 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs [*, C, H, W] and a factor >= 1");
  int nb = t->rank - 3;
  const tpr_type_t* ot = &ctx->out_types[0];
  // shuffle: [*, C, r, r, H, W] -> [*, C, H, r, W, r]
  // unshuffle: [*, C, H, r, W, r] -> [*, C, r, r, H, W]
  const tpr_type_t* small = unshuffle ? ot : t;  // the [C*r*r, H, W] side
  int64_t dims[TPR_MAX_RANK], perm[TPR_MAX_RANK];
  for (int i = 0; i < nb; i++) dims[i] = t->dims[i], perm[i] = i;
  int64_t c = small->dims[nb] / (r * r), h = small->dims[nb + 1], w = small->dims[nb + 2];
  static const int64_t kShuffle[5] = {0, 3, 1, 4, 2};
  static const int64_t kUnshuffle[5] = {0, 2, 4, 1, 3};
  int64_t a[5] = {c, r, r, h, w}, b[5] = {c, h, r, w, r};
  for (int i = 0; i < 5; i++) {
    dims[nb + i] = (unshuffle ? b : a)[i];
    perm[nb + i] = nb + (unshuffle ? kUnshuffle : kShuffle)[i];
  }
  tpr_value_t v = tpr_reshape(G, lw_value(ctx, 0), nb + 5, dims);
  return lw_ret(ctx, tpr_transpose(G, v, perm));
}
static tpr_status_t lower_pixel_shuffle(lw_ctx_t* c) { return shuffle_common(c, false); }
static tpr_status_t lower_pixel_unshuffle(lw_ctx_t* c) { return shuffle_common(c, true); }

#define OUT2(name, fn, out) LW_RULE(name, fn), LW_RULE(name "." out, fn)
#define UP(name)                                                 \
  OUT2(name, lower_upsample, "out"),                             \
      OUT2(name "_backward", lower_upsample, "grad_input")

LW_DEFINE_TABLE(pool,
    OUT2("_adaptive_avg_pool2d", lower_adaptive_avg2d, "out"),
    OUT2("_adaptive_avg_pool3d", lower_adaptive_avg3d, "out"),
    OUT2("_adaptive_avg_pool2d_backward", lower_adaptive_avg2d_bw, "out"),
    OUT2("_adaptive_avg_pool3d_backward", lower_adaptive_avg3d_bw, "out"),
    LW_RULE("adaptive_avg_pool3d_backward.grad_input", lower_adaptive_avg3d_bw),
    OUT2("adaptive_max_pool2d", lower_adaptive_max2d, "out"),
    OUT2("adaptive_max_pool3d", lower_adaptive_max3d, "out"),
    OUT2("adaptive_max_pool2d_backward", lower_adaptive_max2d_bw, "grad_input"),
    OUT2("adaptive_max_pool3d_backward", lower_adaptive_max3d_bw, "grad_input"),
    OUT2("fractional_max_pool2d", lower_fractional_max2d, "output"),
    OUT2("fractional_max_pool3d", lower_fractional_max3d, "output"),
    OUT2("fractional_max_pool2d_backward", lower_fractional_max2d_bw, "grad_input"),
    OUT2("fractional_max_pool3d_backward", lower_fractional_max3d_bw, "grad_input"),
    OUT2("max_pool2d_with_indices", lower_max_pool2d, "out"),
    OUT2("max_pool3d_with_indices", lower_max_pool3d, "out"),
    OUT2("max_pool2d_with_indices_backward", lower_max_pool2d_bw, "grad_input"),
    OUT2("max_pool3d_with_indices_backward", lower_max_pool3d_bw, "grad_input"),
    OUT2("avg_pool2d", lower_avg_pool2d, "out"),
    OUT2("avg_pool3d", lower_avg_pool3d, "out"),
    OUT2("avg_pool2d_backward", lower_avg_pool2d_bw, "grad_input"),
    OUT2("avg_pool3d_backward", lower_avg_pool3d_bw, "grad_input"),
    UP("upsample_nearest1d"), UP("upsample_nearest2d"), UP("upsample_nearest3d"),
    UP("_upsample_nearest_exact1d"), UP("_upsample_nearest_exact2d"),
    UP("_upsample_nearest_exact3d"), UP("upsample_linear1d"),
    UP("upsample_bilinear2d"), UP("upsample_trilinear3d"),
    UP("upsample_bicubic2d"), UP("_upsample_bilinear2d_aa"), UP("_upsample_bicubic2d_aa"),
    OUT2("reflection_pad1d", lower_reflection_pad1, "out"),
    OUT2("reflection_pad2d", lower_reflection_pad2, "out"),
    OUT2("reflection_pad3d", lower_reflection_pad3, "out"),
    OUT2("reflection_pad1d_backward", lower_reflection_pad1_bw, "grad_input"),
    OUT2("reflection_pad2d_backward", lower_reflection_pad2_bw, "grad_input"),
    OUT2("reflection_pad3d_backward", lower_reflection_pad3_bw, "grad_input"),
    OUT2("replication_pad1d", lower_replication_pad1, "out"),
    OUT2("replication_pad2d", lower_replication_pad2, "out"),
    OUT2("replication_pad3d", lower_replication_pad3, "out"),
    OUT2("replication_pad1d_backward", lower_replication_pad1_bw, "grad_input"),
    OUT2("replication_pad2d_backward", lower_replication_pad2_bw, "grad_input"),
    OUT2("replication_pad3d_backward", lower_replication_pad3_bw, "grad_input"),
    OUT2("im2col", lower_im2col, "out"),
    OUT2("col2im", lower_col2im, "out"),
    OUT2("pixel_shuffle", lower_pixel_shuffle, "out"),
    OUT2("pixel_unshuffle", lower_pixel_unshuffle, "out"),
);
