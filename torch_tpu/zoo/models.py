"""Building one architecture on the CPU: the shrunk and fitted config, the
model with random weights, its inputs and the CPU reference outputs."""
import inspect

from .settings import BATCH, DEC_SEQ, LM_TASKS, SEED, SEQ, TASKS, VOCAB
from .configs import LEVELS, _MAX_PARAMS, _OVERRIDES, _param_count, shrink
from .synth import (
    _audio_configs, _audio_layouts, _eos_last, _feature_placeholders, _features, _fill_named,
    _grid_inputs, _image_hw, _samples, _sub
)
from .recipes import _RECIPES


# class name -> config entries that say how the class is used, where heads
# sharing one config type need different values
_CLASS_CONFIG = {
    # the LM head predicts the next token: its stack must be causal (the
    # masked-LM head of the same type must not be)
    "ReformerModelWithLMHead": {"is_decoder": True},
}


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
    for k, v in _CLASS_CONFIG.get(cls.__name__, {}).items():
        setattr(config, k, v)
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
    the first level's error if none does (a missing library's at once)."""
    first = None
    for level in LEVELS:
        try:
            return (*build_level(cls, model_type, task, level), level)
        except ImportError:
            raise  # a missing library: no level can help
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
    shrunk head (sections named by the config, or by an override where
    only checkpoints name them)."""
    rope = getattr(text, "rope_parameters", None)
    if not isinstance(rope, dict) or "mrope_section" not in rope and \
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
    if pixels:
        _feature_placeholders(model, inputs, params, config, g)
    if "use_cache" in params:
        inputs["use_cache"] = False
    return inputs


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
    """(inputs, CPU outputs); the other audio layouts where the first is
    rejected; text-only inputs where the images (audio) are rejected
    (multimodal LMs), which sets ``model.zoo_text_only`` to the reason."""
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
        if not any(k in inputs for k, _ in _MODAL_INPUTS):
            raise
        inputs = make_inputs(model, config, task, pixels=False)
        try:
            torch.manual_seed(SEED)
            with torch.no_grad():
                out = model(**inputs)
        except Exception:  # noqa: BLE001
            raise first from None
        # the row then compares the text path only: the harness reports why
        model.zoo_text_only = _short_error(first)
        return inputs, out


def _short_error(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {' '.join(lines[:1])[:200]}"


# forward inputs of the non-text modalities (and what the harness calls them)
_MODAL_INPUTS = (("pixel_values", "images"), ("pixel_values_videos", "video"),
                 ("input_features", "audio"))
