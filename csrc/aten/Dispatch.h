// Counters of the CPU fallback, per ATen op.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu {

std::map<std::string, int64_t> fallback_counts_snapshot();
void reset_fallback_counts();

// Entries in the cache of meta-kernel results (bounded; tests watch it).
size_t meta_cache_entries();

// A fresh tpu tensor of |sizes|/|strides| on |device|: empty_strided
// without the dispatcher round trip, for results the eager path allocates.
at::Tensor empty_strided_tpu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                             c10::ScalarType dtype, c10::Device device);

// torch.nonzero on tpu: reads the count back (a sync), then runs natively.
at::Tensor nonzero_sync(const at::Tensor& self);

}  // namespace torch_tpu
