// A tiny C test harness. Tests register themselves with TPR_TEST(name); the
// runner (harness.c) runs every test, or those whose name contains argv[1],
// and prints "N passed, N failed". A test fails on the first failed CHECK.
// Tests needing the real PJRT plugin call tpr_test_plugin_path(), which
// reads TORCH_TPU_PJRT_PLUGIN (set by tests/run_c_tests.sh).
#ifndef TPR_TESTS_HARNESS_H_
#define TPR_TESTS_HARNESS_H_

#include <stdio.h>
#include <string.h>

#include "tpr/base.h"

typedef void (*tpr_test_fn_t)(int* failed);
void tpr_test_register(const char* name, tpr_test_fn_t fn);
// Path of the PJRT plugin for tests, or NULL (tests needing it then fail).
const char* tpr_test_plugin_path(void);
// Takes the C allocations live now as the running test's baseline: for
// tests that set up process-wide state (the eager context, its caches)
// before the part whose leaks they check.
void tpr_test_keep_allocations(void);

#define TPR_TEST(name)                                              \
  static void name(int* tpr_failed_);                               \
  __attribute__((constructor)) static void name##_register(void) {  \
    tpr_test_register(#name, name);                                 \
  }                                                                 \
  static void name(int* tpr_failed_)

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,   \
              #cond);                                                      \
      *tpr_failed_ = 1;                                                    \
      return;                                                              \
    }                                                                      \
  } while (0)

#define CHECK_OK(expr)                                                     \
  do {                                                                     \
    tpr_status_t s_ = (expr);                                              \
    if (!tpr_status_is_ok(s_)) {                                           \
      fprintf(stderr, "  %s:%d: %s failed: %s\n", __FILE__, __LINE__,      \
              #expr, tpr_status_message(s_));                              \
      tpr_status_free(s_);                                                 \
      *tpr_failed_ = 1;                                                    \
      return;                                                              \
    }                                                                      \
  } while (0)

// Checks that |expr| fails with |code|, and frees the status.
#define CHECK_STATUS(expr, code)                                           \
  do {                                                                     \
    tpr_status_t s_ = (expr);                                              \
    tpr_status_code_t c_ = tpr_status_code(s_);                            \
    if (c_ != (code)) {                                                    \
      fprintf(stderr, "  %s:%d: %s gave %s (%s), wanted %s\n", __FILE__,   \
              __LINE__, #expr, tpr_status_code_name(c_),                   \
              tpr_status_message(s_), tpr_status_code_name(code));         \
      tpr_status_free(s_);                                                 \
      *tpr_failed_ = 1;                                                    \
      return;                                                              \
    }                                                                      \
    tpr_status_free(s_);                                                   \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle) CHECK(strstr((hay), (needle)) != NULL)

#endif  // TPR_TESTS_HARNESS_H_
