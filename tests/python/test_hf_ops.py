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
