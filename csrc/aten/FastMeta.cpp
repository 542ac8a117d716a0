#include "aten/FastMeta.h"

#include <ATen/ops/_log_softmax_backward_data_meta_dispatch.h>
#include <ATen/ops/_log_softmax_meta_dispatch.h>
#include <ATen/ops/_softmax_backward_data_meta_dispatch.h>
#include <ATen/ops/_softmax_meta_dispatch.h>
#include <ATen/ops/add_meta_dispatch.h>
#include <ATen/ops/addcmul_meta_dispatch.h>
#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/all_meta_dispatch.h>
#include <ATen/ops/amax_meta_dispatch.h>
#include <ATen/ops/any_meta_dispatch.h>
#include <ATen/ops/baddbmm_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/cat_meta_dispatch.h>
#include <ATen/ops/clamp_meta_dispatch.h>
#include <ATen/ops/clamp_min_meta_dispatch.h>
#include <ATen/ops/cumsum_meta_dispatch.h>
#include <ATen/ops/div_meta_dispatch.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/eq_meta_dispatch.h>
#include <ATen/ops/exp_meta_dispatch.h>
#include <ATen/ops/floor_meta_dispatch.h>
#include <ATen/ops/ge_meta_dispatch.h>
#include <ATen/ops/gelu_backward_meta_dispatch.h>
#include <ATen/ops/gelu_meta_dispatch.h>
#include <ATen/ops/gt_meta_dispatch.h>
#include <ATen/ops/le_meta_dispatch.h>
#include <ATen/ops/lerp_meta_dispatch.h>
#include <ATen/ops/linalg_vector_norm_meta_dispatch.h>
#include <ATen/ops/log_meta_dispatch.h>
#include <ATen/ops/lt_meta_dispatch.h>
#include <ATen/ops/maximum_meta_dispatch.h>
#include <ATen/ops/mean_meta_dispatch.h>
#include <ATen/ops/minimum_meta_dispatch.h>
#include <ATen/ops/mm_meta_dispatch.h>
#include <ATen/ops/mul_meta_dispatch.h>
#include <ATen/ops/ne_meta_dispatch.h>
#include <ATen/ops/neg_meta_dispatch.h>
#include <ATen/ops/nll_loss_backward_meta_dispatch.h>
#include <ATen/ops/nll_loss_forward_meta_dispatch.h>
#include <ATen/ops/pow_meta_dispatch.h>
#include <ATen/ops/reciprocal_meta_dispatch.h>
#include <ATen/ops/round_meta_dispatch.h>
#include <ATen/ops/rsqrt_meta_dispatch.h>
#include <ATen/ops/sigmoid_meta_dispatch.h>
#include <ATen/ops/sign_meta_dispatch.h>
#include <ATen/ops/silu_backward_meta_dispatch.h>
#include <ATen/ops/silu_meta_dispatch.h>
#include <ATen/ops/sort_meta_dispatch.h>
#include <ATen/ops/sqrt_meta_dispatch.h>
#include <ATen/ops/sub_meta_dispatch.h>
#include <ATen/ops/sum_meta_dispatch.h>
#include <ATen/ops/tanh_meta_dispatch.h>
#include <ATen/ops/threshold_backward_meta_dispatch.h>
#include <ATen/ops/tril_meta_dispatch.h>
#include <ATen/ops/triu_meta_dispatch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>

namespace torch_tpu {
namespace {

using Stack = torch::jit::Stack;
using Fn = std::function<Stack(Stack&)>;

const at::Tensor& T(const Stack& a, size_t i) { return a[i].toTensor(); }
// An out argument: resized in place by the meta function.
at::Tensor& M(Stack& a, size_t i) { return const_cast<at::Tensor&>(a[i].toTensor()); }
// An int[]? argument, viewed over |keep| (which must outlive the view).
at::OptionalIntArrayRef Dims(const Stack& a, size_t i, std::vector<int64_t>& keep) {
  if (a[i].isNone()) return std::nullopt;
  keep = a[i].toIntVector();
  return at::OptionalIntArrayRef(keep);
}
bool floating(const at::Tensor& t) { return at::isFloatingType(t.scalar_type()); }
// A meta tensor shaped like meta tensor |t|: contiguous, or with |t|'s
// strides where they are dense (empty_like's default). (at::empty_like on
// a meta tensor runs PyTorch's Python meta kernel.)
at::Tensor like(const at::Tensor& t, bool keep_strides,
                std::optional<at::ScalarType> dtype = std::nullopt) {
  auto opts = t.options().dtype(dtype.value_or(t.scalar_type()));
  if (keep_strides && t.is_non_overlapping_and_dense())
    return at::empty_strided(t.sizes(), t.strides(), opts);
  return at::empty(t.sizes(), opts);
}
// The widest range uniform_ accepts for a dtype (PyTorch rejects wider).
double max_of(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return 65504.0;
    case at::kBFloat16:
    case at::kFloat: return 3.4028234663852886e38;
    default: return std::numeric_limits<double>::max();
  }
}
// multinomial's argument checks, in the CPU's order and words (PyTorch's
// Python meta kernel makes few of them); the samples are int64, one row of
// |n| per distribution. With |out|, it is resized to them.
at::Tensor multinomial_meta(const at::Tensor& self, int64_t n, bool replacement,
                            at::Tensor* out) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(floating(self), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(!out || out->scalar_type() == at::kLong,
              "multinomial expects Long tensor out, got: ", out->scalar_type());
  TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  TORCH_CHECK(replacement || n <= self.size(-1),
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  // Category indices are drawn through float32, exact up to 2^24.
  TORCH_CHECK(self.size(-1) <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  std::vector<int64_t> shape = self.sizes().vec();
  shape.back() = n;
  if (!out) return at::empty(shape, self.options().dtype(at::kLong));
  out->resize_(shape);
  return *out;
}
std::optional<at::Tensor> OptT(const Stack& a, size_t i) {
  return a[i].isNone() ? std::nullopt : std::optional<at::Tensor>(a[i].toTensor());
}
// NLL losses' class weights must have the input's dtype: the CPU and CUDA
// kernels say so (with an empty input too); PyTorch's meta kernels do not check.
void check_nll_weight(const Stack& a, size_t self, size_t weight) {
  if (a[weight].isNone() || !T(a, weight).defined()) return;
  const auto want = T(a, self).scalar_type(), got = T(a, weight).scalar_type();
  TORCH_CHECK(want == got, "expected scalar type ", want, " but found ", got);
}

// where's result, laid out by a TensorIterator over the meta twins as the
// CPU kernel lays it out. Declined (PyTorch's meta decides) unless the
// condition is bool and self, other and out share one dtype: promotion and
// its errors stay PyTorch's.
Stack where_meta(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other,
                 const at::Tensor& out) {
  for (const at::Tensor* t : {&cond, &self, &other, &out})
    if (!t->is_meta()) return {};
  if (cond.scalar_type() != at::kBool || self.scalar_type() != other.scalar_type() ||
      out.scalar_type() != self.scalar_type())
    return {};
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(cond)
                  .add_const_input(self)
                  .add_const_input(other)
                  .build();
  return {iter.output()};
}
// var's result: the reduced shape, contiguous, of the input's real dtype,
// after the CPU kernel's checks in its words. An out of another dtype is
// declined, so that error stays PyTorch's.
Stack var_meta(const at::Tensor& self, const c10::IValue& dim, bool keepdim, at::Tensor* out) {
  if (!self.is_meta()) return {};
  TORCH_CHECK(floating(self) || self.is_complex(),
              "std and var only support floating point and complex dtypes");
  const int64_t n = self.dim();
  const std::vector<int64_t> dims = dim.isNone() ? std::vector<int64_t>{} : dim.toIntVector();
  if (n > 64) return {};
  const auto reduced = at::dim_list_to_bitset(dims, n);
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < n; i++)
    if (!dims.empty() && !reduced[i]) shape.push_back(self.size(i));
    else if (keepdim) shape.push_back(1);
  const auto dtype = c10::toRealValueType(self.scalar_type());
  if (!out) return {at::empty(shape, self.options().dtype(dtype))};
  if (out->scalar_type() != dtype) return {};
  out->resize_(shape);  // (keeps its strides when the shape is already right)
  return {*out};
}

// Out= overloads: PyTorch runs a structured op's functional form on a
// backend through its out= overload, so these are the forms that reach us.
// The meta functions resize the out twins in place; they are the returns.
#define OUT1(name, call) \
  {name, [](Stack& a) -> Stack { return {call}; }}

std::unordered_map<std::string, Fn> make_table() {
  return {
      OUT1("aten::add.out", at::meta::add_outf(T(a, 0), T(a, 1), a[2].toScalar(), M(a, 3))),
      OUT1("aten::sub.out", at::meta::sub_outf(T(a, 0), T(a, 1), a[2].toScalar(), M(a, 3))),
      OUT1("aten::mul.out", at::meta::mul_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::div.out", at::meta::div_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::pow.Tensor_Scalar_out", at::meta::pow_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::neg.out", at::meta::neg_outf(T(a, 0), M(a, 1))),
      OUT1("aten::exp.out", at::meta::exp_outf(T(a, 0), M(a, 1))),
      OUT1("aten::rsqrt.out", at::meta::rsqrt_outf(T(a, 0), M(a, 1))),
      OUT1("aten::tanh.out", at::meta::tanh_outf(T(a, 0), M(a, 1))),
      OUT1("aten::sigmoid.out", at::meta::sigmoid_outf(T(a, 0), M(a, 1))),
      OUT1("aten::silu.out", at::meta::silu_outf(T(a, 0), M(a, 1))),
      OUT1("aten::silu_backward.grad_input", at::meta::silu_backward_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::gelu.out", at::meta::gelu_outf(T(a, 0), a[1].toStringRef(), M(a, 2))),
      OUT1("aten::gelu_backward.grad_input",
           at::meta::gelu_backward_outf(T(a, 0), T(a, 1), a[2].toStringRef(), M(a, 3))),
      OUT1("aten::threshold_backward.grad_input",
           at::meta::threshold_backward_outf(T(a, 0), T(a, 1), a[2].toScalar(), M(a, 3))),
      OUT1("aten::addmm.out", at::meta::addmm_outf(T(a, 0), T(a, 1), T(a, 2), a[3].toScalar(),
                                                   a[4].toScalar(), M(a, 5))),
      OUT1("aten::mm.out", at::meta::mm_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::bmm.out", at::meta::bmm_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::baddbmm.out", at::meta::baddbmm_outf(T(a, 0), T(a, 1), T(a, 2), a[3].toScalar(),
                                                       a[4].toScalar(), M(a, 5))),
      OUT1("aten::_softmax.out", at::meta::_softmax_outf(T(a, 0), a[1].toInt(), a[2].toBool(), M(a, 3))),
      OUT1("aten::_log_softmax.out",
           at::meta::_log_softmax_outf(T(a, 0), a[1].toInt(), a[2].toBool(), M(a, 3))),
      OUT1("aten::_softmax_backward_data.out",
           at::meta::_softmax_backward_data_outf(T(a, 0), T(a, 1), a[2].toInt(), a[3].toScalarType(),
                                                 M(a, 4))),
      OUT1("aten::_log_softmax_backward_data.out",
           at::meta::_log_softmax_backward_data_outf(T(a, 0), T(a, 1), a[2].toInt(),
                                                     a[3].toScalarType(), M(a, 4))),
      {"aten::sum.IntList_out", [](Stack& a) -> Stack {
         std::vector<int64_t> keep;
         return {at::meta::sum_outf(T(a, 0), Dims(a, 1, keep), a[2].toBool(),
                                    a[3].toOptional<at::ScalarType>(), M(a, 4))};
       }},
      {"aten::mean.out", [](Stack& a) -> Stack {
         std::vector<int64_t> keep;
         return {at::meta::mean_outf(T(a, 0), Dims(a, 1, keep), a[2].toBool(),
                                     a[3].toOptional<at::ScalarType>(), M(a, 4))};
       }},
      OUT1("aten::cat.out", at::meta::cat_outf(a[0].toTensorVector(), a[1].toInt(), M(a, 2))),
      OUT1("aten::tril.out", at::meta::tril_outf(T(a, 0), a[1].toInt(), M(a, 2))),
      OUT1("aten::triu.out", at::meta::triu_outf(T(a, 0), a[1].toInt(), M(a, 2))),
      OUT1("aten::nll_loss_backward.grad_input",
           at::meta::nll_loss_backward_outf(T(a, 0), T(a, 1), T(a, 2), OptT(a, 3), a[4].toInt(),
                                            a[5].toInt(), T(a, 6), M(a, 7))),
      {"aten::nll_loss_forward.output", [](Stack& a) -> Stack {
         check_nll_weight(a, 0, 2);
         auto r = at::meta::nll_loss_forward_outf(T(a, 0), T(a, 1), OptT(a, 2), a[3].toInt(),
                                                  a[4].toInt(), M(a, 5), M(a, 6));
         return {std::get<0>(r), std::get<1>(r)};
       }},
      {"aten::nll_loss2d_forward", [](Stack& a) -> Stack {
         check_nll_weight(a, 0, 2);
         return {};  // PyTorch's meta gives the results
       }},
      // multi_margin_loss's target: one class per input row, with the CPU
      // kernel's message (PyTorch's meta words it differently).
      {"aten::multi_margin_loss", [](Stack& a) -> Stack {
         const auto& in = T(a, 0);
         const auto& target = T(a, 1);
         const int64_t rows = in.dim() <= 1 ? 1 : in.size(0);
         TORCH_CHECK(target.dim() <= 1 && target.numel() == rows,
                     "multi_margin_loss: target tensor should be 1-D with size equal to the "
                     "number of input samples (batch size). Expected target size [", rows,
                     "], but got ", target.sizes(), ". Input has shape ", in.sizes(), ".");
         return {};
       }},
      // PyTorch's Meta kernels for these common ops are Python references
      // (torch._refs via torch._meta_registrations), whose first call
      // imports torch._dynamo and sympy: a second or more before a first
      // `x > 0` or `x.sqrt()`. Their C++ structured meta functions give the
      // same results (they are the CPU kernels' own).
      OUT1("aten::eq.Scalar_out", at::meta::eq_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::ne.Scalar_out", at::meta::ne_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::lt.Scalar_out", at::meta::lt_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::le.Scalar_out", at::meta::le_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::gt.Scalar_out", at::meta::gt_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::ge.Scalar_out", at::meta::ge_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::eq.Tensor_out", at::meta::eq_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::ne.Tensor_out", at::meta::ne_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::lt.Tensor_out", at::meta::lt_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::le.Tensor_out", at::meta::le_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::gt.Tensor_out", at::meta::gt_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::ge.Tensor_out", at::meta::ge_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::maximum.out", at::meta::maximum_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::minimum.out", at::meta::minimum_outf(T(a, 0), T(a, 1), M(a, 2))),
      OUT1("aten::log.out", at::meta::log_outf(T(a, 0), M(a, 1))),
      OUT1("aten::sqrt.out", at::meta::sqrt_outf(T(a, 0), M(a, 1))),
      OUT1("aten::sign.out", at::meta::sign_outf(T(a, 0), M(a, 1))),
      OUT1("aten::floor.out", at::meta::floor_outf(T(a, 0), M(a, 1))),
      OUT1("aten::round.out", at::meta::round_outf(T(a, 0), M(a, 1))),
      OUT1("aten::reciprocal.out", at::meta::reciprocal_outf(T(a, 0), M(a, 1))),
      OUT1("aten::clamp.out", at::meta::clamp_outf(T(a, 0), a[1].toOptional<at::Scalar>(),
                                                   a[2].toOptional<at::Scalar>(), M(a, 3))),
      OUT1("aten::clamp_min.out", at::meta::clamp_min_outf(T(a, 0), a[1].toScalar(), M(a, 2))),
      OUT1("aten::addcmul.out",
           at::meta::addcmul_outf(T(a, 0), T(a, 1), T(a, 2), a[3].toScalar(), M(a, 4))),
      OUT1("aten::lerp.Scalar_out",
           at::meta::lerp_outf(T(a, 0), T(a, 1), a[2].toScalar(), M(a, 3))),
      OUT1("aten::lerp.Tensor_out", at::meta::lerp_outf(T(a, 0), T(a, 1), T(a, 2), M(a, 3))),
      OUT1("aten::any.all_out", at::meta::any_outf(T(a, 0), M(a, 1))),
      OUT1("aten::all.all_out", at::meta::all_outf(T(a, 0), M(a, 1))),
      OUT1("aten::any.out", at::meta::any_outf(T(a, 0), a[1].toInt(), a[2].toBool(), M(a, 3))),
      OUT1("aten::all.out", at::meta::all_outf(T(a, 0), a[1].toInt(), a[2].toBool(), M(a, 3))),
      OUT1("aten::cumsum.out", at::meta::cumsum_outf(T(a, 0), a[1].toInt(),
                                                     a[2].toOptional<at::ScalarType>(), M(a, 3))),
      {"aten::amax.out", [](Stack& a) -> Stack {
         std::vector<int64_t> dims = a[1].toIntVector();
         return {at::meta::amax_outf(T(a, 0), dims, a[2].toBool(), M(a, 3))};
       }},
      {"aten::linalg_vector_norm.out", [](Stack& a) -> Stack {
         std::vector<int64_t> keep;
         return {at::meta::linalg_vector_norm_outf(T(a, 0), a[1].toScalar(), Dims(a, 2, keep),
                                                   a[3].toBool(), a[4].toOptional<at::ScalarType>(),
                                                   M(a, 5))};
       }},
      {"aten::where.self", [](Stack& a) -> Stack {
         return where_meta(T(a, 0), T(a, 1), T(a, 2), at::empty({0}, T(a, 1).options()));
       }},
      {"aten::where.self_out", [](Stack& a) -> Stack {
         return where_meta(T(a, 0), T(a, 1), T(a, 2), M(a, 3));
       }},
      {"aten::var.correction", [](Stack& a) -> Stack {
         return var_meta(T(a, 0), a[1], a[3].toBool(), nullptr);
       }},
      {"aten::var.correction_out", [](Stack& a) -> Stack {
         return var_meta(T(a, 0), a[1], a[3].toBool(), &M(a, 4));
       }},
      {"aten::sort.values_stable", [](Stack& a) -> Stack {
         auto r = at::meta::sort_outf(T(a, 0), a[1].toOptional<bool>(), a[2].toInt(),
                                      a[3].toBool(), M(a, 4), M(a, 5));
         return {std::get<0>(r), std::get<1>(r)};
       }},
      // Unary ops that keep the input's dtype (abs: a complex input's real
      // dtype) and, where it is dense, its strides; other layouts are left
      // to PyTorch's meta. (abs runs its out= form: an empty result is laid
      // out as the input, an out= tensor of other metadata declined.)
      {"aten::abs.out", [](Stack& a) -> Stack {
         const auto& t = T(a, 0);
         auto& out = M(a, 1);
         if (!t.is_non_overlapping_and_dense() || t.scalar_type() == at::kBool ||
             out.scalar_type() != c10::toRealValueType(t.scalar_type()))
           return {};
         if (out.numel() == 0 && t.numel() != 0) {  // a fresh result: laid out as the input
           out.resize_(t.sizes());
           out.as_strided_(t.sizes(), t.strides());
         }
         if (!out.sizes().equals(t.sizes()) || !out.strides().equals(t.strides())) return {};
         return {a[1]};
       }},
      {"aten::relu", [](Stack& a) -> Stack {
         const auto& t = T(a, 0);
         if (!t.is_non_overlapping_and_dense() || t.scalar_type() == at::kBool || t.is_complex())
           return {};
         return {like(t, true)};
       }},
      {"aten::isnan", [](Stack& a) -> Stack {
         const auto& t = T(a, 0);
         if (!t.is_non_overlapping_and_dense()) return {};
         return {like(t, true, at::kBool)};
       }},
      // Functional and in-place forms of the ops Dispatch.cpp claims.
      OUT1("aten::add.Tensor", at::meta::add(T(a, 0), T(a, 1), a[2].toScalar())),
      OUT1("aten::sub.Tensor", at::meta::sub(T(a, 0), T(a, 1), a[2].toScalar())),
      OUT1("aten::mul.Tensor", at::meta::mul(T(a, 0), T(a, 1))),
      OUT1("aten::div.Tensor", at::meta::div(T(a, 0), T(a, 1))),
      OUT1("aten::add_.Tensor", at::meta::add_(M(a, 0), T(a, 1), a[2].toScalar())),
      OUT1("aten::sub_.Tensor", at::meta::sub_(M(a, 0), T(a, 1), a[2].toScalar())),
      OUT1("aten::mul_.Tensor", at::meta::mul_(M(a, 0), T(a, 1))),
      OUT1("aten::div_.Tensor", at::meta::div_(M(a, 0), T(a, 1))),
      OUT1("aten::addmm", at::meta::addmm(T(a, 0), T(a, 1), T(a, 2), a[3].toScalar(), a[4].toScalar())),
      OUT1("aten::mm", at::meta::mm(T(a, 0), T(a, 1))),
      OUT1("aten::bmm", at::meta::bmm(T(a, 0), T(a, 1))),
      // PyTorch's meta for the fused LSTM cell reads the device of absent
      // biases (nn.LSTM(bias=False)); the result types are simple. Shapes
      // that do not fit are declined: PyTorch's meta then raises its error.
      {"aten::_thnn_fused_lstm_cell", [](Stack& a) -> Stack {
         const auto& ig = T(a, 0);
         const auto& hg = T(a, 1);
         const auto& cx = T(a, 2);
         if (ig.dim() != 2 || !ig.sizes().equals(hg.sizes()) || cx.dim() != 2 ||
             cx.size(0) != ig.size(0) || 4 * cx.size(1) != ig.size(1))
           return {};
         for (size_t i : {size_t{3}, size_t{4}})
           if (!a[i].isNone() && T(a, i).defined() &&
               (T(a, i).dim() != 1 || T(a, i).size(0) != ig.size(1)))
             return {};
         return {like(cx, false), like(cx, false), like(ig, false)};
       }},
      // Random fills keep self's metadata. Their Python meta kernels import
      // torch._dynamo on first use (about a second before the first
      // torch.randn) and skip some of the argument checks the CPU kernels
      // make; these make them, with the CPU's messages. Dtypes PyTorch
      // might reject are declined (its meta kernel decides).
      {"aten::normal_", [](Stack& a) -> Stack {
         if (!floating(T(a, 0))) return {};
         double std = a[2].toDouble();
         TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
         return {a[0]};
       }},
      {"aten::uniform_", [](Stack& a) -> Stack {
         const auto t = T(a, 0).scalar_type();
         if (!at::isFloatingType(t)) return {};
         double from = a[1].toDouble(), to = a[2].toDouble();
         TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=",
                     from, " > to=", to);
         TORCH_CHECK(to - from <= max_of(t), "uniform_ expects to-from <= std::numeric_limits<",
                     t, ">::max(), but found to=", to, " and from=", from,
                     " which result in to-from to exceed the limit");
         return {a[0]};
       }},
      {"aten::exponential_", [](Stack& a) -> Stack {
         if (!floating(T(a, 0))) return {};
         double l = a[1].toDouble();
         TORCH_CHECK(l > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", l);
         return {a[0]};
       }},
      {"aten::log_normal_", [](Stack& a) -> Stack {
         if (!floating(T(a, 0))) return {};
         double std = a[2].toDouble();
         TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
         return {a[0]};
       }},
      {"aten::cauchy_", [](Stack& a) -> Stack {
         return floating(T(a, 0)) && a[2].toDouble() > 0 ? Stack{a[0]} : Stack{};
       }},
      {"aten::geometric_", [](Stack& a) -> Stack {
         if (T(a, 0).is_complex()) return {};
         double p = a[1].toDouble();
         TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
         return {a[0]};
       }},
      {"aten::bernoulli_.float", [](Stack& a) -> Stack {
         if (T(a, 0).is_complex()) return {};
         double p = a[1].toDouble();
         TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
         return {a[0]};
       }},
      {"aten::bernoulli", [](Stack& a) -> Stack {
         if (!floating(T(a, 0))) return {};
         return {like(T(a, 0), false)};
       }},
      // dropout in training: the output and its keep-mask, shaped as input.
      {"aten::native_dropout", [](Stack& a) -> Stack {
         const auto& in = T(a, 0);
         double p = a[1].toDouble();
         if (!floating(in) || a[2].isNone() || !a[2].toBool() || !(p > 0 && p <= 1)) return {};
         return {like(in, true), like(in, true, at::kBool)};
       }},
      {"aten::normal.Tensor_float", [](Stack& a) -> Stack {
         if (!floating(T(a, 0))) return {};
         double std = a[1].toDouble();
         TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
         return {like(T(a, 0), false)};
       }},
      {"aten::normal.float_Tensor", [](Stack& a) -> Stack {
         if (!floating(T(a, 1))) return {};
         return {like(T(a, 1), false)};
       }},
      {"aten::randperm", [](Stack& a) -> Stack {
         int64_t n = a[0].toInt();
         if (n < 0) return {};
         auto dt = a[1].isNone() ? at::kLong : a[1].toScalarType();
         return {at::empty({n}, at::TensorOptions().dtype(dt).device(at::kMeta))};
       }},
      // torch.randperm runs its out= form.
      {"aten::randperm.out", [](Stack& a) -> Stack {
         int64_t n = a[0].toInt();
         if (n < 0) return {};
         M(a, 1).resize_({n});
         return {a[1]};
       }},
      {"aten::randperm.generator_out", [](Stack& a) -> Stack {
         int64_t n = a[0].toInt();
         if (n < 0) return {};
         M(a, 2).resize_({n});
         return {a[2]};
       }},
      {"aten::multinomial", [](Stack& a) -> Stack {
         return {multinomial_meta(T(a, 0), a[1].toInt(), a[2].toBool(), nullptr)};
       }},
      {"aten::multinomial.out", [](Stack& a) -> Stack {
         return {multinomial_meta(T(a, 0), a[1].toInt(), a[2].toBool(), &M(a, 4))};
       }},
      // In-place fills keep self's metadata; the mask must broadcast to self
      // (otherwise PyTorch's meta kernel raises its error).
      {"aten::zero_", [](Stack& a) -> Stack { return {a[0]}; }},
      {"aten::fill_.Scalar", [](Stack& a) -> Stack { return {a[0]}; }},
      {"aten::masked_fill_.Scalar", [](Stack& a) -> Stack {
         const auto& self = T(a, 0);
         const auto& mask = T(a, 1);
         // A mask on another device (not a meta twin) is PyTorch's to judge.
         if (!mask.is_meta() || mask.scalar_type() != at::kBool || mask.dim() > self.dim())
           return {};
         for (int64_t i = 1; i <= mask.dim(); i++) {
           int64_t m = mask.size(-i), s = self.size(-i);
           if (m != s && m != 1) return {};
         }
         return {a[0]};
       }},
  };
}
#undef OUT1

}  // namespace

std::optional<Stack> fast_meta(const c10::FunctionSchema& schema, Stack& meta_args) {
  static const std::unordered_map<std::string, Fn> t = make_table();
  static thread_local std::string name;
  name = schema.name();
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  auto it = t.find(name);
  if (it == t.end() || meta_args.size() != schema.arguments().size()) return std::nullopt;
  Stack r = it->second(meta_args);
  if (r.empty()) return std::nullopt;  // declined: PyTorch's meta decides
  return r;
}

}  // namespace torch_tpu
