#include "core/TpuContext.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <unistd.h>

#include "core/TpuStatus.h"

namespace torch_tpu {

namespace {
std::mutex dirs_mutex;
std::vector<std::string> search_dirs;
thread_local c10::DeviceIndex current = 0;

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0;
}

// Where compiled executables persist: TORCH_TPU_CACHE_DIR (a path; "0" or
// empty: off), else TorchTPU's TORCH_TPU_TIER2_COMPILATION_CACHE (a name
// under /dev/shm/torch_tpu_cache-<uid>), else the user cache directory.
std::string cache_dir() {
  if (const char* d = std::getenv("TORCH_TPU_CACHE_DIR"))
    return std::strcmp(d, "0") == 0 ? std::string() : std::string(d);
  // Per user: /dev/shm is world-writable, and a shared folder there would
  // let one user hand another compiled code.
  if (const char* n = std::getenv("TORCH_TPU_TIER2_COMPILATION_CACHE"))
    return "/dev/shm/torch_tpu_cache-" + std::to_string(geteuid()) + "/" + n;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/torch_tpu";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/torch_tpu";
  return std::string();
}

tpr_status_t init_runtime() {
  std::vector<const char*> dirs;
  std::lock_guard<std::mutex> lock(dirs_mutex);
  for (const auto& d : search_dirs) dirs.push_back(d.c_str());
  tpr_eager_options_t o = {};
  o.plugin_spec = std::getenv("TORCH_TPU_PJRT_PLUGIN");
  o.search_dirs = dirs.data();
  o.num_search_dirs = dirs.size();
  // Under torchrun (one process per device) the CPU plugin presents one
  // device per local rank, so torch.tpu.set_device(LOCAL_RANK) selects a
  // real device as torch.cuda.set_device does; each process uses its own.
  const char* n = std::getenv("TORCH_TPU_CPU_DEVICE_COUNT");
  if (!n || !*n) n = std::getenv("LOCAL_WORLD_SIZE");
  o.cpu_device_count = n && std::atoll(n) > 0 ? std::atoll(n) : 1;
  o.launch_blocking =
      env_flag("TORCH_TPU_LAUNCH_BLOCKING") || env_flag("TPU_LAUNCH_BLOCKING");
  const char* thread = std::getenv("TORCH_TPU_LAUNCH_THREAD");
  o.synchronous_launch = thread && std::string(thread) == "0";
  const char* keep = std::getenv("TORCH_TPU_KEEP_HOST_MEMORY");
  o.release_host_memory = keep && std::string(keep) == "0";
  o.fused = env_flag("TORCH_TPU_DEFER_AND_FUSE") || env_flag("TPU_DEFER_AND_FUSE");
  const char* max_ops = std::getenv("TORCH_TPU_FUSE_MAX_OPS");
  o.fuse_max_ops = max_ops ? std::atoll(max_ops) : 0;
  const char* max_nodes = std::getenv("TORCH_TPU_MEMORY_CACHE_MAX_NODES");
  o.memory_cache_max_nodes = max_nodes ? std::atoll(max_nodes) : 0;
  std::string cache = cache_dir();
  o.cache_dir = cache.c_str();
  const char* max = std::getenv("TORCH_TPU_CACHE_MAX_BYTES");
  o.cache_max_bytes = max ? std::atoll(max) : 0;
  return tpr_eager_init(&o);
}
}  // namespace

std::atomic<int64_t> oom_count{0};

void throw_status(tpr_status_t s) {
  std::string msg = tpr_status_message(s);
  tpr_status_code_t code = tpr_status_code(s);
  tpr_status_free(s);
  switch (code) {
    case TPR_RESOURCE_EXHAUSTED:
      oom_count++;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu: ", msg);
    case TPR_INVALID_ARGUMENT:
      TORCH_CHECK_VALUE(false, msg);
    case TPR_OUT_OF_RANGE:
      TORCH_CHECK_INDEX(false, msg);
    case TPR_UNIMPLEMENTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    default:
      TORCH_CHECK(false, msg);
  }
}

void set_search_dirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(dirs_mutex);
  search_dirs = std::move(dirs);
}

namespace {
std::atomic<bool> in_use{false};
}  // namespace

void ensure_initialized() {
  if (tpr_eager_in_bad_fork()) check(tpr_eager_check_process());
  if (!tpr_eager_is_initialized()) {
    tpr_status_t s = init_runtime();
    if (!tpr_status_is_ok(s)) {
      std::string msg = tpr_status_message(s);
      tpr_status_free(s);
      TORCH_CHECK(false, "tpu device unavailable: ", msg);
    }
  }
  if (!in_use.load(std::memory_order_relaxed)) in_use.store(true, std::memory_order_relaxed);
}

bool device_in_use() { return in_use.load(std::memory_order_relaxed); }

bool try_initialize() {
  if (tpr_eager_is_initialized()) return true;
  tpr_status_free(init_runtime());
  return tpr_eager_is_initialized();
}

bool is_initialized() { return tpr_eager_is_initialized(); }

c10::DeviceIndex device_count() noexcept {
  if (!try_initialize()) return 0;
  return static_cast<c10::DeviceIndex>(
      tpr_client_device_count(tpr_eager_client()));
}

void check_device_index(c10::DeviceIndex index, const char* op) {
  ensure_initialized();
  auto n = device_count();
  if (index >= 0 && index < n) return;
  std::string have = n == 1 ? "only tpu:0" : "tpu:0 to tpu:" + std::to_string(n - 1);
  TORCH_CHECK_INDEX(false, op ? op : "", op ? ": " : "", "tpu device index ", (int)index,
                    " is out of range: torch.tpu.device_count() is ", (int)n, " (", have,
                    ")");
}

c10::DeviceIndex checked_device_index(c10::DeviceIndex index) {
  if (index == -1) return current;
  if (index < 0 || index >= device_count()) check_device_index(index);  // raises
  return index;
}

c10::DeviceIndex current_device() { return current; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  current = index;
}

tpr_storage_t* storage_of(const c10::Storage& storage) {
  TORCH_CHECK(is_tpu_data_ptr(storage.data_ptr()),
              "expected a storage made by the tpu allocator");
  auto* h = static_cast<StorageHandle*>(storage.data_ptr().get_context());
  return h->storage;
}

}  // namespace torch_tpu
