"""Opt-in (``TORCH_TPU_TORCHVISION_WITHOUT_OPS=1``): torchvision beside
PyTorch's CPU build when its C++ extension cannot load.

PyPI's torchvision wheels for Linux x86-64 are CUDA builds. Beside the CPU
build of torch their extension (``torchvision/_C.so``) fails to load, which
torchvision tolerates, but ``import torchvision`` then fails: it registers
fake kernels for two operators only the extension defines
(``torchvision::nms`` and ``torchvision::qnms``). Transformers imports
torchvision when it is installed, so ``import transformers`` fails too.

With the switch on, and only when the installed torchvision's extension does
not load, those two schemas are defined just before torchvision is first
imported. torchvision.models, transforms and timm then work on any device.
The operators of the extension itself (nms, roi_align, deform_conv2d, ...)
still raise torchvision's own "Couldn't load custom C++ ops" error. Where
the extension loads (a CPU build of torchvision, or CUDA torch), nothing is
done.
"""
import glob
import importlib.machinery
import os

ENV = "TORCH_TPU_TORCHVISION_WITHOUT_OPS"

# What torchvision's extension would define and its Python side assumes
# exists even without it.
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_library = None
state = {"checked": False, "extension_loads": None, "schemas_defined": False}


def _extension_loads():
    """Whether the installed torchvision's C++ extension loads (loading it
    now, as torchvision would a moment later, is harmless)."""
    import torch
    spec = importlib.machinery.PathFinder.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return None  # not installed
    for folder in spec.submodule_search_locations:
        for path in glob.glob(os.path.join(folder, "_C*.so")) + \
                glob.glob(os.path.join(folder, "_C*.pyd")):
            try:
                torch.ops.load_library(path)
                return True
            except OSError:
                return False
    return False


def prepare():
    """Called just before ``import torchvision`` runs."""
    global _library
    if state["checked"]:
        return
    state["checked"] = True
    loads = state["extension_loads"] = _extension_loads()
    if loads is not False:
        return
    import torch
    _library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _SCHEMAS:
        _library.define(schema)
    state["schemas_defined"] = True


def install():
    if os.environ.get(ENV, "0") not in ("", "0"):
        from ._import_hooks import before_import
        before_import("torchvision", prepare)
