"""Paged attention on tpu (torch_tpu.vllm.attention) against dense causal
attention per request on the CPU: a mixed batch (a long prefill, a chunk of
a prefill whose start is cached, decodes), grouped-query heads, scattered
blocks, with and without a sliding window, NaN in the slots no request
wrote. float32: matmuls and a softmax in another order, so rtol/atol 1e-5."""
import pytest
import torch

from torch_tpu.vllm.attention import TpuAttentionMetadata, paged_attention


def _case(window, heads=4, kv_heads=2, d=16, bs=4, seed=0, stale=0.0, pad=0):
    g = torch.Generator().manual_seed(seed)
    # (cached tokens before this step, tokens this step) per request
    reqs = [(0, 9), (6, 5), (13, 1), (3, 1), (0, 1)]
    nblocks = 64
    cache = torch.full((nblocks, kv_heads, bs, 2 * d), stale)  # slots no request wrote
    perm = torch.randperm(nblocks - 1, generator=g) + 1  # block 0 unused
    tables, k_all, v_all, q_all, starts, used = [], [], [], [], [0], 0
    for cached, new in reqs:
        total = cached + new
        nb = (total + bs - 1) // bs
        table = perm[used:used + nb]
        used += nb
        k = torch.randn(total, kv_heads, d, generator=g)
        v = torch.randn(total, kv_heads, d, generator=g)
        for p in range(total):
            cache[table[p // bs], :, p % bs, :d] = k[p]
            cache[table[p // bs], :, p % bs, d:] = v[p]
        tables.append(table)
        k_all.append(k)
        v_all.append(v)
        q_all.append(torch.randn(new, heads, d, generator=g))
        starts.append(starts[-1] + new)
    width = max(len(t) for t in tables)
    bt = torch.zeros(len(reqs), width, dtype=torch.int32)
    for i, t in enumerate(tables):
        bt[i, :len(t)] = t
    query = torch.cat(q_all)
    want = []
    for (cached, new), q, k, v in zip(reqs, q_all, k_all, v_all):
        kk = k.repeat_interleave(heads // kv_heads, 1)
        vv = v.repeat_interleave(heads // kv_heads, 1)
        s = torch.einsum("qhd,khd->hqk", q, kk) * d ** -0.5
        qpos = torch.arange(cached, cached + new)[:, None]
        kpos = torch.arange(cached + new)[None]
        ok = kpos <= qpos
        if window:
            ok &= kpos > qpos - window
        s = s.masked_fill(~ok, float("-inf"))
        want.append(torch.einsum("hqk,khd->qhd", s.softmax(-1), vv))
    seq = torch.tensor([c + n for c, n in reqs], dtype=torch.int32)
    meta = TpuAttentionMetadata(
        num_actual_tokens=query.shape[0], num_reqs=len(reqs),
        max_query_len=max(n for _, n in reqs), max_seq_len=int(seq.max()),
        query_start_loc=torch.tensor(starts, dtype=torch.int32).to("tpu"),
        seq_lens=seq.to("tpu"), block_table=bt.to("tpu"),
        slot_mapping=torch.zeros(query.shape[0], dtype=torch.int64).to("tpu"))
    # |pad| rows after the step's tokens (the runner's token bucket)
    padded = torch.cat([query, torch.randn(pad, heads, d, generator=g)])
    got = paged_attention(padded.to("tpu"), cache.to("tpu"), meta, d ** -0.5, kv_heads,
                          sliding_window=window)
    assert got.shape == padded.shape
    return got[:query.shape[0]].cpu(), torch.cat(want)


@pytest.mark.parametrize("pad", [0, 15])
@pytest.mark.parametrize("window", [None, 5])
def test_mixed_batch_gqa_scattered_blocks(window, pad):
    # 5 requests and up to 9 query rows each, padded to 8 and 16
    got, want = _case(window, pad=pad)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_stale_nan_in_unwritten_slots_is_never_read():
    # a block's slots past its request's length may hold another request's
    # values, inf or NaN among them
    got, want = _case(None, stale=float("nan"))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
