"""nn.MultiheadAttention's and nn.TransformerEncoderLayer's inference fast
paths (_native_multi_head_attention, _transformer_encoder_layer_fwd: taken in
evaluation mode without gradients, batch first, query is key is value) run
natively on tpu and give the CPU's results: every mask kind (causal, key
padding, both, a fully masked row: zeros where weights are returned, NaN
where not, as the CPU kernel), weights averaged or per head or none.

Tolerance: 1e-5 absolute on outputs of magnitude < 1 (a few float32 ulp
through two projections and a softmax; the largest seen is 5e-7)."""
import itertools

import pytest
import torch

pytestmark = pytest.mark.usefixtures("no_fallback")

B, T, D, H = 2, 5, 16, 4
CAUSAL = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
ROW_MASKED = torch.zeros(T, T, dtype=torch.bool)
ROW_MASKED[2] = True
KEY_PADDING = torch.tensor([[False] * T, [False, False, False, True, True]])


def assert_like_cpu(got, want):
    if want is None:
        assert got is None
        return
    got = got.cpu()
    assert got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got.nan_to_num(), want.nan_to_num(), rtol=0, atol=1e-5)


def fast_path_ops():
    return {op: n for op, n in torch.tpu.fallback_counts().items()
            if "multi_head" in op or "encoder_layer" in op}


@pytest.mark.parametrize("attn_mask,key_padding_mask", [
    (None, None), (CAUSAL, None), (None, KEY_PADDING), (CAUSAL, KEY_PADDING), (ROW_MASKED, None)],
    ids=["none", "causal", "padding", "both", "row_masked"])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_multihead_attention_fast_path(attn_mask, key_padding_mask, need_weights, average):
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    mha = torch.nn.MultiheadAttention(D, H, batch_first=True).eval()
    torch.nn.init.normal_(mha.out_proj.bias)
    kw = dict(attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=need_weights,
              average_attn_weights=average)
    with torch.no_grad():
        want = mha(x, x, x, **kw)
        xt = x.to("tpu")
        got = mha.to("tpu")(xt, xt, xt, **{k: v.to("tpu") if isinstance(v, torch.Tensor) else v
                                           for k, v in kw.items()})
    for g, w in zip(got, want):
        assert_like_cpu(g, w)
    assert not fast_path_ops()


@pytest.mark.parametrize("norm_first,activation,masked",
                         list(itertools.product([False, True], ["relu", "gelu"], [False, True])))
def test_transformer_encoder_layer_fast_path(norm_first, activation, masked):
    torch.manual_seed(1)
    x = torch.randn(B, T, D)
    layer = torch.nn.TransformerEncoderLayer(D, H, 32, activation=activation,
                                             norm_first=norm_first, batch_first=True).eval()
    with torch.no_grad():
        want = layer(x, src_mask=CAUSAL if masked else None)
        got = layer.to("tpu")(x.to("tpu"), src_mask=CAUSAL.to("tpu") if masked else None)
    assert_like_cpu(got, want)
    assert not fast_path_ops()


def test_bad_shapes_name_the_op():
    q = torch.randn(B, T, D, device="tpu")
    w, b = torch.randn(3 * D, D, device="tpu"), torch.randn(3 * D, device="tpu")
    with pytest.raises(RuntimeError, match="_native_multi_head_attention.*divisible"):
        torch._native_multi_head_attention(q, q, q, D, 3, w, b, w[:D], b[:D])
    with pytest.raises(RuntimeError, match="_native_multi_head_attention.*qkv_weight"):
        torch._native_multi_head_attention(q, q, q, D, H, w[:D], b, w[:D], b[:D])
