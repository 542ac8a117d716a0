// Shared helpers of the lowering rules: argument access, dtype promotion,
// broadcasting, output placement, reduction dims.
#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#include "compiler/lower/lower_internal.h"

//===--- errors ------------------------------------------------------------===//

void lw_format_args(const lw_ctx_t* ctx, char* buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < ctx->num_args && n + 1 < cap; i++) {
    const tpr_arg_t* a = &ctx->args[i];
    char t[96];
    const char* sep = i ? ", " : "";
    int w = 0;
    switch (a->kind) {
      case TPR_ARG_NONE: w = snprintf(buf + n, cap - n, "%sNone", sep); break;
      case TPR_ARG_TENSOR:
        w = snprintf(buf + n, cap - n, "%s%s%s", sep,
                     tpr_type_format(tpr_value_type(ctx->graph, a->value), t,
                                     sizeof t),
                     a->is_scalar ? " scalar" : "");
        break;
      case TPR_ARG_TENSOR_LIST:
        w = snprintf(buf + n, cap - n, "%sTensor[%d]", sep, (int)a->count);
        break;
      case TPR_ARG_INT:
        w = snprintf(buf + n, cap - n, "%sint %lld", sep, (long long)a->i);
        break;
      case TPR_ARG_DOUBLE:
        w = snprintf(buf + n, cap - n, "%sfloat %g", sep, a->d);
        break;
      case TPR_ARG_BOOL:
        w = snprintf(buf + n, cap - n, "%s%s", sep, a->b ? "True" : "False");
        break;
      case TPR_ARG_INT_LIST:
        w = snprintf(buf + n, cap - n, "%sint[%d]", sep, (int)a->count);
        break;
      case TPR_ARG_DOUBLE_LIST:
        w = snprintf(buf + n, cap - n, "%sfloat[%d]", sep, (int)a->count);
        break;
      case TPR_ARG_BOOL_LIST:
        w = snprintf(buf + n, cap - n, "%sbool[%d]", sep, (int)a->count);
        break;
      case TPR_ARG_DTYPE:
        w = snprintf(buf + n, cap - n, "%sdtype %s", sep,
                     tpr_dtype_name(a->dtype));
        break;
      case TPR_ARG_STRING:
        w = snprintf(buf + n, cap - n, "%s\"%s\"", sep, a->s ? a->s : "");
        break;
      case TPR_ARG_GENERATOR:
        w = snprintf(buf + n, cap - n, "%sGenerator", sep);
        break;
      default: w = snprintf(buf + n, cap - n, "%s?", sep); break;
    }
    if (w < 0) break;
    n += (size_t)w;
    if (n >= cap) n = cap - 1;
  }
}

// "op(argument types): reason" into buf.
static void describe(const lw_ctx_t* ctx, char* buf, size_t cap, const char* fmt,
                     va_list ap) {
  char reason[512], args[512];
  vsnprintf(reason, sizeof reason, fmt, ap);
  lw_format_args(ctx, args, sizeof args);
  // A long message is cut (snprintf), never overrun.
  if (snprintf(buf, cap, "%s(%s): %s", ctx->op_name ? ctx->op_name : "?", args, reason) < 0)
    buf[0] = '\0';
}

tpr_status_t lw_fail(const lw_ctx_t* ctx, tpr_status_code_t code,
                     const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  describe(ctx, msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tpr_status_make(code, "%s", msg);
}

void lw_check(const lw_ctx_t* ctx, tpr_value_t ok, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  describe(ctx, msg, sizeof msg, fmt, ap);
  va_end(ap);
  tpr_graph_add_check(ctx->graph, ok, "%s", msg);
}

tpr_status_t lw_done(const lw_ctx_t* ctx) {
  return tpr_graph_status(ctx->graph);
}

//===--- arguments ---------------------------------------------------------===//

static const tpr_arg_t kNoneArg = {.kind = TPR_ARG_NONE,
                                   .value = TPR_VALUE_NONE};

const tpr_arg_t* lw_arg(const lw_ctx_t* ctx, int i) {
  return (i >= 0 && i < ctx->num_args) ? &ctx->args[i] : &kNoneArg;
}
bool lw_is_none(const lw_ctx_t* ctx, int i) {
  return lw_arg(ctx, i)->kind == TPR_ARG_NONE;
}
bool lw_is_tensor(const lw_ctx_t* ctx, int i) {
  return lw_arg(ctx, i)->kind == TPR_ARG_TENSOR;
}
int64_t lw_int(const lw_ctx_t* ctx, int i, int64_t dflt) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  if (a->kind == TPR_ARG_INT) return a->i;
  if (a->kind == TPR_ARG_BOOL) return a->b;
  if (a->kind == TPR_ARG_DOUBLE) return (int64_t)a->d;
  return dflt;
}
double lw_double(const lw_ctx_t* ctx, int i, double dflt) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  if (a->kind == TPR_ARG_DOUBLE) return a->d;
  if (a->kind == TPR_ARG_INT) return (double)a->i;
  if (a->kind == TPR_ARG_BOOL) return a->b;
  return dflt;
}
bool lw_bool(const lw_ctx_t* ctx, int i, bool dflt) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  if (a->kind == TPR_ARG_BOOL) return a->b;
  if (a->kind == TPR_ARG_INT) return a->i != 0;
  return dflt;
}
const char* lw_str(const lw_ctx_t* ctx, int i, const char* dflt) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  return (a->kind == TPR_ARG_STRING && a->s) ? a->s : dflt;
}
tpr_value_t lw_value(const lw_ctx_t* ctx, int i) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  return a->kind == TPR_ARG_TENSOR ? a->value : TPR_VALUE_NONE;
}
const tpr_type_t* lw_arg_type(const lw_ctx_t* ctx, int i) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  return a->kind == TPR_ARG_TENSOR ? tpr_value_type(ctx->graph, a->value)
                                   : NULL;
}
tpr_value_t lw_generator(const lw_ctx_t* ctx) {
  for (int i = 0; i < ctx->num_args; i++)
    if (ctx->args[i].kind == TPR_ARG_GENERATOR) return ctx->args[i].value;
  return TPR_VALUE_NONE;
}

//===--- dtypes ------------------------------------------------------------===//

static int float_rank(tpr_dtype_t d) {
  switch (d) {
    case TPR_DTYPE_F8E5M2: case TPR_DTYPE_F8E4M3FN: return 0;
    case TPR_DTYPE_F16: case TPR_DTYPE_BF16: return 1;
    case TPR_DTYPE_F32: return 2;
    default: return 3;  // f64
  }
}

tpr_dtype_t lw_promote(tpr_dtype_t a, tpr_dtype_t b) {
  if (a == b) return a;
  if (a == TPR_DTYPE_INVALID) return b;
  if (b == TPR_DTYPE_INVALID || b == TPR_DTYPE_BOOL) return a;
  if (a == TPR_DTYPE_BOOL) return b;
  if (tpr_dtype_is_complex(a) || tpr_dtype_is_complex(b)) {
    bool wide = a == TPR_DTYPE_C128 || b == TPR_DTYPE_C128 ||
                a == TPR_DTYPE_F64 || b == TPR_DTYPE_F64;
    return wide ? TPR_DTYPE_C128 : TPR_DTYPE_C64;
  }
  bool fa = tpr_dtype_is_float(a), fb = tpr_dtype_is_float(b);
  if (fa && fb) {
    int ra = float_rank(a), rb = float_rank(b);
    if (ra == rb) return TPR_DTYPE_F32;  // f16 vs bf16 (or the f8s)
    return ra > rb ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // Both integers.
  bool sa = tpr_dtype_is_signed_int(a), sb = tpr_dtype_is_signed_int(b);
  size_t za = tpr_dtype_size(a), zb = tpr_dtype_size(b);
  if (sa == sb) return za >= zb ? a : b;
  // Mixed signedness: the signed type wide enough for both.
  size_t zu = sa ? zb : za, zs = sa ? za : zb;
  size_t need = zu * 2 > zs ? zu * 2 : zs;
  if (need <= 2) return TPR_DTYPE_S16;
  if (need <= 4) return TPR_DTYPE_S32;
  return TPR_DTYPE_S64;
}

static int category(tpr_dtype_t d) {
  if (d == TPR_DTYPE_INVALID) return -1;
  if (d == TPR_DTYPE_BOOL) return 0;
  if (lw_is_int(d)) return 1;
  if (tpr_dtype_is_float(d)) return 2;
  return 3;
}

// c10's combine_categories(higher, lower).
static tpr_dtype_t combine(tpr_dtype_t higher, tpr_dtype_t lower) {
  int ch = category(higher), cl = category(lower);
  if (ch == 3) return higher;
  if (cl == 3) {
    if (ch == 2)
      return higher == TPR_DTYPE_F64 ? TPR_DTYPE_C128 : TPR_DTYPE_C64;
    return lower;
  }
  if (ch == 2) return higher;
  if (higher == TPR_DTYPE_BOOL || cl == 2) return lw_promote(higher, lower);
  if (higher != TPR_DTYPE_INVALID) return higher;
  return lower;
}

tpr_dtype_t lw_result_type(const lw_ctx_t* ctx, const int* idx, int n) {
  tpr_dtype_t dim = TPR_DTYPE_INVALID, zero = TPR_DTYPE_INVALID,
              wrapped = TPR_DTYPE_INVALID;
  for (int k = 0; k < n; k++) {
    const tpr_arg_t* a = lw_arg(ctx, idx[k]);
    if (a->kind != TPR_ARG_TENSOR) continue;
    const tpr_type_t* t = tpr_value_type(ctx->graph, a->value);
    tpr_dtype_t d = t->dtype;
    if (a->is_scalar) {
      // Python numbers: float -> default dtype, complex -> its complex.
      if (tpr_dtype_is_float(d)) d = TPR_DTYPE_F32;
      else if (tpr_dtype_is_complex(d)) d = TPR_DTYPE_C64;
      wrapped = lw_promote(wrapped, d);
    } else if (t->rank == 0) {
      zero = lw_promote(zero, d);
    } else {
      dim = lw_promote(dim, d);
    }
  }
  return combine(dim, combine(zero, wrapped));
}

//===--- values ------------------------------------------------------------===//

const tpr_type_t* lw_type(const lw_ctx_t* ctx, tpr_value_t v) {
  return tpr_value_type(ctx->graph, v);
}

tpr_value_t lw_cast(tpr_graph_t* g, tpr_value_t v, tpr_dtype_t dtype) {
  if (v == TPR_VALUE_NONE) return v;
  const tpr_type_t* t = tpr_value_type(g, v);
  if (t->dtype == dtype) return v;
  if (dtype == TPR_DTYPE_BOOL && !tpr_dtype_is_complex(t->dtype))
    return lw_nonzero(g, v);
  return tpr_convert(g, v, dtype);
}

tpr_value_t lw_cast_to(tpr_graph_t* g, tpr_value_t v, tpr_dtype_t dtype,
                       const tpr_type_t* shape) {
  v = lw_cast(g, v, dtype);
  return tpr_broadcast_to(g, v, shape->rank, shape->dims);
}

tpr_value_t lw_in(const lw_ctx_t* ctx, int i, tpr_dtype_t dtype,
                  const tpr_type_t* shape) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  if (a->kind != TPR_ARG_TENSOR)
    return tpr_graph_fail(ctx->graph, TPR_INVALID_ARGUMENT,
                          "%s: argument %d must be a tensor or scalar",
                          ctx->op_name, i);
  return lw_cast_to(ctx->graph, a->value, dtype, shape);
}

tpr_value_t lw_full(tpr_graph_t* g, double c, tpr_dtype_t dtype,
                    const tpr_type_t* shape) {
  tpr_value_t k = tpr_constant_f64(g, dtype, c);
  return tpr_broadcast_to(g, k, shape->rank, shape->dims);
}

tpr_value_t lw_k(tpr_graph_t* g, tpr_value_t like, double c) {
  if (like == TPR_VALUE_NONE) return like;
  const tpr_type_t* t = tpr_value_type(g, like);
  tpr_type_t shape = *t;
  return lw_full(g, c, shape.dtype, &shape);
}

tpr_value_t lw_splat(tpr_graph_t* g, tpr_value_t scalar, tpr_value_t like) {
  if (like == TPR_VALUE_NONE) return like;
  tpr_type_t t = *tpr_value_type(g, like);
  return lw_cast_to(g, scalar, t.dtype, &t);
}

tpr_value_t lw_reshape_to(tpr_graph_t* g, tpr_value_t v, const tpr_type_t* t) {
  return tpr_reshape(g, v, t->rank, t->dims);
}

void lw_set(lw_ctx_t* ctx, int i, tpr_value_t v) {
  if (i >= ctx->num_outs) {
    tpr_graph_fail(ctx->graph, TPR_INVALID_ARGUMENT,
                   "%s: result %d requested but only %d out types given",
                   ctx->op_name, i, (int)ctx->num_outs);
    return;
  }
  const tpr_type_t* want = &ctx->out_types[i];
  if (v != TPR_VALUE_NONE) {
    v = lw_cast(ctx->graph, v, want->dtype);
    const tpr_type_t* t = tpr_value_type(ctx->graph, v);
    if (t->dtype != TPR_DTYPE_INVALID && !tpr_type_equal(t, want) &&
        tpr_type_numel(t) == tpr_type_numel(want))
      v = lw_reshape_to(ctx->graph, v, want);
  }
  ctx->outs[i] = v;
}

tpr_status_t lw_ret(lw_ctx_t* ctx, tpr_value_t v) {
  lw_set(ctx, 0, v);
  return lw_done(ctx);
}

int64_t lw_wrap_dim(int64_t dim, int rank) {
  int64_t r = rank ? rank : 1;  // 0-dim tensors accept dim 0 / -1
  if (dim < -r || dim >= r) return -1;
  return dim < 0 ? dim + r : dim;
}

tpr_value_t lw_nonzero(tpr_graph_t* g, tpr_value_t x) {
  if (x == TPR_VALUE_NONE) return x;
  if (tpr_value_type(g, x)->dtype == TPR_DTYPE_BOOL) return x;
  return lw_cmpk(g, TPR_CMP_NE, x, 0);
}

tpr_value_t lw_true_slots(tpr_graph_t* g, tpr_value_t m, int64_t past) {
  tpr_value_t mi = lw_cast(g, m, TPR_DTYPE_S64);
  tpr_value_t pos = lw_sub(g, tpr_scan(g, mi, 0, TPR_SCAN_SUM, false), lw_k(g, mi, 1));
  return lw_sel(g, m, pos, lw_k(g, pos, (double)past));
}

bool lw_broadcast_shape(const tpr_type_t* a, const tpr_type_t* b, tpr_type_t* out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  *out = tpr_type_scalar(a->dtype);
  out->rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out->dims[i] = da == 1 ? db : da;
  }
  return true;
}

tpr_value_t lw_trunc(tpr_graph_t* g, tpr_value_t x) {
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 0),
                lw_un(g, TPR_UNARY_CEIL, x), lw_un(g, TPR_UNARY_FLOOR, x));
}

tpr_value_t lw_isnan(tpr_graph_t* g, tpr_value_t x) {
  return lw_cmp(g, TPR_CMP_NE, x, x);
}

tpr_value_t lw_reduce_all(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op) {
  const tpr_type_t* t = tpr_value_type(g, v);
  if (!t || t->rank == 0) return v;
  int64_t all[TPR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) all[i] = i;
  return tpr_reduce(g, v, op, all, t->rank);
}

tpr_value_t lw_digamma(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t zero = lw_cmpk(g, TPR_CMP_EQ, x, 0);
  return lw_sel(g, zero, lw_div(g, lw_k(g, x, -1), x), lw_un(g, TPR_UNARY_DIGAMMA, x));
}

tpr_value_t lw_polevl(tpr_graph_t* g, tpr_value_t x, const double* c, int n) {
  tpr_value_t r = lw_k(g, x, c[0]);
  for (int i = 1; i < n; i++) r = lw_add(g, lw_mul(g, r, x), lw_k(g, x, c[i]));
  return r;
}

tpr_value_t lw_opaque(tpr_graph_t* g, tpr_value_t v) {
  const tpr_type_t* t = tpr_value_type(g, v);
  if (!t || t->rank == 0 || !tpr_dtype_is_float(t->dtype) || !tpr_plugin_workarounds()) return v;
  tpr_value_t i = tpr_iota(g, *t, 0);
  return lw_sub(g, v, lw_mul(g, i, lw_k(g, i, 0)));
}

tpr_value_t lw_div_exact(tpr_graph_t* g, tpr_value_t a, double c) {
  return lw_div(g, a, lw_opaque(g, lw_k(g, a, c)));
}

tpr_value_t lw_flush_denormal(tpr_graph_t* g, tpr_value_t x) {
  const tpr_type_t* t = tpr_value_type(g, x);
  // float16 computes in float32, where its denormals are normal numbers:
  // the device keeps them.
  if (!t || t->dtype == TPR_DTYPE_F16) return x;
  double smallest_normal = t->dtype == TPR_DTYPE_F64 ? DBL_MIN : FLT_MIN;
  tpr_value_t small = lw_cmpk(g, TPR_CMP_LT, lw_un(g, TPR_UNARY_ABS, x), smallest_normal);
  return lw_sel(g, small, lw_mul(g, x, lw_k(g, x, 0)), x);
}

//===--- reductions --------------------------------------------------------===//

static int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

int lw_reduce_dims(const lw_ctx_t* ctx, int i, int rank, bool empty_is_none,
                   int64_t* dims, int64_t* bad) {
  const tpr_arg_t* a = lw_arg(ctx, i);
  int n = 0;
  if (a->kind == TPR_ARG_INT) {
    int64_t d = lw_wrap_dim(a->i, rank);
    if (d < 0) { *bad = a->i; return -1; }
    if (rank) dims[n++] = d;
    return n;
  }
  if (a->kind == TPR_ARG_INT_LIST && (a->count > 0 || empty_is_none)) {
    for (int k = 0; k < a->count; k++) {
      int64_t d = lw_wrap_dim(a->ints[k], rank);
      if (d < 0) { *bad = a->ints[k]; return -1; }
      if (rank) dims[n++] = d;
    }
    qsort(dims, (size_t)n, sizeof(int64_t), cmp_i64);
    int m = 0;
    for (int k = 0; k < n; k++)
      if (m == 0 || dims[m - 1] != dims[k]) dims[m++] = dims[k];
    return m;
  }
  for (int d = 0; d < rank; d++) dims[n++] = d;
  return n;
}

int64_t lw_reduced_numel(const tpr_type_t* t, const int64_t* dims, int n) {
  int64_t p = 1;
  for (int k = 0; k < n; k++) p *= t->dims[dims[k]];
  return p;
}

tpr_value_t lw_unreduce(tpr_graph_t* g, tpr_value_t r, const tpr_type_t* full,
                        const int64_t* dims, int n) {
  int64_t bd[TPR_MAX_RANK];
  int m = 0;
  for (int d = 0; d < full->rank; d++) {
    bool reduced = false;
    for (int k = 0; k < n; k++) reduced |= dims[k] == d;
    if (!reduced) bd[m++] = d;
  }
  return tpr_broadcast_in_dim(g, r, full->rank, full->dims, bd);
}

tpr_value_t lw_reduce_keep(tpr_graph_t* g, tpr_value_t v, tpr_reduce_op_t op,
                           const int64_t* dims, int n) {
  if (v == TPR_VALUE_NONE) return v;
  tpr_type_t full = *tpr_value_type(g, v);
  tpr_value_t r = tpr_reduce(g, v, op, dims, n);
  return lw_unreduce(g, r, &full, dims, n);
}

tpr_status_t lw_output_mask(const lw_ctx_t* ctx, int i, int n, bool* want) {
  const tpr_arg_t* m = lw_arg(ctx, i);
  int count = 0;
  for (int k = 0; k < n; k++) {
    want[k] = m->kind != TPR_ARG_BOOL_LIST || k >= m->count || m->bools[k];
    count += want[k];
  }
  if (ctx->num_outs != count)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "%d results for an output_mask of %d",
                   (int)ctx->num_outs, count);
  return TPR_OK;
}

tpr_status_t lw_ret_zeros(lw_ctx_t* ctx) {
  for (int i = 0; i < ctx->num_outs; i++)
    lw_set(ctx, i, lw_full(ctx->graph, 0, ctx->out_types[i].dtype, &ctx->out_types[i]));
  return lw_done(ctx);
}
