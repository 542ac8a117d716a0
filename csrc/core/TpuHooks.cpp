// PrivateUse1 hooks and the tpu random generators.
#include <ATen/Utils.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/util/CallOnce.h>

#include <deque>
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
                  new_state.device().type() == c10::DeviceType::CPU,
              "tpu RNG state must be a CPU uint8 tensor of 16 bytes "
              "(seed, offset), got ", new_state.numel(), " elements");
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

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::deque<at::Generator> gens;  // stable addresses
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0) device = current_device();
  while (static_cast<c10::DeviceIndex>(gens.size()) <= device)
    gens.emplace_back(at::make_generator<TpuGeneratorImpl>(
        static_cast<c10::DeviceIndex>(gens.size())));
  return gens[device];
}

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGeneratorImpl>(d < 0 ? current_device() : d);
  }
  at::Device getDeviceFromPtr(void*) const override {
    // Tokens do not encode a device; tensors carry theirs.
    return at::Device(c10::DeviceType::PrivateUse1, current_device());
  }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return at::getCPUAllocator();
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return is_initialized();
  }
  void init() const override { ensure_initialized(); }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    set_current_device(d);
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device();
    set_current_device(d);
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
  }
} register_hooks;

}  // namespace
}  // namespace torch_tpu
