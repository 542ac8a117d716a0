#include "aten/TensorRef.h"

#include <ATen/ATen.h>

#include <c10/util/Exception.h>

#include "core/TpuStatus.h"

namespace torch_tpu {

tpr_dtype_t to_tpr_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: return TPR_DTYPE_BOOL;
    case c10::kChar: return TPR_DTYPE_S8;
    case c10::kShort: return TPR_DTYPE_S16;
    case c10::kInt: return TPR_DTYPE_S32;
    case c10::kLong: return TPR_DTYPE_S64;
    case c10::kByte: return TPR_DTYPE_U8;
    case c10::kUInt16: return TPR_DTYPE_U16;
    case c10::kUInt32: return TPR_DTYPE_U32;
    case c10::kUInt64: return TPR_DTYPE_U64;
    case c10::kHalf: return TPR_DTYPE_F16;
    case c10::kFloat: return TPR_DTYPE_F32;
    case c10::kDouble: return TPR_DTYPE_F64;
    case c10::kBFloat16: return TPR_DTYPE_BF16;
    case c10::kComplexFloat: return TPR_DTYPE_C64;
    case c10::kComplexDouble: return TPR_DTYPE_C128;
    case c10::kFloat8_e5m2: return TPR_DTYPE_F8E5M2;
    case c10::kFloat8_e4m3fn: return TPR_DTYPE_F8E4M3FN;
    default: return TPR_DTYPE_INVALID;
  }
}

tpr_dtype_t checked_dtype(c10::ScalarType t, const char* op) {
  tpr_dtype_t d = to_tpr_dtype(t);
  TORCH_CHECK_TYPE(d != TPR_DTYPE_INVALID, op, ": dtype ", t,
                   " is not supported on tpu");
  return d;
}

tpr_tensor_ref_t tensor_ref(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, op,
              ": expected a tpu tensor, got one on ", t.device());
  TORCH_CHECK(t.dim() <= TPR_MAX_RANK, op, ": tensors of rank ", t.dim(),
              " are not supported on tpu (max ", TPR_MAX_RANK, ")");
  tpr_tensor_ref_t r = {};
  r.storage = storage_of(t.storage());
  r.dtype = checked_dtype(t.scalar_type(), op);
  r.rank = static_cast<int32_t>(t.dim());
  for (int i = 0; i < r.rank; i++) {
    r.sizes[i] = t.size(i);
    r.strides[i] = t.stride(i);
  }
  r.offset = t.storage_offset();
  return r;
}

tpr_type_t tensor_type(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.dim() <= TPR_MAX_RANK, op, ": tensors of rank ", t.dim(),
              " are not supported on tpu (max ", TPR_MAX_RANK, ")");
  return tpr_type_make(checked_dtype(t.scalar_type(), op),
                       static_cast<int>(t.dim()), t.sizes().data());
}

void await_value(const at::Tensor& t) {
  if (t.numel() == 0) return;
  tpr_tensor_ref_t r = tensor_ref(t, "copy_");
  check(tpr_tensor_await(&r));
}

at::Tensor host_view(const at::Tensor& t) {
  if (t.is_conj() || t.is_neg() || t.numel() == 0) return at::Tensor();
  tpr_tensor_ref_t r = tensor_ref(t, "copy_");
  const void* data = nullptr;
  tpr_buffer_t* hold = nullptr;
  check(tpr_tensor_host_view(&r, &data, &hold));
  if (!data) return at::Tensor();
  return at::from_blob(
      const_cast<void*>(data), t.sizes(), t.strides(),
      [hold](void*) { tpr_buffer_release(hold); }, t.options().device(at::kCPU));
}

void lend_host(const at::Tensor& dst, const at::Tensor& host, void (*on_done)(void*), void* ctx) {
  tpr_tensor_ref_t r;
  try {
    TORCH_CHECK(host.is_cpu() && host.is_contiguous() && host.scalar_type() == dst.scalar_type() &&
                    host.sizes() == dst.sizes() && !dst.is_conj() && !dst.is_neg(),
                "lend_host: host data must be dense and match the tpu tensor");
    r = tensor_ref(dst, "copy_");
  } catch (...) {
    on_done(ctx);
    throw;
  }
  check(tpr_tensor_lend_host(&r, host.data_ptr(), host.nbytes(), on_done, ctx));
}

}  // namespace torch_tpu
