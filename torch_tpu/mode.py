"""Execution modes. Strict eager (default): one op at a time, asynchronous.
Debug eager (``TORCH_TPU_LAUNCH_BLOCKING=1``): every op waits for its result,
so errors surface at the op that caused them."""
import contextlib

from . import _C

STRICT = "strict"
DEBUG = "debug"
_MODES = (STRICT, DEBUG)


def get_execution_mode():
    return DEBUG if _C._launch_blocking() else STRICT


def set_execution_mode(mode):
    """Sets the eager mode: ``"strict"`` (asynchronous) or ``"debug"``
    (synchronous, errors at the op)."""
    if mode not in _MODES:
        raise ValueError(f"unknown execution mode {mode!r}; expected one of {_MODES}")
    _C._set_launch_blocking(mode == DEBUG)


@contextlib.contextmanager
def execution_mode(mode):
    old = get_execution_mode()
    set_execution_mode(mode)
    try:
        yield
    finally:
        set_execution_mode(old)
