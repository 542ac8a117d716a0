"""Spatial / NN ops (convolution, pooling, resampling, padding, im2col, norms)
on tpu against PyTorch's CPU results, forward and gradients, the CPU
fallback off.

Tolerances: float32 rtol=atol=1e-5: convolutions and window sums associate
their (up to a few hundred) products differently from the CPU's kernels (a
few ulp per term). bfloat16: both sides compute in float32 and round once,
but the CPU rounds some intermediates (e.g. replication-pad gradients sum in
bf16), so results may differ by 2 ulp of an 8-bit mantissa: rtol=atol=3.2e-2
of the result's scale."""
import pytest
import torch
import torch.nn.functional as F

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=3.2e-2, atol=3.2e-2)}
FLOATS = [torch.float32, torch.bfloat16]


pytestmark = pytest.mark.usefixtures("no_fallback")


def randn(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def check(fn, shapes, dtype, seed=0):
    """fn(*tensors) on CPU and tpu: the (first) result and every input's
    gradient under the same cotangent; a tuple's second entry (pool indices)
    must match exactly."""
    xs = [randn(s, dtype, seed + i) for i, s in enumerate(shapes)]
    cpu = [x.clone().requires_grad_() for x in xs]
    dev = [x.to("tpu").requires_grad_() for x in xs]
    want, got = fn(*cpu), fn(*dev)
    if isinstance(want, tuple):
        assert torch.equal(got[1].cpu(), want[1])
        want, got = want[0], got[0]
    assert got.device.type == "tpu" and got.dtype == want.dtype and got.shape == want.shape
    t = TOL[dtype]
    scale = max(1.0, want.detach().abs().max().item())
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=t["rtol"], atol=t["atol"] * scale)
    cot = randn(want.shape, dtype, seed + 100)
    want.backward(cot)
    got.backward(cot.to("tpu"))
    for c, d in zip(cpu, dev):
        scale = max(1.0, c.grad.abs().max().item())
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=t["rtol"], atol=t["atol"] * scale)


CONV = {
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), [(2, 3, 9), (4, 3, 3), (4,)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
               [(2, 4, 9, 8), (6, 4, 3, 3), (6,)]),
    "conv2d_groups": (lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=2), [(2, 4, 9, 8), (6, 2, 3, 3)]),
    "conv2d_depthwise": (lambda x, w: F.conv2d(x, w, groups=4), [(2, 4, 7, 7), (4, 1, 3, 3)]),
    "conv2d_same": (lambda x, w: F.conv2d(x, w, padding="same"), [(2, 3, 6, 6), (4, 3, 3, 3)]),
    "conv3d": (lambda x, w: F.conv3d(x, w, stride=2, padding=1), [(1, 2, 5, 6, 7), (3, 2, 3, 3, 3)]),
    "conv_transpose1d": (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1),
                         [(2, 3, 5), (3, 4, 3), (4,)]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                                                         groups=3, dilation=(1, 2)), [(2, 6, 5, 4), (6, 2, 3, 3)]),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w, stride=2), [(1, 2, 3, 4, 3), (2, 3, 2, 2, 2)]),
}

X4, X5, X3 = (2, 3, 9, 8), (2, 2, 5, 6, 7), (2, 3, 9)
POOL = {
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, return_indices=True), [X4]),
    "max_pool2d_ceil": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True), [X4]),
    "max_pool2d_dilated": (lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1), dilation=(2, 1), return_indices=True),
                           [X4]),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2), [X3]),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, padding=1, return_indices=True), [X5]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [X4]),
    "avg_pool2d_ceil": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), [X4]),
    "avg_pool2d_no_pad_count": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [X4]),
    "avg_pool2d_divisor": (lambda x: F.avg_pool2d(x, (3, 2), (2, 1), (1, 0), divisor_override=5), [X4]),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1), [X3]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (4, 3)), [X4]),
    "adaptive_avg_pool2d_up": (lambda x: F.adaptive_avg_pool2d(x, (11, 10)), [X4]),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), [X5]),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), [X4]),
    "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, (2, 4, 3), return_indices=True), [X5]),
    "interp_nearest": (lambda x: F.interpolate(x, size=(13, 5)), [X4]),
    "interp_nearest_exact": (lambda x: F.interpolate(x, scale_factor=(1.7, 2.3), mode="nearest-exact"), [X4]),
    "interp_nearest3d": (lambda x: F.interpolate(x, scale_factor=2), [X5]),
    "interp_linear": (lambda x: F.interpolate(x, size=13, mode="linear"), [X3]),
    "interp_bilinear": (lambda x: F.interpolate(x, size=(13, 5), mode="bilinear"), [X4]),
    "interp_bilinear_ac": (lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True), [X4]),
    "interp_bicubic": (lambda x: F.interpolate(x, size=(13, 5), mode="bicubic"), [X4]),
    "interp_bicubic_ac": (lambda x: F.interpolate(x, scale_factor=(1.7, 2.3), mode="bicubic", align_corners=True),
                          [X4]),
    "interp_trilinear": (lambda x: F.interpolate(x, size=(3, 8, 9), mode="trilinear", align_corners=True), [X5]),
    "reflect_pad1d": (lambda x: F.pad(x, (2, 3), mode="reflect"), [X3]),
    "reflect_pad2d": (lambda x: F.pad(x, (2, 3, 1, 0), mode="reflect"), [X4]),
    "reflect_pad3d": (lambda x: F.pad(x, (2, 3, 1, 0, 1, 1), mode="reflect"), [X5]),
    "replicate_pad1d": (lambda x: F.pad(x, (2, 3), mode="replicate"), [X3]),
    "replicate_pad2d": (lambda x: F.pad(x, (2, 3, 1, 0), mode="replicate"), [X4]),
    "replicate_pad3d": (lambda x: F.pad(x, (2, 3, 1, 0, 1, 1), mode="replicate"), [X5]),
    "unfold": (lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [(2, 3, 7, 8)]),
    "fold": (lambda x: F.fold(x, (4, 5), 2), [(8, 12)]),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), [(2, 8, 3, 5)]),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), [(2, 2, 4, 6)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 3, w, b), [(2, 6, 4, 5), (6,), (6,)]),
    "instance_norm": (lambda x: F.instance_norm(x), [X4]),
    "batch_norm_no_stats": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [X4, (3,), (3,)]),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(CONV) + sorted(POOL))
def test_nn_op(name, dtype):
    fn, shapes = {**CONV, **POOL}[name]
    check(fn, shapes, dtype)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_batch_norm_running_stats(dtype, training):
    x, w, b = randn((4, 3, 5, 5), dtype, 1), randn((3,), dtype, 2), randn((3,), dtype, 3)
    stats = [torch.zeros(3, dtype=dtype) + 0.5, torch.ones(3, dtype=dtype) * 2]
    dev = [s.to("tpu") for s in stats]
    want = F.batch_norm(x, stats[0], stats[1], w, b, training=training, momentum=0.3)
    got = F.batch_norm(x.to("tpu"), dev[0], dev[1], w.to("tpu"), b.to("tpu"), training=training,
                       momentum=0.3)
    torch.testing.assert_close(got.cpu(), want, **TOL[dtype])
    for s, d in zip(stats, dev):  # updated in place in training only
        torch.testing.assert_close(d.cpu(), s, **TOL[dtype])


def test_bad_arguments_raise():
    x = torch.randn(2, 4, 5, 5, device="tpu")
    with pytest.raises(RuntimeError):
        F.conv2d(x, torch.randn(3, 3, 3, 3, device="tpu"))  # 4 channels vs 3
    with pytest.raises(RuntimeError):
        F.pad(x, (5, 5), mode="reflect")  # padding >= size


@pytest.mark.parametrize("mode,shape", [("linear", (2, 3, 37)), ("bilinear", (1, 2, 19, 23)),
                                        ("bicubic", (1, 2, 19, 23))])
@pytest.mark.parametrize("align", [False, True])
def test_float64_interpolation_keeps_double_coordinates(mode, shape, align):
    # PyTorch computes float64 inputs' source coordinates and weights in
    # double; in float they were 1e-6 off
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for kw in (dict(scale_factor=1.37), dict(size=tuple(2 * s - 3 for s in shape[2:]))):
        want = F.interpolate(x, mode=mode, align_corners=align, **kw)
        got = F.interpolate(x.to("tpu"), mode=mode, align_corners=align, **kw).cpu()
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
