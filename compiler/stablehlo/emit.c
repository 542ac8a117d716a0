// The StableHLO emitter: a graph as MLIR text, body ops in generic form.
//
//   module @tpr attributes {mhlo.num_partitions = 1 : i32, ...} {
//     func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32})
//         -> (tensor<4xf32>) {
//       %1 = "stablehlo.add"(%arg0, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
//       "func.return"(%1) : (tensor<4xf32>) -> ()
//     }
//   }
//
// Value names: %argK for parameters, %V for the single result V of a node,
// %mV#i for result i of a multi-result node whose first value is V, and
// %nN_xxx for helpers of node N (reduce inits, region arguments). Every
// statement spells its operand and result types, so the text needs no
// inference. Constants are hex byte strings (exact for every float,
// NaN/inf included), integer splats decimal, bools true/false.
//
// Executables compiled from this text are cached on disk by graph hash: a
// change to the text written for an unchanged graph raises CODEGEN_VERSION
// (eager/disk_cache.c).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"

typedef struct emitter {
  tpr_text_t text;
  const tpr_graph_t* g;
  // Reshapes of parameters re-emitted at each use (see mark_per_use_views):
  // per value, whether it is one, and the node whose copy is current.
  bool* per_use;
  int32_t* per_use_at;
} emitter_t;

void tpr_text_append(tpr_text_t* t, const char* s, size_t len) {
  if (t->oom) return;
  if (t->n + len + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->n + len + 1) cap *= 2;
    char* q = (char*)tpr_realloc(t->p, cap);
    if (!q) {
      t->oom = true;
      return;
    }
    t->p = q;
    t->cap = cap;
  }
  memcpy(t->p + t->n, s, len);
  t->n += len;
  t->p[t->n] = 0;
}

static void put_n(emitter_t* e, const char* s, size_t len) {
  tpr_text_append(&e->text, s, len);
}

static void put(emitter_t* e, const char* s) { put_n(e, s, strlen(s)); }

static void putf(emitter_t* e, const char* fmt, ...) TPR_PRINTF_LIKE(2, 3);
static void putf(emitter_t* e, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (k > 0) put_n(e, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}

static void put_i64(emitter_t* e, int64_t v) { putf(e, "%lld", (long long)v); }

static void put_list(emitter_t* e, const int64_t* v, int n) {
  for (int i = 0; i < n; i++) {
    if (i) put(e, ", ");
    put_i64(e, v[i]);
  }
}

// "array<i64: 1, 2>"
static void put_array(emitter_t* e, const char* name, const int64_t* v, int n) {
  putf(e, "%s = array<i64", name);
  if (n) put(e, ": ");
  put_list(e, v, n);
  put(e, ">");
}

static void put_type(emitter_t* e, const tpr_type_t* t) {
  put(e, "tensor<");
  for (int i = 0; i < t->rank; i++) putf(e, "%lldx", (long long)t->dims[i]);
  put(e, tpr_dtype_mlir_name(t->dtype));
  put(e, ">");
}

static void put_scalar_type(emitter_t* e, tpr_dtype_t d) {
  putf(e, "tensor<%s>", tpr_dtype_mlir_name(d));
}

static void put_value(emitter_t* e, tpr_value_t v) {
  const tpr_graph_t* g = e->g;
  const tpr_node_t* n = tpr_graph_node_of(g, v);
  if (e->per_use && e->per_use[v])
    putf(e, "%%p%d_%d", v, e->per_use_at[v]);
  else if (n->op == TPR_OP_PARAMETER)
    putf(e, "%%arg%d", n->sub);
  else if (n->op == TPR_OP_REGION_ARGS)  // block arguments: plain names
    putf(e, "%%a%d", v);
  else if (n->num_results > 1)
    putf(e, "%%m%d#%d", n->first_value, tpr_graph_value(g, v)->index);
  else
    putf(e, "%%%d", v);
}

static const tpr_type_t* vtype(emitter_t* e, tpr_value_t v) {
  return &tpr_graph_value(e->g, v)->type;
}

//===--- constants ---------------------------------------------------------===//

static void put_hex(emitter_t* e, const uint8_t* p, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  char buf[128];
  size_t k = 0;
  put(e, "\"0x");
  for (size_t i = 0; i < n; i++) {
    buf[k++] = hex[p[i] >> 4];
    buf[k++] = hex[p[i] & 15];
    if (k == sizeof buf) {
      put_n(e, buf, k);
      k = 0;
    }
  }
  put_n(e, buf, k);
  put(e, "\"");
}

static void put_int_elem(emitter_t* e, tpr_dtype_t d, const uint8_t* p) {
  switch (d) {
    case TPR_DTYPE_S8: put_i64(e, (int8_t)p[0]); return;
    case TPR_DTYPE_U8: put_i64(e, p[0]); return;
    case TPR_DTYPE_S16: { int16_t v; memcpy(&v, p, 2); put_i64(e, v); return; }
    case TPR_DTYPE_U16: { uint16_t v; memcpy(&v, p, 2); put_i64(e, v); return; }
    case TPR_DTYPE_S32: { int32_t v; memcpy(&v, p, 4); put_i64(e, v); return; }
    case TPR_DTYPE_U32: { uint32_t v; memcpy(&v, p, 4); put_i64(e, v); return; }
    case TPR_DTYPE_S64: { int64_t v; memcpy(&v, p, 8); put_i64(e, v); return; }
    case TPR_DTYPE_U64: {
      uint64_t v;
      memcpy(&v, p, 8);
      putf(e, "%llu", (unsigned long long)v);
      return;
    }
    default: return;
  }
}

// Nested [[true, false], ...] for bools (hex i1 layouts vary across MLIRs).
static void put_bool_nested(emitter_t* e, const tpr_type_t* t, int dim,
                            const uint8_t** p) {
  if (dim == t->rank) {
    put(e, **p ? "true" : "false");
    (*p)++;
    return;
  }
  put(e, "[");
  for (int64_t i = 0; i < t->dims[dim]; i++) {
    if (i) put(e, ", ");
    put_bool_nested(e, t, dim + 1, p);
  }
  put(e, "]");
}

// dense<...> : tensor<...>
static void put_dense(emitter_t* e, const tpr_type_t* t, const uint8_t* data) {
  size_t es = tpr_dtype_size(t->dtype);
  int64_t numel = tpr_type_numel(t);
  put(e, "dense<");
  bool splat = numel > 0;
  for (int64_t i = 1; splat && i < numel; i++)
    splat = memcmp(data, data + (size_t)i * es, es) == 0;
  tpr_dtype_t d = t->dtype;
  if (numel == 0) {
    // dense<> : an empty literal
  } else if (d == TPR_DTYPE_BOOL) {
    if (splat) {
      put(e, data[0] ? "true" : "false");
    } else {
      const uint8_t* p = data;
      put_bool_nested(e, t, 0, &p);
    }
  } else if (splat && (tpr_dtype_is_signed_int(d) ||
                       tpr_dtype_is_unsigned_int(d))) {
    put_int_elem(e, d, data);
  } else {
    put_hex(e, data, splat ? es : (size_t)numel * es);
  }
  put(e, "> : ");
  put_type(e, t);
}

static void put_constant(emitter_t* e, const char* name, const tpr_type_t* t,
                         const uint8_t* data) {
  putf(e, "    %s = \"stablehlo.constant\"() {value = ", name);
  put_dense(e, t, data);
  put(e, "} : () -> ");
  put_type(e, t);
  put(e, "\n");
}

static void put_scalar_constant(emitter_t* e, const char* name, tpr_dtype_t d,
                                const uint8_t* bytes) {
  tpr_type_t t = tpr_type_scalar(d);
  put_constant(e, name, &t, bytes);
}

//===--- op names ----------------------------------------------------------===//

static const char* const kUnaryNames[TPR_UNARY_COUNT_] = {
    [TPR_UNARY_NEG] = "stablehlo.negate",
    [TPR_UNARY_ABS] = "stablehlo.abs",
    [TPR_UNARY_SIGN] = "stablehlo.sign",
    [TPR_UNARY_NOT] = "stablehlo.not",
    [TPR_UNARY_EXP] = "stablehlo.exponential",
    [TPR_UNARY_EXPM1] = "stablehlo.exponential_minus_one",
    [TPR_UNARY_LOG] = "stablehlo.log",
    [TPR_UNARY_LOG1P] = "stablehlo.log_plus_one",
    [TPR_UNARY_SQRT] = "stablehlo.sqrt",
    [TPR_UNARY_RSQRT] = "stablehlo.rsqrt",
    [TPR_UNARY_CBRT] = "stablehlo.cbrt",
    [TPR_UNARY_TANH] = "stablehlo.tanh",
    [TPR_UNARY_LOGISTIC] = "stablehlo.logistic",
    [TPR_UNARY_SIN] = "stablehlo.sine",
    [TPR_UNARY_COS] = "stablehlo.cosine",
    [TPR_UNARY_TAN] = "stablehlo.tan",
    [TPR_UNARY_FLOOR] = "stablehlo.floor",
    [TPR_UNARY_CEIL] = "stablehlo.ceil",
    [TPR_UNARY_ROUND_NEAREST_EVEN] = "stablehlo.round_nearest_even",
    [TPR_UNARY_ROUND_NEAREST_AFZ] = "stablehlo.round_nearest_afz",
    [TPR_UNARY_IS_FINITE] = "stablehlo.is_finite",
    [TPR_UNARY_POPCNT] = "stablehlo.popcnt",
    [TPR_UNARY_CLZ] = "stablehlo.count_leading_zeros",
    [TPR_UNARY_REAL] = "stablehlo.real",
    [TPR_UNARY_IMAG] = "stablehlo.imag",
    [TPR_UNARY_ERF] = "chlo.erf",
    [TPR_UNARY_ERFC] = "chlo.erfc",
    [TPR_UNARY_ERF_INV] = "chlo.erf_inv",
    [TPR_UNARY_LGAMMA] = "chlo.lgamma",
    [TPR_UNARY_DIGAMMA] = "chlo.digamma",
    [TPR_UNARY_ASIN] = "chlo.asin",
    [TPR_UNARY_ACOS] = "chlo.acos",
    [TPR_UNARY_ATAN] = "chlo.atan",
    [TPR_UNARY_SINH] = "chlo.sinh",
    [TPR_UNARY_COSH] = "chlo.cosh",
    [TPR_UNARY_ASINH] = "chlo.asinh",
    [TPR_UNARY_ACOSH] = "chlo.acosh",
    [TPR_UNARY_ATANH] = "chlo.atanh",
    [TPR_UNARY_BESSEL_I1E] = "chlo.bessel_i1e",
};
_Static_assert(TPR_UNARY_COUNT_ == 39, "update kUnaryNames");

static const char* const kBinaryNames[TPR_BINARY_COUNT_] = {
    [TPR_BINARY_ADD] = "stablehlo.add",
    [TPR_BINARY_SUB] = "stablehlo.subtract",
    [TPR_BINARY_MUL] = "stablehlo.multiply",
    [TPR_BINARY_DIV] = "stablehlo.divide",
    [TPR_BINARY_REM] = "stablehlo.remainder",
    [TPR_BINARY_POW] = "stablehlo.power",
    [TPR_BINARY_MAX] = "stablehlo.maximum",
    [TPR_BINARY_MIN] = "stablehlo.minimum",
    [TPR_BINARY_ATAN2] = "stablehlo.atan2",
    [TPR_BINARY_AND] = "stablehlo.and",
    [TPR_BINARY_OR] = "stablehlo.or",
    [TPR_BINARY_XOR] = "stablehlo.xor",
    [TPR_BINARY_SHIFT_LEFT] = "stablehlo.shift_left",
    [TPR_BINARY_SHIFT_RIGHT_ARITHMETIC] = "stablehlo.shift_right_arithmetic",
    [TPR_BINARY_SHIFT_RIGHT_LOGICAL] = "stablehlo.shift_right_logical",
    [TPR_BINARY_NEXTAFTER] = "chlo.next_after",
    [TPR_BINARY_POLYGAMMA] = "chlo.polygamma",
    [TPR_BINARY_ZETA] = "chlo.zeta",
    [TPR_BINARY_COMPLEX] = "stablehlo.complex",
};
_Static_assert(TPR_BINARY_COUNT_ == 19, "update kBinaryNames");

static const char* const kDirNames[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};

static const char* compare_type(tpr_dtype_t d) {
  if (tpr_dtype_is_float(d) || tpr_dtype_is_complex(d)) return "FLOAT";
  if (tpr_dtype_is_signed_int(d)) return "SIGNED";
  return "UNSIGNED";
}

//===--- statements --------------------------------------------------------===//

// "    %V = " or "    %mV:n = ".
static void begin(emitter_t* e, const tpr_node_t* n) {
  if (n->num_results > 1)
    putf(e, "    %%m%d:%d = ", n->first_value, n->num_results);
  else
    putf(e, "    %%%d = ", n->first_value);
}

static const tpr_value_t* operands_of(emitter_t* e, const tpr_node_t* n) {
  return e->g->operands + n->operands;
}

static const int64_t* ints_of(emitter_t* e, const tpr_node_t* n) {
  return e->g->ints + n->ints;
}

static void call(emitter_t* e, const tpr_node_t* n, const char* name) {
  putf(e, "\"%s\"(", name);
  const tpr_value_t* ops = operands_of(e, n);
  for (int i = 0; i < n->num_operands; i++) {
    if (i) put(e, ", ");
    put_value(e, ops[i]);
  }
  put(e, ")");
}

// " : (operand types) -> result type(s)\n"
static void signature(emitter_t* e, const tpr_node_t* n, int extra_operands,
                      const tpr_type_t* extra) {
  put(e, " : (");
  const tpr_value_t* ops = operands_of(e, n);
  for (int i = 0; i < n->num_operands; i++) {
    if (i) put(e, ", ");
    put_type(e, vtype(e, ops[i]));
  }
  for (int i = 0; i < extra_operands; i++) {
    if (n->num_operands || i) put(e, ", ");
    put_type(e, &extra[i]);
  }
  put(e, ") -> ");
  if (n->num_results > 1) put(e, "(");
  for (int i = 0; i < n->num_results; i++) {
    if (i) put(e, ", ");
    put_type(e, vtype(e, n->first_value + i));
  }
  if (n->num_results > 1) put(e, ")");
  put(e, "\n");
}

// A scalar statement inside a region: %res = "op"(%a, %b) {attrs} : ...
static void region_op(emitter_t* e, const char* res, const char* op,
                      const char* a, const char* b, const char* c,
                      const char* attrs, tpr_dtype_t in, tpr_dtype_t out) {
  putf(e, "      %s = \"%s\"(%s", res, op, a);
  if (b) putf(e, ", %s", b);
  if (c) putf(e, ", %s", c);
  put(e, ")");
  if (attrs) putf(e, " {%s}", attrs);
  put(e, " : (");
  const char* args[3] = {a, b, c};
  for (int i = 0; i < 3 && args[i]; i++) {
    if (i) put(e, ", ");
    // select: the predicate is i1, the branches |in|.
    put_scalar_type(e, (c && i == 0) ? TPR_DTYPE_BOOL : in);
  }
  put(e, ") -> ");
  put_scalar_type(e, out);
  put(e, "\n");
}

static void region_compare(emitter_t* e, const char* res, const char* a,
                           const char* b, const char* dir, tpr_dtype_t d) {
  char attrs[160];
  snprintf(attrs, sizeof attrs,
           "comparison_direction = #stablehlo<comparison_direction %s>, "
           "compare_type = #stablehlo<comparison_type %s>",
           dir, compare_type(d));
  region_op(e, res, "stablehlo.compare", a, b, NULL, attrs, d,
            TPR_DTYPE_BOOL);
}

static void region_return(emitter_t* e, const char* const* vals,
                          const tpr_dtype_t* types, int n) {
  put(e, "      \"stablehlo.return\"(");
  for (int i = 0; i < n; i++) putf(e, "%s%s", i ? ", " : "", vals[i]);
  put(e, ") : (");
  for (int i = 0; i < n; i++) {
    if (i) put(e, ", ");
    put_scalar_type(e, types[i]);
  }
  put(e, ") -> ()\n");
}

// The body op and init value of a reduction.
static const char* reduce_body(tpr_reduce_op_t op, tpr_dtype_t d,
                               uint8_t init[16]) {
  bool pred = d == TPR_DTYPE_BOOL;
  memset(init, 0, 16);
  switch (op) {
    case TPR_REDUCE_SUM:
      return pred ? "stablehlo.or" : "stablehlo.add";
    case TPR_REDUCE_PROD:
      tpr_encode_i64(d, 1, init);
      return pred ? "stablehlo.and" : "stablehlo.multiply";
    case TPR_REDUCE_MAX:
      if (d == TPR_DTYPE_F8E4M3FN) tpr_encode_f64(d, -448.0, init);
      else if (tpr_dtype_is_float(d)) tpr_encode_f64(d, -INFINITY, init);
      else if (tpr_dtype_is_signed_int(d))
        init[tpr_dtype_size(d) - 1] = 0x80;  // little-endian minimum
      return pred ? "stablehlo.or" : "stablehlo.maximum";
    case TPR_REDUCE_MIN:
      if (d == TPR_DTYPE_F8E4M3FN) tpr_encode_f64(d, 448.0, init);
      else if (tpr_dtype_is_float(d)) tpr_encode_f64(d, INFINITY, init);
      else if (tpr_dtype_is_signed_int(d)) {
        memset(init, 0xFF, tpr_dtype_size(d));
        init[tpr_dtype_size(d) - 1] = 0x7F;
      } else {
        memset(init, 0xFF, tpr_dtype_size(d));
        if (pred) init[0] = 1;
      }
      return pred ? "stablehlo.and" : "stablehlo.minimum";
    case TPR_REDUCE_AND:
      if (pred) init[0] = 1;
      else memset(init, 0xFF, tpr_dtype_size(d));
      return "stablehlo.and";
    case TPR_REDUCE_OR:
      return "stablehlo.or";
  }
  return "stablehlo.add";
}

// "({ ^bb0(a, b): r = body(a, b); return r })": the scalar combiner region
// of reduce, all_reduce and reduce_scatter.
static void put_combiner(emitter_t* e, int ni, const char* body, tpr_dtype_t d) {
  char a[32], b[32], r[32];
  snprintf(a, sizeof a, "%%n%d_a", ni);
  snprintf(b, sizeof b, "%%n%d_b", ni);
  snprintf(r, sizeof r, "%%n%d_r", ni);
  putf(e, "({\n    ^bb0(%s: ", a);
  put_scalar_type(e, d);
  putf(e, ", %s: ", b);
  put_scalar_type(e, d);
  put(e, "):\n");
  region_op(e, r, body, a, b, NULL, NULL, d, d);
  const char* rv[1] = {r};
  region_return(e, rv, &d, 1);
  put(e, "    })");
}

static void emit_reduce(emitter_t* e, int ni, const tpr_node_t* n) {
  tpr_value_t x = operands_of(e, n)[0];
  tpr_dtype_t d = vtype(e, x)->dtype;
  uint8_t init[16];
  const char* body = reduce_body((tpr_reduce_op_t)n->sub, d, init);
  char name[64];
  snprintf(name, sizeof name, "%%n%d_init", ni);
  put_scalar_constant(e, name, d, init);
  begin(e, n);
  put(e, "\"stablehlo.reduce\"(");
  put_value(e, x);
  putf(e, ", %s) ", name);
  put_combiner(e, ni, body, d);
  put(e, " {");
  put_array(e, "dimensions", ints_of(e, n), n->num_ints);
  put(e, "}");
  tpr_type_t it = tpr_type_scalar(d);
  signature(e, n, 1, &it);
}

// "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>" from a collective's
// leading ints; returns how many ints it read.
static int put_groups(emitter_t* e, const int64_t* ints) {
  int64_t rows = ints[0], cols = ints[1];
  put(e, "replica_groups = dense<[");
  for (int64_t r = 0; r < rows; r++) {
    put(e, r ? ", [" : "[");
    put_list(e, ints + 2 + r * cols, (int)cols);
    put(e, "]");
  }
  putf(e, "]> : tensor<%lldx%lldxi64>", (long long)rows, (long long)cols);
  return (int)(2 + rows * cols);
}

// all_reduce and reduce_scatter: the op, its combiner region, its groups.
static void emit_reducing_collective(emitter_t* e, int ni, const tpr_node_t* n,
                                     const char* op) {
  tpr_dtype_t d = vtype(e, operands_of(e, n)[0])->dtype;
  uint8_t unused[16];
  const char* body = reduce_body((tpr_reduce_op_t)n->sub, d, unused);
  begin(e, n);
  call(e, n, op);
  put(e, " ");
  put_combiner(e, ni, body, d);
  put(e, " {");
  const int64_t* ints = ints_of(e, n);
  int k = put_groups(e, ints);
  if (n->op == TPR_OP_REDUCE_SCATTER) putf(e, ", scatter_dimension = %lld : i64", (long long)ints[k]);
  put(e, "}");
  signature(e, n, 0, NULL);
}

static void emit_collective(emitter_t* e, const tpr_node_t* n) {
  const int64_t* ints = ints_of(e, n);
  begin(e, n);
  switch (n->op) {
    case TPR_OP_ALL_GATHER:
      call(e, n, "stablehlo.all_gather");
      putf(e, " {all_gather_dim = %d : i64, ", n->sub);
      put_groups(e, ints);
      break;
    case TPR_OP_ALL_TO_ALL: {
      call(e, n, "stablehlo.all_to_all");
      put(e, " {");
      int k = put_groups(e, ints);
      putf(e, ", split_dimension = %lld : i64, concat_dimension = %lld : i64, "
              "split_count = %lld : i64", (long long)ints[k], (long long)ints[k + 1],
           (long long)ints[1]);
      break;
    }
    default: {  // collective_permute
      call(e, n, "stablehlo.collective_permute");
      put(e, " {source_target_pairs = dense<[");
      for (int64_t i = 0; i < ints[0]; i++) {
        put(e, i ? ", [" : "[");
        put_list(e, ints + 1 + 2 * i, 2);
        put(e, "]");
      }
      putf(e, "]> : tensor<%lldx2xi64>", (long long)ints[0]);
      break;
    }
  }
  put(e, "}");
  signature(e, n, 0, NULL);
}

// The replica count a program's collectives span (1 without any).
static int64_t num_replicas(const tpr_graph_t* g) {
  int64_t most = 0;
  for (int i = 0; i < g->num_nodes; i++) {
    const tpr_node_t* n = &g->nodes[i];
    const int64_t* ints = g->ints + n->ints;
    int64_t first = 0, count = 0;
    if (n->op == TPR_OP_COLLECTIVE_PERMUTE) {
      first = 1, count = 2 * ints[0];
    } else if (n->op >= TPR_OP_ALL_REDUCE && n->op <= TPR_OP_ALL_TO_ALL) {
      first = 2, count = ints[0] * ints[1];
    }
    for (int64_t k = 0; k < count; k++)
      if (ints[first + k] + 1 > most) most = ints[first + k] + 1;
  }
  return most ? most : 1;
}

// Variadic reduce over (values, iota) with a comparator that keeps the
// first index among ties and lets NaN win (PyTorch's argmax/argmin).
static void emit_argreduce(emitter_t* e, int ni, const tpr_node_t* n) {
  tpr_value_t x = operands_of(e, n)[0];
  const tpr_type_t* xt = vtype(e, x);
  tpr_dtype_t d = xt->dtype, s64 = TPR_DTYPE_S64;
  bool is_max = ints_of(e, n)[0] != 0;
  int dim = n->sub;
  char P[16];
  snprintf(P, sizeof P, "%%n%d_", ni);
  tpr_type_t it = *xt;
  it.dtype = s64;
  putf(e, "    %siota = \"stablehlo.iota\"() {iota_dimension = %d : i64} : () -> ",
       P, dim);
  put_type(e, &it);
  put(e, "\n");
  uint8_t init[16], zero[16] = {0};
  reduce_body(is_max ? TPR_REDUCE_MAX : TPR_REDUCE_MIN, d, init);
  char nm[64];
  snprintf(nm, sizeof nm, "%sinitv", P);
  put_scalar_constant(e, nm, d, init);
  snprintf(nm, sizeof nm, "%siniti", P);
  put_scalar_constant(e, nm, s64, zero);
  begin(e, n);
  put(e, "\"stablehlo.reduce\"(");
  put_value(e, x);
  putf(e, ", %siota, %sinitv, %siniti) ({\n", P, P, P);
  char av[32], ai[32], bv[32], bi[32];
  snprintf(av, sizeof av, "%sav", P);
  snprintf(ai, sizeof ai, "%sai", P);
  snprintf(bv, sizeof bv, "%sbv", P);
  snprintf(bi, sizeof bi, "%sbi", P);
  putf(e, "    ^bb0(%s: ", av);
  put_scalar_type(e, d);
  putf(e, ", %s: tensor<i64>, %s: ", ai, bv);
  put_scalar_type(e, d);
  putf(e, ", %s: tensor<i64>):\n", bi);
  char gt[32], eq[32], lt[32], tie[32], p[32];
#define NM(buf, s) snprintf(buf, sizeof buf, "%s%s", P, s)
  NM(gt, "gt");
  NM(eq, "eq");
  NM(lt, "lt");
  NM(tie, "tie");
  NM(p, "p");
  region_compare(e, gt, av, bv, is_max ? "GT" : "LT", d);
  region_compare(e, eq, av, bv, "EQ", d);
  region_compare(e, lt, ai, bi, "LT", s64);
  region_op(e, tie, "stablehlo.and", eq, lt, NULL, NULL, TPR_DTYPE_BOOL,
            TPR_DTYPE_BOOL);
  region_op(e, p, "stablehlo.or", gt, tie, NULL, NULL, TPR_DTYPE_BOOL,
            TPR_DTYPE_BOOL);
  const char* pick = p;
  char an[32], bn[32], nb[32], q1[32], q2[32], pk[32];
  if (tpr_dtype_is_float(d)) {
    // pick_a = a_nan ? (!b_nan | ai < bi) : (!b_nan & p)
    NM(an, "an");
    NM(bn, "bn");
    NM(nb, "nb");
    NM(q1, "q1");
    NM(q2, "q2");
    NM(pk, "pick");
    region_compare(e, an, av, av, "NE", d);
    region_compare(e, bn, bv, bv, "NE", d);
    region_op(e, nb, "stablehlo.not", bn, NULL, NULL, NULL, TPR_DTYPE_BOOL,
              TPR_DTYPE_BOOL);
    region_op(e, q1, "stablehlo.or", nb, lt, NULL, NULL, TPR_DTYPE_BOOL,
              TPR_DTYPE_BOOL);
    region_op(e, q2, "stablehlo.and", nb, p, NULL, NULL, TPR_DTYPE_BOOL,
              TPR_DTYPE_BOOL);
    region_op(e, pk, "stablehlo.select", an, q1, q2, NULL, TPR_DTYPE_BOOL,
              TPR_DTYPE_BOOL);
    pick = pk;
  }
  char rv[32], ri[32];
  NM(rv, "rv");
  NM(ri, "ri");
#undef NM
  region_op(e, rv, "stablehlo.select", pick, av, bv, NULL, d, d);
  region_op(e, ri, "stablehlo.select", pick, ai, bi, NULL, s64, s64);
  const char* rets[2] = {rv, ri};
  tpr_dtype_t rtypes[2] = {d, s64};
  region_return(e, rets, rtypes, 2);
  putf(e, "    }) {dimensions = array<i64: %d>} : (", dim);
  put_type(e, xt);
  put(e, ", ");
  put_type(e, &it);
  put(e, ", ");
  put_scalar_type(e, d);
  put(e, ", tensor<i64>) -> (");
  put_type(e, vtype(e, n->first_value));
  put(e, ", ");
  put_type(e, vtype(e, n->first_value + 1));
  put(e, ")\n");
}

static void put_dims_field(emitter_t* e, bool* first, const char* name,
                           const int64_t* v, int n) {
  if (!n) return;
  putf(e, "%s%s = [", *first ? "" : ", ", name);
  put_list(e, v, n);
  put(e, "]");
  *first = false;
}

static void emit_gather(emitter_t* e, const tpr_node_t* n) {
  tpr_dimnums_t dn;
  tpr_dimnums_decode(ints_of(e, n), &dn);
  begin(e, n);
  call(e, n, "stablehlo.gather");
  put(e, " {dimension_numbers = #stablehlo.gather<");
  bool first = true;
  put_dims_field(e, &first, "offset_dims", dn.list[0], dn.n[0]);
  put_dims_field(e, &first, "collapsed_slice_dims", dn.list[1], dn.n[1]);
  put_dims_field(e, &first, "start_index_map", dn.list[2], dn.n[2]);
  putf(e, "%sindex_vector_dim = %lld>, indices_are_sorted = false, ",
       first ? "" : ", ", (long long)dn.index_vector_dim);
  put_array(e, "slice_sizes", dn.list[3], dn.n[3]);
  put(e, "}");
  signature(e, n, 0, NULL);
}

static void emit_scatter(emitter_t* e, int ni, const tpr_node_t* n) {
  tpr_dimnums_t dn;
  tpr_dimnums_decode(ints_of(e, n), &dn);
  tpr_dtype_t d = vtype(e, operands_of(e, n)[0])->dtype;
  begin(e, n);
  call(e, n, "stablehlo.scatter");
  char a[32], b[32], r[32];
  snprintf(a, sizeof a, "%%n%d_a", ni);
  snprintf(b, sizeof b, "%%n%d_b", ni);
  snprintf(r, sizeof r, "%%n%d_r", ni);
  put(e, " ({\n");
  putf(e, "    ^bb0(%s: ", a);
  put_scalar_type(e, d);
  putf(e, ", %s: ", b);
  put_scalar_type(e, d);
  put(e, "):\n");
  const char* ret = b;
  if (n->sub) {  // accumulate
    region_op(e, r, d == TPR_DTYPE_BOOL ? "stablehlo.or" : "stablehlo.add", a,
              b, NULL, NULL, d, d);
    ret = r;
  }
  region_return(e, &ret, &d, 1);
  put(e, "    }) {indices_are_sorted = false, scatter_dimension_numbers = "
         "#stablehlo.scatter<");
  bool first = true;
  put_dims_field(e, &first, "update_window_dims", dn.list[0], dn.n[0]);
  put_dims_field(e, &first, "inserted_window_dims", dn.list[1], dn.n[1]);
  put_dims_field(e, &first, "scatter_dims_to_operand_dims", dn.list[2],
                 dn.n[2]);
  putf(e, "%sindex_vector_dim = %lld>, unique_indices = false}",
       first ? "" : ", ", (long long)dn.index_vector_dim);
  signature(e, n, 0, NULL);
}

// PyTorch computes f32 (and f64, complex) matmuls and convolutions in full
// precision, with no TF32/bf16 passes: ask XLA for HIGHEST on both operands.
static void put_full_precision(emitter_t* e, tpr_dtype_t d) {
  if (d == TPR_DTYPE_F32 || d == TPR_DTYPE_F64 || tpr_dtype_is_complex(d))
    put(e, ", precision_config = [#stablehlo<precision HIGHEST>, "
           "#stablehlo<precision HIGHEST>]");
}

static void emit_dot(emitter_t* e, const tpr_node_t* n) {
  const int64_t* v = ints_of(e, n);
  int nb = (int)v[0], nc = (int)v[1];
  const int64_t* lb = v + 2;
  const int64_t* rb = lb + nb;
  const int64_t* lc = rb + nb;
  const int64_t* rc = lc + nc;
  begin(e, n);
  call(e, n, "stablehlo.dot_general");
  put(e, " {dot_dimension_numbers = #stablehlo.dot<");
  bool first = true;
  put_dims_field(e, &first, "lhs_batching_dimensions", lb, nb);
  put_dims_field(e, &first, "rhs_batching_dimensions", rb, nb);
  put_dims_field(e, &first, "lhs_contracting_dimensions", lc, nc);
  put_dims_field(e, &first, "rhs_contracting_dimensions", rc, nc);
  put(e, ">");
  put_full_precision(e, vtype(e, operands_of(e, n)[0])->dtype);
  put(e, "}");
  signature(e, n, 0, NULL);
}

//===--- sorting and FFT ---------------------------------------------------===//

// stablehlo.sort keyed by operand 0. The comparator says "lhs goes first":
// lhs < rhs (> when descending), and for floats NaN counts as above every
// number (PyTorch's order) while comparing equal to NaN, so is_stable keeps
// NaNs, like every other tie, in their original order.
static void emit_sort(emitter_t* e, int ni, const tpr_node_t* n) {
  const tpr_value_t* ops = operands_of(e, n);
  tpr_dtype_t d = vtype(e, ops[0])->dtype;
  bool desc = ints_of(e, n)[0] != 0;
  char P[16];
  snprintf(P, sizeof P, "%%n%d_", ni);
  begin(e, n);
  call(e, n, "stablehlo.sort");
  put(e, " ({\n    ^bb0(");
  for (int i = 0; i < n->num_operands; i++) {
    tpr_dtype_t di = vtype(e, ops[i])->dtype;
    putf(e, "%s%sa%d: ", i ? ", " : "", P, i);
    put_scalar_type(e, di);
    putf(e, ", %sb%d: ", P, i);
    put_scalar_type(e, di);
  }
  put(e, "):\n");
  char a[32], b[32], lt[32], an[32], bn[32], t[32], p[32];
#define NM(buf, s) snprintf(buf, sizeof buf, "%s%s", P, s)
  NM(a, "a0");
  NM(b, "b0");
  NM(lt, "lt");
  NM(p, "p");
  region_compare(e, lt, a, b, desc ? "GT" : "LT", d);
  const char* res = lt;
  if (tpr_dtype_is_float(d)) {
    // ascending: lt | (a == a & b != b); descending: gt | (a != a & b == b)
    NM(an, "an");
    NM(bn, "bn");
    NM(t, "t");
    region_compare(e, an, a, a, desc ? "NE" : "EQ", d);
    region_compare(e, bn, b, b, desc ? "EQ" : "NE", d);
    region_op(e, t, "stablehlo.and", an, bn, NULL, NULL, TPR_DTYPE_BOOL,
              TPR_DTYPE_BOOL);
    region_op(e, p, "stablehlo.or", lt, t, NULL, NULL, TPR_DTYPE_BOOL,
              TPR_DTYPE_BOOL);
    res = p;
  }
#undef NM
  tpr_dtype_t bt = TPR_DTYPE_BOOL;
  region_return(e, &res, &bt, 1);
  putf(e, "    }) {dimension = %d : i64, is_stable = true}", n->sub);
  signature(e, n, 0, NULL);
}

static void emit_fft(emitter_t* e, const tpr_node_t* n) {
  static const char* const kTypes[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  begin(e, n);
  call(e, n, "stablehlo.fft");
  putf(e, " {fft_type = #stablehlo<fft_type %s>, ", kTypes[n->sub]);
  put_array(e, "fft_length", ints_of(e, n), n->num_ints);
  put(e, "}");
  signature(e, n, 0, NULL);
}

// stablehlo.scatter whose region combines old and new values with a
// reduction op; max/min select NaN explicitly (PyTorch propagates it).
static void emit_scatter_reduce(emitter_t* e, int ni, const tpr_node_t* n) {
  tpr_dimnums_t dn;
  tpr_dimnums_decode(ints_of(e, n), &dn);
  tpr_dtype_t d = vtype(e, operands_of(e, n)[0])->dtype;
  uint8_t init[16];
  const char* body = reduce_body((tpr_reduce_op_t)n->sub, d, init);
  char a[32], b[32], r[32], an[32], bn[32], s1[32], s2[32];
  snprintf(a, sizeof a, "%%n%d_a", ni);
  snprintf(b, sizeof b, "%%n%d_b", ni);
  snprintf(r, sizeof r, "%%n%d_r", ni);
  begin(e, n);
  call(e, n, "stablehlo.scatter");
  put(e, " ({\n");
  putf(e, "    ^bb0(%s: ", a);
  put_scalar_type(e, d);
  putf(e, ", %s: ", b);
  put_scalar_type(e, d);
  put(e, "):\n");
  region_op(e, r, body, a, b, NULL, NULL, d, d);
  const char* ret = r;
  if (tpr_dtype_is_float(d) &&
      (n->sub == TPR_REDUCE_MAX || n->sub == TPR_REDUCE_MIN)) {
    snprintf(an, sizeof an, "%%n%d_an", ni);
    snprintf(bn, sizeof bn, "%%n%d_bn", ni);
    snprintf(s1, sizeof s1, "%%n%d_s1", ni);
    snprintf(s2, sizeof s2, "%%n%d_s2", ni);
    region_compare(e, an, a, a, "NE", d);
    region_compare(e, bn, b, b, "NE", d);
    region_op(e, s1, "stablehlo.select", bn, b, r, NULL, d, d);
    region_op(e, s2, "stablehlo.select", an, a, s1, NULL, d, d);
    ret = s2;
  }
  region_return(e, &ret, &d, 1);
  put(e, "    }) {indices_are_sorted = false, scatter_dimension_numbers = "
         "#stablehlo.scatter<");
  bool first = true;
  put_dims_field(e, &first, "update_window_dims", dn.list[0], dn.n[0]);
  put_dims_field(e, &first, "inserted_window_dims", dn.list[1], dn.n[1]);
  put_dims_field(e, &first, "scatter_dims_to_operand_dims", dn.list[2],
                 dn.n[2]);
  putf(e, "%sindex_vector_dim = %lld>, unique_indices = false}",
       first ? "" : ", ", (long long)dn.index_vector_dim);
  signature(e, n, 0, NULL);
}

//===--- spatial ops --------------------------------------------------------===//

// "padding = dense<[[lo, hi], ...]> : tensor<nx2xi64>"
static void put_padding(emitter_t* e, const int64_t* lo, const int64_t* hi,
                        int n) {
  put(e, "padding = dense<[");
  for (int i = 0; i < n; i++)
    putf(e, "%s[%lld, %lld]", i ? ", " : "", (long long)lo[i],
         (long long)hi[i]);
  putf(e, "]> : tensor<%dx2xi64>", n);
}

// PyTorch's layouts: [b, f, 0, 1, ...] x [o, i, 0, 1, ...] -> [b, f, ...].
static void emit_convolution(emitter_t* e, const tpr_node_t* n) {
  tpr_conv_attrs_t a;
  tpr_conv_attrs_decode(ints_of(e, n), &a);
  char sp[64] = "";
  for (int i = 0, k = 0; i < a.ns; i++)
    k += snprintf(sp + k, sizeof sp - (size_t)k, ", %d", i);
  begin(e, n);
  call(e, n, "stablehlo.convolution");
  putf(e, " {batch_group_count = %lld : i64, dimension_numbers = "
          "#stablehlo.conv<[b, f%s]x[o, i%s]->[b, f%s]>, "
          "feature_group_count = %lld : i64, ",
       (long long)a.batch_group_count, sp, sp, sp,
       (long long)a.feature_group_count);
  put_array(e, "lhs_dilation", a.lhs_dilation, a.ns);
  put(e, ", ");
  put_padding(e, a.pad_low, a.pad_high, a.ns);
  put(e, ", ");
  put_array(e, "rhs_dilation", a.rhs_dilation, a.ns);
  put(e, ", ");
  put_array(e, "window_strides", a.strides, a.ns);
  put_full_precision(e, vtype(e, operands_of(e, n)[0])->dtype);
  put(e, "}");
  signature(e, n, 0, NULL);
}

static void emit_reduce_window(emitter_t* e, int ni, const tpr_node_t* n) {
  const int64_t* v = ints_of(e, n);
  int r = n->num_ints / 6;
  tpr_dtype_t d = vtype(e, operands_of(e, n)[0])->dtype;
  uint8_t unused[16];
  const char* body = reduce_body((tpr_reduce_op_t)n->sub, d, unused);
  char a[32], b[32], res[32];
  snprintf(a, sizeof a, "%%n%d_a", ni);
  snprintf(b, sizeof b, "%%n%d_b", ni);
  snprintf(res, sizeof res, "%%n%d_r", ni);
  begin(e, n);
  call(e, n, "stablehlo.reduce_window");
  put(e, " ({\n");
  putf(e, "    ^bb0(%s: ", a);
  put_scalar_type(e, d);
  putf(e, ", %s: ", b);
  put_scalar_type(e, d);
  put(e, "):\n");
  region_op(e, res, body, a, b, NULL, NULL, d, d);
  const char* rv[1] = {res};
  region_return(e, rv, &d, 1);
  put(e, "    }) {");
  put_array(e, "base_dilations", v + 2 * r, r);
  put(e, ", ");
  if (r) {
    put_padding(e, v + 4 * r, v + 5 * r, r);
    put(e, ", ");
  }
  put_array(e, "window_dilations", v + 3 * r, r);
  put(e, ", ");
  put_array(e, "window_dimensions", v, r);
  put(e, ", ");
  put_array(e, "window_strides", v + r, r);
  put(e, "}");
  signature(e, n, 0, NULL);
}

// " {a = array<i64: ...>, b = ..., c = ...}" from three rank-|r| runs of
// |ints| (slice and pad carry their attributes this way).
static void put_three_arrays(emitter_t* e, const char* a, const char* b,
                             const char* c, const int64_t* ints, int r) {
  put(e, " {");
  put_array(e, a, ints, r);
  put(e, ", ");
  put_array(e, b, ints + r, r);
  put(e, ", ");
  put_array(e, c, ints + 2 * r, r);
  put(e, "}");
}

static void emit_node(emitter_t* e, int ni);

// A parameter's reshape used by several ops is written once per use. XLA
// lets a fused loop overwrite an aliased (donated) parameter in place only
// when each use inside the fusion reads the parameter through its own
// bitcast; with one shared reshape it copies the parameter first (an
// optimizer step: two extra passes over each moment buffer). Reshapes of
// parameters cost nothing (bitcasts), so the repeats are free.
static void mark_per_use_views(emitter_t* e) {
  const tpr_graph_t* g = e->g;
  int32_t* uses = (int32_t*)tpr_calloc((size_t)g->num_values + 1, sizeof *uses);
  bool* in_region = (bool*)tpr_calloc((size_t)g->num_values + 1, sizeof *in_region);
  e->per_use = (bool*)tpr_calloc((size_t)g->num_values + 1, sizeof *e->per_use);
  e->per_use_at = (int32_t*)tpr_calloc((size_t)g->num_values + 1, sizeof(int32_t));
  bool ok = uses && in_region && e->per_use && e->per_use_at;
  for (int i = 0; ok && i < g->num_nodes; i++) {
    const tpr_node_t* n = &g->nodes[i];
    const tpr_value_t* ops = g->operands + n->operands;
    for (int k = 0; k < n->num_operands; k++) {
      uses[ops[k]]++;
      if (n->scope != 0) in_region[ops[k]] = true;
    }
  }
  for (int r = 0; ok && r < g->num_results; r++) uses[g->results[r]]++;
  for (int i = 0; ok && i < g->num_nodes; i++) {
    const tpr_node_t* n = &g->nodes[i];
    if (n->op != TPR_OP_RESHAPE || n->scope != 0) continue;
    tpr_value_t v = n->first_value, src = g->operands[n->operands];
    if (uses[v] > 1 && !in_region[v] &&
        tpr_graph_node_of(g, src)->op == TPR_OP_PARAMETER)
      e->per_use[v] = true;
  }
  tpr_free(uses);
  tpr_free(in_region);
  if (!ok) {  // without them the text is still right, only slower to run
    tpr_free(e->per_use);
    tpr_free(e->per_use_at);
    e->per_use = NULL;
    e->per_use_at = NULL;
  }
}

// Writes |v|'s reshape for the use at node |at| (once per node).
static void put_per_use_view(emitter_t* e, tpr_value_t v, int32_t at) {
  if (!e->per_use || !e->per_use[v] || e->per_use_at[v] == at) return;
  e->per_use_at[v] = at;
  const tpr_node_t* n = tpr_graph_node_of(e->g, v);
  tpr_value_t src = e->g->operands[n->operands];
  putf(e, "    %%p%d_%d = \"stablehlo.reshape\"(", v, at);
  put_value(e, src);
  put(e, ") : (");
  put_type(e, vtype(e, src));
  put(e, ") -> ");
  put_type(e, vtype(e, v));
  put(e, "\n");
}

// Nodes [lo, hi) of one scope; a nested region is skipped here (its
// REGION_ARGS node says where it ends) and printed by its WHILE node.
// Each node's per-use parameter views come just before it.
static void emit_range(emitter_t* e, int lo, int hi) {
  for (int i = lo; i < hi; i++) {
    const tpr_node_t* n = &e->g->nodes[i];
    if (n->op == TPR_OP_REGION_ARGS) {
      i = (int)ints_of(e, n)[0] - 1;
      continue;
    }
    const tpr_value_t* ops = e->g->operands + n->operands;
    for (int k = 0; k < n->num_operands; k++) put_per_use_view(e, ops[k], i + 1);
    emit_node(e, i);
  }
}

// One region of a while: block arguments, nodes, stablehlo.return of |rets|.
static void emit_region(emitter_t* e, int args_node, int end,
                        const tpr_value_t* rets, int nrets) {
  const tpr_node_t* a = &e->g->nodes[args_node];
  put(e, "    ^bb0(");
  for (int i = 0; i < a->num_results; i++) {
    if (i) put(e, ", ");
    put_value(e, a->first_value + i);
    put(e, ": ");
    put_type(e, vtype(e, a->first_value + i));
  }
  put(e, "):\n");
  emit_range(e, args_node + 1, end);
  put(e, "    \"stablehlo.return\"(");
  for (int i = 0; i < nrets; i++) {
    if (i) put(e, ", ");
    put_value(e, rets[i]);
  }
  put(e, ") : (");
  for (int i = 0; i < nrets; i++) {
    if (i) put(e, ", ");
    put_type(e, vtype(e, rets[i]));
  }
  put(e, ") -> ()\n");
}

static void emit_while(emitter_t* e, int ni, const tpr_node_t* n) {
  int k = n->sub;
  const tpr_value_t* ops = operands_of(e, n);
  const int64_t* f = ints_of(e, n);
  begin(e, n);
  put(e, "\"stablehlo.while\"(");
  for (int i = 0; i < k; i++) {
    if (i) put(e, ", ");
    put_value(e, ops[i]);
  }
  put(e, ") ({\n");
  emit_region(e, (int)f[0], (int)f[1], &ops[k], 1);
  put(e, "    }, {\n");
  emit_region(e, (int)f[1], ni, &ops[k + 1], k);
  put(e, "    }) : (");
  for (int i = 0; i < k; i++) {
    if (i) put(e, ", ");
    put_type(e, vtype(e, ops[i]));
  }
  put(e, ") -> ");
  if (k > 1) put(e, "(");
  for (int i = 0; i < k; i++) {
    if (i) put(e, ", ");
    put_type(e, vtype(e, n->first_value + i));
  }
  put(e, k > 1 ? ")\n" : "\n");
}

// The bounded-dynamic twin of |t|: dimension |dim| becomes "?" with t's
// size as its bound: tensor<4x?xf32, #stablehlo.bounds<?, 16>>.
static void put_dynamic_type(emitter_t* e, const tpr_type_t* t, int dim) {
  put(e, "tensor<");
  for (int i = 0; i < t->rank; i++)
    if (i == dim) put(e, "?x");
    else putf(e, "%lldx", (long long)t->dims[i]);
  putf(e, "%s, #stablehlo.bounds<", tpr_dtype_mlir_name(t->dtype));
  for (int i = 0; i < t->rank; i++) {
    if (i) put(e, ", ");
    if (i == dim) put_i64(e, t->dims[i]);
    else put(e, "?");
  }
  put(e, ">>");
}

// Only set_dimension_size's own result is typed dynamic; a same-type
// convert retypes it static at once, so every other op keeps the static
// types its rule gave it (XLA's dynamic dimension inference follows the
// HLO, not the declared types). Restoring converts to the dynamic type
// first: set_dimension_size on a static-typed operand to its full size is
// folded away, and the result would leave the program still dynamic
// (compacted, not laid out at the bound).
static void emit_set_dimension_size(emitter_t* e, int ni,
                                    const tpr_node_t* n) {
  const tpr_value_t* ops = operands_of(e, n);
  const tpr_type_t* t = vtype(e, ops[0]);
  int dim = n->sub;
  bool restore = ints_of(e, n)[0] != 0;
  if (!restore) {
    putf(e, "    %%n%d_d = \"stablehlo.set_dimension_size\"(", ni);
    put_value(e, ops[0]);
    put(e, ", ");
    put_value(e, ops[1]);
    putf(e, ") {dimension = %d : i64} : (", dim);
    put_type(e, t);
    put(e, ", tensor<i32>) -> ");
    put_dynamic_type(e, t, dim);
    put(e, "\n");
    begin(e, n);
    putf(e, "\"stablehlo.convert\"(%%n%d_d) : (", ni);
    put_dynamic_type(e, t, dim);
    put(e, ") -> ");
    put_type(e, t);
    put(e, "\n");
    return;
  }
  putf(e, "    %%n%d_d = \"stablehlo.convert\"(", ni);
  put_value(e, ops[0]);
  put(e, ") : (");
  put_type(e, t);
  put(e, ") -> ");
  put_dynamic_type(e, t, dim);
  putf(e,
       "\n    %%n%d_c = \"stablehlo.constant\"() {value = dense<%lld> : "
       "tensor<i32>} : () -> tensor<i32>\n",
       ni, (long long)t->dims[dim]);
  begin(e, n);
  putf(e,
       "\"stablehlo.set_dimension_size\"(%%n%d_d, %%n%d_c) {dimension = %d "
       ": i64} : (",
       ni, ni, dim);
  put_dynamic_type(e, t, dim);
  put(e, ", tensor<i32>) -> ");
  put_type(e, t);
  put(e, "\n");
}

static void emit_node(emitter_t* e, int ni) {
  const tpr_graph_t* g = e->g;
  const tpr_node_t* n = &g->nodes[ni];
  const int64_t* ints = ints_of(e, n);
  const tpr_type_t* rt = vtype(e, n->first_value);
  switch ((tpr_op_t)n->op) {
    case TPR_OP_PARAMETER:
      return;
    case TPR_OP_CONSTANT: {
      char name[32];
      snprintf(name, sizeof name, "%%%d", n->first_value);
      put_constant(e, name, rt, g->data + n->data);
      return;
    }
    case TPR_OP_IOTA:
      begin(e, n);
      putf(e, "\"stablehlo.iota\"() {iota_dimension = %d : i64}", n->sub);
      break;
    case TPR_OP_CONVERT:
      begin(e, n);
      call(e, n, "stablehlo.convert");
      break;
    case TPR_OP_BITCAST_CONVERT: {
      // i1 has no byte layout in StableHLO: bool <-> byte is a convert.
      tpr_dtype_t from = vtype(e, operands_of(e, n)[0])->dtype;
      bool pred = from == TPR_DTYPE_BOOL || rt->dtype == TPR_DTYPE_BOOL;
      begin(e, n);
      call(e, n, pred ? "stablehlo.convert" : "stablehlo.bitcast_convert");
      break;
    }
    case TPR_OP_BROADCAST_IN_DIM:
      begin(e, n);
      call(e, n, "stablehlo.broadcast_in_dim");
      put(e, " {");
      put_array(e, "broadcast_dimensions", ints, n->num_ints);
      put(e, "}");
      break;
    case TPR_OP_RESHAPE:
      if (e->per_use && e->per_use[n->first_value]) return;  // at each use
      begin(e, n);
      call(e, n, "stablehlo.reshape");
      break;
    case TPR_OP_OPTIMIZATION_BARRIER:
      begin(e, n);
      call(e, n, "stablehlo.optimization_barrier");
      break;
    case TPR_OP_CALL:
      begin(e, n);
      call(e, n, "func.call");
      putf(e, " {callee = @%s}", tpr_kernel_entry(e->g->kernels[n->sub]));
      break;
    case TPR_OP_TRANSPOSE:
      begin(e, n);
      call(e, n, "stablehlo.transpose");
      put(e, " {");
      put_array(e, "permutation", ints, n->num_ints);
      put(e, "}");
      break;
    case TPR_OP_SLICE:
      begin(e, n);
      call(e, n, "stablehlo.slice");
      put_three_arrays(e, "start_indices", "limit_indices", "strides", ints,
                       n->num_ints / 3);
      break;
    case TPR_OP_DYNAMIC_SLICE:
      begin(e, n);
      call(e, n, "stablehlo.dynamic_slice");
      put(e, " {");
      put_array(e, "slice_sizes", ints, n->num_ints);
      put(e, "}");
      break;
    case TPR_OP_DYNAMIC_UPDATE_SLICE:
      begin(e, n);
      call(e, n, "stablehlo.dynamic_update_slice");
      break;
    case TPR_OP_CONCATENATE:
      begin(e, n);
      call(e, n, "stablehlo.concatenate");
      putf(e, " {dimension = %d : i64}", n->sub);
      break;
    case TPR_OP_PAD:
      begin(e, n);
      call(e, n, "stablehlo.pad");
      put_three_arrays(e, "edge_padding_low", "edge_padding_high",
                       "interior_padding", ints, n->num_ints / 3);
      break;
    case TPR_OP_REVERSE:
      begin(e, n);
      call(e, n, "stablehlo.reverse");
      put(e, " {");
      put_array(e, "dimensions", ints, n->num_ints);
      put(e, "}");
      break;
    case TPR_OP_UNARY:
      begin(e, n);
      call(e, n, kUnaryNames[n->sub]);
      break;
    case TPR_OP_BINARY:
      begin(e, n);
      call(e, n, kBinaryNames[n->sub]);
      break;
    case TPR_OP_COMPARE:
      begin(e, n);
      call(e, n, "stablehlo.compare");
      putf(e,
           " {comparison_direction = #stablehlo<comparison_direction %s>, "
           "compare_type = #stablehlo<comparison_type %s>}",
           kDirNames[n->sub],
           compare_type(vtype(e, operands_of(e, n)[0])->dtype));
      break;
    case TPR_OP_SELECT:
      begin(e, n);
      call(e, n, "stablehlo.select");
      break;
    case TPR_OP_CLAMP:
      begin(e, n);
      call(e, n, "stablehlo.clamp");
      break;
    case TPR_OP_REDUCE:
      emit_reduce(e, ni, n);
      return;
    case TPR_OP_ARGREDUCE:
      emit_argreduce(e, ni, n);
      return;
    case TPR_OP_DOT_GENERAL:
      emit_dot(e, n);
      return;
    case TPR_OP_GATHER:
      emit_gather(e, n);
      return;
    case TPR_OP_SCATTER:
      emit_scatter(e, ni, n);
      return;
    case TPR_OP_RNG_BIT_GENERATOR:
      begin(e, n);
      call(e, n, "stablehlo.rng_bit_generator");
      put(e, " {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>}");
      break;
    case TPR_OP_SORT:
      emit_sort(e, ni, n);
      return;
    case TPR_OP_FFT:
      emit_fft(e, n);
      return;
    case TPR_OP_SCATTER_REDUCE:
      emit_scatter_reduce(e, ni, n);
      return;
    case TPR_OP_CONVOLUTION:
      emit_convolution(e, n);
      return;
    case TPR_OP_REDUCE_WINDOW:
      emit_reduce_window(e, ni, n);
      return;
    case TPR_OP_CHOLESKY:
      begin(e, n);
      call(e, n, "stablehlo.cholesky");
      putf(e, " {lower = %s}", ints_of(e, n)[0] ? "true" : "false");
      break;
    case TPR_OP_TRIANGULAR_SOLVE: {
      const int64_t* f = ints_of(e, n);
      begin(e, n);
      call(e, n, "stablehlo.triangular_solve");
      putf(e,
           " {left_side = %s, lower = %s, unit_diagonal = %s, "
           "transpose_a = #stablehlo<transpose %s>}",
           f[0] ? "true" : "false", f[1] ? "true" : "false",
           f[2] ? "true" : "false", f[3] ? "TRANSPOSE" : "NO_TRANSPOSE");
      break;
    }
    case TPR_OP_REGION_ARGS:  // printed by emit_region
      return;
    case TPR_OP_WHILE:
      emit_while(e, ni, n);
      return;
    case TPR_OP_SET_DIMENSION_SIZE:
      emit_set_dimension_size(e, ni, n);
      return;
    case TPR_OP_ALL_REDUCE:
      emit_reducing_collective(e, ni, n, "stablehlo.all_reduce");
      return;
    case TPR_OP_REDUCE_SCATTER:
      emit_reducing_collective(e, ni, n, "stablehlo.reduce_scatter");
      return;
    case TPR_OP_ALL_GATHER:
    case TPR_OP_ALL_TO_ALL:
    case TPR_OP_COLLECTIVE_PERMUTE:
      emit_collective(e, n);
      return;
    case TPR_OP_COUNT_:
      return;
  }
  signature(e, n, 0, NULL);
}

tpr_status_t tpr_graph_emit_stablehlo(const tpr_graph_t* g, char** out_text,
                                      size_t* out_size) {
  *out_text = NULL;
  if (out_size) *out_size = 0;
  TPR_RETURN_IF_ERROR(tpr_graph_status(g));
  emitter_t e = {0};
  e.g = g;
  // Parameter value ids by index.
  tpr_value_t* params = NULL;
  if (g->num_params) {
    params = (tpr_value_t*)tpr_malloc((size_t)g->num_params * sizeof *params);
    if (!params) return TPR_ERR(RESOURCE_EXHAUSTED, "emit: out of memory");
    for (int i = 0; i < g->num_nodes; i++)
      if (g->nodes[i].op == TPR_OP_PARAMETER)
        params[g->nodes[i].sub] = g->nodes[i].first_value;
  }
  putf(&e,
       "module @tpr attributes {mhlo.num_partitions = 1 : i32, "
       "mhlo.num_replicas = %lld : i32} {\n  func.func public @main(",
       (long long)num_replicas(g));
  for (int i = 0; i < g->num_params; i++) {
    putf(&e, "%s%%arg%d: ", i ? ", " : "", i);
    put_type(&e, vtype(&e, params[i]));
    for (int r = 0; r < g->num_results; r++)
      if (g->aliases[r] == i) putf(&e, " {tf.aliasing_output = %d : i32}", r);
  }
  put(&e, ") -> (");
  for (int r = 0; r < g->num_results; r++) {
    if (r) put(&e, ", ");
    put_type(&e, vtype(&e, g->results[r]));
  }
  put(&e, ") {\n");
  mark_per_use_views(&e);
  emit_range(&e, 0, g->num_nodes);
  for (int r = 0; r < g->num_results; r++)
    put_per_use_view(&e, g->results[r], g->num_nodes + 1);
  put(&e, "    \"func.return\"(");
  for (int r = 0; r < g->num_results; r++) {
    if (r) put(&e, ", ");
    put_value(&e, g->results[r]);
  }
  put(&e, ") : (");
  for (int r = 0; r < g->num_results; r++) {
    if (r) put(&e, ", ");
    put_type(&e, vtype(&e, g->results[r]));
  }
  put(&e, ") -> ()\n  }\n");
  for (int k = 0; k < g->num_kernels; k++) put(&e, tpr_kernel_text(g->kernels[k]));
  put(&e, "}\n");
  tpr_free(params);
  tpr_free(e.per_use);
  tpr_free(e.per_use_at);
  if (e.text.oom || !e.text.p) {
    tpr_free(e.text.p);
    return TPR_ERR(RESOURCE_EXHAUSTED, "emit: out of memory");
  }
  *out_text = e.text.p;
  if (out_size) *out_size = e.text.n;
  return tpr_ok_status();
}
