// Counters of the CPU fallback, per ATen op.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu {

std::map<std::string, int64_t> fallback_counts_snapshot();
void reset_fallback_counts();

}  // namespace torch_tpu
