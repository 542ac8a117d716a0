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

// Puts |host| (dense, |dst|'s dtype and sizes) into tpu tensor |dst|,
// lending its memory to the device where the device works in host memory
// (tpr_tensor_lend_host): on_done(ctx) runs exactly once, when |host|'s
// memory is the caller's again; until then it must be neither written nor
// freed. Throws as copy_ would.
// Waits until tpu tensor |t|'s value is computed (tpr_tensor_await).
void await_value(const at::Tensor& t);

// Tpu tensor |t|'s bytes in place as a read-only CPU tensor, where the
// device works in host memory and |t| is dense (tpr_tensor_host_view); it
// keeps them valid while it lives, and nothing may write |t| meanwhile.
// An undefined tensor where that is not possible (copy instead).
at::Tensor host_view(const at::Tensor& t);

void lend_host(const at::Tensor& dst, const at::Tensor& host, void (*on_done)(void*), void* ctx);

}  // namespace torch_tpu
