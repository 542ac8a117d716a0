"""Row reductions of the bench GPT (TinyGPT: batch 8, seq 128, d 256, 4
heads) forward and backward, on PyTorch's CPU path and on tpu in strict
eager and compiled, all in the same run: layer norm over [8, 128, 256] and
softmax over the attention scores [8, 4, 128, 128]. Each timed call runs
the forward, the backward and a host read of one gradient element; medians.

    python bench/row_ops.py [--reps 15] [--inner 20]"""
import argparse
import os
import statistics
import sys

import torch

import torch_tpu

sys.path.insert(0, os.path.dirname(__file__))
from common import fmt_us, median_time  # noqa: E402


def layer_norm(d):
    ln = torch.nn.LayerNorm(256).to(d)
    x = torch.randn(8, 128, 256, device=d, requires_grad=True)
    g = torch.randn(8, 128, 256, device=d)
    return lambda: ln(x), x, g


def softmax(d):
    x = torch.randn(8, 4, 128, 128, device=d, requires_grad=True)
    g = torch.randn(8, 4, 128, 128, device=d)
    return lambda: torch.softmax(x, -1), x, g


def step_of(make, device, compiled):
    fwd, x, g = make(device)
    if compiled:
        fwd = torch.compile(fwd, backend="tpu")

    def step():
        x.grad = None
        fwd().backward(g)
        x.grad.view(-1)[0].item()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--inner", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"forward + backward + one host read, median of {args.reps} runs x {args.inner} calls"
          " (the three sides take turns, so a busy machine slows them alike)")
    print(f"{'op':24s} {'cpu':>12s} {'tpu strict':>12s} {'cpu/this':>8s}"
          f" {'tpu compiled':>12s} {'cpu/this':>8s}")
    modes = (("cpu", "cpu"), ("strict", "tpu"), ("compiled", "tpu"))
    for name, make in (("layer_norm [8,128,256]", layer_norm),
                       ("softmax [8,4,128,128]", softmax)):
        steps = {mode: step_of(make, dev, mode == "compiled") for mode, dev in modes}
        times = {mode: [] for mode in steps}
        for _ in range(args.reps):
            for mode, step in steps.items():
                times[mode].append(median_time(step, reps=1, inner=args.inner, warmup=1))
        t = {mode: statistics.median(ts) for mode, ts in times.items()}
        print(f"{name:24s} {fmt_us(t['cpu'])} {fmt_us(t['strict'])} {t['cpu'] / t['strict']:7.2f}x"
              f" {fmt_us(t['compiled'])} {t['cpu'] / t['compiled']:7.2f}x")


if __name__ == "__main__":
    main()
