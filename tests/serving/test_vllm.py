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
llm = LLM(model=path, dtype="float32", max_model_len=128, max_num_seqs=8,
          max_num_batched_tokens=128, gpu_memory_utilization=0.05, **kw)
sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp)
print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]))
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


def _vllm(path, prompts, tmp_path, **kw):
    env = dict(os.environ, VLLM_CACHE_ROOT=str(tmp_path / "vllm_cache"),
               VLLM_ENABLE_V1_MULTIPROCESSING="0")
    r = subprocess.run([sys.executable, "-c", _RUN, path, json.dumps(prompts), json.dumps(kw)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert "vLLM on tpu" in r.stdout + r.stderr  # the platform plugin was active
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("TOKENS ")]
    assert line, r.stdout[-3000:]
    return json.loads(line[-1][len("TOKENS "):]), r.stdout + r.stderr


def test_llm_greedy_tokens_equal_hf_on_the_cpu_eager(llama, tmp_path):
    got, log = _vllm(llama, PROMPTS, tmp_path, enforce_eager=True)
    assert got == _hf_greedy(llama, PROMPTS)
    assert "KV cache" in log  # the budget the worker chose is logged
