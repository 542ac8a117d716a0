"""Antialiased bilinear and bicubic resizing (F.interpolate(...,
antialias=True), aten::_upsample_bilinear2d_aa / _upsample_bicubic2d_aa and
their backward) on tpu against PyTorch's CPU
results, the CPU fallback off.

Tolerance: the tap weights are built like the CPU kernel's (in the input's
opmath dtype); only the order of the few multiply-adds per output differs,
so float32 is held to rtol 1e-5 / atol 1e-6 and float64 to 1e-12."""
import pytest
import torch
import torch.nn.functional as F

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-12, atol=1e-12)}
CASES = [  # (input h, w), output size or scale factor
    ((12, 17), dict(size=(4, 5))),        # downscale 3x / 3.4x
    ((7, 9), dict(size=(13, 20))),        # upscale
    ((10, 10), dict(size=(10, 3))),       # identity rows, strong column shrink
    ((9, 16), dict(scale_factor=0.37)),   # scale given
    ((1, 8), dict(size=(3, 2))),
]


pytestmark = pytest.mark.usefixtures("no_fallback")


@pytest.mark.parametrize("shape,kw", CASES)
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_resize(shape, kw, align, dtype, mode):
    x = torch.randn(2, 3, *shape, generator=torch.Generator().manual_seed(0), dtype=dtype)
    res = []
    for dev in ("cpu", "tpu"):
        xd = x.detach().to(dev).requires_grad_()
        y = F.interpolate(xd, mode=mode, antialias=True, align_corners=align, **kw)
        w = torch.linspace(-1, 1, y.numel(), dtype=dtype).view(y.shape).to(dev)
        (y * w).sum().backward()
        res.append((y.detach().cpu(), xd.grad.cpu()))
    (y1, g1), (y2, g2) = res
    torch.testing.assert_close(y2, y1, **TOL[dtype])
    torch.testing.assert_close(g2, g1, **TOL[dtype])
