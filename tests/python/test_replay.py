"""Strict eager replays an op whose call matches an earlier one (same op,
argument values, dtypes, shapes, strides, offsets, storage sharing) from a
remembered plan instead of rebuilding its graph. These calls differ only in
what the signature must tell apart; every result is checked against the
CPU."""
import pytest
import torch

import torch_tpu

pytestmark = pytest.mark.usefixtures("no_fallback")


def _replays():
    return torch.tpu._get_cache_stats()["replayed_ops"]


def test_repeats_replay_and_scalar_values_stay_parameters():
    a, b = torch.randn(8), torch.randn(8)
    ta, tb = a.to("tpu"), b.to("tpu")
    with torch_tpu.execution_mode("strict"):  # replay is strict mode's
        torch.add(ta, tb, alpha=2)  # records the plan
        before = _replays()
        got = [torch.add(ta, tb, alpha=alpha) for alpha in (2, 3, -5)]
        assert _replays() - before == 3
    for alpha, g in zip((2, 3, -5), got):
        torch.testing.assert_close(g.cpu(), torch.add(a, b, alpha=alpha))


def test_in_place_repeats_accumulate():
    a, b = torch.randn(5), torch.randn(5)
    ta, tb = a.to("tpu"), b.to("tpu")
    for _ in range(4):
        ta.add_(tb)
        a.add_(b)
    torch.testing.assert_close(ta.cpu(), a)


def test_shared_storage_is_part_of_the_signature():
    x = torch.randn(6)
    tx, ty = x.to("tpu"), torch.randn(6).to("tpu")
    y = ty.cpu()
    for _ in range(2):
        torch.testing.assert_close(torch.mul(tx, ty).cpu(), x * y)
        torch.testing.assert_close(torch.mul(tx, tx).cpu(), x * x)
        torch.testing.assert_close(torch.mul(ty, ty).cpu(), y * y)


def test_views_with_other_offsets_and_strides_are_not_confused():
    base = torch.arange(24.0).reshape(4, 6)
    t = base.to("tpu")
    for view in (lambda z: z[1], lambda z: z[2], lambda z: z[:, 1], lambda z: z[1:3, ::2]):
        for _ in range(2):
            torch.testing.assert_close((view(t) * 2).cpu(), view(base) * 2)


def test_partial_writes_into_existing_storages():
    base = torch.zeros(4, 4)
    t = base.to("tpu")
    for i in range(4):
        t[i].add_(float(i))
        base[i].add_(float(i))
        t[:, i].mul_(2.0)
        base[:, i].mul_(2.0)
    torch.testing.assert_close(t.cpu(), base)


def test_a_fresh_storage_then_a_written_one():
    # An out= target without a buffer reads as zeros in the graph; once
    # written it is a parameter: different signatures, both right.
    a = torch.randn(3)
    ta = a.to("tpu")
    out = torch.empty(3, device="tpu")
    for _ in range(3):
        torch.add(ta, 1.0, out=out)
        torch.testing.assert_close(out.cpu(), a + 1.0)


def test_equal_scalar_arguments_replay_by_position():
    # addmm's beta and alpha of equal value share one uploaded scalar; a
    # later call with different values must still get each in its place
    m, a, b = torch.randn(3, 4), torch.randn(3, 5), torch.randn(5, 4)
    tm, ta, tb = m.to("tpu"), a.to("tpu"), b.to("tpu")
    with torch_tpu.execution_mode("strict"):
        torch.addmm(tm, ta, tb)  # records the plan (beta = alpha = 1)
        before = _replays()
        got = [torch.addmm(tm, ta, tb, beta=be, alpha=al) for be, al in ((1, 1), (2, 3), (3, 2))]
        assert _replays() - before == 3
    for (be, al), g in zip(((1, 1), (2, 3), (3, 2)), got):
        torch.testing.assert_close(g.cpu(), torch.addmm(m, a, b, beta=be, alpha=al))


def test_replayed_scalars_stay_alive_when_the_scalar_cache_evicts():
    # Replaying a recorded op fetches each Scalar argument's buffer from the
    # scalar cache; fetching the second can evict the first (linspace's start
    # -2.0 and end 0 once shared a slot), which must not free it under the
    # call. Many value pairs, each run twice (recorded, then replayed).
    for end in range(-40, 41):
        for start in (-2.0, 0.5, 3.0):
            want = torch.linspace(start, end, 3)
            for _ in range(2):
                got = torch.linspace(start, end, 3, device="tpu")
                assert torch.equal(got.cpu(), want), (start, end, got)
