"""Keeps shared (tied) parameters shared when a module moves to ``tpu``.

``Module._apply`` swaps tensors in place only when PyTorch deems the old and
new tensor types shallow-copy compatible, which its dense-backend list grants
to CUDA but not to out-of-tree devices. Otherwise it wraps each module's
converted tensor in a new ``Parameter``, so a weight shared by two modules
(tied embeddings) would become two independent parameters. After the
conversion, parameters that were one object before are made one again."""
import threading

import torch
from torch import nn

_state = threading.local()
_original_apply = nn.Module._apply


def _params(root):
    return [(m, name, p) for m in root.modules() for name, p in m._parameters.items()
            if p is not None]


def _apply(self, fn, recurse=True):
    if getattr(_state, "depth", 0) or not recurse:
        return _original_apply(self, fn, recurse)
    before = _params(self)
    _state.depth = 1
    try:
        result = _original_apply(self, fn, recurse)
    finally:
        _state.depth = 0
    first = {}
    for module, name, old in before:
        new = module._parameters.get(name)
        keep = first.setdefault(id(old), new)
        if new is not keep and new is not None and new.device.type == "tpu":
            module._parameters[name] = keep
    return result


def install():
    if nn.Module._apply is not _apply:
        nn.Module._apply = _apply
