"""Registers the ``tpu`` device with PyTorch, once per process."""
import os
import site
import sys

import torch

_done = False


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


def _let_autograd_threads_settle():
    """At exit, give autograd's device threads a moment to drop their last
    GraphTask. Each backward stashes a Python context in the task; a device
    thread releasing it needs the GIL, and one that asks for the GIL while
    the interpreter finalizes is unwound by pthread_exit through a noexcept
    destructor, which aborts the process ("terminate called without an
    active exception")."""
    from . import _C
    if _C._is_initialized():
        import time
        time.sleep(0.02)  # releases the GIL; the threads need microseconds


def _finish_background_compiles():
    """At exit, let the background compiles in flight finish: each writes its
    program to the disk cache, which the next process then loads instead of
    compiling again."""
    from . import tpu

    try:
        tpu.wait_for_compiles()
    except KeyboardInterrupt:
        pass


def _install_compile_backend(dynamo):
    from . import _compile

    _compile.install()


def _allow_flex_attention(module):
    from . import _flex_attention

    _flex_attention.allow_tpu(module)


def _register_tpu_dist(_module):
    from . import distributed

    distributed.register()


def register():
    global _done
    if _done:
        return
    _check_no_other_privateuse1_backend()
    # XLA logs an INFO line per client; keep users' stderr quiet by default.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    from . import _C  # static initialisers register allocator, guard, hooks, kernels

    _C._set_search_dirs(_search_dirs())
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    from . import tpu as tpu_module

    torch._register_device_module("tpu", tpu_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    # The TPU's native lower precision (fp16 has no fast path there, and
    # bf16 needs no GradScaler). PyTorch keeps this per thread: threads
    # started later have its fp16 default unless they set it.
    torch.set_autocast_dtype("tpu", torch.bfloat16)
    from . import _hf, _printing, _tied_params, _torchvision

    _tied_params.install()
    _printing.install()
    from ._import_hooks import after_import

    after_import("torch._dynamo", _install_compile_backend)
    after_import("torch.nn.attention.flex_attention", _allow_flex_attention)
    _hf.install()
    _torchvision.install()
    after_import("torch.distributed", _register_tpu_dist)
    import atexit

    atexit.register(_let_autograd_threads_settle)
    atexit.register(_finish_background_compiles)  # runs first
    _done = True


def freeze_import_heap():
    """Moves the objects alive now to Python's permanent generation, out of
    every later full collection. Called at the end of import torch (the
    entry point), when they are the import's (modules, functions, classes:
    about 170,000) and no tensor exists yet. They live as long as the process,
    yet each full collection walked them all, and a compile's new objects
    trigger several: on TinyGPT's first compiled training step 0.32-0.37 s
    of collections became 0.16-0.27 s. TORCH_TPU_COMPILE_GC=1 leaves the
    collector as Python has it."""
    if os.environ.get("TORCH_TPU_COMPILE_GC") != "1":
        import gc

        gc.freeze()
