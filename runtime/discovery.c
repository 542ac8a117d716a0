// Finds a PJRT plugin library in the layouts the pip wheels install.
//
//   CPU : xla-cpu-pjrt         xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so
//         lammps-jax-pjrt-cpu  lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so
//   CUDA: jax-cuda13-pjrt      jax_plugins/xla_cuda13/xla_cuda_plugin.so
//         jax-cuda12-pjrt      jax_plugins/xla_cuda12/xla_cuda_plugin.so
//         xla-cuda1N-pjrt      xla_plugins/xla_cuda1N_pjrt/*.so (by analogy
//                              with xla-cpu-pjrt's layout; unverified)
//   TPU : libtpu               libtpu/libtpu.so
//
// Automatic choice: libtpu when a TPU is attached, the CUDA plugin when a
// GPU is present, else the CPU plugin: lammps-jax-pjrt-cpu where it is
// installed (x86-64 only), for its newer XLA compiles TinyGPT's training
// step in half the time and runs compiled steps about 10% faster; else
// xla-cpu-pjrt (docs/figures.md, "Which CPU plugin by default").
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <dirent.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tpr/runtime.h"

// Paths relative to a search dir; a '*' makes it a glob.
static const char* const kCpuLayouts[] = {
    "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
    "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
    NULL,
};
static const char* const kCudaLayouts[] = {
    "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
    "xla_plugins/xla_cuda13_pjrt/*.so",
    "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
    "xla_plugins/xla_cuda12_pjrt/*.so",
    NULL,
};
static const char* const kTpuLayouts[] = {
    "libtpu/libtpu.so",
    NULL,
};

static bool dir_has_entries(const char* path, const char* prefix) {
  DIR* d = opendir(path);
  if (!d) return false;
  bool found = false;
  struct dirent* e;
  while (!found && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (!prefix || strncmp(e->d_name, prefix, strlen(prefix)) == 0)
      found = true;
  }
  closedir(d);
  return found;
}

static bool tpu_present(void) {
  return dir_has_entries("/dev", "accel") || dir_has_entries("/dev/vfio", NULL);
}

static bool gpu_present(void) {
  return access("/dev/nvidia0", F_OK) == 0 ||
         dir_has_entries("/proc/driver/nvidia/gpus", NULL);
}

// Looks |layouts| up under each search dir, in order; on success
// *out_path is a tpr_malloc'd copy of the first readable file.
static bool find_layout(const char* const* layouts,
                        const char* const* dirs, size_t num_dirs,
                        char** out_path) {
  char buf[4096];
  for (size_t d = 0; d < num_dirs; d++) {
    if (!dirs[d] || !*dirs[d]) continue;
    for (const char* const* l = layouts; *l; l++) {
      int n = snprintf(buf, sizeof buf, "%s/%s", dirs[d], *l);
      if (n < 0 || (size_t)n >= sizeof buf) continue;
      if (!strchr(*l, '*')) {
        if (access(buf, R_OK) == 0) {
          *out_path = tpr_strdup(buf);
          return *out_path != NULL;
        }
        continue;
      }
      glob_t g;
      if (glob(buf, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
          if (access(g.gl_pathv[i], R_OK) == 0) {
            *out_path = tpr_strdup(g.gl_pathv[i]);
            globfree(&g);
            return *out_path != NULL;
          }
        }
      }
      globfree(&g);
    }
  }
  return false;
}

static tpr_status_t not_found(const char* what, const char* package,
                              size_t num_dirs) {
  return TPR_ERR(NOT_FOUND,
                 "no %s PJRT plugin found in %zu search folder(s); install "
                 "it with `pip install %s`, or set TORCH_TPU_PJRT_PLUGIN to "
                 "the plugin's .so path",
                 what, num_dirs, package);
}

tpr_status_t tpr_plugin_discover(const char* spec,
                                 const char* const* search_dirs,
                                 size_t num_search_dirs, char** out_path) {
  if (!out_path) return TPR_ERR(INVALID_ARGUMENT, "out_path is NULL");
  *out_path = NULL;
  if (num_search_dirs && !search_dirs)
    return TPR_ERR(INVALID_ARGUMENT, "search_dirs is NULL");
  if (!spec || !*spec) {
    if (tpu_present() &&
        find_layout(kTpuLayouts, search_dirs, num_search_dirs, out_path))
      return tpr_ok_status();
    if (gpu_present() &&
        find_layout(kCudaLayouts, search_dirs, num_search_dirs, out_path))
      return tpr_ok_status();
    if (find_layout(kCpuLayouts, search_dirs, num_search_dirs, out_path))
      return tpr_ok_status();
    return not_found("CPU", "xla-cpu-pjrt", num_search_dirs);
  }
  if (strcmp(spec, "cpu") == 0) {
    if (find_layout(kCpuLayouts, search_dirs, num_search_dirs, out_path))
      return tpr_ok_status();
    return not_found("CPU", "xla-cpu-pjrt", num_search_dirs);
  }
  if (strcmp(spec, "cuda") == 0 || strcmp(spec, "gpu") == 0) {
    if (find_layout(kCudaLayouts, search_dirs, num_search_dirs, out_path))
      return tpr_ok_status();
    return not_found("CUDA", "jax-cuda13-pjrt", num_search_dirs);
  }
  if (strcmp(spec, "tpu") == 0) {
    if (find_layout(kTpuLayouts, search_dirs, num_search_dirs, out_path))
      return tpr_ok_status();
    return not_found("TPU", "libtpu", num_search_dirs);
  }
  if (strchr(spec, '/') || strstr(spec, ".so")) {
    if (access(spec, R_OK) != 0)
      return TPR_ERR(NOT_FOUND,
                     "PJRT plugin '%s' does not exist or is not readable; "
                     "install one with `pip install xla-cpu-pjrt` (CPU), "
                     "`pip install jax-cuda13-pjrt` (CUDA) or `pip install "
                     "libtpu` (TPU)",
                     spec);
    *out_path = tpr_strdup(spec);
    return *out_path ? tpr_ok_status()
                     : TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  return TPR_ERR(INVALID_ARGUMENT,
                 "unknown PJRT plugin spec '%s': use \"cpu\", \"cuda\", "
                 "\"tpu\", a path to a .so, or \"\" for automatic",
                 spec);
}
