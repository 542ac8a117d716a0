"""``torch.tpu.amp``: the device-named forms of ``torch.amp``, as code
written against ``torch.cuda.amp`` calls them. They are the device-generic
classes with ``"tpu"`` filled in; autocast's default dtype is the device's
(bfloat16: see ``torch.get_autocast_dtype("tpu")``)."""
import functools

import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def autocast(enabled=True, dtype=None, cache_enabled=True):
    """``torch.autocast("tpu", ...)``; a plain call, so that torch.compile
    traces it as that context manager."""
    return torch.amp.autocast("tpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("tpu", ...)``. With bfloat16 autocast (the
    default) no scaling is needed; float16 needs it as on CUDA."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.amp.custom_fwd(device_type="tpu", ...)``."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="tpu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``torch.amp.custom_bwd(device_type="tpu")``."""
    if bwd is None:
        return custom_bwd
    return torch.amp.custom_bwd(bwd, device_type="tpu")
