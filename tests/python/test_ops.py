"""Every natively lowered op of the first set, compared with PyTorch's CPU
results, with broadcasting and type promotion, the CPU fallback off.

Tolerances: float32 results may differ from CPU by reassociation in XLA's
fused kernels (reductions, matmul blocking): rtol 1.3e-6/atol 1e-5, the
defaults of torch.testing; bf16/f16 keep one rounding of their 8/11-bit
mantissas (rtol 1.6e-2 / 1e-3), as torch.testing does."""
import os

import pytest
import torch

TOL = {torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.float64: dict(rtol=1e-7, atol=1e-7),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5), torch.float16: dict(rtol=1e-3, atol=1e-5)}
# Transcendentals: XLA's CPU kernels use polynomial approximations, a few ulp.
TRANSCENDENTAL_TOL = {torch.float32: dict(rtol=2e-6, atol=2e-6)}


pytestmark = pytest.mark.usefixtures("no_fallback")


def rand(*shape, dtype=torch.float32, low=-3.0, high=3.0, seed=0):
    g = torch.Generator().manual_seed(seed + len(shape) * 7 + sum(shape))
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g) * (high - low) + low).to(dtype)
    lo = 0 if dtype == torch.uint8 else -20
    return torch.randint(lo, 20, shape, generator=g).to(dtype)


def compare(fn, *args, tol=None, **kwargs):
    want = fn(*args, **kwargs)
    dev = [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]
    got = fn(*dev, **kwargs)
    wants = want if isinstance(want, (tuple, list)) else (want,)
    gots = got if isinstance(got, (tuple, list)) else (got,)
    for w, g in zip(wants, gots):
        assert g.device.type == "tpu"
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape
        t = tol or TOL.get(w.dtype, dict(rtol=0, atol=0))
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, **t)


FLOATS = [torch.float32, torch.bfloat16]
BINARY = [torch.add, torch.sub, torch.mul, torch.maximum, torch.minimum]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_binary_broadcasting(op, dtype):
    compare(op, rand(4, 1, 5, dtype=dtype), rand(3, 1, dtype=dtype, seed=1))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=str)
def test_div_and_modes(dtype):
    a, b = rand(6, 5, dtype=dtype), rand(5, dtype=dtype, seed=2, low=0.5, high=4)
    compare(torch.div, a, b)
    compare(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b)
    compare(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)


def test_integer_floor_division_and_remainder():
    a = torch.tensor([-7, -6, -1, 0, 1, 6, 7], dtype=torch.int64)
    b = torch.tensor([2, -4, 3, 5, -2, 4, -3], dtype=torch.int64)
    compare(lambda x, y: torch.div(x, y, rounding_mode="floor"), a, b)
    compare(lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b)
    compare(torch.remainder, a, b)
    compare(torch.fmod, a, b)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32,
                                   torch.int64])
def test_bitwise_shifts_past_the_width(dtype):
    # shifts by negative amounts and by the width or more: 0, or the sign
    # for a signed right shift, as PyTorch's CPU kernels give
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(3)
    a = torch.randint(info.min, info.max, (1031,), generator=g, dtype=torch.int64).to(dtype)
    b = torch.randint(0 if dtype == torch.uint8 else -3, 2 * info.bits + 3, (1031,),
                      generator=g, dtype=torch.int64).to(dtype)
    at, bt = a.to("tpu"), b.to("tpu")
    for f in (torch.bitwise_left_shift, torch.bitwise_right_shift):
        assert torch.equal(f(at, bt).cpu(), f(a, b)), f
    for k in (0, 3, info.bits - 1, info.bits, 100):
        assert torch.equal((at << k).cpu(), a << k) and torch.equal((at >> k).cpu(), a >> k), k
    x = at.clone()
    x >>= bt
    assert torch.equal(x.cpu(), a >> b)


def test_type_promotion():
    compare(torch.add, rand(3, 4, dtype=torch.int32), rand(3, 4))  # -> float32
    compare(torch.mul, rand(3, 4, dtype=torch.bfloat16), rand(3, 4))  # -> float32
    compare(torch.add, rand(3, 4, dtype=torch.int64), rand(3, 4, dtype=torch.bool))
    compare(lambda x: x + 2.5, rand(3, dtype=torch.int64))  # int tensor + float scalar
    compare(lambda x: x * 3, rand(3, dtype=torch.bfloat16))  # weak scalar keeps bf16
    compare(lambda x: x / 2, rand(3, dtype=torch.int32))  # true division -> float
    compare(lambda x, y: x + y, rand(3, dtype=torch.float16), torch.tensor(2.0, dtype=torch.float64))


def test_scalar_args_do_not_recompile():
    x = torch.ones(8, device="tpu")
    x.add_(torch.ones(8, device="tpu"), alpha=0.5)
    before = torch.tpu._get_cache_stats()["cache_misses"]
    for lr in (0.1, 0.2, 0.3, 0.4):
        x.add_(torch.ones(8, device="tpu"), alpha=-lr)
    assert torch.tpu._get_cache_stats()["cache_misses"] == before
    torch.testing.assert_close(x.cpu(), torch.full((8,), 1.5 - 1.0))


UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
         "relu", "floor", "ceil", "round", "sign", "reciprocal", "erf", "log1p", "expm1"]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    low = 0.1 if name in ("log", "sqrt", "rsqrt", "log1p") else -3.0
    tol = TRANSCENDENTAL_TOL.get(dtype)
    compare(getattr(torch, name), rand(5, 7, dtype=dtype, low=low), tol=tol)


@pytest.mark.parametrize("name", ["gelu", "silu", "elu", "softplus", "leaky_relu", "hardtanh",
                                  "relu6", "mish", "hardsigmoid", "hardswish", "logsigmoid"])
def test_activations(name):
    fn = getattr(torch.nn.functional, name)
    compare(fn, rand(4, 9), tol=TRANSCENDENTAL_TOL[torch.float32])
    if name == "gelu":
        compare(lambda x: fn(x, approximate="tanh"), rand(4, 9), tol=TRANSCENDENTAL_TOL[torch.float32])


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    a, b = rand(4, 5, dtype=torch.int32), rand(5, dtype=torch.int32, seed=3)
    compare(getattr(torch, op), a, b)
    compare(getattr(torch, op), rand(4, 5), rand(4, 5, seed=4))
    compare(lambda x: getattr(torch, op)(x, 0.5), rand(4, 5))


def test_nan_propagation():
    x = torch.tensor([1.0, float("nan"), -2.0, float("inf"), -float("inf")])
    y = torch.tensor([float("nan"), 2.0, -3.0, 1.0, float("nan")])
    for op in (torch.maximum, torch.minimum, torch.add, torch.mul, torch.eq, torch.lt):
        compare(op, x, y)
    compare(torch.relu, x)
    compare(lambda t: t.amax(), x)
    compare(lambda t: t.sum(), x)
    # The softmax family leaves NaN to its row sum rather than to its max.
    rows = torch.stack([x, y, x.flip(0), x.nan_to_num(0.0)])
    wide = rand(64, 512)
    wide[3, 100] = wide[40, 0] = wide[63, 511] = float("nan")
    for t in (rows, wide):
        compare(lambda a: a.softmax(-1), t)
        compare(lambda a: a.log_softmax(-1), t)
        compare(lambda a: a.logsumexp(-1), t)


def test_where_and_masked_fill():
    c = rand(4, 5, dtype=torch.bool)
    compare(torch.where, c, rand(4, 5), rand(5, seed=5))
    compare(lambda x, m: x.masked_fill(m, -1.5), rand(4, 5), c)


def test_clamp_pow_lerp_addcmul():
    x = rand(4, 6)
    compare(lambda t: t.clamp(-1, 1), x)
    compare(lambda t: t.clamp(min=0.5), x)
    compare(lambda t: torch.pow(t.abs() + 0.1, 2.5), x, tol=TRANSCENDENTAL_TOL[torch.float32])
    compare(lambda t: t.pow(2), x)
    compare(lambda a, b: torch.lerp(a, b, 0.3), x, rand(4, 6, seed=9))
    compare(lambda a, b, c: torch.addcmul(a, b, c, value=0.5), x, rand(6), rand(4, 1))
    compare(lambda a, b, c: torch.addcdiv(a, b, c, value=-2), x, rand(6), rand(4, 1, low=1, high=2))


def test_factories_and_fills():
    for fn in (lambda d: torch.zeros(3, 4, device=d), lambda d: torch.ones(2, 5, device=d, dtype=torch.int64),
               lambda d: torch.full((3,), 2.5, device=d), lambda d: torch.arange(10, device=d),
               lambda d: torch.arange(1.0, 3.0, 0.25, device=d), lambda d: torch.arange(-5, 20, 3, device=d),
               lambda d: torch.zeros_like(torch.empty(2, 2, device=d)),
               lambda d: torch.full((2, 2), True, device=d)):
        want = fn("cpu")
        got = fn("tpu")
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_matmul_family(dtype):
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else TOL[dtype]
    compare(torch.mm, rand(8, 16, dtype=dtype), rand(16, 4, dtype=dtype), tol=tol)
    compare(torch.bmm, rand(3, 8, 16, dtype=dtype), rand(3, 16, 4, dtype=dtype), tol=tol)
    compare(lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0),
            rand(4, dtype=dtype), rand(8, 16, dtype=dtype), rand(16, 4, dtype=dtype), tol=tol)
    compare(torch.nn.functional.linear, rand(5, 16, dtype=dtype), rand(7, 16, dtype=dtype),
            rand(7, dtype=dtype), tol=tol)
    compare(torch.matmul, rand(2, 3, 8, 16, dtype=dtype), rand(16, 4, dtype=dtype), tol=tol)
    compare(lambda a, b: a @ b.t(), rand(8, 16, dtype=dtype), rand(4, 16, dtype=dtype), tol=tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_reductions(dtype):
    x = rand(4, 5, 6, dtype=dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else TOL[dtype]
    compare(torch.sum, x, tol=tol)
    compare(lambda t: t.sum(dim=(0, 2), keepdim=True), x, tol=tol)
    compare(lambda t: t.mean(dim=1), x, tol=tol)
    compare(torch.mean, x, tol=tol)
    compare(lambda t: t.amax(dim=-1), x)
    compare(lambda t: t.amin(dim=(0, 1)), x)
    compare(lambda t: t.argmax(dim=1), x)
    compare(lambda t: t.argmax(), x)
    compare(lambda t: t.max(dim=2), x)
    compare(lambda t: t.max(), x)


def test_integer_and_bool_reductions():
    compare(torch.sum, rand(4, 5, dtype=torch.int32))  # -> int64
    compare(lambda t: t.sum(dim=0), rand(4, 5, dtype=torch.bool))
    compare(lambda t: t.argmax(dim=0), rand(4, 5, dtype=torch.int64))


def test_bf16_sum_accumulates_in_f32():
    x = torch.full((4096,), 1.0, dtype=torch.bfloat16)
    got = x.to("tpu").sum().cpu()
    assert got.item() == x.sum().item() == 4096.0


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_softmax_family(dtype):
    x = rand(3, 10, dtype=dtype)
    compare(lambda t: torch.softmax(t, dim=-1), x)
    compare(lambda t: torch.log_softmax(t, dim=1), x)
    compare(lambda t: torch.softmax(t, dim=0), x)


def test_cat():
    compare(lambda a, b: torch.cat([a, b], dim=0), rand(2, 3), rand(4, 3))
    compare(lambda a, b: torch.cat([a, b], dim=1), rand(2, 3), rand(2, 1))
    compare(lambda a, b: torch.cat([a, b]), rand(2, 3, dtype=torch.int64), rand(1, 3, dtype=torch.int64))
    compare(lambda a, b: torch.stack([a, b]), rand(2, 3), rand(2, 3))


def test_losses():
    logits, target = rand(8, 5), torch.randint(0, 5, (8,))
    compare(torch.nn.functional.cross_entropy, logits, target, tol=dict(rtol=1e-5, atol=1e-6))
    compare(lambda a, b: torch.nn.functional.cross_entropy(a, b, reduction="none"), logits, target)
    compare(torch.nn.functional.mse_loss, rand(4, 3), rand(4, 3))


def _grads(fn, *args):
    args = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
    out = fn(*args)
    out.backward(torch.ones_like(out))
    return [a.grad for a in args if a.requires_grad]


@pytest.mark.parametrize("fn", [
    lambda x: torch.relu(x), lambda x: torch.nn.functional.gelu(x), lambda x: torch.sigmoid(x),
    lambda x: torch.tanh(x), lambda x: torch.nn.functional.silu(x),
    lambda x: torch.softmax(x, -1), lambda x: torch.log_softmax(x, -1),
    lambda x: (x * x).sum(1), lambda x: x.mean(0), lambda x: x.amax(1),
    lambda x: torch.nn.functional.leaky_relu(x, 0.1),
], ids=["relu", "gelu", "sigmoid", "tanh", "silu", "softmax", "log_softmax", "sq_sum", "mean",
        "amax", "leaky_relu"])
def test_backward_unary(fn):
    x = rand(4, 6)
    want = _grads(fn, x)
    got = _grads(fn, x.to("tpu"))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


def test_backward_linear_cross_entropy():
    x, w, b, t = rand(6, 4), rand(3, 4), rand(3), torch.randint(0, 3, (6,))
    f = lambda x, w, b: torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w, b), t_dev[0])
    t_dev = [t]
    want = _grads(f, x, w, b)
    t_dev[0] = t.to("tpu")
    got = _grads(f, x.to("tpu"), w.to("tpu"), b.to("tpu"))
    for g, w_ in zip(got, want):
        torch.testing.assert_close(g.cpu(), w_, rtol=1e-5, atol=1e-6)


def test_random_ops_statistics():
    torch.manual_seed(0)
    n = torch.randn(200_000, device="tpu").cpu().double()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    u = torch.rand(200_000, device="tpu").cpu().double()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert abs(u.var() - 1 / 12) < 0.002
    b = torch.rand(100, 100, device="tpu", dtype=torch.bfloat16)
    assert b.dtype == torch.bfloat16 and 0 <= b.min().item() and b.max().item() <= 1
    # two draws differ
    assert not torch.equal(torch.randn(10, device="tpu").cpu(), torch.randn(10, device="tpu").cpu())


def test_dropout_train_and_eval():
    torch.manual_seed(0)
    x = torch.ones(100_000, device="tpu")
    y = torch.nn.functional.dropout(x, p=0.25, training=True).cpu()
    kept = (y != 0).double().mean().item()
    assert abs(kept - 0.75) < 0.01
    assert torch.allclose(y[y != 0], torch.tensor(1 / 0.75))
    assert torch.equal(torch.nn.functional.dropout(x, p=0.25, training=False).cpu(), x.cpu())
