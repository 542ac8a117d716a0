"""Custom kernels: a JAX-written fused op against the same computation in
PyTorch ops, both on tpu, strict eager and torch.compile, in one run.

  python bench/custom_kernel.py [--reps 9] [--rows 1024] [--dim 256] [--hidden 1024]

Ops: RMSNorm + matmul (x [rows, dim] -> [rows, hidden]) and SwiGLU
(x [rows, dim] -> [rows, dim] through hidden), forward. Reported: median
time per call of each, the ratio jax_op / PyTorch ops (the custom op must
cost no more than what it replaces: <= 1.05), the first call's trace and
compile time, and, from child processes, what importing and using JAX does
to the process: thread count and a small op's latency with and without it.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import child_result, median_time  # noqa: E402

CHILD = r"""
import json, os, statistics, time, torch, torch_tpu
use_jax = {use_jax}
if use_jax:
    import jax.numpy as jnp
    f = torch_tpu.jax_op("bench::double", lambda a: a * 2)
    f(torch.ones(16, device="tpu")).cpu()
x = torch.ones(16, device="tpu")
for _ in range(200):
    y = x + x
y.cpu()
runs = []
for _ in range(9):
    t0 = time.perf_counter()
    for _ in range(2000):
        y = x + x
    y.cpu()
    runs.append((time.perf_counter() - t0) / 2000)
threads = len(os.listdir("/proc/self/task"))
print("RESULT " + json.dumps({{"latency": statistics.median(runs), "threads": threads}}))
"""


def rms_norm_matmul_jax(x, g, w, eps: float = 1e-6):
    import jax
    import jax.numpy as jnp

    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    return (x * r * g) @ w


def swiglu_jax(x, w1, w3, w2):
    import jax

    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=1024)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    import torch_tpu

    def rms_norm_matmul_torch(x, g, w, eps=1e-6):
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g) @ w

    def swiglu_torch(x, w1, w3, w2):
        return (F.silu(x @ w1) * (x @ w3)) @ w2

    torch.manual_seed(0)
    n, d, h = args.rows, args.dim, args.hidden
    x = torch.randn(n, d, device="tpu")
    cases = {
        "rms_norm+matmul": (rms_norm_matmul_jax, rms_norm_matmul_torch,
                            [x, torch.randn(d, device="tpu"),
                             torch.randn(d, h, device="tpu") / d ** 0.5]),
        "swiglu": (swiglu_jax, swiglu_torch,
                   [x, torch.randn(d, h, device="tpu") / d ** 0.5,
                    torch.randn(d, h, device="tpu") / d ** 0.5,
                    torch.randn(h, d, device="tpu") / h ** 0.5]),
    }
    print(f"rows {n}, dim {d}, hidden {h}, float32, {torch_tpu.custom_ops.jax_platform()} "
          f"lowering; medians of {args.reps}")
    print(f"{'op':18} {'mode':9} {'PyTorch ops':>12} {'jax_op':>10} {'ratio':>7}   first call "
          "(trace / total)")
    for name, (jfn, tfn, inputs) in cases.items():
        op = torch_tpu.jax_op(f"bench::{name.replace('+', '_')}", jfn)
        t0 = time.perf_counter()
        got = op(*inputs)
        got.cpu()
        first = time.perf_counter() - t0
        want = tfn(*inputs)
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-4)
        trace = op._kernel_op.stats["trace_seconds"]
        for mode in ("strict", "compiled"):
            if mode == "compiled":
                tf = torch.compile(tfn, backend="tpu", fullgraph=True)
                jf = torch.compile(lambda *a, _op=op: _op(*a), backend="tpu", fullgraph=True)
            else:
                tf, jf = tfn, op

            def call(fn):
                fn(*inputs)
                torch.tpu.synchronize()

            # Alternating rounds, so that drift in the machine's speed
            # reaches both sides alike.
            rounds = [(median_time(lambda: call(tf), reps=1, inner=5, warmup=1),
                       median_time(lambda: call(jf), reps=1, inner=5, warmup=1))
                      for _ in range(args.reps)]
            tt = statistics.median(r[0] for r in rounds)
            tj = statistics.median(r[1] for r in rounds)
            extra = f"   {trace * 1e3:.0f} / {first * 1e3:.0f} ms" if mode == "strict" else ""
            print(f"{name:18} {mode:9} {tt * 1e3:10.3f}ms {tj * 1e3:8.3f}ms {tj / tt:7.2f}{extra}")

    print("\nJAX in the same process (child processes; small-op latency, 2000 queued adds):")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    rows = {}
    for use_jax in (False, True):
        rows[use_jax] = child_result([sys.executable, "-c", CHILD.format(use_jax=use_jax)],
                                     env=env)
    for use_jax, r in rows.items():
        print(f"  {'with jax_op ' if use_jax else 'without JAX'}: {r['threads']} threads, "
              f"add {r['latency'] * 1e6:.2f} us")
    print(f"  latency ratio with/without: {rows[True]['latency'] / rows[False]['latency']:.2f}")


if __name__ == "__main__":
    main()
