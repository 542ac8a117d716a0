// Every sample graph builds and emits; with TPR_EMIT_DUMP_DIR set, the
// modules and their sidecars are written there for tools/check_stablehlo.py
// (`python tools/check_stablehlo.py --build build` does both steps).
#include <stdlib.h>

#include "harness.h"
#include "test_emit_samples.h"

static bool write_file(const char* dir, const char* name, const char* ext,
                       const char* text, size_t len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  FILE* f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(text, 1, len, f) == len;
  return fclose(f) == 0 && ok;
}

TPR_TEST(emit_dump_samples) {
  const char* dir = getenv("TPR_EMIT_DUMP_DIR");
  tpr_graph_t* g;
  CHECK_OK(tpr_graph_create(&g));
  tpr_sample_t s;
  char json[1024];
  int count = 0;
  for (int i = 0; tpr_sample_get(i, &s, json, sizeof json); i++) {
    tpr_graph_reset(g);
    s.build(g, s.arg);
    tpr_status_t st = tpr_graph_status(g);
    if (!tpr_status_is_ok(st)) {
      fprintf(stderr, "  sample %s: %s\n", s.name, tpr_status_message(st));
      tpr_status_free(st);
      tpr_graph_free(g);
      CHECK(false);
    }
    char* text;
    size_t len;
    CHECK_OK(tpr_graph_emit_stablehlo(g, &text, &len));
    bool ok = !dir || (write_file(dir, s.name, "mlir", text, len) &&
                       write_file(dir, s.name, "json", s.json, strlen(s.json)));
    tpr_free(text);
    if (!ok) tpr_graph_free(g);
    CHECK(ok);
    count++;
  }
  tpr_graph_free(g);
  CHECK(count > 30);
}
