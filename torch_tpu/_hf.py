"""Lets Hugging Face libraries see ``tpu`` where they hard-code device names.

accelerate: memory for ``device_map="auto"``, and the default device of its
``PartialState`` (which ``Trainer`` prepares the model on). safetensors:
``device="tpu"`` for ``safe_open``/``load_file``.

``accelerate.utils.modeling.get_max_memory`` asks a fixed list of vendor
modules (npu, mlu, xpu, hpu, ..., else CUDA) for device memory and, on a
machine with none of them, offers only the CPU, so ``device_map="auto"`` would
leave every weight on the CPU. When that module is imported, its function is
wrapped: if it found no accelerator and ``tpu`` is the current accelerator,
each ``tpu`` device's free memory (``torch.tpu.mem_get_info``) is offered
under the integer keys accelerate uses for accelerators (PyTorch resolves a
bare index to the current accelerator, ``tpu:i``). Explicit ``max_memory``
budgets pass through unchanged: ``max_memory={0: "2GiB", "cpu": "8GiB"}``.

``PartialState.default_device`` likewise walks the vendor list and ends at the
CPU; the wrapped property answers ``tpu`` where it would have answered the CPU
and ``tpu`` is the current accelerator (``ACCELERATE_TORCH_DEVICE`` and
``cpu=True`` still win, as before).

Under torchrun (or ``accelerate launch --multi_gpu``), ``PartialState``
picks a distributed mode from the vendors it knows and, finding none, would
run every rank alone; on ``tpu`` it now takes ``tpu_dist`` and DDP as it
takes NCCL on CUDA (accelerate's ``MULTI_GPU`` mode), with each rank on
``tpu:LOCAL_RANK``. ``cpu=True`` and an explicit backend still win.

Transformers reports FlexAttention unavailable when the host accelerator is
``tpu``; ``is_torch_flex_attn_available`` is wrapped to answer yes there, as
flex_attention runs on this device (``torch_tpu/_flex_attention.py``).

safetensors' Rust device parser knows a fixed list of names and rejects
``"tpu"``, but takes a bare index, which PyTorch resolves to the current
accelerator; ``safetensors.safe_open`` is wrapped to pass a ``tpu`` device as
its index (only while ``tpu`` is the current accelerator).

Nothing on disk is changed; the wrappers are installed by an import hook, or
at once for modules imported before this package.
"""
import functools
import os
import sys


def _tpu_is_current():
    import torch
    acc = torch.accelerator.current_accelerator()
    return acc is not None and acc.type == "tpu" and torch.tpu.is_available()


def _tpu_memory():
    import torch
    if not _tpu_is_current():
        return {}
    return {i: torch.tpu.mem_get_info(i)[0] for i in range(torch.tpu.device_count())}


def _wrap(original):
    @functools.wraps(original)
    def get_max_memory(max_memory=None):
        found = original(max_memory)
        if max_memory is None and not any(isinstance(k, int) for k in found):
            found = {**_tpu_memory(), **found}
        return found

    get_max_memory._torch_tpu_wrapped = True
    return get_max_memory


def _wrap_default_device(original):
    @functools.wraps(original)
    def default_device(self):
        device = original(self)
        if device.type == "cpu" and _tpu_is_current():
            return _tpu_device()
        return device

    default_device._torch_tpu_wrapped = True
    return default_device


def _tpu_device():
    import torch
    return torch.device("tpu", torch.tpu.current_device())


def _patch_modeling(module):
    if not getattr(module.get_max_memory, "_torch_tpu_wrapped", False):
        module.get_max_memory = _wrap(module.get_max_memory)
    # names re-exported before the wrap still point at the original
    utils = sys.modules.get("accelerate.utils")
    if utils is not None and hasattr(utils, "get_max_memory"):
        utils.get_max_memory = module.get_max_memory


def _patch_state(module):
    prop = module.PartialState.__dict__.get("default_device")
    if isinstance(prop, property) and not getattr(prop.fget, "_torch_tpu_wrapped", False):
        module.PartialState.default_device = property(_wrap_default_device(prop.fget))
    cls = module.PartialState
    if getattr(cls._prepare_backend, "_torch_tpu_wrapped", False):
        return
    prepare, set_device = cls._prepare_backend, cls.set_device
    kinds = module.DistributedType

    @functools.wraps(prepare)
    def _prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        backend_name, kind = prepare(self, cpu, sagemaker_dp, backend)
        # Launched by torchrun on tpu: one process per device, collectives
        # through tpu_dist (accelerate's list ends at the vendors it knows,
        # and would run every rank alone).
        if kind == kinds.NO and not cpu and int(os.environ.get("LOCAL_RANK", -1)) != -1 \
                and int(os.environ.get("WORLD_SIZE", 1)) > 1 and _tpu_is_current():
            return backend or "tpu_dist", kinds.MULTI_GPU
        return backend_name, kind

    @functools.wraps(set_device)
    def _set_device(self):
        if self.device is None and getattr(self, "backend", None) == "tpu_dist":
            import torch

            self.device = torch.device("tpu", self.local_process_index % torch.tpu.device_count())
            torch.tpu.set_device(self.device)
            return
        set_device(self)

    _prepare_backend._torch_tpu_wrapped = True
    cls._prepare_backend = _prepare_backend
    cls.set_device = _set_device


def _tpu_index(device):
    import torch
    if isinstance(device, (str, torch.device)) and _tpu_is_current():
        try:
            d = torch.device(device)
        except RuntimeError:
            return device
        if d.type == "tpu":
            return d.index if d.index is not None else torch.tpu.current_device()
    return device


def _patch_safetensors(module):
    original = module.safe_open
    if getattr(original, "_torch_tpu_wrapped", False):
        return

    @functools.wraps(original)
    def safe_open(filename, framework, device="cpu", *args, **kwargs):
        return original(filename, framework, _tpu_index(device), *args, **kwargs)

    safe_open._torch_tpu_wrapped = True
    module.safe_open = safe_open
    # modules that imported the name before the wrap
    for name in ("safetensors.torch",):
        user = sys.modules.get(name)
        if user is not None and getattr(user, "safe_open", None) is original:
            user.safe_open = safe_open


def _patch_flex_available(module):
    """Transformers turns FlexAttention off when the host accelerator is
    tpu (another package's flex_attention refuses tpu tensors); this one's
    runs there (torch_tpu/_flex_attention.py)."""
    original = getattr(module, "is_torch_flex_attn_available", None)
    if original is None or getattr(original, "_torch_tpu_wrapped", False):
        return

    def is_torch_flex_attn_available():
        # asked at import: the accelerator's name only, the device stays
        # uninitialised
        import torch
        acc = torch.accelerator.current_accelerator()
        return original() or (acc is not None and acc.type == "tpu")

    # a constant to torch.compile, as transformers marks its own probes
    is_torch_flex_attn_available._dynamo_marked_constant = True
    wrapped = functools.lru_cache(is_torch_flex_attn_available)
    wrapped._torch_tpu_wrapped = True
    module.is_torch_flex_attn_available = wrapped


_TARGETS = {"accelerate.utils.modeling": _patch_modeling, "accelerate.state": _patch_state,
            "safetensors": _patch_safetensors,
            "transformers.utils.import_utils": _patch_flex_available}


def install():
    from ._import_hooks import after_import

    for name, patch in _TARGETS.items():
        after_import(name, patch)
