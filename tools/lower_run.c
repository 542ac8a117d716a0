// tpr_lower_run: runs lowering rules on a PJRT plugin, for differential
// tests against PyTorch (tools/check_rules.py drives it).
//
//   tpr_lower_run DIR
//   tpr_lower_run --list      prints every rule name
//
// DIR/spec.txt lists cases; tensors' bytes are in DIR/data.bin. For each
// case the tool builds a graph (one parameter per tensor argument), runs
// tpr_lower, emits StableHLO, compiles and executes it on the plugin named
// by TORCH_TPU_PJRT_PLUGIN, and appends the outputs to DIR/out.bin. One
// line per case goes to DIR/result.txt: "ok OFFSET NBYTES ..." (one pair
// per output) or "err MESSAGE".
//
// spec.txt, one item per line:
//   case NAME NARGS NOUTS
//   tensor DTYPE IS_SCALAR RANK DIMS... OFFSET      (bytes in data.bin)
//   list COUNT         followed by COUNT "tensor ..." or "none" lines
//   none | int V | double V | bool V | dtype D | str S | gen OFFSET
//   ints N V... | doubles N V... | bools N V...
//   out DTYPE RANK DIMS...
//   end
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "tpr/lower.h"
#include "tpr/runtime.h"

#define MAX_ARGS 32
#define MAX_VALS 512

typedef struct {
  tpr_type_t type;
  long offset;
} param_t;

static char* g_data;
static size_t g_data_size;

static char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = malloc((size_t)n + 1);
  if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
  buf[n] = '\0';
  fclose(f);
  *size = (size_t)n;
  return buf;
}

// Parses "DTYPE IS_SCALAR RANK DIMS... OFFSET" after "tensor".
static bool parse_tensor(char** save, tpr_type_t* t, bool* is_scalar,
                         long* off) {
  char* tok;
  int dtype = atoi(strtok_r(NULL, " \n", save));
  *is_scalar = atoi(strtok_r(NULL, " \n", save)) != 0;
  int rank = atoi(strtok_r(NULL, " \n", save));
  if (rank < 0 || rank > TPR_MAX_RANK) return false;
  int64_t dims[TPR_MAX_RANK];
  for (int i = 0; i < rank; i++) dims[i] = atoll(strtok_r(NULL, " \n", save));
  tok = strtok_r(NULL, " \n", save);
  if (!tok) return false;
  *off = atol(tok);
  *t = tpr_type_make((tpr_dtype_t)dtype, rank, dims);
  return true;
}

static tpr_status_t run_case(tpr_client_t* client, char** lines, int nlines,
                             FILE* out_bin, FILE* result) {
  tpr_graph_t* g;
  TPR_RETURN_IF_ERROR(tpr_graph_create(&g));
  tpr_arg_t args[MAX_ARGS];
  memset(args, 0, sizeof args);
  static tpr_value_t list_vals[MAX_VALS];
  static int64_t ints[MAX_VALS];
  static double doubles[MAX_VALS];
  static bool bools[MAX_VALS];
  static char strs[MAX_ARGS][64];
  int nv = 0, ni = 0, nd = 0, nb = 0;
  param_t params[MAX_VALS];
  int nparams = 0;
  tpr_type_t outs[MAX_ARGS];
  int nargs = 0, nouts = 0;
  char name[256] = "";
  tpr_status_t st = tpr_ok_status();
  for (int li = 0; li < nlines && tpr_status_is_ok(st); li++) {
    char* save;
    char* kind = strtok_r(lines[li], " \n", &save);
    if (!kind) continue;
    if (!strcmp(kind, "case")) {
      snprintf(name, sizeof name, "%s", strtok_r(NULL, " \n", &save));
      continue;
    }
    if (!strcmp(kind, "end")) break;
    if (!strcmp(kind, "out")) {
      int dtype = atoi(strtok_r(NULL, " \n", &save));
      int rank = atoi(strtok_r(NULL, " \n", &save));
      int64_t dims[TPR_MAX_RANK];
      for (int i = 0; i < rank; i++) dims[i] = atoll(strtok_r(NULL, " \n", &save));
      outs[nouts++] = tpr_type_make((tpr_dtype_t)dtype, rank, dims);
      continue;
    }
    tpr_arg_t* a = &args[nargs++];
    a->value = TPR_VALUE_NONE;
    if (!strcmp(kind, "tensor")) {
      a->kind = TPR_ARG_TENSOR;
      param_t* p = &params[nparams++];
      if (!parse_tensor(&save, &p->type, &a->is_scalar, &p->offset))
        st = TPR_ERR(INVALID_ARGUMENT, "bad tensor line");
      a->value = tpr_parameter(g, p->type);
    } else if (!strcmp(kind, "list")) {
      a->kind = TPR_ARG_TENSOR_LIST;
      a->count = atoi(strtok_r(NULL, " \n", &save));
      a->values = &list_vals[nv];
      for (int k = 0; k < a->count; k++) {
        li++;
        char* s2;
        char* k2 = strtok_r(lines[li], " \n", &s2);
        if (!strcmp(k2, "none")) {
          list_vals[nv++] = TPR_VALUE_NONE;
          continue;
        }
        param_t* p = &params[nparams++];
        bool sc;
        parse_tensor(&s2, &p->type, &sc, &p->offset);
        list_vals[nv++] = tpr_parameter(g, p->type);
      }
    } else if (!strcmp(kind, "none")) {
      a->kind = TPR_ARG_NONE;
    } else if (!strcmp(kind, "int")) {
      a->kind = TPR_ARG_INT;
      a->i = atoll(strtok_r(NULL, " \n", &save));
    } else if (!strcmp(kind, "double")) {
      a->kind = TPR_ARG_DOUBLE;
      a->d = strtod(strtok_r(NULL, " \n", &save), NULL);
    } else if (!strcmp(kind, "bool")) {
      a->kind = TPR_ARG_BOOL;
      a->b = atoi(strtok_r(NULL, " \n", &save)) != 0;
    } else if (!strcmp(kind, "dtype")) {
      a->kind = TPR_ARG_DTYPE;
      a->dtype = (tpr_dtype_t)atoi(strtok_r(NULL, " \n", &save));
    } else if (!strcmp(kind, "str")) {
      a->kind = TPR_ARG_STRING;
      snprintf(strs[nargs - 1], sizeof strs[0], "%s", strtok_r(NULL, " \n", &save));
      a->s = strs[nargs - 1];
    } else if (!strcmp(kind, "gen")) {
      a->kind = TPR_ARG_GENERATOR;
      param_t* p = &params[nparams++];
      int64_t two = 2;
      p->type = tpr_type_make(TPR_DTYPE_U64, 1, &two);
      p->offset = atol(strtok_r(NULL, " \n", &save));
      a->value = tpr_parameter(g, p->type);
    } else if (!strcmp(kind, "ints") || !strcmp(kind, "doubles") ||
               !strcmp(kind, "bools")) {
      int n = atoi(strtok_r(NULL, " \n", &save));
      a->count = n;
      if (kind[0] == 'i') {
        a->kind = TPR_ARG_INT_LIST;
        a->ints = &ints[ni];
        for (int k = 0; k < n; k++) ints[ni++] = atoll(strtok_r(NULL, " \n", &save));
      } else if (kind[0] == 'd') {
        a->kind = TPR_ARG_DOUBLE_LIST;
        a->doubles = &doubles[nd];
        for (int k = 0; k < n; k++) doubles[nd++] = strtod(strtok_r(NULL, " \n", &save), NULL);
      } else {
        a->kind = TPR_ARG_BOOL_LIST;
        a->bools = &bools[nb];
        for (int k = 0; k < n; k++) bools[nb++] = atoi(strtok_r(NULL, " \n", &save)) != 0;
      }
    } else {
      st = TPR_ERR(INVALID_ARGUMENT, "unknown spec item %s", kind);
    }
  }
  tpr_value_t out_vals[MAX_ARGS];
  tpr_lower_ctx_t ctx = {g, name, args, nargs, outs, nouts, out_vals};
  if (tpr_status_is_ok(st)) st = tpr_lower(&ctx);
  for (int i = 0; i < nouts && tpr_status_is_ok(st); i++)
    tpr_graph_add_result(g, out_vals[i]);
  char* text = NULL;
  size_t len = 0;
  if (tpr_status_is_ok(st)) st = tpr_graph_emit_stablehlo(g, &text, &len);
  if (tpr_status_is_ok(st) && getenv("TPR_DUMP")) fprintf(stderr, "%s\n", text);
  tpr_executable_t* exe = NULL;
  if (tpr_status_is_ok(st)) st = tpr_executable_compile(client, text, len, &exe);
  if (!tpr_status_is_ok(st) && text && getenv("TPR_DUMP_ERR"))
    fprintf(stderr, "%s\n", text);
  tpr_free(text);
  tpr_buffer_t* in[MAX_VALS] = {NULL};
  tpr_buffer_t* res[MAX_ARGS] = {NULL};
  for (int i = 0; i < nparams && tpr_status_is_ok(st); i++) {
    const tpr_type_t* t = &params[i].type;
    size_t need = (size_t)tpr_type_numel(t) * tpr_dtype_size(t->dtype);
    if ((size_t)params[i].offset + need > g_data_size)
      st = TPR_ERR(INVALID_ARGUMENT, "data out of range");
    else
      st = tpr_buffer_from_host(client, 0, t->dtype, t->dims, t->rank,
                                g_data + params[i].offset, &in[i]);
  }
  if (tpr_status_is_ok(st))
    st = tpr_executable_execute(exe, 0, in, (size_t)nparams, NULL, res, true);
  if (tpr_status_is_ok(st)) {
    fprintf(result, "ok");
    for (int i = 0; i < nouts && tpr_status_is_ok(st); i++) {
      size_t n = tpr_buffer_byte_size(res[i]);
      void* host = malloc(n ? n : 1);
      st = tpr_buffer_to_host(res[i], host, n);
      long off = ftell(out_bin);
      fwrite(host, 1, n, out_bin);
      fprintf(result, " %ld %zu", off, n);
      free(host);
    }
    fprintf(result, "\n");
  }
  for (int i = 0; i < nparams; i++) tpr_buffer_release(in[i]);
  for (int i = 0; i < nouts; i++) tpr_buffer_release(res[i]);
  tpr_executable_release(exe);
  tpr_graph_free(g);
  return st;
}

int main(int argc, char** argv) {
  if (argc == 2 && !strcmp(argv[1], "--list")) {  // every rule name
    size_t n;
    const tpr_rule_t* t = tpr_rule_table(&n);
    for (size_t i = 0; i < n; i++)
      printf("%s %p\n", t[i].name, (void*)(uintptr_t)t[i].lower);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  char path[4096];
  size_t spec_size;
  snprintf(path, sizeof path, "%s/spec.txt", argv[1]);
  char* spec = read_file(path, &spec_size);
  snprintf(path, sizeof path, "%s/data.bin", argv[1]);
  g_data = read_file(path, &g_data_size);
  if (!spec || !g_data) {
    fprintf(stderr, "cannot read %s/spec.txt or data.bin\n", argv[1]);
    return 2;
  }
  const char* plugin_path = getenv("TORCH_TPU_PJRT_PLUGIN");
  tpr_plugin_t* plugin;
  tpr_client_t* client;
  tpr_client_options_t options;
  tpr_client_options_initialize(&options);
  tpr_status_t st = tpr_plugin_load(plugin_path ? plugin_path : "", &plugin);
  if (tpr_status_is_ok(st)) st = tpr_client_create(plugin, &options, &client);
  if (!tpr_status_is_ok(st)) {
    fprintf(stderr, "plugin: %s\n", tpr_status_message(st));
    return 2;
  }
  snprintf(path, sizeof path, "%s/out.bin", argv[1]);
  FILE* out_bin = fopen(path, "wb");
  snprintf(path, sizeof path, "%s/result.txt", argv[1]);
  FILE* result = fopen(path, "w");
  // Split into lines, then cases.
  char* lines[4096];
  int nlines = 0;
  for (char* p = spec; *p && nlines < 4096;) {
    lines[nlines++] = p;
    char* nl = strchr(p, '\n');
    if (!nl) break;
    *nl = '\0';
    p = nl + 1;
  }
  for (int i = 0; i < nlines;) {
    int j = i;
    while (j < nlines && strncmp(lines[j], "end", 3) != 0) j++;
    if (j == nlines) break;
    if (strncmp(lines[i], "case", 4) == 0) {
      tpr_status_t s = run_case(client, lines + i, j - i + 1, out_bin, result);
      if (!tpr_status_is_ok(s)) {
        const char* m = tpr_status_message(s);
        fprintf(result, "err ");
        for (; *m; m++) fputc(*m == '\n' ? ' ' : *m, result);
        fprintf(result, "\n");
        tpr_status_free(s);
      }
      fflush(result);
    }
    i = j + 1;
  }
  fclose(out_bin);
  fclose(result);
  tpr_client_destroy(client);
  free(spec);
  free(g_data);
  return 0;
}
