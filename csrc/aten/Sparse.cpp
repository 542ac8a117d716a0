// Sparse COO tensors on tpu: a SparseTensorImpl whose indices ([sparse_dim,
// nnz], int64) and values ([nnz, *dense sizes]) are dense tpu tensors, as on
// CUDA. PyTorch's device-generic kernels handle the metadata (construction,
// accessors, resizing, copies between sparse tensors); the kernels below are
// the ones PyTorch writes per device (coalescing, masking, adding into a
// dense tensor), written with dense tpu ops. Enough for sparse gradients
// (nn.Embedding(sparse=True), EmbeddingBag) and torch.optim.SparseAdam.
// Other layouts (CSR, CSC, BSR, BSC) are refused.
#include <ATen/ATen.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_embedding_bag_backward_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_to_dense_native.h>
#include <ATen/ops/_to_sparse_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace torch_tpu {
namespace {

// PyTorch's generated wrappers around CUDA kernels make the op's device
// current first (its device argument, else its first tensor's), so what a
// kernel allocates lands beside its inputs. The device-generic kernels
// registered below get the same wrapper: a SparseTensorImpl starts with
// indices and values on the current device, and a sparse tensor on tpu:1
// would otherwise be built on tpu:0.
template <class T>
void device_argument(c10::OptionalDeviceGuard& g, const T& a) {
  if constexpr (std::is_same_v<std::decay_t<T>, std::optional<c10::Device>>) {
    if (!g.current_device() && a && a->type() == c10::DeviceType::PrivateUse1 && a->has_index())
      g.reset_device(*a);
  }
}

template <class T>
void tensor_argument(c10::OptionalDeviceGuard& g, const T& a) {
  if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) {
    if (!g.current_device() && a.defined() && a.device().type() == c10::DeviceType::PrivateUse1)
      g.reset_device(a.device());
  }
}

template <auto F>
struct OnItsDevice;
template <class R, class... A, R (*F)(A...)>
struct OnItsDevice<F> {
  static R call(A... a) {
    c10::OptionalDeviceGuard g;
    (device_argument(g, a), ...);
    (tensor_argument(g, a), ...);
    return F(std::forward<A>(a)...);
  }
};

std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << t.scalar_type() << t.sizes() << (t.is_sparse() ? " sparse" : "");
  return s.str();
}

// Each entry's position in row-major order over the sparse dims of |sizes|,
// from indices [sparse_dim, nnz]: one int64 per entry.
at::Tensor linear_index(const at::Tensor& indices, at::IntArrayRef sizes) {
  const int64_t sparse_dim = indices.size(0);
  if (sparse_dim == 1) return indices.select(0, 0);
  std::vector<int64_t> strides(sparse_dim, 1);
  for (int64_t d = sparse_dim - 2; d >= 0; d--) strides[d] = strides[d + 1] * sizes[d + 1];
  at::Tensor s = at::tensor(strides, indices.options().device(c10::kCPU))
                     .to(indices.device())
                     .unsqueeze(1);
  return indices.mul(s).sum(0);
}

// The inverse of linear_index: [sparse_dim, n] indices.
at::Tensor unlinear_index(const at::Tensor& linear, at::IntArrayRef sizes, int64_t sparse_dim) {
  if (sparse_dim == 1) return linear.unsqueeze(0);
  std::vector<at::Tensor> rows(sparse_dim);
  at::Tensor rest = linear;
  for (int64_t d = sparse_dim - 1; d >= 0; d--) {
    rows[d] = rest.remainder(sizes[d]);
    rest = rest.div(sizes[d], "floor");
  }
  return at::stack(rows);
}

// The dense tensor viewed as [prod(sparse sizes), *dense sizes] (a copy where
// it cannot be a view).
at::Tensor rows_of(const at::Tensor& dense, int64_t sparse_dim) {
  std::vector<int64_t> shape{-1};
  for (int64_t d = sparse_dim; d < dense.dim(); d++) shape.push_back(dense.size(d));
  return dense.reshape(shape);
}

// Duplicate indices summed, entries sorted by position: unique over the
// linear positions (a sync for the count, as on CUDA), then one index_add.
at::Tensor coalesce(const at::Tensor& self) {
  const int64_t sparse_dim = self.sparse_dim(), dense_dim = self.dense_dim();
  at::Tensor indices = self._indices(), values = self._values();
  if (self._nnz() < 2) {
    return at::_sparse_coo_tensor_with_dims_and_tensors(
        sparse_dim, dense_dim, self.sizes(), indices.clone(), values.clone(), self.options(),
        /*is_coalesced=*/true);
  }
  auto [positions, inverse, counts] =
      at::_unique2(linear_index(indices, self.sizes()), /*sorted=*/true,
                   /*return_inverse=*/true, /*return_counts=*/false);
  std::vector<int64_t> vshape = values.sizes().vec();
  vshape[0] = positions.size(0);
  at::Tensor summed = at::zeros(vshape, values.options()).index_add_(0, inverse, values);
  return at::_sparse_coo_tensor_with_dims_and_tensors(
      sparse_dim, dense_dim, self.sizes(), unlinear_index(positions, self.sizes(), sparse_dim),
      summed, self.options(), /*is_coalesced=*/true);
}

// dense.to_sparse(sparse_dim): the rows (positions over the first sparse_dim
// dims) with a nonzero element, in order, marked coalesced as on the CPU.
// One nonzero (a sync for the count, as on CUDA).
at::Tensor dense_to_sparse(const at::Tensor& self, int64_t sparse_dim) {
  TORCH_CHECK(sparse_dim > 0 || self.dim() == 0, "sparse_dim must be >0 if dimensionality > 0");
  TORCH_CHECK(sparse_dim <= self.dim(), "sparse_dim must be less than or equal to self.dim()");
  c10::DeviceGuard guard(self.device());
  at::TensorOptions options = self.options().layout(c10::kSparse);
  if (self.dim() == 0) return at::native::dense_to_sparse(self, sparse_dim);
  at::Tensor rows = rows_of(self, sparse_dim);
  at::Tensor nonzero = rows.ne(0).reshape({rows.size(0), -1}).any(1);
  at::Tensor where = at::nonzero(nonzero).squeeze(1);
  return at::_sparse_coo_tensor_with_dims_and_tensors(
      sparse_dim, self.dim() - sparse_dim, self.sizes(),
      unlinear_index(where, self.sizes(), sparse_dim), rows.index_select(0, where), options,
      /*is_coalesced=*/true);
}

// dense.sparse_mask(mask): the dense tensor's entries at the mask's indices,
// as a sparse tensor with those indices.
at::Tensor sparse_mask(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.is_sparse(), "sparse_mask: expected a sparse COO mask, got ",
              describe(mask));
  TORCH_CHECK(self.sizes().equals(mask.sizes()),
              "sparse_mask(): operands have incompatible sizes; self has size ", self.sizes(),
              " but mask has size ", mask.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_sparse(),
                              "sparse_mask on tpu: a sparse self is not supported (self ",
                              describe(self), ")");
  const int64_t sparse_dim = mask.sparse_dim();
  at::Tensor indices = mask._indices();
  at::Tensor values = rows_of(self, sparse_dim).index_select(0, linear_index(indices, self.sizes()));
  return at::_sparse_coo_tensor_with_dims_and_tensors(
      sparse_dim, mask.dense_dim(), self.sizes(), indices.clone(), values,
      self.options().layout(c10::kSparse), mask.is_coalesced());
}

// out = dense + alpha * sparse, dense: the sparse values added into the
// dense rows at their positions (duplicates accumulate).
at::Tensor& add_dense_sparse(const at::Tensor& dense, const at::Tensor& sparse,
                             const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(dense.sizes().equals(sparse.sizes()), "add: expected 'self' and 'other' to have "
              "same size, but self has size ", dense.sizes(), " while other has size ",
              sparse.sizes(), " (FYI: dense-sparse addition does not currently support "
              "broadcasting)");
  const int64_t sparse_dim = sparse.sparse_dim();
  at::Tensor rows = rows_of(dense.to(out.scalar_type()), sparse_dim);
  at::Tensor values = sparse._values().to(out.scalar_type());
  at::Tensor sum = rows.index_add(0, linear_index(sparse._indices(), dense.sizes()), values, alpha);
  at::native::resize_output(out, dense.sizes());
  out.copy_(sum.view(dense.sizes()));
  return out;
}

// The add.out kernel for any call with a sparse operand (the sparse
// dispatch key wins over the dense one): dense + sparse into a dense out,
// sparse + sparse into a sparse out (indices and values concatenated,
// uncoalesced).
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out) {
  if (!self.is_sparse() && other.is_sparse()) {
    TORCH_CHECK(!out.is_sparse(), "add(dense, sparse): the result is dense, out is ",
                describe(out));
    return add_dense_sparse(self, other, alpha, out);
  }
  TORCH_CHECK(self.is_sparse() && other.is_sparse() && out.is_sparse(),
              "add(sparse, dense) is not supported. Use add(dense, sparse) instead. (self ",
              describe(self), ", other ", describe(other), ", out ", describe(out), ")");
  TORCH_CHECK(self.sizes().equals(other.sizes()), "add: expected sizes of 'self' and 'other' "
              "to match, but ", self.sizes(), " != ", other.sizes());
  TORCH_CHECK(self.sparse_dim() == other.sparse_dim() && self.dense_dim() == other.dense_dim(),
              "add: expected 'self' and 'other' to have the same sparse and dense dims (self ",
              describe(self), ", other ", describe(other), ")");
  at::ScalarType dtype = out.scalar_type();
  at::Tensor indices = at::cat({self._indices(), other._indices()}, 1);
  at::Tensor values = at::cat({self._values().to(dtype), other._values().to(dtype).mul(alpha)});
  at::sparse::get_sparse_impl(out)->raw_resize_(self.sparse_dim(), self.dense_dim(),
                                                self.sizes());
  at::sparse::alias_into_sparse(out, indices, values);
  out._coalesced_(false);
  return out;
}

at::Tensor no_compressed_sparse(const at::Tensor& t) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "sparse layouts other than COO are not supported on tpu "
                              "(", describe(t), ")");
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  // Device-generic kernels PyTorch registers for the CPU and CUDA only.
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         OnItsDevice<&at::native::new_with_dims_and_tensor_sparse_symint>::call);
  m.impl("empty.memory_format", OnItsDevice<&at::native::empty_sparse_symint>::call);
  m.impl("_indices", OnItsDevice<&at::native::_indices_sparse>::call);
  m.impl("_values", OnItsDevice<&at::native::_values_sparse>::call);
  m.impl("indices", OnItsDevice<&at::native::indices_sparse>::call);
  m.impl("values", OnItsDevice<&at::native::values_sparse>::call);
  m.impl("_nnz", OnItsDevice<&at::native::_nnz_sparse>::call);
  m.impl("sparse_dim", OnItsDevice<&at::native::sparse_dim_sparse>::call);
  m.impl("dense_dim", OnItsDevice<&at::native::dense_dim_sparse>::call);
  m.impl("_dimI", OnItsDevice<&at::native::sparse_dim_sparse>::call);
  m.impl("_dimV", OnItsDevice<&at::native::dense_dim_sparse>::call);
  m.impl("is_coalesced", OnItsDevice<&at::native::is_coalesced_sparse>::call);
  m.impl("_coalesced_", OnItsDevice<&at::native::_coalesced_sparse_>::call);
  m.impl("sparse_resize_", OnItsDevice<&at::native::sparse_resize_>::call);
  m.impl("sparse_resize_and_clear_", OnItsDevice<&at::native::sparse_resize_and_clear_>::call);
  m.impl("resize_as_sparse_", OnItsDevice<&at::native::resize_as_sparse_>::call);
  m.impl("copy_sparse_to_sparse_", OnItsDevice<&at::native::copy_sparse_>::call);
  m.impl("clone", OnItsDevice<&at::native::clone_sparse>::call);
  m.impl("zero_", OnItsDevice<&at::native::zero_sparse_>::call);
  m.impl("neg", OnItsDevice<&at::native::neg_sparse>::call);
  m.impl("neg_", OnItsDevice<&at::native::neg_sparse_>::call);
  m.impl("neg.out", OnItsDevice<&at::native::neg_out_sparse>::call);
  m.impl("_to_dense", OnItsDevice<&at::native::sparse_to_dense>::call);
  m.impl("_to_sparse.sparse_dim",
         OnItsDevice<static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(
             at::native::sparse_coo_to_sparse)>::call);
  m.impl("_to_sparse",
         OnItsDevice<static_cast<at::Tensor (*)(const at::Tensor&, std::optional<c10::Layout>,
                                                at::OptionalIntArrayRef, std::optional<int64_t>)>(
             at::native::sparse_coo_to_sparse)>::call);
  m.impl("add.Tensor", OnItsDevice<&at::native::add_sparse>::call);
  m.impl("add_.Tensor", OnItsDevice<&at::native::add_sparse_>::call);
  // Written here, with dense tpu ops.
  m.impl("_coalesce", OnItsDevice<&coalesce>::call);
  m.impl("sparse_mask", OnItsDevice<&sparse_mask>::call);
  m.impl("add.out", OnItsDevice<&add_out>::call);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // PyTorch's own kernel: sparse=True builds the COO gradient through
  // _embedding_bag_sparse_backward, dense goes on to the
  // _embedding_bag_dense_backward rule.
  m.impl("_embedding_bag_backward",
         OnItsDevice<&at::native::_embedding_bag_backward_symint>::call);
  // Dense to COO (nonzero: a sync for the count, as on CUDA).
  m.impl("_to_sparse.sparse_dim", dense_to_sparse);
  m.impl("_to_sparse", [](const at::Tensor& t, std::optional<c10::Layout> layout,
                          at::OptionalIntArrayRef blocksize, std::optional<int64_t> dense_dim) {
    if (layout && *layout != c10::kSparse) return no_compressed_sparse(t);
    TORCH_CHECK(!blocksize, "to_sparse: blocksize is for blocked layouts, not COO (", describe(t),
                ")");
    return dense_to_sparse(t, t.dim() - dense_dim.value_or(0));
  });
  m.impl("_to_sparse_csr", [](const at::Tensor& t, std::optional<int64_t>) {
    return no_compressed_sparse(t);
  });
  m.impl("_to_sparse_csc", [](const at::Tensor& t, std::optional<int64_t>) {
    return no_compressed_sparse(t);
  });
  m.impl("_to_sparse_bsr", [](const at::Tensor& t, at::IntArrayRef, std::optional<int64_t>) {
    return no_compressed_sparse(t);
  });
  m.impl("_to_sparse_bsc", [](const at::Tensor& t, at::IntArrayRef, std::optional<int64_t>) {
    return no_compressed_sparse(t);
  });
}

}  // namespace
}  // namespace torch_tpu
