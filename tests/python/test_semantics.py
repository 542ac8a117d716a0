"""Semantics that OpInfo samples under-sample: aliasing through views,
in-place on non-contiguous views, broadcasting corners, empty and zero-size
tensors, 0-dim scalars, integer overflow, NaN propagation, index bounds."""
import pytest
import torch

from conftest import run_python


pytestmark = pytest.mark.usefixtures("no_fallback")


def both(fn):
    """Runs fn(device) on cpu and tpu and checks they agree exactly."""
    want = fn("cpu")
    got = fn("tpu")
    wants = want if isinstance(want, (list, tuple)) else [want]
    gots = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(gots, wants):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


def test_inplace_on_noncontiguous_views_of_a_view():
    def f(d):
        x = torch.arange(60.0, device=d).reshape(3, 4, 5)
        v = x.permute(2, 0, 1)[1:4, :, ::2]  # permuted, sliced, stepped
        v.mul_(-1)
        v[0].add_(100)
        x.transpose(0, 1)[2].sub_(0.5)
        return x
    both(f)


def test_view_of_view_sees_base_writes_and_vice_versa():
    def f(d):
        x = torch.zeros(6, 6, device=d)
        a = x[1:5, 1:5]
        b = a.t()[::2]
        x.fill_(1.0)
        b.add_(2.0)
        return [x, a, b]
    both(f)


def test_diagonal_and_unfold_views_write_through():
    def f(d):
        x = torch.zeros(4, 4, device=d)
        x.diagonal().fill_(3)
        y = torch.arange(10.0, device=d)
        y.unfold(0, 2, 3).mul_(2)  # non-overlapping windows
        return [x, y]
    both(f)


def test_broadcasting_corners():
    def f(d):
        a = torch.arange(6.0, device=d).reshape(2, 1, 3)
        b = torch.arange(4.0, device=d).reshape(4, 1)
        c = torch.tensor(2.0, device=d)
        return [a + b, a * c, c - a, torch.where(a > 2, b, c), a.expand(2, 4, 3) + 0]
    both(f)


def test_empty_and_zero_size_dims():
    def f(d):
        z = torch.zeros(0, 3, device=d)
        e = torch.ones(2, 0, 4, device=d)
        return [z + 1, z.sum(0), e.sum(1), e.mean(-1), torch.cat([z, torch.ones(2, 3, device=d)]),
                e.amax(-1) if False else e.reshape(0, 4), (z @ torch.ones(3, 2, device=d))]
    both(f)


def test_zero_dim_scalars():
    def f(d):
        s = torch.tensor(3, device=d)
        t = torch.tensor(2.5, device=d)
        return [s + t, s * 2, t / s, torch.ones(3, dtype=torch.int32, device=d) * s, s.float().exp()]
    both(f)


def test_integer_overflow_wraps_like_cpu():
    def f(d):
        x = torch.tensor([2**31 - 1, -2**31], dtype=torch.int32, device=d)
        y = torch.tensor([255, 200], dtype=torch.uint8, device=d)
        z = torch.tensor([2**62], dtype=torch.int64, device=d)
        return [x + 1, x - 1, y + 100, y * 2, z * 4, (-x)]
    both(f)


def test_nan_and_inf_propagation():
    def f(d):
        x = torch.tensor([float("nan"), 1.0, float("inf"), -float("inf"), 0.0], device=d)
        return [x.max(), x.min(), x.sum(), x.amax(), torch.maximum(x, x.flip(0)),
                torch.clamp(x, -1, 1), x * 0, x / 0, torch.relu(x), torch.sigmoid(x), x.argmax()]
    both(f)


def test_inplace_type_rules():
    x = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        x.add_(1.5)
    y = torch.ones(3, device="tpu")
    y.add_(torch.ones(3, dtype=torch.int64, device="tpu"))
    assert y.dtype == torch.float32 and y.cpu().tolist() == [2.0, 2.0, 2.0]


INDEX_OPS = [
    lambda x, i: x[i],
    lambda x, i: x.index_select(0, i),
    lambda x, i: x.gather(0, i),
    lambda x, i: torch.nn.functional.embedding(i, x.reshape(-1, 1)),
]


@pytest.mark.parametrize("fn", INDEX_OPS, ids=["index", "index_select", "gather", "embedding"])
def test_out_of_range_indices_raise_in_debug_mode(fn):
    from torch_tpu.mode import execution_mode
    x = torch.arange(5.0, device="tpu")
    bad = torch.tensor([1, 7], device="tpu")
    # The CPU's exception type (IndexError, or RuntimeError for gather).
    with pytest.raises((IndexError, RuntimeError)) as cpu:
        fn(x.cpu(), bad.cpu())
    with execution_mode("debug"):
        with pytest.raises(cpu.type, match="out of bounds"):
            fn(x, bad).cpu()
        good = torch.tensor([1, 4], device="tpu")
        assert fn(x, good).cpu().reshape(-1).tolist() == [1.0, 4.0]


def test_out_of_range_indices_in_strict_mode_raise_at_the_next_sync():
    """Strict eager checks indices on the device without waiting: the op
    returns, the error is raised where the host next waits (here .cpu()),
    and the device stays usable, as after CUDA's device-side asserts."""
    x = torch.arange(5.0, device="tpu")
    r = x.index_select(0, torch.tensor([7], device="tpu"))
    assert r.shape == (1,)
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        r.cpu()
    assert x.index_select(0, torch.tensor([4], device="tpu")).cpu().tolist() == [4.0]
