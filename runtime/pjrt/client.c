// Clients, their addressable devices, and memory figures.
#define _XOPEN_SOURCE 700  // POSIX.1-2008: realpath, mkdtemp, clock_gettime
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "runtime/pjrt/internal.h"

static char* copy_string(const char* s, size_t n) {
  char* out = (char*)tpr_malloc(n + 1);
  if (!out) return NULL;
  if (n) memcpy(out, s, n);
  out[n] = 0;
  return out;
}

void tpr_client_options_initialize(tpr_client_options_t* options) {
  memset(options, 0, sizeof *options);
}

static tpr_status_t read_devices(tpr_client_t* c) {
  const PJRT_Api* api = c->api;
  PJRT_Client_AddressableDevices_Args a = {.struct_size = sizeof a,
                                           .client = c->client};
  TPR_RETURN_IF_ERROR(tpr_pjrt_status(api, api->Client_AddressableDevices(&a)));
  if (a.num_addressable_devices == 0)
    return TPR_ERR(FAILED_PRECONDITION, "the PJRT client has no devices");
  if (a.num_addressable_devices > INT16_MAX)
    return TPR_ERR(UNIMPLEMENTED, "too many devices (%zu)",
                   a.num_addressable_devices);
  c->devices = (tpr_device_slot_t*)tpr_calloc(a.num_addressable_devices,
                                              sizeof *c->devices);
  if (!c->devices) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  c->num_devices = (int)a.num_addressable_devices;
  for (int i = 0; i < c->num_devices; i++) {
    tpr_device_slot_t* d = &c->devices[i];
    d->device = a.addressable_devices[i];
    atomic_init(&d->bytes_in_use, 0);
    atomic_init(&d->peak_bytes_in_use, 0);
    atomic_init(&d->num_buffers, 0);
    PJRT_Device_GetDescription_Args g = {.struct_size = sizeof g,
                                         .device = d->device};
    TPR_RETURN_IF_ERROR(tpr_pjrt_status(api, api->Device_GetDescription(&g)));
    PJRT_DeviceDescription_Id_Args id = {
        .struct_size = sizeof id, .device_description = g.device_description};
    TPR_RETURN_IF_ERROR(tpr_pjrt_status(api, api->DeviceDescription_Id(&id)));
    d->id = id.id;
    PJRT_DeviceDescription_Kind_Args k = {
        .struct_size = sizeof k, .device_description = g.device_description};
    TPR_RETURN_IF_ERROR(
        tpr_pjrt_status(api, api->DeviceDescription_Kind(&k)));
    d->kind = copy_string(k.device_kind ? k.device_kind : "",
                          k.device_kind ? k.device_kind_size : 0);
    if (!d->kind) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  return tpr_ok_status();
}

static tpr_status_t read_platform(tpr_client_t* c) {
  const PJRT_Api* api = c->api;
  PJRT_Client_String_Args n = {.struct_size = sizeof n, .client = c->client};
  TPR_RETURN_IF_ERROR(tpr_pjrt_status(api, api->Client_PlatformName(&n)));
  c->platform_name = copy_string(n.value ? n.value : "", n.value_size);
  PJRT_Client_String_Args v = {.struct_size = sizeof v, .client = c->client};
  TPR_RETURN_IF_ERROR(tpr_pjrt_status(api, api->Client_PlatformVersion(&v)));
  c->platform_version = copy_string(v.value ? v.value : "", v.value_size);
  if (!c->platform_name || !c->platform_version)
    return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  return tpr_ok_status();
}

// An integer file of the cgroup (v2) mounted at /sys/fs/cgroup (a
// container's own, under cgroup namespaces), or -1 ("max", missing,
// unreadable: the root cgroup has no memory.max).
static int64_t cgroup_value(const char* name) {
  char path[256];
  snprintf(path, sizeof path, "/sys/fs/cgroup/%s", name);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  long long v = -1;
  if (fscanf(f, "%lld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

// What the host can still give this process, in bytes: MemAvailable, and
// no more than its cgroup's limit less the cgroup's usage; -1 if unknown.
static int64_t host_available_bytes(void) {
  int64_t avail = -1;
  FILE* f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[128];
    long long kb;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
        avail = (int64_t)kb * 1024;
        break;
      }
    fclose(f);
  }
  int64_t max = cgroup_value("memory.max"), cur = cgroup_value("memory.current");
  if (max > 0 && cur >= 0) {
    int64_t left = max > cur ? max - cur : 0;
    if (avail < 0 || left < avail) avail = left;
  }
  return avail;
}

// The CPU plugin's device buffers are heap blocks. glibc maps a block over
// its mmap threshold afresh and unmaps it on free, so a training step that
// frees and allocates megabytes of outputs page-faulted them all in again
// (hundreds to thousands of faults, and milliseconds, per TinyGPT training
// step). glibc raises the threshold by itself as it sees large frees, up to
// 32 MiB; starting there keeps a step's blocks for the next one, as a device
// caching allocator would. The trim threshold stays below the 64 MiB a
// thread's heap grows by: at 64 MiB (glibc's own ceiling) a thread heap's
// top never shrank, each heap kept the highest point the plugin's threads'
// outputs ever reached, and a long run's RSS crept up with every new high
// (+7 MiB over 10,000 AdamW steps, flat at 16 MiB with no cost in speed:
// docs/figures.md). A user's own MALLOC_* or GLIBC_TUNABLES settings win.
// tpr_client_empty_cache returns what glibc can.
static void keep_freed_host_memory(void) {
#ifdef __GLIBC__
  if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") ||
      getenv("MALLOC_TOP_PAD_") || getenv("GLIBC_TUNABLES"))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
#endif
}

void tpr_client_empty_cache(tpr_client_t* client) {
#ifdef __GLIBC__
  if (client->plugin->info.kind == TPR_PLUGIN_KIND_CPU) malloc_trim(0);
#else
  (void)client;
#endif
}

static bool contains(const char* hay, size_t n, const char* needle, size_t m) {
  for (const char* p = hay; m && (size_t)(hay + n - p) >= m;) {
    p = memchr(p, needle[0], (size_t)(hay + n - p) - m + 1);
    if (!p) return false;
    if (memcmp(p, needle, m) == 0) return true;
    p++;
  }
  return false;
}

// XLA reads XLA_FLAGS when a client is made and aborts the process on a
// flag it does not know. Flag names are string constants in the plugin's
// binary: a name that appears nowhere in it is refused here with a status
// instead. (A name that appears is left to XLA.)
static tpr_status_t check_xla_flags(const char* plugin_path) {
  const char* flags = getenv("XLA_FLAGS");
  if (!flags || !*flags) return tpr_ok_status();
  int fd = open(plugin_path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
    if (fd >= 0) close(fd);
    return tpr_ok_status();  // loading it worked; XLA will judge the flags
  }
  size_t size = (size_t)st.st_size;
  void* map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return tpr_ok_status();
  tpr_status_t s = tpr_ok_status();
  for (const char* p = flags; *p && tpr_status_is_ok(s);) {
    while (*p && isspace((unsigned char)*p)) p++;
    const char* token = p;
    while (*p && !isspace((unsigned char)*p)) p++;
    const char* name = token;
    while (name < p && *name == '-') name++;
    size_t n = 0;
    while (name + n < p && name[n] != '=') n++;
    if (n > 0 && !contains(map, size, name, n))
      s = TPR_ERR(INVALID_ARGUMENT,
                  "XLA_FLAGS names '%.*s', which the PJRT plugin '%s' does not know "
                  "(XLA would abort the process on it)", (int)(p - token), token, plugin_path);
  }
  munmap(map, size);
  return s;
}

tpr_status_t tpr_client_create(tpr_plugin_t* plugin,
                               const tpr_client_options_t* options,
                               tpr_client_t** out_client) {
  if (!out_client) return TPR_ERR(INVALID_ARGUMENT, "out_client is NULL");
  *out_client = NULL;
  if (!plugin) return TPR_ERR(INVALID_ARGUMENT, "plugin is NULL");
  tpr_client_options_t defaults;
  tpr_client_options_initialize(&defaults);
  if (!options) options = &defaults;
  if (options->cpu_device_count < 0)
    return TPR_ERR(INVALID_ARGUMENT, "cpu_device_count %lld < 0",
                   (long long)options->cpu_device_count);

  // Only options the plugin kind knows: the CPU plugin rejects unknown
  // names, and passes none by default. For CUDA we pass none either: XLA's
  // defaults (the BFC allocator preallocating 75% of GPU memory, as in JAX);
  // "preallocate" (kBool) exists in the GPU plugin if that must change.
  PJRT_NamedValue named[1];
  size_t num_named = 0;
  if (plugin->info.kind == TPR_PLUGIN_KIND_CPU &&
      options->cpu_device_count > 0) {
    static const char kName[] = "cpu_device_count";
    named[0] = (PJRT_NamedValue){.struct_size = sizeof(PJRT_NamedValue),
                                 .name = kName,
                                 .name_size = sizeof kName - 1,
                                 .type = PJRT_NamedValue_kInt64,
                                 .int64_value = options->cpu_device_count,
                                 .value_size = 1};
    num_named = 1;
  }

  TPR_RETURN_IF_ERROR(check_xla_flags(plugin->path));
  tpr_client_t* c = (tpr_client_t*)tpr_calloc(1, sizeof *c);
  if (!c) return TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  c->plugin = plugin;
  c->api = plugin->api;
  atomic_init(&c->plugin_memory_stats, 0);
  atomic_init(&c->host_pointer_reads,
              plugin->info.kind == TPR_PLUGIN_KIND_CPU &&
                  TPR_PJRT_HAS(plugin->api, Buffer_UnsafePointer));
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  c->host_memory_bytes =
      (pages > 0 && page_size > 0) ? (int64_t)pages * page_size : 0;
  int64_t cgroup_max = cgroup_value("memory.max");
  if (cgroup_max > 0 && (c->host_memory_bytes == 0 || cgroup_max < c->host_memory_bytes))
    c->host_memory_bytes = cgroup_max;

  PJRT_Client_Create_Args a = {.struct_size = sizeof a,
                               .create_options = num_named ? named : NULL,
                               .num_options = num_named};
  tpr_status_t s = tpr_pjrt_status(c->api, c->api->Client_Create(&a));
  if (tpr_status_is_ok(s)) {
    c->client = a.client;
    s = read_platform(c);
  }
  if (tpr_status_is_ok(s)) s = read_devices(c);
  if (tpr_status_is_ok(s) && !options->synchronous_launch) {
    c->launcher = tpr_launcher_create(c->api);
    if (!c->launcher) s = TPR_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  if (tpr_status_is_ok(s) && plugin->info.kind == TPR_PLUGIN_KIND_CPU &&
      !options->release_host_memory)
    keep_freed_host_memory();
  if (!tpr_status_is_ok(s)) {
    tpr_client_destroy(c);
    return tpr_status_annotate(s, "creating a client of PJRT plugin '%s'",
                               plugin->path);
  }
  *out_client = c;
  return tpr_ok_status();
}

void tpr_client_destroy(tpr_client_t* client) {
  if (!client) return;
  tpr_launcher_destroy(client->launcher);  // runs what is still queued
  if (client->devices) {
    for (int i = 0; i < client->num_devices; i++)
      tpr_free(client->devices[i].kind);
    tpr_free(client->devices);
  }
  if (client->client) {
    PJRT_Client_Destroy_Args d = {.struct_size = sizeof d,
                                  .client = client->client};
    tpr_status_free(tpr_pjrt_status(client->api, client->api->Client_Destroy(&d)));
  }
  tpr_free(client->platform_name);
  tpr_free(client->platform_version);
  tpr_free(client);
}

tpr_plugin_t* tpr_client_plugin(const tpr_client_t* client) {
  return client->plugin;
}
const char* tpr_client_platform_name(const tpr_client_t* client) {
  return client->platform_name;
}
const char* tpr_client_platform_version(const tpr_client_t* client) {
  return client->platform_version;
}
int tpr_client_device_count(const tpr_client_t* client) {
  return client->num_devices;
}
const char* tpr_client_device_kind(const tpr_client_t* client, int ordinal) {
  if (ordinal < 0 || ordinal >= client->num_devices) return NULL;
  return client->devices[ordinal].kind;
}
int64_t tpr_client_device_id(const tpr_client_t* client, int ordinal) {
  if (ordinal < 0 || ordinal >= client->num_devices) return -1;
  return client->devices[ordinal].id;
}

bool tpr_client_debug_set_host_pointer_reads(tpr_client_t* client, bool on) {
  bool allowed = client->plugin->info.kind == TPR_PLUGIN_KIND_CPU &&
                 TPR_PJRT_HAS(client->api, Buffer_UnsafePointer);
  return atomic_exchange(&client->host_pointer_reads, on && allowed);
}

//===--- memory accounting ------------------------------------------------===//

void tpr_client_account(tpr_client_t* client, int ordinal, int64_t bytes,
                        int sign) {
  tpr_device_slot_t* d = &client->devices[ordinal];
  atomic_fetch_add_explicit(&d->num_buffers, sign, memory_order_relaxed);
  long long now = atomic_fetch_add_explicit(&d->bytes_in_use, sign * bytes,
                                            memory_order_relaxed) +
                  sign * bytes;
  if (sign <= 0) return;
  long long peak = atomic_load_explicit(&d->peak_bytes_in_use,
                                        memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&d->peak_bytes_in_use, &peak,
                                                now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

// Asks the plugin; false when it has no figures (CPU: UNIMPLEMENTED).
static bool plugin_memory_stats(tpr_client_t* client, int ordinal,
                                tpr_memory_stats_t* out) {
  const PJRT_Api* api = client->api;
  if (atomic_load(&client->plugin_memory_stats) == 2 ||
      !TPR_PJRT_HAS(api, Device_MemoryStats))
    return false;
  PJRT_Device_MemoryStats_Args a = {.struct_size = sizeof a,
                                    .device = client->devices[ordinal].device};
  tpr_status_t s = tpr_pjrt_status(api, api->Device_MemoryStats(&a));
  if (!tpr_status_is_ok(s)) {
    tpr_status_free(s);
    atomic_store(&client->plugin_memory_stats, 2);  // don't ask again
    return false;
  }
  atomic_store(&client->plugin_memory_stats, 1);
  out->bytes_in_use = a.bytes_in_use;
  if (a.peak_bytes_in_use_is_set) out->peak_bytes_in_use = a.peak_bytes_in_use;
  if (a.bytes_limit_is_set) out->bytes_limit = a.bytes_limit;
  out->from_plugin = true;
  return true;
}

tpr_status_t tpr_client_memory_stats(tpr_client_t* client, int ordinal,
                                     tpr_memory_stats_t* out) {
  if (!client || !out) return TPR_ERR(INVALID_ARGUMENT, "NULL argument");
  if (ordinal < 0 || ordinal >= client->num_devices)
    return TPR_ERR(INVALID_ARGUMENT, "device ordinal %d out of range [0, %d)",
                   ordinal, client->num_devices);
  tpr_device_slot_t* d = &client->devices[ordinal];
  memset(out, 0, sizeof *out);
  out->bytes_in_use = atomic_load(&d->bytes_in_use);
  out->peak_bytes_in_use = atomic_load(&d->peak_bytes_in_use);
  out->num_buffers = atomic_load(&d->num_buffers);
  out->bytes_limit = client->plugin->info.kind == TPR_PLUGIN_KIND_CPU
                         ? client->host_memory_bytes
                         : 0;
  // Both CPU plugins answer UNIMPLEMENTED ("GetAllocatorStats is not
  // supported"), after which the client stops asking.
  plugin_memory_stats(client, ordinal, out);
  if (out->peak_bytes_in_use < out->bytes_in_use)
    out->peak_bytes_in_use = out->bytes_in_use;
  out->bytes_free = out->bytes_limit > out->bytes_in_use
                        ? out->bytes_limit - out->bytes_in_use : 0;
  if (client->plugin->info.kind == TPR_PLUGIN_KIND_CPU) {
    // Host memory is shared with this process and every other one: free is
    // what the host has left, not the limit less our own buffers (a serving
    // engine sizing its KV cache from that was OOM-killed).
    int64_t avail = host_available_bytes();
    if (avail >= 0 && avail < out->bytes_free) out->bytes_free = avail;
  }
  return tpr_ok_status();
}

void tpr_client_reset_peak_memory(tpr_client_t* client, int ordinal) {
  if (!client || ordinal < 0 || ordinal >= client->num_devices) return;
  tpr_device_slot_t* d = &client->devices[ordinal];
  atomic_store(&d->peak_bytes_in_use, atomic_load(&d->bytes_in_use));
  const PJRT_Api* api = client->api;
  if (atomic_load(&client->plugin_memory_stats) == 1 &&
      TPR_PJRT_HAS(api, Device_ClearMemoryStats)) {
    PJRT_Device_ClearMemoryStats_Args a = {.struct_size = sizeof a,
                                           .device = d->device};
    tpr_status_free(tpr_pjrt_status(api, api->Device_ClearMemoryStats(&a)));
  }
}
