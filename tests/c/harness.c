// Runner for the C unit tests; see harness.h.
#include "harness.h"

#include <stdlib.h>

#include "tpr/eager.h"

#define MAX_TESTS 1024
static struct {
  const char* name;
  tpr_test_fn_t fn;
} tests[MAX_TESTS];
static int num_tests;
static int64_t live_before;  // allocation baseline of the running test

void tpr_test_keep_allocations(void) {
  tpr_eager_wait_for_upgrades(0);  // not what the test keeps
  live_before = tpr_live_allocations();
}

void tpr_test_register(const char* name, tpr_test_fn_t fn) {
  if (num_tests < MAX_TESTS) {
    tests[num_tests].name = name;
    tests[num_tests].fn = fn;
    num_tests++;
  }
}

const char* tpr_test_plugin_path(void) {
  const char* p = getenv("TORCH_TPU_PJRT_PLUGIN");
  return (p && *p) ? p : NULL;
}

int main(int argc, char** argv) {
  // Line-buffered even into a pipe (test.sh tees the output): progress shows
  // as it happens, and a crash keeps the lines of the tests before it.
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0;
  for (int i = 0; i < num_tests; i++) {
    if (filter && !strstr(tests[i].name, filter)) continue;
    live_before = tpr_live_allocations();
    int f = 0;
    tests[i].fn(&f);
    // Background compiles the test queued hold memory until they finish.
    tpr_eager_wait_for_upgrades(0);
    int64_t leaked = tpr_live_allocations() - live_before;
    if (!f && leaked != 0) {
      fprintf(stderr, "  %lld tpr_malloc blocks leaked\n", (long long)leaked);
      f = 1;
    }
    printf("%s %s\n", f ? "FAIL" : "ok  ", tests[i].name);
    if (f) failed++; else passed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
