// torch_tpu._C.Kernel: StableHLO written outside the lowering rules (a JAX
// function, a Pallas kernel, hand-written MLIR) as a callable on tpu
// tensors, in eager graphs and in compiled programs alike.
#pragma once

#include <c10/core/ScalarType.h>
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "tpr/graph.h"
}

namespace torch_tpu {

using KernelTypeSpec = std::pair<c10::ScalarType, std::vector<int64_t>>;

class Kernel {
 public:
  Kernel(const std::string& name, const std::string& text, const std::string& entry,
         const std::vector<KernelTypeSpec>& inputs, const std::vector<KernelTypeSpec>& outputs);
  ~Kernel() { tpr_kernel_release(k_); }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  tpr_kernel_t* get() const { return k_; }
  const std::string& name() const { return name_; }
  const std::vector<KernelTypeSpec>& inputs() const { return inputs_; }
  const std::vector<KernelTypeSpec>& outputs() const { return outputs_; }

 private:
  tpr_kernel_t* k_ = nullptr;
  std::string name_;
  std::vector<KernelTypeSpec> inputs_, outputs_;
};

void init_kernel_bindings(pybind11::module& m);

}  // namespace torch_tpu
