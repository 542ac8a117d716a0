"""``torch_tpu._loader.load()``: the entry point that launchers call to make
sure the ``tpu`` device and its ``tpu_dist`` process-group backend exist.

Ray Train calls it in every worker when a ``TorchTrainer`` is configured with
``TorchConfig(backend="tpu_dist")``, just before ``init_process_group``
(docs/distributed.md, "Ray"); without this module that setup fails with an
ImportError. ``import torch`` already registers both here, so loading is
registering again, which does nothing the second time.

It selects no device: Ray runs the training function on a thread of its
own, and the current device is per thread (as CUDA's is), so a device set
here would not be the one the training function sees. Each Ray worker is a
process with its own PJRT client, so ``torch.device("tpu")`` (its device 0)
is a device of its own.
"""

_LOADED = False


def load(allow_xla_backend=None):
    """Registers the ``tpu`` device and the ``tpu_dist`` backend (idempotent).
    ``allow_xla_backend`` is accepted for callers written against other
    ``torch_tpu`` packages, where it allows running without a TPU; this one
    runs on whichever PJRT plugin is present, XLA:CPU included, so there is
    nothing to allow."""
    global _LOADED
    from . import _registration, distributed

    _registration.register()
    distributed.register()
    _LOADED = True
