"""``tpu_dist``: the ``torch.distributed`` backend for ``tpu`` tensors.

Registered at import for device ``tpu``, so a CUDA script's
``init_process_group("nccl")`` becomes ``init_process_group("tpu_dist")``
(or ``init_process_group()``, which picks the accelerator's backend), and
``"cpu:gloo,tpu:tpu_dist"`` gives each device its own backend.

The process model is torchrun's: one process per device. Under torchrun
the CPU plugin presents ``LOCAL_WORLD_SIZE`` devices in each process, so
``torch.tpu.set_device(LOCAL_RANK)`` and ``init_device_mesh("tpu", ...)``
behave as on CUDA (each process computes on its own device only).

Collectives run on a host transport, Gloo over the same ranks
(csrc/distributed/ProcessGroupTpu.cpp). Where device memory is host memory
(the CPU plugin) Gloo reads tpu inputs in place and its results become the
tpu tensors' buffers; elsewhere each input is read to the host once and the
results are written back. Either way a result lands in every view of the
tensor. CPU tensors given to a ``tpu_dist``-only group go to that Gloo
directly. Compiled graphs are cut around their collectives
(torch_tpu/_compile_collectives.py).
"""

import torch
import torch.distributed as dist

from . import _C

BACKEND = "tpu_dist"


def _create_backend(store, rank, size, timeout):
    # The host transport gets its own Gloo context on this (already
    # device-prefixed) store, so a group's CPU backend is not disturbed.
    host = dist.ProcessGroupGloo(store, rank, size, timeout)
    return _C.ProcessGroupTpu(host, rank, size, timeout)


def register():
    """Makes ``tpu_dist`` a c10d backend for ``tpu`` (and for CPU tensors in a
    group created with it alone). Idempotent."""
    if not dist.is_available() or not hasattr(_C, "ProcessGroupTpu"):
        return
    if BACKEND in dist.Backend.backend_list:
        return
    # A list: 2.13 iterates a bare string character by character.
    dist.Backend.register_backend(BACKEND, _create_backend, devices=["tpu", "cpu"])
    _default_backend_for_accelerator_groups()
    _install_set_timeout()


def _install_set_timeout():
    """Newer PyTorch has dist.set_timeout (TorchTitan shortens its timeouts
    with it after the first step); where torch lacks it, this module's."""
    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = set_timeout


def _default_backend_for_accelerator_groups():
    """init_process_group() with no backend makes a group whose only backend
    is the accelerator's, but names Gloo (or NCCL) its default, which that
    group lacks: DDP's logger, and anything else asking the group for its
    default backend, then fails. Such a group's default is its tpu_dist."""
    c10d = dist.distributed_c10d
    helper = c10d._new_process_group_helper
    if getattr(helper, "_tpu_dist", False):
        return

    def new_process_group_helper(*args, **kwargs):
        pg, store = helper(*args, **kwargs)
        if isinstance(pg, dist.ProcessGroup) and "tpu" in {d.type for d in pg._device_types}:
            default = dist.Backend.backend_type_map.get(pg.name())
            try:
                pg._backend_id(default)
            except (RuntimeError, TypeError):
                if isinstance(pg._get_backend(torch.device("tpu")), _C.ProcessGroupTpu):
                    pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return pg, store

    new_process_group_helper._tpu_dist = True
    c10d._new_process_group_helper = new_process_group_helper


def set_timeout(timeout, group=None):
    """Sets the timeout of the collectives of ``group`` (default: the world)
    to ``timeout`` (a ``timedelta``), on every backend serving it: a
    ``tpu_dist`` backend and its Gloo transport, and a CPU Gloo backend.
    Ranks outside ``group`` raise ``ValueError``."""
    c10d = dist.distributed_c10d
    if group is None:
        group = c10d._get_default_group()
    if c10d._rank_not_in_group(group):
        raise ValueError("set_timeout: this rank is not in the group")
    # ProcessGroup.set_timeout calls setTimeout on each of the group's
    # backends (ProcessGroupTpu's passes it on to its host transport).
    group.set_timeout(timeout)


def is_tpu_dist(group=None):
    """True when ``group`` (default: the world) sends tpu tensors through
    ``tpu_dist``."""
    if not dist.is_initialized():
        return False
    group = group or dist.group.WORLD
    try:
        backend = group._get_backend(torch.device("tpu"))
    except RuntimeError:
        return False
    return isinstance(backend, _C.ProcessGroupTpu)


def state():
    """What ``python -m torch_tpu.info`` and the metrics report show."""
    out = {"available": dist.is_available() and hasattr(_C, "ProcessGroupTpu"),
           "registered": BACKEND in getattr(dist.Backend, "backend_list", [])}
    if dist.is_available() and dist.is_initialized():
        pg = dist.group.WORLD
        # per device type, the backend that serves it ("cpu:gloo,tpu:tpu_dist")
        backends = ",".join(f"{d.type}:{pg._get_backend(d).name()}" for d in pg._device_types)
        out.update(initialized=True, rank=dist.get_rank(), world_size=dist.get_world_size(),
                   backend=backends, tpu_backend_is_tpu_dist=is_tpu_dist())
    else:
        out["initialized"] = False
    out.update(stats())
    return out


def stats():
    """Collectives run through tpu_dist in this process; bytes copied between
    device and host and bytes moved without a copy; seconds copying, waiting
    for the device to compute inputs, and waiting on the transport."""
    return dict(_C._dist_stats()) if hasattr(_C, "_dist_stats") else {}


def reset_stats():
    if hasattr(_C, "_reset_dist_stats"):
        _C._reset_dist_stats()


__all__ = ["BACKEND", "register", "set_timeout", "is_tpu_dist", "state", "stats", "reset_stats"]
