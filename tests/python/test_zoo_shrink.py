"""The zoo's config shrink (CPU only): the fixed "basic" shrink breaks
invariants of some model types; the ladder's gentler levels keep them, and
those models build and run forward."""
import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from torch_tpu import zoo  # noqa: E402


def _config(model_type, level):
    return zoo.shrink(transformers.AutoConfig.for_model(model_type), level)


def test_basic_level_is_the_fixed_shrink():
    c = _config("llama", "basic")
    assert (c.hidden_size, c.num_attention_heads, c.num_key_value_heads) == \
        (zoo.HIDDEN, zoo.HEADS, zoo.KV_HEADS)
    assert (c.num_hidden_layers, c.intermediate_size, c.vocab_size) == (2, zoo.FFN, zoo.VOCAB)


def test_consistent_multi_head_latent_attention():
    # basic shrinks head_dim but not the rope/nope/latent sizes: rope and
    # attention shapes disagree; consistent scales them all per head
    c = _config("deepseek_v3", "consistent")
    big = transformers.AutoConfig.for_model("deepseek_v3")
    assert c.num_key_value_heads == c.num_attention_heads  # MLA is multi-head
    assert c.qk_head_dim == c.qk_nope_head_dim + c.qk_rope_head_dim
    ratio = big.qk_nope_head_dim / big.qk_rope_head_dim
    assert c.qk_nope_head_dim / c.qk_rope_head_dim == ratio
    assert c.kv_lora_rank < big.kv_lora_rank and c.qk_rope_head_dim % 2 == 0


def test_consistent_derived_sizes():
    # head_dim None (derived) and kv heads None (= heads) stay derived
    m = _config("ministral", "consistent")
    assert m.head_dim * m.num_attention_heads == m.hidden_size
    n = _config("nemotron", "consistent")
    assert n.num_key_value_heads == n.num_attention_heads
    # Mamba heads times head width equals expand times width
    b = _config("bamba", "consistent")
    assert b.mamba_n_heads * b.mamba_d_head == b.mamba_expand * b.hidden_size


def test_consistent_keeps_a_layer_of_every_kind():
    # the first layers of these stacks are all linear/sliding: the shrunk
    # stack must still hold a full-attention layer, with per-layer lists cut
    # to the same layers
    big = transformers.AutoConfig.for_model("olmo_hybrid")
    c = _config("olmo_hybrid", "consistent")
    assert set(c.layer_types) == set(big.layer_types)
    assert len(c.layer_types) == c.num_hidden_layers < big.num_hidden_layers
    g = _config("gemma3n_text", "consistent")
    assert len(g.intermediate_size) == g.num_hidden_layers
    assert "full_attention" in g.layer_types


def test_consistent_rope_sections_fit_the_head():
    c = _config("cosmos3_edge_text", "consistent")
    assert sum(c.rope_parameters["mrope_section"]) == c.head_dim // 2


def test_consistent_sub_config_widths_follow():
    # a size in one sub-config that names another's width follows it
    c = _config("siglip", "consistent")
    assert c.text_config.projection_size == c.vision_config.hidden_size


@pytest.mark.parametrize("name,model_type", [
    ("DeepseekV3Model", "deepseek_v3"),
    ("MinistralModel", "ministral"),
    ("OlmoHybridModel", "olmo_hybrid"),
    ("EsmModel", "esm"),
    ("SiglipModel", "siglip"),
])
def test_ladder_builds_and_runs_on_cpu(name, model_type):
    cls = getattr(transformers, name)
    with pytest.raises(Exception):
        zoo.build_level(cls, model_type, "base", "basic")
    model, config, inputs, out, level = zoo.build(cls, model_type, "base")
    assert level == "consistent"
    assert sum(p.numel() for p in model.parameters()) < zoo.configs._MAX_PARAMS
    tensors = [t for t in zoo.harness._tensors(out, []) if t.is_floating_point()]
    assert tensors and all(bool(torch.isfinite(t).all()) for t in tensors)


def test_gentle_levels_refuse_large_models():
    # layers-only keeps Llama's 4096-wide layers: far above the cap
    with pytest.raises(ValueError, match="parameters"):
        zoo.build_level(transformers.LlamaModel, "llama", "base", "layers")
