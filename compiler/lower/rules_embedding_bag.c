// _embedding_bag and _embedding_bag_forward_only: bags of embedding rows
// reduced by sum (optionally weighted), mean or max. Each index belongs to
// bag (number of offsets <= its position) - 1; indices equal to padding_idx
// and indices past the last bag (include_last_offset) take part in no bag,
// except in max mode, where they join the last bag as on the CPU.
// Results: output[B, D], offset2bag (bag of each index), bag_size (indices
// counted per bag, 0 past B), max_indices (max mode: the index of each
// maximal element, 0 for an empty bag; other modes: zeros).
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)

static tpr_status_t lower_embedding_bag(lw_ctx_t* ctx) {
  const tpr_type_t* wt = lw_arg_type(ctx, 0);
  const tpr_type_t* it = lw_arg_type(ctx, 1);
  const tpr_type_t* ot = lw_arg_type(ctx, 2);
  if (!wt || !it || !ot || wt->rank != 2 || it->rank != 1 || ot->rank != 1)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "needs 2-d weight, 1-d indices and 1-d offsets");
  if (ctx->num_outs != 4)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "expects four results");
  int64_t mode = lw_int(ctx, 4, 0);
  bool has_psw = lw_is_tensor(ctx, 6);
  int64_t pad = lw_int(ctx, 8, -1);
  if (mode < 0 || mode > 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "mode must be 0, 1 or 2");
  if (has_psw && mode != 0)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "per_sample_weights only supported with mode='sum'");
  if (pad < -1)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "negative padding_idx other than -1");
  const tpr_type_t* out = &ctx->out_types[0];
  tpr_graph_t* g = G;
  int64_t n = it->dims[0], no = ot->dims[0], d = wt->dims[1];
  int64_t nb = out->dims[0];
  tpr_dtype_t acc = lw_opmath(out->dtype);
  const tpr_dtype_t I = TPR_DTYPE_S64;
  static const int64_t kD0 = 0, kD1 = 1;

  tpr_value_t idx = lw_cast(g, lw_value(ctx, 1), I);
  tpr_value_t offs = lw_cast(g, lw_value(ctx, 2), I);
  // bag[n] = sum_j (offsets[j] <= n) - 1, over [N, NO].
  int64_t nno[2] = {n, no};
  tpr_value_t pos = tpr_iota(g, (tpr_type_t){I, 2, {n, no}}, 0);
  tpr_value_t ob = tpr_broadcast_in_dim(g, offs, 2, nno, &kD1);
  tpr_value_t le = lw_cast(g, lw_cmp(g, TPR_CMP_LE, ob, pos), I);
  tpr_value_t bag = lw_sub(g, tpr_reduce(g, le, TPR_REDUCE_SUM, &kD1, 1),
                           lw_full(g, 1, I, &(tpr_type_t){I, 1, {n}}));
  // Max mode on the CPU puts indices past the last offset
  // (include_last_offset) into the last bag.
  if (mode == 2 && lw_bool(ctx, 7, false) && nb > 0)
    bag = lw_min(g, bag, lw_k(g, bag, (double)(nb - 1)));
  tpr_value_t valid = lw_cmpk(g, TPR_CMP_GE, bag, 0);
  valid = tpr_binary(g, TPR_BINARY_AND, valid, lw_cmpk(g, TPR_CMP_LT, bag, (double)nb));
  if (pad >= 0)
    valid = tpr_binary(g, TPR_BINARY_AND, valid, lw_cmpk(g, TPR_CMP_NE, idx, (double)pad));

  // Membership mask [B, N].
  int64_t bn[2] = {nb, n};
  tpr_value_t bid = tpr_iota(g, (tpr_type_t){I, 2, {nb, n}}, 0);
  tpr_value_t member = tpr_binary(
      g, TPR_BINARY_AND,
      lw_cmp(g, TPR_CMP_EQ, tpr_broadcast_in_dim(g, bag, 2, bn, &kD1), bid),
      tpr_broadcast_in_dim(g, valid, 2, bn, &kD1));
  tpr_value_t count = tpr_reduce(g, lw_cast(g, member, I), TPR_REDUCE_SUM, &kD1, 1);

  // Rows [N, D].
  tpr_value_t rows = lw_cast(g, tpr_index_select(g, lw_value(ctx, 0), 0, idx), acc);
  int64_t nd[2] = {n, d};
  if (has_psw) {
    tpr_value_t w = lw_cast(g, lw_value(ctx, 6), acc);
    rows = lw_mul(g, rows, tpr_broadcast_in_dim(g, w, 2, nd, &kD0));
  }
  int64_t bnd[3] = {nb, n, d};
  static const int64_t kBN[2] = {0, 1}, kND[2] = {1, 2};
  tpr_value_t m3 = tpr_broadcast_in_dim(g, member, 3, bnd, kBN);
  tpr_value_t r3 = tpr_broadcast_in_dim(g, rows, 3, bnd, kND);
  tpr_value_t result, maxidx;
  tpr_type_t bdt = {I, 2, {nb, d}};
  if (mode == 2 && n == 0) {
    result = lw_full(g, 0, acc, &(tpr_type_t){acc, 2, {nb, d}});
    maxidx = lw_full(g, 0, I, &bdt);
  } else if (mode == 2) {
    // The CPU kernel walks each bag in order: the first member is taken,
    // later ones replace it only when strictly greater. So ties and all -inf
    // columns keep the first member, a NaN first member stays, later NaNs
    // are skipped. Empty bags give 0 and max index 0.
    tpr_value_t pos = tpr_iota(g, (tpr_type_t){I, 2, {nb, n}}, 1);
    tpr_value_t none = lw_full(g, (double)n, I, &(tpr_type_t){I, 2, {nb, n}});
    tpr_value_t first = tpr_reduce(g, lw_sel(g, member, pos, none), TPR_REDUCE_MIN, &kD1, 1);
    first = lw_min(g, first, lw_k(g, first, (double)(n - 1)));  // empty bags
    tpr_value_t fval = tpr_index_select(g, rows, 0, first);      // [B, D]
    tpr_value_t lowest = tpr_constant_lowest(g, acc);
    tpr_value_t ok3 = tpr_binary(g, TPR_BINARY_AND, m3,
                                 lw_un(g, TPR_UNARY_NOT, lw_isnan(g, r3)));
    tpr_value_t mv = tpr_reduce(g, lw_sel(g, ok3, r3, lw_splat(g, lowest, r3)),
                                TPR_REDUCE_MAX, &kD1, 1);
    static const int64_t kBD[2] = {0, 2};
    tpr_value_t hit = tpr_binary(
        g, TPR_BINARY_AND, ok3,
        lw_cmp(g, TPR_CMP_EQ, r3, tpr_broadcast_in_dim(g, mv, 3, bnd, kBD)));
    tpr_value_t pos3 = tpr_iota(g, (tpr_type_t){I, 3, {nb, n, d}}, 1);
    tpr_value_t mi = tpr_reduce(g, lw_sel(g, hit, pos3, lw_k(g, pos3, (double)n)),
                                TPR_REDUCE_MIN, &kD1, 1);
    tpr_value_t fnan = lw_isnan(g, fval);
    mi = lw_sel(g, fnan, tpr_broadcast_in_dim(g, first, 2, bdt.dims, &kD0), mi);
    mi = lw_min(g, mi, lw_k(g, mi, (double)(n - 1)));
    tpr_value_t nonempty = tpr_broadcast_in_dim(
        g, lw_cmpk(g, TPR_CMP_GT, count, 0), 2, bdt.dims, &kD0);
    result = lw_sel(g, nonempty, lw_sel(g, fnan, fval, mv), lw_k(g, mv, 0));
    tpr_value_t word = tpr_take_1d(g, idx, mi);
    maxidx = lw_sel(g, nonempty, word, lw_full(g, 0, I, &bdt));
  } else {
    tpr_value_t z3 = lw_sel(g, m3, r3, lw_k(g, r3, 0));
    result = tpr_reduce(g, z3, TPR_REDUCE_SUM, &kD1, 1);
    if (mode == 1) {
      // As on CPU: with include_last_offset, indices past the last offset
      // are left out of the sum but counted in the last bag's divisor.
      tpr_value_t cnt = count;
      if (lw_bool(ctx, 7, false) && nb > 0) {
        tpr_value_t bagc = lw_min(g, bag, lw_full(g, (double)(nb - 1), I, &(tpr_type_t){I, 1, {n}}));
        tpr_value_t v2 = lw_cmpk(g, TPR_CMP_GE, bag, 0);
        if (pad >= 0)
          v2 = tpr_binary(g, TPR_BINARY_AND, v2, lw_cmpk(g, TPR_CMP_NE, idx, (double)pad));
        tpr_value_t m2 = tpr_binary(
            g, TPR_BINARY_AND,
            lw_cmp(g, TPR_CMP_EQ, tpr_broadcast_in_dim(g, bagc, 2, bn, &kD1), bid),
            tpr_broadcast_in_dim(g, v2, 2, bn, &kD1));
        cnt = tpr_reduce(g, lw_cast(g, m2, I), TPR_REDUCE_SUM, &kD1, 1);
      }
      tpr_value_t c = lw_cast(g, lw_max(g, cnt, lw_k(g, cnt, 1)), acc);
      result = lw_div(g, result, tpr_broadcast_in_dim(g, c, 2, bdt.dims, &kD0));
    }
    maxidx = TPR_VALUE_NONE;
  }
  lw_set(ctx, 0, result);
  // offset2bag: the bag of each index (as many as the result holds).
  const tpr_type_t* t1 = &ctx->out_types[1];
  if (t1->rank != 1) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "bad offset2bag type");
  if (t1->dims[0] == n) lw_set(ctx, 1, bag);
  else if (tpr_type_numel(t1) == 0) lw_set(ctx, 1, lw_full(g, 0, t1->dtype, t1));
  else return lw_fail(ctx, TPR_UNIMPLEMENTED, "offset2bag of unexpected size");
  // bag_size: counts for the B bags, zeros after.
  const tpr_type_t* t2 = &ctx->out_types[2];
  if (t2->rank != 1 || t2->dims[0] < nb)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "bag_size of unexpected size");
  if (t2->dims[0] == nb) {
    lw_set(ctx, 2, count);
  } else {
    int64_t lo = 0, hi = t2->dims[0] - nb, in = 0;
    lw_set(ctx, 2, tpr_pad(g, count, tpr_constant_i64(g, I, 0), &lo, &hi, &in));
  }
  const tpr_type_t* t3 = &ctx->out_types[3];
  if (mode == 2) {
    if (t3->rank != 2 || t3->dims[0] != nb || t3->dims[1] != d)
      return lw_fail(ctx, TPR_UNIMPLEMENTED, "max_indices of unexpected shape");
    lw_set(ctx, 3, maxidx);
  } else {
    lw_set(ctx, 3, lw_full(g, 0, t3->dtype, t3));
  }
  return lw_done(ctx);
}

LW_DEFINE_TABLE(embedding_bag,
    LW_RULE("_embedding_bag", lower_embedding_bag),
    LW_RULE("_embedding_bag_forward_only", lower_embedding_bag));
