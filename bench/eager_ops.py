"""Where a strict-eager training step goes, op by op, against PyTorch's CPU
path: TinyGPT (4 layers, d 256, seq 128, vocab 512), batch 8, AdamW, one
step profiled on each side (torch.profiler, self time per aten op summed
over its calls). On tpu every op is made to wait for its result
(TORCH_TPU_LAUNCH_BLOCKING=1), so its time is dispatch plus XLA:CPU's kernel.
The CPU runs attention as one fused kernel, tpu as matrix products and a
softmax: compare the groups at the end. The steady-state step times of
strict, fused and compiled come first, all as medians in the same run.

    python bench/eager_ops.py [--batch 8] [--reps 5] [--top 25]"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import child_result  # noqa: E402

CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, HERE)
import torch
from torch.profiler import ProfilerActivity, profile
from models import TinyGPT, gpt_batch, gpt_train_step
device, mode, batch, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if device == "tpu":
    import torch_tpu
    torch_tpu.set_execution_mode("fused" if mode == "fused" else "strict")
torch.manual_seed(0)
model = TinyGPT().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x, y = gpt_batch(batch, 128, 512, device)
step = gpt_train_step(model, opt)
if mode == "compiled":
    step = torch.compile(step, backend="tpu")
for _ in range(3):
    step(x, y).item()
if device == "tpu":
    torch.tpu.wait_for_compiles()
times = []
for _ in range(reps):
    t0 = time.perf_counter()
    step(x, y).item()
    times.append(time.perf_counter() - t0)
out = {"step_s": statistics.median(times), "ops": {}}
if mode in ("strict", "cpu"):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(x, y).item()
    for e in prof.key_averages():
        if e.key.startswith("aten::"):
            out["ops"][e.key] = [e.count, e.self_cpu_time_total / 1e3]
print("RESULT " + json.dumps(out))
""".replace("HERE", repr(HERE))


def run(device, mode, args, env=None):
    return child_result([sys.executable, "-c", CHILD, device, mode, str(args.batch),
                         str(args.reps)], dict(os.environ, **(env or {})), timeout=1200)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    cpu = run("cpu", "cpu", args)
    strict = run("tpu", "strict", args)
    blocking = run("tpu", "strict", args, {"TORCH_TPU_LAUNCH_BLOCKING": "1"})
    fused = run("tpu", "fused", args)
    compiled = run("tpu", "compiled", args)
    print(f"TinyGPT batch {args.batch} + AdamW, one training step (median of {args.reps}):")
    for name, r in (("cpu eager", cpu), ("tpu strict", strict), ("tpu fused", fused),
                    ("tpu compiled", compiled)):
        print(f"  {name:13s} {r['step_s'] * 1e3:7.1f} ms   cpu/this {cpu['step_s'] / r['step_s']:.2f}x")
    names = set(cpu["ops"]) | set(blocking["ops"])
    rows = sorted(((max(cpu["ops"].get(n, [0, 0.0])[1], blocking["ops"].get(n, [0, 0.0])[1]), n)
                   for n in names), reverse=True)
    print("\nper aten op, self time in one profiled step (ms; tpu = dispatch + XLA:CPU kernel)")
    print(f"{'op':52s} {'calls cpu/tpu':>13s} {'cpu':>8s} {'tpu':>8s} {'tpu/cpu':>8s}")
    for _, n in rows[:args.top]:
        c = cpu["ops"].get(n, [0, 0.0])
        b = blocking["ops"].get(n, [0, 0.0])
        ratio = f"{b[1] / c[1]:7.1f}x" if c[1] > 0 and b[1] > 0 else ""
        print(f"{n[:52]:52s} {f'{c[0]}/{b[0]}':>13s} {c[1]:8.2f} {b[1]:8.2f} {ratio:>8s}")
    groups = {"matrix products (mm, addmm, bmm, linear)": ("aten::mm", "aten::addmm", "aten::bmm",
                                                           "aten::linear"),
              "attention (CPU's fused kernel and backward)": (
                  "aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_flash_attention_for_cpu_backward")}
    print()
    rest_c = sum(v[1] for v in cpu["ops"].values())
    rest_b = sum(v[1] for v in blocking["ops"].values())
    for g, ops in groups.items():
        c = sum(cpu["ops"].get(n, [0, 0.0])[1] for n in ops)
        b = sum(blocking["ops"].get(n, [0, 0.0])[1] for n in ops)
        rest_c -= c
        rest_b -= b
        print(f"{g:66s} {c:8.2f} {b:8.2f}" + (f" {b / c:7.1f}x" if c and b else ""))
    print(f"{'every other aten op':66s} {rest_c:8.2f} {rest_b:8.2f} {rest_b / rest_c:7.1f}x")

if __name__ == "__main__":
    main()
