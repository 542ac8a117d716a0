"""Custom kernels as PyTorch ops: JAX functions, Pallas kernels (interpret
mode on XLA:CPU) and hand-written StableHLO, in strict eager, fused eager
and torch.compile, checked against PyTorch's CPU results and against the
same op run through JAX on CPU tensors."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import custom_ops

# setup.sh installs JAX; the ImportError without it is tested in a subprocess below.
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pallas_kernels import flash_attention, tiled_matmul  # noqa: E402

# f32 kernels: XLA and PyTorch order sums differently; a few ulps at these sizes.
F32 = dict(rtol=1e-5, atol=1e-5)
MODES = ["strict", "fused"]


def rms_norm(x, w, eps: float = 1e-6):
    x32 = x.astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (x32 * r).astype(x.dtype) * w


def torch_rms_norm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


_ops = {}


def op(name, fn, **kw):
    """One registration per test session (torch.library names are global)."""
    if name not in _ops:
        _ops[name] = torch_tpu.jax_op(name, fn, **kw)
    return _ops[name]


@pytest.mark.parametrize("mode", MODES)
def test_jax_op_matches_pytorch_and_jax_on_cpu(mode):
    rms = op("tpu_test::rms_norm", rms_norm, static_argnames="eps")
    x, w = torch.randn(6, 32), torch.randn(32)
    xt, wt = x.to("tpu"), w.to("tpu")
    torch.tpu.synchronize()
    with torch_tpu.execution_mode(mode):
        before = torch.tpu._get_cache_stats()
        got = rms(xt, wt)
        # Neighbours fuse with it in fused mode: one graph up to the read.
        got2 = torch.relu(rms(xt * 2, wt, eps=1e-3)) + 1
        got2.cpu()
        after = torch.tpu._get_cache_stats()
    if mode == "fused":
        assert after["fused_graphs"] - before["fused_graphs"] == 1
    torch.testing.assert_close(got.cpu(), torch_rms_norm(x, w), **F32)
    torch.testing.assert_close(got.cpu(), rms(x, w), **F32)  # the CPU path runs JAX
    torch.testing.assert_close(got2.cpu(), torch.relu(torch_rms_norm(x * 2, w, 1e-3)) + 1, **F32)


def test_trace_cache_keys_shapes_dtypes_and_static_args():
    rms = op("tpu_test::rms_norm", rms_norm, static_argnames="eps")
    k = rms._kernel_op
    x, w = torch.randn(3, 16, device="tpu"), torch.randn(16, device="tpu")
    rms(x, w)
    before = dict(k.stats)
    rms(x, w)
    rms(x + 1, w)
    assert k.stats["traces"] == before["traces"] and k.stats["hits"] == before["hits"] + 2
    rms(x, w, eps=0.5)
    rms(x[:2], w)
    rms(x.double(), w.double())
    assert k.stats["traces"] == before["traces"] + 3
    assert rms(x.double(), w.double()).dtype == torch.float64


def test_non_contiguous_inputs_are_read_through_their_views():
    rms = op("tpu_test::rms_norm", rms_norm, static_argnames="eps")
    base = torch.randn(16, 12)
    x = base.t()[:, 2:10]  # a strided window
    w = torch.randn(8)
    got = rms(base.to("tpu").t()[:, 2:10], w.to("tpu"))
    torch.testing.assert_close(got.cpu(), torch_rms_norm(x, w), **F32)


def swiglu(x, w1, w3, w2):
    h = jax.nn.silu(x @ w1) * (x @ w3)
    return h @ w2


def test_multiple_outputs_and_register_autograd_with_a_jax_backward():
    def fwd(x, y):
        return x * y, jnp.sin(x)

    def bwd(x, y, g0, g1):
        return g0 * y + g1 * jnp.cos(x), g0 * x

    f = op("tpu_test::mul_sin", fwd, num_outputs=2)
    b = op("tpu_test::mul_sin_bwd", bwd, num_outputs=2)

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g0, g1):
        return b(*ctx.saved_tensors, g0, g1)

    f.register_autograd(backward, setup_context=setup)
    x, y = torch.randn(5), torch.randn(5)
    xt = x.to("tpu").requires_grad_()
    yt = y.to("tpu").requires_grad_()
    p, s = f(xt, yt)
    (p.sum() + (s * 3).sum()).backward()
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    ((xr * yr).sum() + (torch.sin(xr) * 3).sum()).backward()
    torch.testing.assert_close(xt.grad.cpu(), xr.grad, **F32)
    torch.testing.assert_close(yt.grad.cpu(), yr.grad, **F32)


def test_vjp_backward_and_compiled_training_through_the_op():
    sw = op("tpu_test::swiglu", swiglu)
    if not hasattr(sw, "_vjp"):
        sw._vjp = custom_ops.vjp_backward(sw)
    torch.manual_seed(0)
    d, h = 16, 32
    params = [torch.randn(d, h) * 0.2, torch.randn(d, h) * 0.2, torch.randn(h, d) * 0.2]
    x = torch.randn(8, d)

    def torch_swiglu(x, w1, w3, w2):
        return (F.silu(x @ w1) * (x @ w3)) @ w2

    def grads(fn, device, compiled):
        ps = [p.detach().to(device).requires_grad_() for p in params]
        step = (lambda a, *w: fn(a, *w).pow(2).mean())
        if compiled:
            step = torch.compile(step, backend="tpu")
        loss = step(x.to(device), *ps)
        loss.backward()
        return loss.detach().cpu(), [p.grad.cpu() for p in ps]

    ref_loss, ref_grads = grads(torch_swiglu, "cpu", False)
    for compiled in (False, True):
        loss, gs = grads(sw, "tpu", compiled)
        torch.testing.assert_close(loss, ref_loss, **F32)
        for g, r in zip(gs, ref_grads):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)


def test_compiled_graph_holds_the_kernel_and_reuses_its_trace():
    rms = op("tpu_test::rms_norm", rms_norm, static_argnames="eps")
    x, w = torch.randn(4, 24), torch.randn(24)
    f = torch.compile(lambda a, b: torch.tanh(rms(a * 2, b, eps=1e-5)) - a, backend="tpu",
                      fullgraph=True)
    got = f(x.to("tpu"), w.to("tpu"))
    torch.testing.assert_close(got.cpu(), torch.tanh(torch_rms_norm(x * 2, w, 1e-5)) - x, **F32)
    torch.testing.assert_close(f(x.to("tpu"), w.to("tpu")).cpu(), got.cpu())


@pytest.mark.parametrize("mode", MODES)
def test_input_output_aliases_update_the_input_in_place(mode):
    def scaled_add(acc, x, alpha: float = 1.0):
        return acc + alpha * x

    upd = op("tpu_test::axpy_", scaled_add, static_argnames="alpha",
             input_output_aliases={0: 0})
    acc, x = torch.randn(7), torch.randn(7)
    acc_t = acc.to("tpu")
    view = acc_t[2:]  # an alias of the same storage sees the update
    with torch_tpu.execution_mode(mode):
        assert upd(acc_t, x.to("tpu"), alpha=0.5) is None
        acc_t.mul_(2)  # a later in-place op sees the kernel's write
    acc_t.div_(2)
    torch.testing.assert_close(acc_t.cpu(), acc + 0.5 * x)
    torch.testing.assert_close(view.cpu(), (acc + 0.5 * x)[2:])
    acc_c = acc.clone()
    upd(acc_c, x, alpha=0.5)
    torch.testing.assert_close(acc_c, acc + 0.5 * x)


def test_in_place_kernel_that_also_returns_a_result():
    """Output 1 is input 0's new value, output 0 is returned."""
    def accumulate(acc, x):
        return (x * x).sum(), acc + x

    acc_op = op("tpu_test::accumulate_", accumulate, num_outputs=2,
                input_output_aliases={1: 0})
    acc, x = torch.randn(5), torch.randn(5)
    acc_t = acc.to("tpu")
    got = acc_op(acc_t, x.to("tpu"))
    torch.testing.assert_close(got.cpu(), (x * x).sum(), **F32)
    torch.testing.assert_close(acc_t.cpu(), acc + x)


def test_in_place_kernel_under_torch_compile():
    def scaled_add(acc, x, alpha: float = 1.0):
        return acc + alpha * x

    upd = op("tpu_test::axpy_", scaled_add, static_argnames="alpha",
             input_output_aliases={0: 0})

    def step(acc, x):
        upd(acc, x, alpha=0.5)
        return acc * 2

    acc, x = torch.randn(6), torch.randn(6)
    acc_t = acc.to("tpu")
    got = torch.compile(step, backend="tpu", fullgraph=True)(acc_t, x.to("tpu"))
    torch.testing.assert_close(acc_t.cpu(), acc + 0.5 * x)
    torch.testing.assert_close(got.cpu(), (acc + 0.5 * x) * 2)
    # A view of a graph input as the in-place argument is refused by name.
    view_step = torch.compile(lambda a, b: upd(a[1:], b[1:], alpha=1.0), backend="tpu")
    with pytest.raises(Exception, match="tpu_test::axpy_.*view of a graph input"):
        view_step(acc_t, x.to("tpu"))


@pytest.mark.parametrize("mode", MODES)
def test_pallas_tiled_matmul(mode):
    mm = op("tpu_test::tiled_matmul", tiled_matmul, static_argnames=("bm", "bn", "bk"))
    a, b = torch.randn(64, 96), torch.randn(96, 128)
    with torch_tpu.execution_mode(mode):
        got = mm(a.to("tpu"), b.to("tpu"), bm=32, bn=64, bk=32)
    torch.testing.assert_close(got.cpu(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_pallas_flash_attention_forward(causal):
    fa = op("tpu_test::flash_attention", flash_attention,
            static_argnames=("causal", "block_q", "block_k"))
    q, k, v = (torch.randn(2, 3, 64, 16) for _ in range(3))
    got = fa(q.to("tpu"), k.to("tpu"), v.to("tpu"), causal=causal, block_q=16, block_k=32)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
    compiled = torch.compile(lambda a, b, c: fa(a, b, c, causal=causal, block_q=16, block_k=32),
                             backend="tpu")
    torch.testing.assert_close(compiled(q.to("tpu"), k.to("tpu"), v.to("tpu")).cpu(), want,
                               rtol=1e-4, atol=1e-5)


HAND_WRITTEN = """
module @user {
  func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>) {
    %b = stablehlo.broadcast_in_dim %y, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %p = func.call @scale(%x, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%p init: %z) applies stablehlo.add across dimensions = [1]
        : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    return %p, %s : tensor<2x3xf32>, tensor<2xf32>
  }
  func.func private @scale(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.multiply %a, %b : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
"""


@pytest.mark.parametrize("mode", MODES + ["compiled"])
def test_stablehlo_op_runs_hand_written_mlir(mode):
    if "tpu_test::scale_rows" not in _ops:
        _ops["tpu_test::scale_rows"] = torch_tpu.stablehlo_op("tpu_test::scale_rows",
                                                              HAND_WRITTEN)
    f = _ops["tpu_test::scale_rows"]
    x, y = torch.randn(2, 3), torch.randn(3)
    run = (lambda a, b: f(a, b)) if mode != "compiled" else torch.compile(
        lambda a, b: f(a, b), backend="tpu")
    with torch_tpu.execution_mode("strict" if mode == "compiled" else mode):
        p, s = run(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(p.cpu(), x * y, **F32)
    torch.testing.assert_close(s.cpu(), (x * y).sum(1), **F32)
    with pytest.raises(ValueError, match=r"tpu_test::scale_rows: input 0 is float32\[3, 2\]"):
        f(x.t().contiguous().to("tpu"), y.to("tpu"))
    with pytest.raises(NotImplementedError, match="tpu tensors only"):
        f(x, y)


# -- bad input: a Python error naming the op, never an abort ---------------------------

def test_output_disagreeing_with_the_declared_fake_is_an_error():
    def fake(x):
        return torch.empty(x.shape[0] + 1, dtype=x.dtype)

    bad = op("tpu_test::bad_fake", lambda x: x * 2, fake=fake)
    with pytest.raises(custom_ops.KernelError, match=r"tpu_test::bad_fake: the JAX function "
                       r"returns float32\[4\], but the op's fake kernel declares float32\[5\]"):
        bad(torch.ones(4, device="tpu"))


def test_unsupported_dtype_names_the_op():
    bad = op("tpu_test::to_int4", lambda x: x.astype(jnp.int4))
    with pytest.raises(custom_ops.KernelError, match="tpu_test::to_int4: dtype Int4 is not supported on tpu"):
        bad(torch.ones(4, device="tpu"))


def test_too_new_stablehlo_is_refused(monkeypatch):
    monkeypatch.setattr(custom_ops, "_plugin_stablehlo_version", lambda: "0.1.0")
    bad = op("tpu_test::versioned", lambda x: x + 1)
    with pytest.raises(custom_ops.KernelError, match="tpu_test::versioned: its StableHLO "
                       "needs features newer than the plugin reads"):
        bad(torch.ones(3, device="tpu"))


def test_mosaic_kernel_on_a_cpu_plugin_is_refused():
    def doubled(x):
        return pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    bad = op("tpu_test::mosaic", doubled)
    with pytest.raises(custom_ops.KernelError, match="tpu_test::mosaic: a Mosaic TPU kernel"):
        bad(torch.ones(8, 128, device="tpu"))


def test_host_callback_is_refused():
    def cb(x):
        return jax.pure_callback(lambda v: v * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    bad = op("tpu_test::callback", cb)
    with pytest.raises(custom_ops.KernelError, match="tpu_test::callback: a host callback"):
        bad(torch.ones(4, device="tpu"))


def test_jaxlib_solver_calls_are_refused():
    inv = op("tpu_test::inv", lambda a: jnp.linalg.inv(a))
    with pytest.raises(custom_ops.KernelError, match="tpu_test::inv: custom call lapack_"):
        inv(torch.eye(3, device="tpu"))


def test_malformed_stablehlo_names_the_op():
    with pytest.raises(ValueError, match="tpu_test::malformed: no func.func @main"):
        torch_tpu.stablehlo_op("tpu_test::malformed", "func.func @f() -> tensor<f32>")
    broken = ("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
              "  %0 = stablehlo.not_an_op %x : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}")
    f = torch_tpu.stablehlo_op("tpu_test::broken", broken)
    with pytest.raises(ValueError, match="tpu_test::broken.*not_an_op"):
        f(torch.ones(4, device="tpu")).cpu()


def test_jax_op_without_jax_asks_for_the_extra():
    code = textwrap.dedent("""
        import sys
        sys.modules["jax"] = None
        import torch, torch_tpu
        try:
            torch_tpu.jax_op("x::y", lambda a: a)
        except ImportError as e:
            print("ERR", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert "ERR jax_op needs JAX: install it with `pip install torch-tpu-open[jax]`" in out.stdout, \
        out.stdout + out.stderr


def test_jax_traces_without_starting_its_own_runtime():
    code = textwrap.dedent("""
        import torch, torch_tpu, jax.numpy as jnp
        from jax._src import xla_bridge
        f = torch_tpu.jax_op("x::double", lambda a: a * 2)
        y = f(torch.ones(4, device="tpu"))
        print("OK", y.cpu().tolist(), sorted(xla_bridge._backends))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert "OK [2.0, 2.0, 2.0, 2.0] []" in out.stdout, out.stdout + out.stderr


def test_compile_cache_never_serves_a_changed_kernel(tmp_path):
    """Two processes share a compile cache and compile the same graph around
    an op of the same name whose JAX function differs: the second must run
    its own function (the cached entry is refused), and a third with the
    first's function loads the entry without tracing for the program."""
    code = textwrap.dedent("""
        import sys, torch, torch_tpu, jax.numpy as jnp
        scale = float(sys.argv[1])
        op = torch_tpu.jax_op("cache_test::scaled", lambda x: x * scale + 1)
        f = torch.compile(lambda a: op(a) - 1, backend="tpu")
        y = f(torch.ones(3, device="tpu"))
        s = torch.tpu._get_cache_stats()
        print("OUT", y.cpu().tolist(), s["compiled_cache_loads"], s["compiled_cache_stores"])
    """)
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"))

    def run(scale):
        r = subprocess.run([sys.executable, "-c", code, str(scale)], capture_output=True,
                           text=True, timeout=300, env=env)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("OUT")]
        assert line, r.stdout + r.stderr
        return line[0]

    assert run(2.0) == "OUT [2.0, 2.0, 2.0] 0 1"
    assert run(3.0).startswith("OUT [3.0, 3.0, 3.0] 0")  # refused, compiled afresh
    assert run(2.0).startswith("OUT [2.0, 2.0, 2.0] 1")  # the first entry loads
