"""Ops that Hugging Face models reach on accelerators, against the CPU."""
import copy

import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("lo,hi", [(0, 7), (2, 5), (0, 0)])
def test_histc_integer_input(dtype, lo, hi):
    # MoE routers count expert ids with histc on an int tensor (CUDA accepts
    # it; the CPU does not): the reference is the CPU on the same values as
    # float, counted in the input's type. Counts are exact.
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 8, (3, 37), generator=g).to(dtype)
    got = torch.histc(x.to("tpu"), bins=8, min=lo, max=hi)
    want = torch.histc(x.float(), bins=8, min=lo, max=hi).to(dtype)
    assert got.dtype == dtype
    assert torch.equal(got.cpu(), want)


def test_histc_bool_is_rejected_with_the_op_name():
    with pytest.raises((ValueError, RuntimeError), match="histc"):
        torch.histc(torch.ones(4, dtype=torch.bool, device="tpu"), bins=2).cpu()


@pytest.mark.parametrize("scale", [1e-24, 1.0, 1e20])
@pytest.mark.parametrize("ord", [2, 3, -2, 1, float("inf"), 0])
def test_vector_norm_of_tiny_and_huge_values(scale, ord):
    # Squares of 1e-24 or 1e20 leave float32's range. The CPU's long-row
    # kernel still gets the norm (vision towers of random models pool to
    # ~1e-24, and ALIGN normalises by that norm), its short-row loop returns
    # 0 or inf; tpu scales by the largest |x| and gets it for every shape.
    # Reference: the same float32 values reduced in float64, rounded to
    # float32. Tolerance 1e-5 relative: the scaling adds an ulp or two.
    g = torch.Generator().manual_seed(0)
    for cols in (5, 640):
        x = torch.randn(3, cols, generator=g) * scale
        x[1, :3] = 0.0
        want = torch.linalg.vector_norm(x.double(), ord, dim=-1).float()
        got = torch.linalg.vector_norm(x.to("tpu"), ord, dim=-1).cpu()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
        got = x.to("tpu").norm(p=ord, dim=1, keepdim=True).cpu()
        torch.testing.assert_close(got, want[:, None], rtol=1e-5, atol=0)


def test_vector_norm_keeps_nan_inf_and_zero_rows():
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, float("nan"), 2.0], [float("inf"), 1.0, 0.0]])
    want = torch.linalg.vector_norm(x, 2, dim=-1)
    got = torch.linalg.vector_norm(x.to("tpu"), 2, dim=-1).cpu()
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("dim", [0, 2, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weight_norm_interface_forward_and_backward(dim, dtype):
    # wav2vec2-style position embeddings use weight_norm; tpu lowers the fused
    # op and its backward (no CPU fallback). Tolerance: float32 1e-5 (a
    # reduction and a sqrt), bfloat16 2 ulp (1.6e-2).
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
    g = torch.Generator().manual_seed(0)
    v = torch.randn(6, 4, 5, generator=g).to(dtype)
    d = dim % v.dim()
    gshape = [v.shape[i] if i == d else 1 for i in range(v.dim())]
    gg = torch.rand(gshape, generator=g).to(dtype) + 0.5
    grad = torch.randn(6, 4, 5, generator=g).to(dtype)

    def run(device):
        vv = v.to(device).requires_grad_()
        ga = gg.to(device).requires_grad_()
        w, norms = torch._weight_norm_interface(vv, ga, d)
        (w * grad.to(device)).sum().backward()
        return [t.detach().cpu() for t in (w, norms, vv.grad, ga.grad)]

    ops = ("aten::_weight_norm_interface", "aten::_weight_norm_interface_backward")
    before = [torch.tpu.fallback_counts().get(op, 0) for op in ops]
    got = run("tpu")
    assert [torch.tpu.fallback_counts().get(op, 0) for op in ops] == before
    for a, b in zip(got, run("cpu")):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, **tol)


def test_masked_fill_with_a_cpu_scalar_tensor_value():
    # DeBERTa-style attention (SEW-D) fills with torch.tensor(finfo.min), a CPU
    # 0-dim tensor beside tpu tensors, which PyTorch allows for accelerators.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=g)
    m = torch.rand(3, 4, generator=g) > 0.5
    for value in (torch.tensor(-5.0), torch.tensor(torch.finfo(torch.float32).min),
                  torch.tensor(2, dtype=torch.int64)):
        got = x.to("tpu").masked_fill(m.to("tpu"), value)
        assert got.device.type == "tpu"
        assert torch.equal(got.cpu(), x.masked_fill(m, value))
    # type promotion with CPU scalars is unchanged (0-dim tensors and Python numbers)
    i = torch.arange(3, dtype=torch.int32)
    for other in (2.5, torch.tensor(2.5, dtype=torch.float64)):
        assert (i.to("tpu") * other).dtype == (i * other).dtype
    h = torch.ones(3, dtype=torch.float16)
    assert (h.to("tpu") + torch.tensor(3.0)).dtype == (h + torch.tensor(3.0)).dtype


@pytest.mark.parametrize("bias", [True, False])
def test_lstm_runs_the_fused_cell_on_tpu(bias):
    # nn.LSTM on an accelerator calls _thnn_fused_lstm_cell, which has no CPU
    # kernel to fall back to (EnCodec's LSTM crashed): tpu lowers it. Also
    # checks the gradient through it against the CPU. Tolerance 1e-5: a few
    # sigmoid/tanh per step over 5 steps.
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(6, 5, num_layers=2, bias=bias, batch_first=True)
    x = torch.randn(3, 5, 6)

    def run(device):
        m = copy.deepcopy(lstm).to(device)
        xi = x.to(device).requires_grad_()
        out, (h, c) = m(xi)
        (out.sum() + h.sum() + c.sum()).backward()
        return [t.detach().cpu() for t in (out, h, c, xi.grad, m.weight_hh_l0.grad)]

    before = torch.tpu.fallback_counts().get("aten::_thnn_fused_lstm_cell", 0)
    got = run("tpu")
    assert torch.tpu.fallback_counts().get("aten::_thnn_fused_lstm_cell", 0) == before
    for a, b in zip(got, run("cpu")):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_fused_lstm_cell_outputs_and_workspace():
    # The workspace holds the activated gates [i, f, g, o], as on CUDA, for
    # _thnn_fused_lstm_cell_backward_impl.
    g = torch.Generator().manual_seed(1)
    b, h = 3, 4
    ig, hg = torch.randn(b, 4 * h, generator=g), torch.randn(b, 4 * h, generator=g)
    cx, ib, hb = torch.randn(b, h, generator=g), torch.randn(4 * h, generator=g), \
        torch.randn(4 * h, generator=g)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(
        *(t.to("tpu") for t in (ig, hg, cx, ib, hb)))
    i, f, c, o = (ig + hg + ib + hb).chunk(4, 1)
    i, f, c, o = i.sigmoid(), f.sigmoid(), c.tanh(), o.sigmoid()
    want_c = f * cx + i * c
    torch.testing.assert_close(cy.cpu(), want_c, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(hy.cpu(), o * want_c.tanh(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ws.cpu(), torch.cat([i, f, c, o], 1), rtol=1e-5, atol=1e-6)


def _gru_cell_reference(ig, hg, hx, ib, hb):
    """The GRU cell's formula in plain ops (CPU): gates [r, z, n], biases on
    their own side, so the reset gate scales the hidden side's n block."""
    if ib is not None:
        ig, hg = ig + ib, hg + hb
    ir, iz, in_ = ig.chunk(3, 1)
    hr, hz, hn = hg.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hx, hn], 1)


def _gru_cell_operands(bias, requires_grad=False):
    g = torch.Generator().manual_seed(2)
    b, h = 3, 4
    ts = [torch.randn(b, 3 * h, generator=g), torch.randn(b, 3 * h, generator=g),
          torch.randn(b, h, generator=g)]
    ts += [torch.randn(3 * h, generator=g), torch.randn(3 * h, generator=g)] if bias else [None, None]
    return [t.requires_grad_(requires_grad) if t is not None else None for t in ts]


@pytest.mark.parametrize("bias", [True, False])
def test_fused_gru_cell_outputs_and_workspace(bias, monkeypatch):
    # nn.GRU/GRUCell on an accelerator call _thnn_fused_gru_cell (no CPU
    # kernel to fall back to). The workspace is [r, z, n, hx, h_n], the CUDA
    # layout _thnn_fused_gru_cell_backward reads. Tolerance: one sigmoid or
    # tanh each, a few ulp.
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    ops = _gru_cell_operands(bias)
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(
        *(t.to("tpu") if t is not None else None for t in ops))
    want_hy, want_ws = _gru_cell_reference(*ops)
    torch.testing.assert_close(hy.cpu(), want_hy, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ws.cpu(), want_ws, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_gru_cell_backward(bias, monkeypatch):
    # Gradients through the fused cell (its backward op) against autograd
    # of the plain formula on the CPU, for every operand, biases included.
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    ops = _gru_cell_operands(bias, requires_grad=True)
    dev = [t.detach().to("tpu").requires_grad_() if t is not None else None for t in ops]
    go = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    hy, _ = torch.ops.aten._thnn_fused_gru_cell(*dev)
    want_hy, _ = _gru_cell_reference(*ops)
    live = [i for i, t in enumerate(ops) if t is not None]
    got = torch.autograd.grad(hy, [dev[i] for i in live], go.to("tpu"))
    want = torch.autograd.grad(want_hy, [ops[i] for i in live], go)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-6)
    # The backward op itself: bias gradients only when asked for.
    _, ws = torch.ops.aten._thnn_fused_gru_cell(*(t.detach() if t is not None else None for t in dev))
    outs = torch.ops.aten._thnn_fused_gru_cell_backward(go.to("tpu"), ws, bias)
    assert [o is not None for o in outs[3:]] == [bias, bias]
    torch.testing.assert_close(outs[2].cpu(), want[2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, False), (2, True)])
def test_gru_matches_cpu(layers, bidirectional, bias, monkeypatch):
    # nn.GRU end to end through the fused cell, forward and gradients of the
    # input, the initial state and every parameter. Tolerance 1e-5: a few
    # sigmoid/tanh per step over 5 steps, as for the LSTM above.
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    torch.manual_seed(0)
    gru = torch.nn.GRU(6, 5, num_layers=layers, bias=bias, batch_first=True,
                       bidirectional=bidirectional)
    x = torch.randn(3, 5, 6)
    h0 = torch.randn(layers * (2 if bidirectional else 1), 3, 5)

    def run(device):
        m = copy.deepcopy(gru).to(device)
        xi, hi = x.to(device).requires_grad_(), h0.to(device).requires_grad_()
        out, h = m(xi, hi)
        w = torch.arange(out.numel(), device=device).reshape(out.shape).sin()
        ((out * w).sum() + h.sum()).backward()
        return [t.detach().cpu() for t in (out, h, xi.grad, hi.grad)] + \
            [p.grad.cpu() for p in m.parameters()]

    for a, b in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell_module_matches_cpu(bias, monkeypatch):
    # nn.GRUCell, batched and unbatched, with and without an initial state.
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(4, 6, bias=bias)
    for x, h in ((torch.randn(3, 4), torch.randn(3, 6)), (torch.randn(4), None)):
        def run(device):
            m = copy.deepcopy(cell).to(device)
            xi = x.to(device).requires_grad_()
            args = [xi] + ([h.to(device).requires_grad_()] if h is not None else [])
            out = m(*args)
            out.sum().backward()
            return [out.detach().cpu()] + [a.grad.cpu() for a in args] + \
                [p.grad.cpu() for p in m.parameters()]

        for a, b in zip(run("tpu"), run("cpu")):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
