"""FlexAttention on tpu, eager and compiled, forward and gradients, against
the attention it describes written out in float64 on the CPU (PyTorch's own
flex_attention has no CPU backward to compare with). float64 throughout, so
the tolerances are float64's defaults: the dense implementation and the
reference differ only in summation order."""
import copy

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

pytestmark = pytest.mark.usefixtures("no_fallback")

L, HEADS, KV_HEADS, D = 32, 4, 2, 8


def _qkv(kv_heads=HEADS):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, HEADS, L, D, generator=g, dtype=torch.float64),
            torch.randn(2, kv_heads, L, D, generator=g, dtype=torch.float64),
            torch.randn(2, kv_heads, L, D, generator=g, dtype=torch.float64))


def _causal(b, h, q, k):
    return q >= k


def _reference(q, k, v, bias):
    """Causal softmax attention with a per-head additive bias, GQA by
    repeating the key/value heads."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-2, -1) / D ** 0.5 + bias[None]
    s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def _flex(bias, device):
    mask = create_block_mask(_causal, None, None, L, L, device=device)

    def score_mod(score, b, h, q, k):
        return score + bias[h, q, k]

    def attend(q, k, v):
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=mask,
                              enable_gqa=q.shape[1] != k.shape[1])

    return attend


@pytest.mark.parametrize("kv_heads", [HEADS, KV_HEADS], ids=["mha", "gqa"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_flex_attention_matches_the_attention_it_describes(compiled, kv_heads, fresh_dynamo):
    bias = torch.randn(HEADS, L, L, generator=torch.Generator().manual_seed(1),
                       dtype=torch.float64)
    q, k, v = _qkv(kv_heads)
    ref_in = [t.clone().requires_grad_() for t in (q, k, v)]
    want = _reference(*ref_in, bias)
    want.square().sum().backward()

    attend = _flex(bias.to("tpu"), "tpu")
    fn = torch.compile(attend, backend="tpu") if compiled else attend
    tpu_in = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    got = fn(*tpu_in)
    got.square().sum().backward()
    torch.testing.assert_close(got.detach().cpu(), want.detach())
    for t, r in zip(tpu_in, ref_in):
        torch.testing.assert_close(t.grad.cpu(), r.grad)


def test_transformers_flex_attention_on_tpu(fresh_dynamo):
    """attn_implementation="flex_attention" (which transformers turns off on a
    tpu host) computes the logits of the eager attention, in eager (where
    transformers compiles flex_attention and create_block_mask itself: graphs
    whose only tpu values are made inside them) and under torch.compile."""
    transformers = pytest.importorskip("transformers")
    from transformers.utils import is_torch_flex_attn_available

    assert is_torch_flex_attn_available()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="flex_attention")
    model = transformers.LlamaForCausalLM(cfg).eval()
    ref_cfg = copy.deepcopy(cfg)
    ref_cfg._attn_implementation = "eager"
    ref = transformers.LlamaForCausalLM(ref_cfg).eval()
    ref.load_state_dict(model.state_dict())
    ids = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        want = ref(ids).logits
        on_tpu = model.to("tpu")
        for fn in (on_tpu, torch.compile(on_tpu, backend="tpu")):
            got = fn(ids.to("tpu")).logits
            assert on_tpu.config._attn_implementation == "flex_attention"
            torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
