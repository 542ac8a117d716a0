"""MLP training on tpu vs PyTorch's native CPU path, in the same run: steps/s
(median of repeated timed windows), plus the compile count and time of the
first tpu step.

    python bench/mlp_train.py [--batch 64] [--hidden 256] [--steps 20] [--reps 5]"""
import argparse
import os
import sys
import time

import torch
from torch import nn

import torch_tpu

sys.path.insert(0, os.path.dirname(__file__))
from common import median_time  # noqa: E402


def build(device, hidden, opt_name):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, 10)).to(device)
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-3) if opt_name == "adamw"
           else torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    return model, opt


def step_fn(model, opt, x, y):
    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--opt", default="adamw", choices=["adamw", "sgd"])
    args = ap.parse_args()
    results = {}
    for run in ("tpu", "fused", "cpu"):
        dev = "cpu" if run == "cpu" else "tpu"
        torch_tpu.set_execution_mode("fused" if run == "fused" else "strict")
        model, opt = build(dev, args.hidden, args.opt)
        x = torch.randn(args.batch, 128, device=dev)
        y = torch.randint(0, 10, (args.batch,), device=dev)
        step = step_fn(model, opt, x, y)
        if run == "tpu":
            torch.tpu._reset_cache_stats()
            t0 = time.perf_counter()
            step().item()
            first = time.perf_counter() - t0
            s = torch.tpu._get_cache_stats()
            print(f"first tpu step: {first * 1e3:.0f} ms wall, {s['compiles']} compiles, "
                  f"{s['compile_seconds'] * 1e3:.0f} ms compiling, {s['ops']} device ops")

        def window():
            for _ in range(args.steps):
                loss = step()
            loss.item()
        results[run] = args.steps / median_time(window, reps=args.reps, warmup=1)
    torch_tpu.set_execution_mode("strict")
    print(f"MLP 128-{args.hidden}-{args.hidden}-10, batch {args.batch}, {args.opt}: "
          f"tpu strict {results['tpu']:.1f} steps/s, tpu fused {results['fused']:.1f} steps/s "
          f"(one graph per {args.steps} steps), cpu {results['cpu']:.1f} steps/s; "
          f"fused/strict {results['fused'] / results['tpu']:.2f}, "
          f"strict/cpu {results['tpu'] / results['cpu']:.2f}, "
          f"fused/cpu {results['fused'] / results['cpu']:.2f}")


if __name__ == "__main__":
    main()
