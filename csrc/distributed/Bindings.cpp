// Python side of tpu_dist: the backend class c10d's factory returns, and
// its counters. torch_tpu/distributed.py registers it.
#include <pybind11/chrono.h>
#include <torch/extension.h>

#include "distributed/Bindings.h"
#include "distributed/ProcessGroupTpu.h"

namespace py = pybind11;

namespace torch_tpu {

void init_distributed_bindings(py::module& m) {
  // c10d's Backend must be known to pybind before a subclass is declared;
  // builds without distributed support have no tpu_dist.
  try {
    py::module::import("torch._C._distributed_c10d");
  } catch (const py::error_already_set&) {
    return;
  }
  py::class_<ProcessGroupTpu, c10d::Backend, c10::intrusive_ptr<ProcessGroupTpu>>(
      m, "ProcessGroupTpu",
      "The tpu_dist backend: collectives on tpu tensors over a host transport.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& host, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupTpu>(host, rank, size, timeout);
           }),
           py::arg("host"), py::arg("rank"), py::arg("size"), py::arg("timeout"))
      .def_property_readonly("host", &ProcessGroupTpu::host);
  m.def("_dist_stats", [] {
    auto& s = dist_stats();
    py::dict d;
    d["collectives"] = s.collectives.load();
    d["staged_bytes"] = s.staged_bytes.load();
    d["zero_copy_bytes"] = s.zero_copy_bytes.load();
    d["staging_seconds"] = s.staging_ns.load() * 1e-9;
    d["transport_seconds"] = s.transport_ns.load() * 1e-9;
    d["compute_wait_seconds"] = s.compute_wait_ns.load() * 1e-9;
    d["agreement_checks"] = s.checks.load();
    return d;
  });
  m.def("_reset_dist_stats", &reset_dist_stats);
}

}  // namespace torch_tpu
