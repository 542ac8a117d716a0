// The tpu DeviceAllocator. Device memory is a C storage (lazily
// materialised PJRT buffer); PyTorch sees an opaque token as data_ptr():
// a PROT_NONE reservation of the storage's size, so tokens are unique,
// non-null, never overlap while alive (libraries compare pointers and
// ranges to find tied weights), and any host dereference faults at once.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/TpuContext.h"
#include "core/TpuStatus.h"

namespace torch_tpu {
namespace {

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

void delete_handle(void* ctx) {
  auto* h = static_cast<StorageHandle*>(ctx);
  if (!h) return;
  munmap(h->token, h->span);
  tpr_storage_release(h->storage);
  delete h;
}

}  // namespace

c10::DataPtr wrap_storage(tpr_storage_t* storage, size_t nbytes,
                          c10::DeviceIndex device) {
  size_t span = ((nbytes + page_size() - 1) / page_size()) * page_size();
  if (span == 0) span = page_size();
  void* token = mmap(nullptr, span, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (token == MAP_FAILED) {
    tpr_storage_release(storage);
    TORCH_CHECK(false, "tpu: could not reserve ", span,
                " bytes of address space for a storage token");
  }
  auto* h = new StorageHandle{storage, token, span};
  return {token, h, &delete_handle,
          c10::Device(c10::DeviceType::PrivateUse1, device)};
}

void resize_storage_bytes(c10::StorageImpl* impl, size_t nbytes) {
  auto* h = static_cast<StorageHandle*>(impl->data_ptr().get_context());
  TORCH_CHECK(h && is_tpu_data_ptr(impl->data_ptr()),
              "expected a storage made by the tpu allocator");
  check(tpr_storage_resize(h->storage, nbytes));
  if (nbytes > h->span) {  // the token must cover the new size
    impl->set_data_ptr_noswap(wrap_storage(tpr_storage_retain(h->storage),
                                           nbytes, impl->device().index()));
  }
  impl->set_nbytes(nbytes);
}

namespace {

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    ensure_initialized();
    c10::DeviceIndex dev = current_device();
    tpr_storage_t* storage = nullptr;
    check(tpr_storage_create(dev, nbytes, &storage));
    return wrap_storage(storage, nbytes, dev);
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "tpu: raw byte copies between tpu storages are not "
                       "supported; use Tensor.copy_");
  }

  bool initialized() override { return is_initialized(); }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(
      c10::DeviceIndex device) override {
    c10::CachingDeviceAllocator::DeviceStats stats;
    if (!is_initialized()) return stats;
    tpr_memory_stats_t m;
    check(tpr_client_memory_stats(tpr_eager_client(), device, &m));
    auto& all = stats.allocated_bytes[static_cast<size_t>(
        c10::CachingAllocator::StatType::AGGREGATE)];
    all.current = m.bytes_in_use;
    all.peak = m.peak_bytes_in_use;
    stats.reserved_bytes[0] = all;
    stats.active_bytes[0] = all;
    auto& count = stats.allocation[0];
    count.current = m.num_buffers;
    return stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex device) override {
    if (is_initialized()) tpr_client_reset_peak_memory(tpr_eager_client(), device);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    ensure_initialized();
    tpr_memory_stats_t m;
    check(tpr_client_memory_stats(tpr_eager_client(), device, &m));
    size_t total = static_cast<size_t>(m.bytes_limit);
    size_t used = static_cast<size_t>(m.bytes_in_use);
    return {total > used ? total - used : 0, total};
  }
};

TpuAllocator allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

}  // namespace

c10::Allocator* tpu_allocator() { return &allocator; }

bool is_tpu_data_ptr(const c10::DataPtr& p) {
  return p.get_deleter() == &delete_handle;
}

}  // namespace torch_tpu
