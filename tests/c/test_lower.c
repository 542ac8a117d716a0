// The lowering-rule table and tpr_lower: lookup, out-type checks, error
// messages, sample lowerings that must emit StableHLO, and a robustness
// sweep calling every rule with ill-fitting arguments (it must return a
// status, never crash). Numerical agreement with PyTorch is checked by
// tools/check_rules.py against the PJRT plugin.
#include <stdlib.h>

#include "harness.h"
#include "tpr/lower.h"

static tpr_type_t T(tpr_dtype_t d, int rank, int64_t a, int64_t b) {
  int64_t dims[2] = {a, b};
  return tpr_type_make(d, rank, dims);
}

static tpr_arg_t targ(tpr_value_t v, bool scalar) {
  tpr_arg_t a = {0};
  a.kind = TPR_ARG_TENSOR;
  a.value = v;
  a.is_scalar = scalar;
  return a;
}

static tpr_arg_t iarg(int64_t i) {
  tpr_arg_t a = {0};
  a.kind = TPR_ARG_INT;
  a.i = i;
  a.value = TPR_VALUE_NONE;
  return a;
}

static tpr_arg_t none_arg(void) {
  tpr_arg_t a = {0};
  a.value = TPR_VALUE_NONE;
  return a;
}

// Lowers |name| and emits the graph; returns the status.
static tpr_status_t lower_emit(tpr_graph_t* g, const char* name,
                               const tpr_arg_t* args, int nargs,
                               const tpr_type_t* outs, int nouts) {
  tpr_value_t vals[8];
  tpr_lower_ctx_t ctx = {g, name, args, nargs, outs, nouts, vals};
  TPR_RETURN_IF_ERROR(tpr_lower(&ctx));
  for (int i = 0; i < nouts; i++) tpr_graph_add_result(g, vals[i]);
  char* text;
  size_t len;
  TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(g, &text, &len));
  tpr_free(text);
  return tpr_ok_status();
}

TPR_TEST(lower_table_is_sorted_unique_and_found) {
  size_t n;
  const tpr_rule_t* t = tpr_rule_table(&n);
  CHECK(n > 700);
  for (size_t i = 0; i < n; i++) {
    // Names are qualified op names: ATen's, and the prims that compiled
    // graphs contain (Dynamo writes prims.fma; functionalization and
    // PyTorch's decompositions write others), and our own (tpu::).
    CHECK(strncmp(t[i].name, "aten::", 6) == 0 || strncmp(t[i].name, "prims::", 7) == 0 ||
          strncmp(t[i].name, "tpu::", 5) == 0);
    CHECK(t[i].lower != NULL);
    if (i) CHECK(strcmp(t[i - 1].name, t[i].name) < 0);
    CHECK(tpr_rule_find(t[i].name) == &t[i]);
  }
  CHECK(tpr_rule_find("aten::no_such_op") == NULL);
  CHECK(tpr_rule_find("aten::add") == NULL);
  CHECK(tpr_rule_find(NULL) == NULL);
  // What a Linear-ReLU-Linear MLP with cross-entropy, SGD and AdamW needs.
  static const char* kMlp[] = {
      "aten::addmm", "aten::mm", "aten::relu", "aten::threshold_backward",
      "aten::_log_softmax", "aten::_log_softmax_backward_data",
      "aten::nll_loss_forward", "aten::nll_loss_backward",
      "aten::sum.dim_IntList", "aten::fill_.Scalar", "aten::zero_",
      "aten::copy_", "aten::add_.Tensor", "aten::mul_.Tensor",
      "aten::_foreach_add_.List", "aten::_foreach_add_.Scalar",
      "aten::_foreach_mul_.Scalar", "aten::_foreach_lerp_.Scalar",
      "aten::_foreach_addcmul_.Scalar", "aten::_foreach_addcdiv_.ScalarList",
      "aten::_foreach_sqrt", "aten::_foreach_div_.ScalarList",
      "aten::_foreach_pow.ScalarAndTensor", "aten::_foreach_maximum_.List",
      "aten::lerp_.Scalar", "aten::addcdiv_", "aten::addcmul_", "aten::sqrt"};
  for (size_t i = 0; i < sizeof kMlp / sizeof kMlp[0]; i++) {
    if (!tpr_rule_find(kMlp[i])) fprintf(stderr, "  missing %s\n", kMlp[i]);
    CHECK(tpr_rule_find(kMlp[i]) != NULL);
  }
}

TPR_TEST(lower_add_with_scalar_alpha_emits) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t a = tpr_parameter(g, T(TPR_DTYPE_BF16, 2, 2, 3));
  tpr_value_t b = tpr_parameter(g, T(TPR_DTYPE_BF16, 1, 3, 0));
  tpr_value_t alpha = tpr_parameter(g, tpr_type_scalar(TPR_DTYPE_F64));
  tpr_arg_t args[3] = {targ(a, false), targ(b, false), targ(alpha, true)};
  tpr_type_t out = T(TPR_DTYPE_BF16, 2, 2, 3);
  CHECK_OK(lower_emit(g, "aten::add_.Tensor", args, 3, &out, 1));
  tpr_graph_free(g);
}

TPR_TEST(lower_mm_bf16_and_foreach_emit) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t a = tpr_parameter(g, T(TPR_DTYPE_BF16, 2, 4, 8));
  tpr_value_t b = tpr_parameter(g, T(TPR_DTYPE_BF16, 2, 8, 3));
  tpr_arg_t args[2] = {targ(a, false), targ(b, false)};
  tpr_type_t out = T(TPR_DTYPE_BF16, 2, 4, 3);
  CHECK_OK(lower_emit(g, "aten::mm", args, 2, &out, 1));

  tpr_graph_reset(g);
  tpr_value_t l0[2] = {tpr_parameter(g, T(TPR_DTYPE_F32, 1, 5, 0)),
                       tpr_parameter(g, T(TPR_DTYPE_F32, 2, 2, 2))};
  tpr_value_t l1[2] = {tpr_parameter(g, T(TPR_DTYPE_F32, 1, 5, 0)),
                       tpr_parameter(g, T(TPR_DTYPE_F32, 2, 2, 2))};
  tpr_arg_t fa[3] = {{.kind = TPR_ARG_TENSOR_LIST, .count = 2, .values = l0},
                     {.kind = TPR_ARG_TENSOR_LIST, .count = 2, .values = l1},
                     targ(tpr_parameter(g, tpr_type_scalar(TPR_DTYPE_F64)), true)};
  tpr_type_t fo[2] = {T(TPR_DTYPE_F32, 1, 5, 0), T(TPR_DTYPE_F32, 2, 2, 2)};
  CHECK_OK(lower_emit(g, "aten::_foreach_add_.List", fa, 3, fo, 2));
  // Wrong number of out types for the list.
  tpr_graph_reset(g);
  l0[0] = tpr_parameter(g, T(TPR_DTYPE_F32, 1, 5, 0));
  l0[1] = tpr_parameter(g, T(TPR_DTYPE_F32, 2, 2, 2));
  fa[0].values = l0;
  fa[1].kind = TPR_ARG_NONE;
  tpr_value_t vals[2];
  tpr_lower_ctx_t ctx = {g, "aten::_foreach_sqrt", fa, 1, fo, 1, vals};
  CHECK_STATUS(tpr_lower(&ctx), TPR_INVALID_ARGUMENT);
  tpr_graph_free(g);
}

TPR_TEST(lower_nll_loss_and_sum_keepdim_emit) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(TPR_DTYPE_F32, 2, 6, 5));
  tpr_value_t t = tpr_parameter(g, T(TPR_DTYPE_S64, 1, 6, 0));
  tpr_arg_t args[5] = {targ(x, false), targ(t, false), none_arg(), iarg(1),
                       iarg(-100)};
  tpr_type_t outs[2] = {tpr_type_scalar(TPR_DTYPE_F32),
                        tpr_type_scalar(TPR_DTYPE_F32)};
  CHECK_OK(lower_emit(g, "aten::nll_loss_forward", args, 5, outs, 2));

  tpr_graph_reset(g);
  x = tpr_parameter(g, T(TPR_DTYPE_BF16, 2, 6, 5));
  int64_t dims[1] = {-1};
  tpr_arg_t sargs[4] = {targ(x, false),
                        {.kind = TPR_ARG_INT_LIST, .count = 1, .ints = dims},
                        {.kind = TPR_ARG_BOOL, .b = true}, none_arg()};
  tpr_type_t so = T(TPR_DTYPE_BF16, 2, 6, 1);
  CHECK_OK(lower_emit(g, "aten::sum.dim_IntList", sargs, 4, &so, 1));
  tpr_graph_free(g);
}

TPR_TEST(lower_random_needs_generator) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(TPR_DTYPE_F32, 2, 4, 4));
  int64_t two = 2;
  tpr_value_t st = tpr_parameter(g, tpr_type_make(TPR_DTYPE_U64, 1, &two));
  tpr_arg_t args[4] = {targ(x, false), {.kind = TPR_ARG_DOUBLE, .d = 0},
                       {.kind = TPR_ARG_DOUBLE, .d = 1},
                       {.kind = TPR_ARG_GENERATOR, .value = st}};
  tpr_type_t out = T(TPR_DTYPE_F32, 2, 4, 4);
  CHECK_OK(lower_emit(g, "aten::normal_", args, 4, &out, 1));
  tpr_graph_reset(g);
  x = tpr_parameter(g, T(TPR_DTYPE_F32, 2, 4, 4));
  args[0] = targ(x, false);
  args[3] = none_arg();
  tpr_value_t vals[1];
  tpr_lower_ctx_t ctx = {g, "aten::normal_", args, 4, &out, 1, vals};
  tpr_status_t s = tpr_lower(&ctx);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK_STR_CONTAINS(tpr_status_message(s), "aten::normal_(f32[4,4]");
  CHECK_STR_CONTAINS(tpr_status_message(s), "generator");
  tpr_status_free(s);
  tpr_graph_free(g);
}

TPR_TEST(lower_errors_name_op_and_types) {
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_value_t x = tpr_parameter(g, T(TPR_DTYPE_F32, 2, 2, 3));
  tpr_arg_t args[3] = {targ(x, false), targ(x, false), none_arg()};
  tpr_value_t vals[2];
  // Unknown op.
  tpr_type_t out = T(TPR_DTYPE_F32, 2, 2, 3);
  tpr_lower_ctx_t ctx = {g, "aten::frobnicate", args, 1, &out, 1, vals};
  tpr_status_t s = tpr_lower(&ctx);
  CHECK(tpr_status_code(s) == TPR_UNIMPLEMENTED);
  CHECK_STR_CONTAINS(tpr_status_message(s), "aten::frobnicate");
  tpr_status_free(s);
  // An out type the rule cannot produce.
  tpr_type_t wrong = T(TPR_DTYPE_F32, 1, 7, 0);
  ctx = (tpr_lower_ctx_t){g, "aten::exp", args, 1, &wrong, 1, vals};
  s = tpr_lower(&ctx);
  CHECK(!tpr_status_is_ok(s));
  CHECK_STR_CONTAINS(tpr_status_message(s), "aten::exp");
  tpr_status_free(s);
  // Bad rounding mode.
  tpr_graph_reset(g);
  x = tpr_parameter(g, T(TPR_DTYPE_F32, 2, 2, 3));
  args[0] = targ(x, false);
  args[1] = targ(x, false);
  args[2] = (tpr_arg_t){.kind = TPR_ARG_STRING, .s = "ceil", .value = TPR_VALUE_NONE};
  ctx = (tpr_lower_ctx_t){g, "aten::div.Tensor_mode", args, 3, &out, 1, vals};
  s = tpr_lower(&ctx);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK_STR_CONTAINS(tpr_status_message(s), "aten::div.Tensor_mode(f32[2,3], f32[2,3], \"ceil\")");
  tpr_status_free(s);
  // Complex is out of scope for math ops.
  tpr_graph_reset(g);
  tpr_value_t c = tpr_parameter(g, T(TPR_DTYPE_C64, 1, 4, 0));
  args[0] = targ(c, false);
  tpr_type_t cout = T(TPR_DTYPE_C64, 1, 4, 0);
  ctx = (tpr_lower_ctx_t){g, "aten::exp", args, 1, &cout, 1, vals};
  s = tpr_lower(&ctx);
  CHECK(tpr_status_code(s) == TPR_UNIMPLEMENTED);
  CHECK_STR_CONTAINS(tpr_status_message(s), "complex");
  tpr_status_free(s);
  // No out types.
  ctx = (tpr_lower_ctx_t){g, "aten::exp", args, 1, NULL, 0, vals};
  CHECK_STATUS(tpr_lower(&ctx), TPR_INVALID_ARGUMENT);
  tpr_graph_free(g);
}

// Every rule, called with argument lists that mostly do not fit its schema,
// must return a status (any code) and leave no leak or crash.
TPR_TEST(lower_every_rule_survives_bad_arguments) {
  size_t n;
  const tpr_rule_t* t = tpr_rule_table(&n);
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  int ok = 0;
  static const tpr_dtype_t kOut[3] = {TPR_DTYPE_F32, TPR_DTYPE_S64,
                                      TPR_DTYPE_BOOL};
  for (size_t r = 0; r < n; r++) {
    for (int pattern = 0; pattern < 15; pattern++) {
      tpr_dtype_t od = kOut[pattern / 5];
      tpr_graph_reset(g);
      tpr_value_t a = tpr_parameter(g, T(TPR_DTYPE_F32, 2, 3, 4));
      tpr_value_t b = tpr_parameter(g, T(TPR_DTYPE_S64, 1, 4, 0));
      tpr_value_t s = tpr_parameter(g, tpr_type_scalar(TPR_DTYPE_F64));
      tpr_value_t list[2] = {a, a};
      tpr_arg_t args[6];
      int nargs = 0;
      switch (pattern % 5) {
        case 0: break;
        case 4:
          args[nargs++] = targ(tpr_parameter(g, T(TPR_DTYPE_BOOL, 0, 0, 0)), false);
          args[nargs++] = targ(s, true);
          args[nargs++] = targ(a, false);
          break;
        case 1:
          args[nargs++] = targ(a, false);
          args[nargs++] = targ(b, false);
          args[nargs++] = targ(s, true);
          break;
        case 2:
          args[nargs++] = (tpr_arg_t){.kind = TPR_ARG_TENSOR_LIST, .count = 2,
                                      .values = list};
          args[nargs++] = iarg(7);
          args[nargs++] = none_arg();
          args[nargs++] = (tpr_arg_t){.kind = TPR_ARG_STRING, .s = "x",
                                      .value = TPR_VALUE_NONE};
          break;
        default:
          for (int k = 0; k < 6; k++) args[nargs++] = targ(a, false);
          break;
      }
      tpr_type_t outs[2] = {T(od, 2, 3, 4), T(od, 2, 3, 4)};
      tpr_value_t vals[2];
      tpr_lower_ctx_t ctx = {g, t[r].name, args, nargs, outs,
                             strncmp(t[r].name, "aten::_foreach", 14) ? 1 : 2,
                             vals};
      tpr_status_t st = tpr_lower(&ctx);
      if (tpr_status_is_ok(st)) ok++;
      tpr_status_free(st);
    }
  }
  tpr_graph_free(g);
  CHECK(ok > 100);  // the fitting cases (unary ops on one tensor, ...) pass
}
