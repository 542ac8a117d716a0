// Prefix scans: cumsum, cumprod, logcumsumexp, cummax, cummin (tpr_scan /
// tpr_scan_arg). f16/bf16 accumulate in f32 and round once, as PyTorch
// does; integers and bools arrive at their (s64 by default) out dtype.
// Backwards are composite in PyTorch (flip + cumsum, scatter_add, ...).
#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

// Self as a value of |dtype|, at least 1-d, and the wrapped dim at |arg|.
static tpr_status_t scan_in(lw_ctx_t* ctx, int arg, tpr_dtype_t dtype,
                            tpr_value_t* x, int64_t* dim) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  if (tpr_dtype_is_complex(t->dtype) || tpr_dtype_is_complex(dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex scans are not supported");
  *dim = lw_wrap_dim(lw_int(ctx, arg, 0), t->rank ? t->rank : 1);
  if (*dim < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "dim out of range");
  *x = lw_cast(G, lw_value(ctx, 0), dtype);
  if (t->rank == 0) {
    int64_t one = 1;
    *x = tpr_reshape(G, *x, 1, &one);
  }
  return tpr_ok_status();
}

static tpr_status_t scan_acc(lw_ctx_t* ctx, tpr_scan_op_t op, tpr_dtype_t acc) {
  if (op == TPR_SCAN_LOGADDEXP && !tpr_dtype_is_float(acc))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  tpr_value_t x;
  int64_t dim;
  TPR_RETURN_IF_ERROR(scan_in(ctx, 1, acc, &x, &dim));
  return lw_ret(ctx, tpr_scan(G, x, dim, op, false));
}

static tpr_status_t scan(lw_ctx_t* ctx, tpr_scan_op_t op) {
  return scan_acc(ctx, op, lw_opmath(OUT->dtype));
}

// cumsum(self, dim, *, dtype) / cumsum.out / cumsum_
static tpr_status_t lower_cumsum(lw_ctx_t* ctx) {
  return scan(ctx, TPR_SCAN_SUM);
}
static tpr_status_t lower_cumprod(lw_ctx_t* ctx) {
  return scan(ctx, TPR_SCAN_PROD);
}
// _logcumsumexp(self, dim) / logcumsumexp(self, dim)
static tpr_status_t lower_logcumsumexp(lw_ctx_t* ctx) {
  if (tpr_dtype_is_complex(OUT->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtype %s is not supported",
                   tpr_dtype_name(OUT->dtype));
  // The CPU accumulates float32 in double (acc_type): so do we, or its
  // backward (exp of differences of these sums at large magnitudes) would
  // magnify one-ulp differences.
  if (OUT->dtype == TPR_DTYPE_F32) return scan_acc(ctx, TPR_SCAN_LOGADDEXP, TPR_DTYPE_F64);
  return scan(ctx, TPR_SCAN_LOGADDEXP);
}

// _cummax_helper(self, values!, indices!, dim) -> (): the results are the
// written values and indices; cummax(self, dim) -> (values, indices).
static tpr_status_t cumext(lw_ctx_t* ctx, bool is_max) {
  int dim_arg = lw_is_tensor(ctx, 1) ? 3 : 1;
  if (ctx->num_outs != 2)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs values and indices");
  tpr_value_t x, v, i;
  int64_t dim;
  TPR_RETURN_IF_ERROR(scan_in(ctx, dim_arg, OUT->dtype, &x, &dim));
  tpr_scan_arg(G, x, dim, is_max, &v, &i);
  lw_set(ctx, 0, v);
  lw_set(ctx, 1, i);
  return lw_done(ctx);
}
static tpr_status_t lower_cummax(lw_ctx_t* ctx) { return cumext(ctx, true); }
static tpr_status_t lower_cummin(lw_ctx_t* ctx) { return cumext(ctx, false); }

#define FIO(n, fn) LW_RULE(n, fn), LW_RULE(n "_", fn), LW_RULE(n ".out", fn)

LW_DEFINE_TABLE(scan,
    FIO("cumsum", lower_cumsum), FIO("cumprod", lower_cumprod),
    LW_RULE("_logcumsumexp", lower_logcumsumexp),
    LW_RULE("_logcumsumexp.out", lower_logcumsumexp),
    LW_RULE("logcumsumexp", lower_logcumsumexp),
    LW_RULE("logcumsumexp.out", lower_logcumsumexp),
    LW_RULE("_cummax_helper", lower_cummax), LW_RULE("_cummin_helper", lower_cummin),
    LW_RULE("cummax", lower_cummax), LW_RULE("cummax.out", lower_cummax),
    LW_RULE("cummin", lower_cummin), LW_RULE("cummin.out", lower_cummin));
