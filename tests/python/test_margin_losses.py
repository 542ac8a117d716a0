"""multi_margin_loss and multilabel_margin_loss (forward and input gradient)
on tpu against PyTorch's CPU results, the CPU fallback off.

Tolerance: the same hinge terms summed per row (XLA may sum in another
order), so float32 is held to rtol 1e-5 / atol 1e-6 and float64 to 1e-12."""
import pytest
import torch
import torch.nn.functional as F

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-12, atol=1e-12)}


pytestmark = pytest.mark.usefixtures("no_fallback")


def both(fn, x, *args, **kw):
    """fn on CPU and on tpu with x requiring grad; returns (out, grad) pairs."""
    res = []
    for dev in ("cpu", "tpu"):
        xd = x.detach().to(dev).requires_grad_()
        a = [t.to(dev) if isinstance(t, torch.Tensor) else t for t in args]
        k = {n: (v.to(dev) if isinstance(v, torch.Tensor) else v) for n, v in kw.items()}
        out = fn(xd, *a, **k)
        upstream = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).view(out.shape)
        out.backward(upstream.to(dev))
        res.append((out.detach().cpu(), xd.grad.cpu()))
    return res


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 0.7, True), (1, 2.5, True)])
def test_multi_margin_loss(dtype, reduction, p, margin, weighted):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, generator=g, dtype=dtype)
    y = torch.tensor([0, 4, 2, 2, 1, 3])
    w = torch.rand(5, generator=g, dtype=dtype) + 0.5 if weighted else None
    (o1, g1), (o2, g2) = both(F.multi_margin_loss, x, y, p=p, margin=margin, weight=w,
                              reduction=reduction)
    torch.testing.assert_close(o2, o1, **TOL[dtype])
    torch.testing.assert_close(g2, g1, **TOL[dtype])


def test_multi_margin_loss_single_sample():
    # (A 0-d target gives a 0-d loss on the CPU but [1] from PyTorch's meta
    # kernel, whose shape tpu results take; a [1] target agrees on both.)
    x, y = torch.tensor([0.3, -1.2, 0.9, 0.1]), torch.tensor([2])
    for reduction in ("none", "mean"):
        (o1, g1), (o2, g2) = both(F.multi_margin_loss, x, y, reduction=reduction)
        torch.testing.assert_close(o2, o1, **TOL[torch.float32])
        torch.testing.assert_close(g2, g1, **TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(dtype, reduction):
    # Targets end at the first -1 (later labels ignored); a repeated label
    # counts twice; a row with no labels contributes 0.
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 4, generator=g, dtype=dtype)
    y = torch.tensor([[3, 0, -1, 1], [1, 1, 2, -1], [-1, 2, 0, 1], [0, 1, 2, 3], [2, -1, -1, -1]])
    (o1, g1), (o2, g2) = both(F.multilabel_margin_loss, x, y, reduction=reduction)
    torch.testing.assert_close(o2, o1, **TOL[dtype])
    torch.testing.assert_close(g2, g1, **TOL[dtype])
    # is_target, the second result of the forward op
    want = torch.ops.aten.multilabel_margin_loss_forward(x, y, 1)[1]
    got = torch.ops.aten.multilabel_margin_loss_forward(x.to("tpu"), y.to("tpu"), 1)[1]
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss_1d(reduction):
    # An unbatched input gives a 0-d loss on the CPU for every reduction
    # ('none' too, where PyTorch's meta kernel says [1]): tpu's shape is the
    # CPU's (assert_close checks it).
    x, y = torch.tensor([0.2, -0.4, 1.1]), torch.tensor([2, 0, -1])
    (o1, g1), (o2, g2) = both(F.multilabel_margin_loss, x, y, reduction=reduction)
    torch.testing.assert_close(o2, o1, **TOL[torch.float32])
    torch.testing.assert_close(g2, g1, **TOL[torch.float32])
