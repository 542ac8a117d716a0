// Shared helpers for the runtime tests: open the plugin named by
// TORCH_TPU_PJRT_PLUGIN (a test that needs it fails when it is unset),
// small StableHLO modules, and host <-> device shorthands.
#ifndef TPR_TESTS_TEST_RUNTIME_FIXTURE_H_
#define TPR_TESTS_TEST_RUNTIME_FIXTURE_H_

#include <string.h>

#include "harness.h"
#include "tpr/graph.h"
#include "tpr/runtime.h"

static inline tpr_status_t fixture_plugin(tpr_plugin_t** out) {
  const char* path = tpr_test_plugin_path();
  if (!path)
    return TPR_ERR(FAILED_PRECONDITION,
                   "TORCH_TPU_PJRT_PLUGIN is not set (tests/run_c_tests.sh "
                   "sets it)");
  return tpr_plugin_load(path, out);
}

// A client of the plugin with |options|.
static inline tpr_status_t fixture_client_with(const tpr_client_options_t* options,
                                               tpr_client_t** out) {
  *out = NULL;
  tpr_plugin_t* plugin;
  TPR_RETURN_IF_ERROR(fixture_plugin(&plugin));
  return tpr_client_create(plugin, options, out);
}

// A client with |cpu_device_count| devices (0: 1 device).
static inline tpr_status_t fixture_client(int64_t cpu_device_count,
                                          tpr_client_t** out) {
  tpr_client_options_t options;
  tpr_client_options_initialize(&options);
  options.cpu_device_count = cpu_device_count ? cpu_device_count : 1;
  return fixture_client_with(&options, out);
}

static inline tpr_status_t fixture_compile(tpr_client_t* c, const char* text,
                                           tpr_executable_t** out) {
  return tpr_executable_compile(c, text, strlen(text), out);
}

static inline tpr_status_t fixture_f32(tpr_client_t* c, int ordinal,
                                       const float* v, int64_t n,
                                       tpr_buffer_t** out) {
  return tpr_buffer_from_host(c, ordinal, TPR_DTYPE_F32, &n, 1, v, out);
}

#define ADD_F32_4                                                        \
  "module @add { func.func public @main(%arg0: tensor<4xf32>, %arg1: "   \
  "tensor<4xf32>) -> (tensor<4xf32>) {\n"                                \
  "  %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, "            \
  "tensor<4xf32>) -> tensor<4xf32>\n"                                    \
  "  \"func.return\"(%0) : (tensor<4xf32>) -> ()\n} }\n"


// x + y with x's buffer donatable to the result.
#define DONATING_ADD                                                         \
  "module @d { func.func public @main(%arg0: tensor<4xf32> "                 \
  "{tf.aliasing_output = 0 : i32}, %arg1: tensor<4xf32>) -> "                \
  "(tensor<4xf32>) {\n"                                                      \
  "  %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, "                \
  "tensor<4xf32>) -> tensor<4xf32>\n"                                        \
  "  \"func.return\"(%0) : (tensor<4xf32>) -> ()\n} }\n"


// Compiles |g| (one f32[n] parameter), runs it on |in| and copies result
// |result| (any 4-byte dtype, at most 4 results) to |out|.
static inline tpr_status_t fixture_run1(tpr_client_t* c, tpr_graph_t* g, const float* in,
                                          int64_t n, int result, void* out, size_t bytes) {
  char* text;
  size_t len;
  TPR_RETURN_IF_ERROR(tpr_graph_emit_stablehlo(g, &text, &len));
  tpr_executable_t* exe = NULL;
  tpr_status_t s = tpr_executable_compile(c, text, len, &exe);
  if (!tpr_status_is_ok(s)) fprintf(stderr, "%s\n", text);
  tpr_free(text);
  tpr_buffer_t* arg = NULL;
  tpr_buffer_t* res[4] = {NULL};
  if (tpr_status_is_ok(s))
    s = tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, &n, 1, in, &arg);
  if (tpr_status_is_ok(s))
    s = tpr_executable_execute(exe, 0, &arg, 1, NULL, res, true);
  if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(res[result], out, bytes);
  for (int i = 0; i < 4; i++) tpr_buffer_release(res[i]);
  tpr_buffer_release(arg);
  tpr_executable_release(exe);
  return s;
}

#endif  // TPR_TESTS_TEST_RUNTIME_FIXTURE_H_
