// Counters of the CPU fallback, per ATen op.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu {

std::map<std::string, int64_t> fallback_counts_snapshot();
void reset_fallback_counts();

// torch.nonzero on tpu: reads the count back (a sync), then runs natively.
at::Tensor nonzero_sync(const at::Tensor& self);

}  // namespace torch_tpu
