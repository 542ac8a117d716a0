// Meta kernels PyTorch lacks for CPU/CUDA-only helper ops that tpu lowers
// natively (see compiler/lower/rules_scan.c, rules_more.c, rules_ctc.c,
// rules_weight_norm_rnn_cells.c). The boxed fallback needs a
// meta kernel to learn result types; without one these ops would always run
// on the CPU. cummax/cummin resize their outputs before calling the helper,
// so the helper's meta kernel has nothing to do.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty.h>
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

// fractional_max_pool3d's input gradient has the input's shape (the 2-d
// one has a meta kernel in PyTorch, the 3-d one not).
at::Tensor fractional_max_pool3d_backward_meta(const at::Tensor&, const at::Tensor& self,
                                               at::IntArrayRef, at::IntArrayRef,
                                               const at::Tensor&) {
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

// The fused GRU cell (CUDA-only in PyTorch; nn.GRU and nn.GRUCell call it on
// every accelerator): hy like hx and a (B, 5H) workspace. Shapes are checked
// here, as the CUDA kernel checks them, so a bad call fails before lowering.
std::tuple<at::Tensor, at::Tensor> fused_gru_cell_meta(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(hx.dim() == 2, "_thnn_fused_gru_cell: hx must be (batch, hidden), got ", hx.sizes());
  const int64_t batch = hx.size(0), h = hx.size(1);
  for (const auto* g : {&input_gates, &hidden_gates})
    TORCH_CHECK(g->dim() == 2 && g->size(0) == batch && g->size(1) == 3 * h,
                "_thnn_fused_gru_cell: gates must be (", batch, ", ", 3 * h, "), got ", g->sizes());
  const bool ib = input_bias.has_value() && input_bias->defined();
  const bool hb = hidden_bias.has_value() && hidden_bias->defined();
  TORCH_CHECK(ib == hb, "_thnn_fused_gru_cell: both biases or neither");
  for (const auto* b : {&input_bias, &hidden_bias})
    if (ib)
      TORCH_CHECK((*b)->dim() == 1 && (*b)->size(0) == 3 * h,
                  "_thnn_fused_gru_cell: biases must be (", 3 * h, "), got ", (*b)->sizes());
  return {at::empty_like(hx, at::MemoryFormat::Contiguous),
          at::empty({batch, 5 * h}, input_gates.options())};
}

// Its backward: gate gradients (B, 3H), grad_hx (B, H), and bias gradients
// (3H) only with biases (undefined otherwise, as PyTorch returns them).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
fused_gru_cell_backward_meta(const at::Tensor& grad_hy, const at::Tensor& workspace,
                             bool has_bias) {
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 &&
                  workspace.size(0) == grad_hy.size(0) && workspace.size(1) == 5 * grad_hy.size(1),
              "_thnn_fused_gru_cell_backward: needs a (B, H) gradient and a (B, 5H) workspace, got ",
              grad_hy.sizes(), " and ", workspace.sizes());
  const int64_t batch = grad_hy.size(0), h = grad_hy.size(1);
  auto opts = grad_hy.options();
  at::Tensor gb = has_bias ? at::empty({3 * h}, opts) : at::Tensor();
  at::Tensor hb = has_bias ? at::empty({3 * h}, opts) : at::Tensor();
  return {at::empty({batch, 3 * h}, opts), at::empty({batch, 3 * h}, opts),
          at::empty({batch, h}, opts), gb, hb};
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
  m.impl("fractional_max_pool3d_backward", fractional_max_pool3d_backward_meta);
  m.impl("_thnn_fused_gru_cell", fused_gru_cell_meta);
  m.impl("_thnn_fused_gru_cell_backward", fused_gru_cell_backward_meta);
}

}  // namespace
}  // namespace torch_tpu
