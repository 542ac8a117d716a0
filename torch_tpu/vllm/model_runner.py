"""vLLM's (V1) GPU model runner on tpu: its torch.cuda streams and events
are torch.tpu's, for the whole process (the runner builds events at every
step, not only while it is constructed), and each layer's KV cache is a
storage of its own."""
import contextlib
import dataclasses
import functools
import math
import os

import torch
from vllm.logger import init_logger
from vllm.v1.kv_cache_interface import (AttentionSpec, KVCacheTensor,
                                        UniformTypeKVCacheSpecs,
                                        compute_layer_kv_cache_shape_bytes,
                                        create_kv_cache_views)
from vllm.v1.worker import gpu_model_runner
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

_ALIASED = False
logger = init_logger("vllm.torch_tpu")


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


def _layer_specs(kv_cache_config):
    """(tensor, layer name, spec, group index) for every layer of every
    KV-cache tensor, or None where a layer is not plain attention."""
    out = []
    for tensor in kv_cache_config.kv_cache_tensors:
        for name in tensor.layers:
            gid, group = next((i, g) for i, g in enumerate(kv_cache_config.kv_cache_groups)
                              if name in g.layer_names)
            spec = group.kv_cache_spec
            if isinstance(spec, UniformTypeKVCacheSpecs):
                spec = spec.kv_cache_specs[name]
            if not isinstance(spec, AttentionSpec) or not spec.has_layer_views:
                return None
            out.append((tensor, name, spec, gid))
    return out


def allocate_kv_cache_per_layer(kv_cache_config, device, layout, kernel_block_sizes=None):
    """vLLM's allocate_kv_cache, but one storage per layer in the layer's own
    dtype instead of one int8 allocation that every layer views. On tpu a
    write into a view of a storage produces the whole storage's new value:
    with a storage per layer, a step's K/V slots are scattered into the
    layer's cache in place (its buffer donated), and no layer's update
    copies the others'. Falls back to vLLM's layout where layers share bytes
    (cache groups overlaid on one allocation), which separate storages could
    not honour within the budget."""
    layers = _layer_specs(kv_cache_config)
    if not layers:
        return _vllm_allocate_kv_cache(kv_cache_config, device, layout, kernel_block_sizes)
    plans, total = [], 0
    for tensor, name, spec, gid in layers:
        num_blocks = kv_cache_config.num_blocks_of(tensor)
        kbs = kernel_block_sizes[gid] if kernel_block_sizes and gid < len(kernel_block_sizes) \
            else None
        nbytes = math.prod(compute_layer_kv_cache_shape_bytes(spec, num_blocks, kbs))
        plans.append((name, spec, num_blocks, kbs, nbytes))
        total += nbytes
    budget = next(iter({t.size for t in kv_cache_config.kv_cache_tensors}))
    if total > budget or any(p[4] % p[1].dtype.itemsize for p in plans):
        logger.info("tpu: KV cache layers share one allocation (overlaid cache groups)")
        return _vllm_allocate_kv_cache(kv_cache_config, device, layout, kernel_block_sizes)
    caches = {}
    for name, spec, num_blocks, kbs, nbytes in plans:
        raw = torch.zeros(nbytes // spec.dtype.itemsize, dtype=spec.dtype, device=device)
        page = nbytes // num_blocks
        own = KVCacheTensor(size=nbytes, layers=[name], layer_stride=nbytes, block_stride=page)
        caches[name] = create_kv_cache_views(raw.view(torch.int8), spec, num_blocks, layout,
                                             own, kernel_block_size=kbs)[0]
    logger.info("tpu: KV cache of %d layers, a storage each (%s), updated in place",
                len(caches), ", ".join(sorted({str(p[1].dtype) for p in plans})))
    return caches


_vllm_allocate_kv_cache = gpu_model_runner.allocate_kv_cache


@contextlib.contextmanager
def _per_layer_allocation():
    # The runner calls the allocator by its module-level name; everything
    # else it does around it (shared layers, binding) stays vLLM's.
    gpu_model_runner.allocate_kv_cache = allocate_kv_cache_per_layer
    try:
        yield
    finally:
        gpu_model_runner.allocate_kv_cache = _vllm_allocate_kv_cache


def token_buckets(max_num_tokens):
    """The padded token counts of a step: powers of two from 8, and the
    step's maximum."""
    sizes, b = [], 8
    while b < max_num_tokens:
        sizes.append(b)
        b *= 2
    return sizes + [max_num_tokens]


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device):
        alias_cuda_streams()
        super().__init__(vllm_config, device)
        # The compile backend keeps a few programs per graph (one per shape,
        # least recently used dropped): room for every token bucket, or the
        # warm-up's would be evicted and compiled again.
        self.token_buckets = token_buckets(self.max_num_tokens)
        n = len(self.token_buckets)
        if int(os.environ.get("TORCH_TPU_COMPILE_MAX_SHAPES", "8")) < n:
            os.environ["TORCH_TPU_COMPILE_MAX_SHAPES"] = str(n)

    def _determine_batch_execution_and_padding(self, num_tokens, *args, **kwargs):
        # A step's tokens padded to a bucket (as CUDA graphs pad theirs), so
        # that the compiled model sees a bounded set of shapes.
        mode, desc, ubatch, across_dp, stats = super()._determine_batch_execution_and_padding(
            num_tokens, *args, **kwargs)
        if across_dp is None and not ubatch:
            padded = next(b for b in self.token_buckets if b >= desc.num_tokens)
            desc = dataclasses.replace(desc, num_tokens=padded)
        return mode, desc, ubatch, across_dp, stats

    def initialize_kv_cache_tensors(self, kv_cache_config, kernel_block_sizes,
                                    kv_cache_allocation_context=None):
        with _per_layer_allocation():
            return super().initialize_kv_cache_tensors(
                kv_cache_config, kernel_block_sizes, kv_cache_allocation_context)

    def _to_list(self, sampled_token_ids):
        return sampled_token_ids.tolist()
