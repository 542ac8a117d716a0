"""TinyGPT training (forward, backward, AdamW; loss.item() every step) in
strict and fused eager on tpu against PyTorch's native CPU path, in one run:
steps/s as medians of several timed windows, with ratios.

    python bench/gpt_train.py [--batch 1 8] [--steps 5] [--reps 5] [--no-cpu]"""
import argparse
import os
import sys

import torch

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_time  # noqa: E402
from models import TinyGPT, gpt_batch, gpt_loss  # noqa: E402


def steps_per_s(device, mode, batch, args):
    torch_tpu.set_execution_mode(mode)
    torch.manual_seed(0)
    model = TinyGPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = gpt_batch(batch, 128, 512, device)

    def window():
        for _ in range(args.steps):
            opt.zero_grad()
            loss = gpt_loss(model, x, y)
            loss.backward()
            opt.step()
            loss.item()

    try:
        return args.steps / median_time(window, reps=args.reps, warmup=1)
    finally:
        torch_tpu.set_execution_mode("strict")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-cpu", action="store_true")
    args = ap.parse_args()
    print(f"TinyGPT (4 layers, d=256, seq 128, vocab 512), AdamW, loss.item() each step; "
          f"median of {args.reps} windows of {args.steps} steps; {os.cpu_count()} CPUs")
    for b in args.batch:
        strict = steps_per_s("tpu", "strict", b, args)
        fused = steps_per_s("tpu", "fused", b, args)
        line = (f"batch {b}: tpu strict {strict:.2f} steps/s, tpu fused {fused:.2f} steps/s "
                f"(fused/strict {fused / strict:.2f}x)")
        if not args.no_cpu:
            cpu = steps_per_s("cpu", "strict", b, args)
            line += (f", cpu {cpu:.2f} steps/s (strict/cpu {strict / cpu:.2f}x, "
                     f"fused/cpu {fused / cpu:.2f}x)")
        print(line, flush=True)


if __name__ == "__main__":
    main()
