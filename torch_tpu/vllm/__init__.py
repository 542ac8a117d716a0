"""vLLM on the ``tpu`` device: a platform plugin (entry point
``vllm.platform_plugins``: ``tpu``), so that ``vllm.LLM(model=path)`` and
``vllm serve path`` run on ``tpu`` with no code change.

vLLM activates exactly one out-of-tree platform and prefers it to its own:
this one is active unless ``TORCH_TPU_VLLM=0``, or a CUDA GPU is present
(then ``TORCH_TPU_VLLM=1`` asks for ``tpu`` all the same).

Parts: ``platform`` (what vLLM asks of a device: attention backend, worker,
compile settings, memory), ``worker`` (device setup and the KV-cache budget),
``model_runner`` (vLLM's GPU runner with ``torch.cuda`` streams and events
answered by ``torch.tpu``), ``attention`` (paged attention in PyTorch ops on
``tpu``), ``compiler`` (vLLM's piecewise compile through the ``tpu``
backend). Serving environment: ``./setup.sh --serving`` (README).
"""
import os


def register():
    """vLLM's platform-plugin hook: the platform's qualified name, or None
    to stay out of the way."""
    want = os.environ.get("TORCH_TPU_VLLM", "")
    if want == "0":
        return None
    if want != "1":
        import torch

        if torch.cuda.is_available():
            return None
    return "torch_tpu.vllm.platform.TpuPlatform"
