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
    config = fit_config(shrink(config, level))
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


def _first(c, names, default):
    """The first of ``names`` that ``c`` sets to an int (or a list of ints)."""
    for n in names:
        v = getattr(c, n, None)
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], int):
            v = v[0]
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return default


def _image_hw(config, default=224):
    """(height, width) of the images the config is sized for: ``image_size``
    is a side or an (h, w) pair (MGP-STR reads 32x128 text crops)."""
    for c in (config, getattr(config, "vision_config", None), getattr(config, "encoder", None)):
        v = getattr(c, "image_size", None) if c is not None else None
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(_int(x) for x in v):
            return tuple(v)
    side = _sub(config, "image_size", default)
    return side, side


def _vision(config):
    return getattr(config, "vision_config", None) or config


def _token_id(config, *kinds):
    """A placeholder token id (``image``, ``video``, ``audio``...) from the
    config, under its ``*_token_id`` or ``*_token_index`` spelling."""
    for kind in kinds:
        for c in (config, config.get_text_config()):
            for suffix in ("_token_id", "_token_index"):
                v = getattr(c, kind + suffix, None)
                if isinstance(v, int) and not isinstance(v, bool):
                    return v
    return None


def _free_token(config):
    """An id near the top of the text vocabulary that no special token uses."""
    text = config.get_text_config()
    used = {v for c in (config, text) for k, v in c.to_dict().items()
            if isinstance(v, int) and k.endswith(("_token_id", "_token_index"))}
    fresh = text.vocab_size - 1
    while fresh in used:
        fresh -= 1
    return fresh


def fit_config(config):
    """Config values the synthesised inputs depend on, made consistent after
    ``shrink``: multimodal placeholder ids set beside (not inside) the text
    config must index the shrunk text vocabulary, since the placeholders are
    embedded before the image features replace them; per-model settings come
    from ``_RECIPES``. Only values that are out of range are changed."""
    try:
        text = config.get_text_config()
    except ValueError:  # several text configs (Musicgen's encoder and decoder)
        text = config.get_text_config(decoder=True)
    vocab = getattr(text, "vocab_size", None)
    if isinstance(vocab, int) and text is not config:
        used = {v for k, v in text.to_dict().items()
                if isinstance(v, int) and k.endswith(("_token_id", "_token_index"))}
        fresh = vocab - 1
        for k, v in list(config.to_dict().items()):
            if k.endswith(("_token_id", "_token_index")) and isinstance(v, int) and \
                    not isinstance(v, bool) and v >= vocab:
                while fresh in used:
                    fresh -= 1
                setattr(config, k, fresh)
                used.add(fresh)
    vc = getattr(config, "vision_config", None)
    width = getattr(text, "hidden_size", None)
    if vc is not None and isinstance(getattr(vc, "out_hidden_size", None), int) and \
            isinstance(width, int) and vc.out_hidden_size != width:
        # the merger projects image features to the LM's width
        vc.out_hidden_size = width
    if text is not config and getattr(text, "pad_token_id", 0) is None:
        # sequence classifiers refuse batches without a pad id; ``shrink``
        # fills it in on the top-level config only
        text.pad_token_id = 0
    _fit_mrope(text)
    for c in _audio_configs(config):
        ups, width = getattr(c, "upsample_groups", None), getattr(c, "hidden_size", None)
        if isinstance(ups, int) and isinstance(width, int) and width % ups:
            # codecs upsample depthwise (one group per channel) at the shrunk width
            c.upsample_groups = width
    recipe = _RECIPES.get(config.model_type)
    if recipe and recipe[1]:
        recipe[1](config)
    return config


def _fit_mrope(text):
    """Multimodal RoPE splits the rotary frequencies (head_dim / 2 of them)
    into temporal, height and width sections: scale the sections to the
    shrunk head."""
    rope = getattr(text, "rope_parameters", None)
    if not isinstance(rope, dict) or \
            "mrope_section" not in getattr(type(text), "ignore_keys_at_rope_validation", ()):
        return
    # models fall back to their full-size sections when the key is absent
    sec = rope.get("mrope_section") or [16, 24, 24]
    heads = getattr(text, "num_attention_heads", None)
    head_dim = getattr(text, "head_dim", None) or (text.hidden_size // heads if heads else None)
    if not isinstance(head_dim, int):
        return
    half = int(head_dim * rope.get("partial_rotary_factor", 1.0)) // 2
    total = sum(sec)
    if total == half:
        return
    new = [max(1, x * half // total) for x in sec]
    new[-1] += half - sum(new)
    rope["mrope_section"] = new


def _patch_grid(config):
    """Flattened-patch layout of Qwen2-VL-style vision towers: (patch vector
    length, (t, h, w) grid of one image, placeholder tokens per image). The
    grid is the smallest the spatial merge accepts, doubled so that merging
    still leaves a 2x2 map."""
    vc = _vision(config)
    p = _first(vc, ("patch_size",), 14)
    t = _first(vc, ("temporal_patch_size", "patch_temporal"), 1)
    m = _first(vc, ("spatial_merge_size", "merge_size", "merge_kernel_size"), 1)
    ch = _first(vc, ("in_channels", "num_channels", "in_chans"), 3)
    h = w = 2 * m
    return ch * t * p * p, (1, h, w), h * w // (m * m)


def _with_placeholders(inputs, params, token, count, g):
    """Puts ``count`` copies of ``token`` into every row of input_ids (after
    two ordinary tokens) and stretches the masks and labels to match."""
    import torch
    ids = inputs["input_ids"]
    b = ids.shape[0]
    ids = torch.cat([ids[:, :2], torch.full((b, count), token, dtype=ids.dtype), ids[:, 2:]], 1)
    inputs["input_ids"] = ids
    if "attention_mask" in inputs:
        inputs["attention_mask"] = torch.ones_like(ids)
    if "labels" in inputs and inputs["labels"].shape == (b, ids.shape[1] - count):
        inputs["labels"] = ids.clone()
    if "mm_token_type_ids" in params:
        inputs["mm_token_type_ids"] = (ids == token).long()
    return ids


def _grid_inputs(inputs, params, config, g):
    """Vision towers (and the LMs around them) that take flattened patches and
    a per-image (t, h, w) grid."""
    import torch
    dim, thw, per_image = _patch_grid(config)
    n = BATCH * thw[0] * thw[1] * thw[2]
    grid = torch.tensor([thw] * BATCH)
    key = "hidden_states" if "hidden_states" in params and "pixel_values" not in params \
        else "pixel_values"
    inputs[key] = torch.randn(n, dim, generator=g)
    for name in ("grid_thw", "image_grid_thw"):
        if name in params:
            inputs[name] = grid
            break
    image = _token_id(config, "image")
    if "input_ids" in inputs and image is not None:
        # one image per row: the LM checks that its placeholders match the features
        _with_placeholders(inputs, params, image, per_image, g)


def _eos_last(inputs, config):
    """Sequence classifiers of encoder-decoders pool the hidden state at the
    last <eos>: every row must end in one."""
    eos = getattr(config, "eos_token_id", None)
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    if isinstance(eos, int) and "input_ids" in inputs:
        inputs["input_ids"][:, -1] = eos


def _video(config, g, frames=None):
    """(batch, frames, channels, height, width) clips; the frame count the
    config names (position tables are sized for it)."""
    import torch
    t = frames or _first(config, ("num_frames", "frames_per_clip"), None) or \
        _sub(config, "num_frames", 8)
    ch = _sub(config, "num_channels", 3)
    size = _sub(config, "image_size", None) or _sub(config, "crop_size", 64)
    return torch.randn(BATCH, t, ch, size, size, generator=g)


def _boxes(n, g, scale=1000):
    """(batch, n, 4) well-formed (x0, y0, x1, y1) boxes on a 0..scale grid."""
    import torch
    a = torch.randint(0, scale // 2, (BATCH, n, 2), generator=g)
    b = a + torch.randint(1, scale // 2, (BATCH, n, 2), generator=g)
    return torch.cat([a, b], -1)


_AUDIO_SUBS = ("audio_config", "encoder_config", "speech_config", "encoder", "dac_config",
               "codec_config", "semantic_model_config")
_MEL_NAMES = ("num_mel_bins", "input_feat_per_channel", "input_feat_size", "feature_size",
              "feature_projection_input_dim", "input_dim")


def _audio_configs(config, depth=2):
    """``config`` and its audio sub-configs (and theirs), outermost first."""
    out = [config]
    if depth:
        for n in _AUDIO_SUBS:
            c = getattr(config, n, None)
            if c is not None and hasattr(c, "to_dict"):
                out += _audio_configs(c, depth - 1)
    return out


def _extractor_default(model, name):
    """The default of ``name`` in the __init__ of the feature extractor that
    ships beside the model's class (read from the signature: nothing is
    instantiated or downloaded)."""
    import importlib
    try:
        pkg = importlib.import_module(type(model).__module__.rsplit(".", 1)[0])
        for attr in dir(pkg):
            if attr.endswith("FeatureExtractor"):
                p = inspect.signature(getattr(pkg, attr).__init__).parameters.get(name)
                if p is not None and isinstance(p.default, int):
                    return p.default
    except Exception:  # noqa: BLE001  (extractors needing absent backends)
        pass
    return None


def _features(model, config, g):
    """Spectrogram-like features (batch, width, frames): the width the config
    names for its (audio) encoder, else the feature extractor's default; as
    many frames as Whisper-style encoders demand (twice their positions,
    3000), a short clip where the position table is longer than that. The frames-first
    layout is tried when this one fails (see ``_cpu_reference``)."""
    import torch
    mels = None
    for c in _audio_configs(config):
        mels = mels or _first(c, _MEL_NAMES, None)
    mels = mels or _extractor_default(model, "feature_size") or 80
    frames = 2 * _sub(config, "max_source_positions", 50)
    frames = frames if frames <= 3000 else 100
    return torch.randn(BATCH, mels, frames, generator=g)


def _samples(config):
    """Raw-audio length: whole hops of the codec's down-sampling strides (a
    codec's encoder rejects or pads partial frames), about 1600 samples."""
    hop = 1
    for c in _audio_configs(config):
        for n in ("downsampling_ratios", "upsampling_ratios", "patch_sizes"):
            v = getattr(c, n, None)
            if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v):
                hop = math.prod(v)
                break
        if hop > 1:
            break
    return hop * -(-1600 // hop)


def _fill_named(inputs, params, config, g):
    """Required (or model-defining) forward arguments filled by their
    conventional names, for any model type that uses them."""
    import torch
    seq = inputs["input_ids"].shape[1] if "input_ids" in inputs else SEQ
    if "bbox" in params and "input_ids" in inputs:
        inputs["bbox"] = _boxes(seq, g)
    if "pixel_values_videos" in params and "pixel_values" not in params and \
            inputs.get("pixel_values_videos") is None:
        inputs["pixel_values_videos"] = _video(config, g)
    if "qformer_input_ids" in params and "input_ids" in inputs:
        inputs["qformer_input_ids"] = inputs["input_ids"][:, :SEQ].clone()
        if "qformer_attention_mask" in params:
            inputs["qformer_attention_mask"] = torch.ones_like(inputs["qformer_input_ids"])
    if "query_embeds" in params and params["query_embeds"].default is inspect.Parameter.empty:
        n = _first(config, ("num_query_tokens",), 4)
        inputs["query_embeds"] = torch.randn(BATCH, n, config.hidden_size, generator=g)
    if "past_values" in params:
        _series(inputs, params, config, g)
    if "latents" in params and params["latents"].default is inspect.Parameter.empty:
        # codec decoders: (batch, width, frames) latents
        inputs["latents"] = torch.randn(BATCH, config.hidden_size, 4, generator=g)
    if "inputs_embeds" in params and "input_ids" not in params and \
            params["inputs_embeds"].default is inspect.Parameter.empty:
        # heads over another model's hidden states
        width = config.get_text_config().hidden_size
        inputs["inputs_embeds"] = torch.randn(BATCH, SEQ, width, generator=g)


def _series(inputs, params, config, g):
    """Time-series models: a history as long as the model looks back (context
    plus the largest lag), and the forecast window for teacher forcing."""
    import torch
    lags = getattr(config, "lags_sequence", None) or [0]
    ctx = getattr(config, "context_length", None) or 32
    pred = getattr(config, "prediction_length", None) or 4
    if hasattr(config, "patch_length") and hasattr(config, "horizon_length"):
        ctx = 2 * config.patch_length  # TimesFM: whole patches, far below its maximum
    chans = getattr(config, "num_input_channels", None)
    past = ctx + max(lags)
    shape = (BATCH, past) if chans is None else (BATCH, past, chans)
    inputs["past_values"] = torch.randn(*shape, generator=g)
    feats = getattr(config, "num_time_features", None)
    if "past_time_features" in params:
        inputs["past_time_features"] = torch.randn(BATCH, past, feats or 0, generator=g)
        inputs["future_time_features"] = torch.randn(BATCH, pred, feats or 0, generator=g)
    for name in ("past_observed_mask", "observed_mask"):
        if name in params:
            inputs[name] = torch.ones(*shape)
    if "future_values" in params and "past_time_features" in params:
        inputs["future_values"] = torch.randn(BATCH, pred, generator=g)
    if "past_values_padding" in params:
        inputs["past_values_padding"] = torch.zeros(BATCH, past)
    if "freq" in params:
        inputs["freq"] = torch.zeros(BATCH, 1, dtype=torch.long)


# model_type -> (why, config fix or None, input fix or None); the input fix
# gets (inputs, forward parameters, config, generator) and edits ``inputs``
def _cfg_forecast(config):
    if config.prediction_length is None:
        config.prediction_length = 4
    if config.context_length is None:
        config.context_length = 8


def _cfg_autoformer(config):
    _cfg_forecast(config)
    # the decoder starts from the last label_length steps of the context
    config.context_length = max(config.context_length, config.label_length)


def _cfg_bros(config):
    # box embeddings are added per attention head
    config.dim_bbox_projection = config.hidden_size // config.num_attention_heads


def _cfg_codebook(config):
    config.codebook_dim = config.hidden_size


def _cfg_clap(config):
    ac = config.audio_config
    # the Swin-style audio tower doubles its width per stage
    ac.hidden_size = ac.patch_embeds_hidden_size * 2 ** (len(ac.depths) - 1)


def _cfg_qsa(config):
    # the sparse-attention indexer's sizes come with checkpoints (all None by
    # default): one kv head, heads as wide as the rotary part, a budget of
    # whole compressed blocks within the synthesised sequence
    text = config.get_text_config()
    if text.indexer_head_dim is None:
        text.indexer_n_heads = text.indexer_n_heads or 2
        text.indexer_kv_heads = 1
        text.indexer_head_dim = text.head_dim
        text.indexer_compress_ratio = 2
        text.indexer_budget = 4


def _cfg_query_placeholder(config):
    text = config.get_text_config()
    if getattr(text, "word_embed_proj_dim", None) is not None:
        # OPT embeds at its own width; the queries are projected to hidden_size
        text.word_embed_proj_dim = text.hidden_size
    # checkpoints set the id the processor expands to one token per query
    for name in ("image_token_index", "video_token_index"):
        if hasattr(config, name) and getattr(config, name) is None:
            setattr(config, name, _free_token(config))


def _cfg_xcodec(config):
    # the quantiser sees acoustic and semantic features side by side
    config.codebook_dim = config.acoustic_model_config.hidden_size + \
        config.semantic_model_config.hidden_size


def _cfg_lfm2_moe(config):
    # checkpoints list the layer kinds (the default leaves them out):
    # short convolutions with an attention layer last
    if config.layer_types is None:
        n = config.num_hidden_layers
        config.layer_types = ["conv"] * (n - 1) + ["full_attention"]


def _cfg_mobilebert(config):
    # the MLM head widens the embedding back to the hidden size
    config.embedding_size = min(config.embedding_size, config.hidden_size)


def _cfg_perceiver(config):
    # the Fourier and conv preprocessors' channel counts (image plus position
    # features, e.g. 261) are rarely a multiple of the cross-attention heads
    config.num_cross_attention_heads = 1
    # the masked-LM decoder predicts every position of its table: size it to
    # the synthesised sequence so labels line up
    config.max_position_embeddings = SEQ


def _cfg_pi0(config):
    # the PaliGemma inside projects image features to its LM's width
    vlm = config.vlm_config
    vlm.vision_config.projection_dim = vlm.text_config.hidden_size


def _cfg_vision_start(config):
    # the thinker's multimodal rope reads an id its default config leaves out
    if getattr(config, "vision_start_token_id", None) is None:
        config.vision_start_token_id = _free_token(config)


def _rx_audio_channels(inputs, params, config, g):
    import torch
    ch = getattr(config, "audio_channels", None) or 1
    inputs["input_values"] = torch.randn(BATCH, ch, 1920, generator=g)


def _rx_ast(inputs, params, config, g):
    import torch
    inputs["input_values"] = torch.randn(BATCH, config.max_length, config.num_mel_bins,
                                         generator=g)


def _rx_blip_qformer(inputs, params, config, g):
    import torch
    inputs["encoder_hidden_states"] = torch.randn(BATCH, 16, config.encoder_hidden_size,
                                                  generator=g)


def _rx_bros(inputs, params, config, g):
    # quadrilaterals (four corners) in [0, 1], as the processor normalises them
    b = _boxes(inputs["input_ids"].shape[1], g).float() / 1000
    x0, y0, x1, y1 = b.unbind(-1)
    import torch
    inputs["bbox"] = torch.stack([x0, y0, x1, y0, x1, y1, x0, y1], -1)


def _rx_clap(inputs, params, config, g):
    import torch
    ac = config.audio_config
    inputs["input_features"] = torch.randn(BATCH, 1, ac.spec_size, ac.num_mel_bins, generator=g)
    inputs["is_longer"] = torch.zeros(BATCH, 1, dtype=torch.bool)


def _rx_decision(inputs, params, config, g):
    import torch
    n = SEQ
    inputs.update(states=torch.randn(BATCH, n, config.state_dim, generator=g),
                  actions=torch.randn(BATCH, n, config.act_dim, generator=g),
                  rewards=torch.randn(BATCH, n, 1, generator=g),
                  returns_to_go=torch.randn(BATCH, n, 1, generator=g),
                  timesteps=torch.arange(n).repeat(BATCH, 1),
                  attention_mask=torch.ones(BATCH, n, dtype=torch.long))


def _rx_fun_asr(inputs, params, config, g):
    import torch
    # low-frame-rate features: num_stacked_frames mel frames per vector
    frames = 20
    dim = config.num_mel_bins * config.num_stacked_frames
    inputs["input_features"] = torch.randn(BATCH, frames, dim, generator=g)
    inputs["input_features_mask"] = torch.ones(BATCH, frames, dtype=torch.long)


def _rx_query_placeholders(inputs, params, config, g):
    tok = getattr(config, "image_token_index", None)
    if tok is None:
        tok = getattr(config, "video_token_index", None)
    if "input_ids" in inputs and tok is not None:
        _with_placeholders(inputs, params, tok, config.num_query_tokens, g)


def _rx_granite_speech5(inputs, params, config, g):
    import torch
    c = getattr(config, "encoder_config", None) or config
    inputs["input_features"] = torch.randn(BATCH, 100, 4 * c.num_mel_bins, generator=g)


def _rx_instructblipvideo(inputs, params, config, g):
    inputs["pixel_values"] = _video(config, g, frames=4)
    _rx_query_placeholders(inputs, params, config, g)
    # each frame contributes its own query tokens
    ids = inputs["input_ids"]
    tok = config.video_token_index
    extra = 3 * config.num_query_tokens
    import torch
    inputs["input_ids"] = torch.cat([ids[:, :2], torch.full((ids.shape[0], extra), tok), ids[:, 2:]], 1)
    for k in ("attention_mask", "labels"):
        if k in inputs:
            inputs[k] = torch.ones_like(inputs["input_ids"]) if k == "attention_mask" \
                else inputs["input_ids"].clone()


def _rx_dflash(inputs, params, config, g):
    import torch
    # a block of noised embeddings drafted against the target model's context
    # (its selected layers' hidden states side by side)
    width = config.hidden_size
    inputs["noise_embeds"] = torch.randn(BATCH, config.block_size, width, generator=g)
    inputs["context_hidden_states"] = torch.randn(
        BATCH, SEQ, width * len(config.target_layer_ids), generator=g)


def _rx_gemma4_vision(inputs, params, config, g):
    import torch
    # flattened patches with their (x, y) grid positions; the grid is whole
    # pooling windows, as the pooler averages k x k patches into one token
    side = 2 * config.pooling_kernel_size
    p = config.patch_size
    inputs["pixel_values"] = torch.rand(BATCH, side * side, 3 * p * p, generator=g)
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    pos = torch.stack([xs.flatten(), ys.flatten()], -1)
    inputs["pixel_position_ids"] = pos.expand(BATCH, -1, -1).clone()


def _rx_idefics(inputs, params, config, g):
    import torch
    if "pixel_values" in inputs and "input_ids" in inputs:
        # (batch, images, c, h, w): one image per example, which every token
        # may cross-attend to
        inputs["pixel_values"] = inputs["pixel_values"][:, None]
        seq = inputs["input_ids"].shape[1]
        inputs["image_attention_mask"] = torch.ones(BATCH, seq, 1, dtype=torch.long)


def _rx_image_pair(inputs, params, config, g):
    import torch
    ch = _sub(config, "num_channels", 3)
    inputs["pixel_values"] = torch.randn(BATCH, 2, ch, *_image_hw(config, IMAGE), generator=g)


def _rx_kosmos2(inputs, params, config, g):
    import torch
    if "input_ids" not in inputs:
        return
    # the resampled image queries replace the tokens the mask marks
    n = config.latent_query_num
    ids = _with_placeholders(inputs, params, _free_token(config), n, g)
    mask = torch.zeros_like(ids)
    mask[:, 2:2 + n] = 1
    inputs["image_embeds_position_mask"] = mask


def _rx_oneformer(inputs, params, config, g):
    import torch
    # the tokenised task prompt ("the task is semantic"), padded to its length
    inputs["task_inputs"] = torch.randint(4, 64, (BATCH, config.task_seq_len), generator=g)


def _rx_perceiver(inputs, params, config, g):
    import torch
    if "input_ids" not in params and "pixel_values" not in params:
        # the bare model has no preprocessor: inputs are already d_model wide
        inputs["inputs"] = torch.randn(BATCH, SEQ, config.d_model, generator=g)


def _rx_pi0(inputs, params, config, g):
    import torch
    steps = 4  # a short action chunk
    if "state" in params:
        inputs["state"] = torch.randn(BATCH, config.max_state_dim, generator=g)
        inputs["noise"] = torch.randn(BATCH, steps, config.max_action_dim, generator=g)
        inputs["timestep"] = torch.rand(BATCH, generator=g)
    elif "action_embeds" in params:
        # the state token followed by the noised actions, embedded
        inputs["action_embeds"] = torch.randn(BATCH, 1 + steps, config.dit_config.hidden_size,
                                              generator=g)
    vlm = config.vlm_config
    vc = vlm.vision_config
    if "input_ids" in inputs and "pixel_values" in params:
        # one camera per example; its patches' placeholders lead the prompt
        side = vc.image_size
        inputs["pixel_values"] = torch.randn(BATCH, 1, vc.num_channels, side, side, generator=g)
        inputs["pixel_attention_mask"] = torch.ones(BATCH, 1, dtype=torch.bool)
        _with_placeholders(inputs, params, vlm.image_token_id, (side // vc.patch_size) ** 2, g)


def _rx_pix2struct(inputs, params, config, g):
    import torch
    vc = _vision(config)
    side = 4
    # each patch vector is prefixed by its 1-based (row, column)
    rows, cols = torch.meshgrid(torch.arange(1, side + 1), torch.arange(1, side + 1),
                                indexing="ij")
    idx = torch.stack([rows.flatten(), cols.flatten()], -1).float().expand(BATCH, -1, -1)
    patches = torch.randn(BATCH, side * side, vc.patch_embed_hidden_size, generator=g)
    inputs["flattened_patches"] = torch.cat([idx, patches], -1)
    inputs.pop("pixel_values", None)


def _rx_fsmt(inputs, params, config, g):
    # FSMT does not derive decoder inputs from labels: teacher-force them
    if "labels" in inputs:
        inputs["decoder_input_ids"] = inputs["labels"].clone()


def _rx_gemma3n_audio(inputs, params, config, g):
    import torch
    inputs["audio_mel"] = torch.randn(BATCH, 64, config.input_feat_size, generator=g)
    inputs["audio_mel_mask"] = torch.zeros(BATCH, 64, dtype=torch.bool)  # True = padding


def _rx_seggpt(inputs, params, config, g):
    import torch
    h, w = config.image_size
    h //= 2  # the model stacks prompt and input into one image of image_size
    for k in ("pixel_values", "prompt_pixel_values", "prompt_masks"):
        inputs[k] = torch.randn(BATCH, config.num_channels, h, w, generator=g)


def _rx_speecht5(inputs, params, config, g):
    import torch
    if "decoder_input_values" in params:
        # the bare model has no pre-nets: both sides take hidden states
        inputs["input_values"] = torch.randn(BATCH, SEQ, config.hidden_size, generator=g)
        inputs["decoder_input_values"] = torch.randn(BATCH, DEC_SEQ, config.hidden_size,
                                                     generator=g)


def _rx_siglip2(inputs, params, config, g):
    import torch
    side = 4  # patches per side of the (unpadded) image
    p = config.patch_size
    inputs["pixel_values"] = torch.randn(BATCH, side * side, config.num_channels * p * p,
                                         generator=g)
    inputs["pixel_attention_mask"] = torch.ones(BATCH, side * side, dtype=torch.long)
    inputs["spatial_shapes"] = torch.tensor([[side, side]] * BATCH)


def _rx_vibevoice_dec(inputs, params, config, g):
    import torch
    inputs["hidden_states"] = torch.randn(BATCH, config.hidden_size, 4, generator=g)


def _rx_vibevoice_enc(inputs, params, config, g):
    import torch
    hop = 1
    for r in config.downsampling_ratios:
        hop *= r
    inputs["hidden_states"] = torch.randn(BATCH, config.channels, 2 * hop, generator=g)


def _rx_videollama3(inputs, params, config, g):
    import torch
    inputs["merge_sizes"] = torch.ones(BATCH, dtype=torch.long)


def _rx_kyutai(inputs, params, config, g):
    import torch
    # every step carries a text token and one code per audio codebook
    ids = inputs["input_ids"]
    codes = torch.randint(0, config.codebook_vocab_size, (*ids.shape, config.num_codebooks),
                          generator=g)
    inputs["input_ids"] = torch.cat([ids[..., None], codes], -1)


def _rx_lxmert(inputs, params, config, g):
    import torch
    inputs["visual_feats"] = torch.randn(BATCH, 4, config.visual_feat_dim, generator=g)
    inputs["visual_pos"] = torch.rand(BATCH, 4, config.visual_pos_dim, generator=g)


def _rx_mask_features(inputs, params, config, g):
    import torch
    feats = inputs["input_features"]
    inputs["input_features_mask"] = torch.ones(feats.shape[0], feats.shape[-1], dtype=torch.long)


def _rx_video_pixels(inputs, params, config, g):
    inputs["pixel_values"] = _video(config, g)


def _rx_vision_start(inputs, params, config, g):
    image = _token_id(config, "image")
    ids = inputs.get("input_ids")
    if ids is not None and image is not None and (ids[:, 2] == image).all():
        # rope indexing counts the images that follow a vision-start token
        ids[:, 1] = config.vision_start_token_id


def _rx_vjepa2(inputs, params, config, g):
    inputs["pixel_values_videos"] = _video(config, g, frames=2 * config.tubelet_size)


def _rx_xmod(inputs, params, config, g):
    import torch
    inputs["lang_ids"] = torch.zeros(BATCH, dtype=torch.long)


_RECIPES = {
    "audio-spectrogram-transformer": ("the spectrogram (batch, frames, mel) fills its "
                                      "position table", None, _rx_ast),
    "audioflamingo3_encoder": ("the encoder takes its frame mask", None, _rx_mask_features),
    "autoformer": ("forecasts need a horizon and a context at least the label window",
                   _cfg_autoformer, None),
    "blip-2": ("one placeholder per Q-Former query", _cfg_query_placeholder,
               _rx_query_placeholders),
    "blip_2_qformer": ("the Q-Former cross-attends to image features", None, _rx_blip_qformer),
    "bros": ("boxes are quadrilaterals; their embedding is per head", _cfg_bros, _rx_bros),
    "clap": ("audio is a (batch, 1, time, mel) spectrogram; the tower's width doubles per stage",
             _cfg_clap, _rx_clap),
    "decision_transformer": ("trajectories of states, actions, rewards, returns", None,
                             _rx_decision),
    "efficientloftr": ("matches a pair of images: (batch, 2, channels, h, w)", None,
                       _rx_image_pair),
    "encodec": ("audio is (batch, channels, samples); codes have the encoder's width",
                _cfg_codebook, _rx_audio_channels),
    "fsmt": ("labels are not shifted into decoder inputs", None, _rx_fsmt),
    "fun_asr_nano_encoder": ("stacked low-frame-rate features and their mask", None, _rx_fun_asr),
    "gemma3n_audio": ("mel frames and their padding mask", None, _rx_gemma3n_audio),
    "gemma4_vision": ("flattened patches and their (x, y) positions, whole pooling windows",
                      None, _rx_gemma4_vision),
    "granite_speech5_ctc": ("mel frames come delta-expanded and stacked in pairs (4x mel)",
                            None, _rx_granite_speech5),
    "granite_speech5_encoder": ("mel frames come delta-expanded and stacked in pairs (4x mel)",
                                None, _rx_granite_speech5),
    "idefics": ("images per example, and which tokens cross-attend to them", None, _rx_idefics),
    "informer": ("forecasts need a horizon and a context", _cfg_forecast, None),
    "instructblip": ("one placeholder per Q-Former query", _cfg_query_placeholder,
                     _rx_query_placeholders),
    "instructblipvideo": ("clips of frames; one placeholder per query per frame",
                          _cfg_query_placeholder, _rx_instructblipvideo),
    "kosmos-2": ("image queries replace the tokens a position mask marks", None, _rx_kosmos2),
    "kyutai_speech_to_text": ("steps are a text token and one code per codebook", None,
                              _rx_kyutai),
    "lfm2_moe": ("layer kinds are left to checkpoints", _cfg_lfm2_moe, None),
    "lightglue": ("matches a pair of images: (batch, 2, channels, h, w)", None, _rx_image_pair),
    "lxmert": ("region features and boxes stand in for a detector", None, _rx_lxmert),
    "mimi_encoder": ("audio is (batch, channels, samples)", None, _rx_audio_channels),
    "mobilebert": ("embeddings are at most as wide as the hidden state", _cfg_mobilebert, None),
    "muse_glimmer_assistant": ("a drafter: noised block embeddings and the target's context",
                               None, _rx_dflash),
    "oneformer": ("a tokenised task prompt conditions the segmentation", None, _rx_oneformer),
    "perceiver": ("preprocessor-free inputs; head counts and decoder length fit the inputs",
                  _cfg_perceiver, _rx_perceiver),
    "pi0": ("a robot state and a noised action chunk at a denoising time; camera images",
            _cfg_pi0, _rx_pi0),
    "pix2struct": ("variable-resolution patches, each prefixed by its (row, column)", None,
                   _rx_pix2struct),
    "pocket_tts_audio_tokenizer_encoder": ("audio is (batch, channels, samples)", None,
                                           _rx_audio_channels),
    "qwen2_5_omni_thinker": ("images follow a vision-start token the default omits",
                             _cfg_vision_start, _rx_vision_start),
    "qwen3_asr_encoder": ("the encoder takes its frame mask", None, _rx_mask_features),
    "qwen3_omni_moe_thinker": ("images follow a vision-start token the default omits",
                               _cfg_vision_start, _rx_vision_start),
    "qwen4_exp": ("sparse-attention indexer sizes are left to checkpoints", _cfg_qsa, None),
    "qwen4_exp_text": ("sparse-attention indexer sizes are left to checkpoints", _cfg_qsa, None),
    "seggpt": ("an image, a prompt image and its mask at the configured size", None, _rx_seggpt),
    "siglip2_vision_model": ("NaFlex patches with their mask and grid", None, _rx_siglip2),
    "speecht5": ("the bare model has no pre-nets: it takes hidden states", None, _rx_speecht5),
    "time_series_transformer": ("forecasts need a horizon and a context", _cfg_forecast, None),
    "timesformer": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "vibevoice_acoustic_tokenizer_decoder": ("latents are (batch, width, frames)", None,
                                             _rx_vibevoice_dec),
    "vibevoice_acoustic_tokenizer_encoder": ("audio is (batch, channels, samples), whole hops",
                                             None, _rx_vibevoice_enc),
    "video_llama_3_vision": ("patches are not merged (merge size 1 per image)", None,
                             _rx_videollama3),
    "videomae": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "vivit": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "vjepa2": ("two tubelets of frames keep the clip small", None, _rx_vjepa2),
    "xclip": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "xcodec": ("mono audio is (batch, 1, samples); codes span both encoders", _cfg_xcodec,
               _rx_audio_channels),
    "xmod": ("each example names its language adapter", None, _rx_xmod),
}


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
    grid = any(k in params for k in ("grid_thw", "image_grid_thw"))
    if "pixel_values" in params and pixels and not grid:
        ch = _sub(config, "num_channels", 3)
        inputs["pixel_values"] = torch.randn(BATCH, ch, *_image_hw(config), generator=g)
    # speech encoder-decoders name their main input "inputs"
    if model.main_input_name in ("input_values", "inputs") and "input_values" in params:
        inputs["input_values"] = torch.randn(BATCH, _samples(config), generator=g)
    if model.main_input_name == "input_features" and "input_features" in params:
        inputs["input_features"] = _features(model, config, g)
    # audio beside the main input (codecs that also take semantic features,
    # audio-text models): only where forward cannot run without it
    for name, make in (("input_values", lambda: torch.randn(BATCH, _samples(config), generator=g)),
                       ("input_features", lambda: _features(model, config, g))):
        if name in params and name not in inputs and \
                params[name].default is inspect.Parameter.empty:
            inputs[name] = make()
    encdec = getattr(config, "is_encoder_decoder", False)
    # causal LMs under the seq2seq mapping (audio LMs) have no decoder inputs:
    # they predict their own input ids (below)
    causal = task == "seq2seq-lm" and "decoder_input_ids" not in params
    if task in ("seq2seq-lm", "speech-seq2seq") and not causal or \
            "decoder_input_ids" in params and (task == "base" or
                                               encdec and task == "image-text-to-text"):
        dec = torch.randint(lo, hi, (BATCH, DEC_SEQ), generator=g)
        if task == "seq2seq-lm" and "labels" in params:
            inputs["labels"] = dec
        elif "decoder_input_ids" in params:
            inputs["decoder_input_ids"] = dec
    elif task in LM_TASKS and "labels" in params and "input_ids" in inputs:
        inputs["labels"] = ids.clone()
    if task == "seq-cls" and encdec:
        _eos_last(inputs, config)
    if grid and (pixels or "pixel_values" not in params):
        _grid_inputs(inputs, params, config, g)
    _fill_named(inputs, params, config, g)
    recipe = _RECIPES.get(config.model_type)
    if recipe and recipe[2]:
        recipe[2](inputs, params, config, g)
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


def _to_tpu(model):
    """``model.to("tpu")``, plus the tensors modules cache in plain attributes
    during the CPU run (Mimi's codebook caches its centroids), which ``to``
    does not move."""
    import torch
    model = model.to("tpu")
    for m in model.modules():
        for k, v in vars(m).items():
            if isinstance(v, torch.Tensor) and v.device.type == "cpu":
                setattr(m, k, v.to("tpu"))
    return model


def run_arch(name, task, model_type, verbose=False):
    import copy
    import warnings

    import torch
    import transformers
    warnings.filterwarnings("ignore")
    rec = {"task": task, "model_type": model_type}
    try:
        cls = getattr(transformers, name)
        if cls.forward is torch.nn.Module.forward:
            # containers of sub-models driven by generate() or decode helpers
            rec.update(status="skip", not_a_model=True,
                       reason=f"not a model: {name} defines no forward (its sub-models run "
                              "through generate() or decode helpers)")
            return rec
        model, config, inputs, want, level = build(cls, model_type, task)
        rec["shrink"] = level
    except Exception as e:  # noqa: BLE001  (any harness failure: not counted)
        rec.update(status="skip", reason="cpu: " + _short(e))
        return rec
    before = _fallbacks()
    try:
        tmodel = _to_tpu(copy.deepcopy(model))
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


def _audio_layouts(inputs):
    """The other layouts of synthesised audio: encoders differ in taking
    features (batch, width, frames) or (batch, frames, width), and raw audio
    (batch, samples) or (batch, channels, samples)."""
    feats, wave = inputs.get("input_features"), inputs.get("input_values")
    swaps = []
    if feats is not None and feats.dim() == 3:
        swaps.append({"input_features": feats.transpose(1, 2).contiguous()})
    if wave is not None and wave.dim() == 2:
        swaps.append({"input_values": wave[:, None]})
    if len(swaps) == 2:
        swaps.append({**swaps[0], **swaps[1]})
    return [{**inputs, **swap} for swap in swaps]


def _cpu_reference(model, config, task):
    """(inputs, CPU outputs); the other audio layouts where the first is
    rejected; text-only inputs where images without their placeholder tokens
    are rejected (multimodal LMs)."""
    import torch
    inputs = make_inputs(model, config, task)
    try:
        torch.manual_seed(SEED)
        with torch.no_grad():
            return inputs, model(**inputs)
    except Exception as first:  # noqa: BLE001
        for alt in _audio_layouts(inputs):
            try:
                torch.manual_seed(SEED)
                with torch.no_grad():
                    return alt, model(**alt)
            except Exception:  # noqa: BLE001
                pass
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
