"""Greedy generate() of a small random Llama with a KV cache, in one run:
PyTorch's CPU eager, tpu strict eager, and tpu with a compiled forward
(shape buckets, and one program per exact length for comparison). Each tpu
setup runs in a fresh process on an empty cache folder: the first generate
(cold: compiles included) and the median of the next --reps (warm), as
tokens/s, with the programs the compiled forward built.

    python bench/generate_compile.py [--new 64] [--prompt 16] [--reps 3]
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
from common import child_result  # noqa: E402

SETUPS = {
    "cpu eager": {},
    "tpu strict eager": {},
    "tpu compiled, buckets": {},
    "tpu compiled, exact lengths": {"TORCH_TPU_COMPILE_BUCKETS": "0"},
}


def child(args):
    import transformers

    setup = args.child
    device = "cpu" if setup.startswith("cpu") else "tpu"
    if device == "tpu":
        import torch_tpu  # noqa: F401
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512,
                                   num_hidden_layers=4, num_attention_heads=8,
                                   num_key_value_heads=4, max_position_embeddings=512)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval().to(device)
    if "compiled" in setup:
        model.forward = torch.compile(model.forward, backend="tpu")
    ids = torch.randint(0, 512, (1, args.prompt)).to(device)

    def generate():
        t0 = time.perf_counter()
        out = model.generate(ids, max_new_tokens=args.new, min_new_tokens=args.new,
                             do_sample=False)
        out.cpu()
        return time.perf_counter() - t0, out

    cold, out = generate()
    if device == "tpu":
        torch.tpu.wait_for_compiles()  # the steady state: fully optimised code
    warm = statistics.median(generate()[0] for _ in range(args.reps))
    res = {"cold_s": cold, "warm_s": warm, "tokens": out[0].tolist()}
    if device == "tpu":
        st = torch.tpu._get_cache_stats()
        res.update(programs=st["compiled_programs"], bucketed=st["compiled_bucketed"],
                   exact=st["compiled_specializations"], eager_compiles=st["compiles"])
    print("RESULT " + json.dumps(res))


def run(setup, args):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache, **SETUPS[setup])
        return child_result([sys.executable, __file__, "--child", setup, "--new", str(args.new),
                             "--prompt", str(args.prompt), "--reps", str(args.reps)],
                            env, timeout=3600)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--child")
    args = p.parse_args()
    if args.child:
        return child(args)
    res = {s: run(s, args) for s in SETUPS}
    ref = res["cpu eager"]
    print(f"Llama 4x256, prompt {args.prompt}, {args.new} new tokens, greedy; "
          f"warm = median of {args.reps}")
    print(f"{'setup':30s} {'cold s':>8s} {'warm tok/s':>11s} {'vs cpu':>7s} "
          f"{'programs':>9s} {'same tokens':>12s}")
    for s, r in res.items():
        tps = args.new / r["warm_s"]
        progs = f"{r['programs']}" if "programs" in r else "-"
        print(f"{s:30s} {r['cold_s']:8.2f} {tps:11.1f} {ref['warm_s'] / r['warm_s']:6.2f}x "
              f"{progs:>9s} {str(r['tokens'] == ref['tokens']):>12s}")


if __name__ == "__main__":
    main()
