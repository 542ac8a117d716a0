"""Hugging Face model zoo on ``tpu`` against the CPU.

    python -m torch_tpu.zoo                          # every architecture (long)
    python -m torch_tpu.zoo --fast                   # the CI slice
    python -m torch_tpu.zoo --archs LlamaForCausalLM,GPT2LMHeadModel -v
    python -m torch_tpu.zoo --markdown docs/zoo.md   # write the report

The architectures are the model classes in Transformers' auto mappings for base
models and the task heads listed in ``TASKS``. For each one the harness builds
the model type's default config shrunk to a few small layers (``shrink``),
creates the model with random weights (seeded; matrices initialised to a
constant are redrawn, see ``_unflatten_constant_weights``), makes inputs from the forward
signature, runs forward on the CPU, copies the same model to ``tpu`` and runs
it on the same inputs. LM heads (causal, masked, seq2seq) also run a backward
pass of their loss and compare every parameter's gradient. Statuses:

* ``match``: every output tensor is within tolerance of the CPU (or, where
  the CPU's float32 result is itself off, of the CPU's float64 result: the
  record then carries a ``note``). A model that samples inside forward (a
  second CPU run under another seed differs: MAE masking, vocoder noise) is
  compared on shapes and dtypes only and marked ``random``; the seed is reset
  before each forward, so draws from the CPU generator do repeat;
* ``mismatch``: some output differs (value, shape or dtype);
* ``crash``: forward raised on ``tpu`` (the message is kept), or the worker
  died or hung on it;
* ``skip``: not counted: the harness could not build or run the architecture
  on the CPU (config constraints the generic shrink or inputs break, required
  inputs it cannot synthesise); the reason is kept.

Tolerance (float32): ``max|tpu - cpu| <= 1e-3 * max(max|cpu|, 1e-2)`` per
tensor. XLA fuses and reassociates reductions and uses its own vectorised
transcendental functions, so each op may differ by a few ulp; a two-layer
model chains a few hundred such ops and softmax/normalisation amplify
differences, which puts honest results around 1e-6..1e-4 of the tensor's
scale. 1e-3 still catches every wrong-op defect (those are O(1)). Gradients
use the same bound, per parameter.

CPU fallbacks stay enabled (the zoo measures what users get) and every op that
fell back is counted per architecture from ``torch.tpu._get_cache_stats()``.
Workers run in subprocesses; a crash or a hang (``--timeout`` seconds on one
architecture) marks that architecture ``crash`` and the run goes on.
"""
import argparse
import collections
import inspect
import json
import math
import os
import re
import sys
import time

# (task label, name of the auto mapping in transformers.models.auto.modeling_auto)
TASKS = [
    ("base", "MODEL_MAPPING_NAMES"),
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("seq-cls", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("token-cls", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
    ("image-cls", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("audio-cls", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
]
LM_TASKS = {"causal-lm", "masked-lm", "seq2seq-lm"}
# Architectures per worker process (each compiles its own executables; a fresh
# process per chunk keeps memory and mappings bounded).
_CHUNK = 200

# The CI slice: the common decoder, encoder, seq2seq and vision families.
FAST_ARCHS = [
    "LlamaForCausalLM", "GPT2LMHeadModel", "MistralForCausalLM", "Qwen2ForCausalLM",
    "GPTNeoXForCausalLM", "OPTForCausalLM", "BertModel", "BertForMaskedLM",
    "DistilBertForSequenceClassification", "RobertaForTokenClassification",
    "T5ForConditionalGeneration", "BartForConditionalGeneration", "ViTForImageClassification",
]

RTOL_SCALE = 1e-3
SCALE_FLOOR = 1e-2

SEED = 0
BATCH, SEQ, DEC_SEQ = 2, 8, 6
HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, IMAGE = 32, 4, 2, 64, 256, 64

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
    "efficientloftr": {"out_features": [64, 64, 64, 64]},
    # rope sections of a 16-wide head (sum 8): the default code sections need 128
    "ernie4_5_vl_moe": {"text_config": {"rope_parameters": {"mrope_section": [3, 3, 2]}}},
    # KV sharing across the last layers needs layers of every kind before them
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
    # the Fourier image preprocessor fixes the cross-attention's query/key
    # width at 261 (3 + 2 * 2 * 64 + 2), which only 1, 3, 9... heads divide.
    # The masked-LM decoder emits max_position_embeddings positions, which
    # the labels (one per input token) must match
    "perceiver": {"num_cross_attention_heads": 1, "max_position_embeddings": SEQ},
    "qwen2_5_vl_text": _MROPE_16,  # see glm4v_text
    "qwen2_vl_text": _MROPE_16,  # see glm4v_text
    "rf_detr": {"num_queries": 16},  # see grounding-dino
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


def _widths_of(o, out):
    """Original value -> shrunk value of every width/FFN size in the tree (the
    first key wins): other entries naming that size follow it."""
    t = _targets("consistent")
    for keys in (_WIDTHS, _FFNS):
        stack = [o]
        while stack:
            c = stack.pop()
            for k, v in c.items():
                if isinstance(v, dict):
                    stack.append(v)
                elif k in keys and _int(v) and v > t[k]:
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
    for nh, per, width, factor in _PRODUCTS:
        if all(_int(o.get(k)) for k in (nh, per, width)) and \
                o[nh] * o[per] == o[width] * (o.get(factor) or 1):
            d[per] = max(1, d[width] * (o.get(factor) or 1) // d[nh])


def _scaled_factor(o):
    """The largest power of two dividing every width in the tree (at most
    the width over 64; each head keeps at least 4 channels)."""
    vals, per_head, top = [], [], 0
    stack = [o]
    while stack:
        c = stack.pop()
        for k, v in c.items():
            if isinstance(v, dict):
                stack.append(v)
            elif k in _WIDTHS or k in _FFNS or _is_width(k, v):
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


def build_level(cls, model_type, task, level):
    """(model, config, inputs, CPU outputs) with the config shrunk at ``level``."""
    import torch
    from transformers import AutoConfig
    try:
        config = AutoConfig.for_model(model_type)
    except Exception:  # noqa: BLE001  (a default that fails its own validation)
        # sub-config overrides go in as dicts: the composite builds its parts
        # from them (defaults for the rest)
        config = AutoConfig.for_model(model_type, **_OVERRIDES.get(model_type, {}))
    config = shrink(config, level)
    want = getattr(cls, "config_class", None)
    if isinstance(want, type) and not isinstance(config, want):
        # a head over one part of a composite model (Musicgen's decoder)
        config = next((v for v in vars(config).values() if isinstance(v, want)), config)
    if level in ("scaled", "layers"):
        n = _param_count(cls, config)
        if n is None or n > _MAX_PARAMS:
            raise ValueError(f"the {level} shrink leaves {n} parameters")
    torch.manual_seed(SEED)
    model = cls(config).eval()
    _unflatten_constant_weights(model)
    inputs, want = _cpu_reference(model, config, task)
    return model, config, inputs, want


def build(cls, model_type, task):
    """(model, config, inputs, CPU outputs, shrink level): the first level of
    LEVELS whose config builds the model and runs forward on the CPU. Raises
    the first level's error if none does."""
    first = None
    for level in LEVELS:
        try:
            return (*build_level(cls, model_type, task, level), level)
        except Exception as e:  # noqa: BLE001
            first = first or e
    raise first


def architectures(tasks=None):
    """[(class name, task, model type)], one row per class, first task wins."""
    from transformers.models.auto import modeling_auto
    seen = {}
    for task, mapping in TASKS:
        if tasks and task not in tasks:
            continue
        for model_type, names in getattr(modeling_auto, mapping).items():
            for name in names if isinstance(names, (tuple, list)) else (names,):
                seen.setdefault(name, (name, task, model_type))
    return sorted(seen.values())


def _sub(config, attr, default):
    for c in (config, getattr(config, "vision_config", None), getattr(config, "encoder", None)):
        v = getattr(c, attr, None) if c is not None else None
        if isinstance(v, int):
            return v
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], int):
            return v[0]
    return default


def make_inputs(model, config, task, pixels=True):
    """Seeded inputs for the parameters the model's forward accepts (images
    for every model that takes them unless ``pixels`` is False)."""
    import torch
    g = torch.Generator().manual_seed(SEED)
    params = inspect.signature(model.forward).parameters
    vocab = getattr(config.get_text_config(), "vocab_size", None) or VOCAB
    # ordinary tokens: above the usual low special ids, below the shrunk
    # specials remapped to the top of the vocabulary
    lo, hi = 4, max(5, min(vocab - 8, 64))
    ids = torch.randint(lo, hi, (BATCH, SEQ), generator=g)
    inputs = {}
    if "input_ids" in params:
        inputs["input_ids"] = ids
        if "attention_mask" in params:
            inputs["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    if "pixel_values" in params and pixels:
        ch = _sub(config, "num_channels", 3)
        size = _sub(config, "image_size", 224)
        inputs["pixel_values"] = torch.randn(BATCH, ch, size, size, generator=g)
    if model.main_input_name == "input_values" and "input_values" in params:
        inputs["input_values"] = torch.randn(BATCH, 1600, generator=g)
    if model.main_input_name == "input_features" and "input_features" in params:
        mels = _sub(config, "num_mel_bins", 80)
        frames = 2 * _sub(config, "max_source_positions", 50)
        inputs["input_features"] = torch.randn(BATCH, mels, frames, generator=g)
    if task in ("seq2seq-lm", "speech-seq2seq") or \
            "decoder_input_ids" in params and task == "base":
        dec = torch.randint(lo, hi, (BATCH, DEC_SEQ), generator=g)
        if task == "seq2seq-lm" and "labels" in params:
            inputs["labels"] = dec
        elif "decoder_input_ids" in params:
            inputs["decoder_input_ids"] = dec
    elif task in ("causal-lm", "masked-lm") and "labels" in params and "input_ids" in inputs:
        inputs["labels"] = ids.clone()
    if "use_cache" in params:
        inputs["use_cache"] = False
    return inputs


def _tensors(x, out, seen=None):
    import torch
    seen = set() if seen is None else seen
    if id(x) in seen:
        return out
    seen.add(id(x))
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, dict):
        for v in x.values():
            _tensors(v, out, seen)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _tensors(v, out, seen)
    return out


def compare(got, want):
    """None if every tensor matches within tolerance, else the first problem."""
    import torch
    layout = _layout_problem(got, want)
    if layout:
        return layout
    for i, (a, b) in enumerate(zip(_tensors(got, []), _tensors(want, []))):
        a = a.detach().cpu()
        b = b.detach()
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return f"output {i}: integer values differ"
            continue
        a, b = a.double(), b.double()
        if not torch.equal(torch.isnan(a), torch.isnan(b)):
            return f"output {i}: NaN pattern differs"
        a, b = a.nan_to_num(0.0), b.nan_to_num(0.0)
        scale = max(b.abs().max().item() if b.numel() else 0.0, SCALE_FLOOR)
        err = (a - b).abs().max().item() if b.numel() else 0.0
        if err > RTOL_SCALE * scale:
            return f"output {i} {list(b.shape)}: max error {err:.3g} vs scale {scale:.3g}"
    return None


def _fallbacks():
    import torch
    return dict(torch.tpu._get_cache_stats().get("fallbacks", {}))


def _delta(before, after):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def _short(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {' '.join(lines[:2])[:300]}"


def _loss(out):
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    return loss


def run_arch(name, task, model_type, verbose=False):
    import copy
    import warnings

    import torch
    import transformers
    warnings.filterwarnings("ignore")
    rec = {"task": task, "model_type": model_type}
    try:
        cls = getattr(transformers, name)
        model, config, inputs, want, level = build(cls, model_type, task)
        rec["shrink"] = level
    except Exception as e:  # noqa: BLE001  (any harness failure: not counted)
        rec.update(status="skip", reason="cpu: " + _short(e))
        return rec
    before = _fallbacks()
    try:
        tmodel = copy.deepcopy(model).to("tpu")
        tinputs = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        torch.manual_seed(SEED)  # draws from the CPU generator repeat the reference's
        with torch.no_grad():
            got = tmodel(**tinputs)
        problem = compare(got, want)
        if problem and _stochastic(model, inputs, want):
            # sampled inside forward (MAE masking, ViLT patch sampling, vocoder
            # noise): the devices draw different numbers, so shapes and dtypes only
            rec.update(note="random inside forward: compared on shapes and dtypes", random=True)
            problem = _layout_problem(got, want)
        if problem and _matches_float64(model, inputs, got):
            rec["note"] = f"cpu float32 was off ({problem}); tpu matches the float64 cpu result"
            problem = None
        rec.update(status="mismatch" if problem else "match", reason=problem or "")
    except Exception as e:  # noqa: BLE001
        rec.update(status="crash", reason=_short(e))
    if task in LM_TASKS and rec["status"] != "crash":
        rec["backward"] = _backward(model, tmodel, inputs, tinputs)
    rec["fallbacks"] = _delta(before, _fallbacks())
    if verbose:
        print(name, rec, file=sys.stderr)
    return rec


def _layout_problem(got, want):
    g, w = _tensors(got, []), _tensors(want, [])
    if len(g) != len(w):
        return f"{len(g)} output tensors, cpu gave {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)} vs cpu {b.dtype}{list(b.shape)}"
    return None


def _stochastic(model, inputs, want):
    """Whether a second CPU forward under another seed gives other outputs."""
    import torch
    torch.manual_seed(SEED + 7)
    try:
        with torch.no_grad():
            return compare(model(**inputs), want) is not None
    except Exception:  # noqa: BLE001
        return False


def _matches_float64(model, inputs, got):
    """Whether ``got`` matches the model run on the CPU in float64 (rounded to
    float32). The CPU's float32 kernels are not exact either: a norm of
    1e-24-sized values loses bits in its subnormal squares, for one. Where
    float64 cannot run, the float32 CPU result stands."""
    import copy

    import torch
    try:
        m64 = copy.deepcopy(model).double()
        in64 = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                for k, v in inputs.items()}
        with torch.no_grad():
            ref = _tensors(m64(**in64), [])
    except Exception:  # noqa: BLE001
        return False
    g = _tensors(got, [])
    ref = [r.to(t.dtype) if r.is_floating_point() and t.is_floating_point() else r
           for r, t in zip(ref, g)]
    return compare(g, ref) is None


def _unflatten_constant_weights(model):
    """Redraws matrices that initialise to one constant (MoE router gates
    start at zero). Their scores tie exactly, and which of tied experts top-k
    picks is unspecified (the CPU, CUDA and XLA choose differently), so such
    a model compares tie-breaking rather than numerics."""
    import torch
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and p.numel() > 1 and \
                    bool((p == p.reshape(-1)[0]).all()):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def _cpu_reference(model, config, task):
    """(inputs, CPU outputs); text-only inputs where images without their
    placeholder tokens are rejected (multimodal LMs)."""
    import torch
    inputs = make_inputs(model, config, task)
    try:
        torch.manual_seed(SEED)
        with torch.no_grad():
            return inputs, model(**inputs)
    except Exception as first:  # noqa: BLE001
        if "pixel_values" not in inputs:
            raise
        inputs = make_inputs(model, config, task, pixels=False)
        try:
            torch.manual_seed(SEED)
            with torch.no_grad():
                return inputs, model(**inputs)
        except Exception:  # noqa: BLE001
            raise first from None


def _backward(model, tmodel, inputs, tinputs):
    try:
        loss_cpu = _loss(model(**inputs))
        if loss_cpu is None:
            return {"status": "skip", "reason": "no loss"}
        loss_cpu.backward()
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "reason": "cpu: " + _short(e)}
    try:
        _loss(tmodel(**tinputs)).backward()
        names = dict(model.named_parameters())
        for n, p in tmodel.named_parameters():
            ref = names[n].grad
            if (p.grad is None) != (ref is None):
                return {"status": "mismatch", "reason": f"{n}: grad presence differs"}
            if ref is not None:
                problem = compare(p.grad, ref)
                if problem:
                    return {"status": "mismatch", "reason": f"{n}: {problem}"}
        return {"status": "match"}
    except Exception as e:  # noqa: BLE001
        return {"status": "crash", "reason": _short(e)}


def _worker(args):
    import torch  # noqa: F401

    import torch_tpu  # noqa: F401
    rows = json.loads(args.rows)
    with open(args.result, "a") as out:
        for i in range(args.start, min(args.end, len(rows))):
            name, task, model_type = rows[i]
            out.write(json.dumps({"begin": i}) + "\n")
            out.flush()
            t0 = time.time()
            rec = run_arch(name, task, model_type, args.verbose)
            rec["seconds"] = round(time.time() - t0, 1)
            out.write(json.dumps({"done": i, "arch": name, "result": rec}) + "\n")
            out.flush()


def _drive(args, rows):
    from . import _isolate
    rows_path = args.json + ".rows"
    with open(rows_path, "w") as f:
        json.dump(rows, f)

    def command(start, end):
        return [sys.executable, "-m", "torch_tpu.zoo", "--worker", "--start", str(start),
                "--end", str(end), "--rows", rows_path, "--result", args.json + ".partial"] + \
            (["-v"] if args.verbose else [])

    def lost(i, why):
        name, task, model_type = rows[i]
        if why == "hung":
            why = f"hung (no result in {args.timeout} s)"
        return {"arch": name, "result": {"task": task, "model_type": model_type,
                                         "status": "crash", "reason": why, "fallbacks": {}}}

    done = _isolate.run(command, len(rows), args.json + ".partial", args.timeout, lost,
                        chunk=_CHUNK)
    os.replace(args.json + ".partial", args.json)
    os.remove(rows_path)
    return {rec["arch"]: rec["result"] for rec in done}


def totals(results):
    """Counts and rates: forward over architectures the CPU ran; backward over causal LMs."""
    fwd = collections.Counter(r["status"] for r in results.values())
    counted = fwd["match"] + fwd["mismatch"] + fwd["crash"]
    bwd = collections.Counter(r["backward"]["status"] for r in results.values()
                              if r["task"] == "causal-lm" and "backward" in r)
    bwd["crash"] += sum(1 for r in results.values() if r["task"] == "causal-lm"
                        and r["status"] == "crash")
    bcounted = bwd["match"] + bwd["mismatch"] + bwd["crash"]
    fallbacks = collections.Counter()
    for r in results.values():
        for op in r.get("fallbacks", {}):
            fallbacks[op] += 1
    pct = lambda a, b: 100.0 * a / b if b else 0.0  # noqa: E731
    return {
        "random": sum(1 for r in results.values() if r.get("random")),
        "architectures": len(results), "skipped": fwd["skip"], "counted": counted,
        "match": fwd["match"], "mismatch": fwd["mismatch"], "crash": fwd["crash"],
        "ran_pct": pct(fwd["match"] + fwd["mismatch"], counted), "match_pct": pct(fwd["match"], counted),
        "causal_backward_counted": bcounted, "causal_backward_match": bwd["match"],
        "causal_backward_pct": pct(bwd["match"], bcounted), "fallback_ops": dict(fallbacks),
    }


def report(results):
    t = totals(results)
    lines = [
        f"Architectures: {t['architectures']} ({t['skipped']} skipped: the harness could not run "
        f"them on the CPU), counted: {t['counted']}",
        f"Forward ran on tpu: {t['match'] + t['mismatch']}/{t['counted']} ({t['ran_pct']:.1f}%); "
        f"matched the CPU: {t['match']}/{t['counted']} ({t['match_pct']:.1f}%); "
        f"mismatch: {t['mismatch']}; crash: {t['crash']}; of the matches, {t['random']} sample "
        f"inside forward and were compared on shapes and dtypes only",
        f"Causal-LM backward matched the CPU: {t['causal_backward_match']}/"
        f"{t['causal_backward_counted']} ({t['causal_backward_pct']:.1f}%)",
        "Ops that fell back to the CPU (architectures using them): " +
        (", ".join(f"{k} ({v})" for k, v in sorted(t["fallback_ops"].items(), key=lambda kv: -kv[1]))
         or "none"),
    ]
    return "\n".join(lines)


def by_task(results):
    rows = ["| task | architectures | skipped | counted | ran | matched |", "|---|---|---|---|---|---|"]
    for task, _ in TASKS:
        rs = [r for r in results.values() if r["task"] == task]
        c = collections.Counter(r["status"] for r in rs)
        counted = c["match"] + c["mismatch"] + c["crash"]
        rows.append(f"| {task} | {len(rs)} | {c['skip']} | {counted} | "
                    f"{c['match'] + c['mismatch']} | {c['match']} |")
    return "\n".join(rows)


def details(results):
    rows = ["| architecture | task | forward | backward | fallbacks | problem |",
            "|---|---|---|---|---|---|"]
    for name in sorted(results):
        r = results[name]
        b = r.get("backward", {})
        reason = r.get("reason") or b.get("reason") or r.get("note", "")
        rows.append(f"| {name} | {r['task']} | {r['status']} | {b.get('status', '-')} | "
                    f"{', '.join(sorted(r.get('fallbacks', {})))} | "
                    f"{reason.replace('|', '/')[:160]} |")
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="the CI slice")
    ap.add_argument("--archs", default="", help="comma-separated model class names")
    ap.add_argument("--tasks", default="", help="comma-separated task labels (see TASKS)")
    ap.add_argument("--every", type=int, default=1,
                    help="run every N-th architecture of the sorted list (a spread sample)")
    ap.add_argument("--report", default="", help="only write the report from this results JSON "
                    "(a finished run or its .partial file)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds on one architecture = hung")
    ap.add_argument("--json", default="zoo.json")
    ap.add_argument("--markdown", default="", help="write the report here")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--end", type=int, default=1 << 30, help=argparse.SUPPRESS)
    ap.add_argument("--rows", default="", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        with open(args.rows) as f:
            args.rows = f.read()
        return _worker(args)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    rows = architectures(set(t for t in args.tasks.split(",") if t))
    wanted = set(FAST_ARCHS) if args.fast else set(a for a in args.archs.split(",") if a)
    if wanted:
        unknown = wanted - {r[0] for r in rows}
        if unknown:
            ap.error("not in the auto mappings: " + ", ".join(sorted(unknown)))
        rows = [r for r in rows if r[0] in wanted]
    rows = rows[::args.every]
    if args.report:
        return _write_report(args, _load(args.report), elapsed=None)
    t0 = time.time()
    results = _drive(args, rows)
    return _write_report(args, results, time.time() - t0)


def _load(path):
    with open(path) as f:
        return {rec["arch"]: rec["result"] for rec in map(json.loads, f) if "done" in rec}


def _write_report(args, results, elapsed):
    took = f", {elapsed / 60:.0f} min" if elapsed is not None else ""
    print(report(results) + f"\n({len(results)} architectures{took})")
    if args.markdown:
        text = ["# Hugging Face model zoo on tpu vs CPU",
                f"Command: `python -m torch_tpu.zoo {' '.join(sys.argv[1:])}`{took}",
                *report(results).splitlines(), by_task(results), details(results)]
        with open(args.markdown, "w") as f:
            f.write("\n\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
