// Builders of the spatial ops of graph.h: convolution and reduce_window.
// Same contract as builders.c: sticky errors naming the builder and its
// operand types, TPR_VALUE_NONE propagates.
#include <string.h>

#include "compiler/ir/graph_internal.h"

#define TB 96

#define OPERAND(t, v, who, i)                                  \
  const tpr_type_t* t = tpr_graph_operand(g, (v), (who), (i)); \
  if (!t) return TPR_VALUE_NONE

#define FAIL(...) return tpr_graph_fail(g, TPR_INVALID_ARGUMENT, __VA_ARGS__)

static const char* fmt(const tpr_type_t* t, char* buf) {
  return tpr_type_format(t, buf, TB);
}

// |v|[i], or |dflt| when v is NULL.
static int64_t at(const int64_t* v, int i, int64_t dflt) {
  return v ? v[i] : dflt;
}

// Dilated extent of |n| elements spaced by |d| (0 stays 0).
static int64_t dilated(int64_t n, int64_t d) { return n ? (n - 1) * d + 1 : 0; }

tpr_value_t tpr_convolution(tpr_graph_t* g, tpr_value_t lhs, tpr_value_t rhs,
                            int ns, const int64_t* window_strides,
                            const int64_t* pad_low, const int64_t* pad_high,
                            const int64_t* lhs_dilation,
                            const int64_t* rhs_dilation,
                            int64_t feature_group_count,
                            int64_t batch_group_count,
                            tpr_dtype_t result_dtype) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const char* who = "tpr_convolution";
  OPERAND(tl, lhs, who, 0);
  OPERAND(tr, rhs, who, 1);
  char b[TB], c[TB];
  bool num = tpr_dtype_is_float(tl->dtype) || tpr_dtype_is_complex(tl->dtype) ||
             tpr_dtype_is_signed_int(tl->dtype) ||
             tpr_dtype_is_unsigned_int(tl->dtype);
  if (tl->dtype != tr->dtype || !num || !tpr_dtype_is_valid(result_dtype))
    FAIL("%s: operand dtypes %s x %s -> %s unsupported", who, fmt(tl, b),
         fmt(tr, c), tpr_dtype_name(result_dtype));
  if (ns < 1 || ns > TPR_MAX_RANK - 2 || tl->rank != ns + 2 ||
      tr->rank != ns + 2)
    FAIL("%s: %s x %s is not a %d-d convolution", who, fmt(tl, b), fmt(tr, c),
         ns);
  int64_t fgc = feature_group_count, bgc = batch_group_count;
  int64_t n = tl->dims[0], cin = tl->dims[1], o = tr->dims[0];
  if (fgc < 1 || bgc < 1 || (fgc > 1 && bgc > 1) || cin % fgc ||
      o % fgc || o % bgc || n % bgc || tr->dims[1] * fgc != cin)
    FAIL("%s: groups (feature %lld, batch %lld) do not fit %s x %s", who,
         (long long)fgc, (long long)bgc, fmt(tl, b), fmt(tr, c));
  int64_t ints[3 + 5 * (TPR_MAX_RANK - 2)];
  ints[0] = ns;
  ints[1] = fgc;
  ints[2] = bgc;
  tpr_type_t r = tpr_type_scalar(result_dtype);
  r.rank = ns + 2;
  r.dims[0] = n / bgc;
  r.dims[1] = o;
  for (int i = 0; i < ns; i++) {
    int64_t s = at(window_strides, i, 1), lo = at(pad_low, i, 0),
            hi = at(pad_high, i, 0), ld = at(lhs_dilation, i, 1),
            rd = at(rhs_dilation, i, 1);
    int64_t in = dilated(tl->dims[2 + i], ld) + lo + hi;
    int64_t win = dilated(tr->dims[2 + i], rd);
    if (s < 1 || ld < 1 || rd < 1 || in < 0)
      FAIL("%s: spatial dim %d: stride %lld, dilations %lld/%lld or padding "
           "(%lld, %lld) invalid for %s x %s",
           who, i, (long long)s, (long long)ld, (long long)rd, (long long)lo,
           (long long)hi, fmt(tl, b), fmt(tr, c));
    r.dims[2 + i] = in < win ? 0 : (in - win) / s + 1;
    ints[3 + i] = s;
    ints[3 + ns + i] = lo;
    ints[3 + 2 * ns + i] = hi;
    ints[3 + 3 * ns + i] = ld;
    ints[3 + 4 * ns + i] = rd;
  }
  tpr_value_t ops[2] = {lhs, rhs};
  return tpr_graph_add_node(g, TPR_OP_CONVOLUTION, 0, ops, 2, ints, 3 + 5 * ns,
                            NULL, 0, &r, 1);
}

tpr_value_t tpr_reduce_window(tpr_graph_t* g, tpr_value_t v, tpr_value_t init,
                              tpr_reduce_op_t op, const int64_t* window_dims,
                              const int64_t* window_strides,
                              const int64_t* base_dilations,
                              const int64_t* window_dilations,
                              const int64_t* pad_low, const int64_t* pad_high) {
  if (!tpr_graph_ok(g)) return TPR_VALUE_NONE;
  const char* who = "tpr_reduce_window";
  OPERAND(t, v, who, 0);
  OPERAND(ti, init, who, 1);
  char b[TB], c[TB];
  bool kind_ok = op == TPR_REDUCE_SUM
                     ? t->dtype != TPR_DTYPE_BOOL
                     : (op == TPR_REDUCE_MAX || op == TPR_REDUCE_MIN) &&
                           !tpr_dtype_is_complex(t->dtype) &&
                           t->dtype != TPR_DTYPE_BOOL;
  if (!kind_ok || ti->rank != 0 || ti->dtype != t->dtype)
    FAIL("%s: op %d with init %s does not apply to %s", who, (int)op,
         fmt(ti, c), fmt(t, b));
  if (t->rank && !window_dims) FAIL("%s: missing window dims", who);
  int rank = t->rank;
  int64_t ints[6 * TPR_MAX_RANK];
  tpr_type_t r = *t;
  for (int i = 0; i < rank; i++) {
    int64_t w = window_dims[i], s = at(window_strides, i, 1),
            bd = at(base_dilations, i, 1), wd = at(window_dilations, i, 1),
            lo = at(pad_low, i, 0), hi = at(pad_high, i, 0);
    int64_t in = dilated(t->dims[i], bd) + lo + hi, win = dilated(w, wd);
    if (w < 1 || s < 1 || bd < 1 || wd < 1 || lo < 0 || hi < 0)
      FAIL("%s: dim %d: window %lld, stride %lld, dilations %lld/%lld or "
           "padding (%lld, %lld) invalid for %s",
           who, i, (long long)w, (long long)s, (long long)bd, (long long)wd,
           (long long)lo, (long long)hi, fmt(t, b));
    r.dims[i] = in < win ? 0 : (in - win) / s + 1;
    ints[i] = w;
    ints[rank + i] = s;
    ints[2 * rank + i] = bd;
    ints[3 * rank + i] = wd;
    ints[4 * rank + i] = lo;
    ints[5 * rank + i] = hi;
  }
  tpr_value_t ops[2] = {v, init};
  return tpr_graph_add_node(g, TPR_OP_REDUCE_WINDOW, (int32_t)op, ops, 2, ints,
                            6 * rank, NULL, 0, &r, 1);
}
