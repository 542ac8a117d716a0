"""torch_tpu: PyTorch on a device called ``tpu``, computing through XLA.

``import torch`` loads this package through the ``torch.backends`` entry
point (``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off), so
``torch.randn(3, device="tpu")`` works without importing anything else.
The PJRT plugin (XLA's CPU plugin by default; CUDA or libtpu where present)
is loaded lazily, at the first use of the device.
"""


def _autoload():
    """Entry point for ``torch.backends`` (runs inside ``import torch``)."""
    from ._registration import freeze_import_heap, register

    register()
    freeze_import_heap()


import torch  # noqa: E402  (may run _autoload above through the entry point)

from ._registration import register as _register  # noqa: E402

_register()

from .api import tpu_device  # noqa: E402
from .metrics import metrics_report  # noqa: E402
from .mode import execution_mode, get_execution_mode, mark_step, set_execution_mode  # noqa: E402
from .custom_ops import custom_jax_kernel, jax_op, stablehlo_op  # noqa: E402
from . import pallas  # noqa: E402



def mark_dynamic(tensor, dim, max, min=2):
    """Marks ``tensor.size(dim)`` dynamic with an upper bound for
    torch.compile: every size in [min, max] then runs one executable,
    compiled at ``max`` (a graph with an op that cannot run on padded sizes
    is compiled per exact size instead, with a warning naming the op; see
    torch_tpu/_compile_bucket.py). ``min`` is at least 2 because Dynamo
    specialises sizes 0 and 1."""
    import torch._dynamo

    if not isinstance(max, int) or max < 2:
        raise ValueError(f"mark_dynamic: max must be an int >= 2, got {max!r}")
    torch._dynamo.mark_dynamic(tensor, dim, min=min, max=max)


__all__ = ["jax_op", "stablehlo_op", "custom_jax_kernel", "pallas", "mark_dynamic", "tpu_device", "set_execution_mode", "get_execution_mode", "execution_mode", "mark_step", "metrics_report"]
