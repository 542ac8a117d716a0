"""Per-model-type recipes (``_RECIPES``): a config fix applied after the
shrink and/or an input fix, each with its reason."""

from .settings import BATCH, DEC_SEQ, HEADS, IMAGE, SEQ
from .synth import (
    _boxes, _free_token, _image_hw, _samples, _sub, _token_id, _video, _vision, _with_placeholders
)


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


def _rederive(config):
    """Recomputes the sizes a config derives from its fields in __post_init__:
    ``from_dict`` hands the shrunk config their full-size values back."""
    import dataclasses
    fields = {f.name for f in dataclasses.fields(config)}
    fresh = type(config)(**{k: getattr(config, k) for k in fields})
    for k, v in vars(fresh).items():
        if k not in fields and not k.startswith("_"):
            setattr(config, k, v)


def _cfg_bros(config):
    # box embeddings are added per attention head
    config.dim_bbox_projection = config.hidden_size // config.num_attention_heads


def _cfg_codebook(config):
    config.codebook_dim = config.hidden_size


def _image_vocabulary(config, codes, name):
    """A vocabulary map for VQ image models (the checkpoint's tokenizer
    provides it): ``<image>`` and ``codes`` image tokens named by ``name(i)``
    at the top of the text vocabulary, below its last id."""
    vocab = config.get_text_config().vocab_size
    base = vocab - codes - 2
    config.vocabulary_map = {"<image>": vocab - 1,
                             **{name(i): base + i for i in range(codes)}}
    config.image_token_id = vocab - 1


def _cfg_chameleon(config):
    config.vq_config.num_embeddings = 64
    # code 12 is named IMGIMGBCZ: digits spelled as letters A-J
    _image_vocabulary(config, 64, lambda i: "IMGIMG" + "".join(chr(ord("A") + int(d))
                                                               for d in str(i)) + "Z")


def _cfg_deepseek_ocr2(config):
    # the MoE layout comes with checkpoints (all None by default): a dense
    # first layer, experts after it, two of them per token
    text = config.text_config
    if text.mlp_layer_types is None:
        text.mlp_layer_types = ["dense"] + ["sparse"] * (text.num_hidden_layers - 1)
    if text.num_experts_per_tok is None:
        text.num_experts_per_tok = 2
    # the SAM neck's last downsampling feeds the vision encoder: its width
    # (896 in checkpoints, as is the encoder's) is the encoder's
    vc = config.vision_config
    width = vc.encoder_config.hidden_size
    vc.sam_config.downsample_channels = [width // 2, width]


def _cfg_fast_vlm(config):
    # the tower is timm's FastViT-MCi3 (125M parameters): one block per stage
    # instead, widths doubling from 8 as the default's do from 96 (each
    # down-sampling conv is grouped by its input channels; the attention
    # stages keep whole 32-wide heads); the projector reads the final conv,
    # twice the last width
    vc = config.vision_config
    dims = (8, 16, 32, 64, 128)
    vc.model_args = {**(vc.model_args or {}), "layers": (1,) * 5, "embed_dims": dims}
    vc.hidden_size = 2 * dims[-1]


def _cfg_gemma3n(config):
    # the vision tower is timm's MobileNetV5 encoder: 84 blocks, 300M
    # parameters, and a fused output fixed at 2048 channels. One stage of
    # each of its block kinds at a few channels instead (the same strides;
    # timm's stages end in a residual block, as there), the output grid 2 x 2
    # soft tokens (at 64 pixels, as _rx_image64 sends)
    from timm.models._efficientnet_builder import decode_arch_def
    vc = config.vision_config
    vc.hidden_size = 2048
    vc.model_args = {**(vc.model_args or {}), "stem_size": 16, "msfa_output_resolution": 2,
                     "block_args": decode_arch_def([
                         ["er_r1_k3_s2_e4_c16"], ["uir_r1_a3_k5_s2_e6_c32"],
                         ["uir_r1_a5_k5_s2_e6_c32", "mqa_r1_k3_h2_v2_s1_d8_c32",
                          "uir_r1_a0_k0_s1_e2_c32"],
                         ["uir_r1_a5_k5_s2_e6_c64", "mqa_r1_k3_h2_s1_d8_c64",
                          "uir_r1_a0_k0_s1_e2_c64"]])}
    config.vision_soft_tokens_per_image = 4
    # the text vocabulary ends with the vision then the audio tokens (hard
    # embeddings, 128 each after the 262144 text ids; the padding of audio
    # features embeds the last id): 32 each at the top of the shrunk one
    vocab, n = config.text_config.vocab_size, 32
    for i, c in enumerate((vc, config.audio_config)):
        c.vocab_size, c.vocab_offset = n, vocab - (2 - i) * n
    # audio placeholders come padded to a fixed count (188 for 30 s clips):
    # the 4 tokens of the 64 mel frames _rx_gemma3n sends (4x subsampling,
    # then 4x reduction)
    config.audio_soft_tokens_per_image = 4


def _cfg_emu3(config):
    config.vq_config.codebook_size = 64
    _image_vocabulary(config, 64, lambda i: f"<|visual token{i:06d}|>")


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


def _assign(config, values):
    """Sets ``values`` on ``config``; nested dicts go into sub-configs."""
    for k, v in values.items():
        if isinstance(v, dict) and hasattr(getattr(config, k, None), "to_dict"):
            _assign(getattr(config, k), v)
        else:
            setattr(config, k, v)


# SAM's prompt encoder, mask decoder and vision neck share one width (the
# decoder upsamples masks to width / 8 channels, positional features are
# 2 * num_pos_feats wide); the prompt encoder's dense grid is the image
# embedding's grid. Sizes the config derives in __post_init__
# (image_embedding_size, the positional scale) are set here as the shrink
# leaves them at their full-size values.
_SAM_HEADS = {
    "prompt_encoder_config": {"hidden_size": 32, "image_size": 64, "patch_size": 8,
                              "image_embedding_size": 8},
    "mask_decoder_config": {"hidden_size": 32, "num_attention_heads": 4, "mlp_dim": 64,
                            "iou_head_hidden_dim": 32},
}
_SAM = {
    **_SAM_HEADS,
    # an 8 x 8 patch grid in 4 x 4 windows, the last layer global
    "vision_config": {"hidden_size": 32, "num_attention_heads": 4, "image_size": 64,
                      "patch_size": 8, "window_size": 4, "global_attn_indexes": [1],
                      "mlp_dim": 64, "output_channels": 32, "num_pos_feats": 16,
                      "scale": 16},
}
# SAM 2's Hiera: four stages, each half the grid and twice the width of the
# one before (16 x 16 patches of a 64 x 64 image down to 2 x 2), windows that
# tile each stage's grid, one global block in the third stage
_SAM2_HIERA = {"hidden_size": 16, "image_size": [64, 64],
               "embed_dim_per_stage": [16, 32, 64, 128],
               "num_attention_heads_per_stage": [1, 2, 4, 8],
               "blocks_per_stage": [1, 2, 2, 1], "window_size_per_stage": [4, 4, 2, 2],
               "global_attention_blocks": [4]}
# its neck reads the stages from the last, at their grids; the mask decoder
# runs on the 4 x 4 grid (image / prompt patch size 16)
_SAM2_VISION = {"backbone_config": _SAM2_HIERA, "backbone_channel_list": [128, 64, 32, 16],
                "backbone_feature_sizes": [[16, 16], [8, 8], [4, 4]], "fpn_hidden_size": 32}
_SAM2 = {**_SAM_HEADS, "vision_config": _SAM2_VISION,
         "prompt_encoder_config": {"hidden_size": 32, "image_size": 64, "patch_size": 16}}

# EdgeTAM's timm backbone (RepViT in checkpoints; the default config misspells
# the key, which leaves timm's ResNet-50): timm's tiny ConvNeXt has the same
# four stages at strides 4 to 32, which the neck reads from the last, at
# SAM 2's grids of a 64-pixel image
_EDGETAM_VISION = {"backbone_config": {"architecture": "test_convnext"},
                   "backbone_channel_list": [64, 48, 32, 24],
                   "backbone_feature_sizes": _SAM2_VISION["backbone_feature_sizes"],
                   "fpn_hidden_size": 32}
_EDGETAM = {**_SAM2, "vision_config": _EDGETAM_VISION}

# SAM 3's ViT tiles position embeddings pretrained on a 4 x 4 grid over the
# 8 x 8 grid of a 112-pixel image, windows the size of that tile; the neck's
# scales 4, 2, 1 give the tracker's feature grids, the last one the prompt
# encoder's
_SAM3_TRACKER = {
    **_SAM_HEADS,
    "prompt_encoder_config": {"hidden_size": 32, "image_size": 112, "patch_size": 14},
    "vision_config": {
        "backbone_config": {"image_size": 112, "pretrain_image_size": 56, "window_size": 4,
                            "global_attn_indexes": [1]},
        "fpn_hidden_size": 32, "backbone_feature_sizes": [[32, 32], [16, 16], [8, 8]]},
}


def _cfg_depth_pro(config):
    # the ViT encoders see patch_size crops of the image at three scales: 16
    # pixel crops (4 x 4 patches) of a 64-pixel image, feature widths a
    # fraction of the full ones, hooks on the two shrunk layers
    _assign(config, {"patch_size": 16, "fusion_hidden_size": 32,
                     "intermediate_hook_ids": [1, 0], "intermediate_feature_dims": [16, 16],
                     "scaled_images_feature_dims": [32, 32, 16]})
    for name in config.sub_configs:
        _assign(getattr(config, name), {"image_size": 16, "patch_size": 4})


def _all_stages(backbone):
    """Backbone outputs of every stage (feature-pyramid necks read them all;
    checkpoints list them, the default backbone config names the last)."""
    backbone.set_output_features_output_indices(out_features=backbone.stage_names[1:],
                                                out_indices=None)


def _ppocr_det_backbone(config):
    # the default PP-LCNetV4 is the text-line recogniser's, halving only the
    # height ([2, 1] strides); the detector's halves both sides once per
    # stage after the first, the pyramid the neck upsamples by 2 per level.
    # Channels at a quarter of the default's, the neck's too.
    bb = config.backbone_config
    q = lambda c: c // 4 if c > 3 else c  # noqa: E731
    bb.stem_channels = [q(c) for c in bb.stem_channels]
    bb.block_configs = [
        [[k, q(i), q(o), 2 if stage and not n else 1, se] for n, (k, i, o, _, se) in enumerate(blocks)]
        for stage, blocks in enumerate(bb.block_configs)]
    _rederive(bb)  # stage widths
    _all_stages(bb)
    config.neck_out_channels = q(config.neck_out_channels)


def _cfg_ppocr_det_medium(config):
    _ppocr_det_backbone(config)
    # sizes the checkpoints set (None by default): the intra-class blocks'
    # long/mid/short vertical, horizontal and square kernels (7, 5, 3) as
    # (kernel, stride, padding), the upsampling of each pyramid level to the
    # finest, and the head's kernels
    k = {7: 3, 5: 2, 3: 1}
    block = {"reduce_channel": [1, 1, 0], "return_channel": [1, 1, 0]}
    for ratio, n in (("long", 7), ("mid", 5), ("short", 3)):
        block[f"vertical_long_to_small_conv_{ratio}ratio"] = [[n, 1], [1, 1], [k[n], 0]]
        block[f"horizontal_small_to_long_conv_{ratio}ratio"] = [[1, n], [1, 1], [0, k[n]]]
        block[f"symmetric_conv_long_{ratio}ratio"] = [[n, n], [1, 1], [k[n], k[n]]]
    config.intraclass_block_config = block
    config.scale_factor_list = [1, 2, 4, 8]
    config.kernel_list = [3, 2, 2]


def _cfg_ppocr_det_small(config):
    _ppocr_det_backbone(config)
    # the neck takes each backbone stage at its width (the default lists the
    # small checkpoint's own backbone, not the default one)
    config.layer_list_out_channels = list(config.backbone_config.stage_out_channels)


def _gemma3_soft_tokens(config):
    # the projector average-pools the patch grid into mm_tokens_per_image
    # soft tokens (256 of a 64 x 64 grid by default; a shrunk image has
    # fewer patches than tokens): a 4 x 4 grid pooled 2 x 2 into 4
    vc = config.vision_config
    vc.image_size = 4 * vc.patch_size
    config.mm_tokens_per_image = 4


def _cfg_t5gemma2(config):
    # the encoder holds the vision tower (see _gemma3_soft_tokens)
    _gemma3_soft_tokens(config.encoder)


def _cfg_shieldgemma2(config):
    _gemma3_soft_tokens(config)
    # the classifier reads the logits of the words "Yes" and "No" (ids the
    # model defaults to in the full vocabulary): ordinary words here
    config.yes_token_index, config.no_token_index = 5, 6


def _cfg_omdet_turbo(config):
    # timm's Swin (channels-last stages, as the per-stage norms read them)
    # with one block per stage, 16 channels in the first, windows that tile
    # the 16 x 16 patch grid of a 64-pixel image; the model hands timm only
    # the kwargs it derives from the backbone config, set here after it
    swin = {"img_size": IMAGE, "always_partition": True, "embed_dim": 16,
            "depths": (1, 1, 1, 1), "num_heads": (1, 2, 4, 8), "window_size": 4}
    config.backbone_config.img_size = IMAGE
    config.timm_kwargs = swin
    # the encoder reads stages 1-3 (twice the width each); encoder, decoder
    # and vision features share one width, the text side another (the
    # projected class embeddings and the task tokens are text-wide): twice
    # the decoder's, as in the default, since the decoder defines its task
    # projection only where the two differ (and calls it regardless)
    width = config.d_model
    text = config.text_config.hidden_size = 2 * width
    _assign(config, {"encoder_in_channels": [32, 64, 128], "decoder_hidden_dim": width,
                     "vision_features_channels": [width] * 3, "decoder_num_heads": HEADS,
                     "encoder_dim_feedforward": 2 * width, "decoder_dim_feedforward": 2 * width,
                     "text_projection_in_dim": text, "text_projection_out_dim": text,
                     "class_embed_dim": text, "task_encoder_hidden_dim": 2 * text,
                     "decoder_num_layers": 2, "num_queries": 16})


# timm's Perception Encoder ViT (vit_pe_core_*: 300M parameters at 336
# pixels, which its patch embedding insists on) as two narrow blocks at the
# harness's 64-pixel images, its rope grid their 4 x 4 patches
_PE_VIT = {"img_size": IMAGE, "patch_size": 16, "embed_dim": 32, "depth": 2, "num_heads": HEADS,
           "attn_pool_num_heads": HEADS, "ref_feat_shape": (IMAGE // 16, IMAGE // 16)}


def _cfg_pe_video(config):
    # the video encoder's frame tower (pooled: the PE ViT's attention pool)
    stack = [config]
    while stack:
        c = stack.pop()
        if c.model_type == "pe_video_encoder":
            c.vision_config.model_args = dict(_PE_VIT)
        stack += [getattr(c, k) for k in getattr(c, "sub_configs", {}) if getattr(c, k, None)]


def _cfg_perception_lm(config):
    # checkpoints name the tower (a PE ViT whose patch tokens, after its
    # class token, the projector reads at the width model_args names); the
    # default names none, which leaves timm's ResNet-50
    config.vision_config.architecture = "vit_pe_core_large_patch14_336"
    config.vision_config.model_args = {**_PE_VIT, "global_pool": ""}


def _cfg_tvp(config):
    # frames are padded to max_img_size by a learnt frame of prompt_size
    # pixels: 64-pixel frames (16-pixel prompt, about the default's ratio)
    # in clips of 4 frames (the pads are per frame)
    config.max_img_size, config.visual_prompt_size, config.num_frames = 64, 16, 4
    # a narrow, one-block-per-stage ResNet (the default is ResNet-50)
    _assign(config.backbone_config, {"embedding_size": 16, "hidden_sizes": [32, 64, 128, 256],
                                     "depths": [1, 1, 1, 1]})


def _cfg_uvdoc(config):
    # channel lists at a quarter of the default's (image and output point
    # channels kept)
    bb = config.backbone_config
    q = lambda c: c // 4 if c > 3 else c  # noqa: E731
    bb.resnet_head = [[q(i), q(o)] for i, o in bb.resnet_head]
    bb.resnet_configs = [[[q(i), q(o), d, down] for i, o, d, down in stage]
                         for stage in bb.resnet_configs]
    bb.stage_configs = [[[q(c), d] for c, d in stage] for stage in bb.stage_configs]
    config.bridge_connector = [q(c) for c in config.bridge_connector]
    config.out_point_positions2D = [[q(i), q(o)] for i, o in config.out_point_positions2D]
    # the head concatenates every bridge stage's output (checkpoints list
    # them all)
    _all_stages(bb)


def _cfg_xcodec2(config):
    # the quantiser sees acoustic and semantic features side by side
    config.quantization_dim = config.hidden_size + config.semantic_model_config.hidden_size


def _cfg_xcodec(config):
    # the quantiser sees acoustic and semantic features side by side
    config.codebook_dim = config.acoustic_model_config.hidden_size + \
        config.semantic_model_config.hidden_size


def _cfg_granite4_vision(config):
    # the projector layout comes with checkpoints (None by default): one
    # vision layer into the first LM layer and the four spatial offset groups
    # into the next four (features are keyed by the LM layer they enter, so
    # the layers differ); windows of 2 x 2 patches pooled to one (the spatial
    # groups take every other patch: rate 1/2); one tile of the image size
    config.downsample_rate = "1/2"
    config.deepstack_layer_map = [(-1, 0)]
    config.spatial_target_layers = [1, 2, 3, 4]
    config.text_config.num_hidden_layers = 5
    side = config.vision_config.image_size
    config.image_grid_pinpoints = [[side, side]]
    # the Q-Former's heads are 64 wide, derived from the (shrunk) vision width
    q = config.qformer_config
    q.num_attention_heads = max(1, q.hidden_size // 64)


def _cfg_lfm2_moe(config):
    # checkpoints list the layer kinds (the default leaves them out):
    # short convolutions with an attention layer last
    if config.layer_types is None:
        n = config.num_hidden_layers
        config.layer_types = ["conv"] * (n - 1) + ["full_attention"]


def _cfg_minicpm_vision(config):
    # the window merger runs after layer insert_layer_id (6 of 27): keep it
    # inside the shrunk stack
    config.insert_layer_id = min(config.insert_layer_id, config.num_hidden_layers - 2)


def _cfg_mobilebert(config):
    # the MLM head widens the embedding back to the hidden size
    config.embedding_size = min(config.embedding_size, config.hidden_size)


def _cfg_muse_glimmer(config):
    # the merger folds merge_size x merge_size patches into the channels; the
    # adapter's width (4096 full size, which the shrink leaves) becomes the LM's
    vc = config.vision_config
    config.out_hidden_size = vc.hidden_size * vc.merge_size ** 2
    config.projector_hidden_size = config.text_config.hidden_size


def _cfg_perceiver(config):
    # the Fourier and conv preprocessors' channel counts (image plus position
    # features, e.g. 261) are rarely a multiple of the cross-attention heads
    config.num_cross_attention_heads = 1
    # the masked-LM decoder predicts every position of its table: size it to
    # the synthesised sequence so labels line up
    config.max_position_embeddings = SEQ


def _cfg_projection_width(config):
    # the projector maps image features to the LM's width (projection_dim,
    # which the shrink leaves at its full-size value)
    config.vision_config.projection_dim = config.get_text_config().hidden_size


def _cfg_janus(config):
    # both aligners map image features (the understanding tower's, the VQ
    # codes') to the LM's width; the processor expands one placeholder per
    # patch of the tower's image
    width = config.text_config.hidden_size
    vc = config.vision_config
    vc.projection_dim = config.vq_config.projection_dim = width
    vc.num_image_tokens = (vc.image_size // vc.patch_size) ** 2


def _cfg_llama4(config):
    # the pixel shuffle folds 2 x 2 patches into the channels (4x the tower's
    # width, which the vision MLP's intermediate size is); the projector
    # widths (4096 full size, which the shrink leaves) become the tower's
    vc = config.vision_config
    vc.intermediate_size = int(vc.hidden_size / vc.pixel_shuffle_ratio ** 2)
    vc.projector_input_dim = vc.projector_output_dim = vc.hidden_size
    vc.vision_output_dim = vc.projector_output_dim


def _cfg_mllama(config):
    # layer lists at their full-size depths (40 LM layers, 32 tower layers):
    # the second LM layer cross-attends to the image, the projector reads
    # both tower layers besides the last output (their widths side by side)
    text, vc = config.text_config, config.vision_config
    text.cross_attention_layers = [text.num_hidden_layers - 1]
    vc.intermediate_layers_indices = list(range(vc.num_hidden_layers))
    vc.vision_output_dim = vc.hidden_size * (len(vc.intermediate_layers_indices) + 1)
    vc.num_global_layers = 1
    vc.attention_heads = text.num_attention_heads


def _cfg_pi0(config):
    # the PaliGemma inside projects image features to its LM's width
    _cfg_projection_width(config.vlm_config)


def _cfg_reformer(config):
    # training (the backward pass) runs whole attention chunks over the whole
    # axial position grid: both sized to the synthesised sequence, which
    # chunks of its length attend to in full (no hashing); no dropout, whose
    # draws the devices cannot share
    config.local_attn_chunk_length = config.lsh_attn_chunk_length = SEQ
    config.axial_pos_shape = (2, SEQ // 2)
    # the two axial embeddings are concatenated to the hidden width (1:3 by default)
    h = config.hidden_size
    config.axial_pos_embds_dim = (h // 4, h - h // 4)
    config.hidden_dropout_prob = config.local_attention_probs_dropout_prob = 0.0
    config.lsh_attention_probs_dropout_prob = 0.0


def _cfg_t5gemma2_encoder(config):
    # the encoder-decoder config hands its dropout to the encoder's text
    # config (T5Gemma2Config.__post_init__); alone, the encoder lacks it
    config.text_config.dropout_rate = 0.0
    _gemma3_soft_tokens(config)


def _rx_t5gemma2(inputs, params, config, g):
    import torch
    # images at the size of the tower inside the encoder
    vc = config.encoder.vision_config
    if "pixel_values" in inputs:
        inputs["pixel_values"] = torch.randn(BATCH, vc.num_channels, vc.image_size,
                                             vc.image_size, generator=g)


def _cfg_vipllava(config):
    # the projector reads hidden states of five layers (-2 ... -20 of 24):
    # the two shrunk layers' and the embeddings'
    config.vision_feature_layers = [-2, -3]


def _cfg_anyres(config):
    # LLaVA-NeXT's anyres: one tile of the tower's size (the default
    # pinpoints are 336-pixel multiples)
    side = config.vision_config.image_size
    config.image_grid_pinpoints = [[side, side]]


def _anyres_pixels(inputs, config, g):
    """Each image as anyres sends it: the whole view and its one tile, at
    the tower's size. False when the model gets no images and text."""
    import torch
    if "pixel_values" not in inputs or "input_ids" not in inputs:
        return False
    vc = config.vision_config
    side = vc.image_size
    inputs["pixel_values"] = torch.randn(BATCH, 2, vc.num_channels, side, side, generator=g)
    inputs["image_sizes"] = torch.tensor([[side, side]] * BATCH)
    return True


def _rx_anyres(inputs, params, config, g):
    # (the placeholders follow from the features: _feature_placeholders)
    _anyres_pixels(inputs, config, g)


def _cfg_minicpmv(config):
    # checkpoints set the image placeholder id (None by default, which skips
    # the tower); the window merger runs after layer insert_layer_id (6 of
    # 27), which the top config hands the tower: keep it inside the shrunk
    # stack
    if config.image_token_id is None:
        config.image_token_id = _free_token(config)
    vc = config.vision_config
    config.insert_layer_id = min(config.insert_layer_id, vc.num_hidden_layers - 2)
    vc.insert_layer_id = config.insert_layer_id


def _rx_minicpmv(inputs, params, config, g):
    if "pixel_values" in inputs:
        _rx_minicpm_vision(inputs, params, config.vision_config, g)


def _rx_inkling2(inputs, params, config, g):
    if "pixel_values" in inputs:
        _rx_inkling2_vision(inputs, params, config.vision_config, g)


def _cfg_vision_start(config):
    # the thinker's multimodal rope reads an id its default config leaves out
    if getattr(config, "vision_start_token_id", None) is None:
        config.vision_start_token_id = _free_token(config)


def _rx_audio_channels(inputs, params, config, g):
    import torch
    ch = getattr(config, "audio_channels", None) or 1
    inputs["input_values"] = torch.randn(BATCH, ch, 1920, generator=g)


def _rx_pe_audio_video(inputs, params, config, g):
    import torch
    # audio is optional in forward, but without it the model takes its
    # video-text path, which reads outputs the video model does not return:
    # mono audio (batch, 1, samples) for the path through every tower, in
    # whole hops of the codec inside the audio-video encoder's config
    inputs["input_values"] = torch.randn(BATCH, 1, _samples(config.audio_video_config),
                                         generator=g)


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


def _rx_clvp(inputs, params, config, g):
    import torch
    # the conditioning clip's mel spectrogram (batch, mel, frames)
    inputs["input_features"] = torch.randn(BATCH, config.decoder_config.feature_size, 32,
                                           generator=g)


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


def _rx_deepseek_ocr2(inputs, params, config, g):
    import torch
    # the global view only, at the SAM encoder's size; the tower's 144
    # learned queries (its small-image set) and the view separator per image
    if "input_ids" in inputs and "pixel_values" in inputs:
        side = config.vision_config.sam_config.image_size
        inputs["pixel_values"] = torch.randn(BATCH, 3, side, side, generator=g)
        _with_placeholders(inputs, params, config.image_token_id, 144 + 1, g)


def _rx_dflash(inputs, params, config, g):
    import torch
    # a block of noised embeddings drafted against the target model's context
    # (its selected layers' hidden states side by side)
    width = config.hidden_size
    inputs["noise_embeds"] = torch.randn(BATCH, config.block_size, width, generator=g)
    inputs["context_hidden_states"] = torch.randn(
        BATCH, SEQ, width * len(config.target_layer_ids), generator=g)


def _rx_fuyu(inputs, params, config, g):
    import torch
    if "input_ids" not in inputs or "pixel_values" not in inputs:
        return
    # a 2 x 2 grid of patch_size squares, each flattened, in row order; the
    # prompt holds a placeholder per patch and a newline token (an ordinary
    # vocabulary entry) after each row
    p = config.patch_size
    inputs["pixel_values"] = torch.randn(BATCH, 4, p * p * config.num_channels, generator=g)
    _with_placeholders(inputs, params, config.image_token_id, 6, g)
    newline = _free_token(config)
    for k in ("input_ids", "labels"):
        if k in inputs:
            inputs[k][:, [4, 7]] = newline


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


def _rx_granite4_vision(inputs, params, config, g):
    if not _anyres_pixels(inputs, config, g):
        return
    vc = config.vision_config
    # tokens per side after the 1/2 pooling; the tile adds a newline per row
    n = vc.image_size // vc.patch_size // 2
    _with_placeholders(inputs, params, config.image_token_id, n * n + n * (n + 1), g)


def _rx_idefics(inputs, params, config, g):
    import torch
    if "pixel_values" in inputs and "input_ids" in inputs:
        # (batch, images, c, h, w): one image per example, which every token
        # may cross-attend to
        inputs["pixel_values"] = inputs["pixel_values"][:, None]
        seq = inputs["input_ids"].shape[1]
        inputs["image_attention_mask"] = torch.ones(BATCH, seq, 1, dtype=torch.long)


def _rx_granite_docling(inputs, params, config, g):
    import torch
    # the processor's tiles: (batch, tiles, c, h, w), one real tile per
    # example, and which tiles are real (padding tiles are dropped)
    x = inputs.get("pixel_values")
    if x is not None and x.dim() == 4:
        inputs["pixel_values"] = x[:, None]
        inputs["pixel_attention_mask"] = torch.ones(x.shape[0], 1, dtype=torch.bool)


def _rx_image_pair(inputs, params, config, g):
    import torch
    ch = _sub(config, "num_channels", 3)
    inputs["pixel_values"] = torch.randn(BATCH, 2, ch, *_image_hw(config, IMAGE), generator=g)


def _rx_inkling2_vision(inputs, params, config, g):
    import torch
    # one (patch * merge)-square pixel block per language-model image token,
    # channels last, in [-1, 1]; the grid counts those tokens (2 x 2 per image)
    side = config.patch_size * config.spatial_merge_size
    inputs["pixel_values"] = torch.rand(BATCH * 4, side, side, config.num_channels,
                                        generator=g) * 2 - 1
    inputs["image_grid_thw"] = torch.tensor([[1, 2, 2]] * BATCH)


def _rx_patch_images(inputs, params, config, g):
    # the patch embedding is a convolution over each patch as a small image:
    # (patches, channels, patch, patch)
    p = _vision(config).patch_size
    x = inputs.get("pixel_values")
    if x is not None:
        inputs["pixel_values"] = x.reshape(x.shape[0], x.shape[1] // (p * p), p, p)


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


def _rx_minicpm_vision(inputs, params, config, g):
    import torch
    # NaViT packing as the image processor does it: every image's patches side
    # by side in one (1, channels, patch, patches * patch) strip, and each
    # image's (h, w) patch grid, here whole windows of the merger
    p = config.patch_size
    kh, kw = config.window_kernel_size
    h, w = 2 * kh, 2 * kw
    inputs["pixel_values"] = torch.randn(1, config.num_channels, p, BATCH * h * w * p, generator=g)
    inputs["target_sizes"] = torch.tensor([[h, w]] * BATCH, dtype=torch.int32)


def _rx_mllama(inputs, params, config, g):
    import torch
    if "input_ids" not in inputs or "pixel_values" not in inputs:
        return
    # one image of one tile (aspect ratio (1, 1): id 1), padded to the
    # tower's max_num_tiles as the processor does; the <|image|> token leads
    # the prompt and the text after it cross-attends to the image's tiles
    vc = config.vision_config
    tiles, side = vc.max_num_tiles, vc.image_size
    pixels = torch.zeros(BATCH, 1, tiles, vc.num_channels, side, side)
    pixels[:, :, 0] = torch.randn(BATCH, 1, vc.num_channels, side, side, generator=g)
    inputs["pixel_values"] = pixels
    inputs["aspect_ratio_ids"] = torch.ones(BATCH, 1, dtype=torch.long)
    valid = torch.zeros(BATCH, 1, tiles, dtype=torch.long)
    valid[..., 0] = 1
    inputs["aspect_ratio_mask"] = valid
    ids = _with_placeholders(inputs, params, config.image_token_index, 1, g)
    mask = torch.zeros(BATCH, ids.shape[1], 1, tiles, dtype=torch.long)
    mask[:, 2:, :, 0] = 1
    inputs["cross_attention_mask"] = mask


def _rx_nemotron_transcribe(inputs, params, config, g):
    import torch
    # frames-first log-mel features in whole groups of the encoder's frame
    # stacking (the processor pads to them); one audio placeholder per group
    audio = getattr(config, "audio_config", config)
    k = audio.subsampling_factor
    frames = 4 * k
    mels = audio.asr_config.num_mel_bins
    inputs["input_features"] = torch.randn(BATCH, frames, mels, generator=g)
    inputs["input_features_mask"] = torch.ones(BATCH, frames, dtype=torch.long)
    if "input_ids" in inputs:
        _with_placeholders(inputs, params, config.audio_token_id, frames // k, g)


def _rx_oneformer(inputs, params, config, g):
    import torch
    # the tokenised task prompt ("the task is semantic"), padded to its length
    inputs["task_inputs"] = torch.randint(4, 64, (BATCH, config.task_seq_len), generator=g)


def _rx_omdet_turbo(inputs, params, config, g):
    import torch
    # the tokenised class names (two per image, flattened) and task prompt
    inputs.pop("input_ids", None)
    inputs.pop("attention_mask", None)
    classes = 2
    inputs["classes_input_ids"] = torch.randint(4, 64, (BATCH * classes, SEQ), generator=g)
    inputs["classes_attention_mask"] = torch.ones(BATCH * classes, SEQ, dtype=torch.long)
    inputs["tasks_input_ids"] = torch.randint(4, 64, (BATCH, SEQ), generator=g)
    inputs["tasks_attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    inputs["classes_structure"] = torch.full((BATCH,), classes, dtype=torch.long)


def _rx_musicgen_decoder(inputs, params, config, g):
    if "labels" in inputs:
        # ids are (batch * codebooks, steps); labels are (batch, steps, codebooks)
        ids = inputs["input_ids"]
        k = config.num_codebooks
        inputs["labels"] = ids.reshape(-1, k, ids.shape[-1]).transpose(1, 2).contiguous()


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


def _rx_gemma3n(inputs, params, config, g):
    import torch
    _rx_image64(inputs, params, config, g)
    if "pixel_values" in inputs and "input_features" in params:
        # audio beside the image: (batch, frames, mel) and which frames are
        # valid (forward inverts it into the tower's padding mask)
        frames = 64
        inputs["input_features"] = torch.randn(BATCH, frames, config.audio_config.input_feat_size,
                                               generator=g)
        inputs["input_features_mask"] = torch.ones(BATCH, frames, dtype=torch.bool)


def _rx_depth_pro(inputs, params, config, g):
    import torch
    # the smallest scale still holds one whole crop
    side = int(config.patch_size / min(config.scaled_images_ratios))
    inputs["pixel_values"] = torch.randn(BATCH, 3, side, side, generator=g)

def _rx_sam2_pixels(inputs, params, config, g):
    import torch
    # images come resized to the backbone's size (in its sub-config)
    hiera = getattr(config, "backbone_config", config)
    inputs["pixel_values"] = torch.randn(BATCH, hiera.num_channels, *hiera.image_size,
                                         generator=g)


def _rx_image64(inputs, params, config, g):
    import torch
    # the config names no image size (the harness would use 224): the
    # 64-pixel images the config fix sizes the feature grids for
    if "pixel_values" in inputs:
        inputs["pixel_values"] = torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g)


def _rx_sam_points(inputs, params, config, g):
    import torch
    # images resized to the model's input size, one foreground point on
    # each, in pixels
    side = config.prompt_encoder_config.image_size
    inputs["pixel_values"] = torch.randn(BATCH, 3, side, side, generator=g)
    inputs["input_points"] = torch.rand(BATCH, 1, 1, 2, generator=g) * side
    inputs["input_labels"] = torch.ones(BATCH, 1, 1, dtype=torch.long)


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


def _rx_shieldgemma2(inputs, params, config, g):
    # the prompt holds one placeholder per soft image token; images attend
    # to each other bidirectionally by their token type
    ids = _with_placeholders(inputs, params, config.image_token_index,
                             config.mm_tokens_per_image, g)
    inputs["token_type_ids"] = (ids == config.image_token_index).long()


def _rx_siglip2(inputs, params, config, g):
    import torch
    vc = _vision(config)
    side = 4  # patches per side of the (unpadded) image
    p = vc.patch_size
    inputs["pixel_values"] = torch.randn(BATCH, side * side, vc.num_channels * p * p,
                                         generator=g)
    inputs["pixel_attention_mask"] = torch.ones(BATCH, side * side, dtype=torch.long)
    inputs["spatial_shapes"] = torch.tensor([[side, side]] * BATCH)


def _rx_tvp(inputs, params, config, g):
    import torch
    inputs["pixel_values"] = torch.randn(BATCH, config.num_frames, 3, config.max_img_size,
                                         config.max_img_size, generator=g)
    # one clip: the grid's column position embeddings are viewed with the
    # batch size as their leading dimension, which holds for a batch of 1 only
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor):
            inputs[k] = v[:1]


def _rx_step3p7(inputs, params, config, g):
    # image tokens per image: the patch grid after the tower's two stride-2
    # downsampling convolutions
    vc = config.vision_config
    side = vc.image_size // vc.patch_size
    for _ in range(2):
        side = (side + 1) // 2
    if "input_ids" in inputs and "pixel_values" in inputs:
        _with_placeholders(inputs, params, config.image_token_id, side * side, g)


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


def _rx_videollama3_images(inputs, params, config, g):
    import torch
    # the image processor leaves images unmerged (merge size 1; videos 2)
    grid = inputs.get("image_grid_thw")
    if grid is not None:
        inputs["image_merge_sizes"] = torch.ones(grid.shape[0], dtype=torch.long)


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


def _rx_xcodec2(inputs, params, config, g):
    import torch
    # the semantic (w2v-BERT features: pairs of 80-mel frames) and acoustic
    # (waveform, one frame per hop) encodings are concatenated frame by frame
    frames = 8
    hop = config.hop_length
    inputs["input_values"] = torch.randn(BATCH, 1, frames * hop, generator=g)
    inputs["input_features"] = torch.randn(
        BATCH, frames, config.semantic_model_config.feature_projection_input_dim, generator=g)


def _rx_voxtral_realtime(inputs, params, config, g):
    import torch
    # streaming: every token adds the audio of its own step, 2 (the
    # encoder's conv stride) x downsample_factor mel frames
    frames = 2 * config.downsample_factor * inputs["input_ids"].shape[1]
    inputs["input_features"] = torch.randn(BATCH, config.audio_config.num_mel_bins, frames,
                                           generator=g)


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
    "chameleon": ("the image vocabulary map comes with checkpoints", _cfg_chameleon, None),
    "clap": ("audio is a (batch, 1, time, mel) spectrogram; the tower's width doubles per stage",
             _cfg_clap, _rx_clap),
    "clvp": ("text and a conditioning clip's mel spectrogram", None, _rx_clvp),
    "decision_transformer": ("trajectories of states, actions, rewards, returns", None,
                             _rx_decision),
    "deepseek_ocr2": ("MoE layout left to checkpoints; a placeholder per query and separator",
                      _cfg_deepseek_ocr2, _rx_deepseek_ocr2),
    "depth_pro": ("crops of the image at three scales; crop size and feature widths",
                  _cfg_depth_pro, _rx_depth_pro),
    "edgetam": ("a tiny timm backbone; neck grids at a 64-pixel image; a point prompt",
                lambda c: _assign(c, _EDGETAM), _rx_sam_points),
    "edgetam_vision_model": ("a tiny timm backbone; neck grids at a 64-pixel image",
                             lambda c: _assign(c, _EDGETAM_VISION), _rx_image64),
    "efficientloftr": ("matches a pair of images: (batch, 2, channels, h, w); block "
                       "widths follow the shrunk stages", _rederive, _rx_image_pair),
    "emu3": ("the image vocabulary map comes with checkpoints", _cfg_emu3, None),
    "encodec": ("audio is (batch, channels, samples); codes have the encoder's width",
                _cfg_codebook, _rx_audio_channels),
    "fast_vlm": ("a small FastViT tower and the projector's width from it", _cfg_fast_vlm, None),
    "florence2": ("the projector maps image features to the LM's width",
                  _cfg_projection_width, None),
    "fsmt": ("labels are not shifted into decoder inputs", None, _rx_fsmt),
    "fun_asr_nano_encoder": ("stacked low-frame-rate features and their mask", None, _rx_fun_asr),
    "fuyu": ("flattened patches of a 2 x 2 grid; a placeholder per patch, a newline per row",
             None, _rx_fuyu),
    "gemma3": ("soft tokens pooled from a patch grid the shrunk image still has",
               _gemma3_soft_tokens, None),
    "gemma3n": ("a small MobileNetV5 tower and its soft-token grid; 64-pixel images; "
                "audio placeholders for a short clip", _cfg_gemma3n, _rx_gemma3n),
    "gemma3n_audio": ("mel frames and their padding mask", None, _rx_gemma3n_audio),
    "gemma4_vision": ("flattened patches and their (x, y) positions, whole pooling windows",
                      None, _rx_gemma4_vision),
    "granite4_vision": ("projector layout left to checkpoints; anyres view and tile",
                        _cfg_granite4_vision, _rx_granite4_vision),
    "granite_docling": ("image tiles per example and which are real", None,
                        _rx_granite_docling),
    "granite_speech5_ctc": ("mel frames come delta-expanded and stacked in pairs (4x mel)",
                            None, _rx_granite_speech5),
    "granite_speech5_encoder": ("mel frames come delta-expanded and stacked in pairs (4x mel)",
                                None, _rx_granite_speech5),
    "idefics": ("images per example, and which tokens cross-attend to them", None, _rx_idefics),
    "informer": ("forecasts need a horizon and a context", _cfg_forecast, None),
    "inkling2": ("a pixel block per image token, channels last; the grid in tokens", None,
                 _rx_inkling2),
    "inkling2_vision": ("a pixel block per image token, channels last; the grid in tokens",
                        None, _rx_inkling2_vision),
    "instructblip": ("one placeholder per Q-Former query", _cfg_query_placeholder,
                     _rx_query_placeholders),
    "instructblipvideo": ("clips of frames; one placeholder per query per frame",
                          _cfg_query_placeholder, _rx_instructblipvideo),
    "janus": ("the aligners map to the LM's width; a placeholder per patch", _cfg_janus, None),
    "kimi_k25": ("patches come as (patches, channels, patch, patch) images", None,
                 _rx_patch_images),
    "kimi_k25_vision": ("patches come as (patches, channels, patch, patch) images", None,
                        _rx_patch_images),
    "kosmos-2": ("image queries replace the tokens a position mask marks", None, _rx_kosmos2),
    "kyutai_speech_to_text": ("steps are a text token and one code per codebook", None,
                              _rx_kyutai),
    "lfm2_moe": ("layer kinds are left to checkpoints", _cfg_lfm2_moe, None),
    "lfm2_vl": ("its SigLIP2 tower takes NaFlex patches with their mask and grid", None,
                _rx_siglip2),
    "lightglue": ("matches a pair of images: (batch, 2, channels, h, w)", None, _rx_image_pair),
    "llama4": ("the projector reads the pixel-shuffled tower's width", _cfg_llama4, None),
    "llava_next": ("anyres: one tile of the tower's size", _cfg_anyres, _rx_anyres),
    "llava_next_video": ("anyres: one tile of the tower's size", _cfg_anyres, _rx_anyres),
    "llava_onevision": ("anyres: one tile of the tower's size", _cfg_anyres, _rx_anyres),
    "lxmert": ("region features and boxes stand in for a detector", None, _rx_lxmert),
    "mimi_encoder": ("audio is (batch, channels, samples)", None, _rx_audio_channels),
    "minicpm_ocr": ("the image placeholder id comes with checkpoints; NaViT-packed patches; "
                    "the merger inside the stack", _cfg_minicpmv, _rx_minicpmv),
    "minicpm_ocr_vision": ("NaViT-packed patches with their grids; the merger inside the stack",
                           _cfg_minicpm_vision, _rx_minicpm_vision),
    "minicpmv4_6": ("the image placeholder id comes with checkpoints; NaViT-packed patches; "
                    "the merger inside the stack", _cfg_minicpmv, _rx_minicpmv),
    "minicpmv4_7": ("the image placeholder id comes with checkpoints; NaViT-packed patches; "
                    "the merger inside the stack", _cfg_minicpmv, _rx_minicpmv),
    "minicpmv4_7_vision": ("NaViT-packed patches with their grids; the merger inside the stack",
                           _cfg_minicpm_vision, _rx_minicpm_vision),
    "mllama": ("layer lists inside the shrunk stacks; one padded tile and its cross-attention "
               "mask", _cfg_mllama, _rx_mllama),
    "mobilebert": ("embeddings are at most as wide as the hidden state", _cfg_mobilebert, None),
    "muse_glimmer": ("the adapter reads the merged tower's width", _cfg_muse_glimmer, None),
    "muse_glimmer_assistant": ("a drafter: noised block embeddings and the target's context",
                               None, _rx_dflash),
    "musicgen_decoder": ("labels hold one code per codebook per step", None,
                         _rx_musicgen_decoder),
    "musicgen_melody_decoder": ("labels hold one code per codebook per step", None,
                                _rx_musicgen_decoder),
    "nemo_speechlm": ("audio frames in whole stacking groups, one placeholder per group", None,
                      _rx_nemotron_transcribe),
    "nemotron3_5_transcribe_audio": ("audio frames in whole stacking groups", None,
                                     _rx_nemotron_transcribe),
    "omdet-turbo": ("a small timm Swin and matching widths; tokenised classes and a task prompt",
                    _cfg_omdet_turbo, _rx_omdet_turbo),
    "oneformer": ("a tokenised task prompt conditions the segmentation", None, _rx_oneformer),
    "paddleocr_vl": ("patches come as (patches, channels, patch, patch) images", None,
                     _rx_patch_images),
    "paligemma": ("the projector maps image features to the LM's width",
                  _cfg_projection_width, None),
    "pe_audio_video": ("a small timm PE ViT for the frames; audio beside video and text",
                       _cfg_pe_video, _rx_pe_audio_video),
    "pe_audio_video_encoder": ("a small timm PE ViT for the frames", _cfg_pe_video, None),
    "pe_video": ("a small timm PE ViT for the frames", _cfg_pe_video, None),
    "pe_video_encoder": ("a small timm PE ViT for the frames", _cfg_pe_video, None),
    "perceiver": ("preprocessor-free inputs; head counts and decoder length fit the inputs",
                  _cfg_perceiver, _rx_perceiver),
    "perception_lm": ("a small timm PE ViT tower, as checkpoints name one; 64-pixel images",
                      _cfg_perception_lm, _rx_image64),
    "pi0": ("a robot state and a noised action chunk at a denoising time; camera images",
            _cfg_pi0, _rx_pi0),
    "pix2struct": ("variable-resolution patches, each prefixed by its (row, column)", None,
                   _rx_pix2struct),
    "pocket_tts_audio_tokenizer_encoder": ("audio is (batch, channels, samples)", None,
                                           _rx_audio_channels),
    "pp_ocrv6_medium_det": ("a detection backbone whose stages the neck all reads; "
                            "block kernels, level "
                            "scales and head kernels come with checkpoints",
                            _cfg_ppocr_det_medium, None),
    "pp_ocrv6_small_det": ("a detection backbone whose stages the neck all reads, at "
                           "their widths",
                           _cfg_ppocr_det_small, None),
    "qwen2_5_omni_thinker": ("images follow a vision-start token the default omits",
                             _cfg_vision_start, _rx_vision_start),
    "qwen3_asr_encoder": ("the encoder takes its frame mask", None, _rx_mask_features),
    "qwen3_omni_moe_thinker": ("images follow a vision-start token the default omits",
                               _cfg_vision_start, _rx_vision_start),
    "qwen4_exp": ("sparse-attention indexer sizes are left to checkpoints", _cfg_qsa, None),
    "qwen4_exp_text": ("sparse-attention indexer sizes are left to checkpoints", _cfg_qsa, None),
    "reformer": ("training needs whole chunks and the whole axial position grid",
                 _cfg_reformer, None),
    "sam": ("one width across prompt encoder, mask decoder and neck; a point prompt",
            lambda c: _assign(c, _SAM), _rx_sam_points),
    "sam2": ("Hiera stages and neck grids at a 64-pixel image; a point prompt",
             lambda c: _assign(c, _SAM2), _rx_sam_points),
    "sam2_hiera_det_model": ("stage widths, windows and grids at a 64-pixel image",
                             lambda c: _assign(c, _SAM2_HIERA), None),
    "sam2_vision_model": ("Hiera stages and neck grids at a 64-pixel image",
                          lambda c: _assign(c, _SAM2_VISION), _rx_sam2_pixels),
    "sam3_tracker": ("ViT grid, windows and neck grids at a 112-pixel image; a point prompt",
                     lambda c: _assign(c, _SAM3_TRACKER), _rx_sam_points),
    "sam_hq": ("one width across prompt encoder, mask decoder and neck; a point prompt",
               lambda c: _assign(c, {**_SAM, "mask_decoder_config": {
                   **_SAM["mask_decoder_config"], "vit_dim": 32}}), _rx_sam_points),
    "seggpt": ("an image, a prompt image and its mask at the configured size", None, _rx_seggpt),
    "shieldgemma2": ("image placeholders for the pooled soft tokens of a whole patch grid",
                     _cfg_shieldgemma2, _rx_shieldgemma2),
    "siglip2": ("NaFlex patches with their mask and grid", None, _rx_siglip2),
    "siglip2_vision_model": ("NaFlex patches with their mask and grid", None, _rx_siglip2),
    "speecht5": ("the bare model has no pre-nets: it takes hidden states", None, _rx_speecht5),
    "step3p7": ("one placeholder per downsampled image patch", None, _rx_step3p7),
    "t5gemma2": ("soft tokens pooled from a patch grid the shrunk image still has",
                 _cfg_t5gemma2, _rx_t5gemma2),
    "t5gemma2_encoder": ("the encoder-decoder config sets the encoder's dropout; soft tokens "
                         "pooled from a patch grid the shrunk image still has",
                         _cfg_t5gemma2_encoder, None),
    "time_series_transformer": ("forecasts need a horizon and a context", _cfg_forecast, None),
    "timesformer": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "tvp": ("one clip of frames at the size the learnt frame pads fit", _cfg_tvp, _rx_tvp),
    "uvdoc": ("narrower channel lists; the head reads every bridge stage", _cfg_uvdoc, None),
    "vibevoice_acoustic_tokenizer_decoder": ("latents are (batch, width, frames)", None,
                                             _rx_vibevoice_dec),
    "vibevoice_acoustic_tokenizer_encoder": ("audio is (batch, channels, samples), whole hops",
                                             None, _rx_vibevoice_enc),
    "video_llama_3": ("images are not merged (merge size 1 per image)", None,
                      _rx_videollama3_images),
    "video_llama_3_vision": ("patches are not merged (merge size 1 per image)", None,
                             _rx_videollama3),
    "videomae": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "vipllava": ("the projector reads layers of the shrunk tower", _cfg_vipllava, None),
    "vivit": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "vjepa2": ("two tubelets of frames keep the clip small", None, _rx_vjepa2),
    "voxtral_realtime": ("streaming audio: mel frames for every token's step", None,
                         _rx_voxtral_realtime),
    "xclip": ("clips are (batch, frames, channels, h, w)", None, _rx_video_pixels),
    "xcodec": ("mono audio is (batch, 1, samples); codes span both encoders", _cfg_xcodec,
               _rx_audio_channels),
    "xcodec2": ("waveform and semantic features of the same frames; codes span both",
                _cfg_xcodec2, _rx_xcodec2),
    "xmod": ("each example names its language adapter", None, _rx_xmod),
}

# model type -> why its backward pass runs in training mode
TRAIN_BACKWARD = {
    "reformer": "reversible layers recompute their activations during backward, which "
                "Reformer allows in training mode only",
}
