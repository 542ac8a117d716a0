// FFT rules: _fft_r2c, _fft_c2r, _fft_c2c, which torch.fft.* and stft
// decompose into. stablehlo.fft transforms the trailing 1..3 dims, so each
// group of at most three transformed dims is transposed to the back,
// transformed and transposed back. A real-to-complex transform is the RFFT
// of the last listed dim followed by complex FFTs of the others; complex-to-
// real is the reverse. XLA normalises inverse transforms by 1/n; PyTorch's
// `normalization` (0 none, 1 1/sqrt(n), 2 1/n, n the signal size) is applied
// on top, undoing XLA's factor first.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

// Transforms the |ng| dims |gd| of |x| (lengths |len|, in that order).
static tpr_value_t fft_group(tpr_graph_t* g, tpr_value_t x, const int64_t* gd,
                             int ng, tpr_fft_type_t type, const int64_t* len) {
  int rank = tpr_value_type(g, x)->rank;
  int64_t perm[TPR_MAX_RANK], inv[TPR_MAX_RANK];
  bool used[TPR_MAX_RANK] = {false};
  int k = 0;
  for (int i = 0; i < ng; i++) used[gd[i]] = true;
  for (int i = 0; i < rank; i++)
    if (!used[i]) perm[k++] = i;
  for (int i = 0; i < ng; i++) perm[k++] = gd[i];
  for (int i = 0; i < rank; i++) inv[perm[i]] = i;
  x = tpr_transpose(g, x, perm);
  x = tpr_fft(g, x, type, len, ng);
  return tpr_transpose(g, x, inv);
}

// Complex FFT (or IFFT) over dims |d[0..nd)|, three at a time.
static tpr_value_t fft_c2c(tpr_graph_t* g, tpr_value_t x, const int64_t* d,
                           int nd, bool forward) {
  for (int s = 0; s < nd; s += 3) {
    int ng = nd - s < 3 ? nd - s : 3;
    int64_t len[3];
    for (int i = 0; i < ng; i++) len[i] = tpr_value_type(g, x)->dims[d[s + i]];
    x = fft_group(g, x, d + s, ng, forward ? TPR_FFT_FFT : TPR_FFT_IFFT, len);
  }
  return x;
}

// The transformed dims from argument 1, wrapped and checked distinct.
static tpr_status_t fft_dims(lw_ctx_t* ctx, int64_t* d, int* nd) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  const tpr_arg_t* a = lw_arg(ctx, 1);
  if (!t || a->kind != TPR_ARG_INT_LIST || a->count > t->rank)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a tensor and a dim list");
  for (int i = 0; i < a->count; i++) {
    d[i] = lw_wrap_dim(a->ints[i], t->rank);
    if (d[i] < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
    for (int j = 0; j < i; j++)
      if (d[j] == d[i]) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "repeated dim");
  }
  *nd = a->count;
  return tpr_ok_status();
}

// Multiplies |x| (real or complex) by the normalisation factor: |n| the
// signal size, |xla_inverse| when XLA already divided by n.
static tpr_value_t normalize(lw_ctx_t* ctx, tpr_value_t x, double n,
                             bool xla_inverse) {
  int64_t mode = lw_int(ctx, 2, 0);
  double s = mode == 1 ? 1.0 / sqrt(n) : mode == 2 ? 1.0 / n : 1.0;
  if (xla_inverse) s *= n;
  if (s == 1.0 || n == 0) return x;
  tpr_graph_t* g = G;
  const tpr_type_t* t = tpr_value_type(g, x);
  if (!tpr_dtype_is_complex(t->dtype)) return lw_mul(g, x, lw_k(g, x, s));
  tpr_value_t re = tpr_unary(g, TPR_UNARY_REAL, x), im = tpr_unary(g, TPR_UNARY_IMAG, x);
  return tpr_binary(g, TPR_BINARY_COMPLEX, lw_mul(g, re, lw_k(g, re, s)),
                    lw_mul(g, im, lw_k(g, im, s)));
}

static tpr_status_t check_mode(lw_ctx_t* ctx) {
  int64_t mode = lw_int(ctx, 2, 0);
  if (mode < 0 || mode > 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "unknown normalization %lld",
                   (long long)mode);
  return tpr_ok_status();
}

// _fft_c2c(self, dim[], normalization, forward)
static tpr_status_t lower_fft_c2c(lw_ctx_t* ctx) {
  int64_t d[TPR_MAX_RANK];
  int nd;
  TPR_RETURN_IF_ERROR(fft_dims(ctx, d, &nd));
  TPR_RETURN_IF_ERROR(check_mode(ctx));
  if (!tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a complex out type");
  bool forward = lw_bool(ctx, 3, true);
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), OUT->dtype);
  double n = 1;
  for (int i = 0; i < nd; i++) n *= (double)lw_type(ctx, x)->dims[d[i]];
  if (n == 0) return lw_ret(ctx, x);
  x = fft_c2c(G, x, d, nd, forward);
  return lw_ret(ctx, normalize(ctx, x, n, !forward));
}

// _fft_r2c(self, dim[], normalization, onesided): the last listed dim gets
// n/2 + 1 outputs when onesided.
static tpr_status_t lower_fft_r2c(lw_ctx_t* ctx) {
  int64_t d[TPR_MAX_RANK];
  int nd;
  TPR_RETURN_IF_ERROR(fft_dims(ctx, d, &nd));
  TPR_RETURN_IF_ERROR(check_mode(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!tpr_dtype_is_complex(OUT->dtype) || tpr_dtype_is_complex(t->dtype) || nd == 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs a real input, a complex out type and a dim");
  tpr_dtype_t real = OUT->dtype == TPR_DTYPE_C128 ? TPR_DTYPE_F64 : TPR_DTYPE_F32;
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), real);
  double n = 1;
  for (int i = 0; i < nd; i++) n *= (double)t->dims[d[i]];
  if (n == 0) return lw_ret(ctx, tpr_broadcast_to(G, lw_k(G, x, 0), OUT->rank, OUT->dims));
  if (!lw_bool(ctx, 3, true)) {
    x = fft_c2c(G, lw_cast(G, x, OUT->dtype), d, nd, true);
  } else {
    int64_t last = d[nd - 1], len = t->dims[last];
    x = fft_group(G, x, &last, 1, TPR_FFT_RFFT, &len);
    x = fft_c2c(G, x, d, nd - 1, true);
  }
  return lw_ret(ctx, normalize(ctx, x, n, false));
}

// _fft_c2r(self, dim[], normalization, last_dim_size): the inverse of the
// onesided r2c; the last listed dim is cut or zero-padded to
// last_dim_size/2 + 1 inputs first.
static tpr_status_t lower_fft_c2r(lw_ctx_t* ctx) {
  int64_t d[TPR_MAX_RANK];
  int nd;
  TPR_RETURN_IF_ERROR(fft_dims(ctx, d, &nd));
  TPR_RETURN_IF_ERROR(check_mode(ctx));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t m = lw_int(ctx, 3, 0);
  if (!tpr_dtype_is_complex(t->dtype) || tpr_dtype_is_complex(OUT->dtype) ||
      nd == 0 || m < 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs a complex input, a real out type, a dim and "
                   "last_dim_size >= 1");
  tpr_dtype_t cd = OUT->dtype == TPR_DTYPE_F64 ? TPR_DTYPE_C128 : TPR_DTYPE_C64;
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), cd);
  int64_t last = d[nd - 1], want = m / 2 + 1, have = t->dims[last];
  if (have > want) {
    int64_t lo[TPR_MAX_RANK] = {0}, hi[TPR_MAX_RANK];
    for (int i = 0; i < t->rank; i++) hi[i] = t->dims[i];
    hi[last] = want;
    x = tpr_slice(G, x, lo, hi, NULL);
  } else if (have < want) {
    int64_t lo[TPR_MAX_RANK] = {0}, hi[TPR_MAX_RANK] = {0};
    hi[last] = want - have;
    x = tpr_pad(G, x, tpr_constant_f64(G, cd, 0), lo, hi, NULL);
  }
  double n = (double)m;
  for (int i = 0; i < nd - 1; i++) n *= (double)t->dims[d[i]];
  x = fft_c2c(G, x, d, nd - 1, false);
  x = fft_group(G, x, &last, 1, TPR_FFT_IRFFT, &m);
  return lw_ret(ctx, normalize(ctx, x, n, true));
}

LW_DEFINE_TABLE(fft,
    LW_RULE("_fft_c2c", lower_fft_c2c), LW_RULE("_fft_c2c.out", lower_fft_c2c),
    LW_RULE("_fft_r2c", lower_fft_r2c), LW_RULE("_fft_r2c.out", lower_fft_r2c),
    LW_RULE("_fft_c2r", lower_fft_c2r), LW_RULE("_fft_c2r.out", lower_fft_c2r));
