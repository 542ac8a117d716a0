// CTC loss: _ctc_loss and _ctc_loss_backward (torch.nn.CTCLoss; wav2vec2,
// HuBERT and other speech models fine-tuned with a CTC head).
//
// The forward (alpha) and backward (beta) recursions over time are loops on
// the device, one step per time step for the whole batch; each step works on
// the extended label sequence l' = (blank, l1, blank, l2, ..., blank) of
// length L' = 2 * max(target_lengths) + 1, as in PyTorch's CPU kernel:
//   alpha[0] = (lp[0, blank], lp[0, l1], -inf, ...)
//   alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1],
//                           alpha[t-1, s-2] if l'[s] != blank, l'[s-2])
//                 + lp[t, l'[s]]
//   nll = -logsumexp(alpha[T-1, L-1], alpha[T-1, L-2])   (L = 2 * len + 1)
// and beta likewise from the end. The gradient with respect to the log
// probabilities is exp(lp) minus the occupancy of class c at step t,
// sum_{s: l'[s] = c} alpha * beta / y over sum_s alpha * beta / y (y: the
// step's probability of l'[s]), zero past each input's length (and for
// infinite losses under zero_infinity). Lengths are static (int lists), so every per-sample bound
// is a constant mask. A label outside the classes is read clamped into range,
// as an unchecked index (PyTorch's kernels do not check labels either).
#include <stdlib.h>

#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

enum { A_LP, A_TARGETS, A_IN_LENS, A_TGT_LENS };

typedef struct {
  int64_t T, N, C, S, L;  // time, batch, classes, max target length, 2S+1
  int64_t blank;
  const int64_t* in_lens;
  const int64_t* tgt_lens;
  tpr_dtype_t dt;
  tpr_value_t lp;   // [T, N, C]
  tpr_value_t ext;  // [N, L] s64: the extended labels
} ctc_t;

// log(exp(a) + exp(b) + exp(c)), -inf when all three are.
static tpr_value_t lse3(tpr_graph_t* g, tpr_value_t a, tpr_value_t b, tpr_value_t c) {
  tpr_value_t m = lw_max(g, lw_max(g, a, b), c);
  tpr_value_t safe = tpr_select(g, lw_cmpk(g, TPR_CMP_EQ, m, -INFINITY), lw_k(g, m, 0), m);
  tpr_value_t s = lw_add(g, lw_add(g, lw_un(g, TPR_UNARY_EXP, lw_sub(g, a, safe)),
                                   lw_un(g, TPR_UNARY_EXP, lw_sub(g, b, safe))),
                         lw_un(g, TPR_UNARY_EXP, lw_sub(g, c, safe)));
  return lw_add(g, lw_un(g, TPR_UNARY_LOG, s), safe);
}

// [N, L] shifted along s by |k| (> 0: toward higher s, < 0: lower), the
// vacated places -inf.
static tpr_value_t shift(tpr_graph_t* g, tpr_value_t v, int64_t L, int64_t k) {
  const tpr_type_t* t = tpr_value_type(g, v);
  int64_t start[2] = {0, k > 0 ? 0 : -k}, limit[2] = {t->dims[0], k > 0 ? L - k : L};
  int64_t one[2] = {1, 1}, low[2] = {0, k > 0 ? k : 0}, high[2] = {0, k > 0 ? 0 : -k};
  int64_t none[2] = {0, 0};
  tpr_value_t s = tpr_slice(g, v, start, limit, one);
  return tpr_pad(g, s, tpr_constant_f64(g, t->dtype, -INFINITY), low, high, none);
}

// A constant bool [N, L] mask: keep(n, s).
static tpr_value_t mask_nl(tpr_graph_t* g, const ctc_t* c, bool (*keep)(const ctc_t*, int64_t,
                                                                        int64_t)) {
  const size_t n = (size_t)(c->N * c->L);
  bool* m = malloc(n ? n : 1);
  if (!m) return tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "_ctc_loss: out of memory");
  for (int64_t i = 0; i < c->N; i++)
    for (int64_t s = 0; s < c->L; s++) m[i * c->L + s] = keep(c, i, s);
  tpr_type_t t = {.dtype = TPR_DTYPE_BOOL, .rank = 2, .dims = {c->N, c->L}};
  tpr_value_t v = tpr_constant_dense(g, t, m);
  free(m);
  return v;
}

static bool within_target(const ctc_t* c, int64_t n, int64_t s) {
  return s < 2 * c->tgt_lens[n] + 1;
}

// Where alpha starts (t = 0): the leading blank and the first label.
static bool alpha_start(const ctc_t* c, int64_t n, int64_t s) {
  return s <= 1 && within_target(c, n, s) && c->in_lens[n] > 0;
}

// Where beta starts (each sample's last input step): the trailing blank
// and the last label.
static bool beta_start(const ctc_t* c, int64_t n, int64_t s) {
  return s >= 2 * c->tgt_lens[n] - 1 && within_target(c, n, s);
}

// A constant s64 [N, 1]: each sample's input length plus |k|.
static tpr_value_t per_sample(tpr_graph_t* g, const ctc_t* c, int64_t k) {
  int64_t* v = malloc((size_t)(c->N ? c->N : 1) * sizeof *v);
  if (!v) return tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "_ctc_loss: out of memory");
  for (int64_t n = 0; n < c->N; n++) v[n] = c->in_lens[n] + k;
  tpr_type_t t = {.dtype = TPR_DTYPE_S64, .rank = 2, .dims = {c->N, 1}};
  tpr_value_t r = tpr_constant_dense(g, t, v);
  free(v);
  return r;
}

// Reads the arguments shared by both ops; builds the extended labels.
static tpr_status_t ctc_setup(lw_ctx_t* ctx, int lp_arg, int tgt_arg, int in_arg, int len_arg,
                              int64_t blank, int64_t L, ctc_t* c) {
  const tpr_type_t* lt = lw_arg_type(ctx, lp_arg);
  const tpr_type_t* tt = lw_arg_type(ctx, tgt_arg);
  const tpr_arg_t* il = lw_arg(ctx, in_arg);
  const tpr_arg_t* tl = lw_arg(ctx, len_arg);
  if (!lt || lt->rank != 3 || !tpr_dtype_is_float(lt->dtype) ||
      tpr_dtype_is_complex(lt->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "log_probs must be a 3-D (time, batch, class) float tensor");
  if (!tt || (tt->rank != 1 && tt->rank != 2) || tpr_dtype_is_float(tt->dtype))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "targets must be a 1-D or 2-D integer tensor");
  if (il->kind != TPR_ARG_INT_LIST || tl->kind != TPR_ARG_INT_LIST)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "input and target lengths must be int lists");
  *c = (ctc_t){.T = lt->dims[0], .N = lt->dims[1], .C = lt->dims[2], .blank = blank,
               .in_lens = il->ints, .tgt_lens = tl->ints, .dt = lt->dtype,
               .lp = lw_value(ctx, lp_arg)};
  if (il->count != c->N || tl->count != c->N)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "expected %lld input and target lengths",
                   (long long)c->N);
  if (blank < 0 || blank >= c->C)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "blank must be in label range [0, %lld)",
                   (long long)c->C);
  int64_t total = 0;
  for (int64_t n = 0; n < c->N; n++) {
    if (c->in_lens[n] < 0 || c->in_lens[n] > c->T)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                     "input length %lld of sample %lld is not in [0, %lld]",
                     (long long)c->in_lens[n], (long long)n, (long long)c->T);
    if (c->tgt_lens[n] < 0)
      return lw_fail(ctx, TPR_INVALID_ARGUMENT, "target length %lld of sample %lld < 0",
                     (long long)c->tgt_lens[n], (long long)n);
    if (tt->rank == 2 && c->tgt_lens[n] > tt->dims[1])
      return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                     "target length %lld of sample %lld exceeds the targets' %lld columns",
                     (long long)c->tgt_lens[n], (long long)n, (long long)tt->dims[1]);
    if (c->tgt_lens[n] > c->S) c->S = c->tgt_lens[n];
    total += c->tgt_lens[n];
  }
  if (tt->rank == 1 && total > tt->dims[0])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                   "target lengths sum to %lld, more than the %lld targets", (long long)total,
                   (long long)tt->dims[0]);
  if (tt->rank == 2 && tt->dims[0] != c->N)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "targets have %lld rows for a batch of %lld",
                   (long long)tt->dims[0], (long long)c->N);
  if (c->T == 0)
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "log_probs has no time steps");
  // log_alpha's last dim (from PyTorch's shape function): 2 * S + 1 for an
  // S at least the longest target
  if (L < 2 * c->S + 1 || L % 2 == 0)
    return lw_fail(ctx, TPR_INTERNAL, "log_alpha has %lld places for targets of up to %lld",
                   (long long)L, (long long)c->S);
  c->S = (L - 1) / 2;
  c->L = L;
  tpr_type_t col = {.dtype = TPR_DTYPE_S64, .rank = 2, .dims = {c->N, 1}};
  tpr_value_t blanks = lw_full(G, (double)blank, TPR_DTYPE_S64, &col);
  if (c->S == 0) {  // only blanks
    c->ext = blanks;
    return TPR_OK;
  }
  // labels [N, S]: row n's targets (past its length: index 0, never read
  // as a label: the within_target mask turns those places off)
  const size_t count = (size_t)(c->N * c->S);
  int64_t* idx = malloc(count * sizeof *idx);
  if (!idx) return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of memory");
  int64_t offset = 0;
  for (int64_t n = 0; n < c->N; n++) {
    for (int64_t k = 0; k < c->S; k++) {
      const int64_t at = tt->rank == 2 ? n * tt->dims[1] + k : offset + k;
      idx[n * c->S + k] = k < c->tgt_lens[n] ? at : 0;
    }
    offset += c->tgt_lens[n];
  }
  tpr_type_t it = {.dtype = TPR_DTYPE_S64, .rank = 2, .dims = {c->N, c->S}};
  tpr_value_t flat_idx = tpr_constant_dense(G, it, idx);
  free(idx);
  int64_t flat_dims[1] = {tpr_type_numel(tt)};
  tpr_value_t flat = tpr_reshape(G, lw_cast(G, lw_value(ctx, tgt_arg), TPR_DTYPE_S64), 1,
                                 flat_dims);
  tpr_value_t labels = tpr_take_1d(G, flat, flat_idx);  // [N, S]
  // interleave: [N, S, 2] = (blank, label) -> [N, 2S] -> blank appended
  int64_t d3[3] = {c->N, c->S, 1};
  tpr_value_t pair[2] = {lw_k(G, tpr_reshape(G, labels, 3, d3), (double)blank),
                         tpr_reshape(G, labels, 3, d3)};
  int64_t d2[2] = {c->N, 2 * c->S};
  tpr_value_t inter = tpr_reshape(G, tpr_concatenate(G, pair, 2, 2), 2, d2);
  tpr_value_t tail[2] = {inter, blanks};
  c->ext = tpr_concatenate(G, tail, 2, 1);
  return TPR_OK;
}

// lp_ext[t, n, s] = lp[t, n, l'[n, s]]: [T, N, L].
static tpr_value_t extended_log_probs(lw_ctx_t* ctx, const ctc_t* c) {
  int64_t dims[3] = {c->T, c->N, c->L};
  int64_t bd[2] = {1, 2};
  tpr_value_t idx = tpr_broadcast_in_dim(G, c->ext, 3, dims, bd);
  return tpr_gather_along(G, c->lp, 2, idx);
}

// Whether alpha may skip from s - 2 (beta from s + 2): the label is not
// blank and differs from the one two places over.
static tpr_value_t skip_mask(lw_ctx_t* ctx, const ctc_t* c, int64_t dir) {
  tpr_type_t t = *tpr_value_type(G, c->ext);
  t.dtype = TPR_DTYPE_BOOL;
  int64_t start[2] = {0, dir > 0 ? 0 : 2}, limit[2] = {c->N, dir > 0 ? c->L - 2 : c->L};
  int64_t one[2] = {1, 1}, low[2] = {0, dir > 0 ? 2 : 0}, high[2] = {0, dir > 0 ? 0 : 2};
  int64_t none[2] = {0, 0};
  if (c->L < 3) return lw_full(G, 0, TPR_DTYPE_BOOL, &t);
  tpr_value_t other = tpr_pad(G, tpr_slice(G, c->ext, start, limit, one),
                              tpr_constant_i64(G, TPR_DTYPE_S64, c->blank), low, high, none);
  tpr_value_t not_blank = lw_cmpk(G, TPR_CMP_NE, c->ext, (double)c->blank);
  return tpr_binary(G, TPR_BINARY_AND, not_blank, lw_cmp(G, TPR_CMP_NE, c->ext, other));
}

//===--- the recursions: one loop step per time step ------------------------===//

// Carried through the loop: the step, the previous row, all rows so far, and
// (unchanged) the extended log probabilities, the skip and within-target
// masks, the start row's mask, each sample's start step and its last step
// of recursion.
enum { W_T, W_PREV, W_ALL, W_LPE, W_SKIP, W_VALID, W_INIT, W_START, W_END, W_COUNT };

typedef struct {
  int64_t T, N, L, dir;  // dir 1: alpha (t ascending), -1: beta (descending)
} step_t;

static void rec_cond(tpr_graph_t* g, void* user, const tpr_value_t* a, tpr_value_t* r) {
  const step_t* st = user;
  r[0] = st->dir > 0 ? lw_cmpk(g, TPR_CMP_LT, a[W_T], (double)st->T)
                     : lw_cmpk(g, TPR_CMP_GE, a[W_T], 0);
}

// Row t: at a sample's start step its start row, on the steps after it (in
// the loop's direction) the recursion from the previous row, elsewhere -inf.
static void rec_body(tpr_graph_t* g, void* user, const tpr_value_t* a, tpr_value_t* r) {
  const step_t* st = user;
  memcpy(r, a, W_COUNT * sizeof *r);
  const tpr_value_t t = a[W_T], prev = a[W_PREV];
  tpr_value_t zero = tpr_constant_i64(g, TPR_DTYPE_S64, 0);
  tpr_value_t at[3] = {t, zero, zero};
  int64_t row[3] = {1, st->N, st->L}, nl[2] = {st->N, st->L}, n1[2] = {st->N, 1};
  tpr_value_t lpe = tpr_reshape(g, tpr_dynamic_slice(g, a[W_LPE], at, row), 2, nl);
  tpr_value_t none = lw_k(g, lpe, -INFINITY);
  tpr_value_t two = tpr_select(g, a[W_SKIP], shift(g, prev, st->L, 2 * st->dir), none);
  tpr_value_t rec = lw_add(g, lse3(g, prev, shift(g, prev, st->L, st->dir), two), lpe);
  rec = tpr_select(g, a[W_VALID], rec, none);
  tpr_value_t tn = tpr_broadcast_to(g, t, 2, n1);
  tpr_value_t inside = lw_cmp(g, TPR_CMP_LE, tn, a[W_END]);
  tpr_value_t starts = lw_cmp(g, TPR_CMP_EQ, tn, a[W_START]);
  tpr_value_t next = tpr_select(g, tpr_broadcast_to(g, inside, 2, nl), rec, none);
  next = tpr_select(g, tpr_broadcast_to(g, starts, 2, nl),
                    tpr_select(g, a[W_INIT], lpe, none), next);
  r[W_PREV] = next;
  int64_t n1l[3] = {st->N, 1, st->L};
  tpr_value_t put[3] = {zero, t, zero};
  r[W_ALL] = tpr_dynamic_update_slice(g, a[W_ALL], tpr_reshape(g, next, 3, n1l), put);
  r[W_T] = lw_add(g, t, tpr_constant_i64(g, TPR_DTYPE_S64, st->dir));
}

// alpha (dir 1) or beta (dir -1) for every sample: [N, T, L]. Each
// sample starts at its first step (alpha: 0; beta: its last input step)
// and recurses through its input (alpha: up to the last step; beta: down
// from the one below it).
static tpr_value_t recursion(lw_ctx_t* ctx, const ctc_t* c, tpr_value_t lpe, int64_t dir) {
  tpr_graph_t* g = G;
  tpr_type_t all_t = {.dtype = c->dt, .rank = 3, .dims = {c->N, c->T, c->L}};
  tpr_type_t row_t = {.dtype = c->dt, .rank = 2, .dims = {c->N, c->L}};
  tpr_value_t last = per_sample(g, c, -1);
  step_t st = {.T = c->T, .N = c->N, .L = c->L, .dir = dir};
  tpr_value_t in[W_COUNT] = {
      [W_T] = tpr_constant_i64(g, TPR_DTYPE_S64, dir > 0 ? 0 : c->T - 1),
      [W_PREV] = lw_full(g, -INFINITY, c->dt, &row_t),
      [W_ALL] = lw_full(g, -INFINITY, c->dt, &all_t), [W_LPE] = lpe,
      [W_SKIP] = skip_mask(ctx, c, dir), [W_VALID] = mask_nl(g, c, within_target),
      [W_INIT] = mask_nl(g, c, dir > 0 ? alpha_start : beta_start),
      [W_START] = dir > 0 ? lw_k(g, last, 0) : last,
      [W_END] = dir > 0 ? last : per_sample(g, c, -2)};
  tpr_value_t out[W_COUNT];
  tpr_while(g, W_COUNT, in, rec_cond, rec_body, &st, out);
  return out[W_ALL];
}

// log(exp(a) + exp(b)), -inf when both are.
static tpr_value_t lse2(tpr_graph_t* g, tpr_value_t a, tpr_value_t b) {
  return lse3(g, a, b, lw_k(g, a, -INFINITY));
}

// The loss per sample from alpha: -log(alpha[T_n - 1, L_n - 1] +
// alpha[T_n - 1, L_n - 2]); an input of no steps has loss 0 for an empty
// target and inf otherwise.
static tpr_value_t nll_from_alpha(lw_ctx_t* ctx, const ctc_t* c, tpr_value_t alpha) {
  tpr_graph_t* g = G;
  const size_t n = (size_t)(c->N ? c->N : 1);
  int64_t* idx = malloc(2 * n * sizeof *idx);
  bool* has2 = malloc(n * sizeof *has2);
  double* empty = malloc(n * sizeof *empty);
  if (!idx || !has2 || !empty) {
    free(idx), free(has2), free(empty);
    return tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "_ctc_loss: out of memory");
  }
  bool any_empty = false;
  for (int64_t i = 0; i < c->N; i++) {
    const int64_t t = c->in_lens[i] > 0 ? c->in_lens[i] - 1 : 0;
    const int64_t last = 2 * c->tgt_lens[i];
    const int64_t base = (i * c->T + t) * c->L;
    idx[i] = base + last;
    idx[c->N + i] = base + (last > 0 ? last - 1 : last);
    has2[i] = last > 0;
    empty[i] = c->in_lens[i] == 0 ? (c->tgt_lens[i] == 0 ? 0.0 : INFINITY) : NAN;
    any_empty |= c->in_lens[i] == 0;
  }
  tpr_type_t it = {.dtype = TPR_DTYPE_S64, .rank = 1, .dims = {c->N}};
  tpr_type_t bt = {.dtype = TPR_DTYPE_BOOL, .rank = 1, .dims = {c->N}};
  int64_t flat[1] = {c->N * c->T * c->L};
  tpr_value_t a = tpr_reshape(g, alpha, 1, flat);
  tpr_value_t a1 = tpr_take_1d(g, a, tpr_constant_dense(g, it, idx));
  tpr_value_t a2 = tpr_take_1d(g, a, tpr_constant_dense(g, it, idx + c->N));
  a2 = tpr_select(g, tpr_constant_dense(g, bt, has2), a2, lw_k(g, a2, -INFINITY));
  tpr_value_t nll = lw_un(g, TPR_UNARY_NEG, lse2(g, a1, a2));
  if (any_empty) {
    tpr_type_t ft = {.dtype = TPR_DTYPE_F64, .rank = 1, .dims = {c->N}};
    tpr_value_t e = lw_cast(g, tpr_constant_dense(g, ft, empty), c->dt);
    nll = tpr_select(g, lw_isnan(g, e), nll, e);
  }
  free(idx), free(has2), free(empty);
  return nll;
}

// _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
// zero_infinity) -> (neg_log_likelihood [N], log_alpha [N, T, L]).
static tpr_status_t lower_ctc_loss(lw_ctx_t* ctx) {
  if (ctx->num_outs != 2)
    return lw_fail(ctx, TPR_INTERNAL, "%d outputs, expected 2", (int)ctx->num_outs);
  ctc_t c;
  TPR_RETURN_IF_ERROR(ctc_setup(ctx, A_LP, A_TARGETS, A_IN_LENS, A_TGT_LENS,
                                lw_int(ctx, 4, 0), ctx->out_types[1].dims[2], &c));
  // zero_infinity is ctc_loss's business (it zeroes the infinite losses it
  // returns); this op's loss stays infinite, and its backward reads that.
  tpr_value_t alpha = recursion(ctx, &c, extended_log_probs(ctx, &c), 1);
  lw_set(ctx, 0, nll_from_alpha(ctx, &c, alpha));
  lw_set(ctx, 1, alpha);
  return lw_done(ctx);
}

// _ctc_loss_backward(grad, log_probs, targets, input_lengths,
// target_lengths, neg_log_likelihood, log_alpha, blank, zero_infinity):
// the gradient with respect to log_probs, [T, N, C].
static tpr_status_t lower_ctc_loss_backward(lw_ctx_t* ctx) {
  const tpr_type_t* at = lw_arg_type(ctx, 6);
  if (!at || at->rank != 3)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "log_alpha must be 3-D");
  ctc_t c;
  TPR_RETURN_IF_ERROR(ctc_setup(ctx, 1, 2, 3, 4, lw_int(ctx, 7, 0), at->dims[2], &c));
  const bool zero_inf = lw_bool(ctx, 8, false);
  tpr_graph_t* g = G;
  tpr_value_t lpe = extended_log_probs(ctx, &c);
  tpr_value_t beta = recursion(ctx, &c, lpe, -1);
  tpr_value_t alpha = lw_cast(g, lw_value(ctx, 6), c.dt);
  // The occupancy of each class at each step: alpha * beta / y summed over
  // its places (alpha and beta both hold the step's own probability y),
  // over the same sum for all places: [N, T, C]. The sum over all places is
  // the sequence's probability at every step; dividing by it rather than
  // by exp(-nll) cancels the rounding alpha and beta share (OpInfo's float32
  // sample: 1.5e-5 from the float64 gradient, the CPU kernel's 9.3e-5).
  // Terms far below the step's largest underflow only far below the
  // occupancy's scale.
  int64_t tnl_perm[3] = {1, 0, 2};
  tpr_value_t ab = lw_sub(g, lw_add(g, alpha, beta), tpr_transpose(g, lpe, tnl_perm));
  int64_t d2[1] = {2};
  tpr_type_t nt1 = {.dtype = c.dt, .rank = 3, .dims = {c.N, c.T, 1}};
  tpr_value_t mx = lw_reshape_to(g, tpr_reduce(g, ab, TPR_REDUCE_MAX, d2, 1), &nt1);
  tpr_value_t mx_safe = tpr_select(g, lw_cmpk(g, TPR_CMP_EQ, mx, -INFINITY), lw_k(g, mx, 0), mx);
  int64_t ntl[3] = {c.N, c.T, c.L}, ntc[3] = {c.N, c.T, c.C}, b02[2] = {0, 2};
  tpr_value_t e = lw_un(g, TPR_UNARY_EXP, lw_sub(g, ab, tpr_broadcast_to(g, mx_safe, 3, ntl)));
  tpr_value_t idx = tpr_broadcast_in_dim(g, c.ext, 3, ntl, b02);
  tpr_type_t sum_t = {.dtype = c.dt, .rank = 3, .dims = {c.N, c.T, c.C}};
  tpr_value_t sums = tpr_scatter_along(g, lw_full(g, 0, c.dt, &sum_t), 2, idx, e, true);
  tpr_value_t total = lw_reshape_to(g, tpr_reduce(g, e, TPR_REDUCE_SUM, d2, 1), &nt1);
  tpr_value_t post = lw_div(g, sums, tpr_broadcast_to(g, total, 3, ntc));
  int64_t perm[3] = {1, 0, 2};
  post = tpr_transpose(g, post, perm);  // [T, N, C]
  // grad = (exp(lp) - occupancy) * grad_out, zero past each input
  int64_t tnc[3] = {c.T, c.N, c.C}, b1[1] = {1};
  tpr_value_t nll = lw_cast(g, lw_value(ctx, 5), c.dt);
  tpr_value_t res = lw_sub(g, lw_un(g, TPR_UNARY_EXP, c.lp), post);
  tpr_value_t gout = tpr_broadcast_in_dim(g, lw_cast(g, lw_value(ctx, 0), c.dt), 3, tnc, b1);
  res = lw_mul(g, res, gout);
  tpr_type_t tn_t = {.dtype = TPR_DTYPE_S64, .rank = 2, .dims = {c.T, c.N}};
  tpr_value_t t_idx = tpr_iota(g, tn_t, 0);
  int64_t one_n[1] = {c.N}, b_n[1] = {1};
  tpr_value_t lens = tpr_reshape(g, per_sample(g, &c, 0), 1, one_n);
  tpr_value_t live = lw_cmp(g, TPR_CMP_LT, t_idx, tpr_broadcast_in_dim(g, lens, 2, tn_t.dims,
                                                                         b_n));
  if (zero_inf)
    live = tpr_binary(g, TPR_BINARY_AND, live,
                      tpr_broadcast_in_dim(g, lw_cmpk(g, TPR_CMP_NE, nll, INFINITY), 2,
                                           tn_t.dims, b_n));
  int64_t b01[2] = {0, 1};
  res = tpr_select(g, tpr_broadcast_in_dim(g, live, 3, tnc, b01), res, lw_k(g, res, 0));
  return lw_ret(ctx, lw_cast(g, res, OUT->dtype));
}

LW_DEFINE_TABLE(ctc,
    LW_RULE("_ctc_loss", lower_ctc_loss),
    LW_RULE("_ctc_loss_backward", lower_ctc_loss_backward),
);
