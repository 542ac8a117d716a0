// Foreach ops (_foreach_add_.List, _foreach_mul_.Scalar, ...): one generic
// rule applies the element rule per list index. The element rule is found
// from the op name ("aten::_foreach_addcmul_.ScalarList" -> addcmul) and
// sees, for index i:
//   * Tensor[] arguments as their i-th tensor,
//   * Scalar[] arguments (INT_LIST / DOUBLE_LIST / BOOL_LIST / TENSOR_LIST of
//     scalars) as their i-th scalar,
//   * the `Tensor scalars` of the addcmul/addcdiv .Tensor overloads as its
//     i-th element,
//   * every other argument unchanged,
// and produces output i with out_types[i]. In-place overloads reuse the
// functional rule; the executor writes output i back into self[i].
#include "compiler/lower/lower_internal.h"

#define MAX_ARGS 12

typedef struct {
  const char* base;
  tpr_lower_fn_t fn;
  // Element argument k reads foreach argument map[k] (-1: None); used when
  // the schemas differ (_foreach_norm(self, ord, dtype) vs
  // linalg_vector_norm(self, ord, dim, keepdim, dtype)). NULL: identity.
  const int* map;
  int map_len;
} elem_t;

static const int kNormMap[5] = {0, 1, -1, -1, 2};

static const elem_t kElems[] = {
    {"add", lw_rule_add, NULL, 0},
    {"sub", lw_rule_sub, NULL, 0},
    {"mul", lw_rule_mul, NULL, 0},
    {"div", lw_rule_div, NULL, 0},
    {"pow", lw_rule_pow, NULL, 0},
    {"maximum", lw_rule_maximum, NULL, 0},
    {"minimum", lw_rule_minimum, NULL, 0},
    {"clamp_min", lw_rule_clamp_min, NULL, 0},
    {"clamp_max", lw_rule_clamp_max, NULL, 0},
    {"addcmul", lw_rule_addcmul, NULL, 0},
    {"addcdiv", lw_rule_addcdiv, NULL, 0},
    {"lerp", lw_rule_lerp, NULL, 0},
    {"copy", lw_rule_copy, NULL, 0},
    {"clone", lw_rule_identity, NULL, 0},
    {"zero", lw_rule_zero, NULL, 0},
    {"norm", lw_rule_norm, kNormMap, 5},
    {"powsum", lw_rule_powsum, NULL, 0},
    {"max", lw_rule_max_all, NULL, 0},
    {"mm", lw_rule_mm, NULL, 0},
};

// Splits "aten::_foreach_<base>[_][.<overload>]".
static bool parse(const char* name, char* base, size_t cap,
                  const char** overload) {
  static const char kPrefix[] = "aten::_foreach_";
  if (!name || strncmp(name, kPrefix, sizeof kPrefix - 1) != 0) return false;
  const char* b = name + sizeof kPrefix - 1;
  const char* dot = strchr(b, '.');
  size_t n = dot ? (size_t)(dot - b) : strlen(b);
  if (n > 0 && b[n - 1] == '_') n--;  // in-place
  if (n == 0 || n >= cap) return false;
  memcpy(base, b, n);
  base[n] = '\0';
  *overload = dot ? dot + 1 : "";
  return true;
}

static tpr_status_t lower_foreach(lw_ctx_t* ctx) {
  char base[32];
  const char* overload;
  if (!parse(ctx->op_name, base, sizeof base, &overload))
    return lw_fail(ctx, TPR_INTERNAL, "not a foreach op name");
  const elem_t* e = NULL;
  elem_t unary = {base, NULL, NULL, 0};
  for (size_t i = 0; i < sizeof kElems / sizeof kElems[0]; i++)
    if (strcmp(kElems[i].base, base) == 0) e = &kElems[i];
  if (!e) {
    unary.fn = lw_unary_rule(base);
    if (!unary.fn) return lw_fail(ctx, TPR_UNIMPLEMENTED, "no element rule");
    e = &unary;
  }
  // The list length: the first TENSOR_LIST.
  int n = -1;
  for (int k = 0; k < ctx->num_args && n < 0; k++)
    if (ctx->args[k].kind == TPR_ARG_TENSOR_LIST) n = ctx->args[k].count;
  if (n < 0) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "no tensor list argument");
  if (ctx->num_outs != n)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "%d out types for %d tensors",
                   (int)ctx->num_outs, n);
  int nargs = e->map ? e->map_len : ctx->num_args;
  if (nargs > MAX_ARGS) return lw_fail(ctx, TPR_UNIMPLEMENTED, "too many arguments");
  // The .Tensor overloads of addcmul/addcdiv take a 1-d tensor of scalars.
  int split = (strcmp(overload, "Tensor") == 0 &&
               (strcmp(base, "addcmul") == 0 || strcmp(base, "addcdiv") == 0))
                  ? 3
                  : -1;
  tpr_graph_t* g = ctx->graph;
  for (int i = 0; i < n; i++) {
    tpr_arg_t args[MAX_ARGS];
    for (int k = 0; k < nargs; k++) {
      int src = e->map ? e->map[k] : k;
      const tpr_arg_t* a = lw_arg(ctx, src);
      tpr_arg_t* d = &args[k];
      *d = *a;
      if (src < 0) continue;
      bool listy = a->kind == TPR_ARG_TENSOR_LIST || a->kind == TPR_ARG_INT_LIST ||
                   a->kind == TPR_ARG_DOUBLE_LIST || a->kind == TPR_ARG_BOOL_LIST;
      if (listy && a->count != n)
        return lw_fail(ctx, TPR_INVALID_ARGUMENT, "argument %d has %d entries, want %d",
                       src, (int)a->count, n);
      memset(d, 0, sizeof *d);
      d->kind = TPR_ARG_TENSOR;
      d->value = TPR_VALUE_NONE;
      switch (a->kind) {
        case TPR_ARG_TENSOR_LIST:
          d->value = a->values[i];
          d->is_scalar = a->is_scalar;
          if (d->value == TPR_VALUE_NONE) d->kind = TPR_ARG_NONE;
          break;
        case TPR_ARG_INT_LIST:
          d->value = tpr_constant_i64(g, TPR_DTYPE_S64, a->ints[i]);
          d->is_scalar = true;
          break;
        case TPR_ARG_DOUBLE_LIST:
          d->value = tpr_constant_f64(g, TPR_DTYPE_F64, a->doubles[i]);
          d->is_scalar = true;
          break;
        case TPR_ARG_BOOL_LIST:
          d->value = tpr_constant_i64(g, TPR_DTYPE_BOOL, a->bools[i]);
          d->is_scalar = true;
          break;
        case TPR_ARG_TENSOR:
          if (k == split) {
            const tpr_type_t* st = lw_type(ctx, a->value);
            if (st->rank != 1 || st->dims[0] != n)
              return lw_fail(ctx, TPR_INVALID_ARGUMENT,
                             "scalars tensor must have %d entries", n);
            int64_t s0 = i, s1 = i + 1;
            d->value = tpr_reshape(g, tpr_slice(g, a->value, &s0, &s1, NULL), 0, NULL);
            break;
          }
          *d = *a;
          break;
        default:
          *d = *a;
          break;
      }
    }
    lw_ctx_t sub = *ctx;
    sub.args = args;
    sub.num_args = nargs;
    sub.out_types = ctx->out_types + i;
    sub.num_outs = 1;
    sub.outs = ctx->outs + i;
    tpr_status_t s = e->fn(&sub);
    if (!tpr_status_is_ok(s))
      return tpr_status_annotate(s, "element %d of %d", i, n);
  }
  return lw_done(ctx);
}

// Functional and in-place names of one foreach op.
#define FE(name) LW_RULE("_foreach_" name, lower_foreach), \
                 LW_RULE("_foreach_" name "_", lower_foreach)
#define FE_OV(name, ov) LW_RULE("_foreach_" name "." ov, lower_foreach), \
                        LW_RULE("_foreach_" name "_." ov, lower_foreach)
#define FE_BIN(name) FE_OV(name, "List"), FE_OV(name, "Scalar"), \
                     FE_OV(name, "ScalarList")

LW_DEFINE_TABLE(foreach,
    FE_BIN("add"), FE_OV("add", "Tensor"),
    FE_BIN("sub"),
    FE_BIN("mul"), FE_OV("mul", "Tensor"),
    FE_BIN("div"), FE_OV("div", "Tensor"),
    FE_BIN("pow"), LW_RULE("_foreach_pow.ScalarAndTensor", lower_foreach),
    FE_BIN("maximum"), FE_BIN("minimum"), FE_BIN("clamp_min"), FE_BIN("clamp_max"),
    FE_OV("addcmul", "Scalar"), FE_OV("addcmul", "ScalarList"), FE_OV("addcmul", "Tensor"),
    FE_OV("addcdiv", "Scalar"), FE_OV("addcdiv", "ScalarList"), FE_OV("addcdiv", "Tensor"),
    FE_OV("lerp", "List"), FE_OV("lerp", "Scalar"), FE_OV("lerp", "ScalarList"),
    FE("copy"), LW_RULE("_foreach_clone", lower_foreach), FE("zero"),
    LW_RULE("_foreach_norm.Scalar", lower_foreach),
    LW_RULE("_foreach_powsum.Scalar", lower_foreach),
    LW_RULE("_foreach_max", lower_foreach), LW_RULE("_foreach_mm", lower_foreach),
    FE("abs"), FE("acos"), FE("asin"), FE("atan"), FE("ceil"), FE("cos"),
    FE("cosh"), FE("erf"), FE("erfc"), FE("exp"), FE("expm1"), FE("floor"),
    FE("frac"), FE("lgamma"), FE("log"), FE("log10"), FE("log1p"), FE("log2"),
    FE("neg"), FE("reciprocal"), FE("round"), FE("rsqrt"), FE("sigmoid"),
    FE("sign"), FE("sin"), FE("sinh"), FE("sqrt"), FE("tan"), FE("tanh"),
    FE("trunc"));
