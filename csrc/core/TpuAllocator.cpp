// The tpu DeviceAllocator. Device memory is a C storage (lazily
// materialised PJRT buffer); PyTorch sees an opaque token as data_ptr():
// a PROT_NONE reservation of the storage's size, so tokens are unique,
// non-null, never overlap while alive (libraries compare pointers and
// ranges to find tied weights), and any host dereference faults at once.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#include "core/TpuContext.h"
#include "core/TpuStatus.h"

namespace torch_tpu {
namespace {

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Address space for tokens. A token's span is its byte size rounded up to a
// power-of-two number of pages; spans come from large PROT_NONE reservations
// and return to a per-size free list when their storage dies, so the hot
// path makes no system call. Spans above kMaxPooled are mapped one by one.
class TokenSpace {
 public:
  std::pair<void*, size_t> acquire(size_t nbytes) {
    size_t span = page_size();
    while (span < nbytes) span <<= 1;
    if (span > kMaxPooled) return {map(span), span};
    std::lock_guard<std::mutex> lock(mu_);
    auto& fl = free_[class_of(span)];
    if (!fl.empty()) {
      void* t = fl.back();
      fl.pop_back();
      return {t, span};
    }
    if (next_ + span > end_) {  // a new reservation; the old tail is dropped
      next_ = static_cast<char*>(map(kRegion));
      end_ = next_ + kRegion;
    }
    void* t = next_;
    next_ += span;
    return {t, span};
  }

  void release(void* token, size_t span) {
    if (span > kMaxPooled) {
      munmap(token, span);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    free_[class_of(span)].push_back(token);
  }

 private:
  static constexpr size_t kRegion = size_t{1} << 40;     // 1 TiB of addresses
  static constexpr size_t kMaxPooled = size_t{1} << 32;  // 4 GiB
  static void* map(size_t n) {
    void* p = mmap(nullptr, n, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    TORCH_CHECK(p != MAP_FAILED, "tpu: could not reserve ", n,
                " bytes of address space for storage tokens");
    return p;
  }
  static int class_of(size_t span) { return __builtin_ctzll(span); }
  std::mutex mu_;
  std::vector<void*> free_[64];
  char* next_ = nullptr;
  char* end_ = nullptr;
};

TokenSpace& tokens() {
  static TokenSpace* t = new TokenSpace();  // outlives every storage
  return *t;
}

void delete_handle(void* ctx) {
  auto* h = static_cast<StorageHandle*>(ctx);
  if (!h) return;
  tokens().release(h->token, h->span);
  tpr_storage_release(h->storage);
  delete h;
}

}  // namespace

c10::DataPtr wrap_storage(tpr_storage_t* storage, size_t nbytes,
                          c10::DeviceIndex device) {
  std::pair<void*, size_t> t;
  try {
    t = tokens().acquire(nbytes);
  } catch (...) {
    tpr_storage_release(storage);
    throw;
  }
  auto* h = new StorageHandle{storage, t.first, t.second};
  return {t.first, h, &delete_handle,
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
  void emptyCache(c10::MempoolId_t) override {
    if (is_initialized()) tpr_client_empty_cache(tpr_eager_client());
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  // Device arguments come from torch.accelerator.memory: -1 is the current
  // device, an index past device_count() raises IndexError naming it.
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(
      c10::DeviceIndex device) override {
    c10::CachingDeviceAllocator::DeviceStats stats;
    if (!is_initialized()) return stats;
    device = checked_device_index(device);
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

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    if (is_initialized()) checked_device_index(device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    if (!is_initialized()) return;
    tpr_client_reset_peak_memory(tpr_eager_client(), checked_device_index(device));
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    ensure_initialized();
    device = checked_device_index(device);
    tpr_memory_stats_t m;
    check(tpr_client_memory_stats(tpr_eager_client(), device, &m));
    return {static_cast<size_t>(m.bytes_free), static_cast<size_t>(m.bytes_limit)};
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
