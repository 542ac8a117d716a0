"""The CI slice of the optimizer harness (python -m torch_tpu.coverage
--optims --fast): PyTorch's optim_db configurations of SGD, Adam, AdamW,
Adagrad, RMSprop and LBFGS in every implementation they support (for-loop,
foreach, fused, differentiable, capturable, compiled) against the CPU. Every
row must pass (the full run's totals live in docs/coverage_optims.md)."""
import json
import subprocess
import sys


def test_fast_slice(tmp_path):
    out = tmp_path / "optims.json"
    r = subprocess.run([sys.executable, "-m", "torch_tpu.coverage", "--optims", "--fast",
                        "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    results = {tuple(rec["row"]): rec["result"] for rec in rows if "row" in rec}
    impls = {impl for _, _, impl in results}
    assert {"for-loop", "foreach", "fused", "differentiable", "capturable",
            "compiled"} <= impls, impls
    assert len(results) >= 40, r.stdout
    bad = {row: res for row, res in results.items() if res["status"] != "pass"}
    assert not bad, bad
