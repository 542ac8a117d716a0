"""vLLM's GPU worker on tpu: device setup, and a KV-cache budget that keeps
``gpu_memory_utilization``'s meaning on a device whose memory is the host's.

On a CPU plugin the device's memory is host RAM that every process shares:
the engine may use ``gpu_memory_utilization`` of what the host had free when
the worker started (torch.tpu.mem_get_info), less what the weights and the
largest batch's activations take and a reserve for the runtime (compiled
programs, Python); the rest holds the KV cache. A budget too small for one
sequence is an error naming the figures, never an OOM kill.
"""
import contextlib
import gc
import os
import time

import torch
from vllm.logger import init_logger
from vllm.v1.worker import gpu_worker
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment

from .platform import TpuPlatform, host_memory_device

logger = init_logger("vllm.torch_tpu")

GiB = 1 << 30
# Host memory kept back from the KV cache for what the runtime allocates
# outside tensors (XLA's compiled programs and their scratch, Python).
RUNTIME_RESERVE = int(float(os.environ.get("TORCH_TPU_VLLM_RESERVE_GIB", "1")) * GiB)


def _gib(n):
    return f"{n / GiB:.2f}"


class TpuWorker(Worker):
    def init_device(self):
        from vllm.utils.torch_utils import set_random_seed

        from . import moe  # noqa: F401  (registers the MoE layer for tpu)

        # As under torchrun: the CPU plugin then presents one device per
        # local rank (read when the device starts, which is below).
        world = self.parallel_config.world_size
        os.environ.setdefault("LOCAL_WORLD_SIZE", str(world))
        os.environ.setdefault("LOCAL_RANK", str(self.local_rank))
        self.device = torch.device(f"tpu:{self.local_rank}")
        if self.local_rank >= torch.tpu.device_count():
            raise RuntimeError(f"tpu: worker rank {self.local_rank} has no device "
                               f"(torch.tpu.device_count() = {torch.tpu.device_count()})")
        torch.tpu.set_device(self.device)
        init_worker_distributed_environment(self.vllm_config, self.rank,
                                            self.distributed_init_method, self.local_rank,
                                            TpuPlatform.dist_backend)
        set_random_seed(self.model_config.seed)
        gc.collect()
        free, total = torch.tpu.mem_get_info(self.device)
        self.init_free_memory, self.init_total_memory = free, total
        self.host_memory = host_memory_device()
        # The local ranks of a host-memory device share the host's memory.
        share = int(os.environ["LOCAL_WORLD_SIZE"]) if self.host_memory else 1
        self.requested_memory = int(free * self.cache_config.gpu_memory_utilization / share)
        logger.info("tpu:%d on %s", self.local_rank,
                    torch.tpu.get_device_properties(self.device).plugin)
        if self.host_memory:
            logger.info("tpu:%d (host memory): %s GiB free of %s GiB at start; "
                        "gpu_memory_utilization %.2f gives this engine %s GiB%s",
                        self.local_rank, _gib(free), _gib(total),
                        self.cache_config.gpu_memory_utilization, _gib(self.requested_memory),
                        f" (1/{share}: local ranks share it)" if share > 1 else "")
        self._init_workspace_and_model_runner()

    def _make_model_runner(self):
        from .model_runner import TpuModelRunner

        return TpuModelRunner(self.vllm_config, self.device)

    def _maybe_get_memory_pool_context(self, tag):
        return contextlib.nullcontext()

    @torch.no_grad()
    def determine_available_memory(self):
        """Bytes for the KV cache, after a profile run at the largest batch."""
        torch.tpu.synchronize()
        torch.tpu.reset_peak_memory_stats(self.device)
        self.model_runner.profile_run()
        torch.tpu.synchronize()
        peak = torch.tpu.max_memory_allocated(self.device)
        if self.cache_config.kv_cache_memory_bytes:
            kv = int(self.cache_config.kv_cache_memory_bytes)
            free = torch.tpu.mem_get_info(self.device)[0]
            if kv > free:
                raise ValueError(f"tpu: kv_cache_memory_bytes = {_gib(kv)} GiB, but only "
                                 f"{_gib(free)} GiB of device memory is free")
            logger.info("tpu: KV cache %s GiB (kv_cache_memory_bytes)", _gib(kv))
            return kv
        reserve = RUNTIME_RESERVE if self.host_memory else 0
        kv = self.requested_memory - peak - reserve
        logger.info("tpu:%d: KV cache %s GiB = %s GiB budget - %s GiB weights and "
                    "activations (peak) - %s GiB runtime reserve", self.local_rank,
                    _gib(max(kv, 0)), _gib(self.requested_memory), _gib(peak), _gib(reserve))
        if kv <= 0:
            raise ValueError(
                f"tpu: no memory left for the KV cache: gpu_memory_utilization "
                f"{self.cache_config.gpu_memory_utilization} of the {_gib(self.init_free_memory)} "
                f"GiB free at start is {_gib(self.requested_memory)} GiB, and the model's weights "
                f"and activations take {_gib(peak)} GiB plus a {_gib(reserve)} GiB runtime "
                f"reserve. Raise gpu_memory_utilization, lower max_num_batched_tokens, or set "
                f"kv_cache_memory_bytes.")
        return kv

    def compile_or_warm_up_model(self):
        # vLLM's kernel warm-up is for CUDA kernels (and imports torchvision).
        saved = gpu_worker.kernel_warmup
        gpu_worker.kernel_warmup = lambda worker: None
        try:
            times = super().compile_or_warm_up_model()
        finally:
            gpu_worker.kernel_warmup = saved
        if not self.model_config.enforce_eager:
            # Every token bucket once: the compiled model's programs exist
            # before the first request.
            sizes = self.model_runner.token_buckets
            t = time.perf_counter()
            for size in sizes:
                self.model_runner._dummy_run(size, skip_eplb=True, remove_lora=False)
            logger.info("tpu: model warmed up for %d token counts (%s) in %.1f s", len(sizes),
                        ", ".join(map(str, sizes)), time.perf_counter() - t)
        return times
