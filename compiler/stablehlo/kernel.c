// Kernels: StableHLO written outside the graph builders (a JAX function's
// export, a Pallas kernel lowered in interpret mode, hand-written MLIR),
// called from graphs like an op.
//
// A kernel's text is one or more func.func definitions, optionally wrapped
// in a module, in the pretty or the generic op form. Creating a kernel
// renames every symbol the text defines to k<hash>_<name>, so two kernels
// (or two traces of one) never collide inside a graph's module, and makes
// pretty-form definitions private (@main of the graph stays the only entry
// point). The entry's signature is read from the text and must equal the
// declared input and output types: a disagreement is reported here, with
// the kernel's name, instead of as a verifier error from the plugin.
//
// The rename is lexical: every @symbol token outside string literals whose
// name the text defines (func.func @name, or sym_name = "name" in the
// generic form). Attribute and type aliases (#loc1 = ..., !t = ...) live
// outside the module and are refused: print the module without debug info.
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "compiler/ir/graph_internal.h"
#include "tpr/lower.h"

#define KERNEL_MAX_SYMBOLS 256

struct tpr_kernel {
  atomic_int refs;
  char* name;   // for errors
  char* text;   // the renamed definitions, ready to splice into a module
  char* entry;  // the entry's new symbol name (no '@')
  int num_inputs, num_outputs;
  tpr_type_t* types;  // inputs, then outputs
  uint64_t hash[2];
};

typedef struct span {
  const char* p;
  size_t n;
} span_t;

static void buf_puts(tpr_text_t* b, const char* s) { tpr_text_append(b, s, strlen(s)); }

static bool is_id_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_id_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.';
}

// End of the string literal starting at p (p[0] == '"'), past the quote.
static const char* skip_string(const char* p, const char* end) {
  for (p++; p < end; p++) {
    if (*p == '\\') p++;
    else if (*p == '"') return p + 1;
  }
  return end;
}

static const char* skip_space(const char* p, const char* end) {
  for (;;) {
    while (p < end && isspace((unsigned char)*p)) p++;
    if (p + 1 < end && p[0] == '/' && p[1] == '/') {
      while (p < end && *p != '\n') p++;
      continue;
    }
    return p;
  }
}

static bool starts(const char* p, const char* end, const char* lit) {
  size_t n = strlen(lit);
  return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0;
}

// The matching close of the bracket at *p ("{(<["), honouring strings;
// NULL if it does not close.
static const char* match_group(const char* p, const char* end) {
  int depth = 0;
  while (p < end) {
    char c = *p;
    if (c == '"') {
      p = skip_string(p, end);
      continue;
    }
    if (c == '{' || c == '(' || c == '[' || c == '<') depth++;
    else if (c == '}' || c == ')' || c == ']' || (c == '>' && p[-1] != '-')) {
      if (--depth == 0) return p;
    }
    p++;
  }
  return NULL;
}

// How much of the text at p an error message quotes.
static int excerpt(const char* p, const char* end) {
  return end - p < 20 ? (int)(end - p) : 20;
}

// The module body when |text| is wrapped in one (pretty or generic form),
// else the whole text.
static tpr_status_t module_body(const char* kname, const char* text, size_t size,
                                span_t* out) {
  const char* end = text + size;
  const char* p = skip_space(text, end);
  if (p < end && (*p == '#' || *p == '!'))
    return TPR_ERR(INVALID_ARGUMENT,
                   "kernel %s: the StableHLO text defines attribute or type "
                   "aliases (%.*s...); print it without debug info or aliases",
                   kname, excerpt(p, end), p);
  const char* open = NULL;
  if (starts(p, end, "module") && (p + 6 == end || !is_id_char(p[6]))) {
    // module [@name] [attributes {...}] { body }
    p += 6;
    for (;;) {
      p = skip_space(p, end);
      if (p < end && *p == '@') {
        p++;
        if (p < end && *p == '"') p = skip_string(p, end);
        else while (p < end && is_id_char(*p)) p++;
      } else if (starts(p, end, "attributes")) {
        p = skip_space(p + 10, end);
        const char* close = p < end && *p == '{' ? match_group(p, end) : NULL;
        if (!close) break;
        p = close + 1;
      } else {
        break;
      }
    }
    if (p < end && *p == '{') open = p;
  } else if (starts(p, end, "\"builtin.module\"")) {
    for (const char* q = p; q + 1 < end && !open; q++)
      if (q[0] == '(' && q[1] == '{') open = q + 1;
  } else {
    out->p = text;
    out->n = size;
    return tpr_ok_status();
  }
  const char* close = open ? match_group(open, end) : NULL;
  if (!close)
    return TPR_ERR(INVALID_ARGUMENT, "kernel %s: cannot find the module's body", kname);
  const char* rest = skip_space(close + 1, end);
  // Generic form: "}) {attributes} : () -> ()" follows; pretty: nothing.
  if (rest < end && *rest != ')' && *rest != '{' && *rest != ':')
    return TPR_ERR(INVALID_ARGUMENT,
                   "kernel %s: text after the module (%.*s...); one module, "
                   "no aliases or debug info", kname, excerpt(rest, end), rest);
  out->p = open + 1;
  out->n = (size_t)(close - open - 1);
  return tpr_ok_status();
}

typedef struct symbols {
  span_t names[KERNEL_MAX_SYMBOLS];
  int count;
} symbols_t;

static int symbol_index(const symbols_t* s, const char* p, size_t n) {
  for (int i = 0; i < s->count; i++)
    if (s->names[i].n == n && memcmp(s->names[i].p, p, n) == 0) return i;
  return -1;
}

// A symbol name at p (after '@', or inside sym_name's quotes): bare
// identifier or quoted string contents.
static span_t symbol_at(const char* p, const char* end) {
  span_t s = {p, 0};
  if (p < end && *p == '"') {
    const char* q = skip_string(p, end);
    if (q - p < 2 || q[-1] != '"') return s;  // unterminated
    s.p = p + 1;
    s.n = (size_t)(q - p - 2);
  } else if (p < end && is_id_start(*p)) {
    const char* q = p;
    while (q < end && is_id_char(*q)) q++;
    s.n = (size_t)(q - p);
  }
  return s;
}

static const char* const kVisibilities[] = {"public ", "private ", "nested "};

// The symbols the body defines: func.func [visibility] @name, and
// sym_name = "name" (generic form).
static tpr_status_t find_definitions(const char* kname, span_t body, symbols_t* out) {
  const char* p = body.p;
  const char* end = body.p + body.n;
  out->count = 0;
  while (p < end) {
    if (*p == '"') {
      p = skip_string(p, end);
      continue;
    }
    span_t name = {NULL, 0};
    if (starts(p, end, "func.func") && (p == body.p || !is_id_char(p[-1]))) {
      const char* q = skip_space(p + 9, end);
      for (size_t v = 0; v < 3; v++)
        if (starts(q, end, kVisibilities[v])) q = skip_space(q + strlen(kVisibilities[v]), end);
      if (q < end && *q == '@') name = symbol_at(q + 1, end);
      p = q;
    } else if (starts(p, end, "sym_name = \"")) {
      name = symbol_at(p + 11, end);
      p += 11;
      p = skip_string(p, end);
    } else {
      p++;
    }
    if (name.n) {
      if (symbol_index(out, name.p, name.n) >= 0) continue;
      if (out->count == KERNEL_MAX_SYMBOLS)
        return TPR_ERR(INVALID_ARGUMENT, "kernel %s: more than %d functions", kname,
                       KERNEL_MAX_SYMBOLS);
      out->names[out->count++] = name;
    }
  }
  return tpr_ok_status();
}

// Copies |body| with every defined symbol prefixed and pretty definitions
// made private.
static void rename_symbols(span_t body, const symbols_t* defs, const char* prefix,
                           tpr_text_t* b) {
  const char* p = body.p;
  const char* end = body.p + body.n;
  const char* copied = p;
  while (p < end) {
    if (starts(p, end, "sym_name = \"") || starts(p, end, "sym_visibility = \"")) {
      bool vis = p[4] == 'v';
      const char* q = p + (vis ? 18 : 12);
      span_t s = symbol_at(q - 1, end);
      if (vis) {
        tpr_text_append(b, copied, (size_t)(q - copied));
        buf_puts(b, "private");
        p = copied = q + s.n;
      } else {
        if (symbol_index(defs, s.p, s.n) >= 0) {
          tpr_text_append(b, copied, (size_t)(q - copied));
          buf_puts(b, prefix);
          copied = q;
        }
        p = q + s.n + 1 < end ? q + s.n + 1 : end;
      }
      continue;
    }
    if (*p == '"') {
      p = skip_string(p, end);
      continue;
    }
    if (starts(p, end, "func.func") && (p == body.p || !is_id_char(p[-1]))) {
      const char* q = skip_space(p + 9, end);
      const char* name_at = q;
      for (size_t v = 0; v < 3; v++)
        if (starts(q, end, kVisibilities[v])) name_at = skip_space(q + strlen(kVisibilities[v]), end);
      if (name_at < end && *name_at == '@') {
        tpr_text_append(b, copied, (size_t)(p - copied));
        buf_puts(b, "func.func private ");
        p = copied = name_at;
        continue;
      }
      p = q;
      continue;
    }
    if (*p == '@') {
      span_t s = symbol_at(p + 1, end);
      if (s.n && symbol_index(defs, s.p, s.n) >= 0) {
        bool quoted = p[1] == '"';
        tpr_text_append(b, copied, (size_t)(p - copied));
        buf_puts(b, quoted ? "@\"" : "@");
        buf_puts(b, prefix);
        tpr_text_append(b, s.p, s.n);
        if (quoted) buf_puts(b, "\"");
        p = copied = s.p + s.n + (quoted ? 1 : 0);
        continue;
      }
    }
    p++;
  }
  tpr_text_append(b, copied, (size_t)(end - copied));
}

//===--- the entry's signature ----------------------------------------------===//

static void type_text(const tpr_type_t* t, char* out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "tensor<");
  for (int i = 0; i < t->rank && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%lldx", (long long)t->dims[i]);
  if (n < cap) snprintf(out + n, cap - n, "%s>", tpr_dtype_mlir_name(t->dtype));
}

// One type at p (up to a ',' or ')' or '{' or "loc(" at depth 0), spaces
// dropped, into |out|; returns the position after it.
static const char* read_type(const char* p, const char* end, char* out, size_t cap) {
  size_t n = 0;
  int depth = 0;
  p = skip_space(p, end);
  for (; p < end; p++) {
    char c = *p;
    if (depth == 0 && (c == ',' || c == ')' || c == '{' || starts(p, end, " loc(") ||
                       starts(p, end, "loc(")))
      break;
    if (c == '<') depth++;
    if (c == '>') depth--;
    if (!isspace((unsigned char)c) && n + 1 < cap) out[n++] = c;
  }
  out[n] = 0;
  return p;
}

// Skips argument attributes and a location after a type.
static const char* skip_decorations(const char* p, const char* end) {
  for (;;) {
    p = skip_space(p, end);
    if (p < end && *p == '{') {
      const char* c = match_group(p, end);
      if (!c) return end;
      p = c + 1;
    } else if (starts(p, end, "loc(")) {
      const char* c = match_group(p + 3, end);
      if (!c) return end;
      p = c + 1;
    } else {
      return p;
    }
  }
}

// Compares a type list at p ("(" T, ... ")" or, for results, one bare T)
// with |types|. Pretty arguments carry "%name:" before each type.
static tpr_status_t check_types(const char* kname, const char* what, const char** pp,
                                const char* end, const tpr_type_t* types, int count,
                                bool named) {
  const char* p = skip_space(*pp, end);
  bool paren = p < end && *p == '(';
  if (paren) p++;
  int n = 0;
  for (;;) {
    p = skip_space(p, end);
    if (paren && p < end && *p == ')') {
      p++;
      break;
    }
    if (named) {
      if (p >= end || *p != '%') break;
      while (p < end && *p != ':') p++;
      if (p == end) break;
      p++;
    }
    char got[160], want[160];
    p = read_type(p, end, got, sizeof got);
    if (!got[0]) break;
    if (n < count) {
      type_text(&types[n], want, sizeof want);
      if (strcmp(got, want) != 0)
        return TPR_ERR(INVALID_ARGUMENT,
                       "kernel %s: %s %d of the StableHLO function is %s, but the "
                       "op declares %s", kname, what, n, got, want);
    }
    n++;
    p = skip_decorations(p, end);
    if (!paren) break;
    if (p < end && *p == ',') p++;
  }
  if (n != count)
    return TPR_ERR(INVALID_ARGUMENT,
                   "kernel %s: the StableHLO function has %d %ss, the op declares %d",
                   kname, n, what, count);
  *pp = p;
  return tpr_ok_status();
}

// Finds the entry's definition in the renamed text and checks its types.
static tpr_status_t check_entry(const tpr_kernel_t* k, const char* text, size_t size) {
  const char* end = text + size;
  char pretty[300], generic[300];
  snprintf(pretty, sizeof pretty, "private @%s(", k->entry);
  snprintf(generic, sizeof generic, "sym_name = \"%s\"", k->entry);
  const tpr_type_t* in = k->types;
  const tpr_type_t* out = k->types + k->num_inputs;
  // Pretty definitions were made "func.func private @entry(" above.
  const char* hit = strstr(text, pretty);
  if (hit) {
    const char* p = hit + strlen(pretty) - 1;
    TPR_RETURN_IF_ERROR(check_types(k->name, "argument", &p, end, in, k->num_inputs, true));
    p = skip_space(p, end);
    if (!starts(p, end, "->")) {
      if (k->num_outputs == 0) return tpr_ok_status();
      return TPR_ERR(INVALID_ARGUMENT, "kernel %s: the StableHLO function returns nothing",
                     k->name);
    }
    p += 2;
    return check_types(k->name, "result", &p, end, out, k->num_outputs, false);
  }
  const char* name_at = strstr(text, generic);
  if (name_at) {
    // function_type precedes sym_name in the same property dictionary.
    const char* op = name_at;
    while (op > text && !starts(op, name_at, "\"func.func\"")) op--;
    const char* ft = strstr(op, "function_type = ");
    if (ft && ft < name_at) {
      const char* p = ft + 16;
      TPR_RETURN_IF_ERROR(check_types(k->name, "argument", &p, end, in, k->num_inputs, false));
      p = skip_space(p, end);
      if (!starts(p, end, "->"))
        return TPR_ERR(INVALID_ARGUMENT, "kernel %s: cannot read function_type", k->name);
      p += 2;
      return check_types(k->name, "result", &p, end, out, k->num_outputs, false);
    }
  }
  return TPR_ERR(INVALID_ARGUMENT, "kernel %s: no function named %s in the StableHLO text",
                 k->name, strchr(k->entry, '_') + 1);
}

//===--- lifecycle ------------------------------------------------------------===//

static char* copy_string(const char* s, size_t n) {
  char* c = (char*)tpr_malloc(n + 1);
  if (c) {
    memcpy(c, s, n);
    c[n] = 0;
  }
  return c;
}

tpr_status_t tpr_kernel_create(const char* name, const char* text, size_t size,
                               const char* entry, const tpr_type_t* inputs, int num_inputs,
                               const tpr_type_t* outputs, int num_outputs,
                               tpr_kernel_t** out_kernel) {
  *out_kernel = NULL;
  if (!name) name = "kernel";
  if (!entry || !*entry) entry = "main";
  if (!text || !size)
    return TPR_ERR(INVALID_ARGUMENT, "kernel %s: empty StableHLO text", name);
  if (num_inputs < 0 || num_outputs < 1 || num_inputs > TPR_KERNEL_MAX_ARGS ||
      num_outputs > TPR_KERNEL_MAX_ARGS)
    return TPR_ERR(INVALID_ARGUMENT,
                   "kernel %s: %d inputs and %d outputs (1 to %d outputs and at "
                   "most %d inputs are supported)", name, num_inputs, num_outputs,
                   TPR_KERNEL_MAX_ARGS, TPR_KERNEL_MAX_ARGS);
  for (int i = 0; i < num_inputs + num_outputs; i++) {
    const tpr_type_t* t = i < num_inputs ? &inputs[i] : &outputs[i - num_inputs];
    if (t->dtype <= TPR_DTYPE_INVALID || t->dtype >= TPR_DTYPE_COUNT_ || t->rank < 0 ||
        t->rank > TPR_MAX_RANK || !tpr_dtype_mlir_name(t->dtype))
      return TPR_ERR(INVALID_ARGUMENT, "kernel %s: %s %d has an unsupported type", name,
                     i < num_inputs ? "input" : "output",
                     i < num_inputs ? i : i - num_inputs);
  }
  span_t body = {NULL, 0};
  TPR_RETURN_IF_ERROR(module_body(name, text, size, &body));
  symbols_t* defs = (symbols_t*)tpr_malloc(sizeof *defs);
  tpr_kernel_t* k = (tpr_kernel_t*)tpr_malloc(sizeof *k);
  if (!defs || !k) {
    tpr_free(defs);
    tpr_free(k);
    return TPR_ERR(RESOURCE_EXHAUSTED, "kernel %s: out of host memory", name);
  }
  memset(k, 0, sizeof *k);
  atomic_init(&k->refs, 1);
  k->num_inputs = num_inputs;
  k->num_outputs = num_outputs;
  tpr_status_t s = find_definitions(name, body, defs);
  if (tpr_status_is_ok(s) && symbol_index(defs, entry, strlen(entry)) < 0)
    s = TPR_ERR(INVALID_ARGUMENT, "kernel %s: no function named %s in the StableHLO text",
                name, entry);
  k->types = (tpr_type_t*)tpr_malloc(sizeof(tpr_type_t) * (size_t)(num_inputs + num_outputs));
  k->name = copy_string(name, strlen(name));
  if (tpr_status_is_ok(s) && (!k->types || !k->name))
    s = TPR_ERR(RESOURCE_EXHAUSTED, "kernel %s: out of host memory", name);
  if (tpr_status_is_ok(s)) {
    for (int i = 0; i < num_inputs; i++)
      k->types[i] = tpr_type_make(inputs[i].dtype, inputs[i].rank, inputs[i].dims);
    for (int i = 0; i < num_outputs; i++)
      k->types[num_inputs + i] =
          tpr_type_make(outputs[i].dtype, outputs[i].rank, outputs[i].dims);
    // Identical text and signature give identical symbol names, hence
    // identical graph text.
    tpr_hash128_t h;
    tpr_hash128_init(&h);
    tpr_hash128_bytes(&h, body.p, body.n);
    tpr_hash128_bytes(&h, entry, strlen(entry));
    tpr_hash128_bytes(&h, k->types, sizeof(tpr_type_t) * (size_t)(num_inputs + num_outputs));
    tpr_hash128_final(&h, k->hash);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "k%016llx_", (unsigned long long)k->hash[0]);
    tpr_text_t b = {0};
    rename_symbols(body, defs, prefix, &b);
    buf_puts(&b, "\n");
    tpr_text_t e = {0};
    buf_puts(&e, prefix);
    buf_puts(&e, entry);
    k->text = b.p;
    k->entry = e.p;
    if (b.oom || e.oom || !k->text || !k->entry)
      s = TPR_ERR(RESOURCE_EXHAUSTED, "kernel %s: out of host memory", name);
  }
  if (tpr_status_is_ok(s)) s = check_entry(k, k->text, strlen(k->text));
  tpr_free(defs);
  if (!tpr_status_is_ok(s)) {
    tpr_kernel_release(k);
    return s;
  }
  *out_kernel = k;
  return tpr_ok_status();
}

tpr_kernel_t* tpr_kernel_retain(tpr_kernel_t* k) {
  if (k) atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed);
  return k;
}

void tpr_kernel_release(tpr_kernel_t* k) {
  if (!k || atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) != 1) return;
  tpr_free(k->name);
  tpr_free(k->text);
  tpr_free(k->entry);
  tpr_free(k->types);
  tpr_free(k);
}

const char* tpr_kernel_name(const tpr_kernel_t* k) { return k->name; }
const char* tpr_kernel_text(const tpr_kernel_t* k) { return k->text; }
const char* tpr_kernel_entry(const tpr_kernel_t* k) { return k->entry; }
int tpr_kernel_num_inputs(const tpr_kernel_t* k) { return k->num_inputs; }
int tpr_kernel_num_outputs(const tpr_kernel_t* k) { return k->num_outputs; }
const tpr_type_t* tpr_kernel_input_type(const tpr_kernel_t* k, int i) { return &k->types[i]; }
const tpr_type_t* tpr_kernel_output_type(const tpr_kernel_t* k, int i) {
  return &k->types[k->num_inputs + i];
}
void tpr_kernel_hash(const tpr_kernel_t* k, uint64_t out[2]) {
  out[0] = k->hash[0];
  out[1] = k->hash[1];
}

//===--- calls ----------------------------------------------------------------===//

void tpr_call_kernel(tpr_graph_t* g, tpr_kernel_t* k, const tpr_value_t* args, int num_args,
                     tpr_value_t* out) {
  for (int i = 0; i < k->num_outputs; i++) out[i] = TPR_VALUE_NONE;
  if (!tpr_graph_ok(g)) return;
  if (num_args != k->num_inputs) {
    tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "kernel %s: called with %d arguments, takes %d",
                   k->name, num_args, k->num_inputs);
    return;
  }
  for (int i = 0; i < num_args; i++) {
    const tpr_type_t* t = tpr_graph_operand(g, args[i], k->name, i);
    if (!t) return;
    if (!tpr_type_equal(t, &k->types[i])) {
      char got[64], want[64];
      tpr_graph_fail(g, TPR_INVALID_ARGUMENT, "kernel %s: argument %d is %s, the kernel takes %s",
                     k->name, i, tpr_type_format(t, got, sizeof got),
                     tpr_type_format(&k->types[i], want, sizeof want));
      return;
    }
  }
  int index = 0;
  while (index < g->num_kernels && g->kernels[index] != k) index++;
  if (index == g->num_kernels) {
    if (g->num_kernels == g->cap_kernels) {
      int32_t cap = g->cap_kernels ? 2 * g->cap_kernels : 4;
      tpr_kernel_t** grown =
          (tpr_kernel_t**)tpr_realloc(g->kernels, (size_t)cap * sizeof *grown);
      if (!grown) {
        tpr_graph_fail(g, TPR_RESOURCE_EXHAUSTED, "graph: out of memory adding a kernel");
        return;
      }
      g->kernels = grown;
      g->cap_kernels = cap;
    }
    g->kernels[g->num_kernels++] = tpr_kernel_retain(k);
  }
  tpr_value_t first = tpr_graph_add_node(g, TPR_OP_CALL, index, args, num_args, NULL, 0,
                                         k->hash, sizeof k->hash, k->types + k->num_inputs,
                                         k->num_outputs);
  if (first == TPR_VALUE_NONE) return;
  for (int i = 0; i < k->num_outputs; i++) out[i] = first + i;
}

tpr_status_t tpr_lower_kernel_call(tpr_lower_ctx_t* ctx) {
  tpr_kernel_t* k = (tpr_kernel_t*)ctx->rule_data;
  if (!k) return TPR_ERR(INTERNAL, "%s: no kernel given", ctx->op_name);
  if (ctx->num_outs != k->num_outputs)
    return TPR_ERR(INVALID_ARGUMENT, "kernel %s: %d outputs expected, the kernel has %d",
                   k->name, ctx->num_outs, k->num_outputs);
  tpr_value_t args[TPR_KERNEL_MAX_ARGS];
  int n = 0;
  for (int i = 0; i < ctx->num_args && n < TPR_KERNEL_MAX_ARGS; i++)
    if (ctx->args[i].kind == TPR_ARG_TENSOR) args[n++] = ctx->args[i].value;
  tpr_call_kernel(ctx->graph, k, args, n, ctx->outs);
  return tpr_graph_status(ctx->graph);
}
