"""rrelu_with_noise (F.rrelu) on tpu, the CPU fallback off. Evaluation mode
is deterministic and must equal the CPU. Training draws from the device
generator (a different stream than the CPU's), so it is checked against the
CPU kernel's definition: slopes r in [lower, upper) for x <= 0, noise r
there and 1 elsewhere, output x * noise, gradient noise (CPU's backward fed
the same noise), and the same draws after the same manual_seed."""
import pytest
import torch
import torch.nn.functional as F


pytestmark = pytest.mark.usefixtures("no_fallback")


def sample(n=4000):
    x = torch.randn(n, generator=torch.Generator().manual_seed(0))
    x[:4] = torch.tensor([0.0, -0.0, 2.0, -3.0])
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_eval_matches_cpu(dtype):
    x = sample().to(dtype)
    want = F.rrelu(x, 0.1, 0.3, training=False)
    torch.testing.assert_close(F.rrelu(x.to("tpu"), 0.1, 0.3, training=False).cpu(), want,
                               rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_training_semantics_and_gradient(dtype):
    lower, upper = 0.1, 0.3
    x = sample().to(dtype)
    noise = torch.empty_like(x, device="tpu")
    xt = x.to("tpu").requires_grad_()
    out = torch.ops.aten.rrelu_with_noise(xt, noise, lower, upper, True)
    out.backward(torch.ones_like(out))
    out, noise, grad = out.detach().cpu(), noise.cpu(), xt.grad.cpu()
    neg = x <= 0
    assert torch.equal(noise[~neg], torch.ones_like(noise[~neg]))
    r = noise[neg]
    assert bool(((r >= lower) & (r < upper)).all())
    # 4000 samples: the mean of ~2000 U[0.1, 0.3) slopes is within 0.01 of
    # 0.2 with overwhelming probability (its standard deviation is ~0.0013).
    assert abs(r.mean().item() - 0.2) < 0.01
    torch.testing.assert_close(out, x * noise, rtol=0, atol=0)
    want_grad = torch.ops.aten.rrelu_with_noise_backward(
        torch.ones_like(x), x, noise, lower, upper, True, False)
    torch.testing.assert_close(grad, want_grad, rtol=0, atol=0)


def test_training_reproducible_with_seed():
    x = sample().to("tpu")
    torch.manual_seed(7)
    a = F.rrelu(x, training=True).cpu()
    b = F.rrelu(x, training=True).cpu()
    torch.manual_seed(7)
    c = F.rrelu(x, training=True).cpu()
    assert torch.equal(a, c) and not torch.equal(a, b)


def test_inplace_writes_self_and_noise():
    x = sample(50)
    xt, noise = x.to("tpu"), torch.empty(50, device="tpu")
    torch.ops.aten.rrelu_with_noise_(xt, noise, 0.2, 0.4, True)
    torch.testing.assert_close(xt.cpu(), x * noise.cpu(), rtol=0, atol=0)
