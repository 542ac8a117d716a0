"""Reading configs and synthesising the pieces of model inputs: token ids
with multimodal placeholders, patch grids, images, video, boxes, audio
features and waveforms, time series."""
import inspect
import math

from .settings import BATCH, SEQ
from .configs import _int


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


# (placeholder kind, forward input, the model's method that turns that input
# into the features merged at the placeholders)
_MODALITIES = (("image", "pixel_values", "get_image_features"),
               ("video", "pixel_values_videos", "get_video_features"),
               ("audio", "input_features", "get_audio_features"))
# feature masks audio LMs take beside their features (all frames valid)
_FEATURE_MASKS = ("feature_attention_mask", "input_features_mask", "audio_attention_mask")


def _feature_count(model, getter, inputs, width):
    """Feature vectors ``model.<getter>`` makes from the synthesised inputs
    (the arguments of the getter found in ``inputs``): the projected
    features (``pooler_output``, else the output itself), each as wide as
    the LM (``width``); None where that does not run or the features are
    not LM-wide."""
    import torch
    # the first getter naming its arguments: task heads without one (or
    # forwarding *args) wrap a base model that has it
    for m in model.modules():
        fn = getattr(m, getter, None)
        names = [n for n, p in inspect.signature(fn).parameters.items()
                 if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)] if fn else []
        if names:
            break
    else:
        return None
    try:
        with torch.no_grad():
            out = fn(**{n: inputs[n] for n in names if n in inputs})
    except Exception:  # noqa: BLE001  (getters needing what only forward builds)
        return None
    feats = getattr(out, "pooler_output", None)
    if feats is None:
        feats = getattr(out, "last_hidden_state", out)
    stack, rows = [feats], 0
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            if x.dim() == 0 or x.shape[-1] != width:
                return None
            rows += x.numel() // width
        elif isinstance(x, (list, tuple)):
            stack += list(x)
    return rows or None


def _feature_placeholders(model, inputs, params, config, g):
    """Multimodal LMs put each image's (clip's) features where its placeholder
    tokens are, and check that the counts agree: without placeholders they
    reject the features (or run text-only). Every row gets as many as the
    model's own feature getter makes per row from the synthesised input
    (replacing a count that disagrees). Images per example (5-D pixels) are
    tried where single images are refused; audio LMs, whose features are
    optional, get them here too, and are left without where the getter
    refuses them."""
    import torch
    if "input_ids" not in inputs:
        return
    width = getattr(config.get_text_config(), "hidden_size", None)
    for kind, name, getter in _MODALITIES:
        token = _token_id(config, kind)
        if token is None or name not in params or not isinstance(width, int) or \
                not any(hasattr(m, getter) for m in model.modules()):
            continue
        added = []
        if name == "input_features" and name not in inputs:
            inputs[name] = _features(model, config, g)
            added.append(name)
        if name not in inputs:
            continue
        if name == "input_features":
            x = inputs[name]
            for mask in _FEATURE_MASKS:
                if mask in params and mask not in inputs:
                    inputs[mask] = torch.ones(x.shape[0], x.shape[-1], dtype=torch.long)
                    added.append(mask)
        n = _feature_count(model, getter, inputs, width)
        if n is None and name == "pixel_values" and "image_sizes" in params and \
                "image_sizes" not in inputs and inputs[name].dim() == 4:
            # the (h, w) of every image, where the getter needs them
            inputs["image_sizes"] = torch.tensor([list(inputs[name].shape[-2:])] *
                                                 inputs[name].shape[0])
            n = _feature_count(model, getter, inputs, width)
            if n is None:
                del inputs["image_sizes"]
        if n is None and name == "pixel_values" and inputs[name].dim() == 4:
            single = inputs[name]
            inputs[name] = single[:, None]
            n = _feature_count(model, getter, inputs, width)
            if n is None:
                inputs[name] = single
        b = inputs["input_ids"].shape[0]
        if not n or n % b:
            for k in added:
                if k.startswith(("input_features", "feature", "audio")):
                    del inputs[k]
            continue
        ids = inputs["input_ids"]
        have = int((ids[0] == token).sum())
        if have and have != n // b and bool(((ids == token).sum(1) == have).all()):
            inputs["input_ids"] = ids[ids != token].reshape(b, -1)
            for k in ("attention_mask", "labels", "mm_token_type_ids"):
                if k in inputs and inputs[k].shape == ids.shape:
                    inputs[k] = inputs[k][ids != token].reshape(b, -1)
            have = 0
        if not have:
            _with_placeholders(inputs, params, token, n // b, g)


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
    pos = None
    for c in _audio_configs(config):
        pos = pos or _first(c, ("max_source_positions",), None)
    frames = 2 * (pos or _sub(config, "max_source_positions", 50))
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
