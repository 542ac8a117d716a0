"""Shape bucketing (bounded dynamism) for torch.compile: a size marked with
torch_tpu.mark_dynamic(t, dim, max=N) runs one executable for every size up
to N, and results match PyTorch's CPU ones; ops that would read the padding
are compile errors naming the op."""
import pytest
import torch

import torch_tpu
from torch_tpu._compile import TpuCompileError


def _program_compiles():
    """Programs built for compiled graphs (one per executable; the XLA
    compile itself may be a disk cache hit), checking that XLA compiled at
    most that many."""
    st = torch.tpu._get_cache_stats()
    return st["compiled_programs"], st["program_compiles"]


def _run(fn, xs, dim, bound, *rest):
    torch._dynamo.reset()
    cf = torch.compile(fn, backend="tpu")
    before = _program_compiles()
    for x in xs:
        xt = x.to("tpu")
        torch_tpu.mark_dynamic(xt, dim, max=bound)
        with torch.no_grad():
            got = cf(xt, *[r.to("tpu") for r in rest])
        want = fn(x, *rest)
        assert got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    after = _program_compiles()
    assert after[1] - before[1] <= after[0] - before[0]
    return after[0] - before[0]


def test_softmax_matmul_reductions_one_executable():
    def f(x, w):
        # exp makes the zero padding count (exp(0) = 1) if it were summed.
        return torch.softmax(x @ w, -1).sum(-1) * 2 + torch.exp(x).amax(-1) \
            + torch.exp(x).sum(-1)

    torch.manual_seed(0)
    w = torch.randn(8, 3)
    xs = [torch.randn(n, 8) for n in (5, 7, 12, 3, 32)]
    assert _run(f, xs, 0, 32, w) == 1


def test_inner_dynamic_dim_reduced_and_contracted():
    # The dynamic size is the reduced dim (softmax, sum) and the contracting
    # dims: the padding must not leak into them.
    def f(x):
        return (torch.softmax(x, -1) * 3).sum(-1) + torch.exp(x).sum(-1)

    torch.manual_seed(1)
    xs = [torch.randn(4, n) for n in (6, 9, 16, 2)]
    assert _run(f, xs, 1, 16) == 1


def test_dynamic_contracting_dim():
    def f(a, b):
        return torch.exp(a) @ b

    torch.manual_seed(2)
    b = torch.randn(16, 5)
    torch._dynamo.reset()
    cf = torch.compile(f, backend="tpu")
    before = _program_compiles()
    for n in (3, 10, 16):
        a, bn = torch.randn(4, n), b[:n].contiguous()
        at, bt = a.to("tpu"), bn.to("tpu")
        torch_tpu.mark_dynamic(at, 1, max=16)
        torch_tpu.mark_dynamic(bt, 0, max=16)
        with torch.no_grad():
            got = cf(at, bt)
        torch.testing.assert_close(got.cpu(), f(a, bn), rtol=1e-5, atol=1e-5)
    assert _program_compiles()[0] - before[0] == 1


def test_mean_over_static_dim_is_allowed():
    def f(x):
        return x.mean(-1) * 2

    torch.manual_seed(3)
    assert _run(f, [torch.randn(n, 6) for n in (4, 9)], 0, 16) == 1


def test_mean_over_dynamic_dim_is_rejected():
    # The rule divides by the static count (the bound): wrong, so refused.
    def f(x):
        return x.mean(0)

    with pytest.raises(Exception, match="mean.dim.*bucketed"):
        _run(f, [torch.randn(5, 3)], 0, 16)


def test_reshape_of_dynamic_dim_is_rejected():
    # XLA loses the dynamic size across a reshape (tests/c/test_bounded.c).
    def f(x):
        return x.reshape(-1).sum()

    with pytest.raises(Exception, match="bucketed"):
        _run(f, [torch.randn(5, 3)], 0, 16)


def test_size_over_the_bound_is_never_silently_wrong():
    # Dynamo guards the range, so a larger size retraces (or, if a bucketed
    # runner still got it, raises): either way no truncated result.
    def f(x):
        return x.sum(0)

    torch._dynamo.reset()
    cf = torch.compile(f, backend="tpu")
    x = torch.randn(5, 3)
    xt = x.to("tpu")
    torch_tpu.mark_dynamic(xt, 0, max=8)
    with torch.no_grad():
        torch.testing.assert_close(cf(xt).cpu(), f(x))
        big = torch.randn(9, 3)
        try:
            got = cf(big.to("tpu"))
        except TpuCompileError as e:
            assert "exceeds the bound" in str(e)
        else:
            torch.testing.assert_close(got.cpu(), f(big))


def test_mark_dynamic_checks_its_bound():
    with pytest.raises(ValueError):
        torch_tpu.mark_dynamic(torch.zeros(3, 3), 0, max=1)
