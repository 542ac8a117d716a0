"""Sorting, order statistics, prefix scans, combining scatters, generated
sequences and sampling on tpu, compared with PyTorch's CPU results (the CPU
fallback off). Random ops are checked statistically: ranges, moments,
permutation validity, reproducibility under a seed, fresh streams per call.

Tolerances as in test_ops.py; scans combine in a tree (log2 n steps), so
float32 sums may differ from the CPU's sequential order by a few ulp."""
import pytest
import torch

from test_ops import TOL, compare, rand
from torch_tpu.zoo.moe import lowest_index_topk

FLOATS = [torch.float32, torch.bfloat16]
SCAN_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


pytestmark = pytest.mark.usefixtures("no_fallback")


def with_nan_ties(dtype):
    x = rand(5, 7, dtype=dtype)
    if dtype != torch.bool:
        x = (x.float().round() / 2).round().to(dtype)  # many ties
    if dtype.is_floating_point:
        x[1, 2] = float("nan")
        x[3, 0] = float("nan")
        x[3, 5] = float("nan")
        x[0, 1] = -0.0
    return x


def grad_compare(fn, x, tol=None):
    xc = x.clone().requires_grad_()
    xt = x.to("tpu").requires_grad_()
    yc, yt = fn(xc), fn(xt)
    yc = yc[0] if isinstance(yc, tuple) else yc
    yt = yt[0] if isinstance(yt, tuple) else yt
    g = rand(*yc.shape, dtype=yc.dtype, seed=9)
    yc.backward(g)
    yt.backward(g.to("tpu"))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, **(tol or TOL[x.dtype]))


# --- sorting -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.uint8, torch.bool], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_nan_ties(dtype, dim, descending):
    x = with_nan_ties(dtype)
    compare(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), x)
    compare(lambda t: torch.argsort(t, dim=dim, descending=descending, stable=True), x)


def test_sort_edge_shapes():
    compare(lambda t: torch.sort(t), torch.tensor(3.0))
    compare(lambda t: torch.sort(t, dim=0), torch.empty(0, 3))
    compare(lambda t: torch.sort(t, dim=1), torch.empty(0, 3))
    compare(torch.msort, rand(6, 3))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_kthvalue(dtype, largest):
    # distinct values: the CPU's order among ties is unspecified
    x = torch.randperm(36, generator=torch.Generator().manual_seed(0)).reshape(4, 9).to(dtype)
    compare(lambda t: torch.topk(t, 3, dim=1, largest=largest), x)
    compare(lambda t: torch.topk(t, 2, dim=0, largest=largest), x)
    compare(lambda t: torch.kthvalue(t, 4, dim=-1, keepdim=True), x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_resolve_lowest_index_first(dtype, largest):
    # Which of tied elements topk returns is unspecified (torch.topk's
    # docs); the CPU's pick falls out of std::nth_element (a row of four
    # equal values gives [2, 3] for k=2). MoE routers that start at zero
    # (AFMoE) tie every score, so a random model's routing is this choice.
    # tpu's is fixed: the CPU's values, and among ties the lowest indices,
    # eagerly and in compiled graphs. Rows: many ties, NaN, -0.0, all equal.
    x = with_nan_ties(dtype)
    x[4] = x[4, 0]
    xt = x.to("tpu")
    for dim in (1, 0):
        n = x.shape[dim]
        for k in (1, 2, n):
            got = torch.topk(xt, k, dim=dim, largest=largest)
            cpu = torch.topk(x, k, dim=dim, largest=largest)
            want = lowest_index_topk(x, k, dim=dim, largest=largest)
            torch.testing.assert_close(got.values.cpu(), cpu.values, rtol=0, atol=0, equal_nan=True)
            assert torch.equal(got.indices.cpu(), want.indices)
    f = torch.compile(lambda t: torch.topk(t, 2, dim=1, largest=largest), backend="tpu")
    assert torch.equal(f(xt).indices.cpu(), lowest_index_topk(x, 2, dim=1, largest=largest).indices)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=str)
def test_median_nanmedian(dtype):
    x = rand(5, 8, dtype=dtype)
    if dtype.is_floating_point:
        x[1, 3] = x[1, 6] = float("nan")
        x[4, :5] = float("nan")  # (an all-NaN row's nanmedian index is unspecified)
    for f in (torch.median, torch.nanmedian):
        compare(f, x)
        compare(lambda t: f(t, 1), x)
        compare(lambda t: f(t, 0, keepdim=True), x)


def test_mode():
    x = torch.tensor([[1, 2, 2, 3, 3, 0], [5, 5, 1, 1, 1, 9]])
    compare(lambda t: torch.mode(t, 1), x)
    compare(lambda t: torch.mode(t, 1), x.float())


@pytest.mark.parametrize("op", [lambda t: torch.sort(t, 1), lambda t: torch.topk(t, 2),
                                lambda t: torch.kthvalue(t, 2, 0), lambda t: torch.median(t, 1)])
def test_order_statistic_gradients(op):
    grad_compare(op, rand(4, 6))


# --- scans -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod(dtype, dim):
    x = rand(6, 37, dtype=dtype, low=0.5, high=1.5)
    compare(lambda t: torch.cumsum(t, dim), x, tol=SCAN_TOL.get(dtype))
    compare(lambda t: torch.cumprod(t, dim), x, tol=SCAN_TOL.get(dtype))
    if dtype.is_floating_point:
        compare(lambda t: torch.cumsum(t, dim, dtype=torch.float32), x, tol=SCAN_TOL[torch.float32])


def test_cumsum_inplace_and_edges():
    x = rand(3, 4)
    want = x.clone().cumsum_(1)
    got = x.to("tpu").cumsum_(1)
    torch.testing.assert_close(got.cpu(), want, **SCAN_TOL[torch.float32])
    compare(lambda t: torch.cumsum(t, 0), torch.tensor(2.5))
    compare(lambda t: torch.cumsum(t, 1), torch.empty(3, 0))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_cummax_cummin_ties_nan(dtype, op):
    x = with_nan_ties(dtype)
    compare(lambda t: op(t, 1), x)
    compare(lambda t: op(t, 0), x)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_logcumsumexp(dtype):
    x = rand(4, 19, dtype=dtype)
    x[0, 3] = float("-inf")
    x[1, :] = float("-inf")
    x[2, 5] = float("inf")
    compare(lambda t: torch.logcumsumexp(t, 1), x, tol=SCAN_TOL[dtype])


@pytest.mark.parametrize("op", [lambda t: torch.cumsum(t, 1), lambda t: torch.cumprod(t, 1),
                                lambda t: torch.cummax(t, 1), lambda t: torch.cummin(t, 0),
                                lambda t: torch.logcumsumexp(t, 1)])
def test_scan_gradients(op):
    grad_compare(op, rand(4, 6, low=0.5, high=2.0), tol=SCAN_TOL[torch.float32])


def test_logcumsumexp_gradient_at_large_magnitude():
    # The backward takes exp of differences of logcumsumexp values near
    # -1e4, where one float32 ulp is 1e-3: the forward must round the same
    # double-accumulated sums as the CPU for the gradient to agree.
    x = rand(5, 5, 5, seed=3) * 8 - 10000
    g = rand(5, 5, 5, seed=4) * 2 - 1
    res = []
    for dev in ("cpu", "tpu"):
        xd = x.detach().to(dev).requires_grad_()
        y = torch.logcumsumexp(xd, 0)
        y.backward(g.to(dev))
        res.append((y.detach().cpu(), xd.grad.cpu()))
    torch.testing.assert_close(res[1][0], res[0][0], rtol=0, atol=0)
    torch.testing.assert_close(res[1][1], res[0][1], **SCAN_TOL[torch.float32])


# --- scatters ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self):
    x = rand(4, 6, dtype=dtype, low=-2, high=2)
    src = rand(4, 6, dtype=dtype, seed=3, low=-2, high=2)
    idx = torch.randint(0, 6, (4, 6), generator=torch.Generator().manual_seed(1))
    compare(lambda a, i, s: torch.scatter_reduce(a, 1, i, s, reduce, include_self=include_self),
            x, idx, src, tol=dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else None)


def test_scatter_legacy_reduce_and_index_reduce():
    x, src = rand(4, 5), rand(4, 5, seed=2)
    idx = torch.randint(0, 5, (4, 5), generator=torch.Generator().manual_seed(2))
    compare(lambda a, i, s: torch.scatter(a, 1, i, s, reduce="multiply"), x, idx, src)
    compare(lambda a, i: torch.scatter(a, 1, i, 2.0, reduce="add"), x, idx)
    index = torch.tensor([0, 2, 2, 3])
    for r in ["prod", "mean", "amax", "amin"]:
        for inc in [True, False]:
            compare(lambda a, i, s: a.index_reduce(0, i, s, r, include_self=inc), x, index, src)


def test_index_fill():
    x = rand(4, 5)
    compare(lambda a, i: a.index_fill(1, i, -2.5), x, torch.tensor([0, -1, 2]))
    compare(lambda a, i, v: a.index_fill(0, i, v), x, torch.tensor([3]), torch.tensor(7.0))
    compare(lambda a, i: a.index_fill(0, i, 1), torch.tensor(2.0), torch.tensor([0]))


def test_masked_scatter():
    x, src = rand(4, 5), rand(30, seed=4)
    mask = rand(4, 5, seed=5) > 0
    compare(lambda a, m, s: a.masked_scatter(m, s), x, mask, src)
    compare(lambda a, m, s: a.masked_scatter(m, s), x, mask[0], src)  # broadcast mask


# --- sequences, searching, counting ----------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_linspace_logspace_eye(dtype):
    for steps in [0, 1, 2, 7, 50]:
        want = torch.linspace(-3, 11, steps, dtype=dtype)
        got = torch.linspace(-3, 11, steps, dtype=dtype, device="tpu")
        torch.testing.assert_close(got.cpu(), want, **TOL.get(dtype, dict(rtol=0, atol=0)))
    want = torch.logspace(-1, 2, 9, base=2, dtype=dtype)
    got = torch.logspace(-1, 2, 9, base=2, dtype=dtype, device="tpu")
    torch.testing.assert_close(got.cpu(), want, **TOL.get(dtype, dict(rtol=0, atol=0)))
    torch.testing.assert_close(torch.eye(3, 5, dtype=dtype, device="tpu").cpu(), torch.eye(3, 5, dtype=dtype))


@pytest.mark.parametrize("args", [(4, 4, 0), (3, 5, 1), (5, 3, -2), (0, 3, 0)])
def test_tril_triu_indices(args):
    for f in (torch.tril_indices, torch.triu_indices):
        assert torch.equal(f(*args, device="tpu").cpu(), f(*args))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_bucketize(right):
    seq = torch.tensor([-1.0, 0.0, 0.0, 2.5, 7.0])
    vals = torch.tensor([[-3.0, 0.0, 1.0], [2.5, 9.0, float("nan")]])
    compare(lambda s, v: torch.searchsorted(s, v, right=right), seq, vals)
    compare(lambda s, v: torch.searchsorted(s, v, right=right, out_int32=True), seq, vals)
    compare(lambda v, b: torch.bucketize(v, b, right=right), vals, seq)
    batched = torch.sort(rand(2, 6), 1).values
    compare(lambda s, v: torch.searchsorted(s, v, side="right" if right else "left"), batched, rand(2, 4, seed=7))
    perm = torch.tensor([3, 0, 4, 1, 2])
    shuffled = seq[torch.argsort(perm)]
    compare(lambda s, v, p: torch.searchsorted(s, v, sorter=p), shuffled, vals, torch.argsort(shuffled))


def test_histc():
    x = rand(100, low=-2, high=3)
    compare(lambda t: torch.histc(t, bins=7, min=-1, max=2), x)
    compare(lambda t: torch.histc(t, bins=10), x)
    compare(lambda t: torch.histc(t, bins=4), torch.full((5,), 2.0))


def test_nonzero_static_and_repeat_interleave():
    x = torch.tensor([[0, 1, 0], [2, 0, 3]])
    for size in [0, 2, 3, 6]:
        compare(lambda t: torch.nonzero_static(t, size=size), x)
    compare(lambda t: torch.nonzero_static(t, size=4, fill_value=-7), x.float())
    r = torch.tensor([2, 0, 3, 1])
    compare(lambda t: torch.repeat_interleave(t, output_size=6), r)
    v = rand(4, 3)
    compare(lambda a, t: torch.repeat_interleave(a, t, dim=0, output_size=6), v, r)


# --- random -------------------------------------------------------------------------


def test_randperm_valid_reproducible_fresh():
    for n in [1, 2, 10, 1000]:
        p = torch.randperm(n, device="tpu").cpu()
        assert torch.equal(torch.sort(p).values, torch.arange(n))
    torch.manual_seed(7)
    a = torch.randperm(500, device="tpu").cpu()
    b = torch.randperm(500, device="tpu").cpu()
    torch.manual_seed(7)
    assert torch.equal(torch.randperm(500, device="tpu").cpu(), a)
    assert not torch.equal(a, b)
    # position of element 0 is uniform over many draws
    pos = torch.stack([torch.randperm(8, device="tpu").cpu().argmin() for _ in range(400)])
    counts = torch.bincount(pos, minlength=8).float()
    assert counts.min() > 20 and counts.max() < 80


def test_multinomial_statistics():
    w = torch.tensor([[1.0, 2.0, 0.0, 5.0], [0.0, 0.0, 1.0, 1.0]], device="tpu")
    s = torch.multinomial(w, 4000, replacement=True).cpu()
    freq = torch.stack([torch.bincount(r, minlength=4).float() / 4000 for r in s])
    want = (w / w.sum(1, keepdim=True)).cpu()
    torch.testing.assert_close(freq, want, atol=0.03, rtol=0)
    no = torch.multinomial(w[:1].expand(3000, 4), 3).cpu()
    assert all(len(set(r.tolist())) == 3 for r in no[:50])
    assert (no != 2).all()  # zero weight never drawn while others remain
    first = torch.bincount(no[:, 0], minlength=4).float() / 3000
    torch.testing.assert_close(first, torch.tensor([1 / 8, 2 / 8, 0, 5 / 8]), atol=0.03, rtol=0)
    torch.manual_seed(3)
    a = torch.multinomial(w, 2).cpu()
    torch.manual_seed(3)
    assert torch.equal(torch.multinomial(w, 2).cpu(), a)


def test_factory_random_moments():
    torch.manual_seed(0)
    u = torch.rand(20000, device="tpu").cpu()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    n = torch.randn(20000, device="tpu").cpu()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    r = torch.randint(3, 9, (20000,), device="tpu").cpu()
    assert r.min() == 3 and r.max() == 8 and abs(r.float().mean() - 5.5) < 0.05
    g = torch.Generator("tpu").manual_seed(5)
    a = torch.rand(10, device="tpu", generator=g).cpu()
    g.manual_seed(5)
    assert torch.equal(torch.rand(10, device="tpu", generator=g).cpu(), a)


@pytest.mark.parametrize("weights", [None, torch.float32, torch.float64, torch.int32,
                                     torch.bfloat16])
def test_bincount_native(weights, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    x = torch.tensor([0, 5, 1, 1, 3, 5, 5])
    w = None if weights is None else (torch.rand(7) * 4).to(weights)
    for minlength in (0, 3, 9):
        want = torch.bincount(x, w, minlength)
        got = torch.bincount(x.to("tpu"), None if w is None else w.to("tpu"), minlength)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)
    empty = torch.bincount(torch.tensor([], dtype=torch.long, device="tpu"), minlength=4)
    assert torch.equal(empty.cpu(), torch.zeros(4, dtype=torch.long))


def test_bincount_rejects_as_cpu():
    for bad, err in [(torch.tensor([-1, 2]), RuntimeError), (torch.tensor([[1]]), RuntimeError),
                     (torch.tensor([1.0]), NotImplementedError)]:
        with pytest.raises(err, match="bincount"):
            torch.bincount(bad.to("tpu"))
    with pytest.raises(RuntimeError, match="same length"):
        torch.bincount(torch.tensor([1, 2], device="tpu"), torch.ones(3, device="tpu"))
