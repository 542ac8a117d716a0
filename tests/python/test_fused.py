"""Fused eager: ops are recorded into a pending graph and run at a cut. The
results must equal strict eager's; the cuts are counted by cause.

Tolerances: XLA fuses the recorded ops and may reassociate float32
arithmetic inside a fusion (e.g. a reduction feeding a multiply), so fused
results match strict ones to a few ulps rather than bitwise: rtol 1e-5 is
~100 ulps of headroom for float32. Integer and view results are exact."""
import os
import sys

import pytest
import torch
from torch import nn

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from models import TinyGPT, gpt_batch, gpt_loss  # noqa: E402


def cuts():
    return dict(torch.tpu._get_cache_stats()["graph_cuts"])


def delta(before, after):
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def program(dev):
    torch.manual_seed(0)
    x = torch.randn(6, 5).to(dev)
    w = torch.randn(5, 4).to(dev)
    y = torch.relu(x @ w + 1)
    y[1:3, ::2] *= 3  # in-place through a strided view
    v = y.t()
    v.add_(torch.arange(6, device=dev))  # writes through the transpose into y
    z = torch.cat([y, y.sum(0, keepdim=True)]).softmax(-1)
    idx = torch.tensor([0, 2, 2, 5], device=dev)
    g = z.index_select(0, idx).cumsum(1)
    return y, z, g, (y > 2).sum(), y.argmax(1)


def test_fused_matches_strict():
    with torch_tpu.execution_mode("strict"):
        want = [t.cpu() for t in program("tpu")]
    with torch_tpu.execution_mode("fused"):
        got = [t.cpu() for t in program("tpu")]
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    cpu = program("cpu")
    for w, g in zip(cpu, got):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.fixture
def from_strict():
    """Runs the test from strict mode (the suite may run under fused)."""
    with torch_tpu.execution_mode("strict"):
        yield


def test_graph_runs_at_sync_points_and_counts_causes(from_strict):
    x = torch.ones(4, device="tpu")
    with torch_tpu.execution_mode("fused"):
        before = cuts()
        y = (x * 2 + 1).exp()
        s = torch.tpu._get_cache_stats()
        assert s["pending_ops"] == 3
        assert y.sum().item() == pytest.approx(4 * float(torch.tensor(3.0).exp()))
        assert delta(before, cuts()) == {"host_read": 1}
        assert torch.tpu._get_cache_stats()["pending_ops"] == 0

        before = cuts()
        y.mul_(2)
        torch.tpu.synchronize()
        torch_tpu.mark_step()  # nothing pending: not a cut
        y.mul_(2)
        torch_tpu.mark_step()
        y.neg_()
        repr(y)  # printing reads the value
        assert delta(before, cuts()) == {"synchronize": 1, "explicit": 1, "host_read": 1}
        y.add_(1)
        before = cuts()
    # leaving fused mode runs what is pending
    assert delta(before, cuts()) == {"mode_change": 1}
    torch.testing.assert_close(y.cpu(), -4 * torch.tensor(3.0).exp().expand(4) + 1)


def test_data_dependent_shapes_cut_the_graph():
    with torch_tpu.execution_mode("fused"):
        x = torch.tensor([0.0, 3.0, -1.0, 5.0], device="tpu") * 2
        before = cuts()
        nz = x[x > 0]  # boolean-mask indexing needs the count on the host
        assert delta(before, cuts()).get("host_read", 0) >= 1
        torch.testing.assert_close(nz.cpu(), torch.tensor([6.0, 10.0]))
        if bool((x > 4).any()):  # data-dependent control flow
            x = x + 1
        torch.testing.assert_close(x.cpu(), torch.tensor([1.0, 7.0, -1.0, 11.0]))


def test_size_limit_cuts_and_results_stay_right():
    torch_tpu._C._set_fuse_max_ops(5)
    try:
        with torch_tpu.execution_mode("fused"):
            x = torch.zeros(3, device="tpu")
            before = cuts()
            for _ in range(12):
                x.add_(1)
            d = delta(before, cuts())
            assert d.get("size_limit", 0) >= 1 and d.get("size_limit", 0) + d.get("loop", 0) >= 2, d
            torch.testing.assert_close(x.cpu(), torch.full((3,), 12.0))
    finally:
        torch_tpu._C._set_fuse_max_ops(0)


def test_training_loop_without_sync_compiles_a_bounded_set():
    """No .item() per step: the graph is cut by the size bound, then where the
    loop repeats, so steps reuse a few executables."""
    torch_tpu._C._set_fuse_max_ops(200)
    try:
        with torch_tpu.execution_mode("fused"):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to("tpu")
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            x = torch.randn(4, 8, device="tpu")
            y = torch.tensor([0, 1, 1, 0], device="tpu")
            compiles = []
            for _ in range(60):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                compiles.append(torch.tpu._get_cache_stats()["compiles"])
            assert compiles[-1] == compiles[30], compiles
            assert torch.tpu._get_cache_stats()["graph_cuts"]["loop"] > 0
            w = model[0].weight.cpu()
    finally:
        torch_tpu._C._set_fuse_max_ops(0)
    assert torch.isfinite(w).all()


def test_host_write_into_a_pending_storage():
    with torch_tpu.execution_mode("fused"):
        x = torch.ones(3, device="tpu")
        y = x * 5  # reads x's old value
        before = cuts()
        x.copy_(torch.tensor([7.0, 8.0, 9.0]))  # host -> device into x
        assert delta(before, cuts()) == {"host_write": 1}
        torch.testing.assert_close(y.cpu(), torch.full((3,), 5.0))
        torch.testing.assert_close(x.cpu(), torch.tensor([7.0, 8.0, 9.0]))


def test_random_ops_match_strict():
    def draw():
        torch.manual_seed(123)
        a = torch.randn(8, device="tpu")
        b = torch.nn.functional.dropout(torch.ones(16, device="tpu"), 0.5)
        return a.cpu(), b.cpu()

    with torch_tpu.execution_mode("strict"):
        want = draw()
    with torch_tpu.execution_mode("fused"):
        got = draw()
    for w, g in zip(want, got):
        assert torch.equal(w, g)


def train_mlp(steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 16, generator=g).to("tpu")
    y = torch.randint(0, 4, (64,), generator=g).to("tpu")
    losses, compiles = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        compiles.append(torch.tpu._get_cache_stats()["compiles"])
    return losses, compiles


def test_training_matches_strict_and_steady_state_compiles_nothing():
    with torch_tpu.execution_mode("strict"):
        want, _ = train_mlp(6)
    with torch_tpu.execution_mode("fused"):
        got, compiles = train_mlp(6)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-5, atol=1e-6)
    # every step after the first two (AdamW's state appears at step 1) is
    # the same graph: found in the cache
    assert compiles[-1] == compiles[2], compiles


def test_tiny_gpt_training_matches_strict():
    def run():
        torch.manual_seed(0)
        model = TinyGPT(vocab=64, d=32, layers=2, heads=2, seq=16).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = gpt_batch(2, 16, 64, "tpu")
        out = []
        for _ in range(3):
            opt.zero_grad()
            loss = gpt_loss(model, x, y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    with torch_tpu.execution_mode("strict"):
        want = run()
    with torch_tpu.execution_mode("fused"):
        got = run()
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-5, atol=1e-6)


def test_mode_api():
    old = torch_tpu.get_execution_mode()
    with torch_tpu.execution_mode("fused"):
        assert torch_tpu.get_execution_mode() == "fused"
        with torch_tpu.execution_mode("debug"):
            assert torch_tpu.get_execution_mode() == "debug"
        assert torch_tpu.get_execution_mode() == "fused"
    assert torch_tpu.get_execution_mode() == old
    with pytest.raises(ValueError, match="unknown execution mode"):
        torch_tpu.set_execution_mode("lazy")


def test_env_var_starts_in_fused_mode():
    from conftest import run_python
    r = run_python("import torch, torch_tpu; x = torch.ones(2, device='tpu') + 1; "
                   "print(torch_tpu.get_execution_mode(), "
                   "torch.tpu._get_cache_stats()['pending_ops'], x.sum().item())",
                   env={"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_CACHE_DIR": "0"})
    assert r.returncode == 0, r.stderr
    mode, pending, total = r.stdout.split()
    assert (mode, total) == ("fused", "4.0") and int(pending) >= 1  # ones() + add


def test_metrics_report_names_what_happened(from_strict):
    torch.tpu._reset_cache_stats()
    with torch_tpu.execution_mode("fused"):
        x = torch.arange(4.0).to("tpu")
        (x * 3).sum().item()
    report = torch_tpu.metrics_report()
    s = torch.tpu._get_cache_stats()
    assert s["fused_graphs"] == 1 and s["h2d_transfers"] >= 1 and s["d2h_transfers"] >= 1
    assert "cuts: host_read 1" in report
    assert f"host->device: {s['h2d_transfers']} transfers" in report
    assert "CPU fallbacks: none" in report


def test_launch_blocking_turned_on_directly_runs_pending_ops_first(from_strict):
    x = torch.ones(3, device="tpu")
    with torch_tpu.execution_mode("fused"):
        y = x * 4  # pending
        before = cuts()
        torch_tpu._C._set_launch_blocking(True)
        try:
            z = y + 1  # debug mode: runs now, after the pending multiply
        finally:
            torch_tpu._C._set_launch_blocking(False)
        assert delta(before, cuts()) == {"mode_change": 1}
        torch.testing.assert_close(z.cpu(), torch.full((3,), 5.0))
