"""torch.compile(backend="tpu"): compiled results against eager on tpu (the
same rules, so only XLA's fusion can reorder float arithmetic: f32
tolerances of a few ulps times the reduction depth), training steps with
donation, graph breaks, shape changes, errors, registration."""
import copy
import json
import os
import sys
import textwrap
import warnings

import pytest
import torch
from torch import nn

import torch_tpu
from torch_tpu._compile import TpuCompileError

from conftest import run_python

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from models import TinyGPT, gpt_batch, gpt_loss, gpt_train_step  # noqa: E402

# f32 through XLA: fused reductions and dots may associate differently from
# the one-op-per-graph eager path; 1e-4 relative covers the depths here.
F32 = dict(rtol=1e-4, atol=1e-5)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def stats():
    return torch.tpu._get_cache_stats()


def grads(model):
    return [p.grad.detach().cpu().clone() for p in model.parameters()]


def twins(cpu_model, device):
    """Two identical copies of |cpu_model| on |device| (deepcopy of a tpu
    module copies storages bytewise, which eager does not support for every
    dtype yet)."""
    return copy.deepcopy(cpu_model).to(device), copy.deepcopy(cpu_model).to(device)


def check_fwd_bwd(pair, *inputs, loss_fn=lambda out: out.float().square().mean(), tol=F32):
    """Compiled forward and gradients equal eager ones on tpu."""
    model, ref = pair
    out_ref = ref(*inputs)
    loss_fn(out_ref).backward()
    compiled = torch.compile(model, backend="tpu")
    out = compiled(*inputs)
    loss_fn(out).backward()
    torch.testing.assert_close(out.cpu(), out_ref.cpu(), **tol)
    for g, gr in zip(grads(model), grads(ref)):
        torch.testing.assert_close(g, gr, **tol)


def test_backend_registered_and_default_for_tpu(tpu):
    import torch._dynamo
    from torch._dynamo.device_interface import get_interface_for_device

    assert "tpu" in torch._dynamo.list_backends()
    assert torch.compiler.get_default_backend() is torch_tpu._compile.default_backend
    iface = get_interface_for_device("tpu")
    assert iface.is_available()
    assert iface.device_count() == torch.tpu.device_count()
    iface.synchronize()

    before = stats()["compiled_graphs"]
    fn = torch.compile(lambda a, b: (a * b).sum(-1))  # no backend argument
    a, b = torch.randn(4, 8, device=tpu), torch.randn(4, 8, device=tpu)
    torch.testing.assert_close(fn(a, b).cpu(), (a.cpu() * b.cpu()).sum(-1), **F32)
    assert stats()["compiled_graphs"] == before + 1


def test_backend_named_inductor_compiles_tpu_graphs_with_the_tpu_backend(tpu):
    """CUDA code naming Inductor runs unchanged: Inductor's tpu code generator
    (Pallas) would fail at the first kernel, importing another package."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(4, 8)
    want = model(x)
    before = stats()["compiled_graphs"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch_tpu._compile._routed_inductor_warned = False
        fn = torch.compile(model.to(tpu), backend="inductor", mode="max-autotune")
        got = fn(x.to(tpu))
    torch.testing.assert_close(got.cpu(), want, **F32)
    assert stats()["compiled_graphs"] == before + 1
    assert any("compiled by the tpu backend" in str(w.message) for w in caught)


def test_default_backend_takes_graphs_that_make_tpu_values(tpu, fresh_dynamo):
    """A graph without tpu inputs that makes tpu values (create_block_mask,
    torch.arange(device="tpu")) is a tpu graph too: Inductor would send it to
    its Pallas code generator."""
    before = stats()["compiled_graphs"]
    got = torch.compile(lambda n: (torch.arange(n, device="tpu") * 2).cumsum(0))(5)
    assert got.device.type == "tpu" and stats()["compiled_graphs"] == before + 1
    assert torch.equal(got.cpu(), (torch.arange(5) * 2).cumsum(0))


def test_default_backend_leaves_cpu_to_inductor():
    calls = []

    def spy(gm, example_inputs, **kw):
        calls.append(gm)
        return gm.forward

    orig = torch._TorchCompileInductorWrapper.__call__
    torch._TorchCompileInductorWrapper.__call__ = lambda self, gm, inputs: spy(gm, inputs)
    try:
        before = stats()["compiled_graphs"]
        fn = torch.compile(lambda a: a.sin() + 1)
        x = torch.randn(5)
        torch.testing.assert_close(fn(x), x.sin() + 1)
    finally:
        torch._TorchCompileInductorWrapper.__call__ = orig
    assert len(calls) == 1 and stats()["compiled_graphs"] == before


def test_mlp_forward_and_gradients(tpu):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 4))
    check_fwd_bwd(twins(model, tpu), torch.randn(8, 16, device=tpu))


def test_cnn_forward_and_gradients(tpu):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, 5))
    x = torch.randn(2, 3, 12, 12, device=tpu)
    model, ref = twins(model, tpu)
    check_fwd_bwd((model, ref), x)
    # BatchNorm's running stats are input mutations of the compiled graph.
    torch.compile(model, backend="tpu")(x)
    ref(x)
    torch.testing.assert_close(model[1].running_mean.cpu(), ref[1].running_mean.cpu(), **F32)


def test_gpt_forward_and_gradients(tpu):
    torch.manual_seed(0)
    model, ref = twins(TinyGPT(vocab=96, d=32, layers=2, heads=4, seq=16), tpu)
    x, y = gpt_batch(2, 16, 96, tpu)
    loss_ref = gpt_loss(ref, x, y)
    loss_ref.backward()
    loss = torch.compile(lambda a, b: gpt_loss(model, a, b), backend="tpu")(x, y)
    loss.backward()
    torch.testing.assert_close(loss.cpu(), loss_ref.cpu(), **F32)
    for g, gr in zip(grads(model), grads(ref)):
        torch.testing.assert_close(g, gr, rtol=1e-4, atol=1e-5)


def test_forward_saves_bases_not_views():
    """The partition saves a linear layer's weight, not its transpose (a
    program output would copy it), and the backward recomputes the view."""
    from functorch.compile import aot_function, make_boxed_func

    from torch_tpu._compile import _partition, _view_ops

    saved = []

    def fw(gm, _):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        saved.extend(a for a in out.args[0][1:] if isinstance(a, torch.fx.Node))
        return make_boxed_func(gm)

    f = aot_function(lambda x, w, b: nn.functional.linear(x, w, b).tanh(), fw_compiler=fw,
                     bw_compiler=lambda gm, _: make_boxed_func(gm), partition_fn=_partition)
    args = [torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)]
    args = [a.requires_grad_() for a in args]
    f(*args).sum().backward()
    assert saved and not [n for n in saved if n.target in _view_ops()], saved
    ref = [a.detach().clone().requires_grad_() for a in args]
    nn.functional.linear(*ref).tanh().sum().backward()
    for a, r in zip(args, ref):
        torch.testing.assert_close(a.grad, r.grad)



def test_decompositions_trace_as_the_core_aten_table_would():
    """decompositions() skips materialising the core ATen table. Every entry
    that table would add is either still there (the same function, or the
    op's own decomposition) or an implicit-autograd op that tracing
    decomposes by itself on tpu and CPU tensors (no kernel of their own)."""
    from torch._decomp import core_aten_decompositions, decomposition_table
    from torch.utils._python_dispatch import autograd_would_have_decomposed

    from torch_tpu._compile import decompositions, has_rule

    ours = decompositions()
    implicit = torch._C.DispatchKey.CompositeImplicitAutograd
    core = {op: fn for op, fn in core_aten_decompositions().items()
            if isinstance(op, torch._ops.OpOverload) and not has_rule(op)}
    assert len(core) > 400  # the table this guards against is still the large one
    samples = [torch.empty(1, device="tpu"), torch.empty(1)]
    left_to_tracing = 0
    for op, fn in core.items():
        if op in ours:
            assert ours[op] is decomposition_table.get(op, ours[op])
            if op not in decomposition_table:
                assert ours[op] == op.decompose, op
            continue
        if op in (torch.ops.aten.lift.default, torch.ops.aten.lift_fresh.default):
            continue
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), implicit) or \
            implicit in op.py_kernels, f"{op} is not implicit-autograd"
        assert all(autograd_would_have_decomposed(op, [x]) for x in samples), \
            f"{op} has a tpu or CPU kernel, so tracing would keep it whole"
        left_to_tracing += 1
    assert left_to_tracing > 300

@pytest.mark.parametrize("foreach", [True, False])
def test_training_step_with_capturable_adamw_updates_in_place(tpu, foreach):
    torch.manual_seed(0)
    model, ref = twins(TinyGPT(vocab=64, d=32, layers=1, heads=2, seq=8), tpu)
    x, y = gpt_batch(2, 8, 64, tpu)

    def make_step(m):
        # eps well above the gradients' float noise: with a tiny eps Adam's
        # m / sqrt(v) turns noise in near-zero gradients into O(lr) steps.
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, eps=1e-3, capturable=True,
                                foreach=foreach)
        return gpt_train_step(m, opt)

    step, ref_step = torch.compile(make_step(model), backend="tpu"), make_step(ref)
    donated = stats()["donated_buffers"]
    ptr = model.tok.weight.data_ptr()
    for _ in range(3):
        loss, loss_ref = step(x, y), ref_step(x, y)
        torch.testing.assert_close(loss.cpu(), loss_ref.cpu(), rtol=1e-4, atol=1e-5)
    for p, pr in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), pr.detach().cpu(), rtol=1e-4, atol=1e-5)
    assert model.tok.weight.data_ptr() == ptr  # updated in place, same storage
    assert stats()["donated_buffers"] > donated


def test_in_place_ops_with_a_factor(tpu):
    # Dynamo rewrites these as prims.fma(a, b, c) = a * b + c for Inductor.
    def fn(x, t1, t2, alpha):
        x.addcmul_(t1, t2, value=0.5)
        x.addcdiv_(t1, t2.abs() + 1, value=-2.0)
        x.add_(t1, alpha=alpha)
        return x

    g = torch.Generator().manual_seed(0)
    args = [torch.randn(5, 7, generator=g) for _ in range(3)] + [torch.tensor(0.25)]
    expected = fn(*[a.clone() for a in args])
    got = torch.compile(fn, backend="tpu")(*[a.to(tpu) for a in args])
    torch.testing.assert_close(got.cpu(), expected, **F32)


def test_no_grad_inference_and_graph_break(tpu):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 6), nn.ReLU()).to(tpu)

    def fn(x):
        h = model(x)
        print("graph break here", file=open(os.devnull, "w"))
        if h.sum().item() > -1e9:  # data-dependent: another break
            h = h * 2
        return model(h)

    x = torch.randn(3, 6, device=tpu)
    with torch.no_grad():
        expected = fn(x).cpu()
        before = stats()["compiled_graphs"]
        got = torch.compile(fn, backend="tpu")(x).cpu()
    torch.testing.assert_close(got, expected, **F32)
    assert stats()["compiled_graphs"] >= before + 2  # the pieces between breaks


def test_views_and_mutated_view_inputs(tpu):
    base = torch.arange(24.0, device=tpu).reshape(4, 6)
    ref = base.cpu().clone()

    def fn(a):
        a.add_(1)  # mutates a view of a larger storage
        return a.t()[1:, ::2].unsqueeze(0).expand(2, -1, -1).sum(0)

    with torch.no_grad():
        got = torch.compile(fn, backend="tpu")(base[1:3])
        want = fn(ref[1:3])
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(base.cpu(), ref)


def test_changing_sizes_run_one_program_per_bucket(tpu):
    fn = torch.compile(lambda a: torch.softmax(a, -1) * 3 + a.mean(0), backend="tpu")
    before = stats()
    for n in (4, 5, 6, 5, 13, 9):
        a = torch.randn(n, 7, device=tpu)
        want = torch.softmax(a.cpu(), -1) * 3 + a.cpu().mean(0)
        torch.testing.assert_close(fn(a).cpu(), want, **F32)
    # 4 static; 5 retraces with a symbolic size: bucket 8 serves 5, 6, 5;
    # 13 and 9 share bucket 16, the one recompile.
    after = stats()
    assert after["compiled_bucketed"] - before["compiled_bucketed"] == 2
    assert after["compiled_recompiles"] - before["compiled_recompiles"] == 1
    x = torch.randn(3, 7, device=tpu)
    torch._dynamo.mark_dynamic(x, 0)
    torch.testing.assert_close(fn(x).cpu(), torch.softmax(x.cpu(), -1) * 3 + x.cpu().mean(0),
                               **F32)


def test_bucketed_result_can_be_modified_in_place_with_grad(tpu):
    # A result cut from its padded buffer came back as a view made under
    # no_grad; accumulating into it with grad on was refused (SwitchTransformers'
    # MoE loop: zeros_like, a graph break at nonzero(), then index_add_).
    def start(h):
        return torch.zeros_like(h) * 2

    fn = torch.compile(start, backend="tpu")
    for n in (4, 5, 6):
        h = torch.randn(n, 3, device=tpu, requires_grad=True)
        out = fn(h)
        assert not out._is_view()
        out.index_add_(0, torch.arange(n, device=tpu), h * 3)
        out.sum().backward()
        torch.testing.assert_close(h.grad.cpu(), torch.full((n, 3), 3.0))
    assert stats()["compiled_bucketed"] > 0


def test_graph_that_cannot_run_padded_is_specialised_per_size(tpu):
    # sort along the changing dim would read the padding: exact sizes instead
    fn = torch.compile(lambda a: a.sort(0).values * 2, backend="tpu")
    before = stats()
    for n in (4, 5, 6, 5):
        a = torch.randn(n, 3, device=tpu)
        torch.testing.assert_close(fn(a).cpu(), a.cpu().sort(0).values * 2, **F32)
    after = stats()
    assert after["compiled_specializations"] - before["compiled_specializations"] == 2
    assert after["compiled_bucketed"] == before["compiled_bucketed"]


def test_op_without_rule_names_op_and_line(tpu):
    @torch.library.custom_op("tpu_compile_test::mystery", mutates_args=())
    def mystery(x: torch.Tensor) -> torch.Tensor:
        return x.cpu().neg().to(x.device)

    @mystery.register_fake
    def _(x):
        return torch.empty_like(x)

    def fn(x):
        return torch.ops.tpu_compile_test.mystery(x) + 1  # the failing line

    x = torch.randn(3, device=tpu)
    with pytest.raises(Exception) as info:
        torch.compile(fn, backend="tpu")(x)
    msg = str(info.value)
    assert "tpu_compile_test::mystery" in msg and "no tpu lowering" in msg
    assert "the failing line" in msg
    # Nothing was left half-compiled: the function still runs eagerly.
    torch.testing.assert_close(fn(x).cpu(), -x.cpu() + 1)


def test_backward_without_rule_fails_at_backward_not_forward(tpu):
    @torch.library.custom_op("tpu_compile_test::bw_mystery", mutates_args=())
    def bw_mystery(x: torch.Tensor) -> torch.Tensor:
        return x.cpu().neg().to(x.device)

    @bw_mystery.register_fake
    def _(x):
        return torch.empty_like(x)

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return torch.ops.tpu_compile_test.bw_mystery(g)

    x = torch.randn(3, device=tpu, requires_grad=True)
    out = torch.compile(lambda v: Twice.apply(v).sin(), backend="tpu")(x)
    torch.testing.assert_close(out.detach().cpu(), (x.detach().cpu() * 2).sin(), **F32)
    with pytest.raises(TpuCompileError, match="bw_mystery has no tpu lowering") as info:
        out.sum().backward()
    # the source line of the backward that emitted it
    assert "return torch.ops.tpu_compile_test.bw_mystery(g)" in str(info.value)


def test_hugging_face_models(tpu):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    torch.manual_seed(0)
    configs = [
        transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2,
                                resid_pdrop=0, embd_pdrop=0, attn_pdrop=0),
        transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=1, num_attention_heads=4,
                                 num_key_value_heads=2, max_position_embeddings=16),
    ]
    ids = torch.randint(0, 64, (2, 8), device=tpu)
    for cfg in configs:
        model, ref = twins(transformers.AutoModelForCausalLM.from_config(cfg), tpu)
        # use_cache=False: the KV cache object starts from torch.tensor([])
        # on the device, which FakeTensor cannot trace for tpu yet.
        out_ref = ref(input_ids=ids, labels=ids, use_cache=False)
        out_ref.loss.backward()
        out = torch.compile(model, backend="tpu")(input_ids=ids, labels=ids, use_cache=False)
        out.loss.backward()
        torch.testing.assert_close(out.logits.cpu(), out_ref.logits.cpu(), rtol=1e-4, atol=1e-5)
        for g, gr in zip(grads(model), grads(ref)):
            torch.testing.assert_close(g, gr, rtol=1e-4, atol=1e-5)


def test_second_process_starts_warm(tmp_path):
    code = textwrap.dedent("""
        import torch, torch_tpu
        m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to("tpu")
        torch.manual_seed(0)
        x = torch.randn(4, 16, device="tpu")
        torch.compile(m, backend="tpu")(x).sum().backward()
        torch.tpu.wait_for_compiles()  # (a training graph's first runs do not wait for XLA)
        s = torch.tpu._get_cache_stats()
        print("STATS", s["program_compiles"], s["program_cache_hits"], s["compiled_programs"])
    """)
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    first = run_python(code, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_python(code, env=env, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    c1 = [int(v) for v in first.stdout.split("STATS")[1].split()]
    c2 = [int(v) for v in second.stdout.split("STATS")[1].split()]
    assert c1[0] == 2 and c1[2] == 2  # forward and backward compiled by XLA
    assert c2[0] == 0 and c2[1] == 2  # both loaded from the disk cache


AOT_CACHE_CODE = textwrap.dedent("""
    import torch, torch_tpu
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=0.1, capturable=True)
    x = torch.randn(4, 16).to("tpu")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = m(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    step = torch.compile(step, backend="tpu")
    losses = [step().item() for _ in range(2)]
    s = torch.tpu._get_cache_stats()
    print("STATS", s["program_compiles"], s["compiled_programs"], s["compiled_cache_loads"],
          s["compiled_cache_stores"], counters["aot_autograd"]["autograd_cache_hit"])
    print("LOSSES", *losses)
    import sys
    print("INDUCTOR", *sorted(m for m in ("torch._inductor.cudagraph_trees",
                                          "torch._inductor.codegen.triton",
                                          "torch._inductor.codegen.cpp") if m in sys.modules))
""")


def _aot_run(cache, direct=True):
    r = run_python(AOT_CACHE_CODE, env={"TORCH_TPU_CACHE_DIR": str(cache),
                                        "TORCH_TPU_COMPILE_DIRECT": "1" if direct else "0"},
                   timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    xla, programs, loads, stores, hits = map(int, r.stdout.split("STATS")[1].split()[:5])
    losses = [float(v) for v in r.stdout.split("LOSSES")[1].splitlines()[0].split()]
    inductor = r.stdout.split("INDUCTOR")[1].split()
    return dict(xla=xla, programs=programs, loads=loads, stores=stores, hits=hits, losses=losses,
                inductor=inductor)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "aot"])
def test_second_process_loads_aot_autograd_cache(tmp_path, direct):
    """The optimizer's graph, which needs no autograd, is cached by the
    direct path (or, with it off, in AOTAutograd's cache)."""
    cold = _aot_run(tmp_path, direct)
    assert cold["xla"] > 0 and cold["programs"] > 0 and cold["loads"] == 0
    assert cold["stores"] == cold["programs"]  # every program went into an entry
    entries = list((tmp_path / "torch_compile").rglob("*"))
    assert any(p.is_file() for p in entries)  # under our cache folder
    warm = _aot_run(tmp_path, direct)
    # No XLA compile, no FX lowering, no trace: every program is replayed
    # from a cache entry and its executable read from disk.
    assert warm["xla"] == 0 and warm["programs"] == 0
    assert warm["loads"] == cold["programs"] and (direct or warm["hits"] >= 1)
    torch.testing.assert_close(warm["losses"], cold["losses"], rtol=1e-6, atol=0)
    # Neither the cache key nor the optimizer's trace loads Inductor's code
    # generators (a third of a second in each process).
    assert cold["inductor"] == [] and warm["inductor"] == []


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "aot"])
def test_damaged_aot_autograd_entries_recompile(tmp_path, direct):
    cold = _aot_run(tmp_path, direct)
    files = [p for p in (tmp_path / "torch_compile").rglob("*") if p.is_file()]
    assert files
    for p in files:  # truncated: unpickling fails
        p.write_bytes(p.read_bytes()[:40])
    again = _aot_run(tmp_path, direct)
    assert again["loads"] == 0 and again["programs"] == cold["programs"]
    assert again["xla"] == 0  # executables still come from their own cache
    torch.testing.assert_close(again["losses"], cold["losses"], rtol=1e-6, atol=0)


def test_aot_autograd_cache_folder_is_bounded(tmp_path):
    from torch_tpu import _compile_cache

    base = tmp_path / "torch_compile"
    for i, name in enumerate(("old1", "old2", "old3")):  # other builds' folders
        (base / name).mkdir(parents=True)
        (base / name / "entry").write_bytes(b"x" * 10)
        os.utime(base / name, (1000 + i, 1000 + i))
    root = base / "current"
    root.mkdir()
    for i in range(5):  # 5 entries of 100 bytes, oldest first
        (root / f"e{i}").write_bytes(b"y" * 100)
        os.utime(root / f"e{i}", (2000 + i, 2000 + i))
    os.environ["TORCH_TPU_COMPILE_CACHE_MAX_BYTES"] = "250"
    try:
        _compile_cache.prune(str(root))
    finally:
        del os.environ["TORCH_TPU_COMPILE_CACHE_MAX_BYTES"]
    # the two most recently used other builds stay; the oldest goes
    assert sorted(p.name for p in base.iterdir()) == ["current", "old2", "old3"]
    # this build: the newest entries within 250 bytes
    assert sorted(p.name for p in root.iterdir()) == ["e3", "e4"]


def test_cache_off_stores_no_aot_autograd_entries(tmp_path):
    off = _aot_run("0")
    assert off["stores"] == 0 and off["loads"] == 0 and off["programs"] > 0


def test_garbage_collector_paused_while_compiling(monkeypatch):
    """Python's cyclic collector pauses while Dynamo compiles for a process
    on tpu, is back afterwards, and is left off if the user turned it off."""
    import gc

    import torch_tpu._compile_direct as D

    seen = []
    real = D.compile_graph

    def spy(gm, inputs):
        seen.append(gc.isenabled())
        return real(gm, inputs)

    monkeypatch.setattr(D, "compile_graph", spy)
    x = torch.randn(8, device="tpu")
    # After torch._dynamo.reset() (the fixture) the backend registers the
    # callbacks again during the first compile; the next one is paused.
    torch.compile(lambda t: t + 1, backend="tpu")(x)
    torch.compile(lambda t: t * 2, backend="tpu")(x)
    assert seen[-1] is False, seen
    assert gc.isenabled()
    gc.disable()
    try:
        torch.compile(lambda t: t - 3, backend="tpu")(x)
        assert not gc.isenabled()
    finally:
        gc.enable()

    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_TPU_COMPILE_GC", "1")
    seen.clear()
    torch.compile(lambda t: t + 4, backend="tpu")(x)
    torch.compile(lambda t: t * 5, backend="tpu")(x)
    assert seen == [True, True]


def test_import_torch_freezes_its_objects_and_nothing_after():
    """The end of import torch moves what it made to Python's permanent
    generation (out of later full collections); objects made later stay
    collectable, cycles included. TORCH_TPU_COMPILE_GC=1 leaves it out."""
    code = textwrap.dedent("""
        import gc, weakref
        import torch
        frozen = gc.get_freeze_count()
        class Node:
            pass
        a, b = Node(), Node()
        a.other, b.other = b, a
        a.t = torch.ones(3)
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        print(frozen, gone() is None, gc.get_freeze_count() == frozen)
    """)
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    frozen, collected, unchanged = r.stdout.split()
    assert int(frozen) > 50_000 and collected == "True" and unchanged == "True", r.stdout
    r = run_python(code, env={"TORCH_TPU_COMPILE_GC": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True", "True"], r.stdout


@pytest.mark.parametrize("shapes", [
    ((8, 16), (3, 16, 4), [3, 3, 8]),      # rows grouped (MoE experts); one empty group
    ((3, 5, 16), (16, 12), [2, 7, 12]),    # columns of the right side grouped
    ((5, 16), (16, 8), [4, 10, 16]),       # the contraction grouped (weight gradients)
    ((3, 5, 16), (3, 16, 4), None),        # batched
], ids=["2d-3d", "3d-2d", "2d-2d", "3d-3d"])
def test_grouped_mm_float32_forward_and_backward(shapes):
    """torch._grouped_mm (Mixture-of-Experts layers) compiles for float32,
    which PyTorch's bfloat16-only meta kernel refuses, and gives eager CPU's
    values and gradients."""
    sa, sb, offs = shapes
    torch.manual_seed(0)
    a, b = torch.randn(sa), torch.randn(sb)
    o = torch.tensor(offs, dtype=torch.int32) if offs is not None else None
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    ref = torch._grouped_mm(ca, cb, offs=o)
    ref.square().sum().backward()
    ta, tb = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    graphs = stats()["compiled_graphs"]
    f = torch.compile(lambda x, y, z: torch._grouped_mm(x, y, offs=z), backend="tpu")
    out = f(ta, tb, o.to("tpu") if o is not None else None)
    out.square().sum().backward()
    assert stats()["compiled_graphs"] == graphs + 1
    torch.testing.assert_close(out.cpu(), ref.detach(), **F32)
    torch.testing.assert_close(ta.grad.cpu(), ca.grad, **F32)
    torch.testing.assert_close(tb.grad.cpu(), cb.grad, **F32)


def test_grouped_mm_bad_input_names_the_op():
    a, b = torch.randn(8, 16, device="tpu"), torch.randn(3, 12, 4, device="tpu")
    o = torch.tensor([3, 3, 8], dtype=torch.int32, device="tpu")
    f = torch.compile(lambda x, y, z: torch._grouped_mm(x, y, offs=z), backend="tpu")
    with pytest.raises(Exception, match=r"_grouped_mm: contraction dimension.*\[8, 16\]"):
        f(a, b, o)


def _put(x, m, v):
    x[m] = v
    return x


def _put_cols(x, m, v):
    x[:, m] = v
    return x


def _put_add(x, m, v):
    return x.index_put((m,), v, accumulate=True)


@pytest.mark.parametrize("fn,sx,sm,v", [
    (_put, (2, 512), (2, 512), torch.tensor(-1.0)),        # masked fill with a scalar
    (_put, (2, 12, 32), (2, 12), torch.randn(32)),         # one row for every selected row
    (_put, (2, 12, 32), (2, 12), torch.randn(1, 32)),
    (_put_cols, (3, 6, 5), (6,), torch.randn(3, 1, 5)),     # the mask after a full slice
    (_put_add, (4, 5), (4,), torch.randn(5)),               # accumulate
], ids=["scalar", "row", "row-1", "cols", "accumulate"])
def test_boolean_mask_put_compiles_without_a_sync(fn, sx, sm, v):
    """x[mask] = v is data-dependent in which positions it writes, not in its
    shape: with v one value (or row) for every selection, it compiles to a
    select (Longformer, FastSpeech2 and T5Gemma2 write their masks so)."""
    torch.manual_seed(0)
    x, m = torch.randn(sx), torch.rand(sm) > 0.5
    ref = fn(x.clone(), m, v)
    got = torch.compile(fn, backend="tpu")(x.to("tpu"), m.to("tpu"), v.to("tpu"))
    torch.testing.assert_close(got.cpu(), ref, rtol=0, atol=0)


def _put_rows(x, m, v):
    x = x * 1
    x[m] = v
    return x * 2


def _put_rows_add(x, m, v):
    return x.index_put((m,), v, accumulate=True)


@pytest.mark.parametrize("fn,sx,sm", [
    (_put_rows, (2, 5, 4), (2, 5)),           # Kosmos2: image features into token places
    (_put_rows, (6, 3), (6,)),
    (_put_rows_add, (3, 7, 2), (3, 7)),
], ids=["rows", "rank1-mask", "accumulate"])
def test_boolean_mask_put_of_one_row_per_selection(fn, sx, sm):
    """x[mask] = rows with one row for each True place (Kosmos2, Qwen3-VL-MoE,
    Qwen3-Omni): the k-th True place takes row k, with no host sync to
    build the graph; a run-time check that the count matches runs with it."""
    torch.manual_seed(0)
    x, m = torch.randn(sx), torch.rand(sm) > 0.5
    v = torch.randn(int(m.sum()), *sx[len(sm):])
    want = fn(x.clone(), m, v)
    got = torch.compile(fn, backend="tpu")(x.to("tpu"), m.to("tpu"), v.to("tpu"))
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_boolean_mask_put_of_rows_after_a_full_slice():
    """x[:, mask] = v with v [3, n, 5] (and forms broadcast to it)."""
    torch.manual_seed(0)
    x, m = torch.randn(3, 6, 5), torch.rand(6) > 0.5
    n = int(m.sum())
    for v in (torch.randn(3, n, 5), torch.randn(n, 5), torch.randn(1, n, 1)):
        torch._dynamo.reset()
        got = torch.compile(_put_cols, backend="tpu")(x.to("tpu"), m.to("tpu"), v.to("tpu"))
        torch.testing.assert_close(got.cpu(), _put_cols(x.clone(), m, v), rtol=0, atol=0)


def test_boolean_mask_put_with_the_wrong_row_count_raises():
    """As in eager, a mask selecting other than len(rows) places is a
    RuntimeError naming the op and the row count, raised by the call that
    ran it; the same graph then runs right counts."""
    cf = torch.compile(_put_rows, backend="tpu")
    x = torch.randn(4, 3)
    m = torch.tensor([True, False, True, False])
    with pytest.raises(RuntimeError, match=r"index_put.*shape mismatch.*other than the 2 rows"):
        cf(x.to("tpu"), torch.tensor([True, True, True, False], device="tpu"),
           torch.randn(2, 3, device="tpu"))
    v = torch.randn(2, 3)
    torch.testing.assert_close(cf(x.to("tpu"), m.to("tpu"), v.to("tpu")).cpu(),
                               _put_rows(x, m, v), rtol=0, atol=0)


def _checked(x):
    torch._assert_async((x > 0).all(), "x must be positive")
    return x * 2


def test_assert_async_checks_when_the_graph_runs():
    """torch._assert_async (OpenAIPrivacyFilter) is a run-time check in the
    compiled graph: passing values run, failing ones raise its message."""
    cf = torch.compile(_checked, backend="tpu")
    torch.testing.assert_close(cf(torch.ones(3, device="tpu")).cpu(), torch.full((3,), 2.0))
    with pytest.raises(RuntimeError, match="_assert_async.*x must be positive"):
        cf(torch.tensor([1.0, -1.0, 2.0], device="tpu"))


def test_assert_async_in_eager_still_checks():
    """The check rule serves compiled graphs only: eager (and aot_eager's
    graphs, which run eagerly) read the value as before."""
    torch._assert_async(torch.tensor(True, device="tpu"), "fine")
    with pytest.raises(RuntimeError, match="x must hold"):
        torch._assert_async(torch.tensor(False, device="tpu"), "x must hold")


def _write_strided(x, y):
    x = x.clone()
    x[:, 1:7:2] = y            # slice_scatter with a step
    x[2] = x[2] * 3            # select_scatter
    x[:, -2:] *= 2             # in place on a view, then the base read again
    return x.view(-1, 2).sum(1)


def _shifted_view(q, v, r, mask, shift=2, context=8):
    """FunnelModel's relative shift: reshapes and slices of an einsum's
    result, written in place through the last view."""
    att = torch.einsum("binh,tnh->bnit", q + v, r)
    b, n, s, m = att.shape
    att = att.reshape(b, n, m, s)[:, :, shift:, :].reshape(b, n, s, m - shift)[..., :context]
    att *= mask
    return att


def test_writes_into_slices_compile_with_the_kernel_strides():
    """Writes into slices and selected rows become slice_scatter /
    select_scatter, lowered by rules of their own: PyTorch's decomposition
    gives its result other strides than the kernel, and a later view of it
    (FunnelModel, Longformer) failed to trace."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 8), torch.randn(4, 3)
    got = torch.compile(_write_strided, backend="tpu")(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(got.cpu(), _write_strided(x, y), **F32)
    args = (torch.randn(4, 8, 2, 16), torch.randn(2, 16), torch.randn(18, 2, 16),
            torch.randn(8, 8))
    got = torch.compile(_shifted_view, backend="tpu")(*(a.to("tpu") for a in args))
    torch.testing.assert_close(got.cpu(), _shifted_view(*args), **F32)


def _prepend(x, reg, w):
    y = torch.cat([reg.expand(x.shape[0], -1, -1), x], dim=1)
    return (y @ w).sum(1), reg.sum()


def _double_(z):
    z.mul_(2)
    return z.sum() + 1


def _copy_nothing(x, y):
    z = x.new_zeros(2, 4, 12, 0)
    z.copy_(y)                  # GLM-5's empty cache slots
    return z.sum(-1) + x.sum()


def test_inputs_without_elements():
    """A tensor with no elements (DINOv3's zero register tokens) is a graph
    input like any other; written in place, a zero-size view leaves the
    storage it shares alone."""
    x, reg, w = torch.randn(2, 5, 8), torch.randn(1, 0, 8), torch.randn(8, 3)
    got = torch.compile(_prepend, backend="tpu")(x.to("tpu"), reg.to("tpu"), w.to("tpu"))
    for g, r in zip(got, _prepend(x, reg, w)):
        torch.testing.assert_close(g.cpu(), r, **F32)
    big = torch.randn(10)
    tbig = big.to("tpu")
    assert torch.compile(_double_, backend="tpu")(tbig[3:3]).item() == 1.0
    assert torch.equal(tbig.cpu(), big)
    x, y = torch.randn(3), torch.randn(2, 4, 12, 0)
    got = torch.compile(_copy_nothing, backend="tpu")(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(got.cpu(), _copy_nothing(x, y), **F32)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("op", [torch.gcd, torch.lcm], ids=lambda f: f.__name__)
def test_gcd_lcm_eager_and_compiled(op, dtype):
    """gcd and lcm (Reformer's chunk lengths; PyTorch decomposes them into
    prims in compiled graphs) run Euclid's loop on the device, signs and
    zeros as PyTorch treats them."""
    a = torch.tensor([12, -18, 0, 0, 7, 2**20 * 5, -5, 1071], dtype=dtype)
    b = torch.tensor([8, 24, 0, 9, 0, 2**10 * 3, -15, 462], dtype=dtype)
    want = op(a, b)
    assert torch.equal(op(a.to("tpu"), b.to("tpu")).cpu(), want)
    got = torch.compile(lambda x, y: op(x, y) + 0, backend="tpu")(a.to("tpu"), b.to("tpu"))
    assert torch.equal(got.cpu(), want)


def _chunks_of_transposed(x):
    """Longformer's overlapping chunks, of a tensor whose storage is not in
    its row-major order."""
    y = x.transpose(0, 1) * 1           # [8, 6] with strides (1, 8)
    c = y.as_strided((3, 4, 6), (2, 1, 8))  # overlapping windows over the storage
    return (c.sin() * torch.arange(72.0, device=x.device).view(3, 4, 6)).sum()


def test_as_strided_reads_its_input_storage_order():
    """as_strided indexes its input's storage: for a transposed input that is
    not its row-major order. Forward and gradients match CPU (the gradients
    of Longformer's attention projections were wrong without this)."""
    torch.manual_seed(0)
    x = torch.randn(6, 8)
    cx = x.clone().requires_grad_()
    ref = _chunks_of_transposed(cx)
    ref.backward()
    tx = x.to("tpu").requires_grad_()
    got = torch.compile(_chunks_of_transposed, backend="tpu")(tx)
    got.backward()
    torch.testing.assert_close(got.cpu(), ref.detach(), **F32)
    torch.testing.assert_close(tx.grad.cpu(), cx.grad, **F32)


def _window_past_an_offset(x):
    y = (x * 1)[1:]                         # contiguous, at storage offset 8
    return y.as_strided((2, 4), (8, 1), 8) + 0


def test_as_strided_counts_its_input_storage_offset():
    x = torch.randn(4, 8)
    got = torch.compile(_window_past_an_offset, backend="tpu")(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), _window_past_an_offset(x), rtol=0, atol=0)


def test_as_strided_outside_its_input_is_refused():
    def f(x):
        return x.as_strided((2, 8), (8, 1)) + 1    # reads the base's dropped columns
    base = torch.randn(4, 8, device="tpu")
    with pytest.raises(Exception, match="as_strided.*reads memory outside it"):
        torch.compile(f, backend="tpu")(base[:, :4])


def _window_of_a_slice(x):
    return (x * 1)[:, :4].as_strided((2, 8), (8, 1)) + 1    # the graph holds the columns


def _unfold_of_unfold(h, kernel, hop=4, dilation=3, size=3):
    """UnivNet's location-variable convolution: windows of overlapping
    windows, each an as_strided of the one before."""
    pad = dilation * (size - 1) // 2
    h = torch.nn.functional.pad(h, (pad, pad)).unfold(2, hop + 2 * pad, hop)
    h = h.unfold(3, dilation, dilation).transpose(3, 4).unfold(4, size, 1)
    return torch.einsum("bildsk,biokl->bolsd", h, kernel)


def test_as_strided_of_a_view_reads_the_storage_of_the_chain():
    """A window of a view is a window of the view's root, whose storage the
    graph holds: columns a slice dropped, and windows of overlapping windows
    (which have no flat stand-in of their own). Forward and gradients."""
    x = torch.randn(4, 8)
    got = torch.compile(_window_of_a_slice, backend="tpu")(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), _window_of_a_slice(x), rtol=0, atol=0)
    torch.manual_seed(0)
    h, k = torch.randn(2, 3, 20, requires_grad=True), torch.randn(2, 3, 4, 3, 5, requires_grad=True)
    ref = _unfold_of_unfold(h, k)
    ref.square().sum().backward()
    th, tk = (t.detach().to("tpu").requires_grad_() for t in (h, k))
    got = torch.compile(_unfold_of_unfold, backend="tpu")(th, tk)
    got.square().sum().backward()
    torch.testing.assert_close(got.cpu(), ref.detach(), **F32)
    torch.testing.assert_close(th.grad.cpu(), h.grad, **F32)
    torch.testing.assert_close(tk.grad.cpu(), k.grad, **F32)


def _bits(x):
    y = x * 1
    return (y.view(torch.int32) + 1, y.view(torch.int16) ^ 3, y.view(torch.uint8).sum(),
            y[:, :2].contiguous().view(torch.float64) * 2, (y > 0).view(torch.uint8) + 1)


def test_view_dtype_reinterprets_bits_in_compiled_graphs():
    """view(dtype) (bit tricks, packed formats): same-size, narrower (the last
    dim grows), wider (it shrinks), bool as bytes."""
    x = torch.randn(3, 4)
    for got, want in zip(torch.compile(_bits, backend="tpu")(x.to("tpu")), _bits(x)):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def _window_of_another_dtype(x):
    y = (x * 1).view(torch.int16)                # the chain's root is float32
    return y.as_strided((2, 3), (8, 2), 1) + 0   # strides count int16 elements


def test_as_strided_does_not_look_through_a_dtype_view():
    x = torch.randn(3, 4)
    got = torch.compile(_window_of_another_dtype, backend="tpu")(x.to("tpu"))
    assert torch.equal(got.cpu(), _window_of_another_dtype(x))


def _scatter_into_transposed(x, src):
    y = x.transpose(0, 1) * 1
    z = torch.as_strided_scatter(y, src, (2, 3), (1, 8), 1)
    return z * torch.arange(48.0, device=x.device).view(8, 6)


def test_as_strided_scatter_into_a_non_contiguous_self():
    """as_strided_scatter writes into a clone of self with self's strides:
    for a transposed self that is not its row-major order."""
    x, src = torch.randn(6, 8), torch.randn(2, 3)
    got = torch.compile(_scatter_into_transposed, backend="tpu")(x.to("tpu"), src.to("tpu"))
    torch.testing.assert_close(got.cpu(), _scatter_into_transposed(x, src), rtol=0, atol=0)


def _with_cpu_values(x):
    h = torch.arange(4)                     # no device: the CPU, in eager too
    return x * 2, h + 1, torch.ones(3) * x.shape[0]


def test_cpu_values_of_a_graph_come_back_on_the_cpu():
    """A tensor the graph makes on the CPU (Qwen3-Omni's position tables:
    torch.arange without a device) is returned on the CPU, as eager makes
    it; on tpu it met a CPU tensor in torch.stack at the next graph."""
    x = torch.randn(3)
    got = torch.compile(_with_cpu_values, backend="tpu")(x.to("tpu"))
    want = _with_cpu_values(x)
    assert [t.device.type for t in got] == ["tpu", "cpu", "cpu"]
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0)


_VIEW_OUTPUTS = r"""
import json, torch, torch_tpu
def f(x):
    y = x * 2
    return y, y.transpose(0, 1)[1:], y.view(-1)[2:6].view(2, 2), x[:, 1:]
x = torch.arange(12.0).view(3, 4)
outs = torch.compile(f, backend="tpu")(x.to("tpu").requires_grad_())
err = max((o.detach().cpu() - r).abs().max().item() for o, r in zip(outs, f(x)))
print(json.dumps({"err": err, "loads": torch.tpu._get_cache_stats()["compiled_cache_loads"]}))
"""


@pytest.mark.parametrize("direct", [True, False])
def test_graph_with_view_outputs_is_right_in_a_second_process(tmp_path, direct):
    """Outputs that are views AOTAutograd replays from recorded metadata are
    not stored in the AOTAutograd cache (PyTorch 2.13 reloads some of that
    metadata as garbage: GraniteSpeech's backward read sizes like
    -1181394619924949965): through AOTAutograd each process compiles such a
    graph, and gets it right. Our own path stores its view specs itself: the
    second process loads the graph, and gets it right too."""
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path),
           "TORCH_TPU_COMPILE_DIRECT": "1" if direct else "0"}
    for second in (False, True):
        r = run_python(_VIEW_OUTPUTS, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        res = json.loads(r.stdout.strip().splitlines()[-1])
        # (A training graph loads its forward and backward programs together.)
        assert res["err"] == 0 and res["loads"] == (2 * int(second) if direct else 0), res


def _rotate_complex(x, freqs):
    """DeepseekV2's rotary embedding: pairs as complex numbers, times unit
    phases, back to pairs; FNet's Fourier mixing takes the real part."""
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * freqs
    mixed = torch.fft.fft(z.conj(), dim=-1).real
    return torch.view_as_real(z).flatten(-2) * 1, mixed


def test_complex_views_forward_and_gradients():
    """view_as_complex, view_as_real and conj views (from the backward of a
    complex product) lower as values in compiled graphs."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, 8)
    freqs = torch.polar(torch.ones(4, 4), torch.randn(4, 4))
    g = [torch.randn(3, 4, 8), torch.randn(3, 4, 4)]
    cx = x.clone().requires_grad_()
    want = _rotate_complex(cx, freqs)
    torch.autograd.backward(want, g)
    tx = x.to("tpu").requires_grad_()
    got = torch.compile(_rotate_complex, backend="tpu")(tx, freqs.to("tpu"))
    torch.autograd.backward(got, [t.to("tpu") for t in g])
    for a, b in zip(got, want):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), **F32)
    torch.testing.assert_close(tx.grad.cpu(), cx.grad, **F32)


def _repeat_then_view(x):
    """WavLM's gated relative position bias: repeat, then a view that needs
    the kernel's contiguous result."""
    return x.permute(0, 2, 1).repeat(1, 2, 3).view(-1, 6) * 1


@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((4,), (3, 2, 2)),
                                        ((2, 1, 3), (1, 4, 2)), ((2, 3), (0, 2)), ((), (3,))])
def test_repeat_compiled_matches_cpu(shape, reps):
    x = torch.randn(shape)
    got = torch.compile(lambda t: t.repeat(*reps) + 0, backend="tpu")(x.to("tpu"))
    assert torch.equal(got.cpu(), x.repeat(*reps))
    torch._dynamo.reset()


def test_repeat_result_is_contiguous_for_later_views():
    x = torch.randn(2, 4, 3)
    got = torch.compile(_repeat_then_view, backend="tpu")(x.to("tpu"))
    assert torch.equal(got.cpu(), _repeat_then_view(x))


def _window_is_the_input(x):
    y = torch.nn.functional.pad(x * 1, (0, 2))[..., :8]     # a view with gaps
    return y.as_strided((2, 3, 8, 1), (30, 10, 1, 1)) * 2


def test_as_strided_of_a_view_with_gaps_that_is_the_view_itself():
    """An as_strided window that is its input with a dim of one added
    (UnivNet) is a reshape, even when the input has gaps in its storage."""
    x = torch.randn(2, 3, 8)
    got = torch.compile(_window_is_the_input, backend="tpu")(x.to("tpu"))
    assert torch.equal(got.cpu(), _window_is_the_input(x))


@pytest.mark.parametrize("case", ["embedding", "index_select", "gather", "index", "nll_targets",
                                  "scatter_add"])
def test_out_of_range_indices_in_compiled_graphs_raise_at_the_next_sync(tpu, case):
    """XLA clamps out-of-range gathers and drops out-of-range scatters; a
    compiled graph computes each index's range too and raises the CPU's
    exception where the host next waits, as strict eager does."""
    x = torch.arange(20.0).reshape(5, 4)
    fns = {
        "embedding": lambda x, i: torch.nn.functional.embedding(i, x),
        "index_select": lambda x, i: x.index_select(0, i),
        "gather": lambda x, i: x.gather(0, i.reshape(-1, 1).expand(-1, 4)),
        "index": lambda x, i: x[i] * 2,
        "nll_targets": lambda x, i: torch.nn.functional.cross_entropy(x[:2, :], i),
        "scatter_add": lambda x, i: x.scatter_add(0, i.reshape(-1, 1).expand(-1, 4),
                                                  torch.ones(2, 4, device=x.device)),
    }
    fn = fns[case]
    good, bad = torch.tensor([1, 3]), torch.tensor([1, 7 if case != "nll_targets" else 4])
    with pytest.raises((IndexError, RuntimeError)) as cpu:
        fn(x, bad)
    compiled = torch.compile(fn, backend="tpu")
    xt = x.to(tpu)
    torch.testing.assert_close(compiled(xt, good.to(tpu)).cpu(), fn(x, good))
    r = compiled(xt, bad.to(tpu))  # returns: the check waits for the host's next wait
    with pytest.raises(cpu.type, match="out of bounds"):
        r.cpu()
    # The device and the compiled graph stay usable.
    torch.testing.assert_close(compiled(xt, good.to(tpu)).cpu(), fn(x, good))


def test_compiled_graphs_loaded_from_the_cache_check_indices(tmp_path):
    code = textwrap.dedent("""
        import torch, torch_tpu
        emb = torch.nn.Embedding(10, 4).to("tpu")
        step = torch.compile(lambda i: emb(i).sum(), backend="tpu")
        step(torch.tensor([1, 2], device="tpu")).backward()
        try:
            step(torch.tensor([1, 12], device="tpu")).item()
            print("NOT RAISED")
        except IndexError as e:
            print("RAISED", "index 12 is out of bounds" in str(e))
        print("LOADS", torch.tpu._get_cache_stats()["compiled_cache_loads"])
    """)
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    for expect_loads in (False, True):
        r = run_python(code, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "RAISED True" in r.stdout, r.stdout
        assert (int(r.stdout.split("LOADS")[1].split()[0]) > 0) == expect_loads


def test_exit_while_the_backward_compiles_in_the_background(tmp_path):
    """A training graph's backward starts compiling in the background; a
    process that ends before any backward waits for that compile at exit
    instead of tearing XLA down under it."""
    code = textwrap.dedent("""
        import torch, torch_tpu
        m = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(6)]).to("tpu")
        y = torch.compile(m, backend="tpu")(torch.randn(8, 64, device="tpu"))
        print("FORWARD", tuple(y.shape), y.requires_grad)
    """)
    r = run_python(code, env={"TORCH_TPU_CACHE_DIR": str(tmp_path),
                              "TORCH_TPU_LOG_COMPILES": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "FORWARD (8, 64) True" in r.stdout
    assert "in the background" in r.stderr  # the forward and backward both were


def _dynamo_graphs(fn, *args, compile_graph=None):
    """The graphs Dynamo hands the backend for fn(*args), and fn's result;
    |compile_graph| (the tpu backend by default) compiles them."""
    from torch_tpu._compile import tpu_backend

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return (compile_graph or tpu_backend)(gm, example_inputs)

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend)(*args)
    return graphs, out


@pytest.mark.parametrize("weight", [0.1, 0.75])  # both of lerp's formulas
def test_foreach_lerp_traces_as_one_op_on_tpu(weight):
    """Adam's first-moment update, torch._foreach_lerp_ with a number for the
    weight, reaches the graph as the op itself on tpu tensors (Dynamo's
    polyfill makes a full tensor and an addcmul_ per tensor), rounds as
    eager mode does, and CPU tensors still take the polyfill."""
    torch.manual_seed(0)
    starts = [torch.randn(5, 7), torch.randn(3), torch.randn(2, 2, 2)]
    ends = [torch.randn_like(s) for s in starts]

    def update(xs, ys):
        torch._foreach_lerp_(xs, ys, weight)
        return xs

    eager = update([s.to("tpu") for s in starts], [e.to("tpu") for e in ends])
    graphs, compiled = _dynamo_graphs(update, [s.to("tpu") for s in starts],
                                      [e.to("tpu") for e in ends])
    targets = [n.target for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten._foreach_lerp_.Scalar in targets, targets
    assert torch.full_like not in targets, targets
    for got, want, s, e in zip(compiled, eager, starts, ends):
        assert torch.equal(got.cpu(), want.cpu())
        torch.testing.assert_close(got.cpu(), torch.lerp(s, e, weight))

    def on_cpu(xs, ys):
        torch._foreach_lerp_(xs, ys, weight)
        return [x + 0 for x in xs]

    cpu_graphs, out = _dynamo_graphs(on_cpu, [s.clone() for s in starts], ends,
                                     compile_graph=lambda gm, ex: gm)
    targets = [n.target for g in cpu_graphs for n in g.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten._foreach_lerp_.Scalar not in targets, targets
    for got, s, e in zip(out, starts, ends):
        torch.testing.assert_close(got, torch.lerp(s, e, weight))


def test_guard_latency_is_timed_without_evicting_the_caches():
    """Dynamo's guard-latency metric is timed by our probe (no cache
    eviction per compiled frame): it runs once per compiled frame, evaluates
    the frame's guards and gives a finite latency."""
    from torch._dynamo import guards

    probe = guards.profile_guard_manager
    assert getattr(probe, "_tpu_wrapped", False)
    seen = []

    def counting(root, f_locals, n_iters):
        seen.append((root.check(f_locals), probe(root, f_locals, n_iters)))
        return seen[-1][1]

    guards.profile_guard_manager = counting
    try:
        _, out = _dynamo_graphs(lambda x: x * 2 + 1, torch.ones(3, device="tpu"))
    finally:
        guards.profile_guard_manager = probe
    assert torch.equal(out.cpu(), torch.full((3,), 3.0))
    assert len(seen) == 1 and seen[0][0] is True, seen
    assert 0 <= seen[0][1] < 1e6, seen


def _step_variant(kind):
    def plain(model, x):
        loss = model(x).square().mean()
        loss.backward()
        return loss.detach()

    def keywords(model, x):
        loss = model(x).square().mean()
        loss.backward(retain_graph=True)
        return loss.detach() * 2

    def in_block(model, x):
        with torch.enable_grad():
            loss = model(x).square().mean()
            loss.backward()
        return loss.detach() + 1

    def in_loop(model, x):
        total = 0
        for _ in range(2):
            loss = model(x).square().mean()
            loss.backward()
            total = total + loss.detach()
        return total

    def fullgraph(model, x):
        return plain(model, x)

    return {"plain": plain, "keywords": keywords, "in_block": in_block, "in_loop": in_loop,
            "fullgraph": fullgraph}[kind]


def _compile_backward_step(kind, taken_in_first_pass):
    """Compiles and runs a step of variant |kind| on a fresh model, with
    Dynamo's CALL as we install it or as it comes; returns the graphs' code,
    the result, the gradients, the frames' restart reasons and the graph
    breaks Dynamo counted."""
    import dis

    from torch._dynamo import symbolic_convert, utils

    table, op = symbolic_convert.InstructionTranslator.dispatch_table, dis.opmap["CALL"]
    ours = table[op]
    assert getattr(ours, "_tpu_wrapped", False)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to("tpu")
    x = torch.randn(4, 6).to("tpu")
    step = _step_variant(kind)
    table[op] = ours if taken_in_first_pass else ours._tpu_original
    try:
        torch._dynamo.reset()
        utils.clear_compilation_metrics()
        utils.counters.clear()
        if kind == "fullgraph":
            with pytest.raises(torch._dynamo.exc.Unsupported, match="backward"):
                torch.compile(step, backend="tpu", fullgraph=True)(model, x)
            return None
        graphs, out = _dynamo_graphs(step, model, x)
        restarts = {m.co_name: sorted(m.restart_reasons or ())
                    for m in utils.get_compilation_metrics()}
        breaks = sum(utils.counters["graph_break"].values())
    finally:
        table[op] = ours
    return ([g.code for g in graphs], out.cpu(), grads(model), restarts, breaks)


@pytest.mark.parametrize("kind", ["plain", "keywords", "in_block", "in_loop", "fullgraph"])
def test_backward_breaks_the_graph_without_tracing_the_forward_twice(kind):
    """loss.backward() in the compiled frame breaks its graph at once,
    instead of Dynamo tracing the forward, failing at backward() and tracing
    it all again: the same graphs, results, gradients and graph-break count
    as Dynamo's own way, without its restart. Inside a loop (Dynamo runs the
    frame uncompiled) and with fullgraph=True (an error), Dynamo's own way
    decides."""
    ours = _compile_backward_step(kind, True)
    theirs = _compile_backward_step(kind, False)
    if kind == "fullgraph":
        return  # both raised
    assert ours[0] == theirs[0]
    assert torch.equal(ours[1], theirs[1])
    for a, b in zip(ours[2], theirs[2]):
        assert torch.equal(a, b)
    assert ours[4] == theirs[4]
    step_frame = _step_variant(kind).__name__
    if kind == "in_loop":
        assert ours[3] == theirs[3]
    else:
        assert ours[4] >= 1
        assert theirs[3][step_frame], theirs[3]  # Dynamo restarted at backward()
        assert ours[3][step_frame] == [], ours[3]
