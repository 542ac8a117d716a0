"""torch_tpu: PyTorch on a device called ``tpu``, computing through XLA.

``import torch`` loads this package through the ``torch.backends`` entry
point (``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off), so
``torch.randn(3, device="tpu")`` works without importing anything else.
The PJRT plugin (XLA's CPU plugin by default; CUDA or libtpu where present)
is loaded lazily, at the first use of the device.
"""
import os
import site
import sys

import torch

__all__ = ["tpu_device", "set_execution_mode"]


def _check_no_other_privateuse1_backend():
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "tpu"):
        raise RuntimeError(
            f"torch_tpu cannot load: another out-of-tree device backend already "
            f"registered PyTorch's PrivateUse1 slot as '{name}'. PyTorch supports one "
            f"such backend per process; uninstall or stop importing the other one.")
    if name == "tpu" and "torch_tpu._C" not in sys.modules:
        raise RuntimeError(
            "torch_tpu cannot load: another package already registered the 'tpu' "
            "device (Google's or Sophgo's torch_tpu share this import name and "
            "cannot be installed beside torch-tpu-open).")


def _search_dirs():
    dirs = []
    for d in list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path:
        if d and os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def _register():
    _check_no_other_privateuse1_backend()
    from . import _C  # static initialisers register allocator, guard, hooks, kernels

    _C._set_search_dirs(_search_dirs())
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    from . import tpu as _tpu_module

    torch._register_device_module("tpu", _tpu_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)


_register()

from .api import tpu_device  # noqa: E402
from .mode import set_execution_mode  # noqa: E402


def _autoload():
    """Entry point for ``torch.backends``: importing the package registers it."""
