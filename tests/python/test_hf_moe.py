"""Mixture-of-Experts models of Transformers on tpu against the CPU (the
wider sweep: python -m torch_tpu.zoo.moe).

Both devices run Transformers' grouped-matmul experts; the routers choose
experts with topk. Where router scores tie exactly (a router that starts at
zero ties all of them) which experts topk returns is unspecified and the
CPU and tpu choose differently: the reference is then the CPU with ties
resolved as tpu resolves them, lowest index first (test_sort_scan_ops
checks that order on the op).

Tolerance (float32): max|tpu - cpu| <= 1e-5 * max|cpu|. Three small layers
chain a few hundred ops that XLA fuses and reassociates (a few ulp each);
the largest difference measured over the families is 9e-7 of the scale.
A wrong expert, weight or offset moves routed tokens by 0.1..1 of it.
"""
import contextlib
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from torch_tpu.zoo import moe  # noqa: E402

REL_TOL = 1e-5


def assert_close_to_scale(got, want):
    err, rel = moe.difference(got, want)
    assert rel <= REL_TOL, f"max error {err:.3g}, {rel:.3g} of the scale"


def assert_matches_cpu_with_tpu_ties(model, ids):
    ran = []
    hooks = [m.register_forward_hook(lambda *a: ran.append(1)) for m in moe.routed_experts(model)]
    want = moe.run_cpu(model, ids, ties=True)
    for h in hooks:
        h.remove()
    assert ran, "no routed experts ran"
    assert_close_to_scale(moe.run_tpu(model, ids), want)


# The settings of the report: 4 experts, top-2, 2 shared experts, hidden and
# expert width 32; layer 0 is dense, layers 1 and 2 route.
AFMOE = dict(vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
             num_hidden_layers=3, num_dense_layers=1, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, num_experts=4, num_experts_per_tok=2,
             num_shared_experts=2, global_attn_every_n_layers=2, sliding_window=8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_afmoe_tied_and_untied_routing(seed):
    torch.manual_seed(seed)
    model = transformers.AfmoeModel(transformers.AfmoeConfig(**AFMOE)).eval()
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(seed))
    routers = [layer.mlp.router.gate.weight for layer in model.layers[1:]]
    # AFMoE's routers start at zero: every score ties, topk alone routes
    assert all(bool((w == 0).all()) for w in routers)
    assert_matches_cpu_with_tpu_ties(model, ids)
    # trained-like routers: distinct scores, the plain CPU is the reference
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for w in routers:
            w.copy_(torch.randn(w.shape, generator=g) * 0.02)
    assert_close_to_scale(moe.run_tpu(model, ids), moe.run_cpu(model, ids))


# AFMoE's own routing (64 experts, top-6, 2 shared) under a shrunk attention
# (hidden 32, 2 heads, 1 KV head of width 16) and two layers, the second routed.
# As built, the routers are zero: all 64 sigmoid scores are exactly 0.5 and the
# CPU's topk returns experts such as 44, 41, 42, 43, 46, 47 where tpu's returns
# 0..5, which moved the output by ~20% of its scale. With trained-like routers
# the 6th and 7th scores are apart and both devices pick the same experts.
AFMOE_TOP6 = dict(vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=16)


def _routed(model, ids, device, ties=False):
    """(first output, [(router input, router logits, selected experts)] per
    routed layer)."""
    seen = []
    def keep(module, args, out):
        seen.append((args[0].cpu(), out[0].cpu(), out[2].cpu()))
    hooks = [m.register_forward_hook(keep)
             for n, m in model.named_modules() if n.endswith("mlp.router")]
    try:
        with torch.no_grad(), (moe.lowest_index_ties() if ties else contextlib.nullcontext()):
            out = model(input_ids=ids.to(device))[0].cpu()
    finally:
        for h in hooks:
            h.remove()
    return out, seen


@pytest.mark.parametrize("cls", ["AfmoeModel", "AfmoeForCausalLM"])
def test_afmoe_top6_of_64_experts(cls):
    torch.manual_seed(0)
    config = transformers.AfmoeConfig(**AFMOE_TOP6)
    assert (config.num_experts, config.num_experts_per_tok, config.num_shared_experts) == (64, 6, 2)
    model = getattr(transformers, cls)(config).eval()
    tpu = copy.deepcopy(model).to("tpu")
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(0))
    # as built: every score ties, so only the tie-breaking differs
    got, _ = _routed(tpu, ids, "tpu")
    want, seen = _routed(model, ids, "cpu", ties=True)
    assert len(seen) == 1 and bool((torch.sigmoid(seen[0][1]) == 0.5).all())
    assert_close_to_scale(got, want)
    # trained-like routers, redrawn on both devices
    gates = [m.gate.weight for n, m in model.named_modules() if n.endswith("mlp.router")]
    g = torch.Generator().manual_seed(100)
    with torch.no_grad():
        for w in gates:
            w.copy_(torch.randn(w.shape, generator=g) * 0.02)
    tpu = copy.deepcopy(model).to("tpu")
    want, cpu_seen = _routed(model, ids, "cpu")
    got, tpu_seen = _routed(tpu, ids, "tpu")
    for (x, _, cpu_sel), (_, _, tpu_sel), w in zip(cpu_seen, tpu_seen, gates):
        # no near tie: the 6th and 7th scores (float64) stand well apart
        scores = torch.sigmoid(x.double().reshape(-1, x.shape[-1]) @ w.detach().double().T)
        top = scores.topk(7, dim=-1).values
        assert float((top[:, 5] - top[:, 6]).min()) > 1e-5
        assert torch.equal(cpu_sel, tpu_sel)
    assert_close_to_scale(got, want)


# A sample of the families over expert counts, top-1/top-2, shared experts
# and normalised top-k weights: (model type, experts, top-k, shared, norm).
FAMILIES = [
    ("mixtral", 4, 1, None, None),
    ("mixtral", 8, 2, None, None),
    ("qwen2_moe", 8, 2, None, False),
    ("qwen3_moe", 4, 2, None, True),
    ("deepseek_v3", 8, 2, 1, True),
    ("olmoe", 8, 1, None, False),
    ("granitemoeshared", 4, 2, None, None),
    ("dbrx", 4, 1, None, None),
    ("llama4_text", 4, 1, None, None),
    ("phimoe", 4, 2, None, None),
    ("afmoe", 8, 1, 0, None),
]


@pytest.mark.parametrize("family,experts,top_k,shared,norm", FAMILIES,
                         ids=[f"{f}-e{e}-k{k}-s{s}-n{n}" for f, e, k, s, n in FAMILIES])
def test_moe_family_matches_cpu(family, experts, top_k, shared, norm):
    model = moe.build(family, experts, top_k, shared, norm)
    assert model is not None, "the setting does not apply to the family"
    ids = torch.randint(0, model.config.vocab_size, (2, 9),
                        generator=torch.Generator().manual_seed(0))
    assert_matches_cpu_with_tpu_ties(model, ids)
