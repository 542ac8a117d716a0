"""Tiered compilation (TORCH_TPU_TIERED_COMPILE=1): a new program runs from a
quick first-tier compile while a background thread compiles it fully and
swaps the code in; only the full code reaches the disk cache, and exit waits
for compiles in flight. Off by default."""
import json
import os
import subprocess
import sys

import pytest
import torch

# A small training step in a fresh process; prints its losses, parameters
# and the cache counters as JSON.
CODE = r"""
import json, sys, torch
mode, wait = sys.argv[1], sys.argv[2] == "wait"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to("tpu")
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(8, 16).to("tpu")
y = torch.randn(8, 4).to("tpu")

def step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss

if mode == "compiled":
    step = torch.compile(step, backend="tpu")
losses = [step().item() for _ in range(3)]
done = torch.tpu.wait_for_compiles() if wait else None
losses += [step().item() for _ in range(3)]
for n in range(1, 13):  # new programs right before the end
    assert (torch.ones(n, 7, device="tpu") * 3).sum().item() == 21 * n
if wait:
    done = done and torch.tpu.wait_for_compiles()
s = torch.tpu._get_cache_stats()
keys = ("compiles", "first_tier_compiles", "upgrades", "upgrades_pending", "upgrade_failures",
        "disk_hits", "disk_writes")
print("RESULT " + json.dumps({"losses": losses, "done": done, **{k: s[k] for k in keys},
      "params": [p.detach().cpu().flatten().tolist() for p in model.parameters()]}))
"""


def run(cache, mode="strict", wait=True, env=None):
    e = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache), TORCH_TPU_TIERED_COMPILE="1")
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)  # unset: the default
        else:
            e[k] = v
    r = subprocess.run([sys.executable, "-c", CODE, mode, "wait" if wait else "exit"],
                       capture_output=True, text=True, env=e, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads([l for l in r.stdout.splitlines() if l.startswith("RESULT ")][0][7:])


def cpu_reference():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().flatten().tolist() for p in model.parameters()]


def check_against_cpu(r):
    losses, params = cpu_reference()
    # float32 through 6 AdamW steps: the two tiers' code may round differently.
    torch.testing.assert_close(torch.tensor(r["losses"]), torch.tensor(losses),
                               rtol=1e-4, atol=1e-5)
    for got, want in zip(r["params"], params):
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)


def test_strict_first_tier_then_full_code_on_disk(tmp_path):
    cold = run(tmp_path)
    check_against_cpu(cold)
    assert cold["done"] is True
    assert cold["compiles"] > 0 and cold["first_tier_compiles"] == cold["compiles"]
    # Every first tier was upgraded, and only the full code went to disk.
    assert cold["upgrades"] == cold["compiles"]
    assert cold["upgrades_pending"] == 0 and cold["upgrade_failures"] == 0
    assert cold["disk_writes"] == cold["upgrades"]
    warm = run(tmp_path)
    check_against_cpu(warm)
    assert warm["compiles"] == 0 and warm["first_tier_compiles"] == 0
    assert warm["disk_hits"] == cold["disk_writes"]


def test_exit_waits_for_compiles_in_flight(tmp_path):
    cold = run(tmp_path, wait=False)
    check_against_cpu(cold)
    assert cold["first_tier_compiles"] > 0 and cold["upgrades_pending"] > 0
    # The process ended without waiting; its exit let the upgrades finish
    # and write the disk cache, so the next process compiles nothing.
    warm = run(tmp_path)
    assert warm["compiles"] == 0 and warm["disk_hits"] == cold["first_tier_compiles"]


def test_compiled_programs_are_upgraded(tmp_path):
    r = run(tmp_path, mode="compiled")
    check_against_cpu(r)
    assert r["first_tier_compiles"] > 0
    assert r["upgrades"] == r["first_tier_compiles"] and r["upgrade_failures"] == 0


@pytest.mark.parametrize("setting", ["0", None])
def test_off_compiles_fully_at_once(tmp_path, setting):
    r = run(tmp_path, env={"TORCH_TPU_TIERED_COMPILE": setting})
    check_against_cpu(r)
    assert r["compiles"] > 0 and r["first_tier_compiles"] == 0 and r["upgrades"] == 0
    assert r["disk_writes"] == r["compiles"]


def test_wait_for_compiles_without_a_device_use():
    code = "import torch; print(torch.tpu.wait_for_compiles(), torch.tpu.wait_for_compiles(0.0))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]
