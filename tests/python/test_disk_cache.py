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


# -- a cache others can write is never loaded from ------------------------------------

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="hands folders to another user "
                             "with chown (CI runs as root)")
NOBODY = 65534


def refused(result):
    return ("not using the compilation cache" in result["stderr"] and result["hits"] == 0
            and result["writes"] == 0)


@as_root
def test_foreign_world_writable_root_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chown(root, NOBODY, NOBODY)
    os.chmod(root, 0o777)
    r = run(root)
    assert refused(r) and "another user owns it" in r["stderr"], r["stderr"]
    assert os.listdir(root) in ([], [os.listdir(root)[0]])  # at most the plugin folder, empty
    assert entries(root) == []


def test_group_or_world_writable_root_is_refused(tmp_path):
    root = tmp_path / "open"
    root.mkdir()
    os.chmod(root, 0o777)
    r = run(root)
    assert refused(r) and "other users can write it" in r["stderr"], r["stderr"]


@as_root
def test_foreign_or_open_ancestor_is_refused_sticky_one_is_not(tmp_path):
    parent = tmp_path / "parent"
    parent.mkdir()
    os.chown(parent, NOBODY, NOBODY)
    r = run(parent / "cache")
    assert refused(r) and "another user owns a folder above it" in r["stderr"], r["stderr"]
    os.chown(parent, 0, 0)
    os.chmod(parent, 0o777)
    assert refused(run(parent / "cache2"))
    os.chmod(parent, 0o1777)  # as /tmp and /dev/shm
    r = run(parent / "cache3")
    assert r["writes"] > 0, r["stderr"]


def test_folders_are_private_and_entries_owner_only(tmp_path):
    root = tmp_path / "fresh"
    r = run(root)
    assert r["writes"] > 0
    for d, dirs, _ in os.walk(root):
        for name in dirs:
            assert os.stat(os.path.join(d, name)).st_mode & 0o777 == 0o700
    assert os.stat(root).st_mode & 0o777 == 0o700
    for e in entries(root):
        assert os.stat(e).st_mode & 0o777 == 0o600


def test_symlinked_plugin_folder_is_refused(tmp_path):
    root = tmp_path / "c"
    run(root)
    (plugin_dir,) = os.listdir(root)
    elsewhere = tmp_path / "elsewhere"
    os.rename(root / plugin_dir, elsewhere)
    os.symlink(elsewhere, root / plugin_dir)
    r = run(root)
    assert refused(r) and "symbolic link" in r["stderr"], r["stderr"]


@as_root
def test_foreign_entry_is_not_loaded(tmp_path):
    first = run(tmp_path)
    for e in entries(tmp_path):
        os.chown(e, NOBODY, NOBODY)
    again = run(tmp_path)
    assert again["hits"] == 0 and again["corrupt"] == first["writes"]
    assert again["compiles"] == first["compiles"]


def test_symlinked_entry_is_not_followed(tmp_path):
    first = run(tmp_path)
    (e, *rest) = entries(tmp_path)
    target = tmp_path / "target.xla"
    os.rename(e, target)
    os.symlink(target, e)
    again = run(tmp_path)
    assert again["hits"] == first["writes"] - 1 and again["compiles"] == 1
    assert os.path.exists(target)  # the link is dropped, never what it points to


@as_root
def test_foreign_compiled_graph_folder_is_refused(tmp_path):
    code = ("import torch, torch_tpu\n"
            "f = torch.compile(lambda a: (a * 2).sum(), backend='tpu')\n"
            "f(torch.ones(4, device='tpu')).cpu()\n"
            "s = torch.tpu._get_cache_stats()\n"
            "print('STATS', s['compiled_cache_stores'], s['disk_writes'])\n")
    top = tmp_path / "torch_compile"
    top.mkdir(mode=0o700)
    os.chown(top, NOBODY, NOBODY)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path)), timeout=300)
    assert r.returncode == 0, r.stderr
    stores, writes = map(int, [ln for ln in r.stdout.splitlines()
                               if ln.startswith("STATS")][0].split()[1:])
    assert stores == 0 and writes > 0, r.stdout
    assert "not caching compiled graphs" in r.stderr and "another user owns it" in r.stderr


def test_tier2_name_lives_in_a_per_user_folder(tmp_path):
    name = f"t{os.getpid()}_{time.time_ns()}"
    code = ("import torch\nx = torch.ones(3, device='tpu') + 1\nx.cpu()\n"
            "print('DIR', torch.tpu._get_cache_stats()['disk_cache_dir'])\n")
    env = dict(os.environ, TORCH_TPU_TIER2_COMPILATION_CACHE=name)
    env.pop("TORCH_TPU_CACHE_DIR", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("DIR")]
    user_dir = f"/dev/shm/torch_tpu_cache-{os.geteuid()}"
    assert line.split()[1].startswith(f"{user_dir}/{name}/")
    assert os.stat(user_dir).st_mode & 0o777 == 0o700
    import shutil
    shutil.rmtree(f"{user_dir}/{name}")
