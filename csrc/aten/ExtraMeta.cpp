// Meta kernels PyTorch lacks for CPU/CUDA-only helper ops that tpu lowers
// natively (see compiler/lower/rules_scan.c, rules_more.c, rules_ctc.c). The boxed fallback needs a
// meta kernel to learn result types; without one these ops would always run
// on the CPU. cummax/cummin resize their outputs before calling the helper,
// so the helper's meta kernel has nothing to do.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

void cummaxmin_helper_meta(const at::Tensor&, at::Tensor&, at::Tensor&,
                           int64_t) {}

at::Tensor logcumsumexp_meta(const at::Tensor& self, int64_t dim) {
  (void)at::maybe_wrap_dim(dim, self.dim());  // IndexError for a bad dim, as on the CPU
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

// The margin losses' input gradients have the input's shape and dtype.
at::Tensor multi_margin_loss_backward_meta(const at::Tensor&, const at::Tensor& self,
                                           const at::Tensor&, const at::Scalar&,
                                           const at::Scalar&,
                                           const std::optional<at::Tensor>&, int64_t) {
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

at::Tensor multilabel_margin_loss_backward_meta(const at::Tensor&, const at::Tensor& self,
                                                const at::Tensor&, int64_t,
                                                const at::Tensor&) {
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

// CTC's gradient with respect to the log probabilities has their shape.
at::Tensor ctc_loss_backward_meta(const at::Tensor&, const at::Tensor& log_probs,
                                  const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                                  const at::Tensor&, const at::Tensor&, int64_t, bool) {
  return at::empty_like(log_probs, at::MemoryFormat::Contiguous);
}

// The fused optimizer steps write their arguments in place and return
// nothing; PyTorch's Python meta covers the float-lr overloads only.
void fused_adam_tensor_lr_meta(at::TensorList, at::TensorList, at::TensorList,
                               at::TensorList, at::TensorList, at::TensorList,
                               const at::Tensor&, double, double, double, double,
                               bool, bool, const std::optional<at::Tensor>&,
                               const std::optional<at::Tensor>&) {}

// PyTorch has no meta kernel for the fused SGD and Adagrad steps at all.
template <typename Lr>
void fused_sgd_meta(at::TensorList, at::TensorList, at::TensorList, double, double, Lr,
                    double, bool, bool, bool, const std::optional<at::Tensor>&,
                    const std::optional<at::Tensor>&) {}

template <typename Lr>
void fused_adagrad_meta(at::TensorList, at::TensorList, at::TensorList, at::TensorList, Lr,
                        double, double, double, bool, const std::optional<at::Tensor>&,
                        const std::optional<at::Tensor>&) {}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr_meta);
  m.impl("_fused_adamw_.tensor_lr", fused_adam_tensor_lr_meta);
  m.impl("_fused_sgd_", fused_sgd_meta<double>);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_meta<const at::Tensor&>);
  m.impl("_fused_adagrad_", fused_adagrad_meta<double>);
  m.impl("_fused_adagrad_.tensor_lr", fused_adagrad_meta<const at::Tensor&>);
  m.impl("multi_margin_loss_backward", multi_margin_loss_backward_meta);
  m.impl("multilabel_margin_loss_backward", multilabel_margin_loss_backward_meta);
  m.impl("_cummax_helper", cummaxmin_helper_meta);
  m.impl("_cummin_helper", cummaxmin_helper_meta);
  m.impl("_logcumsumexp", logcumsumexp_meta);
  m.impl("_ctc_loss_backward", ctc_loss_backward_meta);
}

}  // namespace
}  // namespace torch_tpu
