// Loads PJRT plugins: dlopen, GetPjrtApi, version checks, Initialize and
// Attributes. Plugins live in a static table for the life of the process
// (no heap: nothing for leak checks to see), one entry per real path.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/pjrt/internal.h"

#define TPR_MAX_PLUGINS 8

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tpr_plugin_t g_plugins[TPR_MAX_PLUGINS];
static int g_num_plugins;

static tpr_plugin_kind_t kind_from_path(const char* path) {
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strstr(path, "libtpu")) return TPR_PLUGIN_KIND_TPU;
  if (strstr(path, "cuda") || strstr(base, "gpu")) return TPR_PLUGIN_KIND_CUDA;
  if (strstr(path, "cpu")) return TPR_PLUGIN_KIND_CPU;
  return TPR_PLUGIN_KIND_OTHER;
}

static bool name_is(const PJRT_NamedValue* v, const char* name) {
  return v->name && v->name_size == strlen(name) &&
         memcmp(v->name, name, v->name_size) == 0;
}

static void read_version3(const PJRT_NamedValue* v, int64_t out[3]) {
  if (v->type != PJRT_NamedValue_kInt64List || !v->int64_array_value) return;
  for (size_t i = 0; i < 3 && i < v->value_size; i++)
    out[i] = v->int64_array_value[i];
}

// Fills the version fields of |info| from PJRT_Plugin_Attributes, where the
// plugin has it; a failure leaves the -1s (the attributes are optional).
static void read_attributes(const PJRT_Api* api, tpr_plugin_info_t* info) {
  info->xla_version = -1;
  for (int i = 0; i < 3; i++) {
    info->stablehlo_current_version[i] = -1;
    info->stablehlo_minimum_version[i] = -1;
  }
  if (!TPR_PJRT_HAS(api, Plugin_Attributes)) return;
  PJRT_Plugin_Attributes_Args a = {.struct_size = sizeof a};
  tpr_status_t s = tpr_pjrt_status(api, api->Plugin_Attributes(&a));
  if (!tpr_status_is_ok(s)) {
    tpr_status_free(s);
    return;
  }
  for (size_t i = 0; i < a.num_attributes; i++) {
    const PJRT_NamedValue* v = &a.attributes[i];
    if (name_is(v, "xla_version") && v->type == PJRT_NamedValue_kInt64)
      info->xla_version = v->int64_value;
    else if (name_is(v, "stablehlo_current_version"))
      read_version3(v, info->stablehlo_current_version);
    else if (name_is(v, "stablehlo_minimum_version"))
      read_version3(v, info->stablehlo_minimum_version);
  }
}

// Entry points called without a check at each call site: a plugin must
// have all of them. (Initialize, Attributes, MemoryStats, ClearMemoryStats,
// Serialize, DeserializeAndLoad and UnsafePointer are optional, checked
// with TPR_PJRT_HAS where they are called.)
#define TPR_PJRT_REQUIRED(X)                                               \
  X(Error_Destroy) X(Error_Message) X(Error_GetCode) X(Event_Destroy)      \
  X(Event_Await) X(Client_Create) X(Client_Destroy) X(Client_PlatformName) \
  X(Client_PlatformVersion) X(Client_AddressableDevices) X(Client_Compile) \
  X(Client_BufferFromHostBuffer) X(DeviceDescription_Id)                   \
  X(DeviceDescription_Kind) X(Device_GetDescription) X(Executable_Destroy) \
  X(Executable_NumOutputs) X(LoadedExecutable_Destroy)                     \
  X(LoadedExecutable_GetExecutable) X(LoadedExecutable_Execute)            \
  X(Buffer_Destroy) X(Buffer_ToHostBuffer) X(Buffer_ReadyEvent)            \
  X(Executable_OutputElementTypes) X(Executable_OutputDimensions)

// The name of the first required entry point |api| lacks, or NULL.
static const char* missing_entry_point(const PJRT_Api* api) {
#define TPR_CHECK_ENTRY(name) \
  if (!TPR_PJRT_HAS(api, name)) return "PJRT_" #name;
  TPR_PJRT_REQUIRED(TPR_CHECK_ENTRY)
#undef TPR_CHECK_ENTRY
  return NULL;
}

// Opens |path| into |p| (not yet published). On failure |p| is unchanged
// apart from scratch fields and the library is closed when that is safe.
static tpr_status_t open_plugin(const char* path, tpr_plugin_t* p) {
  if (access(path, R_OK) != 0)
    return TPR_ERR(NOT_FOUND,
                   "PJRT plugin '%s' does not exist; `pip install "
                   "xla-cpu-pjrt` provides the CPU plugin",
                   path);
  dlerror();
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    return TPR_ERR(FAILED_PRECONDITION, "cannot load PJRT plugin '%s': %s",
                   path, e ? e : "dlopen failed");
  }
  tpr_pjrt_get_api_fn_t get_api;
  *(void**)&get_api = dlsym(handle, "GetPjrtApi");
  if (!get_api) {
    dlclose(handle);
    return TPR_ERR(INVALID_ARGUMENT,
                   "'%s' is not a PJRT plugin (no GetPjrtApi symbol)", path);
  }
  const PJRT_Api* api = get_api();
  if (!api || api->struct_size < offsetof(PJRT_Api, Executable_Destroy)) {
    dlclose(handle);
    return TPR_ERR(INTERNAL, "GetPjrtApi of '%s' returned no usable table",
                   path);
  }
  int major = api->pjrt_api_version.major_version;
  int minor = api->pjrt_api_version.minor_version;
  if (major != 0 || minor < TPR_PJRT_MIN_MINOR ||
      !TPR_PJRT_HAS(api, Executable_OutputDimensions)) {
    dlclose(handle);
    return TPR_ERR(FAILED_PRECONDITION,
                   "PJRT plugin '%s' has API version %d.%d; torch_tpu needs "
                   "0.%d or newer (major 0); upgrade the plugin package",
                   path, major, minor, TPR_PJRT_MIN_MINOR);
  }
  const char* missing = missing_entry_point(api);
  if (missing) {
    dlclose(handle);
    return TPR_ERR(FAILED_PRECONDITION,
                   "PJRT plugin '%s' (API 0.%d) does not implement %s", path,
                   minor, missing);
  }
  if (TPR_PJRT_HAS(api, Plugin_Initialize)) {
    PJRT_Plugin_Initialize_Args a = {.struct_size = sizeof a};
    tpr_status_t s = tpr_pjrt_status(api, api->Plugin_Initialize(&a));
    // Not dlclose'd after a failed Initialize: it may have started threads.
    if (!tpr_status_is_ok(s))
      return tpr_status_annotate(s, "initializing PJRT plugin '%s'", path);
  }
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", path);
  p->handle = handle;
  p->api = api;
  p->info.path = p->path;
  p->info.kind = kind_from_path(path);
  p->info.api_major = major;
  p->info.api_minor = minor;
  read_attributes(api, &p->info);
  return tpr_ok_status();
}

tpr_status_t tpr_plugin_load(const char* path, tpr_plugin_t** out_plugin) {
  if (!out_plugin) return TPR_ERR(INVALID_ARGUMENT, "out_plugin is NULL");
  *out_plugin = NULL;
  if (!path || !*path) return TPR_ERR(INVALID_ARGUMENT, "empty plugin path");
  char real[PATH_MAX];
  if (!realpath(path, real)) {
    if (strlen(path) >= sizeof real)
      return TPR_ERR(INVALID_ARGUMENT, "plugin path too long");
    strcpy(real, path);  // open_plugin reports the missing file
  }
  tpr_status_t s = tpr_ok_status();
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_num_plugins; i++) {
    if (strcmp(g_plugins[i].path, real) == 0) {
      *out_plugin = &g_plugins[i];
      pthread_mutex_unlock(&g_lock);
      return tpr_ok_status();
    }
  }
  if (g_num_plugins == TPR_MAX_PLUGINS) {
    s = TPR_ERR(RESOURCE_EXHAUSTED, "more than %d PJRT plugins loaded",
                TPR_MAX_PLUGINS);
  } else {
    s = open_plugin(real, &g_plugins[g_num_plugins]);
    if (tpr_status_is_ok(s)) *out_plugin = &g_plugins[g_num_plugins++];
  }
  pthread_mutex_unlock(&g_lock);
  return s;
}

void tpr_plugin_get_info(const tpr_plugin_t* plugin, tpr_plugin_info_t* out) {
  *out = plugin->info;
}
