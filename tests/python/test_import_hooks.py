"""torch_tpu/_import_hooks.py: patches for libraries that hard-code device
names apply when the library is imported, however it is first looked up."""
import importlib
import importlib.util
import sys

from torch_tpu import _import_hooks


def _package(tmp_path, monkeypatch, name):
    (tmp_path / f"{name}.py").write_text("value = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.invalidate_caches()


def test_patch_applies_on_import(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "tpu_hook_probe_a")
    seen = []
    _import_hooks.after_import("tpu_hook_probe_a", lambda m: seen.append(m.value))
    import tpu_hook_probe_a
    assert seen == [1] and tpu_hook_probe_a.value == 1


def test_patch_survives_a_find_spec_probe(tmp_path, monkeypatch):
    # Diffusers asks importlib.util.find_spec("safetensors") and drops the
    # spec before importing it: the import proper must still be patched.
    _package(tmp_path, monkeypatch, "tpu_hook_probe_b")
    seen = []
    _import_hooks.after_import("tpu_hook_probe_b", lambda m: seen.append(m.value))
    assert importlib.util.find_spec("tpu_hook_probe_b") is not None
    assert seen == []
    import tpu_hook_probe_b  # noqa: F401
    assert seen == [1]
    importlib.reload(tpu_hook_probe_b)  # applied once
    assert seen == [1]


def test_patch_of_an_imported_module_is_immediate(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "tpu_hook_probe_c")
    import tpu_hook_probe_c
    seen = []
    _import_hooks.after_import("tpu_hook_probe_c", lambda m: seen.append(m.value))
    assert seen == [tpu_hook_probe_c.value]


def test_safetensors_after_a_find_spec_probe():
    # In a fresh interpreter: the probe Diffusers makes, then safetensors
    # loads onto tpu.
    from conftest import run_python
    r = run_python(
        "import importlib.util, tempfile, os, torch, torch_tpu\n"
        "assert importlib.util.find_spec('safetensors') is not None\n"
        "import safetensors.torch as st\n"
        "path = os.path.join(tempfile.mkdtemp(), 't.safetensors')\n"
        "st.save_file({'a': torch.arange(4.)}, path)\n"
        "print(st.load_file(path, device='tpu')['a'].device)\n", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "tpu:0", r.stdout
