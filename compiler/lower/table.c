// The rule table: the per-group tables merged into one array sorted by
// name on first use (binary search per lookup), and tpr_lower, which runs a
// rule and checks its results against PyTorch's out types.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "compiler/lower/lower_internal.h"

typedef struct {
  const tpr_rule_t* rules;
  const size_t* count;
} group_t;

static const group_t kGroups[] = {
    {lw_rules_elementwise, &lw_rules_elementwise_count},
    {lw_rules_activation, &lw_rules_activation_count},
    {lw_rules_reduce, &lw_rules_reduce_count},
    {lw_rules_linalg, &lw_rules_linalg_count},
    {lw_rules_factory, &lw_rules_factory_count},
    {lw_rules_random, &lw_rules_random_count},
    {lw_rules_nn, &lw_rules_nn_count},
    {lw_rules_index, &lw_rules_index_count},
    {lw_rules_foreach, &lw_rules_foreach_count},
    {lw_rules_sort, &lw_rules_sort_count},
    {lw_rules_scan, &lw_rules_scan_count},
    {lw_rules_scatter, &lw_rules_scatter_count},
    {lw_rules_sample, &lw_rules_sample_count},
    {lw_rules_conv, &lw_rules_conv_count},
    {lw_rules_pool, &lw_rules_pool_count},
    {lw_rules_norm, &lw_rules_norm_count},
    {lw_rules_special, &lw_rules_special_count},
    {lw_rules_bessel_cdist, &lw_rules_bessel_cdist_count},
    {lw_rules_poly, &lw_rules_poly_count},
    {lw_rules_fft, &lw_rules_fft_count},
    {lw_rules_random_more, &lw_rules_random_more_count},
    {lw_rules_shrink_take_cross_isin, &lw_rules_shrink_take_cross_isin_count},
    {lw_rules_factor, &lw_rules_factor_count},
    {lw_rules_embedding_bag, &lw_rules_embedding_bag_count},
    {lw_rules_grid, &lw_rules_grid_count},
    {lw_rules_view, &lw_rules_view_count},
    {lw_rules_margin_rrelu_renorm, &lw_rules_margin_rrelu_renorm_count},
    {lw_rules_weight_norm_rnn_cells, &lw_rules_weight_norm_rnn_cells_count},
    {lw_rules_optim, &lw_rules_optim_count},
    {lw_rules_ctc, &lw_rules_ctc_count},
};

// Large enough for every group; checked when the table is built.
#define LW_MAX_RULES 2048

static tpr_rule_t g_table[LW_MAX_RULES];
static size_t g_count;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int cmp_rule(const void* a, const void* b) {
  return strcmp(((const tpr_rule_t*)a)->name, ((const tpr_rule_t*)b)->name);
}

static void build_table(void) {
  size_t n = 0;
  for (size_t gi = 0; gi < sizeof kGroups / sizeof kGroups[0]; gi++)
    for (size_t i = 0; i < *kGroups[gi].count && n < LW_MAX_RULES; i++)
      g_table[n++] = kGroups[gi].rules[i];
  qsort(g_table, n, sizeof(tpr_rule_t), cmp_rule);
  // A name listed twice keeps its first entry (tests check there are none).
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (m == 0 || strcmp(g_table[m - 1].name, g_table[i].name) != 0)
      g_table[m++] = g_table[i];
  g_count = m;
}

const tpr_rule_t* tpr_rule_table(size_t* out_count) {
  pthread_once(&g_once, build_table);
  *out_count = g_count;
  return g_table;
}

const tpr_rule_t* tpr_rule_find(const char* op_name) {
  if (!op_name) return NULL;
  pthread_once(&g_once, build_table);
  size_t lo = 0, hi = g_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(op_name, g_table[mid].name);
    if (c == 0) return &g_table[mid];
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  return NULL;
}

static tpr_status_t annotate(const tpr_lower_ctx_t* ctx, tpr_status_t s) {
  const char* msg = tpr_status_message(s);
  if (ctx->op_name && strstr(msg, ctx->op_name)) return s;
  char args[512];
  lw_format_args(ctx, args, sizeof args);
  return tpr_status_annotate(s, "%s(%s)", ctx->op_name ? ctx->op_name : "?",
                             args);
}

tpr_status_t tpr_lower(tpr_lower_ctx_t* ctx) {
  if (!ctx || !ctx->graph)
    return TPR_ERR(INVALID_ARGUMENT, "tpr_lower: no context or graph");
  TPR_RETURN_IF_ERROR(tpr_graph_status(ctx->graph));
  const tpr_rule_t* rule = tpr_rule_find(ctx->op_name);
  if (!rule)
    return TPR_ERR(UNIMPLEMENTED, "no lowering rule for %s",
                   ctx->op_name ? ctx->op_name : "(null)");
  if (ctx->num_outs < 0 || (ctx->num_outs > 0 && (!ctx->outs || !ctx->out_types)))
    return TPR_ERR(INVALID_ARGUMENT, "%s: bad out types/values (%d)",
                   ctx->op_name, (int)ctx->num_outs);
  // Every rule but the foreach ones (whose lists may be empty) and
  // _assert_async (no results) reads out_types[0].
  if (ctx->num_outs < 1 && strncmp(ctx->op_name, "aten::_foreach_", 15) != 0 &&
      strncmp(ctx->op_name, "aten::_assert_async", 19) != 0)
    return TPR_ERR(INVALID_ARGUMENT, "%s: no out types given", ctx->op_name);
  for (int i = 0; i < ctx->num_outs; i++) ctx->outs[i] = TPR_VALUE_NONE;
  tpr_status_t s = rule->lower(ctx);
  if (tpr_status_is_ok(s)) s = tpr_graph_status(ctx->graph);
  for (int i = 0; tpr_status_is_ok(s) && i < ctx->num_outs; i++) {
    char want[96], got[96];
    const tpr_type_t* t = ctx->outs[i] == TPR_VALUE_NONE
                              ? NULL
                              : tpr_value_type(ctx->graph, ctx->outs[i]);
    if (!t || !tpr_type_equal(t, &ctx->out_types[i]))
      s = TPR_ERR(INTERNAL, "result %d is %s, PyTorch expects %s", i,
                  t ? tpr_type_format(t, got, sizeof got) : "missing",
                  tpr_type_format(&ctx->out_types[i], want, sizeof want));
  }
  return tpr_status_is_ok(s) ? s : annotate(ctx, s);
}
