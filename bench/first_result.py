"""Time to first result of a small transformer forward in a fresh process:
cold (empty persistent cache) vs warm (the cache a previous process wrote),
with PyTorch's CPU path in a fresh process as the reference. Median of
--reps fresh processes each.

    python bench/first_result.py [--reps 3]"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import time, torch
from torch import nn
t0 = time.perf_counter()
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__()
        s.h = h; s.ln1 = nn.LayerNorm(d); s.ln2 = nn.LayerNorm(d)
        s.qkv = nn.Linear(d, 3 * d); s.proj = nn.Linear(d, d)
        s.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(s, x):
        b, t, d = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(d, -1)
        q, k, v = (z.view(b, t, s.h, d // s.h).transpose(1, 2) for z in (q, k, v))
        a = (q @ k.transpose(-1, -2)) / (d // s.h) ** 0.5
        a = a.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float('-inf'))
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + s.proj(y)
        return x + s.mlp(s.ln2(x))
dev = "DEVICE"
model = nn.Sequential(nn.Embedding(1000, 256), *[Block(256, 4) for _ in range(4)], nn.Linear(256, 1000)).to(dev)
ids = torch.randint(0, 1000, (2, 128), device=dev)
with torch.no_grad():
    out = model(ids).sum().item()
print("FIRST", time.perf_counter() - t0)
"""


def run(device, cache):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, "-c", CHILD.replace("DEVICE", device)], env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    return float([l for l in r.stdout.splitlines() if l.startswith("FIRST")][0].split()[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    cold, warm, cpu = [], [], []
    for _ in range(args.reps):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(run("tpu", cache))
            warm.append(run("tpu", cache))
        cpu.append(run("cpu", "0"))
    c, w, p = (statistics.median(x) for x in (cold, warm, cpu))
    print(f"4-layer d=256 transformer forward, batch 2 x 128 tokens; time from model build to first result")
    print(f"tpu cold cache {c:.2f} s, tpu warm cache {w:.2f} s (warm/cold {w / c:.0%}), "
          f"cpu {p:.2f} s")


if __name__ == "__main__":
    main()
