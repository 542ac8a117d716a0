"""Gradients of F.glu (aten::glu_backward) and F.prelu
(aten::_prelu_kernel_backward) on tpu against PyTorch's CPU results, the
CPU fallback off. A couple of products per element: float32 rtol 1e-5 /
atol 1e-6, float64 1e-12."""
import pytest
import torch
import torch.nn.functional as F

from test_distance_backward import grads

pytestmark = pytest.mark.usefixtures("no_fallback")

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_glu_backward(dim, dtype):
    x = torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(0), dtype=dtype) * 3
    want, got = grads(lambda t: F.glu(t, dim), x)
    torch.testing.assert_close(got[0], want[0], **TOL[dtype])


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prelu_backward(channels, dtype):
    # one shared slope or one per channel; zeros in x sit on the kink
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 5, generator=g, dtype=dtype)
    x[0, 0, :2] = 0
    w = torch.rand(channels, generator=g, dtype=dtype) * 0.5
    want, got = grads(F.prelu, x, w)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL[dtype])
