"""Entry points upstream code calls (``torch/utils/_pallas.py``, Dynamo's
``TpuInterface``, Hugging Face): ``torch_tpu.api.tpu_device()``."""
import torch


def tpu_device(index=None):
    """Returns ``torch.device("tpu", index)``; cheap and idempotent (the device
    is registered when ``torch_tpu`` is imported)."""
    if index is None:
        index = torch.tpu.current_device()
    return torch.device("tpu", index)
