// Process-wide device state for the PyTorch glue: lazy runtime init,
// the current device, and the handle a storage's DataPtr carries.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Storage.h>

#include <atomic>
#include <string>
#include <vector>

extern "C" {
#include "tpr/eager.h"
}

namespace torch_tpu {

// Where Python found site-packages; set at import, read at first use.
void set_search_dirs(std::vector<std::string> dirs);

// Loads the plugin and creates the client on first call; throws a
// RuntimeError naming what to install when that fails.
void ensure_initialized();
// Like ensure_initialized, but returns false instead of throwing.
bool try_initialize();
// Whether the runtime is up (counting devices starts it too).
bool is_initialized();
// torch.tpu.is_initialized(), as torch.cuda's: whether the device has been
// used (a tensor, set_device, init()), not merely counted; DeviceMesh sets
// the device of LOCAL_RANK only while this is false.
bool device_in_use();

// Device out-of-memory errors raised so far (memory_stats' num_ooms).
extern std::atomic<int64_t> oom_count;

// 0 when the runtime cannot start.
c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
// Throws for an index outside [0, device_count()).
void check_device_index(c10::DeviceIndex index, const char* op = nullptr);
// The device a device argument from PyTorch names: -1 (no index) is the
// current device; any other index must be in [0, device_count()), else it
// raises as check_device_index does.
c10::DeviceIndex checked_device_index(c10::DeviceIndex index);

// What a tpu storage's DataPtr context points to. |token| is the opaque,
// unique, non-dereferenceable address PyTorch sees as data_ptr().
struct StorageHandle {
  tpr_storage_t* storage;
  void* token;
  size_t span;
};

// A DataPtr owning |storage| (takes its reference) with a fresh token.
c10::DataPtr wrap_storage(tpr_storage_t* storage, size_t nbytes,
                          c10::DeviceIndex device);
// Resizes a tpu storage, keeping its contents (resize_ / resizeBytes).
void resize_storage_bytes(c10::StorageImpl* impl, size_t nbytes);
c10::Allocator* tpu_allocator();

// True for DataPtrs made by the tpu allocator.
bool is_tpu_data_ptr(const c10::DataPtr& p);

// The C storage behind a tpu storage (borrowed).
tpr_storage_t* storage_of(const c10::Storage& storage);

}  // namespace torch_tpu
