#include "aten/TensorRef.h"

#include <c10/util/Exception.h>

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

}  // namespace torch_tpu
