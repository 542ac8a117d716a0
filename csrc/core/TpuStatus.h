// The one place where a C status becomes a PyTorch exception.
#pragma once

#include <c10/util/Exception.h>

#include <string>

extern "C" {
#include "tpr/base.h"
}

namespace torch_tpu {

// Throws the exception PyTorch users expect for |s| (consuming it):
// RESOURCE_EXHAUSTED -> torch.OutOfMemoryError, INVALID_ARGUMENT ->
// ValueError, OUT_OF_RANGE -> IndexError, UNIMPLEMENTED ->
// NotImplementedError, everything else RuntimeError.
[[noreturn]] void throw_status(tpr_status_t s);

inline void check(tpr_status_t s) {
  if (!tpr_status_is_ok(s)) throw_status(s);
}

}  // namespace torch_tpu
