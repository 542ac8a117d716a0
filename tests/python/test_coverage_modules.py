"""The CI slice of the ModuleInfo harness (python -m torch_tpu.coverage
--modules --fast): Linear, Conv2d, LSTM, GRU, TransformerEncoderLayer,
BatchNorm2d, Embedding and MultiheadAttention built from PyTorch's own
module samples, run on tpu and on the CPU with the fallback off. Every
column of every module must pass (the full run's totals live in
docs/coverage_modules.md)."""
from conftest import run_coverage

from torch_tpu.coverage.modules import FAST_MODULES


def test_fast_slice(tmp_path):
    r, results = run_coverage(["--modules", "--fast"], tmp_path / "fast.json", "module")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(results) == sorted(FAST_MODULES), r.stdout
    bad = {(m, col): v for m, cols in results.items() for col, v in cols.items()
           if v["status"] not in ("pass", "skip")}
    assert not bad, bad
    # Each module was compared in forward and backward, in both dtypes.
    for m, cols in results.items():
        for col in ("float32", "float32.backward", "bfloat16", "bfloat16.backward"):
            assert cols[col]["status"] == "pass", (m, col, cols[col])
