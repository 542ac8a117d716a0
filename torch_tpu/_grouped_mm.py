"""torch._grouped_mm in compiled tpu graphs (Mixture-of-Experts layers).

Eager runs ATen's fallback: one product per group, with the group bounds read
back from ``offs``. A compiled graph cannot read them, so the product is
written with static shapes: every group's product over all rows (or columns,
or contraction slices), each masked to its own group. That costs one product
per group where the fallback's cost is one in total, and gives the
fallback's values: rows (columns) past ``offs[-1]``, which ATen leaves
unwritten, are zeros here.

PyTorch's meta kernel for the op mirrors the CUDA kernel and refuses
anything but bfloat16; for tpu tensors a fake implementation of our own
takes the dtypes eager takes.
"""
import torch

aten = torch.ops.aten


def _groups(n, offs, device):
    """Group index of each of |n| positions: offs[e] is the end of group e;
    positions past offs[-1] get len(offs), which matches no group."""
    pos = torch.arange(n, device=device, dtype=offs.dtype)
    return (pos[:, None] >= offs[None, :]).sum(dim=1)


def _masks(n, offs, device, dtype):
    """[groups, n]: 1 where position j belongs to group e, else 0."""
    g = _groups(n, offs, device)
    e = torch.arange(offs.shape[0], device=device, dtype=g.dtype)
    return (g[None, :] == e[:, None]).to(dtype)


def grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    """The four forms of torch._grouped_mm, as masked batched products."""
    _check(mat_a, mat_b, offs, bias, out_dtype)
    a2, b2 = mat_a.dim() == 2, mat_b.dim() == 2
    if not a2 and not b2:
        return torch.bmm(mat_a, mat_b)
    dev, dt = mat_a.device, mat_a.dtype
    if a2 and not b2:  # rows of a grouped: [M,K] x [E,K,N] -> [M,N]
        m = _masks(mat_a.shape[0], offs, dev, dt)                     # [E,M]
        full = torch.matmul(mat_a.unsqueeze(0), mat_b)                # [E,M,N]
        return (full * m[:, :, None]).sum(dim=0)
    if not a2 and b2:  # columns of b grouped: [E,M,K] x [K,N] -> [M,N]
        m = _masks(mat_b.shape[1], offs, dev, dt)                     # [E,N]
        full = torch.matmul(mat_a, mat_b.unsqueeze(0))                # [E,M,N]
        return (full * m[:, None, :]).sum(dim=0)
    # the contraction grouped: [M,K] x [K,N] -> [E,M,N]
    m = _masks(mat_a.shape[1], offs, dev, dt)                         # [E,K]
    return torch.matmul(mat_a.unsqueeze(0) * m[:, None, :], mat_b)


def _check(mat_a, mat_b, offs, bias, out_dtype):
    """ATen's checks of the op, minus the CUDA kernel's dtype and alignment
    limits."""
    def fail(msg):
        raise RuntimeError(f"torch._grouped_mm: {msg} (mat_a {mat_a.dtype}"
                           f"{list(mat_a.shape)}, mat_b {mat_b.dtype}{list(mat_b.shape)})")

    if mat_a.dim() not in (2, 3) or mat_b.dim() not in (2, 3):
        fail("mat_a and mat_b have to be 2-D or 3-D")
    if mat_a.dtype != mat_b.dtype or not mat_a.is_floating_point():
        fail("mat_a and mat_b must have one floating dtype")
    a2, b2 = mat_a.dim() == 2, mat_b.dim() == 2
    if mat_a.shape[-1] != mat_b.shape[-2]:
        fail("contraction dimension of mat_a and mat_b must match")
    if (offs is not None) != (a2 or b2):
        fail("offsets are needed exactly when a matrix is 2-D")
    if offs is not None and (offs.dim() != 1 or offs.dtype != torch.int32):
        fail(f"offs has to be a 1-D int32 tensor, got {offs.dtype}{list(offs.shape)}")
    if a2 and not b2 and offs.shape[0] != mat_b.shape[0]:
        fail("matrix batch sizes have to match")
    if not a2 and b2 and offs.shape[0] != mat_a.shape[0]:
        fail("matrix batch sizes have to match")
    if not a2 and not b2 and mat_a.shape[0] != mat_b.shape[0]:
        fail("batched dimension has to match")
    if bias is not None:
        fail("bias is not supported")
    if out_dtype is not None and out_dtype != mat_a.dtype:
        fail(f"the output dtype must be mat_a's, got {out_dtype}")


def _out_shape(mat_a, mat_b, offs):
    a2, b2 = mat_a.dim() == 2, mat_b.dim() == 2
    if a2 and b2:
        return [offs.shape[0], mat_a.shape[0], mat_b.shape[1]]
    if a2:
        return [mat_a.shape[0], mat_b.shape[-1]]
    if b2:
        return [mat_a.shape[1], mat_b.shape[1]]
    return [mat_a.shape[0], mat_a.shape[1], mat_b.shape[-1]]


_installed = False


def install_fake():
    """A fake (shape) implementation for tpu tensors, ahead of PyTorch's
    bfloat16-only meta kernel; other devices keep PyTorch's."""
    global _installed
    if _installed:
        return
    _installed = True
    from torch._subclasses.fake_impls import register_op_impl
    from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

    @register_op_impl(aten._grouped_mm.default)
    def grouped_mm_fake(fake_mode, func, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
        if getattr(mat_a, "fake_device", mat_a.device).type != "tpu":
            return NotImplemented
        _check(mat_a, mat_b, offs, bias, out_dtype)
        with in_kernel_invocation_manager(fake_mode):
            out = torch.empty(_out_shape(mat_a, mat_b, offs), dtype=mat_a.dtype,
                              device="meta")
        return FakeTensor(fake_mode, out, mat_a.fake_device)
