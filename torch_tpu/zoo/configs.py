"""Shrinking a model type's default config to a small model of the same
architecture: a ladder of levels (``LEVELS``) from the generic shrink to
gentler ones that keep the invariants it breaks, plus per-model-type
overrides (``_OVERRIDES``), each with its reason."""
import math
import re

from .settings import FFN, HEADS, HIDDEN, IMAGE, KV_HEADS, SEQ, VOCAB


_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers",
           "decoder_layers", "num_encoder_layers", "num_decoder_layers")
_WIDTHS = ("hidden_size", "d_model", "n_embd", "embed_dim", "dim")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads",
          "encoder_attention_heads", "decoder_attention_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads")
_FFNS = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff",
         "moe_intermediate_size", "shared_expert_intermediate_size")
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")

# config key -> value it is shrunk to (only ever made smaller)
_SHRINK = {
    **dict.fromkeys(_LAYERS, 2),
    **dict.fromkeys(_WIDTHS, HIDDEN),
    **dict.fromkeys(_HEADS, HEADS),
    **dict.fromkeys(_KV_HEADS, KV_HEADS),
    "mamba_n_heads": HEADS,
    **dict.fromkeys(("head_dim", "rotary_dim"), HIDDEN // HEADS),
    **dict.fromkeys(_FFNS, FFN),
    **dict.fromkeys(_EXPERTS, 4),
    "num_experts_per_tok": 2,
    "vocab_size": VOCAB,
    "decoder_vocab_size": VOCAB,  # Marian's separate target vocabulary
    # images: 64x64 still gives patch grids and CNN stages; 600x600 (EfficientNet)
    # would take gigabytes
    "image_size": IMAGE,
}
# the keys the gentlest shrink ("layers") still applies: depth and the
# lookup tables that do not change the shape of the computation
_SIZE_ONLY = set(_LAYERS) | set(_EXPERTS) | {"num_experts_per_tok", "vocab_size",
                                              "decoder_vocab_size", "image_size"}

# Shrink levels, tried in order until the model builds and runs forward on the
# CPU (see ``build``):
# * basic: the fixed values of _SHRINK, nothing else;
# * consistent: also keeps the invariants that tie other sizes to those (head
#   widths, kv heads equal to heads, sizes that name another config's width,
#   per-layer lists, a layer of every kind);
# * scaled: every width divided by one power of two (ratios and divisibility
#   kept), head counts as they are;
# * layers: depth, vocabulary, experts and image size only.
# The last two can stay large, so they are refused above _MAX_PARAMS.
LEVELS = ("basic", "consistent", "scaled", "layers")
_MAX_PARAMS = 12_000_000

# Names of integer config entries that are widths (channels of some tensor),
# and names that look alike but count or size something else.
_WIDTH_NAME = re.compile(r"(hidden_size|hidden_size_global|hidden_dim|projection_size|_input_size|_output_size|_dim|_channels|_rank|^d_inner|^d_latents|"
                         r"embedding_size|_width|head_size|headdim|^d_head|^d_kv|_groups)$")
_NOT_WIDTH = re.compile(r"vocab|image|patch|position|window|kernel|chunk|max_|sampling|codebook_size|"
                        r"batch|mel|bins|stride|pool_size|pooling|seq|length|frame|rate|label|^num_|^n_|layer|"
                        r"stage|depth|ratio|factor|token|_ids?$|_index$|bucket|time_step_rank")
# Widths per attention head (and low-rank projections feeding heads): scaled
# by how much narrower each head got, so sums such as qk_head_dim = nope + rope
# and rope sections still hold.
_PER_HEAD = re.compile(r"(head_dim|head_size|headdim|^d_head|^d_kv|rotary_dim|lora_rank)$")
_HEADS_NAME = re.compile(r"^(num|n)_.*heads$|_n_heads$|_num_heads$")
# (heads, width per head, width, factor): heads * per head == factor * width
# in the default config stays true after the shrink
_PRODUCTS = [
    ("mamba_n_heads", "mamba_d_head", "hidden_size", "mamba_expand"),
    ("n_mamba_heads", "mamba_headdim", "hidden_size", "mamba_expand"),
    ("num_heads", "head_dim", "hidden_size", "expand"),
    ("n_head", "d_head", "d_model", None),
]

# model type -> config entries set after the generic shrink (nested dicts go
# into sub-configs), for invariants a name-based rule cannot see.
_MROPE_16 = {"rope_parameters": {"mrope_section": [2, 3, 3]}}  # t/h/w split of 16-wide heads
_OVERRIDES = {
    # hash n-gram embeddings: half a million rows per n-gram size by default
    "blt": {"encoder_hash_byte_group_vocab": 512},
    # the text and speech encoders rotate the first max(projection_dim /
    # (2 * heads), 32) channels of each head: heads 64 wide, half rotary as
    # in the default
    "clvp": {enc: {"hidden_size": 128, "num_attention_heads": 2, "projection_dim": 128}
             for enc in ("text_config", "speech_config")},
    # attention windows pick their rope by layer type; the default table is empty
    "cohere_compass": {"text_config": {"rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 10000.0}}}},
    "cohere_compass_text": {"rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    # the default attention config lacks the rope base the model reads
    # (and clamps q/k/v by a bound the default leaves None)
    "dbrx": {"attn_config": {"rope_theta": 10000.0, "clip_qkv": 8.0}},
    # 2-D decoder ids are folded into (batch, channels, steps) and transposed,
    # and the channel embedding then views that transposed tensor: only one
    # channel (one delay) keeps the view valid
    "dia": {"decoder_config": {"num_channels": 1}, "delay_pattern": [0]},
    # default MoE sizes are None (checkpoints set them)
    "diffusion_gemma": {"text_config": {"num_experts": 4, "top_k_experts": 2,
                                        "moe_intermediate_size": 64}},
    "dots1": {"n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2},
    # the last backbone stage feeds the matcher: its width is the hidden size
    # (stage widths an eighth of the default's). The 2-D rotary embedding
    # fills a quarter of the width per axis: heads == 2 * partial factor (4)
    "efficientloftr": {"out_features": [8, 8, 16, 32], "stage_num_blocks": [1, 2, 2, 2],
                       "num_attention_heads": 8},
    # rope sections of a 16-wide head (sum 8): the default code sections need 128
    "ernie4_5_vl_moe": {"text_config": {"rope_parameters": {"mrope_section": [3, 3, 2]}}},
    # KV sharing across the last layers needs layers of every kind before them
    "gemma3n": {"text_config": {"num_kv_shared_layers": 0}},
    "gemma3n_text": {"num_kv_shared_layers": 0},
    # the assistant's validation: no per-layer inputs, and every layer reads
    # shared KV (0 becomes "all layers" once the config is built)
    "gemma4_assistant": {"text_config": {"hidden_size_per_layer_input": 0,
                                         "vocab_size_per_layer_input": 0,
                                         "num_kv_shared_layers": 0}},
    # half of each 16-wide head is rotary (partial factor 0.5): sections sum to 4
    "glm4v_moe_text": {"rope_parameters": {"mrope_section": [1, 1, 2]}},
    # rope sections of fully rotary 16-wide heads
    "glm4v_text": _MROPE_16,
    "glm_image_text": _MROPE_16,
    "glm_ocr_text": _MROPE_16,
    # the default stack is all Mamba; the cache wants one attention layer
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    # the encoder proposes num_queries boxes by top-k over the feature-map
    # positions: a small image has fewer positions than the default 900
    "grounding-dino": {"num_queries": 16},
    # the model reads rope sections the default leaves out
    "hunyuan_vl": {"text_config": {"rope_parameters": {"mrope_section": [2, 2, 2, 2]}}},
    "hunyuan_vl_text": {"rope_parameters": {"mrope_section": [2, 2, 2, 2]}},
    # the text, 2-D position and shape embeddings add up to the width
    # (4 * coordinate + 2 * shape) at the consistent level's 64
    "layoutlmv3": {"coordinate_size": 8, "shape_size": 16},
    # top-k proposals (see grounding-dino); the ViT's windows tile the patch
    # grid as side x side: 2 x 2 divides the grids of small images; the
    # default projector has no scales (and no feature levels): one at scale 1
    "lw_detr": {"num_queries": 16, "projector_scale_factors": [1.0], "num_feature_levels": 1,
                "backbone_config": {"num_windows": 4, "num_windows_side": 2}},
    "mm-grounding-dino": {"num_queries": 16},  # see grounding-dino
    # the adapter reads the last and an earlier ViT layer (24 and 18 of 25)
    "molmo2": {"adapter_config": {"vision_feature_layer": [1, 0]}},
    # the default config has no kv head count but the model reads one
    "moonshine_streaming": {"num_key_value_heads": HEADS},
    # the decoder reads its ids as (batch * codebooks, steps): the codebook
    # count must divide the batch of ids
    "musicgen": {"decoder": {"num_codebooks": 2}},
    "musicgen_melody": {"decoder": {"num_codebooks": 2}},
    # checkpoints name the rope sections; the model falls back to full-size
    # ones (fit_config scales them to the shrunk head)
    "paddleocr_vl": {"text_config": {"rope_parameters": {"mrope_section": [16, 24, 24]}}},
    # the Fourier image preprocessor fixes the cross-attention's query/key
    # width at 261 (3 + 2 * 2 * 64 + 2), which only 1, 3, 9... heads divide.
    # The masked-LM decoder emits max_position_embeddings positions, which
    # the labels (one per input token) must match
    "perceiver": {"num_cross_attention_heads": 1, "max_position_embeddings": SEQ},
    "qwen2_5_vl_text": _MROPE_16,  # see glm4v_text
    "qwen2_vl_text": _MROPE_16,  # see glm4v_text
    "rf_detr": {"num_queries": 16},  # see grounding-dino
    # the text model builds a sliding-window mask whatever its layer kinds;
    # the default leaves the window to checkpoints
    "step3p7": {"text_config": {"sliding_window": 4}},
    # checkpoints name the timm model; the default names none: timm's tiny
    # ResNet (random weights, nothing downloaded)
    "timm_backbone": {"backbone": "test_resnet"},
    # the acoustic transformer's rotary positions run over the heads
    # (position ids 0..num_attention_heads): keys need as many heads as
    # queries. The acoustic encoder doubles its channels at each of five
    # down-sampling stages: from 4, not 48
    "xcodec2": {"num_key_value_heads": HEADS, "encoder_hidden_size": 4},
    # the shared transformer is tied across hybrid layers: keep two of them
    "zamba": {"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid"] * 2},
}


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _even(x):
    """A width: at least 2 and even (rotary halves), never above the original."""
    return max(2, int(round(x / 2)) * 2)


def _is_width(k, v):
    return isinstance(k, str) and _WIDTH_NAME.search(k) is not None and \
        _NOT_WIDTH.search(k) is None and (_int(v) or isinstance(v, list) and v and
                                          all(_int(x) for x in v))


def _pick_layers(d, depth):
    """Indices of the layers to keep: at least two, and one of every kind
    (attention/linear/MoE... per the per-layer string lists) up to four."""
    kinds = [v for v in d.values() if isinstance(v, list) and len(v) == depth and
             all(isinstance(x, (str, list)) for x in v)]
    keys = [tuple(str(k[i]) for k in kinds) for i in range(depth)]
    pick = []
    for i, key in enumerate(keys):
        if key not in {keys[j] for j in pick} and len(pick) < 4:
            pick.append(i)
    want = min(depth, max(2, len(pick)))
    pick += [i for i in range(depth) if i not in pick][:want - len(pick)]
    return sorted(pick)


def _per_layer(d, o, keep):
    """Shrinks per-layer lists and per-layer tables to the layers in ``keep``."""
    depth = next(o[k] for k in _LAYERS if _int(o.get(k)))
    for k, v in list(d.items()):
        if isinstance(v, list) and len(v) == depth and k not in _LAYERS:
            d[k] = [v[i] for i in keep]
            if k in _SHRINK:
                d[k] = [min(x, _SHRINK[k]) if _int(x) else x for x in d[k]]
        elif k == "per_layer_config" and isinstance(v, dict):
            d[k] = {str(n).zfill(len(str(i))) if isinstance(i, str) else n: v[i]
                    for n, i0 in enumerate(keep)
                    for i in v if int(i) == i0}
        elif k.endswith(("layer_ids", "layer_indices")) and isinstance(v, list) and \
                all(_int(x) for x in v):
            d[k] = [keep.index(x) for x in v if x in keep]
        elif k in ("out_features", "out_indices") and v is not None and "out_features" in d:
            d[k] = None  # backbones: named stages may be gone; the last one is used
    for k in _LAYERS:
        if _int(o.get(k)) and o[k] == depth:
            d[k] = len(keep)


def _targets(level):
    """Config key -> shrunk value at ``level``. The consistent level keeps
    heads 16 wide so partial rotary fractions and rope sections stay whole."""
    if level != "consistent":
        return _SHRINK
    t = {k: v for k, v in _SHRINK.items() if k not in ("head_dim", "rotary_dim")}
    t.update(dict.fromkeys(_WIDTHS, 2 * HIDDEN), **dict.fromkeys(_FFNS, 2 * FFN))
    t.update(dict.fromkeys(("num_experts_per_token", "moe_topk"), 2),
             vocab_size_per_layer_input=VOCAB)
    return t


def _leaves(o):
    """(key, value) of every entry of a nested config dict that is not a dict."""
    stack = [o]
    while stack:
        for k, v in stack.pop().items():
            if isinstance(v, dict):
                stack.append(v)
            else:
                yield k, v


def _widths_of(o, out):
    """Original value -> shrunk value of every width/FFN size in the tree (the
    first key wins): other entries naming that size follow it."""
    t = _targets("consistent")
    for keys in (_WIDTHS, _FFNS):
        for k, v in _leaves(o):
            if k in keys and _int(v) and v > t[k]:
                out.setdefault(v, t[k])
    return out


def _scales(o, ctx):
    """(width factor, per-head factor) of config dict ``o`` at the consistent
    level; a dict without its own width (rope or per-layer tables) inherits
    its parent's. The per-head factor is a power of two so rope sections and
    head sizes divide evenly."""
    t = _targets("consistent")
    hidden = next((k for k in _WIDTHS if _int(o.get(k))), None)
    if not hidden:
        return ctx
    heads = next((k for k in _HEADS if _int(o.get(k))), None)
    new = min(o[hidden], t[hidden])
    w = o[hidden] / new
    if not heads:
        return w, w
    per = (o[hidden] / o[heads]) / (new / min(o[heads], t[heads]))
    return w, 2 ** max(0, round(math.log2(per))) if per > 0 else 1


def _sections(v, s):
    """Rope sections (summing to half a head) for heads ``s`` times narrower:
    the same proportions, each at least 1, summing to sum(v) / s."""
    total = max(len(v), round(sum(v) / s))
    out = [max(1, int(x * total / sum(v))) for x in v]
    for i in sorted(range(len(v)), key=lambda i: -v[i]):
        if sum(out) >= total:
            break
        out[i] += 1
    return out


def _consistent(d, o, widths, ctx):
    """Level "consistent" on one config dict ``d`` shrunk from ``o``; ``ctx``
    is its (width, per-head) scale factors."""
    hidden = next((k for k in _WIDTHS if _int(o.get(k))), None)
    heads = next((k for k in _HEADS if _int(o.get(k))), None)
    w, s = ctx or (None, None)
    for k, v in o.items():
        if not isinstance(k, str) or k in _targets("consistent"):
            continue
        if _HEADS_NAME.search(k) and _int(v) and v > HEADS:
            d[k] = d[heads] if heads and v >= o[heads] else HEADS if v > KV_HEADS * 4 else KV_HEADS
        elif _is_width(k, v) and _int(v) and v >= 16:
            if v in widths and v >= 64 and not _PER_HEAD.search(k):
                d[k] = widths[v]
            elif s and _PER_HEAD.search(k):
                d[k] = min(v, _even(v / s))
            elif w and not k.endswith("_groups"):
                d[k] = min(v, max(8, int(round(v / w / 8)) * 8))
        elif k == "mrope_section" and s and isinstance(v, list) and all(_int(x) for x in v):
            d[k] = _sections(v, s)
    if heads and hidden and "head_dim" in o and (o["head_dim"] is None or
                                                 o["head_dim"] * o[heads] == o[hidden]):
        d["head_dim"] = d[hidden] // d[heads]  # derived from width and heads: keep it so
    for k in _KV_HEADS:
        if k in o and heads and (o[k] is None or o[k] == o[heads]):
            d[k] = d[heads]  # multi-head attention stays multi-head
    if "vocab_size" in o and o["vocab_size"] is None:
        d["vocab_size"] = VOCAB
    experts = next((d[k] for k in _EXPERTS if _int(d.get(k))), None)
    if experts:
        if d.get("num_experts_per_tok", 0) is None:
            d["num_experts_per_tok"] = 2
        if _int(d.get("n_group")) and experts % d["n_group"]:
            d["n_group"] = d["topk_group"] = 1  # expert groups must divide the experts
    mamba = next((d[k] for k in ("mamba_num_heads", "mamba_n_heads") if _int(d.get(k))), None)
    if mamba and _int(d.get("n_groups")) and mamba % d["n_groups"]:
        d["n_groups"] = math.gcd(mamba, d["n_groups"])  # state-space groups must divide the heads
    for nh, per, width, factor in _PRODUCTS:
        if all(_int(o.get(k)) for k in (nh, per, width)) and \
                o[nh] * o[per] == o[width] * (o.get(factor) or 1):
            d[per] = max(1, d[width] * (o.get(factor) or 1) // d[nh])


def _scaled_factor(o):
    """The largest power of two dividing every width in the tree (at most
    the width over 64; each head keeps at least 4 channels)."""
    vals, per_head, top = [], [], 0
    for k, v in _leaves(o):
        if k in _WIDTHS or k in _FFNS or _is_width(k, v):
            xs = v if isinstance(v, list) else [v]
            vals += [x for x in xs if _int(x)]
            if isinstance(k, str) and _PER_HEAD.search(k):
                per_head += [x for x in xs if _int(x)]
            if k in _WIDTHS and _int(v):
                top = max(top, v)
    f = 1
    while top // (2 * f) >= 64 and all(x % (2 * f) == 0 for x in vals if x >= 16) and \
            all(x // (2 * f) >= 4 for x in per_head):
        f *= 2
    return f


def _shrink_dict(d, level="basic", widths=None, factor=1, ctx=None):
    out = {}
    targets = _targets(level)
    if level == "consistent":
        ctx = _scales(d, ctx)
    # hierarchical vision models list heads per stage: their width must stay
    # divisible by those counts, so it is left alone
    staged = isinstance(d.get("num_heads"), list)
    for k, v in d.items():
        if isinstance(v, dict):
            out[k] = _shrink_dict(v, level, widths, factor, ctx)
        elif staged and k in ("embed_dim", "hidden_size"):
            out[k] = v
        elif level == "scaled" and (k in _WIDTHS or k in _FFNS or _is_width(k, v)) and \
                not (isinstance(k, str) and k.endswith("_groups")):
            scale = (lambda x: x // factor if _int(x) and x >= 16 else x)
            out[k] = [scale(x) for x in v] if isinstance(v, list) else scale(v)
        elif level in ("scaled", "layers") and k not in _SIZE_ONLY:
            out[k] = v
        elif k in targets and _int(v) and v > targets[k]:
            out[k] = targets[k]
        else:
            out[k] = v
    if level == "consistent":
        _consistent(out, d, widths, ctx)
    depth = next((d[k] for k in ("num_hidden_layers", "num_layers", "n_layer")
                  if _int(d.get(k))), None)
    layers = next((out[k] for k in ("num_hidden_layers", "num_layers", "n_layer") if k in out), None)
    if level != "basic" and depth and layers < depth:
        _per_layer(out, d, _pick_layers(d, depth))
    elif _int(layers) and layers < d.get("num_hidden_layers", d.get("num_layers", 0) or 0):
        for k, v in list(out.items()):
            # per-layer settings must keep to the remaining layers
            if isinstance(k, str) and k.endswith("layer_types") and isinstance(v, list):
                out[k] = v[:layers]
            elif k == "per_layer_config" and isinstance(v, dict):
                out[k] = {i: c for i, c in v.items() if int(i) < layers}
            elif k in ("out_features", "out_indices") and v is not None:
                out[k] = None  # backbones: named stages may be gone; the last one is used
    vocab = out.get("vocab_size")
    if _int(vocab):
        # special token ids must stay inside the shrunk vocabulary: give each
        # large one its own id counting down from the top
        fresh, remap = vocab - 1, {}

        def fix(i):
            nonlocal fresh
            if not _int(i) or i < vocab:
                return i
            if i not in remap:
                remap[i], fresh = fresh, fresh - 1
            return remap[i]
        for k, v in list(out.items()):
            if isinstance(k, str) and k.endswith(("_token_id", "_token_index", "_token_ids")):
                out[k] = [fix(i) for i in v] if isinstance(v, list) else fix(v)
    return out


def _merge(d, over):
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(d.get(k), dict):
            _merge(d[k], v)
        else:
            d[k] = v
    return d


def shrink(config, level="basic"):
    """A small config of the same type (few, narrow layers; tiny vocabulary);
    ``level`` is one of LEVELS. Ids that checkpoints set but default configs
    leave out are filled in: a padding id (sequence classification pools at
    the last non-pad token) and, for encoder-decoders, the decoder start id
    (T5 uses its pad id)."""
    o = config.to_dict()
    widths = _widths_of(o, {}) if level == "consistent" else None
    d = _shrink_dict(o, level, widths, _scaled_factor(o) if level == "scaled" else 1)
    _merge(d, _OVERRIDES.get(getattr(config, "model_type", None), {}))
    if "pad_token_id" in d and d["pad_token_id"] is None:
        d["pad_token_id"] = 0
    if d.get("is_encoder_decoder") and d.get("decoder_start_token_id") is None:
        d["decoder_start_token_id"] = d.get("pad_token_id") or 0
    return type(config).from_dict(d)


def _param_count(cls, config):
    """Parameters of ``cls(config)`` without allocating them (None if the
    model cannot be built on the meta device)."""
    import torch
    try:
        with torch.device("meta"):
            return sum(p.numel() for p in cls(config).parameters())
    except Exception:  # noqa: BLE001
        return None
