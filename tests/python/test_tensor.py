"""Tensors that behave like PyTorch's: copies, views, aliasing, in-place."""
import pytest
import torch

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]


def _sample(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip_every_dtype(dtype):
    x = _sample(dtype)
    y = x.to("tpu")
    assert y.device.type == "tpu" and y.dtype == dtype and y.shape == x.shape
    assert torch.equal(y.cpu(), x)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16), (torch.int64, torch.float32),
                                     (torch.float32, torch.int32), (torch.bool, torch.float32),
                                     (torch.float64, torch.float16)], ids=str)
def test_copy_with_dtype_conversion(src, dst):
    x = _sample(src)
    # host -> device with conversion
    assert torch.equal(x.to("tpu", dst).cpu(), x.to(dst))
    # device -> device with conversion
    assert torch.equal(x.to("tpu").to(dst).cpu(), x.to(dst))
    # device -> host with conversion into an existing tensor
    out = torch.empty(x.shape, dtype=dst)
    out.copy_(x.to("tpu"))
    assert torch.equal(out, x.to(dst))


def test_noncontiguous_copies_both_ways():
    x = torch.arange(24.0).reshape(4, 6)
    xt = x.t()  # non-contiguous CPU source
    assert torch.equal(xt.to("tpu").cpu(), xt)
    d = x.to("tpu")
    assert torch.equal(d.t().cpu(), xt)
    assert torch.equal(d[:, ::2].cpu(), x[:, ::2])
    assert torch.equal(d[1:3, 2:5].cpu(), x[1:3, 2:5])
    # device -> non-contiguous host destination
    out = torch.zeros(6, 4).t()
    out.copy_(d)
    assert torch.equal(out, x)
    # host -> non-contiguous device destination
    dst = torch.zeros(6, 4, device="tpu").t()
    dst.copy_(x)
    assert torch.equal(dst.cpu(), x)


def test_broadcasting_copy():
    d = torch.zeros(3, 4, device="tpu")
    d.copy_(torch.arange(4.0))
    assert torch.equal(d.cpu(), torch.arange(4.0).expand(3, 4))
    d.copy_(torch.tensor([1.0, 2.0, 3.0], device="tpu").unsqueeze(1))
    assert torch.equal(d.cpu(), torch.tensor([[1.0], [2.0], [3.0]]).expand(3, 4))


def test_views_alias_storage():
    d = torch.zeros(4, 6, device="tpu")
    v = d.view(24)
    assert v.data_ptr() == d.data_ptr()
    assert d.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
    t = d.t()
    s = d[1]
    assert t.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()
    assert s.storage_offset() == 6
    u = d.unfold(1, 2, 2)
    assert u.shape == (4, 3, 2) and u.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()


def test_inplace_on_views_writes_through_every_alias():
    base = torch.zeros(4, 6, device="tpu")
    ref = torch.zeros(4, 6)
    for dev_t, cpu_t in [(base, ref)]:
        dev_t[1].fill_(1.0); cpu_t[1].fill_(1.0)
        dev_t[:, 2].add_(5.0); cpu_t[:, 2].add_(5.0)
        dev_t.t()[3].mul_(2.0); cpu_t.t()[3].mul_(2.0)
        dev_t[::2, ::3].sub_(7.0); cpu_t[::2, ::3].sub_(7.0)
        dev_t.view(24)[5:9].add_(torch.arange(4.0, device="tpu")); cpu_t.view(24)[5:9].add_(torch.arange(4.0))
    assert torch.equal(base.cpu(), ref)
    flat = base.view(-1)
    assert torch.equal(flat.cpu(), ref.view(-1))


def test_setitem_and_indexing_views():
    d = torch.zeros(5, 5, device="tpu")
    c = torch.zeros(5, 5)
    d[2:4, 1:3] = 3.0
    c[2:4, 1:3] = 3.0
    d[0] = torch.arange(5.0, device="tpu")
    c[0] = torch.arange(5.0)
    assert torch.equal(d.cpu(), c)


def test_as_strided_reads_and_writes():
    x = torch.arange(20.0)
    d = x.to("tpu")
    for size, stride, off in [((3, 3), (4, 1), 2), ((2, 4), (1, 5), 0), ((4,), (5,), 1),
                              ((3, 2), (0, 1), 3)]:
        assert torch.equal(d.as_strided(size, stride, off).cpu(), x.as_strided(size, stride, off))
    d.as_strided((2, 3), (6, 2), 1).fill_(-1.0)
    x.as_strided((2, 3), (6, 2), 1).fill_(-1.0)
    assert torch.equal(d.cpu(), x)


def test_expand_and_broadcast_views_read_correctly():
    x = torch.randn(3, 1)
    d = x.to("tpu")
    assert torch.equal(d.expand(3, 4).cpu(), x.expand(3, 4))
    assert torch.equal((d.expand(3, 4) + 1).cpu(), x.expand(3, 4) + 1)


def test_empty_resize_and_set():
    d = torch.empty(0, device="tpu")
    d.resize_(6)
    d.fill_(2.0)
    assert torch.equal(d.cpu(), torch.full((6,), 2.0))
    d.resize_(2, 5)
    d[1].fill_(4.0)
    out = d.cpu()
    assert out.shape == (2, 5)
    assert torch.equal(out[0, :5], torch.full((5,), 2.0)[:5]) and torch.equal(out[1], torch.full((5,), 4.0))
    src = torch.arange(6.0, device="tpu")
    e = torch.empty(0, device="tpu")
    e.set_(src)
    assert e.untyped_storage().data_ptr() == src.untyped_storage().data_ptr()
    e.set_(src.untyped_storage(), 2, (2, 2), (2, 1))
    assert torch.equal(e.cpu(), torch.arange(6.0).as_strided((2, 2), (2, 1), 2))
    src.add_(1)
    assert torch.equal(e.cpu(), torch.arange(6.0).as_strided((2, 2), (2, 1), 2) + 1)


def test_resize_keeps_strides_of_the_same_sizes():
    # resize_ / resize_as_ to the sizes a tensor has changes nothing (a
    # transposed tensor keeps its values and strides); a memory_format
    # restrides, as on the CPU
    x = torch.arange(6.0).reshape(3, 2).t()
    for dev in ("cpu", "tpu"):
        y = x.to(dev).clone(memory_format=torch.preserve_format)
        assert y.stride() == (1, 2)
        y.resize_as_(torch.empty(2, 3, device=dev))
        assert y.stride() == (1, 2) and torch.equal(y.cpu(), x), dev
        y.resize_(2, 3, memory_format=torch.contiguous_format)
        assert y.stride() == (3, 1), dev
        with pytest.raises(RuntimeError, match="memory format"):
            y.resize_(2, 3, memory_format=torch.preserve_format)


def test_zero_size_and_scalars():
    z = torch.zeros(0, 3, device="tpu")
    assert z.cpu().shape == (0, 3)
    assert (z + 1).shape == (0, 3)
    s = torch.tensor(3.5, device="tpu")
    assert s.dim() == 0 and s.item() == 3.5
    assert torch.tensor(True, device="tpu").item() is True
    assert torch.tensor(7, device="tpu").item() == 7
    assert float(torch.ones(1, device="tpu")) == 1.0


def test_printing_a_tpu_tensor():
    torch.tpu._reset_cache_stats()
    s = str(torch.arange(4.0, device="tpu"))
    assert s == "tensor([0., 1., 2., 3.], device='tpu:0')"
    x = torch.ones(2, device="tpu", requires_grad=True) * 3
    assert repr(x) == "tensor([3., 3.], device='tpu:0', grad_fn=<MulBackward0>)"
    assert "..." in str(torch.zeros(5000, device="tpu"))
    assert torch.tpu.fallback_counts() == {}


def test_storage_data_ptrs_unique_and_spaced():
    ts = [torch.empty(100, device="tpu") for _ in range(50)]
    ranges = sorted((t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in ts)
    for (a, n), (b, _) in zip(ranges, ranges[1:]):
        assert a + n <= b


def test_tied_weights_stay_tied():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    m = torch.nn.ModuleDict({"emb": emb, "head": head}).to("tpu")
    assert m["emb"].weight is m["head"].weight
    assert m["emb"].weight.data_ptr() == m["head"].weight.data_ptr()


def test_copies_of_conjugate_and_negative_views():
    z = torch.tensor([1 + 2j, 3 - 1j])
    d = z.to("tpu")
    assert torch.equal(d.conj().cpu(), z.conj())
    assert torch.equal(z.conj().to("tpu").cpu(), z.conj())
    e = torch.zeros(2, dtype=torch.complex64, device="tpu")
    e.conj().copy_(z)  # writes through the conjugate view
    assert torch.equal(e.cpu(), z.conj())
    n = torch._neg_view(torch.tensor([1.0, -2.0]))
    assert torch.equal(n.to("tpu").cpu(), torch.tensor([-1.0, 2.0]))


def test_deepcopy_of_a_module_on_tpu():
    import copy
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3).to("tpu")
    m2 = copy.deepcopy(m)
    assert m2.weight.device.type == "tpu"
    assert m2.weight.data_ptr() != m.weight.data_ptr()
    x = torch.randn(2, 4).to("tpu")
    assert torch.equal(m2(x).cpu(), m(x).cpu())
    m2.weight.data.add_(1)  # the copy owns its storage
    assert not torch.equal(m2.weight.cpu(), m.weight.cpu())


def test_high_rank_tensors():
    # Video VAEs and patchifiers reshape to 10 dims (LTX, Cosmos, Lumina):
    # copies, permutes, views and math up to rank 16 behave as on the CPU.
    x = torch.randn(2, 1, 3, 1, 2, 1, 2, 1, 2, 3)
    perm = tuple(reversed(range(10)))
    t = x.to("tpu")
    assert torch.equal(t.permute(perm).contiguous().cpu(), x.permute(perm).contiguous())
    assert torch.equal((t.permute(perm) * 2 + 1).cpu(), x.permute(perm) * 2 + 1)
    assert torch.equal(t.sum(dim=(1, 3, 8)).cpu(), x.sum(dim=(1, 3, 8)))
    y = torch.randn([2] * 16)
    assert torch.equal((y.to("tpu") + 1).cpu(), y + 1)


def test_rank_above_the_limit_is_refused():
    with pytest.raises(RuntimeError, match="rank 17 .*max 16"):
        torch.zeros([1] * 17).to("tpu")
