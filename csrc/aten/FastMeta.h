// Result metadata of hot structured ops from ATen's C++ meta functions.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <optional>

namespace torch_tpu {

// PyTorch registers Python meta kernels over the C++ ones for many ops, and
// the first call of some of them imports torch._dynamo (about a second).
// For the ops every model starts with, ATen's structured C++ meta functions
// give the same result metadata without Python. |meta_args| are the call's
// arguments with tensors already replaced by meta twins (out= twins are
// resized in place). Returns nullopt for ops not covered here (the caller
// then runs PyTorch's meta kernel).
std::optional<torch::jit::Stack> fast_meta(const c10::FunctionSchema& schema,
                                           torch::jit::Stack& meta_args);

}  // namespace torch_tpu
