// DeviceGuardImplInterface for tpu. PJRT orders work through buffer
// dependencies, so there is one stream per device (id 0); events mark a
// point on the host timeline and synchronizing one waits for the device.
// Device arguments (torch.accelerator's, torch.Stream's) name a device in
// [0, device_count()) or -1 for the current one; others raise IndexError.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>

#include "aten/ArgChecks.h"
#include "aten/TensorRef.h"
#include "core/TpuContext.h"
#include "core/TpuStatus.h"

namespace torch_tpu {
namespace {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

struct TpuEvent {
  bool recorded = false;
  double time_ms = 0;
  bool timing = false;
};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch())
      .count();
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kTpu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kTpu, current_device());
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kTpu, "expected a tpu device, got ", d);
    set_current_device(d.index() < 0 ? 0 : d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      setDevice(d);
    } catch (...) {
    }
  }
  // The one stream of the device |d| names.
  static c10::Stream stream_of(c10::Device d) {
    return c10::Stream(c10::Stream::DEFAULT,
                       c10::Device(kTpu, checked_device_index(d.index())));
  }
  c10::Stream getStream(c10::Device d) const override { return stream_of(d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return stream_of(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return stream_of(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return stream_of(d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return stream_of(s.device());
  }
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    checked_device_index(d.index());
    c10::DeviceCapability cap;  // the dtypes a tpu tensor can hold
    cap.capability_data.capability_bits = 0;
#define TPU_DTYPE_BIT(_, name)                                    \
    if (to_tpr_dtype(c10::ScalarType::name) != TPR_DTYPE_INVALID) \
      cap.capability_data.capability_bits |= 1ULL << c10::kIndex_##name;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TPU_DTYPE_BIT)
#undef TPU_DTYPE_BIT
    return cap;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex, const c10::EventFlag flag) const override {
    if (!*event) *event = new TpuEvent();
    auto* e = static_cast<TpuEvent*>(*event);
    e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
    if (e->timing && is_initialized())
      check(tpr_eager_synchronize(stream.device_index()));
    e->recorded = true;
    e->time_ms = now_ms();
  }
  void block(void*, const c10::Stream&) const override {
    // One stream per device: work is already ordered.
  }
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  void synchronizeEvent(void*) const override { synchronizeDevice(0); }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    auto* ea = static_cast<TpuEvent*>(a);
    auto* eb = static_cast<TpuEvent*>(b);
    TORCH_CHECK(ea && eb && ea->recorded && eb->recorded,
                "elapsed_time needs two recorded events");
    return eb->time_ms - ea->time_ms;
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& s) const override {
    synchronizeDevice(s.device_index());
  }
  void synchronizeDevice(c10::DeviceIndex index) const override {
    // Before first use the current device has nothing to wait for; any
    // other index is checked (which starts the runtime).
    if (!is_initialized() && (index == -1 || index == current_device())) return;
    index = checked_device_index(index);
    check(tpr_eager_synchronize(index));
    raise_failed_data_checks();
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace
}  // namespace torch_tpu
