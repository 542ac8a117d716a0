"""PyTorch versions of the Triton kernels vLLM's runner launches every step
(registered through vllm.triton_utils.dispatcher)."""
import torch


def token_requests(query_start_loc, num_tokens):
    """The request of each of the step's first |num_tokens| tokens, from the
    num_reqs + 1 nondecreasing offsets |query_start_loc|."""
    t = torch.arange(num_tokens, device=query_start_loc.device, dtype=query_start_loc.dtype)
    return torch.searchsorted(query_start_loc[1:].contiguous(), t, right=True)


def compute_slot_mapping(num_tokens, max_num_tokens, query_start_loc, positions, block_table,
                         block_table_stride, slot_mapping, KV_CACHE_BLOCK_SIZE,
                         TOTAL_CP_WORLD_SIZE, TOTAL_CP_RANK, CP_KV_CACHE_INTERLEAVE_SIZE, PAD_ID,
                         BLOCK_SIZE):
    """slot_mapping[t] = block_table[request of t, pos // block] * block +
    pos % block for the first num_tokens tokens; PAD_ID up to max_num_tokens."""
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("tpu: context-parallel KV caches are not supported")
    req = token_requests(query_start_loc, num_tokens)
    pos = positions[:num_tokens].to(torch.int64)
    bs = KV_CACHE_BLOCK_SIZE
    blocks = block_table[req, pos // bs].to(torch.int64)
    slot_mapping[:num_tokens] = blocks * bs + pos % bs
    if max_num_tokens > num_tokens:
        slot_mapping[num_tokens:max_num_tokens] = PAD_ID
