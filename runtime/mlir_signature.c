// Reads @main's parameter types from StableHLO text, so that execute can
// reject a wrong argument count or type with a status before the plugin
// sees it. PJRT has no portable "parameter shapes" query, and the text we
// compile is ours, so a small scanner of the pretty func syntax is enough:
//
//   func.func public @main(%arg0: tensor<2x3xf32> {tf.aliasing_output = 0 :
//                          i32}, %arg1: tensor<complex<f32>>) -> ...
//
// The generic op form ("func.func"() <{function_type = ..., sym_name =
// "main"}>) is read too. Anything else makes it return -1 (no signature).
#include <string.h>

#include "runtime/internal.h"

typedef struct scanner {
  const char* p;
  const char* end;
} scanner_t;

static void skip_space(scanner_t* s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\t' ||
                           *s->p == '\r'))
    s->p++;
}

static bool eat(scanner_t* s, const char* lit) {
  size_t n = strlen(lit);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0) return false;
  s->p += n;
  return true;
}

// Skips a balanced group that starts at *s->p (one of "{(<["), honouring
// quoted strings. False if it does not close.
static bool skip_group(scanner_t* s) {
  int depth = 0;
  bool in_str = false;
  for (; s->p < s->end; s->p++) {
    char c = *s->p;
    if (in_str) {
      if (c == '\\') s->p++;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '(' || c == '[' || c == '<') depth++;
    else if (c == '}' || c == ')' || c == ']' || c == '>') {
      if (--depth == 0) {
        s->p++;
        return true;
      }
    }
  }
  return false;
}

static int dtype_from_mlir(const char* name, size_t n) {
  for (int d = 1; d < TPR_DTYPE_COUNT_; d++) {
    const char* m = tpr_dtype_mlir_name((tpr_dtype_t)d);
    if (m && strlen(m) == n && memcmp(m, name, n) == 0) return d;
  }
  return -1;
}

// Parses "tensor<AxBxT>" (T may itself hold '<>', as complex<f32>).
static bool parse_tensor_type(scanner_t* s, tpr_tensor_sig_t* sig) {
  if (!eat(s, "tensor<")) return false;
  sig->rank = 0;
  for (;;) {
    const char* q = s->p;
    int64_t v = 0;
    while (q < s->end && *q >= '0' && *q <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (*q++ - '0');
    }
    if (q == s->p || q >= s->end || *q != 'x') break;  // not a dim
    if (sig->rank == TPR_MAX_RANK) return false;
    sig->dims[sig->rank++] = v;
    s->p = q + 1;
  }
  // Element type runs to the '>' that closes tensor<, past nested <...>.
  const char* start = s->p;
  int depth = 0;
  while (s->p < s->end) {
    char c = *s->p;
    if (c == '<') depth++;
    else if (c == '>') {
      if (depth == 0) break;
      depth--;
    } else if (c == ',' && depth == 0) {
      return false;  // an encoding attribute (sparsity, bounds): give up
    }
    s->p++;
  }
  if (s->p >= s->end) return false;
  int d = dtype_from_mlir(start, (size_t)(s->p - start));
  if (d < 0) return false;
  sig->dtype = d;
  s->p++;  // '>'
  return true;
}

// Parses "(T0, T1, ...)" at s->p into |sigs|; returns the count or -1.
static int parse_type_list(scanner_t* s, tpr_tensor_sig_t* sigs,
                           int max_sigs) {
  if (!eat(s, "(")) return -1;
  int n = 0;
  skip_space(s);
  if (eat(s, ")")) return 0;
  for (;;) {
    skip_space(s);
    tpr_tensor_sig_t sig;
    if (!parse_tensor_type(s, &sig)) return -1;
    if (sigs && n < max_sigs) sigs[n] = sig;
    n++;
    skip_space(s);
    if (eat(s, ")")) return n;
    if (!eat(s, ",")) return -1;
  }
}

static const char* find(const char* p, const char* end, const char* lit) {
  size_t n = strlen(lit);
  for (; p + n <= end; p++)
    if (memcmp(p, lit, n) == 0) return p;
  return NULL;
}

// Generic op form: "func.func"() <{function_type = (T0, ...) -> ...,
// sym_name = "main", ...}>. The attributes print in alphabetical order, so
// sym_name follows function_type within the same dictionary.
static int generic_signature(const char* text, const char* end,
                             tpr_tensor_sig_t* sigs, int max_sigs) {
  static const char kKey[] = "function_type = ";
  for (const char* hit = find(text, end, kKey); hit;
       hit = find(hit + 1, end, kKey)) {
    scanner_t s = {hit + sizeof kKey - 1, end};
    int n = parse_type_list(&s, NULL, 0);
    if (n < 0) continue;
    // The rest of this attribute dictionary, up to its closing '}'.
    scanner_t r = {s.p, end};
    bool is_main = false;
    while (r.p < r.end && *r.p != '}') {
      if (eat(&r, "sym_name = \"main\"")) {
        is_main = true;
        break;
      }
      if (*r.p == '"' || *r.p == '(' || *r.p == '[' || *r.p == '{' ||
          *r.p == '<') {
        if (*r.p == '"') {  // skip a string
          r.p++;
          while (r.p < r.end && *r.p != '"') r.p += (*r.p == '\\') ? 2 : 1;
          r.p++;
        } else if (!skip_group(&r)) {
          return -1;
        }
      } else {
        r.p++;
      }
    }
    if (!is_main) continue;
    s.p = hit + sizeof kKey - 1;
    return parse_type_list(&s, sigs, max_sigs);
  }
  return -1;
}

int tpr_mlir_main_signature(const char* text, size_t size,
                            tpr_tensor_sig_t* sigs, int max_sigs) {
  if (!text) return -1;
  scanner_t s = {text, text + size};
  const char* hit = find(text, s.end, "@main(");
  if (!hit) return generic_signature(text, s.end, sigs, max_sigs);
  s.p = hit + 6;
  int n = 0;
  skip_space(&s);
  if (eat(&s, ")")) return 0;
  for (;;) {
    skip_space(&s);
    if (!eat(&s, "%")) return -1;
    while (s.p < s.end && *s.p != ':' && *s.p != ' ') s.p++;
    skip_space(&s);
    if (!eat(&s, ":")) return -1;
    skip_space(&s);
    tpr_tensor_sig_t sig;
    if (!parse_tensor_type(&s, &sig)) return -1;
    if (sigs && n < max_sigs) sigs[n] = sig;
    n++;
    skip_space(&s);
    if (s.p < s.end && *s.p == '{') {  // argument attributes
      if (!skip_group(&s)) return -1;
      skip_space(&s);
    }
    if (eat(&s, "loc")) {  // location
      skip_space(&s);
      if (s.p >= s.end || *s.p != '(' || !skip_group(&s)) return -1;
      skip_space(&s);
    }
    if (eat(&s, ")")) return n;
    if (!eat(&s, ",")) return -1;
  }
}
