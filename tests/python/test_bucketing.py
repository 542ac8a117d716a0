"""Shape bucketing (bounded dynamism) for torch.compile: a size marked with
torch_tpu.mark_dynamic(t, dim, max=N) runs one executable for every size up
to N (one per forward and backward graph in training), and results and
gradients match PyTorch's CPU ones; ops that would read the padding are
compile errors naming the op."""
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


def test_mean_over_dynamic_dim_divides_by_the_runtime_count():
    def f(x):
        return torch.exp(x).mean(0) + x.mean()

    torch.manual_seed(4)
    assert _run(f, [torch.randn(n, 3) for n in (5, 2, 16)], 0, 16) == 1


def test_padding_made_nonzero_inside_the_graph_is_masked():
    # x + 1 turns the zero padding into ones before each reduction; the
    # merge of the dynamic (outermost) dim keeps the valid part a prefix.
    def f(x):
        y = x + 1
        return (y.reshape(-1, 5).sum(0), torch.log_softmax(y, 0).amax(0),
                y.cumsum(0)[:, 1:].logsumexp(0), (y > 1).any(0))

    torch.manual_seed(5)
    torch._dynamo.reset()
    cf = torch.compile(f, backend="tpu")
    before = _program_compiles()
    for n in (3, 8, 2):
        x = torch.randn(n, 4, 5)
        xt = x.to("tpu")
        torch_tpu.mark_dynamic(xt, 0, max=8)
        with torch.no_grad():
            for got, want in zip(cf(xt), f(x)):
                torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    assert _program_compiles()[0] - before[0] == 1


@pytest.mark.parametrize("fn, why", [
    (lambda x: x.t().reshape(-1).sum(), "moves a dynamic dimension inside"),
    (lambda x: x[-1] * 2, "symbolic or negative start|selects an index"),
    (lambda x: x.sort(0).values, "not verified"),
])
def test_ops_that_would_read_the_padding_run_per_exact_size_with_a_warning(fn, why):
    # named in the warning; results still right, one program per size
    with pytest.warns(UserWarning, match=f"bucketed.*({why})"):
        assert _run(fn, [torch.randn(5, 3), torch.randn(7, 3)], 0, 16) == 2


def test_kv_cache_concat_and_positions_from_a_symbolic_start():
    # The decode step of a KV cache: cat along the growing dim (each
    # operand lands at the runtime end of the ones before), positions from
    # arange(past, past + 1), attention over the result.
    def f(past, new, q):
        kv = torch.cat([past, new], dim=1)
        pos = torch.arange(past.shape[1], past.shape[1] + new.shape[1])
        att = torch.softmax(q @ kv.transpose(1, 2), -1) @ kv
        return att, kv, pos * 2, torch.cat([kv, past * 2], 1).sum(1)

    torch.manual_seed(6)
    q = torch.randn(2, 1, 4)
    torch._dynamo.reset()
    cf = torch.compile(f, backend="tpu")
    before = _program_compiles()
    for n in (3, 5, 6, 7):
        past, new = torch.randn(2, n, 4), torch.randn(2, 1, 4)
        pt = past.to("tpu")
        torch_tpu.mark_dynamic(pt, 1, max=8)
        with torch.no_grad():
            got = cf(pt, new.to("tpu"), q.to("tpu"))
        for g, w in zip(got, f(past, new, q)):
            assert g.is_contiguous()
            torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)
    assert _program_compiles()[0] - before[0] == 1


def test_hf_generate_with_compiled_forward_runs_one_program_per_bucket():
    """Greedy generate with a KV cache and a compiled forward: the cache
    grows by a token per step, Dynamo makes its length dynamic, and the
    decode graph runs from one program per power-of-two bucket of the
    length instead of one per length; tokens equal the CPU's."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    cpu, dev = _cpu_and_tpu(lambda: transformers.LlamaForCausalLM(cfg).eval())
    dev.forward = torch.compile(dev.forward, backend="tpu")
    torch._dynamo.reset()
    ids = torch.randint(0, 128, (1, 5))
    st0 = torch.tpu._get_cache_stats()
    out = dev.generate(ids.to("tpu"), max_new_tokens=20, do_sample=False)
    st = torch.tpu._get_cache_stats()
    assert torch.equal(out.cpu(), cpu.generate(ids, max_new_tokens=20, do_sample=False))
    # lengths 7..24 of the cache: buckets 8, 16, 32
    assert st["compiled_bucketed"] - st0["compiled_bucketed"] == 3
    assert st["compiled_specializations"] == st0["compiled_specializations"]


def _cpu_and_tpu(make):
    """Two copies of the model |make()| builds, one on the CPU and one on
    tpu, with the same weights."""
    torch.manual_seed(0)
    cpu = make()
    dev = make()
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev.to("tpu")


def _tiny_gpt():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from models import TinyGPT, gpt_loss

    torch.manual_seed(0)
    return TinyGPT(vocab=64, d=32, layers=2, heads=2, seq=16), gpt_loss


@pytest.mark.parametrize("dim, sizes, other, bound", [
    (0, (3, 5, 2), 12, 8),    # batch size changes
    (1, (9, 16, 4), 1, 16),   # sequence length changes (batch 1, as in generation)
])
def test_transformer_training_step_one_forward_one_backward_program(dim, sizes, other, bound):
    """Loss and every parameter gradient of a GPT-style model (embeddings,
    layer norm, causal attention, GELU MLP, tied head, cross entropy) match
    the CPU at each size, from one forward and one backward executable."""
    cpu, loss_fn = _tiny_gpt()
    dev, _ = _tiny_gpt()
    dev = dev.to("tpu")
    torch._dynamo.reset()
    step = torch.compile(lambda x, y: loss_fn(dev, x, y), backend="tpu")
    before = _program_compiles()
    g = torch.Generator().manual_seed(1)
    for n in sizes:
        shape = (n, other) if dim == 0 else (other, n)
        x, y = (torch.randint(0, 64, shape, generator=g) for _ in range(2))
        xt, yt = x.to("tpu"), y.to("tpu")
        for t in (xt, yt):
            torch_tpu.mark_dynamic(t, dim, max=bound)
        for p in list(cpu.parameters()) + list(dev.parameters()):
            p.grad = None
        loss = step(xt, yt)
        loss.backward()
        want = loss_fn(cpu, x, y)
        want.backward()
        torch.testing.assert_close(loss.cpu(), want, rtol=1e-5, atol=1e-5)
        for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert _program_compiles()[0] - before[0] == 2


def test_dynamic_sequence_inside_a_batch_runs_per_exact_size():
    # [2, T] -> [2*T] would put the padding between the two sequences: the
    # warning names the reshape, and the loss is still the CPU's.
    cpu, loss_fn = _tiny_gpt()
    dev, _ = _tiny_gpt()
    dev = dev.to("tpu")
    torch._dynamo.reset()
    step = torch.compile(lambda x, y: loss_fn(dev, x, y), backend="tpu")
    x = torch.randint(0, 64, (2, 9))
    xt = x.to("tpu")
    torch_tpu.mark_dynamic(xt, 1, max=16)
    with pytest.warns(UserWarning, match="moves a dynamic dimension inside"), torch.no_grad():
        got = step(xt, xt)
    with torch.no_grad():
        torch.testing.assert_close(got.cpu(), loss_fn(cpu, x, x), rtol=1e-5, atol=1e-5)


def test_sizes_dynamo_bounds_itself_are_buckets_not_one_program():
    # BERT's position table bounds the sequence length (a Dynamo inference,
    # not a mark_dynamic max): changing lengths run per bucket, no warning.
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                  intermediate_size=64, vocab_size=256)
    cpu, dev = _cpu_and_tpu(lambda: transformers.BertModel(cfg).eval())
    torch._dynamo.reset()
    f = torch.compile(lambda ids: dev(input_ids=ids)[0], backend="tpu")
    import warnings
    before = torch.tpu._get_cache_stats()["compiled_bucketed"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for n in (7, 9, 12):
            ids = torch.randint(0, 256, (1, n))
            with torch.no_grad():
                torch.testing.assert_close(f(ids.to("tpu")).cpu(), cpu(input_ids=ids)[0],
                                           rtol=1e-4, atol=1e-5)
    # 7 static; 9 and 12 share bucket 16
    assert torch.tpu._get_cache_stats()["compiled_bucketed"] - before == 1


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


def test_running_statistics_update_with_a_changing_batch():
    # BatchNorm's running statistics are inputs updated in place; its batch
    # reduction cannot run padded, so each batch size gets its program.
    ref, dev = _cpu_and_tpu(lambda: torch.nn.Sequential(torch.nn.Linear(4, 8),
                                                        torch.nn.BatchNorm1d(8)).train())
    torch._dynamo.reset()
    compiled = torch.compile(dev, backend="tpu")
    g = torch.Generator().manual_seed(1)
    for n in (5, 6, 9):
        x, w = torch.randn(n, 4, generator=g), torch.randn(n, 8, generator=g)
        got = compiled(x.to("tpu"))
        (got * w.to("tpu")).sum().backward()
        want = ref(x)
        (want * w).sum().backward()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(dev[1].running_mean.cpu(), ref[1].running_mean)
        torch.testing.assert_close(dev[1].running_var.cpu(), ref[1].running_var)
        torch.testing.assert_close(dev[0].weight.grad.cpu(), ref[0].weight.grad,
                                   rtol=1e-4, atol=1e-5)


def _halves(x):
    torch._check(x.shape[0] >= 2)
    return x[: x.shape[0] // 2] * 2


@pytest.mark.parametrize("fn", [
    _halves,                                             # size tests and asserts
    lambda x: (x.float() / x.shape[0]).sum(0),           # a size as an operand
    lambda x: torch.nn.functional.interpolate(           # float size arithmetic
        x.t().unsqueeze(0), scale_factor=1.5, mode="linear").squeeze(0),
])
def test_graphs_of_changing_sizes_run_whatever_they_do_with_the_sizes(fn):
    torch._dynamo.reset()
    cf = torch.compile(fn, backend="tpu")
    for n in (8, 12, 16, 20):
        x = torch.randn(n, 4)
        torch.testing.assert_close(cf(x.to("tpu")).cpu(), fn(x), rtol=1e-5, atol=1e-5)


def _heads_of(x, n):
    m = 8 - n
    y = x.reshape(1, -1, m, 8).transpose(1, 2).contiguous()
    return y.reshape(1, m, -1).softmax(-1)


def test_size_that_shrinks_as_a_size_grows_runs_per_exact_size():
    """A size like 8 - n (MiniCPM-V's attention heads) is smallest at the
    bucket of n, not largest: built at the bucket it was 0 (a division by
    zero; elsewhere, too few rows). Such a graph runs per exact size."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(1, 4, 4, 8)
    cf = torch.compile(_heads_of, backend="tpu", dynamic=True)
    for n in (4, 6, 4):
        got = cf(x.to("tpu"), n)
        torch.testing.assert_close(got.cpu(), _heads_of(x, n), rtol=1e-5, atol=1e-6)


_AOT_LOAD = """
import sys, torch, torch_tpu
w = torch.load(sys.argv[2])
with open(sys.argv[1], "rb") as f:
    fn = torch.compiler.load_compiled_function(f)
for n in (5, 9, 40):
    x = torch.randn(n, 8)
    torch.testing.assert_close(fn(x.to("tpu"), w.to("tpu")).cpu(),
                               (torch.relu(x @ w) - x.mean(0)[:4]).sum(-1))
print(torch.tpu._get_cache_stats()["compiled_bucketed"])
"""


def test_aot_compile_of_a_dynamic_graph_saves_and_loads(tmp_path):
    # torch._dynamo.aot_compile (vLLM's default compile path) needs an
    # OutputCode it can pickle: the bucketed result pickles as its graph and
    # symbolic input sizes, and a fresh process builds its buckets again.
    import subprocess
    import sys

    def f(x, w):
        return (torch.relu(x @ w) - x.mean(0)[:4]).sum(-1)

    torch._dynamo.reset()
    w = torch.randn(8, 4)
    x = torch.randn(6, 8, device="tpu")
    torch._dynamo.mark_dynamic(x, 0)
    fn = torch.compile(f, backend="tpu", fullgraph=True).aot_compile(((x, w.to("tpu")), {}))
    for n in (6, 11, 20):
        xx = torch.randn(n, 8)
        torch.testing.assert_close(fn(xx.to("tpu"), w.to("tpu")).cpu(), f(xx, w))
    fn.save_compiled_function(str(tmp_path / "f.bin"))
    torch.save(w, tmp_path / "w.pt")
    r = subprocess.run([sys.executable, "-c", _AOT_LOAD, str(tmp_path / "f.bin"),
                        str(tmp_path / "w.pt")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) == 3, r.stdout  # buckets 8, 16 and 64
