"""The first call of the ops a model starts with: no import of Dynamo,
Inductor or sympy (PyTorch's Python meta kernels for the random ops, and
empty_like on meta tensors, import them: a second or more before the first
torch.randn), and the arguments PyTorch rejects still raise its errors."""
import json

import pytest
import torch

import torch_tpu
from conftest import run_python

FIRST_CALLS = [
    "torch.randn(3, device=d)",
    "torch.rand(3, device=d)",
    "torch.randint(0, 5, (3,), device=d)",
    "torch.empty(3, device=d).normal_()",
    "torch.empty(3, device=d).uniform_(-1, 1)",
    "torch.empty(3, device=d).exponential_()",
    "torch.empty(3, device=d).bernoulli_(0.5)",
    "torch.bernoulli(torch.full((3,), 0.5, device=d))",
    "torch.normal(torch.zeros(3, device=d), 1.0)",
    "torch.randperm(5, device=d)",
    "torch.multinomial(torch.ones(3, device=d), 2)",
    "torch.nn.functional.dropout(torch.ones(2, 3, device=d), 0.5)",
    "torch.nn.functional.dropout(torch.ones(3, 2, device=d).t(), 0.5)",
    "torch.nn.functional.layer_norm(torch.ones(2, 3, device=d), (3,))",
    "torch.nn.Linear(3, 4).to(d)(torch.ones(2, 3, device=d)).softmax(-1)",
    "torch.nn.functional.cross_entropy(torch.randn(4, 5, device=d), torch.tensor([0, 1, 2, 3], device=d))",
    # Ops whose PyTorch meta kernels are Python references.
    "torch.ones(2, 3, device=d) > 0",
    "torch.ones(2, 3, device=d) == torch.ones(3, device=d)",
    "torch.ones(2, 3, device=d).abs()",
    "torch.ones(2, 3, device=d).t().abs()",
    "torch.ones(2, 3, device=d).sqrt()",
    "torch.ones(2, 3, device=d).log()",
    "torch.ones(2, 3, device=d).sign()",
    "torch.ones(2, 3, device=d).round()",
    "torch.ones(2, 3, device=d).floor()",
    "torch.ones(2, 3, device=d).reciprocal()",
    "torch.relu(torch.ones(2, 3, device=d))",
    "torch.ones(2, 3, device=d).isnan()",
    "torch.maximum(torch.ones(2, 3, device=d), torch.zeros(3, device=d))",
    "torch.clamp(torch.ones(2, 3, device=d), 0, 1)",
    "torch.ones(2, 3, device=d).amax(1)",
    "torch.ones(2, 3, device=d).any()",
    "torch.ones(2, 3, device=d).all(1)",
    "torch.ones(2, 3, device=d).norm()",
    "torch.ones(2, 3, device=d).cumsum(1)",
    "torch.ones(2, 3, device=d).sort(1)",
    "torch.addcmul(torch.ones(3, device=d), torch.ones(3, device=d), torch.ones(3, device=d))",
    "torch.lerp(torch.ones(3, device=d), torch.zeros(3, device=d), 0.5)",
    "torch.where(torch.ones(2, 3, device=d) > 0, torch.ones(2, 3, device=d), 0.0)",
    "torch.ones(2, 3, device=d).var(1)",
]


def test_first_calls_import_no_compiler():
    code = f"""
import json, sys, torch
d = torch.device("tpu")
heavy = ("torch._dynamo", "torch._inductor", "sympy")
out = []
for stmt in {FIRST_CALLS!r}:
    r = eval(stmt)
    (r if isinstance(r, torch.Tensor) else r[0]).cpu()
    out.append((stmt, [m for m in heavy if m in sys.modules]))
print(json.dumps(out))
"""
    p = run_python(code, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    imported = {stmt: mods for stmt, mods in json.loads(p.stdout.strip().splitlines()[-1]) if mods}
    assert not imported, f"first calls that imported a compiler module: {imported}"


def _cpu_error(fn):
    with pytest.raises(Exception) as cpu:
        fn(torch.device("cpu"))
    return cpu


@pytest.mark.parametrize("fn", [
    lambda d: torch.empty(3, device=d).normal_(0, -1.0),
    lambda d: torch.empty(3, device=d).uniform_(2, 1),
    lambda d: torch.empty(3, device=d).exponential_(-1.0),
    lambda d: torch.empty(3, device=d).log_normal_(0, -1.0),
    lambda d: torch.empty(3, device=d).geometric_(1.5),
    lambda d: torch.empty(3, device=d).bernoulli_(1.5),
    lambda d: torch.normal(torch.zeros(3, device=d), -1.0),
    lambda d: torch.multinomial(torch.ones(3, device=d), 5),
    lambda d: torch.multinomial(torch.ones(3, device=d), 0),
    lambda d: torch.randperm(-1, device=d),
    lambda d: torch.nn.functional.dropout(torch.ones(3, device=d), 1.5),
], ids=["normal_std", "uniform_range", "exponential_lambda", "log_normal_std", "geometric_p",
        "bernoulli_p", "normal_tensor_std", "multinomial_too_many", "multinomial_zero",
        "randperm_negative", "dropout_p"])
def test_rejected_random_arguments_raise_as_on_cpu(fn):
    cpu = _cpu_error(fn)
    with pytest.raises(type(cpu.value)) as tpu:
        fn(torch.device("tpu"))
    # the same complaint: the message's first words agree
    assert str(tpu.value).split()[:3] == str(cpu.value).split()[:3], (tpu.value, cpu.value)


# The result metadata those ops get from C++ (csrc/aten/FastMeta.cpp) is the
# CPU's: shape, dtype and strides, in several layouts and dtypes.
_META_OPS = {
    "gt": lambda x, y: x > 0.25,
    "eq": lambda x, y: x == y,
    "ge_tensor": lambda x, y: x >= y,
    "abs": lambda x, y: x.abs(),
    "sqrt": lambda x, y: x.abs().sqrt(),
    "log": lambda x, y: (x.abs() + 1).log(),
    "sign": lambda x, y: x.sign(),
    "round": lambda x, y: x.round(),
    "floor": lambda x, y: x.floor(),
    "reciprocal": lambda x, y: (x.abs() + 1).reciprocal(),
    "relu": lambda x, y: torch.relu(x),
    "isnan": lambda x, y: x.isnan(),
    "maximum": lambda x, y: torch.maximum(x, y),
    "clamp": lambda x, y: torch.clamp(x, -1, 1),
    "amax": lambda x, y: x.amax(0),
    "any": lambda x, y: (x > 0).any(),
    "all_dim": lambda x, y: (x > 0).all(1),
    "norm": lambda x, y: x.float().norm(),
    "cumsum": lambda x, y: x.cumsum(1),
    "sort": lambda x, y: x.sort(1)[0],
    "addcmul": lambda x, y: torch.addcmul(x, x, y),
    "lerp": lambda x, y: torch.lerp(x.float(), y.float(), 0.5),
    "where": lambda x, y: torch.where(x > y, x, y),
    "where_scalar": lambda x, y: torch.where(y > 0, x, 0),
    "var": lambda x, y: x.float().var(1),
    "var_keepdim": lambda x, y: x.float().var(0, keepdim=True, correction=0),
    "var_all": lambda x, y: x.double().var(),
}


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast", "int64"])
@pytest.mark.parametrize("name", sorted(_META_OPS))
def test_result_metadata_as_on_cpu(name, layout):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g)
    y = torch.randn(4, 3, generator=g)
    if layout == "transposed":
        x, y = torch.randn(3, 4, generator=g).t(), torch.randn(3, 4, generator=g).t()
    elif layout == "broadcast":
        y = torch.randn(3, generator=g)
    elif layout == "int64":
        x, y = (x * 3).long(), (y * 3).long()
    fn = _META_OPS[name]
    want = fn(x, y)
    got = fn(x.to("tpu"), y.to("tpu"))
    assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
    torch.testing.assert_close(got.cpu(), want)


FILL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
               torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64]


@pytest.fixture
def strict():
    """Runs the test in strict eager (the suite may run under fused)."""
    with torch_tpu.execution_mode("strict"):
        yield


@pytest.mark.parametrize("dtype", FILL_DTYPES, ids=str)
def test_fills_of_whole_tensors_upload_without_a_compile(dtype, strict):
    """zeros(), full(), zero_() and fill_() of a whole tensor in strict eager
    are made on the host and uploaded: equal to the CPU's (its own fill
    converts the value), and no executable is compiled or loaded for them."""
    value = {torch.bool: True, torch.uint8: 200, torch.int8: -7,
             torch.complex64: 1.5 - 2j}.get(dtype, -3.25 if dtype.is_floating_point else 12345)
    torch.tpu.synchronize()
    before = torch.tpu._get_cache_stats()
    shape = (3, 5, 7)  # a shape no other test fills
    got = [torch.zeros(shape, dtype=dtype, device="tpu"),
           torch.full(shape, value, dtype=dtype, device="tpu"),
           torch.ones(4, 6, dtype=dtype, device="tpu").fill_(value),
           torch.ones(4, 6, dtype=dtype, device="tpu").zero_()]
    want = [torch.zeros(shape, dtype=dtype), torch.full(shape, value, dtype=dtype),
            torch.ones(4, 6, dtype=dtype).fill_(value), torch.ones(4, 6, dtype=dtype).zero_()]
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w), (g.cpu(), w)
    after = torch.tpu._get_cache_stats()
    # ones() is a fill too: six fills, and no executable was needed.
    assert after["host_fills"] - before["host_fills"] == 6
    assert after["cache_misses"] == before["cache_misses"]


def test_fills_keep_program_order_and_views(strict):
    """A host fill replaces the storage's buffer: work queued before it still
    reads the old value, work after it the new one; a fill of part of a
    storage (a view), a strided one and one in fused eager stay programs."""
    a = torch.arange(12.0, device="tpu")
    b = a * 2            # queued before the fill: reads the old a
    a.zero_()
    a.add_(1)
    c = a * 3            # after it
    assert torch.equal(b.cpu(), torch.arange(12.0) * 2)
    assert torch.equal(a.cpu(), torch.ones(12))
    assert torch.equal(c.cpu(), torch.full((12,), 3.0))
    x = torch.arange(12.0, device="tpu").reshape(3, 4)
    fills = torch.tpu._get_cache_stats()["host_fills"]
    x[1:].fill_(5)
    x.t()[0].zero_()
    want = torch.arange(12.0).reshape(3, 4)
    want[1:] = 5
    want[:, 0] = 0
    assert torch.equal(x.cpu(), want)
    assert torch.tpu._get_cache_stats()["host_fills"] == fills
    w = torch.ones(3, 4, device="tpu", requires_grad=True)
    with torch.no_grad():
        w.zero_()
    assert w._version == 1 and torch.equal(w.detach().cpu(), torch.zeros(3, 4))
    fills = torch.tpu._get_cache_stats()["host_fills"]
    with torch_tpu.execution_mode("fused"):
        f = torch.ones(2, 9, device="tpu")
        f.zero_()
        f.add_(2)
    assert torch.equal(f.cpu(), torch.full((2, 9), 2.0))
    assert torch.tpu._get_cache_stats()["host_fills"] == fills


def test_fill_values_the_cpu_rejects_still_raise():
    t = torch.zeros(4, dtype=torch.int8, device="tpu")
    with pytest.raises(RuntimeError) as tpu_err:
        t.fill_(1000)
    with pytest.raises(RuntimeError) as cpu_err:
        torch.zeros(4, dtype=torch.int8).fill_(1000)
    assert type(tpu_err.value) is type(cpu_err.value)
    assert torch.equal(t.cpu(), torch.zeros(4, dtype=torch.int8))
