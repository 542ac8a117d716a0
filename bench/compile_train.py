"""torch.compile(backend="tpu") against eager tpu, PyTorch's CPU eager and
Inductor on the CPU, in one run: training steps/s of TinyGPT (forward,
backward, AdamW) and inference latency (forward under no_grad), medians of
several reps, ratios; plus the compile time of the training step cold (fresh
persistent cache) and warm (a second process on the same cache), as medians
of --compile-reps cold/warm pairs, and the warm/cold ratio.

    python bench/compile_train.py [--reps 5] [--batch 8] [--no-inductor]
                                  [--compile-reps 1] [--compile-only]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import child_result, median_time  # noqa: E402
from models import TinyGPT, gpt_batch, gpt_train_step  # noqa: E402


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


def make_step(model, device, backend):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=(device == "tpu"))
    step = gpt_train_step(model, opt)
    return torch.compile(step, backend=backend) if backend else step


def make_infer(model, backend):
    def infer(x):
        with torch.no_grad():
            return model(x)

    return torch.compile(infer, backend=backend) if backend else infer


def fused_available():
    import torch_tpu.mode as mode

    return "fused" in getattr(mode, "_MODES", ())


def measure(name, device, backend, args, mode=None):
    """Steps/s of training and seconds per inference call for one setup."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    if mode:
        import torch_tpu

        torch_tpu.set_execution_mode(mode)
    model = TinyGPT().to(device)
    x, y = gpt_batch(args.batch, 128, 512, device)
    step = make_step(model, device, backend)
    t0 = time.perf_counter()
    step(x, y).item()
    first = time.perf_counter() - t0

    def one_step():
        step(x, y)
        sync(device)

    train = median_time(one_step, reps=args.reps, warmup=1)
    model.eval()
    infer = make_infer(model, backend)
    xi = x[:1].contiguous()
    infer(xi)

    def one_infer():
        out = infer(xi)  # kept alive over the sync: fused mode skips dead results
        sync(device)
        return out

    # A call takes milliseconds: more of them steady the median.
    latency = median_time(one_infer, reps=4 * args.reps, warmup=3)
    if mode:
        import torch_tpu

        torch_tpu.set_execution_mode("strict")
    return {"name": name, "steps_per_s": 1.0 / train, "infer_ms": latency * 1e3,
            "first_step_s": first}


def compile_time_child(args):
    """Runs in a subprocess: the first compiled training step's time. With
    --child-backend eager, Dynamo traces the same step and runs its graphs
    eagerly: the part of a start that no backend's cache can remove."""
    torch.manual_seed(0)
    model = TinyGPT().to("tpu")
    x, y = gpt_batch(args.batch, 128, 512, "tpu")
    step = make_step(model, "tpu", args.child_backend)
    t0 = time.perf_counter()
    step(x, y).item()
    total = time.perf_counter() - t0
    s = torch.tpu._get_cache_stats()
    print("RESULT " + json.dumps({"seconds": total, "xla_compiles": s["program_compiles"],
                                  "disk_hits": s["disk_hits"],
                                  "backend_seconds": s["compiled_seconds"],
                                  "aot_loads": s.get("compiled_cache_loads", 0),
                                  "lowered": s["compiled_programs"]}))


def compile_times(args):
    """Cold and warm runs on one fresh cache, --compile-reps times; the
    medians of each (every pair shares the machine's load at that time)."""
    runs = {"cold": [], "warm": [], "dynamo": [], "ratio": []}
    for _ in range(args.compile_reps):
        pair = {}
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache)
            # The eager run goes twice: the first fills the disk cache with
            # the executables of the ops it runs one by one.
            for label in ("cold", "warm", "dynamo", "dynamo"):
                backend = "eager" if label == "dynamo" else "tpu"
                pair[label] = child_result([sys.executable, __file__, "--child", "--batch",
                                            str(args.batch), "--child-backend", backend],
                                           env, timeout=1800)
        runs["cold"].append(pair["cold"])
        runs["warm"].append(pair["warm"])
        runs["dynamo"].append(pair["dynamo"])
        runs["ratio"].append(pair["warm"]["seconds"] / pair["cold"]["seconds"])

    def med(label):
        rs = sorted(runs[label], key=lambda d: d["seconds"])
        return rs[len(rs) // 2]

    return {"cold": med("cold"), "warm": med("warm"), "dynamo": med("dynamo"),
            "ratio": statistics.median(runs["ratio"]), "n": args.compile_reps}


def report_compile_times(args):
    ct = compile_times(args)
    cold, warm = ct["cold"], ct["warm"]
    print(f"compile time of the training step (first call, fresh process, median of {ct['n']}): "
          f"cold cache {cold['seconds']:.2f} s ({cold['xla_compiles']} XLA compiles, "
          f"{cold['lowered']} graphs lowered), warm cache {warm['seconds']:.2f} s "
          f"({warm['xla_compiles']} XLA compiles, {warm['disk_hits']} disk hits, "
          f"{warm['aot_loads']} graphs from the AOTAutograd cache, {warm['lowered']} lowered) = "
          f"{100 * ct['ratio']:.0f}% of cold (median of per-pair ratios)")
    dyn = ct["dynamo"]
    dyn = dyn["seconds"]
    print(f"  Dynamo alone (the same first step with backend='eager', warm op cache): "
          f"{dyn:.2f} s = {100 * dyn / cold['seconds']:.0f}% of cold; beyond it, "
          f"cold {cold['seconds'] - dyn:.2f} s, warm {warm['seconds'] - dyn:.2f} s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--compile-reps", type=int, default=1,
                   help="cold/warm process pairs for the compile time (0: none)")
    p.add_argument("--compile-only", action="store_true",
                   help="only the cold/warm compile time")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-backend", default="tpu", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        compile_time_child(args)
        return
    import torch_tpu  # noqa: F401

    if args.compile_only:
        report_compile_times(args)
        return

    print(f"TinyGPT (4 layers, d=256, seq 128, vocab 512), batch {args.batch}; "
          f"training = forward + backward + AdamW; inference = forward, batch 1; "
          f"medians of {args.reps}; torch {torch.__version__}, {os.cpu_count()} CPUs")
    rows = [measure("tpu compiled", "tpu", "tpu", args),
            measure("tpu strict eager", "tpu", None, args)]
    if fused_available():
        rows.append(measure("tpu fused eager", "tpu", None, args, mode="fused"))
    else:
        rows.append({"name": "tpu fused eager", "steps_per_s": None, "infer_ms": None,
                     "first_step_s": None})
    rows.append(measure("cpu eager", "cpu", None, args))
    if not args.no_inductor:
        rows.append(measure("cpu inductor", "cpu", "inductor", args))
    base = rows[0]
    print(f"{'setup':18s} {'steps/s':>9s} {'compiled x':>11s} {'infer ms':>9s} "
          f"{'compiled x':>11s} {'first step s':>13s}")
    for r in rows:
        if r["steps_per_s"] is None:
            print(f"{r['name']:18s} {'n/a':>9s} {'n/a':>11s} {'n/a':>9s} {'n/a':>11s} {'n/a':>13s}")
            continue
        print(f"{r['name']:18s} {r['steps_per_s']:9.2f} "
              f"{base['steps_per_s'] / r['steps_per_s']:10.2f}x {r['infer_ms']:9.2f} "
              f"{r['infer_ms'] / base['infer_ms']:10.2f}x {r['first_step_s']:13.2f}")
    if args.compile_reps > 0:
        report_compile_times(args)


if __name__ == "__main__":
    main()
