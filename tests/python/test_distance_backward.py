"""Gradients of torch.cdist and F.pdist (aten::_cdist_backward,
aten::_pdist_backward) on tpu against PyTorch's CPU results, the CPU
fallback off, for the p-norm cases of the CPU kernel, with repeated rows
(zero distances) and broadcast batches.

Tolerance: each gradient is a short sum of |diff|^(p-1) / dist^(p-1) terms
that XLA may order differently: float32 rtol 1e-4 / atol 1e-5 (powers with
non-integer p lose a few more ulps than the sums), float64 1e-10."""
import pytest
import torch
import torch.nn.functional as F

PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}


pytestmark = pytest.mark.usefixtures("no_fallback")


def grads(fn, *xs):
    out = []
    for dev in ("cpu", "tpu"):
        ts = [x.detach().to(dev).requires_grad_() for x in xs]
        y = fn(*ts)
        w = torch.linspace(-1, 2, y.numel(), dtype=y.dtype).view(y.shape).to(dev)
        (y * w).sum().backward()
        out.append([t.grad.cpu() for t in ts])
    return out


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist_backward(p, dtype):
    g = torch.Generator().manual_seed(0)
    x1 = torch.randn(2, 5, 3, generator=g, dtype=dtype)
    x2 = torch.randn(1, 4, 3, generator=g, dtype=dtype)  # batch broadcast
    x2[0, 1] = x1[1, 2]  # a zero distance
    want, got = grads(lambda a, b: torch.cdist(a, b, p=p), x1, x2)
    for w, t in zip(want, got):
        torch.testing.assert_close(t, w, **TOL[dtype])


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pdist_backward(p, dtype):
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=dtype)
    x[4] = x[1]  # a zero distance
    (want,), (got,) = grads(lambda a: F.pdist(a, p=p), x)
    torch.testing.assert_close(got, want, **TOL[dtype])
