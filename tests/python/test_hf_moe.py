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
