#include "kernels/Kernel.h"

#include <ATen/ops/empty.h>
#include <torch/extension.h>

#include "aten/TensorRef.h"
#include "core/TpuStatus.h"

extern "C" {
#include "tpr/eager.h"
}

namespace py = pybind11;

namespace torch_tpu {
namespace {

std::vector<tpr_type_t> make_types(const std::vector<KernelTypeSpec>& specs, const std::string& name,
                                   const char* what) {
  std::vector<tpr_type_t> types;
  for (const auto& s : specs) {
    TORCH_CHECK_VALUE(s.second.size() <= TPR_MAX_RANK, "kernel ", name, ": ", what,
                      " of rank ", s.second.size(), " (at most ", TPR_MAX_RANK, ")");
    types.push_back(tpr_type_make(checked_dtype(s.first, name.c_str()),
                                  static_cast<int>(s.second.size()), s.second.data()));
  }
  return types;
}

std::string describe(c10::ScalarType dtype, c10::IntArrayRef shape) {
  std::string s = c10::toString(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Runs |kernel| on tpu tensors as one eager op: strict mode compiles and
// launches it (cached by graph hash), fused mode appends it to the pending
// graph, where it fuses with its neighbours.
// |aliases| (output, input) pairs write those outputs into their inputs
// instead of fresh tensors (the executor donates the input's old buffer when
// nothing else holds it), and return the inputs there.
std::vector<at::Tensor> run_kernel(const Kernel& kernel, const std::vector<at::Tensor>& inputs,
                                   const std::vector<std::pair<int, int>>& aliases) {
  const auto& name = kernel.name();
  TORCH_CHECK_VALUE(inputs.size() == kernel.inputs().size(), "kernel ", name, ": takes ",
                    kernel.inputs().size(), " tensors, got ", inputs.size());
  c10::Device device(c10::DeviceType::PrivateUse1, current_device());
  for (size_t i = 0; i < inputs.size(); i++) {
    const at::Tensor& t = inputs[i];
    const auto& want = kernel.inputs()[i];
    TORCH_CHECK_VALUE(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1,
                      "kernel ", name, ": input ", i, " must be a tpu tensor, got ",
                      t.defined() ? t.device().str() : std::string("None"));
    TORCH_CHECK_VALUE(t.scalar_type() == want.first && t.sizes().vec() == want.second,
                      "kernel ", name, ": input ", i, " is ",
                      describe(t.scalar_type(), t.sizes()), ", the kernel was traced for ",
                      describe(want.first, want.second));
    if (i == 0) device = t.device();
    TORCH_CHECK_VALUE(t.device() == device, "kernel ", name, ": inputs on ", device, " and ",
                      t.device());
  }
  std::vector<tpr_tensor_ref_t> refs(inputs.size());
  std::vector<tpr_eager_arg_t> args(inputs.size());
  for (size_t i = 0; i < inputs.size(); i++) {
    refs[i] = tensor_ref(inputs[i], name.c_str());
    std::memset(&args[i], 0, sizeof args[i]);
    args[i].arg.kind = TPR_ARG_TENSOR;
    args[i].tensor = &refs[i];
  }
  std::vector<at::Tensor> outs;
  std::vector<tpr_type_t> out_types;
  std::vector<tpr_tensor_ref_t> out_refs;
  outs.reserve(kernel.outputs().size());
  out_refs.reserve(kernel.outputs().size());
  std::vector<int> alias_of(kernel.outputs().size(), -1);
  for (const auto& a : aliases) {
    TORCH_CHECK_VALUE(a.first >= 0 && a.first < static_cast<int>(alias_of.size()) &&
                          a.second >= 0 && a.second < static_cast<int>(inputs.size()),
                      "kernel ", name, ": alias (", a.first, ", ", a.second, ") out of range");
    alias_of[a.first] = a.second;
  }
  for (size_t i = 0; i < kernel.outputs().size(); i++) {
    const auto& spec = kernel.outputs()[i];
    if (alias_of[i] >= 0) {
      const at::Tensor& t = inputs[alias_of[i]];
      TORCH_CHECK_VALUE(t.scalar_type() == spec.first && t.sizes().vec() == spec.second,
                        "kernel ", name, ": output ", i, " is ", describe(spec.first, spec.second),
                        " and cannot be written into input ", alias_of[i], " (",
                        describe(t.scalar_type(), t.sizes()), ")");
      outs.push_back(t);
    } else {
      outs.push_back(at::empty(spec.second, at::TensorOptions().dtype(spec.first).device(device)));
    }
    out_types.push_back(tensor_type(outs.back(), name.c_str()));
    out_refs.push_back(tensor_ref(outs.back(), name.c_str()));
  }
  std::vector<const tpr_tensor_ref_t*> targets;
  for (const auto& r : out_refs) targets.push_back(&r);
  tpr_eager_call_t call = {};
  call.op_name = name.c_str();
  call.device = device.index();
  call.args = args.data();
  call.num_args = static_cast<int32_t>(args.size());
  call.out_types = out_types.data();
  call.num_outs = static_cast<int32_t>(out_types.size());
  call.out_targets = targets.data();
  call.lower = tpr_lower_kernel_call;
  call.rule_data = kernel.get();
  {
    py::gil_scoped_release no_gil;
    check(tpr_eager_run(&call));
  }
  return outs;
}

}  // namespace

Kernel::Kernel(const std::string& name, const std::string& text, const std::string& entry,
               const std::vector<KernelTypeSpec>& inputs,
               const std::vector<KernelTypeSpec>& outputs)
    : name_(name), inputs_(inputs), outputs_(outputs) {
  std::vector<tpr_type_t> in = make_types(inputs, name, "input");
  std::vector<tpr_type_t> out = make_types(outputs, name, "output");
  check(tpr_kernel_create(name.c_str(), text.data(), text.size(),
                          entry.empty() ? nullptr : entry.c_str(), in.data(),
                          static_cast<int>(in.size()), out.data(),
                          static_cast<int>(out.size()), &k_));
}

void init_kernel_bindings(py::module& m) {
  py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel")
      .def(py::init<const std::string&, const std::string&, const std::string&,
                    const std::vector<KernelTypeSpec>&, const std::vector<KernelTypeSpec>&>(),
           py::arg("name"), py::arg("text"), py::arg("entry"), py::arg("inputs"),
           py::arg("outputs"))
      .def_property_readonly("name", &Kernel::name)
      .def_property_readonly("inputs", &Kernel::inputs)
      .def_property_readonly("outputs", &Kernel::outputs)
      .def_property_readonly("text", [](const Kernel& k) { return std::string(tpr_kernel_text(k.get())); })
      .def_property_readonly("entry", [](const Kernel& k) { return std::string(tpr_kernel_entry(k.get())); });
  m.def("_run_kernel", &run_kernel, py::arg("kernel"), py::arg("inputs"),
        py::arg("aliases") = std::vector<std::pair<int, int>>{});
}

}  // namespace torch_tpu
