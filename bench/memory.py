"""Peak memory of training a 49M-parameter GPT (vocab 8192, d 768, 12 heads,
6 layers, seq 256, batch 4, AdamW) for 3 steps, each mode in a fresh process:
tpu strict, fused and compiled against PyTorch's CPU path. Reports
torch.tpu.max_memory_allocated() (device memory: what limits model size on
an accelerator) and the process's peak RSS above its idle baseline (after
imports and device start), with ratios to the CPU's peak RSS; parameters,
gradients and AdamW state are the floor (4 x 4 bytes per parameter).

    python bench/memory.py [--modes strict fused compiled cpu] [--rounds 2]"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import child_result  # noqa: E402

CHILD = r"""
import json, resource, sys
sys.path.insert(0, HERE)
import torch
mode = sys.argv[1]
device = "cpu" if mode == "cpu" else "tpu"
if device == "tpu":
    import torch_tpu
    if mode == "fused":
        torch_tpu.set_execution_mode("fused")
    torch.zeros(1, device="tpu").cpu()


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def peak_rss():  # VmHWM, reset below so that imports do not count
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024


from models import TinyGPT, gpt_batch, gpt_train_step
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM to the current RSS
idle = rss()
torch.manual_seed(0)
model = TinyGPT(vocab=8192, d=768, layers=6, heads=12, seq=256).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x, y = gpt_batch(4, 256, 8192, device)
params = sum(p.numel() for p in model.parameters())
step = gpt_train_step(model, opt)
if mode == "compiled":
    step = torch.compile(step, backend="tpu")
losses = [step(x, y).item() for _ in range(3)]
out = {"params": params, "losses": losses, "peak_rss": peak_rss() - idle}
if device == "tpu":
    torch.tpu.synchronize()
    out["device_peak"] = torch.tpu.max_memory_allocated()
    out["device_now"] = torch.tpu.memory_allocated()
print("RESULT " + json.dumps(out))
""".replace("HERE", repr(HERE))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", nargs="+", default=["strict", "fused", "compiled", "cpu"])
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    runs = {m: [] for m in args.modes}
    for _ in range(args.rounds):
        for m in args.modes:
            runs[m].append(child_result([sys.executable, "-c", CHILD, m], timeout=1200))
    gib = 2.0 ** 30
    params = runs[args.modes[0]][0]["params"]
    floor = 16 * params / gib
    cpu = statistics.median(r["peak_rss"] for r in runs["cpu"]) if "cpu" in runs else None
    print(f"49M GPT ({params / 1e6:.1f}M parameters), batch 4, seq 256, AdamW, 3 steps; "
          f"parameters + gradients + AdamW state = {floor:.2f} GiB; medians of {args.rounds}")
    print(f"{'mode':10s} {'device peak GiB':>16s} {'vs cpu':>7s} {'RSS peak GiB':>13s} "
          f"{'vs cpu':>7s}  losses")
    for m, rs in runs.items():
        rss = statistics.median(r["peak_rss"] for r in rs)
        dev = statistics.median(r["device_peak"] for r in rs) if "device_peak" in rs[0] else None
        print(f"{m:10s} {'' if dev is None else f'{dev / gib:16.2f}':>16s} "
              f"{'' if dev is None or not cpu else f'{dev / cpu:6.2f}x':>7s} "
              f"{rss / gib:13.2f} {'' if not cpu else f'{rss / cpu:6.2f}x':>7s}  "
              + " ".join(f"{v:.4f}" for v in rs[0]["losses"]))


if __name__ == "__main__":
    main()
