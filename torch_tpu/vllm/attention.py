"""Paged attention on tpu in PyTorch ops: vLLM's v1 attention backend.

The KV cache of a layer is ``[num_blocks, num_kv_heads, block_size,
2 * head_size]`` (vLLM's LBHNC layout; K in the first half of the last dim,
V in the second). One step's tokens are a ragged batch: request ``r`` owns
query rows ``query_start_loc[r]:query_start_loc[r + 1]``, the last tokens of
its ``seq_lens[r]``. Prefill, decode, mixed batches, chunked prefill and
prefix-cache hits are the same computation: queries are gathered per
request into ``[R, max_query_len]``, keys and values per request from the
block table into ``[R, max_blocks * block_size]``, and every query sees the
keys up to its own position (and within the sliding window where the layer
has one). Grouped-query heads share their KV head without copies.
"""
from dataclasses import dataclass
from typing import ClassVar

import torch
from vllm.config import get_current_vllm_config
from vllm.v1.attention.backend import (AttentionBackend, AttentionImpl,
                                       AttentionMetadataBuilder, AttentionType, MultipleOf)
from vllm.v1.kv_cache_interface import KVCacheLayout

from torch_tpu.mode import execution_mode

from .kernels import token_requests


class TpuAttentionBackend(AttentionBackend):
    forward_includes_kv_cache_update: bool = True
    supported_dtypes: ClassVar[list] = [torch.bfloat16, torch.float16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto"]

    @staticmethod
    def get_name():
        return "CUSTOM"

    @staticmethod
    def get_impl_cls():
        return TpuAttentionImpl

    @staticmethod
    def get_builder_cls():
        return TpuAttentionMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None):
        return [MultipleOf(1)]

    @classmethod
    def get_supported_head_sizes(cls):
        return []  # any

    @classmethod
    def supported_kv_cache_layouts(cls):
        return (KVCacheLayout.LBHNC,)

    @classmethod
    def supports_sliding_window(cls):
        return True

    @classmethod
    def supports_attn_type(cls, attn_type):
        return attn_type == AttentionType.DECODER


@dataclass
class TpuAttentionMetadata:
    num_actual_tokens: int
    num_reqs: int
    max_query_len: int
    max_seq_len: int
    query_start_loc: torch.Tensor  # [num_reqs + 1], tpu
    seq_lens: torch.Tensor  # [num_reqs], tpu
    block_table: torch.Tensor  # [num_reqs, max_blocks], tpu
    slot_mapping: torch.Tensor  # [num_tokens], tpu; -1 for padding
    causal: bool = True


class TpuAttentionMetadataBuilder(AttentionMetadataBuilder[TpuAttentionMetadata]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        m = common_attn_metadata
        if not isinstance(m.causal, bool):
            raise NotImplementedError("tpu attention: per-request causality is not supported")
        return TpuAttentionMetadata(
            num_actual_tokens=m.num_actual_tokens, num_reqs=m.num_reqs,
            max_query_len=m.max_query_len, max_seq_len=m.max_seq_len,
            query_start_loc=m.query_start_loc, seq_lens=m.seq_lens,
            block_table=m.block_table_tensor, slot_mapping=m.slot_mapping, causal=m.causal)


class TpuAttentionImpl(AttentionImpl):
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, alibi_slopes=None,
                 sliding_window=None, kv_cache_dtype="auto", logits_soft_cap=None,
                 attn_type=AttentionType.DECODER, kv_sharing_target_layer_name=None,
                 sinks=None, **kwargs):
        if alibi_slopes is not None:
            raise NotImplementedError("tpu attention: ALiBi is not supported")
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(f"tpu attention: {attn_type} attention is not supported")
        if kv_cache_dtype not in ("auto", None):
            raise NotImplementedError(f"tpu attention: KV cache dtype {kv_cache_dtype!r} is "
                                      f"not supported (the model's dtype is)")
        self.num_heads, self.head_size, self.scale = num_heads, head_size, float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.sliding_window = sliding_window
        self.logits_soft_cap = logits_soft_cap or 0.0
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.sinks = sinks
        # Compiled serving runs each attention call as one fused graph
        # (one program, cached by its shapes) between the compiled pieces;
        # enforce_eager keeps op-by-op execution.
        self.fused = not get_current_vllm_config().model_config.enforce_eager

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output=None,
                output_scale=None, output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("tpu attention: fused output quantization")
        if attn_metadata is None:  # profiling run: nothing to attend
            return output
        if self.fused:
            with execution_mode("fused"):
                return self._forward(layer, query, key, value, kv_cache, attn_metadata, output)
        return self._forward(layer, query, key, value, kv_cache, attn_metadata, output)

    def _forward(self, layer, query, key, value, kv_cache, attn_metadata, output):
        # Every shape below is the step's padded token count (the runner's
        # bucket) or a power of two: a bounded set of programs, whatever the
        # batch. The padding tokens' K/V go to slot 0 of block 0, vLLM's null
        # block, which no request owns.
        m = attn_metadata
        n_pad = query.shape[0]
        if self.kv_sharing_target_layer_name is None and key is not None:
            slots = _rows(m.slot_mapping, n_pad, 0)
            real = torch.arange(n_pad, device=slots.device) < m.num_actual_tokens
            slots = torch.where(real & (slots >= 0), slots, 0)
            bs = kv_cache.shape[2]
            # K and V side by side, one in-place write into the layer's cache
            kv_cache[slots // bs, :, slots % bs] = torch.cat([key, value], -1).to(kv_cache.dtype)
        out = paged_attention(query, kv_cache, m, self.scale, self.num_kv_heads,
                              self.sliding_window, self.logits_soft_cap, self.sinks)
        output[:n_pad] = out.reshape(output[:n_pad].shape).to(output.dtype)
        return output


def _pow2(x):
    return 1 << max(int(x) - 1, 0).bit_length()


def _rows(t, rows, fill):
    """The first |rows| rows of |t|. vLLM's metadata tensors are views of
    persistent buffers padded past the batch (offsets repeated, lengths 0):
    reading on into the buffer gives a shape that does not depend on the
    batch. Elsewhere the rows are padded with |fill| ("last": t's last row)."""
    if t.shape[0] >= rows:
        return t[:rows]
    end = t.storage_offset() + (rows - 1) * t.stride(0) + sum(
        (k - 1) * st for k, st in zip(t.shape[1:], t.stride()[1:])) + 1
    if end * t.element_size() <= t.untyped_storage().nbytes():
        return t.as_strided((rows, *t.shape[1:]), t.stride(), t.storage_offset())
    pad = t[-1:] if fill == "last" else torch.full_like(t[:1], fill)
    return torch.cat([t, pad.expand(rows - t.shape[0], *t.shape[1:])])


def paged_attention(query, kv_cache, m, scale, num_kv_heads, sliding_window=None,
                    soft_cap=0.0, sinks=None):
    """Attention of |query| ([n, heads, d]: the step's tokens, maybe followed
    by padding rows) over the paged cache, per request of |m|; [n, heads,
    d] (padding rows hold garbage). Requests and query rows per request are
    padded to powers of two."""
    n, heads, d = query.shape
    dev = query.device
    R = _pow2(m.num_reqs)
    L = min(_pow2(m.max_query_len), n)
    bs = kv_cache.shape[2]
    # Blocks gathered per request: a power of two (slots past a request's
    # length are masked below), so that decoding steps reuse a few
    # executables as sequences grow.
    nblk = max((m.max_seq_len + bs - 1) // bs, 1)
    nblk = min(_pow2(nblk), m.block_table.shape[1])
    S = nblk * bs
    g = heads // num_kv_heads
    qsl = _rows(m.query_start_loc, R + 1, "last").to(torch.int64)
    seq = _rows(m.seq_lens, R, 0).to(torch.int64)
    table = _rows(m.block_table, R, 0)
    qlen = qsl[1:] - qsl[:-1]
    # queries per request: [R, L] rows of |query| (clamped past each request)
    j = torch.arange(L, device=dev)
    rows = (qsl[:-1, None] + j[None]).clamp(max=max(n - 1, 0))
    q = query[rows].float()  # [R, L, heads, d]
    q = q.view(R, L, num_kv_heads, g, d).permute(0, 2, 3, 1, 4)  # [R, kvh, g, L, d]
    # keys and values per request: [R, kvh, S, d]
    kv = kv_cache[table[:, :nblk].to(torch.int64)]  # [R, nblk, kvh, bs, 2d]
    kv = kv.permute(0, 2, 1, 3, 4).reshape(R, num_kv_heads, S, 2 * d).float()
    s = torch.arange(S, device=dev)
    in_seq = s[None] < seq[:, None]  # [R, S]
    # Slots past a request's length hold whatever the block held before
    # (another request's values, or none): zeroed, so that a masked weight
    # of 0 never meets a stale inf or NaN.
    kv = kv.masked_fill(~in_seq[:, None, :, None], 0.0)
    k, v = kv[..., :d], kv[..., d:]
    scores = torch.matmul(q, k.unsqueeze(2).transpose(-1, -2)) * scale  # [R, kvh, g, L, S]
    if soft_cap:
        scores = torch.tanh(scores / soft_cap) * soft_cap
    # query j of request r is at position seq - qlen + j
    qpos = (seq - qlen)[:, None] + j[None]  # [R, L]
    allowed = (s[None, None] <= qpos[..., None]) & in_seq[:, None]
    if sliding_window is not None and sliding_window > 0:
        allowed &= s[None, None] > qpos[..., None] - sliding_window
    # rows past a request's queries see key 0 (never read back): no NaN rows
    allowed |= (j[None] >= qlen[:, None])[..., None] & (s == 0)[None, None]
    scores = scores.masked_fill(~allowed[:, None, None], float("-inf"))
    if sinks is not None:
        sink = sinks.float().view(1, num_kv_heads, g, 1, 1).expand(R, -1, -1, L, 1)
        probs = torch.softmax(torch.cat([scores, sink], -1), -1)[..., :-1]
    else:
        probs = torch.softmax(scores, -1)
    out = torch.matmul(probs, v.unsqueeze(2))  # [R, kvh, g, L, d]
    out = out.permute(0, 3, 1, 2, 4).reshape(R, L, heads, d)
    # back to the step's token order (padding rows read row 0 of the last request)
    req = token_requests(qsl, n).clamp(max=R - 1)
    row = (torch.arange(n, device=dev) - qsl[req]).clamp(0, L - 1)
    return out[req, row]
