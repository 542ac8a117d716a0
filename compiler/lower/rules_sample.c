// Sampling and generated sequences: randperm and multinomial (sorting random
// keys), linspace, logspace, eye, tril/triu_indices, searchsorted,
// bucketize, histc, nonzero_static and repeat_interleave with a known
// output size.
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

//===--- random ------------------------------------------------------------===//

// A fresh generator state drawn from the call's state: ops that need more
// random bits than the executor reserves for them (4 per output element)
// draw from a new random key instead of running past their counter range.
static tpr_status_t split_state(lw_ctx_t* ctx, tpr_value_t* out) {
  tpr_value_t st = lw_generator(ctx);
  if (st == TPR_VALUE_NONE)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs the generator state as a GENERATOR argument");
  int64_t two = 2;
  tpr_value_t ns;
  tpr_rng_bits(G, st, tpr_type_make(TPR_DTYPE_U64, 1, &two), out, &ns);
  return tpr_ok_status();
}

// Uniform f32 in (0, 1] of |shape| (24 random bits, never 0: logs stay finite).
static tpr_value_t uniform_open0(tpr_graph_t* g, tpr_value_t st,
                                 const tpr_type_t* shape) {
  tpr_type_t bt = *shape;
  bt.dtype = TPR_DTYPE_U32;
  tpr_value_t bits, ns;
  tpr_rng_bits(g, st, bt, &bits, &ns);
  bits = tpr_binary(g, TPR_BINARY_SHIFT_RIGHT_LOGICAL, bits, lw_k(g, bits, 8));
  tpr_value_t u = tpr_convert(g, bits, TPR_DTYPE_F32);
  u = lw_add(g, u, lw_k(g, u, 1));
  return lw_mul(g, u, lw_k(g, u, ldexp(1.0, -24)));
}

// randperm(n, *, generator): indices sorted by 64 random bits each.
static tpr_status_t lower_randperm(lw_ctx_t* ctx) {
  if (OUT->rank != 1) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a 1-d out");
  int64_t n = OUT->dims[0];
  tpr_graph_t* g = G;
  tpr_type_t it = tpr_type_make(TPR_DTYPE_S64, 1, &n);
  if (n <= 1) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(split_state(ctx, &st));
  tpr_value_t keys, ns;
  tpr_rng_bits(g, st, tpr_type_make(TPR_DTYPE_U64, 1, &n), &keys, &ns);
  tpr_value_t ops[2] = {keys, tpr_iota(g, it, 0)}, outs[2];
  tpr_sort(g, ops, 2, 0, false, outs);
  return lw_ret(ctx, outs[1]);
}

// multinomial(self, num_samples, replacement, *, generator) over the last
// dim of a 1-d or 2-d weight tensor. Without replacement: the categories
// with the smallest E/w (E ~ Exp(1)), an exponential race equivalent to
// drawing one by one. With replacement: inverse CDF on the running sum.
static tpr_status_t lower_multinomial(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || t->rank < 1 || t->rank > 2 || !tpr_dtype_is_float(t->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs 1-d or 2-d float weights");
  int64_t k = lw_int(ctx, 1, 1), n = t->dims[t->rank - 1];
  int64_t rows = t->rank == 2 ? t->dims[0] : 1;
  bool repl = lw_bool(ctx, 2, false);
  if (k < 0 || n < 1 || (!repl && k > n))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "cannot draw %lld of %lld",
                   (long long)k, (long long)n);
  tpr_graph_t* g = G;
  if (k == 0 || rows == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_value_t st;
  TPR_RETURN_IF_ERROR(split_state(ctx, &st));
  int64_t rn[2] = {rows, n};
  tpr_type_t wt = tpr_type_make(TPR_DTYPE_F32, 2, rn);
  tpr_value_t w = lw_reshape_to(g, lw_cast(g, lw_value(ctx, 0), TPR_DTYPE_F32), &wt);
  if (!repl) {
    tpr_value_t e = lw_un(g, TPR_UNARY_NEG, lw_un(g, TPR_UNARY_LOG, uniform_open0(g, st, &wt)));
    tpr_value_t key = lw_div(g, e, w);  // w = 0: +inf, drawn last
    tpr_type_t it = wt;
    it.dtype = TPR_DTYPE_S64;
    tpr_value_t ops[2] = {key, tpr_iota(g, it, 1)}, outs[2];
    tpr_sort(g, ops, 2, 1, false, outs);
    int64_t s0[2] = {0, 0}, l0[2] = {rows, k};
    return lw_ret(ctx, tpr_slice(g, outs[1], s0, l0, NULL));
  }
  // cum[r, j] <= u * total counts the categories before the draw.
  static const int64_t kRC[2] = {0, 2};
  int64_t rkn[3] = {rows, k, n}, rk[2] = {rows, k};
  tpr_value_t cum = tpr_scan(g, w, 1, TPR_SCAN_SUM, false);
  int64_t s0[2] = {0, n - 1}, l0[2] = {rows, n};
  tpr_value_t total = tpr_slice(g, cum, s0, l0, NULL);  // [rows, 1]
  tpr_type_t ut = tpr_type_make(TPR_DTYPE_F32, 2, rk);
  tpr_value_t u = lw_sub(g, uniform_open0(g, st, &ut), lw_full(g, ldexp(1.0, -24), TPR_DTYPE_F32, &ut));
  tpr_value_t target = lw_mul(g, u, tpr_broadcast_to(g, total, 2, rk));
  tpr_value_t le = lw_cmp(g, TPR_CMP_LE, tpr_broadcast_in_dim(g, cum, 3, rkn, kRC),
                          tpr_broadcast_in_dim(g, target, 3, rkn, (int64_t[]){0, 1}));
  int64_t two = 2;
  tpr_value_t idx = tpr_reduce(g, lw_cast(g, le, TPR_DTYPE_S64), TPR_REDUCE_SUM, &two, 1);
  idx = lw_min(g, idx, lw_k(g, idx, (double)(n - 1)));
  return lw_ret(ctx, idx);
}

//===--- sequences ---------------------------------------------------------===//

// out[i] = start + i*step for the first half, end - (steps-1-i)*step for the
// second (PyTorch's symmetric formula), step = diff/(steps - 1), diff being
// end - start as the caller rounds it.
static tpr_value_t ramp(tpr_graph_t* g, tpr_value_t a, tpr_value_t b, tpr_value_t diff,
                        const tpr_type_t* shape, int64_t steps) {
  tpr_value_t i = tpr_iota(g, *shape, 0);
  // PyTorch divides by steps - 1 (lw_div_exact: not by its reciprocal).
  tpr_value_t step = lw_div_exact(g, diff, (double)(steps - 1));
  tpr_value_t lo = lw_add(g, a, lw_mul(g, i, step));
  tpr_value_t hi = lw_sub(g, b, lw_mul(g, lw_sub(g, lw_k(g, i, (double)(steps - 1)), i), step));
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LT, i, (double)(steps / 2)), lo, hi);
}

// linspace's values: in double for integer outs, else in the out dtype
// itself (the CPU kernel rounds every bf16/f16 operation).
static tpr_value_t lin(lw_ctx_t* ctx, tpr_dtype_t acc) {
  int64_t steps = OUT->dims[0];
  tpr_type_t shape = *OUT;
  shape.dtype = acc;
  tpr_value_t a = lw_in(ctx, 0, acc, &shape), b = lw_in(ctx, 1, acc, &shape);
  if (steps == 1) return a;
  return ramp(G, a, b, lw_sub(G, b, a), &shape, steps);
}

static tpr_dtype_t seq_acc(tpr_dtype_t od) {
  return tpr_dtype_is_float(od) ? od : TPR_DTYPE_F64;
}

// A 1-d out; complex sequences are not lowered (cleanly unsupported).
static tpr_status_t seq_check(lw_ctx_t* ctx) {
  if (tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtype %s is not supported",
                   tpr_dtype_name(OUT->dtype));
  if (OUT->rank != 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a 1-d out");
  return tpr_ok_status();
}

// linspace(start, end, steps, ...)
static tpr_status_t lower_linspace(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(seq_check(ctx));
  if (OUT->dims[0] == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_value_t v = lin(ctx, seq_acc(OUT->dtype));
  if (lw_is_int(OUT->dtype)) v = lw_trunc(G, v);
  return lw_ret(ctx, v);
}

// logspace's exponents as PyTorch's CPU kernel computes them: start, end
// and their difference in the out dtype, then the step, each exponent (the
// same symmetric formula as lin) and the power in double. (In the out dtype
// throughout, bfloat16 results were up to 5 ulp off.) The barrier keeps XLA
// from dropping the difference's rounding as excess precision.
static tpr_value_t log_exponents(lw_ctx_t* ctx) {
  tpr_graph_t* g = G;
  int64_t steps = OUT->dims[0];
  tpr_type_t shape = *OUT;
  shape.dtype = TPR_DTYPE_F64;
  // One step is base ** start, start not rounded to the out dtype.
  if (steps == 1) return lw_in(ctx, 0, TPR_DTYPE_F64, &shape);
  tpr_value_t a = lw_in(ctx, 0, OUT->dtype, OUT), b = lw_in(ctx, 1, OUT->dtype, OUT);
  tpr_value_t diff = lw_cast(g, tpr_optimization_barrier(g, lw_sub(g, b, a)), TPR_DTYPE_F64);
  a = lw_cast(g, a, TPR_DTYPE_F64);
  b = lw_cast(g, b, TPR_DTYPE_F64);
  return ramp(g, a, b, diff, &shape, steps);
}

// logspace(start, end, steps, base=10, ...): base ** linspace.
static tpr_status_t lower_logspace(lw_ctx_t* ctx) {
  TPR_RETURN_IF_ERROR(seq_check(ctx));
  if (OUT->dims[0] == 0) return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  tpr_value_t e = log_exponents(ctx);
  tpr_value_t v = tpr_binary(G, TPR_BINARY_POW, lw_k(G, e, lw_double(ctx, 3, 10.0)), e);
  if (lw_is_int(OUT->dtype)) v = lw_trunc(G, v);
  return lw_ret(ctx, v);
}

// eye(n) / eye.m(n, m)
static tpr_status_t lower_eye(lw_ctx_t* ctx) {
  if (OUT->rank != 2) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a 2-d out");
  tpr_type_t it = *OUT;
  it.dtype = TPR_DTYPE_S64;
  return lw_ret(ctx, lw_cmp(G, TPR_CMP_EQ, tpr_iota(G, it, 0), tpr_iota(G, it, 1)));
}

// tril_indices / triu_indices(row, col, offset): the shape is static, so
// the coordinates are a host-computed constant (row-major order).
static tpr_status_t tri_indices(lw_ctx_t* ctx, bool upper) {
  int64_t rows = lw_int(ctx, 0, 0), cols = lw_int(ctx, 1, 0), off = lw_int(ctx, 2, 0);
  if (OUT->rank != 2 || OUT->dims[0] != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a [2, N] out");
  int64_t n = OUT->dims[1];
  int64_t* data = (int64_t*)tpr_malloc((size_t)(2 * n + 1) * sizeof(int64_t));
  if (!data) return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of memory");
  int64_t k = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      if (upper ? c - r >= off : c - r <= off) {
        if (k < n) data[k] = r, data[n + k] = c;
        k++;
      }
  tpr_status_t s = tpr_ok_status();
  if (k != n)
    s = lw_fail(ctx, TPR_INTERNAL, "counted %lld indices, PyTorch expects %lld",
                (long long)k, (long long)n);
  else
    lw_set(ctx, 0, tpr_constant_dense(G, tpr_type_make(TPR_DTYPE_S64, 2, OUT->dims), data));
  tpr_free(data);
  TPR_RETURN_IF_ERROR(s);
  return lw_done(ctx);
}
static tpr_status_t lower_tril_indices(lw_ctx_t* ctx) { return tri_indices(ctx, false); }
static tpr_status_t lower_triu_indices(lw_ctx_t* ctx) { return tri_indices(ctx, true); }

//===--- searching, counting ------------------------------------------------===//

// The insertion place of every value of |v| (shape |out|) among the sorted
// last dim of |seq| (1-d, or leading dims equal to out's): the number of
// boundaries b with !(b >= x) (left) or !(b > x) (right). Negated compares
// put NaN values after every boundary, as PyTorch's binary search does.
static tpr_value_t insertion(lw_ctx_t* ctx, tpr_value_t seq, tpr_value_t v,
                             bool right) {
  tpr_graph_t* g = G;
  const tpr_type_t* ot = OUT;
  tpr_dtype_t cd = lw_promote(lw_type(ctx, seq)->dtype, lw_type(ctx, v)->dtype);
  const tpr_type_t* st = lw_type(ctx, seq);
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  if (st->rank < 1 || ot->rank >= TPR_MAX_RANK || st->rank - 1 > ot->rank)
    return tpr_graph_fail(g, TPR_INVALID_ARGUMENT,
                          "%s: boundaries of rank %d do not fit values of rank %d",
                          ctx->op_name, st->rank, ot->rank);
  int64_t m = st->dims[st->rank - 1];
  tpr_type_t full = *ot;
  full.dtype = cd;
  full.dims[full.rank++] = m;
  int64_t bd[TPR_MAX_RANK];
  tpr_value_t s = lw_cast(g, seq, cd);
  if (st->rank == 1) {
    bd[0] = full.rank - 1;
    s = tpr_broadcast_in_dim(g, s, full.rank, full.dims, bd);
  } else {  // leading dims match out's; the last is the boundaries'
    for (int i = 0; i < st->rank - 1; i++) bd[i] = i;
    bd[st->rank - 1] = full.rank - 1;
    s = tpr_broadcast_in_dim(g, s, full.rank, full.dims, bd);
  }
  for (int i = 0; i < ot->rank; i++) bd[i] = i;
  tpr_type_t vt = *ot;
  vt.dtype = cd;
  tpr_value_t xv = lw_cast_to(g, v, cd, &vt);
  tpr_value_t x = tpr_broadcast_in_dim(g, xv, full.rank, full.dims, bd);
  tpr_value_t past = lw_un(g, TPR_UNARY_NOT, lw_cmp(g, right ? TPR_CMP_GT : TPR_CMP_GE, s, x));
  int64_t last = full.rank - 1;
  return tpr_reduce(g, lw_cast(g, past, TPR_DTYPE_S64), TPR_REDUCE_SUM, &last, 1);
}

// searchsorted.Tensor/.Scalar(sorted_sequence, self, *, out_int32, right,
// side, sorter)
static tpr_status_t lower_searchsorted(lw_ctx_t* ctx) {
  const tpr_type_t* st = lw_arg_type(ctx, 0);
  if (!st || st->rank < 1 || !lw_is_tensor(ctx, 1))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a sorted sequence and values");
  const char* side = lw_str(ctx, 4, NULL);
  bool right = side ? strcmp(side, "right") == 0 : lw_bool(ctx, 3, false);
  tpr_value_t seq = lw_value(ctx, 0);
  if (lw_is_tensor(ctx, 5)) {
    int64_t last = st->rank - 1;
    seq = tpr_gather_along(G, seq, last, lw_value(ctx, 5));
  }
  if (st->rank > 1 && st->dims[st->rank - 1] == 0)
    return lw_ret(ctx, lw_full(G, 0, OUT->dtype, OUT));
  return lw_ret(ctx, insertion(ctx, seq, lw_value(ctx, 1), right));
}

// bucketize.Tensor/.Scalar(self, boundaries, *, out_int32, right)
static tpr_status_t lower_bucketize(lw_ctx_t* ctx) {
  const tpr_type_t* bt = lw_arg_type(ctx, 1);
  if (!bt || bt->rank != 1 || !lw_is_tensor(ctx, 0))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs values and 1-d boundaries");
  return lw_ret(ctx, insertion(ctx, lw_value(ctx, 1), lw_value(ctx, 0), lw_bool(ctx, 3, false)));
}

// histc(self, bins=100, min=0, max=0): equal-width bins over [min, max]
// (the data's range when min == max; widened by 1 each way if still
// equal); values outside, and NaN, are ignored; max falls in the last bin.
// Integer self (as CUDA allows; MoE routers count expert ids this way) is
// binned in float32, exact for |values| < 2^24, and counted in its own type.
static tpr_status_t lower_histc(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  int64_t bins = lw_int(ctx, 1, 100);
  if (!t || bins <= 0 || OUT->rank != 1 || OUT->dtype == TPR_DTYPE_BOOL ||
      tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs real self and bins > 0");
  tpr_graph_t* g = G;
  tpr_dtype_t acc = tpr_dtype_is_float(OUT->dtype) ? lw_opmath(OUT->dtype) : TPR_DTYPE_F32;
  int64_t n = tpr_type_numel(t);
  if (n == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_value_t x = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), acc), 1, &n);
  tpr_value_t lo = lw_is_tensor(ctx, 2) ? lw_cast(g, lw_value(ctx, 2), acc) : tpr_constant_f64(g, acc, 0);
  tpr_value_t hi = lw_is_tensor(ctx, 3) ? lw_cast(g, lw_value(ctx, 3), acc) : tpr_constant_f64(g, acc, 0);
  int64_t d0 = 0;
  tpr_value_t finite = lw_un(g, TPR_UNARY_IS_FINITE, x);
  tpr_value_t dmin = tpr_reduce(g, lw_sel(g, finite, x, lw_k(g, x, INFINITY)), TPR_REDUCE_MIN, &d0, 1);
  tpr_value_t dmax = tpr_reduce(g, lw_sel(g, finite, x, lw_k(g, x, -INFINITY)), TPR_REDUCE_MAX, &d0, 1);
  tpr_value_t same = lw_cmp(g, TPR_CMP_EQ, lo, hi);
  lo = lw_sel(g, same, dmin, lo);
  hi = lw_sel(g, same, dmax, hi);
  tpr_value_t same2 = lw_cmp(g, TPR_CMP_EQ, lo, hi);
  lo = lw_sel(g, same2, lw_sub(g, lo, lw_k(g, lo, 1)), lo);
  hi = lw_sel(g, same2, lw_add(g, hi, lw_k(g, hi, 1)), hi);
  tpr_value_t lov = lw_splat(g, lo, x), hiv = lw_splat(g, hi, x);
  tpr_value_t pos = lw_div(g, lw_mul(g, lw_sub(g, x, lov), lw_k(g, x, (double)bins)),
                           lw_sub(g, hiv, lov));
  tpr_value_t b = lw_cast(g, lw_un(g, TPR_UNARY_FLOOR, pos), TPR_DTYPE_S64);
  b = lw_min(g, b, lw_k(g, b, (double)(bins - 1)));
  tpr_value_t in = tpr_binary(g, TPR_BINARY_AND, lw_cmp(g, TPR_CMP_GE, x, lov),
                              lw_cmp(g, TPR_CMP_LE, x, hiv));
  b = lw_sel(g, in, b, lw_k(g, b, (double)bins));  // out of range: dropped
  tpr_dtype_t ct = tpr_dtype_is_float(OUT->dtype) ? acc : OUT->dtype;
  tpr_value_t counts = lw_full(g, 0, ct, &(tpr_type_t){ct, 1, {bins}});
  counts = tpr_put_1d(g, counts, b, lw_full(g, 1, ct, &(tpr_type_t){ct, 1, {n}}), true);
  return lw_ret(ctx, lw_cast(g, counts, OUT->dtype));
}

// nonzero_static(self, *, size, fill_value=-1): the first |size| nonzero
// coordinates in row-major order, padded with fill_value.
static tpr_status_t lower_nonzero_static(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || OUT->rank != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs self and a [size, rank] out");
  tpr_graph_t* g = G;
  int64_t size = OUT->dims[0], r = t->rank, n = tpr_type_numel(t);
  int64_t fill = lw_int(ctx, 2, -1);
  if (size == 0 || r == 0 || n == 0) {
    if (r == 0 && size > 0)  // a scalar: [size, 0]
      return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
    return lw_ret(ctx, lw_full(g, (double)fill, OUT->dtype, OUT));
  }
  tpr_value_t m = tpr_reshape(g, lw_nonzero(g, lw_value(ctx, 0)), 1, &n);
  tpr_value_t pos = lw_true_slots(g, m, size);  // false places: out of range, dropped
  tpr_type_t lt = tpr_type_make(TPR_DTYPE_S64, 1, &n);
  tpr_value_t linear = tpr_put_1d(g, lw_full(g, -1, TPR_DTYPE_S64, &(tpr_type_t){TPR_DTYPE_S64, 1, {size}}),
                                  pos, tpr_iota(g, lt, 0), false);
  int64_t s1[2] = {size, 1};
  tpr_value_t cols[TPR_MAX_RANK];
  int64_t stride = 1;
  for (int64_t d = r - 1; d >= 0; d--) {
    tpr_value_t c = lw_div(g, linear, lw_k(g, linear, (double)stride));
    c = tpr_binary(g, TPR_BINARY_REM, c, lw_k(g, c, (double)t->dims[d]));
    c = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, linear, 0), lw_k(g, c, (double)fill), c);
    cols[d] = tpr_reshape(g, c, 2, s1);
    stride *= t->dims[d];
  }
  return lw_ret(ctx, tpr_concatenate(g, cols, (int)r, 1));
}

// repeat_interleave.Tensor(repeats, *, output_size): i repeated repeats[i]
// times. PyTorch's meta kernel gives the size only when output_size is set.
// A 1 is scatter-added at each running end cum[i] (< size); the running sum
// of those marks is the source index of every place.
static tpr_status_t lower_repeat_interleave(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || t->rank > 1 || !lw_is_int(t->dtype) || OUT->rank != 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs 1-d integer repeats");
  tpr_graph_t* g = G;
  int64_t size = OUT->dims[0], n = tpr_type_numel(t);
  if (size == 0 || n == 0) return lw_ret(ctx, lw_full(g, 0, OUT->dtype, OUT));
  tpr_value_t rep = tpr_reshape(g, lw_cast(g, lw_value(ctx, 0), TPR_DTYPE_S64), 1, &n);
  tpr_value_t cum = tpr_scan(g, rep, 0, TPR_SCAN_SUM, false);
  tpr_type_t ot = tpr_type_make(TPR_DTYPE_S64, 1, &size);
  tpr_value_t marks = tpr_put_1d(g, lw_full(g, 0, TPR_DTYPE_S64, &ot), cum,
                                 lw_full(g, 1, TPR_DTYPE_S64, &(tpr_type_t){TPR_DTYPE_S64, 1, {n}}), true);
  return lw_ret(ctx, tpr_scan(g, marks, 0, TPR_SCAN_SUM, false));
}

LW_DEFINE_TABLE(sample,
    LW_RULE("randperm", lower_randperm), LW_RULE("randperm.generator", lower_randperm),
    LW_RULE("randperm.out", lower_randperm),
    LW_RULE("randperm.generator_out", lower_randperm),
    LW_RULE("multinomial", lower_multinomial), LW_RULE("multinomial.out", lower_multinomial),
    LW_RULE("linspace", lower_linspace), LW_RULE("linspace.out", lower_linspace),
    LW_RULE("logspace", lower_logspace), LW_RULE("logspace.out", lower_logspace),
    LW_RULE("eye", lower_eye), LW_RULE("eye.m", lower_eye),
    LW_RULE("eye.out", lower_eye), LW_RULE("eye.m_out", lower_eye),
    LW_RULE("tril_indices", lower_tril_indices),
    LW_RULE("tril_indices.out", lower_tril_indices),
    LW_RULE("triu_indices", lower_triu_indices),
    LW_RULE("triu_indices.out", lower_triu_indices),
    LW_RULE("searchsorted.Tensor", lower_searchsorted),
    LW_RULE("searchsorted.Tensor_out", lower_searchsorted),
    LW_RULE("searchsorted.Scalar", lower_searchsorted),
    LW_RULE("searchsorted.Scalar_out", lower_searchsorted),
    LW_RULE("bucketize.Tensor", lower_bucketize),
    LW_RULE("bucketize.Tensor_out", lower_bucketize),
    LW_RULE("bucketize.Scalar", lower_bucketize),
    LW_RULE("bucketize.Scalar_out", lower_bucketize),
    LW_RULE("histc", lower_histc), LW_RULE("histc.out", lower_histc),
    LW_RULE("nonzero_static", lower_nonzero_static),
    LW_RULE("nonzero_static.out", lower_nonzero_static),
    LW_RULE("repeat_interleave.Tensor", lower_repeat_interleave),
    LW_RULE("repeat_interleave.Tensor_out", lower_repeat_interleave));
