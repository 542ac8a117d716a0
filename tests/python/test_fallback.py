"""Ops without a tpu lowering run on the CPU, counted and warned once;
TORCH_TPU_FALLBACK=0 turns that into an error; view ops never fall back."""
import pytest
import torch

from conftest import run_python

# An op that can never have a tpu lowering: a custom op with only a CPU kernel.
CODE = """
import torch, warnings
torch.library.define("tputest::twice", "(Tensor x) -> Tensor")
torch.library.impl("tputest::twice", "CPU")(lambda x: x * 2)
x = torch.rand(8, device='tpu') + 0.5
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter('always')
    y = torch.ops.tputest.twice(x)
    y2 = torch.ops.tputest.twice(x)
print('WARN', sum('running it on the CPU' in str(m.message) for m in w))
print('MATCH', torch.allclose(y.cpu(), x.cpu() * 2))
print('DEVICE', y.device.type)
print('COUNT', torch.tpu.fallback_counts().get('tputest::twice', 0))
"""


def test_fallback_counted_and_warned_once():
    r = run_python(CODE)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # torch.ops calls do not turn C++ warnings into Python ones: count both.
    python_warnings = int(out.split("WARN ")[1].split()[0])
    assert python_warnings + r.stderr.count("running it on the CPU") == 1
    assert "MATCH True" in out and "DEVICE tpu" in out
    assert "COUNT 2" in out


def test_fallback_disabled_is_an_error():
    r = run_python(CODE, env={"TORCH_TPU_FALLBACK": "0"})
    assert r.returncode != 0
    assert "tputest::twice" in r.stderr and "TORCH_TPU_FALLBACK=0" in r.stderr


def test_view_ops_alias_and_are_not_counted():
    torch.tpu._reset_cache_stats()
    x = torch.arange(12.0, device="tpu")
    views = [x.view(3, 4), x.view(3, 4).t(), x[2:5], x.unfold(0, 3, 3), x.as_strided((2, 2), (3, 1)),
             x.view(3, 4).permute(1, 0), x.unsqueeze(0).expand(2, 12), x.view(2, 6).select(0, 1),
             x.view(3, 4).diagonal(), x.view(3, 4).narrow(1, 1, 2), x.view(-1, 2).unbind(1)[0],
             x.view(3, 4).split(2, dim=1)[1], x.reshape(4, 3), x.view(3, 4).T.contiguous().view(-1)]
    for v in views[:-1]:
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert torch.tpu.fallback_counts() == {}
