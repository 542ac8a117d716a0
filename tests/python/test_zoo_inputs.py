"""The zoo's input synthesis (CPU only, no tpu): inputs that models check
against their config (placeholder counts, patch grids, <eos> pooling, time
series windows) are consistent, and the model runs on them."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from torch_tpu import zoo  # noqa: E402

_TYPES = {name: model_type for name, _, model_type in zoo.architectures()}


def _build(name):
    from transformers import AutoConfig
    model_type = _TYPES[name]
    config = zoo.fit_config(zoo.shrink(AutoConfig.for_model(model_type)))
    torch.manual_seed(0)
    return getattr(transformers, name)(config).eval(), config


def _run(model, inputs):
    with torch.no_grad():
        return model(**inputs)


def test_flattened_patch_vision_tower_gets_matching_grid():
    model, config = _build("Qwen2_5_VisionTransformerPretrainedModel")
    inputs = zoo.make_inputs(model, config, "base")
    vc = zoo.synth._vision(config)
    grid = inputs["grid_thw"]
    assert grid.shape == (zoo.BATCH, 3)
    # one row of patches per grid cell, each a C * T * P * P vector
    assert inputs["hidden_states"].shape == (
        int(grid.prod(-1).sum()),
        vc.in_channels * vc.temporal_patch_size * vc.patch_size ** 2)
    # the grid must survive the spatial merge
    assert bool((grid[:, 1:] % vc.spatial_merge_size == 0).all())
    _run(model, inputs)


def test_multimodal_lm_placeholders_match_image_features():
    model, config = _build("Qwen2VLForConditionalGeneration")
    vocab = config.get_text_config().vocab_size
    assert config.image_token_id < vocab  # fit_config moved it into the shrunk vocabulary
    inputs = zoo.make_inputs(model, config, "image-text-to-text")
    ids = inputs["input_ids"]
    merge = config.vision_config.spatial_merge_size
    per_image = int(inputs["image_grid_thw"][0].prod()) // merge ** 2
    assert ((ids == config.image_token_id).sum(1) == per_image).all()
    assert torch.equal(inputs["mm_token_type_ids"], (ids == config.image_token_id).long())
    assert inputs["attention_mask"].shape == ids.shape
    out = _run(model, inputs)
    assert out.logits.shape[:2] == ids.shape


def test_mrope_sections_cover_the_shrunk_head():
    _, config = _build("Qwen2VLModel")
    text = config.get_text_config()
    head_dim = text.hidden_size // text.num_attention_heads
    assert sum(text.rope_parameters["mrope_section"]) == head_dim // 2


def test_encoder_decoder_classifier_rows_end_in_eos():
    model, config = _build("BartForSequenceClassification")
    inputs = zoo.make_inputs(model, config, "seq-cls")
    ids = inputs["input_ids"]
    assert (ids[:, -1] == config.eos_token_id).all()
    assert ((ids == config.eos_token_id).sum(1) == 1).all()  # the same count in every row
    _run(model, inputs)


def test_audio_lm_under_seq2seq_mapping_predicts_its_own_ids():
    model, config = _build("VoxtralForConditionalGeneration")
    inputs = zoo.make_inputs(model, config, "seq2seq-lm")
    assert "decoder_input_ids" not in inputs
    assert torch.equal(inputs["labels"], inputs["input_ids"])


def test_time_series_history_covers_context_and_lags():
    model, config = _build("TimeSeriesTransformerModel")
    assert config.prediction_length and config.context_length
    inputs = zoo.make_inputs(model, config, "base")
    past = config.context_length + max(config.lags_sequence)
    assert inputs["past_values"].shape == (zoo.BATCH, past)
    assert inputs["past_observed_mask"].shape == (zoo.BATCH, past)
    assert inputs["future_values"].shape == (zoo.BATCH, config.prediction_length)
    _run(model, inputs)


def test_video_models_get_clips_of_the_configured_length():
    model, config = _build("VideoMAEModel")
    inputs = zoo.make_inputs(model, config, "base")
    assert inputs["pixel_values"].shape == (
        zoo.BATCH, config.num_frames, config.num_channels, config.image_size, config.image_size)


def test_qformer_models_get_one_placeholder_per_query():
    model, config = _build("InstructBlipModel")
    inputs = zoo.make_inputs(model, config, "base")
    assert ((inputs["input_ids"] == config.image_token_index).sum(1) ==
            config.num_query_tokens).all()
    assert inputs["qformer_input_ids"].shape[0] == zoo.BATCH
    _run(model, inputs)


def test_recipes_are_sorted_and_explained():
    keys = list(zoo.recipes._RECIPES)
    assert keys == sorted(keys)
    for why, cfg, rx in zoo.recipes._RECIPES.values():
        assert isinstance(why, str) and why and (cfg or rx)


def test_class_without_forward_is_a_not_a_model_skip():
    rec = zoo.run_arch("BarkModel", "base", "bark")
    assert rec["status"] == "skip" and rec.get("not_a_model")
    assert rec["reason"].startswith("not a model")


def test_non_square_image_size_gives_height_by_width_pixels():
    # MGP-STR reads (32, 128) text crops; the patch embedding checks both sides
    model, config = _build("MgpstrForSceneTextRecognition")
    inputs = zoo.make_inputs(model, config, "base")
    assert tuple(inputs["pixel_values"].shape[-2:]) == tuple(config.image_size)
    _run(model, inputs)


def test_composite_text_config_gets_a_pad_id():
    # pooling at the last non-pad token needs a pad id on the text config
    # (through the shrink ladder: the hybrid keeps an attention layer at the
    # consistent level, which its cache needs)
    model, config, inputs, out, level = zoo.build(
        transformers.Qwen3_5ForSequenceClassification, "qwen3_5", "seq-cls")
    assert config.get_text_config().pad_token_id is not None
    assert out.logits.shape[0] == inputs["input_ids"].shape[0]


def test_audio_features_take_the_encoders_width_and_layout():
    # the mel count sits in the encoder's sub-config; this encoder wants frames first
    model, config = _build("ParakeetForCTC")
    inputs, _ = zoo.models._cpu_reference(model, config, "base")
    feats = inputs["input_features"]
    assert feats.shape[0] == zoo.BATCH and feats.shape[-1] == config.encoder_config.num_mel_bins


def test_raw_audio_gets_whole_codec_hops_and_a_channel_dim():
    model, config = _build("DacModel")
    inputs, _ = zoo.models._cpu_reference(model, config, "base")
    wave = inputs["input_values"]
    assert wave.dim() == 3 and wave.shape[1] == 1
    assert wave.shape[-1] % zoo.synth._samples(config) == 0


def test_codec_upsampling_groups_follow_the_shrunk_width():
    model, config = _build("MimiDecoderModel")
    assert config.hidden_size % config.upsample_groups == 0
    _run(model, zoo.make_inputs(model, config, "base"))


def _tower_runs(model, inputs, tower):
    ran = []
    hook = tower.register_forward_hook(lambda *a: ran.append(True))
    try:
        _run(model, inputs)
    finally:
        hook.remove()
    return bool(ran)


def test_vision_language_placeholders_match_the_feature_count():
    # LLaVA takes images without grids: one placeholder per projected patch
    # feature, counted from the model's own get_image_features
    model, config = _build("LlavaForConditionalGeneration")
    inputs = zoo.make_inputs(model, config, "image-text-to-text")
    with torch.no_grad():
        feats = model.get_image_features(pixel_values=inputs["pixel_values"]).pooler_output
    per_row = sum(f.shape[0] for f in feats) // zoo.BATCH
    assert ((inputs["input_ids"] == config.image_token_id).sum(1) == per_row).all()
    assert inputs["attention_mask"].shape == inputs["input_ids"].shape
    assert _tower_runs(model, inputs, model.model.vision_tower)


def test_audio_lm_gets_audio_and_its_placeholders():
    # the features are optional in forward: without them (and placeholders)
    # the audio tower would never run
    model, config = _build("AudioFlamingo3ForConditionalGeneration")
    inputs = zoo.make_inputs(model, config, "seq2seq-lm")
    assert "input_features" in inputs
    assert (inputs["input_ids"] == config.audio_token_id).sum() > 0
    assert _tower_runs(model, inputs, model.model.audio_tower)


def test_text_only_fallback_is_recorded():
    # Fuyu's patch embeddings need image patch indices the harness does not
    # synthesise: the row compares its text path and says so
    model, config, inputs, _, _ = zoo.build(transformers.FuyuModel, "fuyu", "base")
    if "pixel_values" not in inputs:
        assert model.zoo_text_only
