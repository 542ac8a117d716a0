import os
import subprocess
import sys

import pytest
import torch

import torch_tpu  # noqa: F401  (explicit, so the suite also runs with autoload off)


def pytest_configure(config):
    # The whole suite is about the device: it must be there.
    if not torch.tpu.is_available():
        torch.tpu.init()  # raises with the reason


@pytest.fixture
def no_fallback(monkeypatch):
    """Ops without a tpu lowering raise instead of running on the CPU, so a
    passing op test proves the op is native (modules opt in with
    ``pytestmark = pytest.mark.usefixtures("no_fallback")``)."""
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")


@pytest.fixture
def tpu():
    return torch.device("tpu")


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches reset around the test (compiled-graph tests count
    their own graphs and programs)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def paths(monkeypatch):
    """Counts the compiled graphs each path of the tpu backend took in the
    test: AOTAutograd, ours (graphs; training_graphs: those with a backward)
    and ours sent back to AOTAutograd (fallbacks)."""
    import torch_tpu._compile as C

    seen = {"aot": 0}
    real = C._aot_compile

    def spy(gm, inputs):
        seen["aot"] += 1
        return real(gm, inputs)

    monkeypatch.setattr(C, "_aot_compile", spy)
    before = C.stats()

    def taken():
        now = C.stats()
        return {"aot": seen["aot"],
                **{k: now[f"compiled_direct_{k}"] - before[f"compiled_direct_{k}"]
                   for k in ("graphs", "training_graphs", "fallbacks")}}

    return taken


def run_python(code, env=None, timeout=120):
    """Runs |code| in a fresh interpreter; returns the CompletedProcess."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=e, timeout=timeout)


def run_coverage(args, json_path, key, timeout=900):
    """Runs ``python -m torch_tpu.coverage *args`` writing |json_path|;
    returns (CompletedProcess, {entry name: its result}), entries named by
    the records' |key| ("op", "module")."""
    proc = subprocess.run([sys.executable, "-m", "torch_tpu.coverage", *args, "--json",
                           str(json_path)], capture_output=True, text=True, timeout=timeout)
    results = {}
    if os.path.exists(json_path):
        import json
        with open(json_path) as f:
            for line in f:
                rec = json.loads(line)
                if key in rec:
                    results[rec[key]] = rec["result"]
    return proc, results
