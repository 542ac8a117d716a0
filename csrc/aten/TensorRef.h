// Unpacking ATen tensors into the C core's descriptors.
#pragma once

#include <ATen/Tensor.h>

#include "core/TpuContext.h"

namespace torch_tpu {

// The C dtype for |t|, or TPR_DTYPE_INVALID when the device has none.
tpr_dtype_t to_tpr_dtype(c10::ScalarType t);
// Throws a TypeError naming |op| when the dtype is unsupported.
tpr_dtype_t checked_dtype(c10::ScalarType t, const char* op);

// Describes a tpu tensor's window into its storage.
tpr_tensor_ref_t tensor_ref(const at::Tensor& t, const char* op);

tpr_type_t tensor_type(const at::Tensor& t, const char* op);

}  // namespace torch_tpu
