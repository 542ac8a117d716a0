"""The ``tpu`` platform for vLLM: what vLLM asks of a device, answered by
torch_tpu (``torch.tpu`` and ``torch.accelerator``)."""
import os

import torch
from vllm.logger import init_logger
from vllm.platforms.interface import Platform, PlatformEnum

logger = init_logger("vllm.torch_tpu")

# Pass-manager fusions whose patterns are CUDA kernels (or import them): off.
_CUDA_FUSIONS = ("fuse_norm_quant", "fuse_act_quant", "fuse_allreduce_rms", "fuse_attn_quant",
                 "fuse_act_padding", "fuse_rope_kvcache", "fuse_rope_kvcache_cat_mla")


def host_memory_device():
    """True when the device's memory is the host's (the CPU plugins)."""
    return torch.tpu.get_device_properties(torch.tpu.current_device()).platform == "cpu"


class TpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "tpu"
    device_type = "tpu"
    dispatch_key = "PrivateUse1"
    simple_compile_backend = "tpu"
    dist_backend = "tpu_dist"
    supported_quantization: list = []

    @property
    def supported_dtypes(self):
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
        cfg = attn_selector_config
        if getattr(cfg, "use_mla", False):
            raise NotImplementedError("tpu: multi-head latent attention (MLA) models are not "
                                      "supported yet")
        return "torch_tpu.vllm.attention.TpuAttentionBackend"

    @classmethod
    def get_compile_backend(cls):
        return "torch_tpu.vllm.compiler.TpuCompiler"

    @classmethod
    def check_and_update_config(cls, vllm_config):
        from vllm.config import CompilationMode, CUDAGraphMode

        parallel = vllm_config.parallel_config
        if parallel.worker_cls == "auto":
            parallel.worker_cls = "torch_tpu.vllm.worker.TpuWorker"
        # A process forked after the device started cannot use it
        # (torch.tpu._is_in_bad_fork): workers are spawned.
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")

        comp = vllm_config.compilation_config
        comp.cudagraph_mode = CUDAGraphMode.NONE
        if comp.mode != CompilationMode.NONE:
            for flag in _CUDA_FUSIONS:
                if getattr(comp.pass_config, flag, False):
                    setattr(comp.pass_config, flag, False)
        if comp.compile_sizes is None:
            comp.compile_sizes = []
        # no Triton kernels run on tpu: nothing to warm up
        kernel = getattr(vllm_config, "kernel_config", None)
        if kernel is not None and hasattr(kernel, "enable_jit_warmup"):
            kernel.enable_jit_warmup = False
        cache = vllm_config.cache_config
        if cache is not None and not cache.user_specified_block_size:
            cache.block_size = 16
        model = vllm_config.model_config
        if model is not None and getattr(model, "enable_sleep_mode", False):
            raise ValueError("tpu: sleep mode (enable_sleep_mode) is not supported")
        # (the device itself starts in the workers, which log it)
        logger.info("vLLM on tpu: worker %s, compile mode %s, KV block size %s",
                    parallel.worker_cls, comp.mode.name if comp.mode is not None else None,
                    cache.block_size if cache is not None else None)

    @classmethod
    def update_block_size_for_backend(cls, vllm_config):
        pass  # block_size is set in check_and_update_config

    @classmethod
    def import_kernels(cls):
        pass  # no vllm._C: every op runs as PyTorch ops on tpu

    @classmethod
    def register_triton_kernel_overrides(cls):
        from vllm.triton_utils.dispatcher import register_kernels

        from .kernels import compute_slot_mapping

        register_kernels({
            "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping,
        })

    @classmethod
    def get_device_name(cls, device_id=0):
        p = torch.tpu.get_device_properties(device_id)
        return f"tpu ({p.platform})"

    @classmethod
    def get_device_total_memory(cls, device_id=0):
        return torch.tpu.get_device_properties(device_id).total_memory

    @classmethod
    def get_current_memory_usage(cls, device=None):
        torch.tpu.synchronize(device)
        return torch.tpu.max_memory_allocated(device)

    @classmethod
    def set_device(cls, device):
        torch.tpu.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed):
        torch.tpu.manual_seed_all(seed)

    @classmethod
    def check_if_supports_dtype(cls, dtype):
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"tpu: model dtype {dtype} is not supported "
                             "(bfloat16, float16 or float32)")

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def is_pin_memory_available(cls):
        return False

    @classmethod
    def get_punica_wrapper(cls):
        raise NotImplementedError("tpu: LoRA adapters are not supported yet")

    @classmethod
    def opaque_attention_op(cls):
        # Attention stays one op in vLLM's graphs (its piecewise split
        # point); without it Dynamo traced into the metadata of the warm-up
        # batch and gave wrong tokens later.
        return True

    @classmethod
    def is_sleep_mode_available(cls):
        return False

    @classmethod
    def support_static_graph_mode(cls):
        return False

    @classmethod
    def support_hybrid_kv_cache(cls):
        return False

    @classmethod
    def get_device_communicator_cls(cls):
        return "vllm.distributed.device_communicators.base_device_communicator.DeviceCommunicatorBase"
