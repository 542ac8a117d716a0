// Element types, numbered as PJRT_Buffer_Type.
#include "tpr/base.h"

typedef struct dtype_info {
  unsigned char size;
  const char* mlir;
  const char* name;
} dtype_info_t;

static const dtype_info_t kDtypes[TPR_DTYPE_COUNT_] = {
    [TPR_DTYPE_INVALID] = {0, NULL, "invalid"},
    [TPR_DTYPE_BOOL] = {1, "i1", "bool"},
    [TPR_DTYPE_S8] = {1, "i8", "s8"},
    [TPR_DTYPE_S16] = {2, "i16", "s16"},
    [TPR_DTYPE_S32] = {4, "i32", "s32"},
    [TPR_DTYPE_S64] = {8, "i64", "s64"},
    [TPR_DTYPE_U8] = {1, "ui8", "u8"},
    [TPR_DTYPE_U16] = {2, "ui16", "u16"},
    [TPR_DTYPE_U32] = {4, "ui32", "u32"},
    [TPR_DTYPE_U64] = {8, "ui64", "u64"},
    [TPR_DTYPE_F16] = {2, "f16", "f16"},
    [TPR_DTYPE_F32] = {4, "f32", "f32"},
    [TPR_DTYPE_F64] = {8, "f64", "f64"},
    [TPR_DTYPE_BF16] = {2, "bf16", "bf16"},
    [TPR_DTYPE_C64] = {8, "complex<f32>", "c64"},
    [TPR_DTYPE_C128] = {16, "complex<f64>", "c128"},
    [TPR_DTYPE_F8E5M2] = {1, "f8E5M2", "f8e5m2"},
    [TPR_DTYPE_F8E4M3FN] = {1, "f8E4M3FN", "f8e4m3fn"},
};

bool tpr_dtype_is_valid(tpr_dtype_t d) {
  return d > TPR_DTYPE_INVALID && d < TPR_DTYPE_COUNT_;
}
size_t tpr_dtype_size(tpr_dtype_t d) {
  return tpr_dtype_is_valid(d) ? kDtypes[d].size : 0;
}
const char* tpr_dtype_mlir_name(tpr_dtype_t d) {
  return tpr_dtype_is_valid(d) ? kDtypes[d].mlir : NULL;
}
const char* tpr_dtype_name(tpr_dtype_t d) {
  return tpr_dtype_is_valid(d) ? kDtypes[d].name : "invalid";
}
bool tpr_dtype_is_float(tpr_dtype_t d) {
  return d == TPR_DTYPE_F16 || d == TPR_DTYPE_F32 || d == TPR_DTYPE_F64 ||
         d == TPR_DTYPE_BF16 || d == TPR_DTYPE_F8E5M2 ||
         d == TPR_DTYPE_F8E4M3FN;
}
bool tpr_dtype_is_complex(tpr_dtype_t d) {
  return d == TPR_DTYPE_C64 || d == TPR_DTYPE_C128;
}
bool tpr_dtype_is_signed_int(tpr_dtype_t d) {
  return d >= TPR_DTYPE_S8 && d <= TPR_DTYPE_S64;
}
bool tpr_dtype_is_unsigned_int(tpr_dtype_t d) {
  return d >= TPR_DTYPE_U8 && d <= TPR_DTYPE_U64;
}
