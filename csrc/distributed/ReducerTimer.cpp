// DDP's reducer times each iteration's forward, backward and communication
// (its logging data: avg_forward_compute_time and the rest) through a timer
// registered per device type; without one it warns and records nothing.
// Device work on tpu is queued, so like the CPU timer this one reads host
// time at each event.
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace torch_tpu {
namespace {

class TpuTimer : public c10d::Timer {
 public:
  explicit TpuTimer(c10::Device /*device*/) {}

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    int64_t a = getTimeRef(start), b = getTimeRef(end);
    // An event not recorded in this iteration (a no_sync step's
    // communication) leaves its end before its start.
    if (a == c10d::kUnsetTime || b == c10d::kUnsetTime || b < a) return std::nullopt;
    return b - a;
  }
};

}  // namespace
}  // namespace torch_tpu

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torch_tpu::TpuTimer)
}  // namespace c10d
