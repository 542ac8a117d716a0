// The tpu random generator: a counter-based (seed, offset) pair. Each
// random op reads the state and advances the offset by the amount of
// counter space it used, so streams never overlap and get/set_rng_state
// reproduce sequences exactly.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_tpu {

class TpuGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit TpuGeneratorImpl(c10::DeviceIndex device, uint64_t seed = 67280421310721ull);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  // 16 bytes: seed then offset (int64 each), as DTensor expects.
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Returns (seed, offset) for a call and reserves |increment| counters.
  std::pair<uint64_t, uint64_t> reserve(uint64_t increment);

 private:
  TpuGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);

}  // namespace torch_tpu
