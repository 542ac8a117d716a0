// cholesky, determinants and linear solves as PyTorch's own kernels compose
// them: an LU factorization (lowered natively, compiler/lower/rules_factor.c)
// and elementwise ops or an LU solve.
//
// They are kernels rather than rules because their extra results (LU,
// pivots) feed the backward, and which matrix PyTorch's det and slogdet
// factor depends on the input's strides: a contiguous real A is factored as
// A^T (det(A^T) = det(A)), and the backward re-checks A.is_contiguous() to
// know which it got. A lowering rule sees values, not strides, so it could
// not tell. _linalg_solve_ex factors A itself; it is here to share
// PyTorch's vector-right-hand-side handling.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

bool factor_transposed(const at::Tensor& A) {
  return A.is_contiguous() && !A.is_complex();
}

// det(P) of LAPACK pivots: -1 to the number of rows actually swapped.
at::Tensor pivots_sign(const at::Tensor& pivots) {
  auto ar = at::arange(1, pivots.size(-1) + 1, pivots.options());
  return (ar != pivots).sum(-1, false, at::kLong).fmod(2).mul(-2).add(1);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linalg_det(const at::Tensor& A) {
  auto [LU, pivots, info] =
      at::linalg_lu_factor_ex(factor_transposed(A) ? A.mT() : A);
  auto det = at::mul(pivots_sign(pivots), LU.diagonal(0, -2, -1).prod(-1));
  return {det, LU, pivots};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> linalg_slogdet(
    const at::Tensor& A) {
  auto [LU, pivots, info] =
      at::linalg_lu_factor_ex(factor_transposed(A) ? A.mT() : A);
  auto d = LU.diagonal(0, -2, -1);
  auto logabsdet = d.abs().log().sum(-1);
  auto sign = d.sgn().prod(-1).mul(pivots_sign(pivots));
  return {sign, logabsdet, LU, pivots};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> linalg_solve_ex(
    const at::Tensor& A, const at::Tensor& B, bool left, bool check_errors) {
  // B is a (batch of) vector(s) when it is 1-D or A's shape without the
  // last dim.
  bool vector_case =
      B.dim() == 1 ||
      (A.dim() - 1 == B.dim() && B.sizes() == A.sizes().slice(0, A.dim() - 1));
  auto B_ = vector_case ? B.unsqueeze(left ? -1 : -2) : B;
  auto [LU, pivots, info] = at::linalg_lu_factor_ex(A);
  auto result = at::linalg_lu_solve(LU, pivots, B_, left, false);
  if (vector_case) result = result.squeeze(left ? -1 : -2);
  if (check_errors)
    at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  return {result, LU, pivots, info};
}

// The deprecated cholesky raises on a matrix that is not positive definite;
// the factorization itself is linalg_cholesky_ex's rule.
at::Tensor cholesky(const at::Tensor& A, bool upper) {
  auto [L, info] = at::linalg_cholesky_ex(A, upper, false);
  at::_linalg_check_errors(info, "cholesky", A.dim() == 2);
  return L;
}

// geqrf has no meta kernel in PyTorch: a keeps the input's shape, tau is
// [..., min(m, n)].
std::tuple<at::Tensor, at::Tensor> geqrf_meta(const at::Tensor& A) {
  auto tau_shape = A.sizes().slice(0, A.dim() - 2).vec();
  tau_shape.push_back(std::min(A.size(-2), A.size(-1)));
  return {at::empty_like(A, at::MemoryFormat::Contiguous),
          at::empty(tau_shape, A.options())};
}

TORCH_LIBRARY_IMPL(aten, Meta, m) { m.impl("geqrf", geqrf_meta); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cholesky", cholesky);
  m.impl("_linalg_det", linalg_det);
  m.impl("_linalg_slogdet", linalg_slogdet);
  m.impl("_linalg_solve_ex", linalg_solve_ex);
}

}  // namespace
}  // namespace torch_tpu
