// PrivateUse1 hooks and the tpu random generators.
#include <ATen/Utils.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/util/CallOnce.h>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <random>

#include "core/TpuContext.h"
#include "core/TpuGenerator.h"
#include "core/TpuStatus.h"

namespace torch_tpu {

TpuGeneratorImpl::TpuGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void TpuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGeneratorImpl::seed() {
  uint64_t s = (static_cast<uint64_t>(std::random_device()()) << 32) ^
               std::random_device()();
  set_current_seed(s);
  return s;
}

void TpuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                  new_state.numel() == 16 &&
                  new_state.device().type() == c10::DeviceType::CPU &&
                  new_state.layout() == c10::kStrided && new_state.is_contiguous(),
              "tpu RNG state must be a contiguous CPU uint8 tensor of 16 bytes "
              "(seed, offset), got ", new_state.numel(), " elements of ",
              new_state.dtype(), " on ", new_state.device());
  const auto* p = static_cast<const uint64_t*>(new_state.data());
  seed_ = p[0];
  offset_ = p[1];
}

c10::intrusive_ptr<c10::TensorImpl> TpuGeneratorImpl::get_state() const {
  auto state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  auto* p = static_cast<uint64_t*>(state.data_ptr());
  p[0] = seed_;
  p[1] = offset_;
  return state.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> TpuGeneratorImpl::reserve(uint64_t increment) {
  auto r = std::make_pair(seed_, offset_);
  offset_ += increment;
  return r;
}

TpuGeneratorImpl* TpuGeneratorImpl::clone_impl() const {
  auto* g = new TpuGeneratorImpl(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

namespace {
// The device a generator is for: -1 is the current one. Device 0 has one
// without starting the runtime, even where no plugin loads (torch.manual_seed
// seeds it); another index must name a device.
c10::DeviceIndex generator_device(c10::DeviceIndex device) {
  if (device == -1) return current_device();
  if (device != 0 && (device < 0 || device >= device_count()))
    check_device_index(device);  // raises, naming the device
  return device;
}
}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::deque<at::Generator> gens;  // stable addresses
  device = generator_device(device);
  std::lock_guard<std::mutex> lock(mu);
  while (static_cast<c10::DeviceIndex>(gens.size()) <= device)
    gens.emplace_back(at::make_generator<TpuGeneratorImpl>(
        static_cast<c10::DeviceIndex>(gens.size())));
  return gens[device];
}

namespace {

// Page-locked host memory, as tensor.pin_memory() and DDP's reducer ask for:
// host memory the device reads and writes directly (on the CPU plugin any
// host memory is). Allocations are recorded so is_pinned() can answer for
// any address inside one, as PyTorch asks it of views. It is also the tpu's
// host allocator (torch.accelerator.empty_host_cache() and Graph capture
// reach it): it caches nothing, so emptying its cache has nothing to do.
class PinnedAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t n) override {
    void* p = c10::alloc_cpu(n ? n : 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[reinterpret_cast<uintptr_t>(p)] = n;
      stats_.active_requests.increase(1);
      stats_.allocations.increase(1);
      stats_.active_bytes.increase(n);
      stats_.allocated_bytes.increase(n);
      stats_.num_host_alloc++;
    }
    return {p, p, &PinnedAllocator::release, at::Device(at::kCPU)};
  }
  // Work on the device reads pinned memory in issue order: nothing to track.
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* s : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                    &stats_.allocated_bytes})
      s->reset_accumulated();
    stats_.num_host_alloc = stats_.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* s : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                    &stats_.allocated_bytes})
      s->reset_peak();
  }
  at::DeleterFnPtr raw_deleter() const override { return &PinnedAllocator::release; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    default_copy_data(dst, src, n);
  }
  bool contains(const void* ptr) {
    auto a = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    return a < it->first + std::max<size_t>(it->second, 1);
  }
  static PinnedAllocator& get() {
    static PinnedAllocator* a = new PinnedAllocator();  // outlives every tensor
    return *a;
  }

 private:
  static void release(void* p) {
    auto& a = get();
    {
      std::lock_guard<std::mutex> lock(a.mu_);
      auto it = a.live_.find(reinterpret_cast<uintptr_t>(p));
      if (it != a.live_.end()) {
        a.stats_.active_requests.decrease(1);
        a.stats_.allocations.decrease(1);
        a.stats_.active_bytes.decrease(it->second);
        a.stats_.allocated_bytes.decrease(it->second);
        a.stats_.num_host_free++;
        a.live_.erase(it);
      }
    }
    c10::free_cpu(p);
  }
  std::mutex mu_;
  std::map<uintptr_t, size_t> live_;
  at::HostStats stats_;
};

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGeneratorImpl>(generator_device(d));
  }
  at::Device getDeviceFromPtr(void*) const override {
    // Tokens do not encode a device; tensors carry theirs.
    return at::Device(c10::DeviceType::PrivateUse1, current_device());
  }
  bool isPinnedPtr(const void* p) const override { return PinnedAllocator::get().contains(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &PinnedAllocator::get(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return is_initialized();
  }
  void init() const override { ensure_initialized(); }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    set_current_device(d);
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  // -1 (torch.accelerator.device_index's "no index") changes nothing.
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device();
    if (d != -1 && d != old) set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

struct RegisterHooks {
  RegisterHooks() {
    static TpuHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
    at::setHostAllocator(c10::DeviceType::PrivateUse1, &PinnedAllocator::get());
  }
} register_hooks;

}  // namespace
}  // namespace torch_tpu
