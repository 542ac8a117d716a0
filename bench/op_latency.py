"""Per-op latency of small ops on tpu (warm executable cache) vs PyTorch's
native CPU path, in the same run.

    python bench/op_latency.py [--size 16] [--reps 15] [--inner 2000]

'async' is the cost per op when ops are queued back to back (the device
works while the host issues the next op), measured until a synchronize;
'sync' waits for each op's result (a host read of a 1-element view);
'fused' records the ops in fused eager mode and runs the recorded graph at
the synchronize (the executable is cached after the first repetition)."""
import argparse
import os
import sys

import torch

import torch_tpu

sys.path.insert(0, os.path.dirname(__file__))
from common import fmt_us, median_time  # noqa: E402


def jax_reference(args):
    """Per-op time of the same ops under jax.jit on JAX's CPU backend, if
    JAX is installed (dispatch until block_until_ready, like 'tpu async')."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    fns = {"add": jax.jit(lambda a, b: a + b), "mul": jax.jit(lambda a, b: a * b),
           "relu": jax.jit(lambda a, b: jnp.maximum(a, 0))}
    a = jnp.ones(args.size, jnp.float32)
    b = jnp.ones(args.size, jnp.float32)
    out = {}
    for name, f in fns.items():
        def loop():
            r = None
            for _ in range(args.inner):
                r = f(a, b)
            r.block_until_ready()
        out[name] = median_time(loop, reps=args.reps) / args.inner
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--inner", type=int, default=2000)
    args = ap.parse_args()
    ops = {
        "add": lambda a, b: torch.add(a, b),
        "mul": lambda a, b: torch.mul(a, b),
        "relu": lambda a, b: torch.relu(a),
        "add_ (in-place)": lambda a, b: a.add_(b),
    }
    jax_ops = jax_reference(args)
    print(f"tensor size {args.size} float32; median of {args.reps} runs x {args.inner} ops")
    print(f"{'op':18s} {'cpu':>12s} {'tpu async':>12s} {'ratio':>7s} {'tpu sync':>12s} {'ratio':>7s}"
          f" {'tpu fused':>12s} {'ratio':>7s}"
          + (f" {'jax jit':>12s}" if jax_ops else ""))
    for name, op in ops.items():
        res = {}
        for mode in ("cpu", "tpu", "fused"):
            dev = "cpu" if mode == "cpu" else "tpu"
            a = torch.randn(args.size, device=dev)
            b = torch.randn(args.size, device=dev)
            if mode == "fused":
                with torch_tpu.execution_mode("fused"):
                    def loop():
                        for _ in range(args.inner):
                            op(a, b)
                        torch.tpu.synchronize()
                    res["fused"] = median_time(loop, reps=args.reps) / args.inner
                continue

            def loop():
                for _ in range(args.inner):
                    op(a, b)
                if dev == "tpu":
                    torch.tpu.synchronize()
            res[dev] = median_time(loop, reps=args.reps) / args.inner
            if dev == "tpu":
                def one():
                    op(a, b)
                    a[0].item()
                res["sync"] = median_time(one, reps=args.reps, inner=200)
        print(f"{name:18s} {fmt_us(res['cpu'])} {fmt_us(res['tpu'])} {res['tpu'] / res['cpu']:6.1f}x "
              f"{fmt_us(res['sync'])} {res['sync'] / res['cpu']:6.1f}x "
              f"{fmt_us(res['fused'])} {res['fused'] / res['cpu']:6.1f}x"
              + (f" {fmt_us(jax_ops[name])}" if jax_ops and name in jax_ops else ""))


if __name__ == "__main__":
    main()
