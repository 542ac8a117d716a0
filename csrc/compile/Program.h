// Python bindings of the compiled-graph builder (torch_tpu._C.Program).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu {

void init_program_bindings(pybind11::module& m);

}  // namespace torch_tpu
