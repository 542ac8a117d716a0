"""Graphs without autograd lowered without AOTAutograd (_compile_direct;
training graphs: test_compile_joint.py):
results and in-place updates equal eager's on tpu (views of mutated tensors
through PyTorch's functionalization), and every graph the path cannot take
exactly (mutated inputs aliasing each other, outputs sharing memory they do
not return, random draws) still compiles correctly through AOTAutograd, counted."""
import copy

import pytest
import torch

import torch_tpu._compile_direct as D

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

F32 = dict(rtol=1e-5, atol=1e-6)


def both(fn, make_args):
    """|fn| eagerly and compiled on fresh arguments; returns (eager
    result, eager args, compiled result, compiled args), on the CPU."""
    ref_args, args = make_args(), make_args()
    with torch.no_grad():
        ref = fn(*ref_args)
        out = torch.compile(fn, backend="tpu")(*args)
    cpu = lambda v: torch.utils._pytree.tree_map(  # noqa: E731
        lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, v)
    return cpu(ref), cpu(ref_args), cpu(out), cpu(args)


def inputs(*shapes, seed=0):
    def make():
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(s, generator=g).to("tpu") for s in shapes]
    return make


def test_in_place_updates_become_values(paths):
    def f(x, buf, a, b):
        buf.add_(x.sum())  # an input, updated in place
        y = x * 2
        y.mul_(3)  # a value of the graph's own
        torch._foreach_mul_([a, b], 0.5)  # a list of inputs at once
        a.add_(b)  # read after the foreach update
        return y + buf.mean(), a * 1

    ref, ref_args, out, args = both(f, inputs([4, 8], [8], [8], [8]))
    torch.testing.assert_close(out, ref, **F32)
    torch.testing.assert_close(args, ref_args, **F32)
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 0, "fallbacks": 0}


def test_copy_into_an_input_converts_and_broadcasts(paths):
    def f(buf, src, idx):
        buf.copy_(src.double()[0])  # float64 [6] into float32 [3, 6]
        idx.copy_(src[1] * 10)  # float into int64, truncating as copy_ does
        return buf.sum()

    def make():
        g = torch.Generator().manual_seed(1)
        return [torch.zeros(3, 6).to("tpu"), torch.randn(2, 6, generator=g).to("tpu"),
                torch.zeros(6, dtype=torch.int64).to("tpu")]

    ref, ref_args, out, args = both(f, make)
    torch.testing.assert_close(out, ref, **F32)
    torch.testing.assert_close(args, ref_args, **F32)
    assert args[2].dtype == torch.int64
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 0, "fallbacks": 0}


def test_updated_inputs_bump_their_version_as_in_place_ops_do(paths):
    """A value saved for backward and then updated by a compiled graph makes
    the backward fail, as after eager's in-place op."""
    def update(b):
        b.mul_(2)

    for compiled in (False, True):
        x = torch.randn(3).to("tpu").requires_grad_()
        buf = torch.ones(3).to("tpu")
        loss = (x * buf).sum()  # saves buf
        v = buf._version
        with torch.no_grad():
            (torch.compile(update, backend="tpu") if compiled else update)(buf)
        assert buf._version > v
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 0, "fallbacks": 0}


def test_in_place_results_keep_the_written_dtype(paths):
    def f(h, x, hs):
        h.add_(x)  # float16 += float32 stays float16
        torch._foreach_add_(hs, [x, x])
        return h.float().sum()

    def make():
        g = torch.Generator().manual_seed(2)
        x = torch.randn(7, generator=g)
        return [torch.randn(7, generator=g).half().to("tpu"), x.to("tpu"),
                [torch.ones(7).half().to("tpu"), torch.ones(7, dtype=torch.bfloat16).to("tpu")]]

    ref, ref_args, out, args = both(f, make)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(args, ref_args)  # dtypes included
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 0, "fallbacks": 0}


@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.AdamW(ps, lr=1e-2, capturable=True),
    lambda ps: torch.optim.Adam(ps, lr=1e-2, capturable=True, amsgrad=True),
    lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True),
    lambda ps: torch.optim.NAdam(ps, lr=1e-2, capturable=True, decoupled_weight_decay=True,
                                 weight_decay=0.1),
    lambda ps: torch.optim.RAdam(ps, lr=1e-2, capturable=True),
    lambda ps: torch.optim.Adagrad(ps, lr=1e-2),
    lambda ps: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.5, centered=True, capturable=True),
    lambda ps: torch.optim.Rprop(ps, lr=1e-2, capturable=True),
], ids=["adamw", "adam-amsgrad", "sgd-nesterov", "nadam", "radam", "adagrad", "rmsprop",
        "rprop"])
def test_optimizer_step_matches_eager(paths, make_opt):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8).to("tpu")

    def train(compiled):
        m = copy.deepcopy(cpu).to("tpu")
        opt = make_opt(m.parameters())
        step = torch.compile(opt.step, backend="tpu") if compiled else opt.step
        for _ in range(3):
            opt.zero_grad()
            m(x).square().mean().backward()
            step()
        return [p.detach().cpu() for p in m.parameters()]

    ref, got = train(False), train(True)
    torch.testing.assert_close(got, ref, **F32)
    taken = paths()
    assert taken["graphs"] >= 1 and taken["aot"] == 0 and taken["fallbacks"] == 0, taken


def test_views_of_mutated_tensors_are_functionalized(paths):
    """Writes through views (of an input, of the graph's own values) and
    reads of views taken before or after a write: traced again under
    PyTorch's functionalization, which scatters each write into its base."""
    def f(x, c):
        y = x * 1.5
        head = y[:, :2]          # a view read after the writes below
        y[:, 0] = 1.0            # index_put through a select
        y[1:].mul_(2)            # in place on a slice
        c[:, 1].add_(x[:, 0])    # an input written through a view
        x[0].sub_(0.5)           # the input read above, written after
        return y + 1, head * 3, c.sum()

    ref, ref_args, out, args = both(f, inputs([4, 3], [4, 3]))
    torch.testing.assert_close(out, ref, **F32)
    torch.testing.assert_close(args, ref_args, **F32)
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 0, "fallbacks": 0}


def test_training_graph_with_views_of_mutated_values(paths):
    """A forward writing into views of its own values: the joint trace runs
    under functionalization too, and the gradients equal eager's."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 6)

    def f(lin, x):
        h = lin(x).clone()
        h[:, :3] = h[:, :3].sigmoid()
        h[0].mul_(2.0)
        return h.tanh().sum()

    x = torch.randn(4, 6)
    ref = f(lin, x)
    ref.backward()
    mine = copy.deepcopy(lin).to("tpu")
    mine.zero_grad()
    out = torch.compile(f, backend="tpu")(mine, x.to("tpu"))
    out.backward()
    torch.testing.assert_close(out.cpu(), ref.detach(), **F32)
    for a, b in zip(mine.parameters(), lin.parameters()):
        torch.testing.assert_close(a.grad.cpu(), b.grad, **F32)
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 1, "fallbacks": 0}


@pytest.mark.parametrize("case", ["intermediate-views", "random", "aliased-inputs",
                                  "aliased-whole-inputs", "metadata-mutated"])
def test_graphs_the_path_cannot_take_fall_back(paths, case):
    if case == "intermediate-views":
        def f(x):
            y = x * 2  # not an output: eager's two outputs share its memory
            return y[0], y[1]
        make, why = inputs([3, 4]), "view of an input or another output"
    elif case == "metadata-mutated":
        def f(x):
            y = x * 2
            y.t_()  # sizes and strides change in place
            return y + 1
        make, why = inputs([3, 4]), "changes a tensor's sizes"
    elif case == "random":
        def f(x):
            return x + torch.rand_like(x) * 0
        make, why = inputs([3, 4]), "random"
    else:
        def f(a, b):
            a.add_(1)
            return b * 2

        def make():
            a = torch.arange(6.0).to("tpu")
            return [a, a.view(2, 3) if case == "aliased-inputs" else a[:]]
        why = "views a mutated" if case == "aliased-inputs" else "aliases another input"
    ref, ref_args, out, args = both(f, make)
    torch.testing.assert_close(out, ref, **F32)
    torch.testing.assert_close(args, ref_args, **F32)
    assert paths() == {"aot": 1, "graphs": 0, "training_graphs": 0, "fallbacks": 1}
    assert why in D.last_fallback


def test_outputs_aliasing_inputs_or_outputs_are_views_as_in_eager(paths):
    """Outputs that alias an input or another output come back as views of
    it (as eager's do), made at run time: an input's view sees the input's
    later in-place changes, and an output returned twice is one tensor."""
    def f(x, w):
        y = x @ w
        return y, y, y.t(), y[1:, 2:], x.view(-1), w[0], y.sum()

    ref, _, out, _ = both(f, inputs([4, 6], [6, 5]))
    torch.testing.assert_close(out, ref, **F32)
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 0, "fallbacks": 0}

    x, w = inputs([4, 6], [6, 5])()
    with torch.no_grad():
        y, y2, yt, corner, flat, w0, _ = torch.compile(f, backend="tpu")(x, w)
    assert y2 is y
    for v, base in ((yt, y), (corner, y), (flat, x), (w0, w)):
        assert v._is_view() and v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert not flat.requires_grad
    x.mul_(0)
    y.add_(1)
    torch.testing.assert_close(flat.cpu(), torch.zeros(24))
    torch.testing.assert_close(yt.cpu(), y.cpu().t())
    torch.testing.assert_close(corner.cpu(), y.cpu()[1:, 2:])


def test_views_returned_before_what_they_view(paths):
    """An output that views one returned after it (CLIP's logits_per_image
    is logits_per_text.t(), returned first) comes back as a view of it:
    the program returns the whole value once, wherever it stands."""
    def f(a, b):
        per_text = a @ b.t() * 2
        return per_text.t(), per_text[1:], per_text, per_text.t()[0]

    ref, _, out, _ = both(f, inputs([3, 4], [5, 4]))
    torch.testing.assert_close(out, ref, **F32)
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 0, "fallbacks": 0}
    a, b = inputs([3, 4], [5, 4])()
    with torch.no_grad():
        per_image, rest, per_text, first = torch.compile(f, backend="tpu")(a, b)
    assert per_text.is_contiguous() and not per_text._is_view()
    for v in (per_image, rest, first):
        assert v._is_view()
        assert v.untyped_storage().data_ptr() == per_text.untyped_storage().data_ptr()
    per_text.add_(1)
    torch.testing.assert_close(per_image.cpu(), per_text.cpu().t())


def test_input_views_follow_the_input_offset(paths):
    """Dynamo runs one graph on inputs of the same sizes and strides at any
    storage offset (rows of a batch): the views come from each call's own."""
    def f(x):
        return x[1], x.t(), x.sum()

    batch = torch.arange(24.0).reshape(4, 2, 3).to("tpu")
    g = torch.compile(f, backend="tpu")
    with torch.no_grad():
        for i in range(4):
            row, t, _ = g(batch[i])
            torch.testing.assert_close(row.cpu(), batch[i, 1].cpu())
            torch.testing.assert_close(t.cpu(), batch[i].t().cpu())
            assert t.storage_offset() == batch[i].storage_offset()
    assert paths()["graphs"] == 1 and paths()["aot"] == 0


def test_output_aliases_survive_the_disk_cache(tmp_path):
    """A warm process rebuilds the same views from the cached entry."""
    from conftest import run_python

    code = """if True:
        import torch, torch_tpu
        def f(x):
            y = x + 1
            return y, y[1], x.t()
        x = torch.arange(6.0).reshape(2, 3).to("tpu")
        y, row, xt = torch.compile(f, backend="tpu")(x)
        y.mul_(10)
        s = torch.tpu._get_cache_stats()
        print(row.tolist(), xt._base is x or xt._is_view(), s["compiled_direct_graphs"],
              s["compiled_direct_fallbacks"], s["compiled_cache_loads"])
    """
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    cold, warm = run_python(code, env), run_python(code, env)
    assert cold.returncode == 0 and warm.returncode == 0, cold.stderr + warm.stderr
    assert cold.stdout.split()[:6] == warm.stdout.split()[:6] == \
        ["[40.0,", "50.0,", "60.0]", "True", "1", "0"], (cold.stdout, warm.stdout)
    assert int(warm.stdout.split()[6]) >= 1, warm.stdout


def test_a_failure_inside_the_path_falls_back(paths, monkeypatch):
    def broken(*args):
        raise RuntimeError("trace failed")

    monkeypatch.setattr(D, "_trace", broken)
    ref, _, out, _ = both(lambda x: x.exp() * 2, inputs([5]))
    torch.testing.assert_close(out, ref, **F32)
    assert paths() == {"aot": 1, "graphs": 0, "training_graphs": 0, "fallbacks": 1}
    assert D.last_fallback == "RuntimeError: trace failed"


def test_sparse_inputs_stay_with_aot_autograd(paths):
    def make():
        i = torch.tensor([[0, 1], [1, 0]])
        return [torch.sparse_coo_tensor(i, torch.tensor([1.0, 2.0]), (2, 2)).to("tpu"),
                torch.ones(2, 2).to("tpu")]

    ref, _, out, _ = both(lambda s, d: (s.to_dense() * d).sum(), make)
    torch.testing.assert_close(out, ref)
    assert paths()["graphs"] == 0


def test_switched_off(paths, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COMPILE_DIRECT", "0")
    ref, _, out, _ = both(lambda x: x.relu() + 1, inputs([5]))
    torch.testing.assert_close(out, ref)
    assert paths() == {"aot": 1, "graphs": 0, "training_graphs": 0, "fallbacks": 0}


def test_cache_key_tells_layouts_and_aliasing_apart():
    gm = torch.fx.symbolic_trace(lambda a, b: a * 2 + b)
    a, b = torch.randn(4, 4).to("tpu"), torch.randn(4, 4).to("tpu")
    base = D._cache_key(gm, [a, b], [])
    assert base == D._cache_key(gm, [a.clone(), b.clone()], [])
    assert base != D._cache_key(gm, [a.t(), b], [])  # strides
    assert base != D._cache_key(gm, [a, a], [])  # one storage twice
    assert base != D._cache_key(gm, [a.double(), b], [])
    with torch.no_grad():
        assert base != D._cache_key(gm, [a, b], [])  # grad mode
    # A tensor attribute that is neither parameter nor buffer is a constant
    # the code does not show: no entry.
    gm.const = torch.ones(2)
    gm.graph.get_attr("const")
    assert D._cache_key(gm, [a, b], []) is None


def test_compiled_graph_sizes_are_their_own_programs(paths):
    def f(x, buf):
        buf.mul_(2)
        return x.sum(0) + buf

    for n in (3, 5):
        ref, ref_args, out, args = both(f, inputs([n, 4], [4], seed=n))
        torch.testing.assert_close(out, ref, **F32)
        torch.testing.assert_close(args, ref_args, **F32)
