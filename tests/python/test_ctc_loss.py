"""CTC loss on tpu (forward and gradient lowered: the alpha and beta
recursions run as device loops) against PyTorch's CPU kernel, eager and
compiled. Tolerances: float64 at 1e-10 (the same recursion, another
summation order); float32 at 1e-4 relative, as T log-space steps compound
float32's rounding."""
import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("no_fallback")

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-5)}
T, N, C = 24, 4, 7


def _case(dtype, blank=0, concatenated=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    log_probs = torch.randn(T, N, C, generator=g, dtype=dtype).log_softmax(-1).detach()
    input_lengths = [T, 19, 24, 11]
    target_lengths = [6, 0, 9, 4]  # an empty target, the longest one
    labels = [c for c in range(C) if c != blank]
    targets = torch.tensor(labels)[torch.randint(0, len(labels), (N, 9), generator=g)]
    targets[0, 1] = targets[0, 2]  # a repeated label: needs a blank between
    if concatenated:
        targets = torch.cat([targets[n, :k] for n, k in enumerate(target_lengths)])
    else:
        targets[3, 4:] = -100  # padding past the length is never read
    return log_probs, targets, input_lengths, target_lengths


def _loss_and_grad(device, log_probs, targets, il, tl, fn=F.ctc_loss, **kw):
    lp = log_probs.detach().to(device).requires_grad_()
    loss = fn(lp, targets.to(device), il, tl, **kw)
    weights = torch.arange(1.0, loss.numel() + 1, dtype=loss.dtype, device=device)
    (loss * weights.view(loss.shape)).sum().backward()
    return loss.detach().cpu(), lp.grad.cpu()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concatenated", [False, True], ids=["padded", "concatenated"])
def test_ctc_loss_matches_cpu(dtype, reduction, concatenated):
    case = _case(dtype, concatenated=concatenated)
    want = _loss_and_grad("cpu", *case, reduction=reduction)
    got = _loss_and_grad("tpu", *case, reduction=reduction)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[dtype])


def test_ctc_loss_other_blank_and_zero_infinity():
    log_probs, targets, il, tl = _case(torch.float64, blank=3)
    il = [T, 19, 5, 11]  # sample 2: 9 labels cannot fit in 5 steps: infinite loss
    for zero_infinity in (False, True):
        kw = dict(blank=3, reduction="none", zero_infinity=zero_infinity)
        want_loss = F.ctc_loss(log_probs, targets, il, tl, **kw)
        got_loss = F.ctc_loss(log_probs.to("tpu"), targets.to("tpu"), il, tl, **kw)
        torch.testing.assert_close(got_loss.cpu(), want_loss, **TOL[torch.float64])
    assert got_loss[2].item() == 0.0  # zero_infinity
    want = _loss_and_grad("cpu", log_probs, targets, il, tl, **kw)
    got = _loss_and_grad("tpu", log_probs, targets, il, tl, **kw)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float64])


def test_ctc_loss_compiled(fresh_dynamo):
    """Dynamo counts _ctc_loss among the ops whose output shape depends on
    data and breaks the graph there: the loss runs eagerly between the
    compiled graphs, natively (no_fallback)."""
    case = _case(torch.float32)

    def fn(lp, targets, il, tl):
        return F.ctc_loss(lp, targets, il, tl, reduction="mean")

    want = _loss_and_grad("cpu", *case, fn=fn)
    got = _loss_and_grad("tpu", *case, fn=torch.compile(fn, backend="tpu"))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float32])


def test_ctc_loss_bad_lengths_are_refused_by_name():
    log_probs, targets, il, tl = _case(torch.float32)
    with pytest.raises(RuntimeError, match="input_lengths.*at most 24"):
        F.ctc_loss(log_probs.to("tpu"), targets.to("tpu"), [T + 1, 19, 24, 11], tl)
