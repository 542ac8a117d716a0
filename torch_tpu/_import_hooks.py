"""Patches applied right after a module is imported (at once if it already
is): the compile backend waits for torch._dynamo (importing it here would
add a second to ``import torch``), and the wrappers for libraries that
hard-code device names wait for those libraries. Nothing on disk changes."""
import importlib.abc
import importlib.machinery
import sys

_pending = {}  # module name -> [patch(module)]
_before = {}  # module name -> [prepare()]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        for prepare in _before.pop(name, ()):
            prepare()
        if not _pending.get(name):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        # The patches stay pending until a module runs: libraries probe with
        # importlib.util.find_spec and drop the spec (Diffusers does, for
        # safetensors), and the import proper asks again.
        def exec_module(module):
            run(module)
            for patch in _pending.pop(name, ()):
                patch(module)

        spec.loader.exec_module = exec_module
        return spec


def _install_finder():
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def before_import(name, prepare):
    """Calls prepare() once, just before the module |name| is first imported
    (never if it already is)."""
    if name not in sys.modules:
        _before.setdefault(name, []).append(prepare)
        _install_finder()


def after_import(name, patch):
    """Calls patch(module) once the module |name| is imported."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    _pending.setdefault(name, []).append(patch)
    _install_finder()
