// Shared helpers for the runtime tests: open the plugin named by
// TORCH_TPU_PJRT_PLUGIN (a test that needs it fails when it is unset),
// small StableHLO modules, and host <-> device shorthands.
#ifndef TPR_TESTS_TEST_RUNTIME_FIXTURE_H_
#define TPR_TESTS_TEST_RUNTIME_FIXTURE_H_

#include <string.h>

#include "harness.h"
#include "tpr/runtime.h"

static inline tpr_status_t fixture_plugin(tpr_plugin_t** out) {
  const char* path = tpr_test_plugin_path();
  if (!path)
    return TPR_ERR(FAILED_PRECONDITION,
                   "TORCH_TPU_PJRT_PLUGIN is not set (tests/run_c_tests.sh "
                   "sets it)");
  return tpr_plugin_load(path, out);
}

// A client with |cpu_device_count| devices (0: 1 device).
static inline tpr_status_t fixture_client(int64_t cpu_device_count,
                                          tpr_client_t** out) {
  *out = NULL;
  tpr_plugin_t* plugin;
  TPR_RETURN_IF_ERROR(fixture_plugin(&plugin));
  tpr_client_options_t options;
  tpr_client_options_initialize(&options);
  options.cpu_device_count = cpu_device_count ? cpu_device_count : 1;
  return tpr_client_create(plugin, &options, out);
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

#endif  // TPR_TESTS_TEST_RUNTIME_FIXTURE_H_
