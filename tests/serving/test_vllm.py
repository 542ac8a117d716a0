"""vLLM's LLM on tpu through the torch_tpu platform plugin, unmodified user
code: greedy tokens equal Hugging Face generate's on the CPU. Each engine
runs in a process of its own, under a timeout."""
import json
import os
import subprocess
import sys

import pytest

from torch_tpu.vllm import models

PROMPTS = [[540, 361, 455, 280, 367, 329, 487], [12, 40, 99, 7],
           [300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310], [5]]

_RUN = """
import json, sys
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
path, prompts, kw = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
kw.setdefault("kv_cache_memory_bytes", 64 << 20)
sampling = dict(temperature=0, max_tokens=12, ignore_eos=True)
sampling.update(kw.pop("sampling", {}))
llm = LLM(model=path, dtype="float32", max_model_len=128, max_num_seqs=8,
          max_num_batched_tokens=128, **kw)
outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], SamplingParams(**sampling))
print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]))
import torch
print("STATS " + json.dumps(torch.tpu._get_cache_stats()))
if sampling.get("logprobs") is not None:
    print("LOGPROBS " + json.dumps([[lp[t].logprob for lp, t in zip(o.outputs[0].logprobs,
                                                                    o.outputs[0].token_ids)]
                                    for o in outs]))
"""


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return models.make(str(tmp_path_factory.mktemp("llama")), "llama")


def _hf_greedy(path, prompts, n=12):
    import torch
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(path)
    return [m.generate(torch.tensor([p]), max_new_tokens=n, min_new_tokens=n,
                       do_sample=False)[0, len(p):].tolist() for p in prompts]


def _script(code, tmp_path, *args, env=()):
    """|code| run with |args| in a process of its own, the engine in it."""
    env = dict(os.environ, VLLM_CACHE_ROOT=str(tmp_path / "vllm_cache"),
               VLLM_ENABLE_V1_MULTIPROCESSING="0", **dict(env))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=900)


def _run(path, prompts, tmp_path, env=(), **kw):
    return _script(_RUN, tmp_path, path, json.dumps(prompts), json.dumps(kw), env=env)


def _vllm(path, prompts, tmp_path, env=(), **kw):
    r = _run(path, prompts, tmp_path, env, **kw)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert "vLLM on tpu" in r.stdout + r.stderr  # the platform plugin was active
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("TOKENS ")]
    assert line, r.stdout[-3000:]
    return json.loads(line[-1][len("TOKENS "):]), r.stdout + r.stderr


def _stats(log):
    line = [ln for ln in log.splitlines() if ln.startswith("STATS ")]
    return json.loads(line[-1][len("STATS "):])


def _logprobs(log):
    line = [ln for ln in log.splitlines() if ln.startswith("LOGPROBS ")]
    return json.loads(line[-1][len("LOGPROBS "):])


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "compiled"])
def test_llm_greedy_tokens_equal_hf_on_the_cpu(llama, tmp_path, eager):
    # compiled: vLLM's default piecewise compile (through torch._dynamo's
    # aot_compile), each piece between attention ops a tpu program
    got, log = _vllm(llama, PROMPTS, tmp_path, enforce_eager=eager)
    assert got == _hf_greedy(llama, PROMPTS)
    assert "KV cache 0.06 GiB (kv_cache_memory_bytes)" in log, log[-3000:]
    # each layer's cache its own storage, each step's K/V scattered into it
    # in place: at least one donated cache buffer per layer and step
    assert "KV cache of 2 layers, a storage each (torch.float32)" in log, log[-3000:]
    assert _stats(log)["donated_buffers"] >= 2 * 12, _stats(log)


def test_kv_budget_follows_gpu_memory_utilization_of_free_host_memory(llama, tmp_path):
    # No kv_cache_memory_bytes: the budget is gpu_memory_utilization of the
    # host memory free at start, less weights, activations and the reserve.
    got, log = _vllm(llama, PROMPTS[:1], tmp_path, env={"TORCH_TPU_VLLM_RESERVE_GIB": "0.1"},
                     enforce_eager=True, kv_cache_memory_bytes=None,
                     gpu_memory_utilization=0.02)
    assert got == _hf_greedy(llama, PROMPTS[:1])
    assert "gpu_memory_utilization 0.02 gives this engine" in log, log[-3000:]
    assert "GiB runtime reserve" in log


def test_a_kv_budget_too_small_is_a_clear_error(llama, tmp_path):
    r = _run(llama, PROMPTS[:1], tmp_path, enforce_eager=True, kv_cache_memory_bytes=None,
             gpu_memory_utilization=0.001)
    assert r.returncode != 0
    assert "tpu: no memory left for the KV cache" in r.stderr, r.stderr[-3000:]


def test_unknown_model_path_and_a_prompt_longer_than_the_model(llama, tmp_path):
    r = _run(str(tmp_path / "no_such_model"), PROMPTS[:1], tmp_path, enforce_eager=True)
    assert r.returncode != 0 and "no_such_model" in r.stderr
    r = _run(llama, [list(range(5, 200))], tmp_path, enforce_eager=True)
    assert r.returncode != 0
    assert "maximum context length is 128 tokens" in r.stderr, r.stderr[-3000:]


@pytest.mark.parametrize("arch", ["qwen3", "mistral", "gemma3", "gpt2", "qwen3_moe"])
def test_vllms_own_model_code_gives_hf_tokens(arch, tmp_path):
    # vLLM's definitions of each family (Gemma 3: sliding-window layers;
    # Qwen3-MoE: the experts and router in PyTorch ops, torch_tpu.vllm.moe)
    path = models.make(str(tmp_path / arch), arch)
    got, _ = _vllm(path, PROMPTS, tmp_path, enforce_eager=True)
    assert got == _hf_greedy(path, PROMPTS)


def test_seeded_sampling_repeats_and_logprobs_match_hf(llama, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    seeded = dict(temperature=0.8, top_p=0.9, seed=1234)
    a, _ = _vllm(llama, PROMPTS, tmp_path, enforce_eager=True, sampling=seeded)
    b, _ = _vllm(llama, PROMPTS, tmp_path, enforce_eager=True, sampling=seeded)
    assert a == b  # the same seed, the same tokens, in another process
    assert a != _hf_greedy(llama, PROMPTS)  # and it did sample
    got, log = _vllm(llama, PROMPTS, tmp_path, enforce_eager=True, sampling={"logprobs": 1})
    m = AutoModelForCausalLM.from_pretrained(llama)
    for p, toks, lps in zip(PROMPTS, got, _logprobs(log)):
        ids = torch.tensor([p + toks])
        with torch.no_grad():
            logp = m(ids).logits[0].log_softmax(-1)
        want = [logp[len(p) - 1 + i, t].item() for i, t in enumerate(toks)]
        # float32 end to end: the same sums in another order
        torch.testing.assert_close(torch.tensor(lps), torch.tensor(want), rtol=1e-4, atol=1e-4)


_TP = """
import json, sys
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt


def main():
    path, prompts = sys.argv[1], json.loads(sys.argv[2])
    llm = LLM(model=path, dtype="float32", max_model_len=128, max_num_seqs=8,
              max_num_batched_tokens=128, enforce_eager=True, kv_cache_memory_bytes=64 << 20,
              tensor_parallel_size=2)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts],
                        SamplingParams(temperature=0, max_tokens=12, ignore_eos=True))
    print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]))


if __name__ == "__main__":  # workers are spawned
    main()
"""


def test_tensor_parallel_2_over_tpu_dist_gives_the_hf_tokens(llama, tmp_path):
    # two spawned worker processes, one tpu device each, collectives on tpu_dist
    script = tmp_path / "tp.py"
    script.write_text(_TP)
    env = dict(os.environ, VLLM_CACHE_ROOT=str(tmp_path / "vllm_cache"))
    r = subprocess.run([sys.executable, str(script), llama, json.dumps(PROMPTS)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("TOKENS ")]
    assert json.loads(line[-1][len("TOKENS "):]) == _hf_greedy(llama, PROMPTS)
    assert "world_size=2" in r.stdout + r.stderr


_VARY = """
import json, sys
import torch
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
path, batches = sys.argv[1], json.loads(sys.argv[2])
llm = LLM(model=path, dtype="float32", max_model_len=128, max_num_seqs=8,
          max_num_batched_tokens=2048, kv_cache_memory_bytes=64 << 20)
for prompts in batches:
    before = torch.tpu._get_cache_stats()
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts],
                        SamplingParams(temperature=0, max_tokens=9, ignore_eos=True))
    after = torch.tpu._get_cache_stats()
    print("STEP " + json.dumps({k: after[k] - before[k] for k in
                                ("compiles", "compiled_programs", "compiled_recompiles",
                                 "compiled_bucketed", "compiled_specializations")}))
"""


def test_compiled_model_never_recompiles_after_warm_up(llama, tmp_path):
    # token counts padded to buckets, every bucket compiled at start: batches
    # of other sizes and lengths run the same compiled programs
    batches = [PROMPTS, [[7] * 40, [9, 8, 7], [100 + i for i in range(61)]], [[3] * 2] * 6]
    r = _script(_VARY, tmp_path, llama, json.dumps(batches))
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    # 9 buckets: more than the compile backend keeps per graph by default
    assert "model warmed up for 9 token counts (8, 16, 32, 64, 128, 256, 512, 1024, 2048)" \
        in r.stdout + r.stderr
    steps = [json.loads(ln[5:]) for ln in r.stdout.splitlines() if ln.startswith("STEP ")]
    assert len(steps) == 3
    for s in steps:  # (the runner's own eager input preparation still compiles: "compiles")
        assert all(v == 0 for k, v in s.items() if k.startswith("compiled_")), steps


_SOAK = """
import gc, json, sys
import psutil
import torch
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
path = sys.argv[1]
llm = LLM(model=path, dtype="float32", max_model_len=128, max_num_seqs=32,
          max_num_batched_tokens=256, enforce_eager=True, kv_cache_memory_bytes=64 << 20)
sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
for wave in range(40):  # 32 requests of 4, 8 or 16 tokens each
    prompts = [[5 + (i * 7 + k) % 600 for k in range(3 + (5 + 8 * (i % 3)) % 20)]
               for i in range(wave * 32, wave * 32 + 32)]
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp, use_tqdm=False)
    assert all(len(o.outputs[0].token_ids) == 4 for o in outs)
    if wave % 8 == 7:
        gc.collect()
        st = torch.tpu._get_cache_stats()
        print("WAVE " + json.dumps([wave, psutil.Process().memory_info().rss,
                                    torch.tpu.memory_allocated(), st["cached_executables"]]))
"""


def test_engine_memory_is_flat_over_1280_requests(llama, tmp_path):
    # the same 32-request batches again and again: after the first waves the
    # engine's memory (host and device) and its executables stay as they are
    r = _script(_SOAK, tmp_path, llama)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    waves = [json.loads(ln[5:]) for ln in r.stdout.splitlines() if ln.startswith("WAVE ")]
    assert len(waves) == 5
    (_, rss0, dev0, exe0), (_, rss1, dev1, exe1) = waves[0], waves[-1]
    # 16 MiB of allocator noise in a ~900 MiB process over 1,024 requests;
    # a leak of 16 KB per request exceeds it
    assert rss1 - rss0 < 16 << 20, waves
    assert abs(dev1 - dev0) < 1 << 16, waves  # (a few scalars come and go)
    assert exe1 - exe0 <= 16, waves  # (a rare batch shape may still appear)
