"""Random ops in compiled tpu graphs: they draw from the tpu default generator
at the offsets eager would use, so a compiled run draws eager's numbers from
the same generator state, advances the generator as eager does, and
reproduces under a seed, in a warm (AOTAutograd cache) process and in fused
eager mode too."""
import textwrap

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

import torch_tpu

from conftest import run_python

# Same draws; only XLA's fusion may reorder float arithmetic.
F32 = dict(rtol=1e-4, atol=1e-5)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def dropout_mlp(tpu, p=0.5):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(p), nn.Linear(64, 32),
                         nn.GELU(), nn.Dropout(p), nn.Linear(32, 4)).to(tpu)


def train_step(model, fn, x):
    """Forward and backward; returns the output and the gradients."""
    for p in model.parameters():
        p.grad = None
    out = fn(x)
    out.square().mean().backward()
    return out.detach().cpu(), [p.grad.detach().cpu() for p in model.parameters()]


def rng_state():
    return torch.tpu.get_rng_state().clone()


def test_dropout_training_step_equals_eager(tpu):
    model = dropout_mlp(tpu)
    x = torch.randn(8, 16).to(tpu)
    compiled = torch.compile(model, backend="tpu")
    for seed in (1, 2):
        torch.tpu.manual_seed(seed)
        ref, ref_grads = train_step(model, model, x)
        ref_state = rng_state()
        torch.tpu.manual_seed(seed)
        out, grads = train_step(model, compiled, x)
        # The same mask: the same elements are dropped, the rest agree.
        assert torch.equal(out == 0, ref == 0)
        torch.testing.assert_close(out, ref, **F32)
        for g, gr in zip(grads, ref_grads):
            torch.testing.assert_close(g, gr, **F32)
        assert torch.equal(rng_state(), ref_state)  # advanced as eager advances it


def random_ops(x):
    a = torch.rand(3, 5, device=x.device)
    b = torch.randn(4, device=x.device)
    c = torch.rand_like(x)
    d = torch.randn_like(x)
    e = torch.bernoulli(torch.sigmoid(x))
    f = torch.randint(0, 10, (6,), device=x.device)
    g = torch.randint(7, (6,), device=x.device)
    h = torch.randint_like(x, 3, 9)
    i = F.dropout(x, 0.3)
    j = torch.empty_like(x).bernoulli_(0.25)
    k = torch.empty_like(x).uniform_(-2, 2)
    m = torch.empty_like(x).normal_(1, 3)
    n = torch.empty_like(x).exponential_(2.0)
    return a, b, c, d, e, f, g, h, i, j, k, m, n


def test_random_factories_draw_what_eager_draws(tpu):
    x = torch.randn(4, 6).to(tpu)
    torch.tpu.manual_seed(3)
    ref = [t.cpu() for t in random_ops(x)]
    ref_state = rng_state()
    torch.tpu.manual_seed(3)
    out = [t.cpu() for t in torch.compile(random_ops, backend="tpu", fullgraph=True)(x)]
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        torch.testing.assert_close(o, r, **F32)
    assert torch.equal(rng_state(), ref_state)


def sampling_ops(x, w):
    q = x.view(1, 2, 4, 6)
    return (torch.randperm(10, device=x.device), torch.multinomial(w, 3),
            torch.multinomial(w, 8, replacement=True),
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.3),
            F.rrelu(x, training=True), F.alpha_dropout(x, 0.2, training=True),
            F.dropout2d(x.view(1, 8, 6, 1), 0.5, training=True))


def test_sampling_and_attention_dropout_draw_what_eager_draws(tpu):
    x, w = torch.randn(8, 6).to(tpu), torch.rand(2, 10).to(tpu)
    torch.tpu.manual_seed(4)
    ref = [t.cpu() for t in sampling_ops(x, w)]
    ref_state = rng_state()
    torch.tpu.manual_seed(4)
    out = [t.cpu() for t in torch.compile(sampling_ops, backend="tpu", fullgraph=True)(x, w)]
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r, **F32)
    assert torch.equal(rng_state(), ref_state)


def test_transformer_training_with_dropout_equals_eager(tpu):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.2, batch_first=True).to(tpu)
    x = torch.randn(2, 10, 32).to(tpu)
    torch.tpu.manual_seed(6)
    ref, ref_grads = train_step(layer, layer, x)
    torch.tpu.manual_seed(6)
    out, grads = train_step(layer, torch.compile(layer, backend="tpu"), x)
    torch.testing.assert_close(out, ref, **F32)
    for g, gr in zip(grads, ref_grads):
        torch.testing.assert_close(g, gr, **F32)


def test_successive_calls_draw_different_numbers(tpu):
    fn = torch.compile(lambda v: F.dropout(v, 0.5) + torch.rand_like(v), backend="tpu")
    x = torch.ones(256, device=tpu)
    before = rng_state()
    a, b = fn(x).cpu(), fn(x).cpu()
    assert not torch.equal(a, b)
    assert not torch.equal(rng_state(), before)


def test_manual_seed_reproduces_a_compiled_run(tpu):
    model = dropout_mlp(tpu)
    compiled = torch.compile(model, backend="tpu")
    x = torch.randn(8, 16).to(tpu)
    for seed_fn in (torch.manual_seed, torch.tpu.manual_seed):
        seed_fn(11)
        runs = [train_step(model, compiled, x) for _ in range(2)]
        seed_fn(11)
        again = [train_step(model, compiled, x) for _ in range(2)]
        assert not torch.equal(runs[0][0], runs[1][0])
        for (o1, g1), (o2, g2) in zip(runs, again):
            assert torch.equal(o1, o2)
            for a, b in zip(g1, g2):
                assert torch.equal(a, b)


def test_backward_uses_the_forward_mask(tpu):
    p = 0.4
    x = (torch.rand(64, 32) + 0.5).to(tpu).requires_grad_()  # never 0 itself
    y = torch.compile(lambda v: F.dropout(v, p) * 3.0, backend="tpu")(x)
    y.backward(torch.ones_like(y))
    dropped = (y == 0).cpu()
    grad = x.grad.cpu()
    assert dropped.any() and (~dropped).any()
    assert torch.equal(grad == 0, dropped)  # zero exactly where the output was dropped
    torch.testing.assert_close(grad[~dropped], torch.full_like(grad[~dropped], 3.0 / (1 - p)))


def test_activation_checkpointing_recomputes_the_forward_mask(tpu):
    """The recompute draws with the state the forward saved
    (run_and_save_rng_state / run_with_rng_state), in eager and compiled."""
    torch.manual_seed(0)
    lin = nn.Linear(16, 16).to(tpu)
    x = torch.randn(8, 16).to(tpu).requires_grad_()

    def block(v):
        return F.dropout(torch.relu(lin(v)), 0.5) * 2

    def checkpointed(v):
        return checkpoint(block, v, use_reentrant=False)

    results = []
    for fn in (block, checkpointed, torch.compile(checkpointed, backend="tpu")):
        torch.tpu.manual_seed(1)
        x.grad = lin.weight.grad = None
        out = fn(x)
        out.square().sum().backward()
        results.append((out.detach().cpu(), x.grad.cpu(), lin.weight.grad.cpu(), rng_state()))
    ref = results[0]
    for got in results[1:]:
        for a, b in zip(got[:3], ref[:3]):
            torch.testing.assert_close(a, b, **F32)
        assert torch.equal(got[3], ref[3])  # the recompute drew nothing new


def test_dropout_statistics(tpu):
    p = 0.3
    x = (torch.rand(512, 512) + 1).to(tpu)
    y = torch.compile(lambda v: F.dropout(v, p), backend="tpu")(x).cpu()
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 0.01
    torch.testing.assert_close(y[kept], x.cpu()[kept] / (1 - p))
    z = torch.compile(lambda v: torch.randn_like(v), backend="tpu")(x).cpu()
    assert abs(z.mean().item()) < 0.01 and abs(z.std().item() - 1) < 0.01


def test_eval_mode_and_no_draws_leave_the_generator_alone(tpu):
    model = dropout_mlp(tpu).eval()
    x = torch.randn(8, 16).to(tpu)
    before = rng_state()
    out = torch.compile(model, backend="tpu")(x)
    torch.testing.assert_close(out.detach().cpu(), model(x).detach().cpu(), **F32)
    assert torch.equal(rng_state(), before)


def test_inference_graph_draws_like_eager(tpu):
    model = dropout_mlp(tpu)  # training mode, under no_grad: the inference compiler
    x = torch.randn(8, 16).to(tpu)
    with torch.no_grad():
        torch.tpu.manual_seed(5)
        ref = model(x).cpu()
        torch.tpu.manual_seed(5)
        out = torch.compile(model, backend="tpu")(x).cpu()
    torch.testing.assert_close(out, ref, **F32)


def test_bucketed_graphs_draw_and_reproduce(tpu):
    model = dropout_mlp(tpu)
    compiled = torch.compile(model, backend="tpu")

    def run(n):
        x = torch.randn(n, 16, generator=torch.Generator().manual_seed(n)).to(tpu)
        torch_tpu.mark_dynamic(x, 0, max=16)
        return train_step(model, compiled, x)

    before = torch.tpu._get_cache_stats()["compiled_bucketed"]
    torch.tpu.manual_seed(9)
    first = [run(n) for n in (5, 12)]
    torch.tpu.manual_seed(9)
    again = [run(n) for n in (5, 12)]
    for (o1, g1), (o2, g2) in zip(first, again):
        assert torch.equal(o1, o2)
        for a, b in zip(g1, g2):
            assert torch.equal(a, b)
    # forward, backward
    assert torch.tpu._get_cache_stats()["compiled_bucketed"] - before == 2


PROCESS_CODE = textwrap.dedent("""
    import torch, torch_tpu
    from torch import nn
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 4)).to("tpu")
    x = torch.randn(8, 16).to("tpu")

    def model(v):  # the second dropout recomputed in the backward
        return checkpoint(lambda u: torch.nn.functional.dropout(u, 0.3), m(v),
                          use_reentrant=False)

    def step(fn):
        for p in m.parameters():
            p.grad = None
        out = fn(x)
        out.square().mean().backward()
        return [out.detach().cpu()] + [p.grad.cpu() for p in m.parameters()]

    compiled = torch.compile(model, backend="tpu")
    torch.manual_seed(42)
    runs = [step(compiled) for _ in range(2)] + [torch.randn(4, device="tpu").cpu()]
    torch.manual_seed(42)
    ref = [step(model) for _ in range(2)] + [torch.randn(4, device="tpu").cpu()]
    torch.save({"compiled": runs, "eager": ref}, OUT)
    s = torch.tpu._get_cache_stats()
    print("STATS", s["compiled_programs"], s["compiled_cache_loads"])
""")


def _process(tmp_path, name, env):
    out = tmp_path / f"{name}.pt"
    r = run_python(f"OUT = {str(out)!r}\n" + PROCESS_CODE, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    programs, loads = map(int, r.stdout.split("STATS")[1].split()[:2])
    return torch.load(out), programs, loads


def _assert_same_run(a, b, exact):
    for step_a, step_b in zip(a[:2], b[:2]):
        for ta, tb in zip(step_a, step_b):
            if exact:
                assert torch.equal(ta, tb)
            else:
                torch.testing.assert_close(ta, tb, **F32)
    assert torch.equal(a[2], b[2])  # the generator ended in the same state


def test_warm_cache_process_draws_what_the_cold_one_drew(tmp_path):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache")}
    cold, programs, loads = _process(tmp_path, "cold", env)
    assert programs == 2 and loads == 0
    warm, programs, loads = _process(tmp_path, "warm", env)
    assert programs == 0 and loads == 2  # replayed from the AOTAutograd cache
    _assert_same_run(warm["compiled"], cold["compiled"], exact=True)
    _assert_same_run(cold["compiled"], cold["eager"], exact=False)
    assert not torch.equal(cold["compiled"][0][0], cold["compiled"][1][0])


def test_fused_eager_mode_draws_like_compiled(tmp_path):
    env = {"TORCH_TPU_DEFER_AND_FUSE": "1", "TORCH_TPU_CACHE_DIR": "0"}
    fused, _, _ = _process(tmp_path, "fused", env)
    _assert_same_run(fused["compiled"], fused["eager"], exact=False)
    plain, _, _ = _process(tmp_path, "plain", {"TORCH_TPU_CACHE_DIR": "0"})
    _assert_same_run(fused["compiled"], plain["compiled"], exact=True)
