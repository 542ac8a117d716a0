"""Execution modes.

* ``"strict"`` (default): one op at a time, asynchronous, like CUDA eager.
* ``"debug"`` (``TORCH_TPU_LAUNCH_BLOCKING=1``): every op waits for its
  result, so errors surface at the op that caused them.
* ``"fused"`` (``TORCH_TPU_DEFER_AND_FUSE=1``): ops are recorded into a
  pending graph that runs at a sync point (``.item()``, ``.cpu()``,
  printing, data-dependent shapes, ``torch.tpu.synchronize()``,
  :func:`mark_step`, a mode change, or ``TORCH_TPU_FUSE_MAX_OPS`` ops), so
  XLA fuses across ops. Results are the same as in strict mode; errors of
  the graph surface at the sync point.
"""
import contextlib

from . import _C

STRICT = "strict"
DEBUG = "debug"
FUSED = "fused"
_MODES = (STRICT, DEBUG, FUSED)


def get_execution_mode():
    if _C._launch_blocking():
        return DEBUG
    return FUSED if _C._fused() else STRICT


def set_execution_mode(mode):
    """Sets the eager mode: ``"strict"``, ``"debug"`` or ``"fused"``. Leaving
    fused mode runs the pending graph first."""
    if mode not in _MODES:
        raise ValueError(f"unknown execution mode {mode!r}; expected one of {_MODES}")
    _C._set_fused(mode == FUSED)
    _C._set_launch_blocking(mode == DEBUG)


@contextlib.contextmanager
def execution_mode(mode):
    """Runs the block in ``mode`` and restores the previous mode after it."""
    old = get_execution_mode()
    set_execution_mode(mode)
    try:
        yield
    finally:
        set_execution_mode(old)


def mark_step():
    """Runs the pending fused graph now, without waiting for its results (a
    no-op in strict and debug mode). Calling it once per training step gives
    every step the same graph, so it compiles once."""
    _C._flush()
