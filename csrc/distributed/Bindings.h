#pragma once

#include <pybind11/pybind11.h>

namespace torch_tpu {

// Adds ProcessGroupTpu and the distributed counters to torch_tpu._C.
void init_distributed_bindings(pybind11::module& m);

}  // namespace torch_tpu
