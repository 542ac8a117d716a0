"""F.embedding_bag on the device (aten::_embedding_bag[_forward_only]) against
CPU, fallback off: sum / mean / max, offsets and 2-d input,
include_last_offset, per_sample_weights, padding_idx, empty bags."""
import pytest
import torch
import torch.nn.functional as F


pytestmark = pytest.mark.usefixtures("no_fallback")


def _check(tpu, weight, inp, **kw):
    want = F.embedding_bag(inp, weight, **kw)
    dkw = dict(kw)
    for k in ("offsets", "per_sample_weights"):
        if dkw.get(k) is not None:
            dkw[k] = dkw[k].to(tpu)
    got = F.embedding_bag(inp.to(tpu), weight.to(tpu), **dkw).cpu()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


W = torch.randn(10, 5, generator=torch.Generator().manual_seed(0))
IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 7])
OFFS = torch.tensor([0, 3, 3, 7])  # bag 1 is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_offsets(tpu, mode):
    _check(tpu, W, IDX, offsets=OFFS, mode=mode)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_2d_input(tpu, mode):
    _check(tpu, W, IDX.view(2, 5), mode=mode)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_include_last_offset(tpu, mode):
    _check(tpu, W, IDX, offsets=torch.tensor([0, 2, 6, 8]), mode=mode,
           include_last_offset=True)


def test_per_sample_weights(tpu):
    psw = torch.randn(10, generator=torch.Generator().manual_seed(1))
    _check(tpu, W, IDX, offsets=OFFS, mode="sum", per_sample_weights=psw)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_padding_idx(tpu, mode):
    # bag 0 loses index 2; bag 2 = [9, 0, 2, 2] -> [9, 0]; bag 3 is all padding.
    idx = torch.tensor([1, 2, 4, 9, 0, 2, 2, 2])
    _check(tpu, W, idx, offsets=torch.tensor([0, 3, 3, 7]), mode=mode, padding_idx=2)


def test_int32_indices(tpu):
    _check(tpu, W, IDX.int(), offsets=OFFS.int(), mode="mean")


# Columns all -inf, ties, NaN first or later in a bag; offsets with empty bags
# (leading, middle and trailing) and a tail past the last offset.
INF, NAN = float("inf"), float("nan")
W_MAX = torch.tensor([[1.0, -INF, NAN, 5.0], [2.0, -INF, 3.0, NAN],
                      [2.0, -INF, 7.0, 5.0], [0.0, -INF, NAN, 1.0]])
IDX_MAX = torch.tensor([3, 1, 2, 0, 3, 2, 1])


@pytest.mark.parametrize("offsets", [[0, 3, 3, 5], [0, 0, 7, 7], [0, 2, 4, 6]])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 3, 1])
@pytest.mark.parametrize("forward_only", [False, True])
def test_max_mode_all_results(tpu, offsets, include_last_offset, padding_idx, forward_only):
    # Max mode only selects values, so every result must match exactly:
    # output, offset2bag, bag_size and max_indices (0 for empty bags, the
    # first member for ties and all -inf columns, as the CPU kernel's walk).
    op = (torch.ops.aten._embedding_bag_forward_only if forward_only
          else torch.ops.aten._embedding_bag)
    offs = torch.tensor(offsets)
    args = (False, 2, False, None, include_last_offset, padding_idx)
    want = op(W_MAX, IDX_MAX, offs, *args)
    got = [t.cpu() for t in op(W_MAX.to(tpu), IDX_MAX.to(tpu), offs.to(tpu), *args)]
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0, equal_nan=True)
    assert torch.equal(got[1], want[1])
    # The meta kernel sizes bag_size by the offsets (one more entry than the
    # CPU with include_last_offset); the bags' own entries must agree.
    assert torch.equal(got[2][: want[2].numel()], want[2])
    assert torch.equal(got[3], want[3])


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_max_norm_renorms_in_place(tpu, norm_type, dtype):
    # embedding_renorm_: only the named rows (duplicates once) above max_norm
    # are scaled. The scale uses the row norm, which XLA may sum in another
    # order than the CPU: a few ulps (rtol 1e-6 for f32, 1e-12 for f64).
    w = torch.randn(10, 6, generator=torch.Generator().manual_seed(3), dtype=dtype) * 2
    idx = torch.tensor([[1, 4, 4], [7, 1, 0]])
    w_cpu, w_tpu = w.clone(), w.to(tpu)
    want = F.embedding(idx, w_cpu, max_norm=1.5, norm_type=norm_type)
    got = F.embedding(idx.to(tpu), w_tpu, max_norm=1.5, norm_type=norm_type)
    tol = dict(rtol=1e-6, atol=1e-7) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got.cpu(), want, **tol)
    torch.testing.assert_close(w_tpu.cpu(), w_cpu, **tol)
    assert not torch.equal(w_cpu, w)  # some rows were renormed


def _bag_reference(idx, offs, w, mode, psw, padding_idx):
    """embedding_bag (sum/mean) through F.embedding with
    scale_grad_by_freq: each index's gradient divided by its own frequency,
    as documented (and as on CUDA). The CPU embedding_bag kernel divides by
    the frequency of another index (it indexes its counts by the position of
    the index group, not its first element), so it is no reference here."""
    emb = F.embedding(idx, w, padding_idx=padding_idx, scale_grad_by_freq=True)
    keep = torch.ones(len(idx)) if padding_idx is None else (idx != padding_idx).float()
    if psw is not None:
        keep = keep * psw
    emb = emb * keep[:, None]
    ends = list(offs[1:].tolist()) + [len(idx)]
    rows = []
    for s_, e_ in zip(offs.tolist(), ends):
        r = emb[s_:e_].sum(0)
        if mode == "mean":
            r = r / max(1, int((idx[s_:e_] != (padding_idx if padding_idx is not None else -1)).sum()))
        rows.append(r)
    return torch.stack(rows)


# (max mode does not take scale_grad_by_freq)
@pytest.mark.parametrize("mode,scale_grad_by_freq", [("sum", False), ("mean", False),
                                                     ("max", False), ("sum", True),
                                                     ("mean", True)])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_backward(tpu, mode, padding_idx, scale_grad_by_freq):
    # Gradients of weight (and of per_sample_weights in sum mode), with an
    # empty bag, repeated indices and padding. Sums of a few products in
    # another order: rtol 1e-5 / atol 1e-6.
    idx = torch.tensor([1, 2, 4, 4, 2, 3, 2, 9, 0, 4])
    offs = torch.tensor([0, 3, 3, 7])
    psw = torch.randn(10, generator=torch.Generator().manual_seed(2)) if mode == "sum" else None
    up = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    res = []
    for dev in ("cpu", tpu):
        w = W.clone().to(dev).requires_grad_()
        p = psw.clone().to(dev).requires_grad_() if psw is not None else None
        if dev == "cpu" and scale_grad_by_freq:
            out = _bag_reference(idx, offs, w, mode, p, padding_idx)
            want = F.embedding_bag(idx, W, offs, mode=mode, per_sample_weights=psw,
                                   padding_idx=padding_idx)
            torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-6)
        else:
            out = F.embedding_bag(idx.to(dev), w, offs.to(dev), mode=mode, per_sample_weights=p,
                                  padding_idx=padding_idx,
                                  scale_grad_by_freq=scale_grad_by_freq)
        out.backward(up.to(dev))
        res.append((w.grad.cpu(), p.grad.cpu() if p is not None else None))
    torch.testing.assert_close(res[1][0], res[0][0], rtol=1e-5, atol=1e-6)
    if psw is not None:
        torch.testing.assert_close(res[1][1], res[0][1], rtol=1e-5, atol=1e-6)
