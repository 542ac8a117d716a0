"""The model-zoo harness: its CI slice runs clean, and a crash or a hang in one
item does not end a run."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from torch_tpu import _isolate

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_zoo_fast_slice(tmp_path, compiled):
    """The CI slice, eagerly and through torch.compile(backend="tpu") (where
    every architecture must have compiled graphs, not run eagerly)."""
    from torch_tpu import zoo
    out = tmp_path / "zoo.json"
    md = tmp_path / "zoo.md"
    proc = subprocess.run([sys.executable, "-m", "torch_tpu.zoo", "--fast", "--timeout", "240",
                           "--json", str(out), "--markdown", str(md)] +
                          (["--compile"] if compiled else []),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {}
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        if "done" in rec:
            results[rec["arch"]] = rec["result"]
    assert set(results) == set(zoo.FAST_ARCHS)
    bad = {k: (r["status"], r.get("reason")) for k, r in results.items() if r["status"] != "match"}
    assert not bad
    lm = {k: r["backward"]["status"] for k, r in results.items() if "backward" in r}
    assert "LlamaForCausalLM" in lm and "GPT2LMHeadModel" in lm
    assert set(lm.values()) == {"match"}, lm
    t = zoo.totals(results)
    assert t["match_pct"] == 100.0 and t["causal_backward_pct"] == 100.0
    assert "matched the CPU" in md.read_text()
    if compiled:
        assert all(r["compiled_graphs"] > 0 for r in results.values()), results


def test_zoo_rejects_unknown_architecture():
    proc = subprocess.run([sys.executable, "-m", "torch_tpu.zoo", "--archs", "NoSuchModel"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "NoSuchModel" in proc.stderr


def test_isolation_survives_crash_and_hang(tmp_path):
    # item 1 aborts the worker, item 3 hangs: both are recorded, the rest run
    worker = tmp_path / "w.py"
    worker.write_text(textwrap.dedent("""
        import json, os, sys, time
        start, end, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
        for i in range(start, end):
            with open(path, "a") as f:
                f.write(json.dumps({"begin": i}) + "\\n")
            if i == 1:
                os.abort()
            if i == 3:
                time.sleep(60)
            with open(path, "a") as f:
                f.write(json.dumps({"done": i, "ok": True}) + "\\n")
    """))
    result = str(tmp_path / "r.jsonl")
    starts = []

    def command(start, end):
        starts.append((start, end))
        return [sys.executable, str(worker), str(start), str(end), result]

    for chunk in (None, 2):
        starts.clear()
        done = _isolate.run(command, 5, result, timeout=2, chunk=chunk,
                            lost=lambda i, why: {"ok": False, "why": why})
        by = {r["done"]: r for r in done}
        assert sorted(by) == [0, 1, 2, 3, 4]
        assert by[1]["ok"] is False and "crashed" in by[1]["why"]
        assert by[3]["ok"] is False and by[3]["why"] == "hung"
        assert all(by[i]["ok"] for i in (0, 2, 4))
        assert os.path.exists(result)
    assert starts == [(0, 2), (2, 4), (4, 5)]  # a fresh worker per chunk, resuming after losses


def test_isolation_progress_and_chosen_items(tmp_path):
    # A worker written with _isolate.work: item 2 takes longer than the
    # timeout but reports progress, so it is not taken for hung; with |only|,
    # workers start only for ranges holding chosen items.
    worker = tmp_path / "w.py"
    worker.write_text(textwrap.dedent("""
        import importlib.util, sys, time
        spec = importlib.util.spec_from_file_location("iso", sys.argv[4])  # stdlib only
        _isolate = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_isolate)
        start, end, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

        def fn(i, progress):
            for _ in range(8 if i == 2 else 0):
                time.sleep(0.5)
                progress()
            return {"ok": True}

        _isolate.work(path, [(i, i) for i in range(start, end)], fn)
    """))
    result = str(tmp_path / "r.jsonl")
    starts = []

    def command(start, end):
        starts.append((start, end))
        return [sys.executable, str(worker), str(start), str(end), result, _isolate.__file__]

    done = _isolate.run(command, 6, result, timeout=2, chunk=2, only=[2, 3, 5],
                        lost=lambda i, why: {"ok": False, "why": why})
    assert starts == [(2, 4), (5, 6)]
    assert {r["done"]: r["ok"] for r in done} == {2: True, 3: True, 5: True}


def test_compiled_reference_is_the_cpu_under_dynamo_only_when_that_agrees():
    """A model that computes otherwise when compiled is compared with the CPU
    under torch.compile(backend="eager"); a wrong result still fails."""
    import torch
    from torch_tpu.zoo.harness import _matches_cpu_under_dynamo

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x * 2 if torch.compiler.is_compiling() else x * 3

    x = torch.randn(4)
    got = torch.compile(Branchy(), backend="tpu")(x.to("tpu")).cpu()
    assert torch.equal(got, x * 2)
    assert _matches_cpu_under_dynamo(Branchy(), {"x": x}, got)
    assert not _matches_cpu_under_dynamo(Branchy(), {"x": x}, got + 1)


def test_compiled_crash_the_cpu_shares_under_dynamo_is_not_ours():
    """A model that fails under Dynamo on the CPU too (Dynamo cannot trace
    it) is reported with that error; one that runs there gives None."""
    import torch
    from torch_tpu.zoo.harness import _cpu_under_dynamo_error

    class Untraceable(torch.nn.Module):
        def forward(self, x):
            if torch.compiler.is_compiling():
                return x @ torch.ones(3, 3)  # Dynamo's fake tensors refuse it
            return x

    assert "same reduction dim" in _cpu_under_dynamo_error(Untraceable(), {"x": torch.ones(2)})
    assert _cpu_under_dynamo_error(torch.nn.Identity(), {"input": torch.ones(2)}) is None
