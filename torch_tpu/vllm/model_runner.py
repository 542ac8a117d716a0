"""vLLM's (V1) GPU model runner on tpu: its torch.cuda streams and events
are torch.tpu's, for the whole process (the runner builds events at every
step, not only while it is constructed)."""
import functools

import torch
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

_ALIASED = False


def alias_cuda_streams():
    """torch.cuda.Stream / Event / stream / current_stream -> torch.tpu's."""
    global _ALIASED
    if _ALIASED:
        return
    torch.cuda.Stream = torch.tpu.Stream
    torch.cuda.current_stream = functools.partial(torch.tpu.current_stream)
    torch.cuda.default_stream = functools.partial(torch.tpu.current_stream)
    torch.cuda.stream = functools.partial(torch.tpu.stream)
    torch.cuda.set_stream = functools.partial(torch.tpu.set_stream)

    def event(*args, blocking=None, **kwargs):  # torch.cuda.Event takes blocking
        return torch.tpu.Event(*args, **kwargs)

    torch.cuda.Event = event
    _ALIASED = True


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device):
        alias_cuda_streams()
        super().__init__(vllm_config, device)

    def _to_list(self, sampled_token_ids):
        return sampled_token_ids.tolist()
