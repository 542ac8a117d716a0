"""Steady-state cost of filling one whole float32 tensor (zero_ and
fill_), synchronized, at sizes from 4 KiB to 64 MiB: on tpu (strict
eager) and on PyTorch's CPU path in the same run. Median of --reps calls
per cell, after warm-up calls (which compile what a size needs).

    python bench/fills.py [--reps 15]"""
import argparse
import statistics
import time

import torch

import torch_tpu  # noqa: F401


def median_ms(fn, sync, reps):
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    print(f"{'size':>10}  {'op':6}  {'tpu ms':>8}  {'cpu ms':>8}  tpu / cpu")
    for shift in (10, 14, 16, 18, 20, 22, 24):
        n = 1 << shift
        for op in ("zero_", "fill_"):
            cells = []
            for dev, sync in (("tpu", torch.tpu.synchronize), ("cpu", lambda: None)):
                t = torch.empty(n, device=dev)
                fn = t.zero_ if op == "zero_" else (lambda t=t: t.fill_(1.5))
                cells.append(median_ms(fn, sync, args.reps))
            print(f"{n * 4 // 1024:>6} KiB  {op:6}  {cells[0]:8.3f}  {cells[1]:8.3f}"
                  f"  {cells[0] / cells[1]:8.1f}x")


if __name__ == "__main__":
    main()
