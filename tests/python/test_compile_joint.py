"""Training graphs lowered without AOTAutograd (_compile_joint): one joint
trace, PyTorch's default partition, our autograd.Function. Losses and
gradients equal eager's on tpu, outputs that alias an input or another
output included; graphs the path cannot take (input mutation, random
draws) go to AOTAutograd, counted, with their results still right."""
import pytest
import torch

import torch_tpu._compile as C
import torch_tpu._compile_direct as D

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

F32 = dict(rtol=1e-5, atol=1e-6)


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4)).to("tpu")


def grads(model):
    return [p.grad.cpu() for p in model.parameters()]


def test_training_matches_eager(paths):
    ref, model = mlp(), mlp()
    x = torch.randn(5, 8).to("tpu")
    y = torch.randint(0, 4, (5,)).to("tpu")

    def step(m, opt):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model, backend="tpu")
    for _ in range(3):
        want = step(ref, opt_ref)
        got = step(compiled, opt)
        torch.testing.assert_close(got.cpu(), want.cpu(), **F32)
        torch.testing.assert_close(grads(model), grads(ref), **F32)
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 1, "fallbacks": 0}


def test_outputs_without_gradient_and_unused_outputs(paths):
    def f(x, w):
        h = x @ w
        return h.tanh(), h.argmax(-1), h.detach() * 2, (h * h).sum()

    def run(fn):
        torch.manual_seed(1)
        x = torch.randn(3, 4).to("tpu").requires_grad_()
        w = torch.randn(4, 5).to("tpu").requires_grad_()
        a, idx, d, s = fn(x, w)
        assert not idx.requires_grad and not d.requires_grad and a.requires_grad
        # Only the first output's gradient flows; the last one's is zeros.
        (a * torch.arange(5.0).to("tpu")).sum().backward()
        return [v.detach().cpu() for v in (a, idx, d, s, x.grad, w.grad)]

    torch.testing.assert_close(run(torch.compile(f, backend="tpu")), run(f), **F32)
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 1, "fallbacks": 0}


def test_non_leaf_inputs_and_transposed_output_gradients(paths):
    """The input comes out of an eager op (its gradient flows on to a leaf);
    the output's gradient arrives transposed (a non-contiguous tangent)."""
    def f(h, w):
        return torch.nn.functional.silu(h @ w)

    def run(fn):
        torch.manual_seed(2)
        x = torch.randn(6, 3).to("tpu").requires_grad_()
        w = torch.randn(3, 7).to("tpu").requires_grad_()
        c = torch.randn(7, 6).to("tpu")
        out = fn(x * 3, w)
        (out.t() * c).sum().backward()
        return [out.detach().cpu(), x.grad.cpu(), w.grad.cpu()]

    torch.testing.assert_close(run(torch.compile(f, backend="tpu")), run(f), **F32)
    assert paths()["training_graphs"] == 1


def test_parameters_the_loss_does_not_reach_get_no_gradient(paths):
    """As in eager: .grad stays None (not zeros) for a parameter the graph
    reads only for an output without gradient."""
    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(4, 2)
            self.unused = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.used(x), self.unused(x).argmax(-1)

    model = Head().to("tpu")
    out, idx = torch.compile(model, backend="tpu")(torch.randn(3, 4).to("tpu"))
    out.sum().backward()
    assert model.used.weight.grad is not None and model.unused.weight.grad is None
    assert paths()["training_graphs"] == 1


def test_a_saved_input_changed_before_backward_is_refused(paths):
    w = torch.randn(4, 4).to("tpu").requires_grad_()
    x = torch.randn(2, 4).to("tpu")
    out = torch.compile(lambda x, w: (x @ w).sin(), backend="tpu")(x, w)
    assert paths()["training_graphs"] == 1
    x.mul_(2)  # the backward reads x (the gradient of w): eager refuses this too
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_double_backward_is_refused_clearly(paths):
    w = torch.randn(3).to("tpu").requires_grad_()
    out = torch.compile(lambda w: (w * w).sum(), backend="tpu")(w)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out, w, create_graph=True)
    (g,) = torch.autograd.grad(out, w)  # a first-order gradient still works
    torch.testing.assert_close(g.cpu(), 2 * w.detach().cpu())
    assert paths()["training_graphs"] == 1


@pytest.mark.parametrize("case", ["batch-norm", "buffer-update", "random"])
def test_graphs_the_path_cannot_take_go_to_aot_autograd(paths, case):
    torch.manual_seed(3)
    if case == "batch-norm":  # updates its running statistics: input mutation
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).to("tpu")
        why = "writes arguments"
    elif case == "buffer-update":
        class Counting(torch.nn.Linear):
            def __init__(self):
                super().__init__(4, 4)
                self.register_buffer("calls", torch.zeros(()))

            def forward(self, x):
                self.calls.add_(1)
                return super().forward(x)

        model = Counting().to("tpu")
        why = "updates an input"
    elif case == "random":
        class Noisy(torch.nn.Linear):
            def forward(self, x):
                y = super().forward(x)
                return y + torch.rand_like(y) * 0

        model = Noisy(4, 4).to("tpu")
        why = "random"
    import copy

    ref = copy.deepcopy(model)
    x = torch.randn(6, 4).to("tpu")

    def loss(m):
        return m(x).square().mean()

    loss(ref).backward()
    loss(torch.compile(model, backend="tpu")).backward()
    torch.testing.assert_close(grads(model), grads(ref), **F32)
    torch.testing.assert_close([b.cpu() for b in model.buffers()],
                               [b.cpu() for b in ref.buffers()])
    taken = paths()
    assert taken["aot"] == 1 and taken["training_graphs"] == 0 and taken["fallbacks"] == 1
    assert why in D.last_fallback


def test_training_entries_come_back_from_the_cache(paths, tmp_path, monkeypatch):
    import torch_tpu._compile_cache as CC

    monkeypatch.setattr(CC, "cache_root", lambda: str(tmp_path))
    x = torch.randn(5, 8).to("tpu")

    def run():
        torch._dynamo.reset()
        model = mlp()
        out = torch.compile(model, backend="tpu")(x).square().mean()
        out.backward()
        return [out.detach().cpu(), *grads(model)]

    before = C.stats()
    cold = run()
    mid = C.stats()
    warm = run()
    after = C.stats()
    torch.testing.assert_close(warm, cold, rtol=0, atol=0)
    assert mid["compiled_programs"] - before["compiled_programs"] == 2
    # The second compile neither traces nor lowers: both programs replayed.
    assert after["compiled_programs"] == mid["compiled_programs"]
    assert after["compiled_cache_loads"] - mid["compiled_cache_loads"] == 2
    assert after["compiled_direct_trace_seconds"] == mid["compiled_direct_trace_seconds"]
    assert paths()["training_graphs"] == 2


class Aliasing(torch.nn.Module):
    """Returns one value twice, views of it and a view of a parameter, as
    Hugging Face outputs do (last_hidden_state is hidden_states[-1])."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 6)

    def forward(self, x):
        h = self.lin(x).relu()
        return h, h, h.t(), h[1:, 2:], self.lin.weight[0], self.lin.weight.view(-1)


def _weighted_loss(outs):
    return sum(o.sum() * (i + 1) for i, o in enumerate(outs))


def test_outputs_aliasing_inputs_or_outputs_keep_their_gradients(paths):
    """Aliasing outputs come back as views of what they alias (one tensor for
    a value returned twice), their gradients flowing into it, as in eager."""
    import copy

    torch.manual_seed(0)
    ref = Aliasing().to("tpu")
    model = copy.deepcopy(ref)
    x = torch.randn(4, 5).to("tpu")
    want = ref(x)
    _weighted_loss(want).backward()
    got = torch.compile(model, backend="tpu")(x)
    _weighted_loss(got).backward()
    torch.testing.assert_close([o.detach().cpu() for o in got],
                               [o.detach().cpu() for o in want], **F32)
    torch.testing.assert_close(grads(model), grads(ref), **F32)
    h, h2, ht, corner, w0, wflat = got
    assert h2 is h
    for v, base in ((ht, h), (corner, h), (w0, model.lin.weight), (wflat, model.lin.weight)):
        assert v._is_view() and v.requires_grad
        assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 1, "fallbacks": 0}


def test_views_returned_before_what_they_view_keep_their_gradients(paths):
    """A training graph returning a view before the value it views (CLIP's
    logits_per_image, logits_per_text): the gradients of both flow into the
    parameters as in eager."""
    import copy

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.text, self.image = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)

        def forward(self, t, i):
            per_text = self.text(t) @ self.image(i).t()
            return per_text.t(), per_text

    torch.manual_seed(0)
    ref = Logits().to("tpu")
    model = copy.deepcopy(ref)
    t, i = torch.randn(2, 4).to("tpu"), torch.randn(5, 4).to("tpu")
    want = ref(t, i)
    _weighted_loss(want).backward()
    got = torch.compile(model, backend="tpu")(t, i)
    _weighted_loss(got).backward()
    torch.testing.assert_close([o.detach().cpu() for o in got],
                               [o.detach().cpu() for o in want], **F32)
    torch.testing.assert_close(grads(model), grads(ref), **F32)
    assert got[0]._is_view() and got[0].requires_grad
    assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
    assert paths() == {"aot": 0, "graphs": 1, "training_graphs": 1, "fallbacks": 0}


def test_aliasing_outputs_come_back_from_the_cache(paths, tmp_path, monkeypatch):
    import torch_tpu._compile_cache as CC

    monkeypatch.setattr(CC, "cache_root", lambda: str(tmp_path))
    x = torch.randn(4, 5).to("tpu")

    def run():
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = Aliasing().to("tpu")
        out = torch.compile(model, backend="tpu")(x)
        assert out[1] is out[0] and out[2]._is_view()
        _weighted_loss(out).backward()
        return [o.detach().cpu() for o in out] + grads(model)

    cold = run()
    mid = C.stats()
    warm = run()
    assert C.stats()["compiled_cache_loads"] - mid["compiled_cache_loads"] == 2
    torch.testing.assert_close(warm, cold, rtol=0, atol=0)
    assert paths()["training_graphs"] == 2
