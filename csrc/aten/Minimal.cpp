// Kernels every device needs by hand: allocation, the view family's
// metadata kernels (views must alias, so they never fall back), resize_,
// set_, copies across devices, and .item().
#include <ATen/EmptyTensor.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/lt.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero_static.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/ArgChecks.h"
#include "aten/Dispatch.h"
#include "aten/TensorRef.h"
#include "core/TpuStatus.h"

namespace torch_tpu {

at::Tensor nonzero_sync(const at::Tensor& self) {
  int64_t n = at::ne(self, 0).sum().item<int64_t>();
  return at::nonzero_static(self, n, -1);
}

namespace {
constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);
}  // namespace

at::Tensor empty_strided_tpu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                             c10::ScalarType dtype, c10::Device device) {
  checked_dtype(dtype, "empty_strided");
  // The allocator places storage on the current device.
  std::optional<c10::DeviceGuard> guard;
  if (device.has_index() && device.index() != current_device()) {
    check_device_index(device.index(), "aten::empty_strided");
    guard.emplace(device);
  }
  return at::detail::empty_strided_generic(sizes, strides, tpu_allocator(), kTpuKeys, dtype);
}

namespace {

at::Tensor empty_memory_format(c10::IntArrayRef size,
                               std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  auto dev = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "tpu supports only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "pin_memory is for CPU tensors only");
  auto st = c10::dtype_or_default(dtype);
  checked_dtype(st, "empty");
  if (dev.has_index() && dev.index() != current_device())
    check_device_index(dev.index(), "aten::empty.memory_format");
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, tpu_allocator(), kTpuKeys, st,
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "tpu supports only strided tensors");
  return empty_strided_tpu(size, stride, c10::dtype_or_default(dtype),
                           c10::device_or_default(device));
}

void ensure_storage_fits(const at::Tensor& self) {
  size_t needed = at::detail::computeStorageNbytes(
      self.sizes(), self.strides(), self.dtype().itemsize(),
      self.storage_offset());
  auto* impl = self.storage().unsafeGetStorageImpl();
  if (needed > impl->nbytes()) resize_storage_bytes(impl, needed);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  // Same sizes keep the strides (a transposed tensor stays transposed), as
  // on the CPU; only a memory_format restrides then.
  if (impl->sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "resize_: unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  ensure_storage_fits(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source,
                        c10::SymInt offset, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device_type() == c10::DeviceType::PrivateUse1,
              "set_: expected a tpu storage, got one on ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset.expect_int());
  impl->set_sizes_and_strides(C10_AS_INTARRAYREF_SLOW(size),
                              C10_AS_INTARRAYREF_SLOW(stride));
  ensure_storage_fits(self);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  c10::SymInt sizes[1] = {n};
  c10::SymInt strides[1] = {1};
  return set_storage(self, std::move(source), 0, sizes, strides);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_storage(self, src.storage(), src.storage_offset(),
                     src.sym_sizes(), src.sym_strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, tpu_allocator(),
                       /*resizable=*/true);
  c10::SymInt sizes[1] = {0};
  c10::SymInt strides[1] = {1};
  return set_storage(self, std::move(storage), 0, sizes, strides);
}

// tpu -> tpu copy with dtype conversion and broadcasting, on the device.
void copy_on_device(const at::Tensor& src, const at::Tensor& dst) {
  tpr_tensor_ref_t s = tensor_ref(src, "copy_");
  tpr_tensor_ref_t d = tensor_ref(dst, "copy_");
  tpr_eager_arg_t arg = {};
  arg.arg.kind = TPR_ARG_TENSOR;
  arg.tensor = &s;
  tpr_type_t out = tensor_type(dst, "copy_");
  const tpr_tensor_ref_t* targets[1] = {&d};
  tpr_eager_call_t call = {"aten::copy_", static_cast<int>(dst.device().index()),
                           &arg, 1, &out, 1, targets, tpr_eager_lower_copy};
  check(tpr_eager_run(&call));
}

// A tpu tensor's logical value on the host: its raw window read back, then
// its lazy conjugate / negative bits applied there.
at::Tensor read_to_host(const at::Tensor& t) {
  raise_failed_data_checks();
  at::Tensor host = at::empty(t.sizes(), t.options().device(c10::kCPU));
  tpr_tensor_ref_t r = tensor_ref(t, "copy_");
  check(tpr_tensor_read_host(&r, host.mutable_data_ptr(), host.nbytes()));
  if (t.is_conj()) host = host.conj_physical();
  if (t.is_neg()) host = host.neg();
  return host;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool non_blocking) {
  if (self.numel() == 0) return dst;
  bool src_tpu = self.device().type() == c10::DeviceType::PrivateUse1;
  bool dst_tpu = dst.device().type() == c10::DeviceType::PrivateUse1;
  TORCH_CHECK(src_tpu || self.device().is_cpu(), "copy_: cannot copy from ",
              self.device(), " to ", dst.device());
  TORCH_CHECK(dst_tpu || dst.device().is_cpu(), "copy_: cannot copy from ",
              self.device(), " to ", dst.device());
  bool bits = self.is_conj() || self.is_neg() || dst.is_conj() || dst.is_neg();
  if (src_tpu && dst_tpu && self.device() == dst.device() && !bits) {
    copy_on_device(self, dst);
    return dst;
  }
  if (!dst_tpu) {  // device -> host
    raise_failed_data_checks();
    tpr_tensor_ref_t s = tensor_ref(self, "copy_");
    if (!bits && dst.is_contiguous() && dst.scalar_type() == self.scalar_type() &&
        dst.sizes() == self.sizes()) {
      check(tpr_tensor_read_host(&s, dst.mutable_data_ptr(), dst.nbytes()));
    } else {
      dst.copy_(read_to_host(self));
    }
    return dst;
  }
  // -> device: the logical value on the host, stored raw under dst's bits.
  at::Tensor value = src_tpu ? read_to_host(self) : self.resolve_conj().resolve_neg();
  at::Tensor raw = value.to(dst.scalar_type()).expand(dst.sizes());
  if (dst.is_conj()) raw = raw.conj_physical();
  if (dst.is_neg()) raw = raw.neg();
  raw = raw.contiguous();
  tpr_tensor_ref_t d = tensor_ref(dst, "copy_");
  check(tpr_tensor_write_host(&d, raw.const_data_ptr(), raw.nbytes()));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar _local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  raise_failed_data_checks();
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  tpr_tensor_ref_t s = tensor_ref(self, "_local_scalar_dense");
  s.rank = 0;
  check(tpr_tensor_read_host(&s, host.mutable_data_ptr(), host.nbytes()));
  return host.item();
}

// torch.equal: same sizes and equal elements (NaN != NaN); one host read.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (self.sizes() != other.sizes()) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

// -- data-dependent shapes: sync, then run ------------------------------------
// The result's size depends on the values, so read one count back (a sync
// point, like .item()), then run a fixed-shape native op with that size.


at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  at::Tensor r = nonzero_sync(self);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor masked_select_sync(const at::Tensor& self, const at::Tensor& mask) {
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  at::Tensor flat_mask = mask.expand(shape).reshape(-1);
  at::Tensor where = nonzero_sync(flat_mask).squeeze(1);
  return self.expand(shape).reshape(-1).index_select(0, where);
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask,
                              at::Tensor& out) {
  // The CPU's checks: out shares memory with neither argument.
  check_writable("aten::masked_select.out", out);
  check_no_overlap("aten::masked_select.out", out, "self", self, false);
  check_no_overlap("aten::masked_select.out", out, "mask", mask, false);
  at::Tensor r = masked_select_sync(self, mask);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// torch.unique (sorted): sort, mark where values change, compact.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(
    const at::Tensor& self, bool sorted, bool return_inverse, bool return_counts) {
  at::Tensor flat = self.reshape(-1);
  if (flat.numel() == 0) {
    return {at::empty({0}, self.options()),
            at::empty(return_inverse ? self.sizes() : c10::IntArrayRef{0},
                      self.options().dtype(at::kLong)),
            at::empty({0}, self.options().dtype(at::kLong))};
  }
  auto [values, perm] = flat.sort(/*stable=*/true, 0, false);
  at::Tensor starts = at::ones({flat.numel()}, self.options().dtype(at::kBool));
  if (flat.numel() > 1)
    starts.slice(0, 1).copy_(at::ne(values.slice(0, 1), values.slice(0, 0, -1)));
  at::Tensor uniq = masked_select_sync(values, starts);
  at::Tensor group = starts.to(at::kLong).cumsum(0).sub_(1);
  at::Tensor inverse = at::empty({0}, self.options().dtype(at::kLong));
  if (return_inverse)
    inverse = at::empty_like(group).scatter_(0, perm, group).view(self.sizes());
  at::Tensor counts = at::empty({0}, self.options().dtype(at::kLong));
  if (return_counts)
    counts = at::zeros({uniq.numel()}, self.options().dtype(at::kLong))
                 .scatter_add_(0, group, at::ones_like(group));
  return {uniq, inverse, counts};
}

// torch.unique's older entry point (index_fill's backward reaches it).
std::tuple<at::Tensor, at::Tensor> unique_legacy(const at::Tensor& self, bool sorted,
                                                 bool return_inverse) {
  auto r = unique2(self, sorted, return_inverse, false);
  return {std::get<0>(r), std::get<1>(r)};
}

// unique_consecutive over the flattened input: mark where values change
// (no sort), compact.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(
    const at::Tensor& self, bool return_inverse, bool return_counts,
    std::optional<int64_t> dim) {
  TORCH_CHECK_NOT_IMPLEMENTED(!dim.has_value() || self.dim() <= 1,
                              "unique_consecutive with dim is not supported on tpu");
  at::Tensor flat = self.reshape(-1);
  auto lopts = self.options().dtype(at::kLong);
  at::Tensor starts = at::ones({flat.numel()}, self.options().dtype(at::kBool));
  if (flat.numel() > 1)
    starts.slice(0, 1).copy_(at::ne(flat.slice(0, 1), flat.slice(0, 0, -1)));
  at::Tensor uniq = masked_select_sync(flat, starts);
  at::Tensor group = starts.to(at::kLong).cumsum(0).sub_(1);
  at::Tensor inverse = return_inverse ? group.view(self.sizes()) : at::empty({0}, lopts);
  at::Tensor counts = at::empty({0}, lopts);
  if (return_counts)
    counts = at::zeros({uniq.numel()}, lopts).scatter_add_(0, group, at::ones_like(group));
  return {uniq, inverse, counts};
}

// repeat_interleave(repeats): index i repeated repeats[i] times. The length
// is the sum of repeats (a sync unless output_size is given); a 1 at each
// cumulative end, prefix-summed, gives the index of every position.
at::Tensor repeat_interleave_tensor(const at::Tensor& repeats,
                                    std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() <= 1, "repeat_interleave: repeats must be 0-d or 1-d");
  at::Tensor r = repeats.reshape(-1).to(at::kLong);
  int64_t total = output_size.has_value() ? output_size->expect_int()
                                          : r.sum().item<int64_t>();
  at::Tensor ends = r.cumsum(0);
  at::Tensor marks = at::zeros({total + 1}, r.options())
                         .scatter_add_(0, ends.clamp_max(total), at::ones_like(ends));
  return marks.slice(0, 0, total).cumsum(0).to(repeats.scalar_type());
}

// bincount: the length is max(minlength, max(self) + 1), one host read of
// the minimum and maximum together (CUDA reads the maximum too); the counts
// are a scatter-add. Dtypes and checks are the CPU kernel's: int64 counts,
// float32/float64 weights keep their dtype and others sum in float64.
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt,
                    int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(self.dim() == 1,
              "bincount only supports 1-d non-negative integral inputs.");
  const at::Tensor* weights = weights_opt.has_value() && weights_opt->defined()
                                  ? &*weights_opt : nullptr;
  TORCH_CHECK(!weights || (weights->dim() == 1 && weights->size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  if (self.numel() == 0) return at::zeros({minlength}, self.options().dtype(at::kLong));
  at::Tensor index = self.to(at::kLong);
  at::Tensor bounds = at::stack({index.min(), index.max()}).cpu();
  int64_t lo = bounds[0].item<int64_t>(), hi = bounds[1].item<int64_t>();
  TORCH_CHECK(lo >= 0, "bincount only supports 1-d non-negative integral inputs.");
  int64_t n = std::max(minlength, hi + 1);
  if (!weights) {
    return at::zeros({n}, index.options()).scatter_add_(0, index, at::ones_like(index));
  }
  c10::ScalarType dt = weights->scalar_type();
  if (dt != at::kFloat && dt != at::kDouble) dt = at::kDouble;
  at::Tensor w = weights->to(dt);
  return at::zeros({n}, w.options()).scatter_add_(0, index, w);
}

// Whether each row of a (batch, seq) padding mask is left-aligned: its
// trues, then only falses. TransformerEncoder asks this in evaluation before
// choosing its nested-tensor fast path; the answer is one host read.
bool nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Expected mask to be of type bool, got ",
              mask.scalar_type());
  TORCH_CHECK(mask.dim() == 2, "Padding mask should be 2D");
  TORCH_CHECK(t.dim() == 3, "Input should be 3D");
  at::Tensor lengths = mask.to(at::kLong).sum(1, /*keepdim=*/true);
  at::Tensor positions = at::arange(mask.size(1), mask.options().dtype(at::kLong));
  return torch_tpu::equal(at::lt(positions, lengths), mask);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique", unique_legacy);
  m.impl("unique_consecutive", unique_consecutive);
  m.impl("repeat_interleave.Tensor", repeat_interleave_tensor);
  m.impl("bincount", bincount);
  m.impl("_nested_tensor_from_mask_left_aligned", nested_tensor_from_mask_left_aligned);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", nonzero_sync);
  m.impl("nonzero.out", nonzero_out);
  m.impl("masked_select", masked_select_sync);
  m.impl("masked_select.out", masked_select_out);
  m.impl("_unique2", unique2);
  m.impl("equal", equal);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  // Real <-> complex views alias the storage; the executor reads and
  // writes them through tpr_view_read/_write's complex reinterpretation.
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", _local_scalar_dense);
}

// Cross-device copies of tensors with lazy conjugate/negative bits: the
// math fallbacks of those keys would materialise the source with clone(),
// which copies through _copy_from again, forever. copy_from applies the bits.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace
}  // namespace torch_tpu
