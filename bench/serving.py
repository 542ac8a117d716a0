"""Serving throughput on tpu: vLLM (torch_tpu.vllm) against Hugging Face
generate one request at a time, and vLLM compiled against eager, on the same
small random-weight Llama (torch_tpu.vllm.models), 16 requests of 128 prompt
and 128 output tokens, greedy. Each configuration runs in a process of its
own, twice; the second (warm: executables cached) run is reported, and the
ratios are of figures from this one run. Then, in the same vLLM processes,
time to first token and inter-token latency (medians over requests) with 1
and with 16 requests in flight; at 16 the inter-token latency is the decode
step's time, which compiled and eager are compared on.

    python bench/serving.py            # in the serving environment (./setup.sh --serving)
"""
import json
import os
import subprocess
import sys
import tempfile
import time

N_REQ, PROMPT, OUTPUT = 16, 128, 128

_VLLM = """
import json, statistics, sys, time
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
from vllm.sampling_params import RequestOutputKind


def latency(llm, prompts, in_flight, sp):
    # median time to first token and inter-token latency (s), |in_flight|
    # requests at a time, each batch submitted at once
    # (every step's output: LLM.generate leaves its params at FINAL_ONLY)
    sp = sp.clone()
    sp.output_kind = RequestOutputKind.CUMULATIVE
    eng, ttft, itl = llm.llm_engine, [], []
    for i in range(0, len(prompts), in_flight):
        t0, seen, last = time.perf_counter(), {}, {}
        for j, p in enumerate(prompts[i:i + in_flight]):
            eng.add_request(f"lat{in_flight}-{i + j}", TokensPrompt(prompt_token_ids=p), sp)
        while eng.has_unfinished_requests():
            outs = eng.step()
            now = time.perf_counter()
            for o in outs:
                n, k = len(o.outputs[0].token_ids), o.request_id
                if n and k not in seen:
                    ttft.append(now - t0)
                elif n > seen.get(k, n):
                    itl.append((now - last[k]) / (n - seen[k]))
                if n:
                    seen[k], last[k] = n, now
    return statistics.median(ttft), statistics.median(itl)


def main():
    path, prompts, eager = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "eager"
    llm = LLM(model=path, dtype="float32", max_model_len=512, max_num_seqs=16,
              max_num_batched_tokens=2048, enforce_eager=eager, kv_cache_memory_bytes=256 << 20)
    sp = SamplingParams(temperature=0, max_tokens=%d, ignore_eos=True)
    times = []
    for _ in range(2):
        t = time.perf_counter()
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp)
        times.append(time.perf_counter() - t)
    lat = {}
    for c, reqs in ((1, prompts[:4]), (16, prompts)):
        lat[f"ttft_{c}"], lat[f"itl_{c}"] = latency(llm, reqs, c, sp)
    print("RESULT " + json.dumps({"seconds": times, **lat,
                                  "tokens": sum(len(o.outputs[0].token_ids) for o in outs)}))


if __name__ == "__main__":
    main()
""" % OUTPUT

_HF = """
import json, sys, time
import torch
from transformers import AutoModelForCausalLM
path, prompts = sys.argv[1], json.loads(sys.argv[2])
m = AutoModelForCausalLM.from_pretrained(path).to("tpu").eval()
times = []
for _ in range(2):
    t = time.perf_counter()
    n = 0
    for p in prompts:
        with torch.no_grad():
            out = m.generate(torch.tensor([p], device="tpu"), max_new_tokens=%d,
                             min_new_tokens=%d, do_sample=False)
        n += out.shape[1] - len(p)
    times.append(time.perf_counter() - t)
print("RESULT " + json.dumps({"seconds": times, "tokens": n}))
""" % (OUTPUT, OUTPUT)


def run(code, *args, timeout=3600):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    t = time.perf_counter()
    # (the engine in this process, so that its steps can be timed)
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    r = subprocess.run([sys.executable, f.name, *args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    os.unlink(f.name)
    if r.returncode != 0:
        sys.exit(f"failed:\n{(r.stdout + r.stderr)[-4000:]}")
    out = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    out["process_seconds"] = time.perf_counter() - t
    return out


def main():
    import random

    from torch_tpu import plugins
    from torch_tpu.vllm import models

    path = models.make(tempfile.mkdtemp(prefix="bench_llama_"), "llama")
    rng = random.Random(0)
    prompts = [[rng.randrange(5, 600) for _ in range(PROMPT)] for _ in range(N_REQ)]
    res = {"vllm compiled": run(_VLLM, path, json.dumps(prompts), "compiled"),
           "vllm eager": run(_VLLM, path, json.dumps(prompts), "eager"),
           "hf generate, one at a time": run(_HF, path, json.dumps(prompts))}
    import torch

    plugin = plugins.describe(torch.tpu.get_device_properties(0).plugin)
    print(f"plugin: {plugin}; {N_REQ} requests x ({PROMPT} prompt + {OUTPUT} output tokens)")
    print("| configuration | first run s | warm run s | output tokens/s (warm) |")
    print("|---|---|---|---|")
    for k, v in res.items():
        print(f"| {k} | {v['seconds'][0]:.1f} | {v['seconds'][1]:.1f} | "
              f"{v['tokens'] / v['seconds'][1]:.1f} |")
    warm = {k: v["seconds"][1] for k, v in res.items()}
    print(f"vLLM compiled vs HF generate one at a time: "
          f"{warm['hf generate, one at a time'] / warm['vllm compiled']:.2f}x (target >= 5x)")
    print(f"vLLM compiled vs eager, whole run: {warm['vllm eager'] / warm['vllm compiled']:.2f}x")
    print("| configuration | TTFT 1 req ms | ITL 1 req ms | TTFT 16 req ms | ITL 16 req ms |")
    print("|---|---|---|---|---|")
    for k in ("vllm compiled", "vllm eager"):
        v = res[k]
        print(f"| {k} | {1e3 * v['ttft_1']:.1f} | {1e3 * v['itl_1']:.1f} | "
              f"{1e3 * v['ttft_16']:.1f} | {1e3 * v['itl_16']:.1f} |")
    print(f"vLLM compiled vs eager, decode step (ITL at 16 requests): "
          f"{res['vllm eager']['itl_16'] / res['vllm compiled']['itl_16']:.2f}x (target >= 2x)")


if __name__ == "__main__":
    main()
