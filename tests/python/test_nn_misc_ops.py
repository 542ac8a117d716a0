"""Assorted NN and tensor ops (attention, shrink activations, losses built on
xlogy/sgn, trace, aminmax, cross, take/put, index_copy, isin, channel_shuffle,
renorm, unfold backward, batch norm with update, unique_consecutive,
repeat_interleave, fractional max pooling, channels-last result layouts,
group norm of channels-last inputs, the padding-mask check of transformer
encoders) on tpu against PyTorch's CPU results, forward and gradients, the
CPU fallback off.

Tolerances: float32 rtol=atol=1e-5: attention and norms sum a few dozen
products in a different order than the CPU (a few ulp each). bfloat16: both
sides compute in float32 and round once, but inputs to that rounding may
differ by an ulp: rtol=atol=3.2e-2 (2 ulp of an 8-bit mantissa) of the
result's scale. Integer and boolean results must match exactly."""
import copy

import pytest
import torch
import torch.nn.functional as F

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=3.2e-2, atol=3.2e-2)}
FLOATS = [torch.float32, torch.bfloat16]


pytestmark = pytest.mark.usefixtures("no_fallback")


def randn(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def close(got, want, dtype):
    assert got.device.type == "tpu" and got.dtype == want.dtype and got.shape == want.shape
    t = TOL[dtype]
    scale = max(1.0, want.detach().abs().max().item()) if want.numel() else 1.0
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=t["rtol"], atol=t["atol"] * scale)


def check(fn, shapes, dtype, seed=0, grad=True):
    """fn(*tensors) on CPU and tpu: the result and every input's gradient
    under the same cotangent."""
    xs = [randn(s, dtype, seed + i) for i, s in enumerate(shapes)]
    cpu = [x.clone().requires_grad_(grad) for x in xs]
    dev = [x.to("tpu").requires_grad_(grad) for x in xs]
    want, got = fn(*cpu), fn(*dev)
    close(got, want, dtype)
    if not grad:
        return
    cot = randn(want.shape, dtype, seed + 100)
    want.backward(cot)
    got.backward(cot.to("tpu"))
    for c, d in zip(cpu, dev):
        close(d.grad, c.grad, dtype)


SDPA = {
    "plain": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)]),
    "causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
               [(2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8)]),
    "float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                   [(2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8), (4, 6)]),
    "scale": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), [(1, 2, 4, 16)] * 3),
    "gqa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True),
            [(2, 4, 5, 8), (2, 2, 5, 8), (2, 2, 5, 8)]),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(SDPA))
def test_sdpa(name, dtype):
    fn, shapes = SDPA[name]
    check(fn, shapes, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sdpa_bool_mask(dtype):
    mask = torch.rand(4, 6, generator=torch.Generator().manual_seed(3)) > 0.3
    mask[:, 0] = True  # every query sees at least one key
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.device)),
          [(2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8)], dtype)


POINTWISE = {
    "hardshrink": lambda x: F.hardshrink(x, 0.3),
    "softshrink": lambda x: F.softshrink(x, 0.4),
    "softsign": F.softsign,
    "sgn": torch.sgn,
    "l1_loss": lambda x: F.l1_loss(x, torch.zeros_like(x) + 0.1),
    "smooth_l1_loss": lambda x: F.smooth_l1_loss(x, torch.zeros_like(x), beta=0.5),
    "normalize": lambda x: F.normalize(x, dim=1),
    "kl_div": lambda x: F.kl_div(x.log_softmax(-1), x.softmax(0), reduction="batchmean"),
    "xlogy": lambda x: torch.xlogy(x.relu(), x.abs() + 0.5),
    "trace": lambda x: torch.trace(x),
    "renorm": lambda x: torch.renorm(x, 2, 0, 1.0),
    "renorm_inf": lambda x: torch.renorm(x, float("inf"), 1, 0.5),
    "cross": lambda x: torch.linalg.cross(x[:, :3], x[:, 3:]),
    "take": lambda x: torch.take(x, torch.tensor([0, 5, -1, 7, 5], device=x.device)),
    "unfold": lambda x: x.unfold(1, 3, 2),
    "channel_shuffle": lambda x: F.channel_shuffle(x.reshape(1, 6, 2, 3), 2),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_misc_ops(name, dtype):
    check(POINTWISE[name], [(6, 6)], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_aminmax(dtype):
    x = randn((4, 5), dtype, 1)
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        want, got = torch.aminmax(x, **kw), torch.aminmax(x.to("tpu"), **kw)
        close(got.min, want.min, dtype)
        close(got.max, want.max, dtype)


def test_put_and_index_copy():
    x = randn((4, 5), torch.float32, 2)
    idx = torch.tensor([0, 7, -1, 7])
    src = torch.tensor([1.0, 2.0, 3.0, 4.0])
    want = x.clone().put_(idx, src, accumulate=True)
    got = x.to("tpu").put_(idx.to("tpu"), src.to("tpu"), accumulate=True)
    close(got, want, torch.float32)
    rows, s = torch.tensor([3, 0]), randn((2, 5), torch.float32, 3)
    close(x.to("tpu").index_copy(0, rows.to("tpu"), s.to("tpu")), x.index_copy(0, rows, s), torch.float32)


def test_isin():
    e, t = torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([2, 6, 9])
    for invert in (False, True):
        assert torch.equal(torch.isin(e.to("tpu"), t.to("tpu"), invert=invert).cpu(),
                           torch.isin(e, t, invert=invert))


def test_unique_consecutive_and_repeat_interleave():
    x = torch.tensor([1, 1, 2, 2, 3, 1, 1, 2])
    want = torch.unique_consecutive(x, return_inverse=True, return_counts=True)
    got = torch.unique_consecutive(x.to("tpu"), return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)
    r = torch.tensor([2, 0, 3, 1])
    assert torch.equal(torch.repeat_interleave(r.to("tpu")).cpu(), torch.repeat_interleave(r))
    y = randn((4, 2), torch.float32, 4)
    close(torch.repeat_interleave(y.to("tpu"), r.to("tpu"), dim=0), torch.repeat_interleave(y, r, dim=0),
          torch.float32)


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_with_update(dtype):
    x = randn((3, 4, 5), dtype, 5)
    rm, rv = torch.zeros(4, dtype=dtype), torch.ones(4, dtype=dtype)
    w, b = randn((4,), dtype, 6), randn((4,), dtype, 7)
    drm, drv = rm.to("tpu"), rv.to("tpu")
    # (PyTorch's meta kernel for this op needs weight and bias tensors.)
    want = torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)
    got = torch.ops.aten._batch_norm_with_update(x.to("tpu"), w.to("tpu"), b.to("tpu"), drm, drv, 0.1, 1e-5)
    close(got[0], want[0], dtype)
    close(drm, rm, dtype)
    close(drv, rv, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_unpool2d(dtype):
    x = randn((2, 3, 6, 8), dtype, 8)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    close(F.max_unpool2d(y.to("tpu"), idx.to("tpu"), 2), F.max_unpool2d(y, idx, 2), dtype)


@pytest.mark.parametrize("op", ["native_batch_norm", "_native_batch_norm_legit",
                                "_native_batch_norm_legit_no_training"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eval_batch_norm_saves_no_statistics_as_on_cpu(op, dtype):
    """In evaluation the CPU kernel returns save_mean and save_invstd empty
    (PyTorch's meta kernels say [C]); tpu returns what the CPU does."""
    x = torch.randn(2, 3, 4, 4).to(dtype)
    rm, rv = torch.rand(3), torch.rand(3) + 0.5

    def call(device):
        a = [x.to(device), None, None, rm.to(device), rv.to(device)]
        f = getattr(torch.ops.aten, op)
        return f(*a, 0.1, 1e-5) if op.endswith("no_training") else f(*a, False, 0.1, 1e-5)

    want, got = call("cpu"), call("tpu")
    for w, g in zip(want, got):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-2 if dtype == torch.bfloat16
                               else 1e-5, atol=1e-2 if dtype == torch.bfloat16 else 1e-5)


# Layouts the CPU's group norm accepts: channels-last with a size-1 batch
# whose stride is unusual (Diffusers' attention blocks make one), plain
# channels-last, a transposed view and a slice.
GROUP_NORM_LAYOUTS = {
    "channels_last_batch1": ((1, 64, 8, 8), lambda t: torch.empty_strided(
        t.shape, (4096, 1, 512, 64), device=t.device).copy_(t)),
    "channels_last": ((2, 6, 5, 4), lambda t: t.contiguous(memory_format=torch.channels_last)),
    "transposed": ((2, 6, 5, 4), lambda t: t.transpose(2, 3).contiguous().transpose(2, 3)),
    "sliced": ((2, 6, 5, 4), lambda t: torch.cat([t, t], 3)[..., 1:5]),
}


@pytest.mark.parametrize("layout", list(GROUP_NORM_LAYOUTS))
def test_group_norm_accepts_the_cpus_layouts(layout):
    shape, relayout = GROUP_NORM_LAYOUTS[layout]
    torch.manual_seed(0)
    x = torch.randn(shape)
    w, b, g = torch.randn(shape[1]), torch.randn(shape[1]), torch.randn(shape)
    results = []
    for device in ("cpu", "tpu"):
        xd = relayout(x.to(device)).detach().requires_grad_()
        wd, bd = (t.detach().to(device).requires_grad_() for t in (w, b))
        out = F.group_norm(xd, 2, wd, bd)
        out.backward(g.to(device))
        results.append([t.detach().cpu() for t in (out, xd.grad, wd.grad, bd.grad)])
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ns,shape,kernel,out", [
    (2, (2, 3, 9, 11), (2, 3), (4, 5)), (2, (3, 7, 6), 2, (3, 2)),
    (3, (2, 2, 7, 8, 9), (2, 2, 3), (3, 4, 5)), (3, (2, 5, 6, 7), 2, (2, 3, 3))])
def test_fractional_max_pool(ns, shape, kernel, out, dtype):
    # The windows come from per-plane random samples; given the same
    # samples, values and gradients match the CPU's and the indices are
    # exactly its (in bfloat16 too: the window starts are computed in the
    # input dtype, as the CPU kernel does). Unbatched inputs get samples of
    # batch 2, of which the CPU reads the first.
    pool = F.fractional_max_pool2d if ns == 2 else F.fractional_max_pool3d
    x = randn(shape, dtype, 11)
    planes = shape[:-ns] if len(shape) == ns + 2 else (2,) + shape[:-ns]
    u = torch.rand(*planes, ns, generator=torch.Generator().manual_seed(12)).to(dtype)
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    want, want_i = pool(xc, kernel, output_size=out, _random_samples=u, return_indices=True)
    got, got_i = pool(xd, kernel, output_size=out, _random_samples=u.to("tpu"), return_indices=True)
    assert torch.equal(got_i.cpu(), want_i)
    close(got, want, dtype)
    cot = randn(want.shape, dtype, 13)
    want.backward(cot)
    got.backward(cot.to("tpu"))
    close(xd.grad, xc.grad, dtype)


CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.Conv2d(3, 4, 3), (2, 3, 6, 6)),
    (lambda: torch.nn.Conv3d(3, 4, 2), (2, 3, 4, 4, 4)),
    (lambda: torch.nn.ConvTranspose2d(3, 4, 3, stride=2), (2, 3, 5, 5)),
    (lambda: torch.nn.ReflectionPad2d((1, 2, 2, 1)), (2, 3, 5, 6)),
    (lambda: torch.nn.ReflectionPad3d(1), (2, 3, 4, 4, 4)),
    (lambda: torch.nn.ReplicationPad2d(2), (2, 3, 5, 6)),
    (lambda: torch.nn.ReplicationPad3d((1, 0, 2, 1, 0, 1)), (2, 3, 4, 4, 4)),
])
@pytest.mark.parametrize("where", ["input", "module"])
def test_channels_last_layouts_follow_the_cpu(make, shape, where):
    # A convolution gives channels-last results when its input or weight is
    # channels-last, and 2-d/3-d reflection and replication padding keep
    # their input's layout, forward and backward, as on the CPU (and as
    # PyTorch's module memory-format tests expect); values are unchanged.
    torch.manual_seed(0)
    fmt = CHANNELS_LAST[len(shape)]
    m = make()
    x = randn(shape, torch.float32, 14)
    cot_seed = 15

    def run(device):
        mm = copy.deepcopy(m).to(device)
        xi = x.to(device, copy=True)
        if where == "module":
            mm = mm.to(memory_format=fmt)
        else:
            xi = xi.contiguous(memory_format=fmt)
        xi.requires_grad_()
        y = mm(xi)
        cot = torch.empty_like(y).copy_(randn(y.shape, torch.float32, cot_seed))
        y.backward(cot)
        return y, xi.grad

    (yc, gc), (yd, gd) = run("cpu"), run("tpu")
    for c, d in ((yc, yd), (gc, gd)):
        assert d.is_contiguous(memory_format=fmt) == c.is_contiguous(memory_format=fmt)
        assert d.is_contiguous() == c.is_contiguous()
        close(d, c, torch.float32)


@pytest.mark.parametrize("dtype", FLOATS)
def test_group_norm_of_a_channels_last_input(dtype):
    # group_norm hands a channels-last input to native_group_norm as it does
    # on the CPU; PyTorch's inherited composite kernel then viewed it as
    # contiguous and failed. tpu runs its own: values, gradients and the
    # output's layout as on the CPU.
    x = randn((4, 6, 2, 3), dtype, 16).contiguous(memory_format=torch.channels_last)
    w, b = randn((6,), dtype, 17), randn((6,), dtype, 18)
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    want = F.group_norm(xc, 3, w, b)
    got = F.group_norm(xd, 3, w.to("tpu"), b.to("tpu"))
    assert got.is_contiguous(memory_format=torch.channels_last) == \
        want.is_contiguous(memory_format=torch.channels_last)
    close(got, want, dtype)
    cot = randn(want.shape, dtype, 19)
    want.backward(cot)
    got.backward(cot.to("tpu"))
    close(xd.grad, xc.grad, dtype)


@pytest.mark.parametrize("rows", [[4, 2, 0], [3, 3, 3], [0, 0, 0]])
@pytest.mark.parametrize("hole", [False, True])
def test_nested_tensor_from_mask_left_aligned(rows, hole):
    # TransformerEncoder asks, in evaluation, whether its padding mask is
    # left-aligned (each row: trues, then only falses) before choosing its
    # nested-tensor fast path.
    mask = torch.arange(4)[None, :] < torch.tensor(rows)[:, None]
    if hole:
        mask[0, 0] = not mask[0, 0]
    src = torch.zeros(3, 4, 2)
    want = torch._nested_tensor_from_mask_left_aligned(src, mask)
    assert torch._nested_tensor_from_mask_left_aligned(src.to("tpu"), mask.to("tpu")) == want


def test_transformer_encoder_eval_with_padding_mask():
    # The padding-mask check above is what an evaluation-mode encoder with
    # gradients on runs; its results and gradients are the CPU's.
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True),
                                      2, enable_nested_tensor=True).eval()
    x = randn((2, 5, 8), torch.float32, 20)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])

    def run(device):
        m = copy.deepcopy(enc).to(device)
        xi = x.to(device, copy=True).requires_grad_()
        y = m(xi, src_key_padding_mask=pad.to(device))
        y.backward(randn(y.shape, torch.float32, 21).to(device))
        return y, xi.grad

    for got, want in zip(run("tpu"), run("cpu")):
        close(got, want, torch.float32)
