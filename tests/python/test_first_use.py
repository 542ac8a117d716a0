"""The first call of the ops a model starts with: no import of Dynamo,
Inductor or sympy (PyTorch's Python meta kernels for the random ops, and
empty_like on meta tensors, import them: a second or more before the first
torch.randn), and the arguments PyTorch rejects still raise its errors."""
import json

import pytest
import torch

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
