// Runtime tests against the real PJRT plugin named by TORCH_TPU_PJRT_PLUGIN.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/internal.h"
#include "test_runtime_fixture.h"

//===--- discovery and loading --------------------------------------------===//

// Makes |root|/|rel| (an empty file; discovery only checks it is readable).
static int touch(const char* root, const char* rel) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char* p = path + strlen(root) + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(path, 0755);
    *p = '/';
  }
  FILE* f = fopen(path, "w");
  if (!f) return -1;
  fclose(f);
  return 0;
}

static void remove_tree(const char* root) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", root);
}

TPR_TEST(runtime_discover_layouts) {
  char root[] = "/tmp/tpr_discover_XXXXXX";
  CHECK(mkdtemp(root) != NULL);
  const char* dirs[] = {"/nonexistent/site-packages", root};
  char* path = NULL;
  // Nothing installed: NOT_FOUND naming the package.
  tpr_status_t s = tpr_plugin_discover("cpu", dirs, 2, &path);
  CHECK(tpr_status_code(s) == TPR_NOT_FOUND);
  CHECK_STR_CONTAINS(tpr_status_message(s), "pip install xla-cpu-pjrt");
  tpr_status_free(s);
  s = tpr_plugin_discover("cuda", dirs, 2, &path);
  CHECK(tpr_status_code(s) == TPR_NOT_FOUND);
  CHECK_STR_CONTAINS(tpr_status_message(s), "jax-cuda13-pjrt");
  tpr_status_free(s);
  s = tpr_plugin_discover("tpu", dirs, 2, &path);
  CHECK(tpr_status_code(s) == TPR_NOT_FOUND);
  CHECK_STR_CONTAINS(tpr_status_message(s), "pip install libtpu");
  tpr_status_free(s);
  CHECK_STATUS(tpr_plugin_discover("bogus", dirs, 2, &path),
               TPR_INVALID_ARGUMENT);

  // The xla-cpu-pjrt wheel alone (as on aarch64), then both: the newer XLA
  // of lammps-jax-pjrt-cpu is preferred.
  CHECK(touch(root, "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so") == 0);
  CHECK_OK(tpr_plugin_discover("cpu", dirs, 2, &path));
  CHECK_STR_CONTAINS(path, "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
  tpr_free(path);
  CHECK(touch(root, "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so") == 0);
  CHECK_OK(tpr_plugin_discover("cpu", dirs, 2, &path));
  CHECK_STR_CONTAINS(path, "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so");
  tpr_free(path);
  // Automatic: no TPU or GPU plugin in |root|, so the CPU one.
  CHECK_OK(tpr_plugin_discover(NULL, dirs, 2, &path));
  CHECK_STR_CONTAINS(path, "pjrt_c_api_cpu_plugin.so");
  tpr_free(path);
  CHECK(touch(root, "jax_plugins/xla_cuda12/xla_cuda_plugin.so") == 0);
  CHECK(touch(root, "xla_plugins/xla_cuda13_pjrt/xla_cuda13_pjrt.so") == 0);
  CHECK_OK(tpr_plugin_discover("cuda", dirs, 2, &path));
  CHECK_STR_CONTAINS(path, "xla_cuda13_pjrt");  // cuda13 before cuda12
  tpr_free(path);
  CHECK(touch(root, "libtpu/libtpu.so") == 0);
  CHECK_OK(tpr_plugin_discover("tpu", dirs, 2, &path));
  CHECK_STR_CONTAINS(path, "libtpu/libtpu.so");
  tpr_free(path);
  remove_tree(root);
}

TPR_TEST(runtime_discover_path_spec) {
  const char* plugin = tpr_test_plugin_path();
  CHECK(plugin != NULL);  // TORCH_TPU_PJRT_PLUGIN must be set
  char* path = NULL;
  CHECK_OK(tpr_plugin_discover(plugin, NULL, 0, &path));
  CHECK(strcmp(path, plugin) == 0);
  tpr_free(path);
  tpr_status_t s = tpr_plugin_discover("/no/such/plugin.so", NULL, 0, &path);
  CHECK(tpr_status_code(s) == TPR_NOT_FOUND);
  CHECK_STR_CONTAINS(tpr_status_message(s), "pip install");
  tpr_status_free(s);
  CHECK(path == NULL);
}

TPR_TEST(runtime_plugin_load_twice_same_plugin) {
  tpr_plugin_t *a, *b, *c;
  CHECK_OK(fixture_plugin(&a));
  CHECK_OK(fixture_plugin(&b));
  CHECK(a == b);
  // Through a symlink: the same real file, the same plugin.
  char link_path[] = "/tmp/tpr_link_XXXXXX";
  CHECK(mkdtemp(link_path) != NULL);
  char so[PATH_MAX];
  snprintf(so, sizeof so, "%s/plugin.so", link_path);
  CHECK(symlink(tpr_test_plugin_path(), so) == 0);
  CHECK_OK(tpr_plugin_load(so, &c));
  CHECK(c == a);
  remove_tree(link_path);
}

TPR_TEST(runtime_plugin_load_errors) {
  tpr_plugin_t* p = NULL;
  CHECK_STATUS(tpr_plugin_load("/no/such/plugin.so", &p), TPR_NOT_FOUND);
  CHECK(p == NULL);
  // A file that is not a shared library: dlopen's text in the status.
  char path[] = "/tmp/tpr_notso_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, "not an ELF file", 15) == 15);
  close(fd);
  tpr_status_t s = tpr_plugin_load(path, &p);
  unlink(path);
  CHECK(tpr_status_code(s) == TPR_FAILED_PRECONDITION);
  CHECK_STR_CONTAINS(tpr_status_message(s), "cannot load PJRT plugin");
  tpr_status_free(s);
  // A shared library without GetPjrtApi.
  const char* libm = "/lib/x86_64-linux-gnu/libm.so.6";
  if (access(libm, R_OK) == 0)
    CHECK_STATUS(tpr_plugin_load(libm, &p), TPR_INVALID_ARGUMENT);
}

TPR_TEST(runtime_plugin_info_versions) {
  tpr_plugin_t* p;
  CHECK_OK(fixture_plugin(&p));
  tpr_plugin_info_t info;
  tpr_plugin_get_info(p, &info);
  CHECK(info.api_major == 0);
  CHECK(info.api_minor >= 60);
  CHECK(info.kind == TPR_PLUGIN_KIND_CPU);
  CHECK(info.path && info.path[0] == '/');
  // Both CPU wheels report StableHLO versions (1.x.y).
  CHECK(info.stablehlo_current_version[0] >= 1);
  CHECK(info.stablehlo_minimum_version[0] >= 0);
  printf("  plugin %s: PJRT %d.%d, xla_version %lld, stablehlo %lld.%lld.%lld "
         "(min %lld.%lld.%lld)\n",
         info.path, info.api_major, info.api_minor,
         (long long)info.xla_version,
         (long long)info.stablehlo_current_version[0],
         (long long)info.stablehlo_current_version[1],
         (long long)info.stablehlo_current_version[2],
         (long long)info.stablehlo_minimum_version[0],
         (long long)info.stablehlo_minimum_version[1],
         (long long)info.stablehlo_minimum_version[2]);
}

//===--- clients ----------------------------------------------------------===//

TPR_TEST(runtime_client_devices) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  CHECK(tpr_client_device_count(c) == 1);
  CHECK(strcmp(tpr_client_platform_name(c), "cpu") == 0);
  CHECK(tpr_client_platform_version(c) != NULL);
  CHECK(tpr_client_device_kind(c, 0) != NULL);
  CHECK(tpr_client_device_id(c, 0) >= 0);
  CHECK(tpr_client_device_kind(c, 1) == NULL);
  CHECK(tpr_client_device_id(c, -1) == -1);
  tpr_plugin_t* p;
  CHECK_OK(fixture_plugin(&p));
  CHECK(tpr_client_plugin(c) == p);
  tpr_client_destroy(c);
  CHECK_STATUS(tpr_client_create(NULL, NULL, &c), TPR_INVALID_ARGUMENT);
}

TPR_TEST(runtime_two_devices_run_on_device_1) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(2, &c));
  CHECK(tpr_client_device_count(c) == 2);
  CHECK(tpr_client_device_id(c, 0) != tpr_client_device_id(c, 1));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40}, r[4];
  tpr_buffer_t *bx, *by, *out = NULL, *bx0;
  CHECK_OK(fixture_f32(c, 1, x, 4, &bx));
  CHECK_OK(fixture_f32(c, 1, y, 4, &by));
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx0));
  CHECK(tpr_buffer_device(bx) == 1);
  tpr_buffer_t* args[2] = {bx, by};
  CHECK_OK(tpr_executable_execute(e, 1, args, 2, NULL, &out, false));
  CHECK(tpr_buffer_device(out) == 1);
  CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
  CHECK(r[0] == 11 && r[3] == 44);
  // An argument on another device is refused, not copied or crashed on.
  tpr_buffer_t* mixed[2] = {bx0, by};
  tpr_buffer_t* out2 = NULL;
  CHECK_STATUS(tpr_executable_execute(e, 1, mixed, 2, NULL, &out2, false),
               TPR_INVALID_ARGUMENT);
  CHECK(out2 == NULL);
  CHECK_STATUS(tpr_executable_execute(e, 2, args, 2, NULL, &out2, false),
               TPR_INVALID_ARGUMENT);
  tpr_buffer_release(out);
  tpr_buffer_release(bx);
  tpr_buffer_release(by);
  tpr_buffer_release(bx0);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

//===--- buffers ----------------------------------------------------------===//

TPR_TEST(runtime_roundtrip_every_dtype) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  const tpr_dtype_t dtypes[] = {
      TPR_DTYPE_BOOL, TPR_DTYPE_S8,  TPR_DTYPE_S16, TPR_DTYPE_S32,
      TPR_DTYPE_S64,  TPR_DTYPE_U8,  TPR_DTYPE_U16, TPR_DTYPE_U32,
      TPR_DTYPE_U64,  TPR_DTYPE_F16, TPR_DTYPE_BF16, TPR_DTYPE_F32,
      TPR_DTYPE_F64,  TPR_DTYPE_C64, TPR_DTYPE_C128, TPR_DTYPE_F8E5M2,
      TPR_DTYPE_F8E4M3FN};
  int64_t dims[3] = {2, 3, 5};
  unsigned char in[2 * 3 * 5 * 16], out[sizeof in];
  // Twice: through the CPU fast path (a copy from the host address), then
  // through PJRT_Buffer_ToHostBuffer as on other plugins.
  for (size_t k = 0; k < 2 * sizeof dtypes / sizeof dtypes[0]; k++) {
    tpr_dtype_t dt = dtypes[k % (sizeof dtypes / sizeof dtypes[0])];
    if (k == sizeof dtypes / sizeof dtypes[0])
      tpr_client_debug_set_host_pointer_reads(c, false);
    size_t bytes = 30 * tpr_dtype_size(dt);
    for (size_t i = 0; i < bytes; i++)
      in[i] = dt == TPR_DTYPE_BOOL ? (unsigned char)(i % 3 == 0)
                                   : (unsigned char)(i * 7 + 3);
    // Keep floats finite: a byte pattern above is fine for all but the
    // 8-bit floats' NaN encodings, which XLA may not keep bit-exact.
    if (dt == TPR_DTYPE_F8E5M2 || dt == TPR_DTYPE_F8E4M3FN)
      for (size_t i = 0; i < bytes; i++) in[i] &= 0x3f;
    tpr_buffer_t* b;
    CHECK_OK(tpr_buffer_from_host(c, 0, dt, dims, 3, in, &b));
    CHECK(tpr_buffer_dtype(b) == dt);
    CHECK(tpr_buffer_rank(b) == 3 && tpr_buffer_dims(b)[2] == 5);
    CHECK(tpr_buffer_numel(b) == 30);
    CHECK(tpr_buffer_byte_size(b) == bytes);
    CHECK(tpr_buffer_client(b) == c);
    memset(out, 0xee, sizeof out);
    tpr_status_t s = tpr_buffer_to_host(b, out, bytes);
    if (!tpr_status_is_ok(s))
      fprintf(stderr, "  dtype %s: %s\n", tpr_dtype_name(dt),
              tpr_status_message(s));
    tpr_status_free(s);
    tpr_buffer_release(b);
    CHECK(tpr_status_is_ok(s));
    if (memcmp(in, out, bytes) != 0)
      fprintf(stderr, "  dtype %s differs\n", tpr_dtype_name(dt));
    CHECK(memcmp(in, out, bytes) == 0);
  }
  tpr_client_destroy(c);
}

TPR_TEST(runtime_scalar_and_zero_size) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  // Rank 0.
  double v = 2.5, r = 0;
  tpr_buffer_t* s;
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F64, NULL, 0, &v, &s));
  CHECK(tpr_buffer_numel(s) == 1);
  CHECK_OK(tpr_buffer_to_host(s, &r, sizeof r));
  CHECK(r == 2.5);
  tpr_buffer_release(s);
  // A dim of 0: no data needed, nothing to copy back, and it can be used.
  int64_t dims[2] = {0, 3};
  tpr_buffer_t *z0, *z1, *zo = NULL;
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, dims, 2, NULL, &z0));
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, dims, 2, NULL, &z1));
  CHECK(tpr_buffer_numel(z0) == 0 && tpr_buffer_byte_size(z0) == 0);
  CHECK_OK(tpr_buffer_to_host(z0, NULL, 0));
  CHECK_OK(tpr_buffer_await(z0));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(
      c,
      "module @z { func.func public @main(%a: tensor<0x3xf32>, %b: "
      "tensor<0x3xf32>) -> tensor<0x3xf32> {\n"
      "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<0x3xf32>, tensor<0x3xf32>) "
      "-> tensor<0x3xf32>\n"
      "  \"func.return\"(%0) : (tensor<0x3xf32>) -> ()\n} }",
      &e));
  tpr_buffer_t* args[2] = {z0, z1};
  CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &zo, true));
  CHECK(tpr_buffer_rank(zo) == 2 && tpr_buffer_dims(zo)[0] == 0 &&
        tpr_buffer_dims(zo)[1] == 3);
  CHECK_OK(tpr_buffer_to_host(zo, NULL, 0));
  tpr_buffer_release(zo);
  tpr_buffer_release(z0);
  tpr_buffer_release(z1);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

TPR_TEST(runtime_from_host_rejects_bad_input) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  float x[4] = {0};
  int64_t n = 4, neg = -1, big[TPR_MAX_RANK + 1];
  for (int i = 0; i <= TPR_MAX_RANK; i++) big[i] = 1;
  tpr_buffer_t* b = (tpr_buffer_t*)1;
  // Each of these would make the plugin abort or misbehave if passed on.
  CHECK_STATUS(tpr_buffer_from_host(c, 0, TPR_DTYPE_INVALID, &n, 1, x, &b),
               TPR_INVALID_ARGUMENT);
  CHECK(b == NULL);
  CHECK_STATUS(tpr_buffer_from_host(c, 0, (tpr_dtype_t)99, &n, 1, x, &b),
               TPR_INVALID_ARGUMENT);
  CHECK_STATUS(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, big, TPR_MAX_RANK + 1, x, &b),
               TPR_INVALID_ARGUMENT);
  CHECK_STATUS(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, &neg, 1, x, &b),
               TPR_INVALID_ARGUMENT);
  CHECK_STATUS(tpr_buffer_from_host(c, 1, TPR_DTYPE_F32, &n, 1, x, &b),
               TPR_INVALID_ARGUMENT);
  CHECK_STATUS(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, &n, 1, NULL, &b),
               TPR_INVALID_ARGUMENT);
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, &n, 1, x, &b));
  CHECK_STATUS(tpr_buffer_to_host(b, x, 15), TPR_INVALID_ARGUMENT);
  tpr_buffer_release(b);
  tpr_client_destroy(c);
}

//===--- compile and execute ----------------------------------------------===//

TPR_TEST(runtime_execute_add) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  CHECK(tpr_executable_num_outputs(e) == 1);
  float x[4] = {1, 2, 3, 4}, y[4] = {0.5f, 0.25f, -3, 100}, r[4];
  tpr_buffer_t *bx, *by, *out;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  CHECK_OK(fixture_f32(c, 0, y, 4, &by));
  tpr_buffer_t* args[2] = {bx, by};
  for (int wait = 0; wait < 4; wait++) {
    if (wait == 2) tpr_client_debug_set_host_pointer_reads(c, false);
    CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &out, wait & 1));
    CHECK(tpr_buffer_dtype(out) == TPR_DTYPE_F32);
    CHECK(tpr_buffer_rank(out) == 1 && tpr_buffer_dims(out)[0] == 4);
    CHECK_OK(tpr_buffer_await(out));
    CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
    for (int i = 0; i < 4; i++) CHECK(r[i] == x[i] + y[i]);
    tpr_buffer_release(out);
  }
  // The executable outlives a retain/release pair.
  CHECK(tpr_executable_retain(e) == e);
  tpr_executable_release(e);
  tpr_buffer_release(bx);
  tpr_buffer_release(by);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

TPR_TEST(runtime_multiple_outputs) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(
      c,
      "module @m { func.func public @main(%a: tensor<2x2xf32>, %b: "
      "tensor<2x2xf32>, %i: tensor<i32>) -> (tensor<2x2xf32>, "
      "tensor<2x2xf32>, tensor<i32>) {\n"
      "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<2x2xf32>, tensor<2x2xf32>) "
      "-> tensor<2x2xf32>\n"
      "  %1 = \"stablehlo.multiply\"(%a, %b) : (tensor<2x2xf32>, "
      "tensor<2x2xf32>) -> tensor<2x2xf32>\n"
      "  %2 = \"stablehlo.negate\"(%i) : (tensor<i32>) -> tensor<i32>\n"
      "  \"func.return\"(%0, %1, %2) : (tensor<2x2xf32>, tensor<2x2xf32>, "
      "tensor<i32>) -> ()\n} }",
      &e));
  CHECK(tpr_executable_num_outputs(e) == 3);
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, r0[4], r1[4];
  int32_t i = 7, ri = 0;
  int64_t d2[2] = {2, 2};
  tpr_buffer_t *ba, *bb, *bi, *out[3];
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, d2, 2, a, &ba));
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, d2, 2, b, &bb));
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_S32, NULL, 0, &i, &bi));
  tpr_buffer_t* args[3] = {ba, bb, bi};
  CHECK_OK(tpr_executable_execute(e, 0, args, 3, NULL, out, false));
  CHECK(tpr_buffer_dtype(out[2]) == TPR_DTYPE_S32 && tpr_buffer_rank(out[2]) == 0);
  CHECK(tpr_buffer_rank(out[1]) == 2 && tpr_buffer_dims(out[1])[1] == 2);
  CHECK_OK(tpr_buffer_to_host(out[0], r0, sizeof r0));
  CHECK_OK(tpr_buffer_to_host(out[1], r1, sizeof r1));
  CHECK_OK(tpr_buffer_to_host(out[2], &ri, sizeof ri));
  for (int k = 0; k < 4; k++) CHECK(r0[k] == a[k] + b[k] && r1[k] == a[k] * b[k]);
  CHECK(ri == -7);
  for (int k = 0; k < 3; k++) tpr_buffer_release(out[k]);
  tpr_buffer_release(ba);
  tpr_buffer_release(bb);
  tpr_buffer_release(bi);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

TPR_TEST(runtime_compile_error_is_a_status) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e = (tpr_executable_t*)1;
  tpr_status_t s = fixture_compile(c, "module @bad { this is not mlir }", &e);
  CHECK(!tpr_status_is_ok(s));
  CHECK(e == NULL);
  CHECK(tpr_status_code(s) == TPR_INVALID_ARGUMENT);
  CHECK_STR_CONTAINS(tpr_status_message(s), "compiling a StableHLO module");
  CHECK(strlen(tpr_status_message(s)) > 40);  // the parser's message
  tpr_status_free(s);
  // Type error: verifier message, still a status.
  s = fixture_compile(
      c,
      "module @t { func.func public @main(%a: tensor<4xf32>) -> "
      "tensor<4xi32> {\n  \"func.return\"(%a) : (tensor<4xf32>) -> ()\n} }",
      &e);
  CHECK(!tpr_status_is_ok(s));
  tpr_status_free(s);
  CHECK_STATUS(tpr_executable_compile(c, "", 0, &e), TPR_INVALID_ARGUMENT);
  tpr_client_destroy(c);
}

TPR_TEST(runtime_execute_rejects_bad_arguments) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  float x[8] = {0};
  int32_t xi[4] = {0};
  int64_t n4 = 4, n8 = 8;
  tpr_buffer_t *f4, *f8, *i4, *out = (tpr_buffer_t*)1;
  CHECK_OK(fixture_f32(c, 0, x, 4, &f4));
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, &n8, 1, x, &f8));
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_S32, &n4, 1, xi, &i4));
  tpr_buffer_t* one[1] = {f4};
  CHECK_STATUS(tpr_executable_execute(e, 0, one, 1, NULL, &out, false),
               TPR_INVALID_ARGUMENT);
  CHECK(out == NULL);
  tpr_buffer_t* wrong_type[2] = {f4, i4};
  CHECK_STATUS(tpr_executable_execute(e, 0, wrong_type, 2, NULL, &out, false),
               TPR_INVALID_ARGUMENT);
  tpr_buffer_t* wrong_shape[2] = {f4, f8};
  CHECK_STATUS(tpr_executable_execute(e, 0, wrong_shape, 2, NULL, &out, false),
               TPR_INVALID_ARGUMENT);
  tpr_buffer_t* null_arg[2] = {f4, NULL};
  CHECK_STATUS(tpr_executable_execute(e, 0, null_arg, 2, NULL, &out, false),
               TPR_INVALID_ARGUMENT);
  tpr_executable_release(e);

  // The generic op form's signature is read too.
  CHECK_OK(fixture_compile(
      c,
      "\"builtin.module\"() ({\n"
      "  \"func.func\"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, "
      "sym_name = \"main\"}> ({\n"
      "  ^bb0(%arg0: tensor<4xf32>):\n"
      "    %0 = \"stablehlo.negate\"(%arg0) : (tensor<4xf32>) -> "
      "tensor<4xf32>\n"
      "    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n"
      "  }) : () -> ()\n"
      "}) : () -> ()\n",
      &e));
  CHECK_STATUS(tpr_executable_execute(e, 0, wrong_type, 2, NULL, &out, true),
               TPR_INVALID_ARGUMENT);
  CHECK_STATUS(tpr_executable_execute(e, 0, &i4, 1, NULL, &out, true),
               TPR_INVALID_ARGUMENT);
  CHECK_OK(tpr_executable_execute(e, 0, &f4, 1, NULL, &out, true));
  float r[4];
  CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
  CHECK(r[0] == -0.0f);
  tpr_buffer_release(out);
  tpr_executable_release(e);
  tpr_buffer_release(f4);
  tpr_buffer_release(f8);
  tpr_buffer_release(i4);
  tpr_client_destroy(c);
}

TPR_TEST(runtime_donation_kills_the_input) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, DONATING_ADD, &e));
  float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1}, r[4];
  tpr_buffer_t *bx, *by, *out, *out2;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  CHECK_OK(fixture_f32(c, 0, y, 4, &by));
  tpr_buffer_t* args[2] = {bx, by};
  // Not donated (the default): the aliased input stays readable.
  CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &out, true));
  CHECK_OK(tpr_buffer_to_host(bx, r, sizeof r));
  CHECK(r[0] == 1 && r[3] == 4);
  tpr_buffer_release(out);

  tpr_memory_stats_t before, after;
  CHECK_OK(tpr_client_memory_stats(c, 0, &before));
  bool donate[2] = {true, false};
  CHECK_OK(tpr_executable_execute(e, 0, args, 2, donate, &out, false));
  CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
  CHECK(r[0] == 2 && r[3] == 5);
  CHECK_STATUS(tpr_buffer_to_host(bx, r, sizeof r), TPR_FAILED_PRECONDITION);
  CHECK_STATUS(tpr_buffer_await(bx), TPR_FAILED_PRECONDITION);
  CHECK_STATUS(tpr_executable_execute(e, 0, args, 2, NULL, &out2, false),
               TPR_FAILED_PRECONDITION);
  // The donated bytes moved to the output: one buffer, no new bytes.
  CHECK_OK(tpr_client_memory_stats(c, 0, &after));
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.num_buffers == before.num_buffers);
  // Donating a buffer passed twice is refused before the plugin sees it.
  tpr_buffer_t* twice[2] = {by, by};
  CHECK_STATUS(tpr_executable_execute(e, 0, twice, 2, donate, &out2, false),
               TPR_INVALID_ARGUMENT);
  tpr_buffer_release(bx);  // a dead buffer releases normally
  tpr_buffer_release(by);
  tpr_buffer_release(out);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

static void count_return(void* ctx) { atomic_fetch_add((atomic_int*)ctx, 1); }

// Waits up to 5 s for |n| to reach |want| (the plugin may let go of lent
// memory from one of its own threads, shortly after the last owner dies).
static bool returned(atomic_int* n, int want) {
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 5000 && atomic_load(n) < want; i++) nanosleep(&ms, NULL);
  return atomic_load(n) == want;
}

TPR_TEST(runtime_lent_host_memory_is_the_buffer) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, DONATING_ADD, &e));
  float* x = (float*)aligned_alloc(64, 64);
  float y[4] = {1, 1, 1, 1}, r[4];
  for (int i = 0; i < 4; i++) x[i] = (float)(i + 1);
  atomic_int back = 0;
  int64_t n = 4;
  tpr_buffer_t *bx, *by, *out;
  CHECK_OK(tpr_buffer_lend_host(c, 0, TPR_DTYPE_F32, &n, 1, x, count_return,
                                &back, &bx));
  // The CPU plugin keeps the buffer in |x|: still lent while it lives.
  CHECK(atomic_load(&back) == 0);
  CHECK_OK(tpr_buffer_to_host(bx, r, sizeof r));
  CHECK(r[0] == 1 && r[3] == 4);
  // Donated, the memory becomes the output's: still lent.
  CHECK_OK(fixture_f32(c, 0, y, 4, &by));
  tpr_buffer_t* args[2] = {bx, by};
  bool donate[2] = {true, false};
  CHECK_OK(tpr_executable_execute(e, 0, args, 2, donate, &out, false));
  tpr_buffer_release(bx);
  CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
  CHECK(r[0] == 2 && r[3] == 5);
  CHECK(x[0] == 2 && x[3] == 5);  // the result was written in place
  CHECK(atomic_load(&back) == 0);
  tpr_buffer_release(out);
  CHECK(returned(&back, 1));

  // Memory the plugin cannot alias (not 64-byte aligned) is copied and
  // returned at once; so is memory of a call that fails.
  float* odd = x + 1;
  odd[0] = 7;
  CHECK_OK(tpr_buffer_lend_host(c, 0, TPR_DTYPE_F32, &n, 1, odd, count_return,
                                &back, &bx));
  CHECK(atomic_load(&back) == 2);
  odd[0] = 8;
  CHECK_OK(tpr_buffer_to_host(bx, r, sizeof r));
  CHECK(r[0] == 7);
  tpr_buffer_release(bx);
  int64_t bad = -1;
  CHECK_STATUS(tpr_buffer_lend_host(c, 0, TPR_DTYPE_F32, &bad, 1, x,
                                    count_return, &back, &bx),
               TPR_INVALID_ARGUMENT);
  CHECK(atomic_load(&back) == 3);
  CHECK_STATUS(tpr_buffer_lend_host(c, 0, TPR_DTYPE_F32, &n, 1, x, NULL,
                                    NULL, &bx),
               TPR_INVALID_ARGUMENT);
  tpr_buffer_release(by);
  tpr_executable_release(e);
  tpr_client_destroy(c);
  free(x);
}

TPR_TEST(runtime_serialize_roundtrip) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t *e, *d;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  void* data;
  size_t size;
  CHECK_OK(tpr_executable_serialize(e, &data, &size));
  CHECK(size > 24);
  CHECK_OK(tpr_executable_deserialize(c, data, size, &d));
  CHECK(tpr_executable_num_outputs(d) == 1);
  float x[4] = {1, 2, 3, 4}, r[4];
  tpr_buffer_t *bx, *out;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  tpr_buffer_t* args[2] = {bx, bx};
  CHECK_OK(tpr_executable_execute(d, 0, args, 2, NULL, &out, false));
  CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
  CHECK(r[0] == 2 && r[3] == 8);
  tpr_buffer_release(out);
  // The signature travelled with it.
  CHECK_STATUS(tpr_executable_execute(d, 0, args, 1, NULL, &out, false),
               TPR_INVALID_ARGUMENT);
  // Corruption and truncation are detected, not handed to the plugin.
  unsigned char* bytes = (unsigned char*)data;
  bytes[size / 2] ^= 0x55;
  tpr_executable_t* bad = NULL;
  CHECK_STATUS(tpr_executable_deserialize(c, data, size, &bad), TPR_DATA_LOSS);
  bytes[size / 2] ^= 0x55;
  CHECK_STATUS(tpr_executable_deserialize(c, data, size - 1, &bad),
               TPR_DATA_LOSS);
  CHECK_STATUS(tpr_executable_deserialize(c, "junk", 4, &bad), TPR_DATA_LOSS);
  CHECK(bad == NULL);
  tpr_free(data);
  tpr_buffer_release(bx);
  tpr_executable_release(d);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

//===--- memory and counters ----------------------------------------------===//

TPR_TEST(runtime_memory_stats_follow_buffers) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_memory_stats_t m0, m1, m2;
  CHECK_OK(tpr_client_memory_stats(c, 0, &m0));
  CHECK(m0.bytes_in_use == 0 && m0.num_buffers == 0);
  CHECK(m0.bytes_limit > 0);  // physical memory of the host
  // free: what the host has available now, never past the limit
  CHECK(m0.bytes_free > 0 && m0.bytes_free <= m0.bytes_limit);
  int64_t n = 1 << 18;        // 1 MiB of f32
  float* host = (float*)calloc((size_t)n, sizeof(float));
  CHECK(host != NULL);
  tpr_buffer_t *a, *b;
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, &n, 1, host, &a));
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, &n, 1, host, &b));
  free(host);
  CHECK_OK(tpr_client_memory_stats(c, 0, &m1));
  CHECK(m1.bytes_in_use == m0.bytes_in_use + 2 * (n * 4));
  CHECK(m1.num_buffers == 2);
  CHECK(m1.peak_bytes_in_use >= m1.bytes_in_use);
  tpr_buffer_release(a);
  CHECK(tpr_buffer_retain(b) == b);
  tpr_buffer_release(b);  // still one reference
  CHECK_OK(tpr_client_memory_stats(c, 0, &m2));
  CHECK(m2.bytes_in_use == n * 4 && m2.num_buffers == 1);
  CHECK(m2.peak_bytes_in_use == 2 * n * 4);
  tpr_client_reset_peak_memory(c, 0);
  CHECK_OK(tpr_client_memory_stats(c, 0, &m2));
  CHECK(m2.peak_bytes_in_use == n * 4);
  tpr_buffer_release(b);
  CHECK_OK(tpr_client_memory_stats(c, 0, &m2));
  CHECK(m2.bytes_in_use == 0 && m2.num_buffers == 0);
  CHECK_STATUS(tpr_client_memory_stats(c, 3, &m2), TPR_INVALID_ARGUMENT);
  tpr_client_destroy(c);
}

TPR_TEST(runtime_stats_counters) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_runtime_reset_stats();
  tpr_runtime_stats_t st;
  tpr_runtime_get_stats(&st);
  CHECK(st.compiles == 0 && st.executions == 0 && st.h2d_bytes == 0);
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  float x[4] = {1, 2, 3, 4}, r[4];
  tpr_buffer_t *bx, *out;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  tpr_buffer_t* args[2] = {bx, bx};
  CHECK_OK(tpr_executable_execute(e, 0, args, 2, NULL, &out, false));
  CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
  tpr_runtime_get_stats(&st);
  CHECK(st.compiles == 1 && st.compile_seconds > 0);
  CHECK(st.executions == 1);
  CHECK(st.h2d_transfers == 1 && st.h2d_bytes == 16);
  CHECK(st.d2h_transfers == 1 && st.d2h_bytes == 16);
  tpr_runtime_reset_stats();
  tpr_runtime_get_stats(&st);
  CHECK(st.compiles == 0 && st.compile_seconds == 0 && st.d2h_bytes == 0);
  tpr_buffer_release(out);
  tpr_buffer_release(bx);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

//===--- threads ----------------------------------------------------------===//

typedef struct thread_job {
  tpr_executable_t* exe;
  tpr_buffer_t* x;
  int failures;
} thread_job_t;

static void* run_job(void* arg) {
  thread_job_t* job = (thread_job_t*)arg;
  tpr_executable_t* e = tpr_executable_retain(job->exe);
  tpr_buffer_t* x = tpr_buffer_retain(job->x);
  for (int i = 0; i < 200; i++) {
    tpr_buffer_t* args[2] = {x, x};
    tpr_buffer_t* out = NULL;
    float r[4] = {0};
    tpr_status_t s = tpr_executable_execute(e, 0, args, 2, NULL, &out, false);
    if (tpr_status_is_ok(s)) s = tpr_buffer_to_host(out, r, sizeof r);
    if (!tpr_status_is_ok(s) || r[1] != 4) job->failures++;
    tpr_status_free(s);
    tpr_buffer_release(out);
  }
  tpr_buffer_release(x);
  tpr_executable_release(e);
  return NULL;
}

TPR_TEST(runtime_concurrent_execute) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(c, ADD_F32_4, &e));
  float x[4] = {1, 2, 3, 4};
  tpr_buffer_t* bx;
  CHECK_OK(fixture_f32(c, 0, x, 4, &bx));
  enum { kThreads = 4 };
  pthread_t t[kThreads];
  thread_job_t jobs[kThreads];
  for (int i = 0; i < kThreads; i++) {
    jobs[i] = (thread_job_t){e, bx, 0};
    CHECK(pthread_create(&t[i], NULL, run_job, &jobs[i]) == 0);
  }
  int failures = 0;
  for (int i = 0; i < kThreads; i++) {
    pthread_join(t[i], NULL);
    failures += jobs[i].failures;
  }
  CHECK(failures == 0);
  tpr_memory_stats_t m;
  CHECK_OK(tpr_client_memory_stats(c, 0, &m));
  CHECK(m.num_buffers == 1);
  tpr_buffer_release(bx);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

//===--- the @main signature reader (no plugin) ---------------------------===//

TPR_TEST(runtime_mlir_signature_reader) {
  tpr_tensor_sig_t sig[4];
  const char* pretty =
      "func.func public @main(%arg0: tensor<2x3xf32> {tf.aliasing_output = 0 "
      ": i32, mhlo.sharding = \"{replicated}\"}, %x: tensor<complex<f64>> "
      "loc(\"a\"), %b: tensor<0xi1>) -> tensor<2x3xf32>";
  CHECK(tpr_mlir_main_signature(pretty, strlen(pretty), sig, 4) == 3);
  CHECK(sig[0].dtype == TPR_DTYPE_F32 && sig[0].rank == 2 &&
        sig[0].dims[1] == 3);
  CHECK(sig[1].dtype == TPR_DTYPE_C128 && sig[1].rank == 0);
  CHECK(sig[2].dtype == TPR_DTYPE_BOOL && sig[2].dims[0] == 0);
  const char* none = "func.func @main() -> tensor<f32>";
  CHECK(tpr_mlir_main_signature(none, strlen(none), sig, 4) == 0);
  // Counted past |max_sigs|, written up to it.
  const char* many = "@main(%a: tensor<ui8>, %b: tensor<bf16>, %c: "
                     "tensor<si4>)";
  CHECK(tpr_mlir_main_signature(many, 40, sig, 1) == -1);  // cut short
  const char* two = "@main(%a: tensor<ui8>, %b: tensor<bf16>)";
  CHECK(tpr_mlir_main_signature(two, strlen(two), sig, 1) == 2);
  CHECK(sig[0].dtype == TPR_DTYPE_U8);
  // Unknown forms give -1: dynamic dims, unknown types, no @main.
  const char* dyn = "@main(%a: tensor<?x4xf32>)";
  CHECK(tpr_mlir_main_signature(dyn, strlen(dyn), sig, 4) == -1);
  CHECK(tpr_mlir_main_signature(many, strlen(many), sig, 4) == -1);
  CHECK(tpr_mlir_main_signature("module {}", 9, sig, 4) == -1);
  const char* other = "\"func.func\"() <{function_type = (tensor<4xf32>) -> "
                      "tensor<4xf32>, sym_name = \"helper\"}>";
  CHECK(tpr_mlir_main_signature(other, strlen(other), sig, 4) == -1);
}

// Outputs come back row-major through both to_host paths, including one
// whose natural layout would be transposed.
TPR_TEST(runtime_transpose_output_is_row_major) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_executable_t* e;
  CHECK_OK(fixture_compile(
      c,
      "module @t { func.func public @main(%a: tensor<2x3xf32>) -> "
      "tensor<3x2xf32> {\n"
      "  %0 = \"stablehlo.transpose\"(%a) {permutation = array<i64: 1, 0>} : "
      "(tensor<2x3xf32>) -> tensor<3x2xf32>\n"
      "  \"func.return\"(%0) : (tensor<3x2xf32>) -> ()\n} }",
      &e));
  float a[6] = {0, 1, 2, 3, 4, 5}, want[6] = {0, 3, 1, 4, 2, 5}, r[6];
  int64_t dims[2] = {2, 3};
  tpr_buffer_t *ba, *out;
  CHECK_OK(tpr_buffer_from_host(c, 0, TPR_DTYPE_F32, dims, 2, a, &ba));
  CHECK_OK(tpr_executable_execute(e, 0, &ba, 1, NULL, &out, false));
  CHECK(tpr_buffer_dims(out)[0] == 3 && tpr_buffer_dims(out)[1] == 2);
  for (int path = 0; path < 2; path++) {
    tpr_client_debug_set_host_pointer_reads(c, path == 0);
    memset(r, 0, sizeof r);
    CHECK_OK(tpr_buffer_to_host(out, r, sizeof r));
    CHECK(memcmp(r, want, sizeof r) == 0);
  }
  tpr_buffer_release(out);
  tpr_buffer_release(ba);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}

//===--- tiered compilation -----------------------------------------------===//

typedef struct {
  tpr_executable_t* exe;
  tpr_buffer_t* x;
  atomic_bool stop;
  int bad;   // results that were not x + x
  int runs;
} launcher_arg_t;

// Runs the executable over and over while the main thread upgrades it.
static void* run_until_stopped(void* p) {
  launcher_arg_t* a = (launcher_arg_t*)p;
  while (!atomic_load(&a->stop) || a->runs < 20) {
    tpr_buffer_t* args[2] = {a->x, a->x};
    tpr_buffer_t* out = NULL;
    float r[4];
    if (!tpr_status_is_ok(tpr_executable_execute(a->exe, 0, args, 2, NULL, &out, false)) ||
        !tpr_status_is_ok(tpr_buffer_to_host(out, r, sizeof r)) || r[0] != 2 || r[3] != 8)
      a->bad++;
    tpr_buffer_release(out);
    a->runs++;
  }
  return NULL;
}

TPR_TEST(runtime_first_tier_upgrades_in_place) {
  tpr_client_t* c;
  CHECK_OK(fixture_client(1, &c));
  tpr_runtime_stats_t before, after;
  tpr_runtime_get_stats(&before);
  tpr_executable_t* e;
  CHECK_OK(tpr_executable_compile_first_tier(c, ADD_F32_4, strlen(ADD_F32_4), &e));
  CHECK(tpr_executable_is_first_tier(e));
  // Another program cannot replace it.
  const char* other =
      "module @add { func.func public @main(%arg0: tensor<8xf32>, %arg1: "
      "tensor<8xf32>) -> (tensor<8xf32>) {\n"
      "  %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<8xf32>, tensor<8xf32>) -> "
      "tensor<8xf32>\n  \"func.return\"(%0) : (tensor<8xf32>) -> ()\n} }\n";
  CHECK_STATUS(tpr_executable_upgrade(e, other, strlen(other)), TPR_INVALID_ARGUMENT);
  CHECK(tpr_executable_is_first_tier(e));

  // Upgraded while another thread launches it: every launch is right.
  float x[4] = {1, 2, 3, 4};
  launcher_arg_t a = {.exe = e};
  CHECK_OK(fixture_f32(c, 0, x, 4, &a.x));
  atomic_init(&a.stop, false);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, run_until_stopped, &a) == 0);
  CHECK_OK(tpr_executable_upgrade(e, ADD_F32_4, strlen(ADD_F32_4)));
  atomic_store(&a.stop, true);
  pthread_join(t, NULL);
  CHECK(a.bad == 0);
  CHECK(a.runs >= 20);
  CHECK(!tpr_executable_is_first_tier(e));
  CHECK_STATUS(tpr_executable_upgrade(e, ADD_F32_4, strlen(ADD_F32_4)),
               TPR_FAILED_PRECONDITION);
  tpr_runtime_get_stats(&after);
  CHECK(after.first_tier_compiles == before.first_tier_compiles + 1);
  CHECK(after.upgrades == before.upgrades + 2);  // the rejected one compiled too
  CHECK(after.upgrade_seconds > before.upgrade_seconds);
  CHECK(after.compiles == before.compiles + 1);  // upgrades are not waited-for compiles

  // The full code is what a persistent cache gets.
  void* data;
  size_t size;
  CHECK_OK(tpr_executable_serialize(e, &data, &size));
  tpr_executable_t* d;
  CHECK_OK(tpr_executable_deserialize(c, data, size, &d));
  CHECK(!tpr_executable_is_first_tier(d));
  tpr_free(data);
  tpr_executable_release(d);
  tpr_buffer_release(a.x);
  tpr_executable_release(e);
  tpr_client_destroy(c);
}
