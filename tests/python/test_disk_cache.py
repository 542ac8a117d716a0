"""The persistent executable cache: a second process starts warm; damaged,
foreign or unwritable caches degrade safely; concurrent writers never
corrupt it; a size bound evicts old entries."""
import os
import subprocess
import sys
import time

import pytest

CODE = """
import torch
x = torch.arange(12.0, device='tpu').reshape(3, 4)
y = ((x @ x.t()).relu() + 1).sum()
assert y.item() == {expected}
torch.tpu.wait_for_compiles()  # the full code reaches the disk in the background
s = torch.tpu._get_cache_stats()
print('STATS', s['compiles'], s['disk_hits'], s['disk_writes'], s['disk_corrupt'], s['disk_evictions'])
"""
EXPECTED = float(((__import__("torch").arange(12.0).reshape(3, 4) @
                   __import__("torch").arange(12.0).reshape(3, 4).t()).relu() + 1).sum())


def run(cache, extra_env=None):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache))
    env.update(extra_env or {})
    r = subprocess.run([sys.executable, "-c", CODE.format(expected=EXPECTED)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if l.startswith("STATS")][0]
    compiles, hits, writes, corrupt, evictions = map(int, line.split()[1:])
    return dict(compiles=compiles, hits=hits, writes=writes, corrupt=corrupt,
                evictions=evictions, stderr=r.stderr)


def entries(cache):
    return [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs if f.endswith(".xla")]


def test_second_process_starts_warm(tmp_path):
    cold = run(tmp_path)
    assert cold["compiles"] > 0 and cold["writes"] == cold["compiles"]
    warm = run(tmp_path)
    assert warm["compiles"] == 0 and warm["hits"] == cold["writes"]


def test_other_xla_flags_compile_their_own(tmp_path):
    # The plugin's compiler flags shape the code: another XLA_FLAGS setting
    # must not load executables compiled under this one.
    flags = {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    run(tmp_path)
    other = run(tmp_path, flags)
    assert other["hits"] == 0 and other["compiles"] > 0
    again = run(tmp_path, flags)
    assert again["compiles"] == 0 and again["hits"] == other["writes"]
    assert len({os.path.dirname(e) for e in entries(tmp_path)}) == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_damaged_entries_are_recompiled_not_trusted(tmp_path, damage):
    run(tmp_path)
    for path in entries(tmp_path):
        data = bytearray(open(path, "rb").read())
        if damage == "truncate":
            data = data[: len(data) // 2]
        elif damage == "flip":
            data[len(data) // 2] ^= 0xFF
        else:
            data = b"not an executable" * 10
        open(path, "wb").write(bytes(data))
    r = run(tmp_path)
    assert r["corrupt"] == len(entries(tmp_path)) and r["compiles"] == r["corrupt"]
    assert run(tmp_path)["compiles"] == 0  # rewritten and good again


def test_unusable_folder_degrades_to_memory_with_one_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    r = run(blocker / "cache")
    assert r["compiles"] > 0
    assert r["stderr"].count("compilation cache") == 1


def test_concurrent_writers_do_not_corrupt(tmp_path):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", CODE.format(expected=EXPECTED)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert not [f for d, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".tmp")]
    r = run(tmp_path)
    assert r["corrupt"] == 0 and r["compiles"] == 0


def test_size_bound_evicts_oldest(tmp_path):
    full = run(tmp_path)
    sizes = sorted(os.path.getsize(p) for p in entries(tmp_path))
    for p in entries(tmp_path):
        os.remove(p)
    bound = sizes[-1] + sizes[0]  # room for about two entries
    r = run(tmp_path, {"TORCH_TPU_CACHE_MAX_BYTES": str(bound)})
    assert r["evictions"] >= full["writes"] - 2
    assert sum(os.path.getsize(p) for p in entries(tmp_path)) <= bound
