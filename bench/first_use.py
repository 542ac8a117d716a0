"""The first call of common ops in a fresh process: on tpu with an empty
executable cache (cold) and with the cache that call wrote (warm), and on
PyTorch's CPU path, each after one small op has initialised the device;
plus whether the call imported a compiler module (torch._dynamo, sympy,
torch._inductor). Median of --reps fresh processes per cell.

    python bench/first_use.py [--reps 3]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

STATEMENTS = [
    "torch.zeros(256, 256, device=d)",
    "torch.full((256, 256), 2.0, device=d)",
    "torch.randn(256, 256, device=d)",
    "torch.rand(256, 256, device=d)",
    "torch.empty(256, device=d).normal_()",
    "torch.empty(256, device=d).uniform_()",
    "torch.randint(0, 9, (256,), device=d)",
    "torch.nn.functional.dropout(torch.ones(64, 64, device=d), 0.1)",
    "torch.randperm(100, device=d)",
    "torch.multinomial(torch.ones(8, device=d), 4)",
]

CHILD = r"""
import json, sys, time, torch
d = torch.device(sys.argv[1])
torch.zeros(1, device=d).cpu()
t0 = time.perf_counter()
r = eval(sys.argv[2])
r.cpu()
dt = time.perf_counter() - t0
print(json.dumps([dt, [m for m in ("torch._dynamo", "sympy", "torch._inductor") if m in sys.modules]]))
"""


def first_call(stmt, device, cache):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache)
    p = subprocess.run([sys.executable, "-c", CHILD, device, stmt], env=env,
                       capture_output=True, text=True, timeout=300)
    if p.returncode:
        raise RuntimeError(f"{stmt} on {device}:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    print(f"{'first call':<64}{'tpu cold':>10}{'tpu warm':>10}{'cpu':>9}  imported")
    for stmt in STATEMENTS:
        cold, warm, cpu, heavy = [], [], [], set()
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory() as cache:
                dt, mods = first_call(stmt, "tpu", cache)
                cold.append(dt)
                heavy.update(mods)
                dt, mods = first_call(stmt, "tpu", cache)
                warm.append(dt)
                heavy.update(mods)
                cpu.append(first_call(stmt, "cpu", cache)[0])
        ms = [statistics.median(v) * 1e3 for v in (cold, warm, cpu)]
        print(f"{stmt:<64}{ms[0]:>8.1f}ms{ms[1]:>8.1f}ms{ms[2]:>7.1f}ms  "
              f"{', '.join(sorted(heavy)) or 'nothing'}")


if __name__ == "__main__":
    main()
