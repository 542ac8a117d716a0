"""More UNets (1-D, video, audio, cascade, ...), ControlNets, adapters and their Multi* containers."""
import torch

from . import randint, randn, recipe, timesteps


def _mask(batch, length, valid):
    """A tokenizer's attention mask (int64): row i keeps its first valid[i] tokens."""
    m = torch.zeros(batch, length, dtype=torch.long)
    for i, n in enumerate(valid):
        m[i, :n] = 1
    return m


def _flux_ids(h, w, text_len):
    """Flux position ids as its pipelines build them: (0, row, col) per latent patch, zeros for text."""
    img = torch.zeros(h, w, 3)
    img[..., 1] = torch.arange(h)[:, None]
    img[..., 2] = torch.arange(w)[None, :]
    return img.reshape(h * w, 3), torch.zeros(text_len, 3)


def _without_dropout(model, **inputs):
    """The video UNets' temporal convolutions hard-code dropout 0.1, which draws different masks on
    each device in training mode: set it to 0 so the gradients can be compared."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model(**inputs)


# ---------------------------------------------------------------------------------------------
# UNets

@recipe("UNet1DModel", backward=True)
def unet_1d():
    # Dance Diffusion's layout: Fourier time features concatenated to the audio channels;
    # its 1-D attention has one head per 32 channels.
    config = dict(sample_size=64, in_channels=2, out_channels=2, extra_in_channels=16,
                  time_embedding_type="fourier", time_embedding_dim=16, flip_sin_to_cos=True,
                  use_timestep_embedding=False, block_out_channels=(16, 32, 64),
                  down_block_types=("DownBlock1DNoSkip", "DownBlock1D", "AttnDownBlock1D"),
                  up_block_types=("AttnUpBlock1D", "UpBlock1D", "UpBlock1DNoSkip"),
                  mid_block_type="UNetMidBlock1D", norm_num_groups=8)
    return config, dict(sample=randn(2, 2, 64), timestep=torch.tensor([0.3, 0.8]))


@recipe("UNet3DConditionModel", call=_without_dropout, backward=True)
def unet_3d():
    config = dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                  block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
                  attention_head_dim=8,
                  down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                  up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"))
    return config, dict(sample=randn(2, 4, 3, 16, 16), timestep=timesteps(2),
                        encoder_hidden_states=randn(2, 7, 16))


@recipe("I2VGenXLUNet", call=_without_dropout, backward=True)
def i2vgen_xl():
    config = dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                  block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
                  attention_head_dim=8, num_attention_heads=2,
                  down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                  up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"))
    return config, dict(sample=randn(1, 4, 3, 16, 16), timestep=timesteps(1),
                        fps=torch.tensor([16]), image_latents=randn(1, 4, 3, 16, 16),
                        image_embeddings=randn(1, 16), encoder_hidden_states=randn(1, 7, 16))


@recipe("UNetSpatioTemporalConditionModel", backward=True)
def unet_svd():
    config = dict(sample_size=16, in_channels=8, out_channels=4, layers_per_block=1,
                  block_out_channels=(32, 64), cross_attention_dim=16, num_attention_heads=(2, 4),
                  addition_time_embed_dim=8, projection_class_embeddings_input_dim=24, num_frames=3,
                  down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
                  up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"))
    # EDM: the timestep is c_noise = log(sigma) / 4; added_time_ids = (fps - 1, motion bucket, noise aug).
    return config, dict(sample=randn(1, 3, 8, 16, 16), timestep=torch.tensor([0.6]),
                        encoder_hidden_states=randn(1, 1, 16),
                        added_time_ids=torch.tensor([[6.0, 127.0, 0.02]]))


@recipe("UNetMotionModel", backward=True)
def unet_motion():
    config = dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                  block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
                  num_attention_heads=2, motion_num_attention_heads=2, motion_max_seq_length=8,
                  down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
                  up_block_types=("UpBlockMotion", "CrossAttnUpBlockMotion"))
    # AnimateDiff repeats the prompt embeddings once per frame.
    return config, dict(sample=randn(1, 4, 3, 16, 16), timestep=timesteps(1),
                        encoder_hidden_states=randn(1, 7, 16).repeat_interleave(3, dim=0))


_MOTION_UNET = dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                    block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
                    attention_head_dim=8,
                    down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))


def _motion_adapter_call(adapter, **inputs):
    """AnimateDiff: a Stable Diffusion UNet (seeded, built on the adapter's device) plus the
    adapter's motion modules, run as one UNetMotionModel."""
    import diffusers
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(**_MOTION_UNET).to(adapter.device, adapter.dtype)
    model = diffusers.UNetMotionModel.from_unet2d(unet, adapter)
    return model.to(adapter.device, adapter.dtype).train(adapter.training)(**inputs)


@recipe("MotionAdapter", call=_motion_adapter_call)
def motion_adapter():
    config = dict(block_out_channels=(16, 32), motion_layers_per_block=1, motion_norm_num_groups=8,
                  motion_num_attention_heads=2, motion_max_seq_length=8)
    return config, dict(sample=randn(1, 4, 3, 16, 16), timestep=timesteps(1),
                        encoder_hidden_states=randn(1, 7, 16).repeat_interleave(3, dim=0))


@recipe("AudioLDM2UNet2DConditionModel", backward=True)
def audioldm2_unet():
    # Each cross-attention block: self-attention (None), then the GPT-2 stream, then the T5 one.
    config = dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                  block_out_channels=(16, 32), norm_num_groups=8,
                  cross_attention_dim=([None, 16, 32], [None, 16, 32]), attention_head_dim=8,
                  down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                  up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"))
    return config, dict(sample=randn(2, 4, 16, 8), timestep=timesteps(2),
                        encoder_hidden_states=randn(2, 6, 16), encoder_hidden_states_1=randn(2, 7, 32),
                        encoder_attention_mask_1=_mask(2, 7, (7, 4)))


@recipe("Kandinsky3UNet", backward=True)
def kandinsky3():
    # Kandinsky3's blocks need at least two layers each.
    config = dict(in_channels=4, time_embedding_dim=32, groups=4, attention_head_dim=8,
                  layers_per_block=2, block_out_channels=(16, 32), cross_attention_dim=16,
                  encoder_hid_dim=32)
    return config, dict(sample=randn(2, 4, 16, 16), timestep=timesteps(2),
                        encoder_hidden_states=randn(2, 7, 32),
                        encoder_attention_mask=_mask(2, 7, (7, 3)))


@recipe("StableCascadeUNet", backward=True)
def stable_cascade():
    # Stage C (the prior): text, pooled text and image CLIP conditioning, no dropout.
    config = dict(in_channels=16, out_channels=16, timestep_ratio_embedding_dim=16,
                  conditioning_dim=32, block_out_channels=(32, 32), num_attention_heads=(2, 2),
                  down_num_layers_per_block=(1, 1), up_num_layers_per_block=(1, 1),
                  clip_text_in_channels=24, clip_text_pooled_in_channels=24,
                  clip_image_in_channels=20, clip_seq=2, dropout=(0.0, 0.0),
                  switch_level=(False,))
    return config, dict(sample=randn(2, 16, 8, 8), timestep_ratio=torch.tensor([0.7, 0.2]),
                        clip_text_pooled=randn(2, 1, 24), clip_text=randn(2, 5, 24),
                        clip_img=randn(2, 1, 20))


@recipe("UVit2DModel", backward=True)
def uvit_2d():
    # aMUSEd: masked VQ token ids in, logits over the codebook out.
    config = dict(hidden_size=32, use_bias=False, cond_embed_dim=16, micro_cond_encode_dim=4,
                  micro_cond_embed_dim=20, encoder_hidden_size=16, vocab_size=40, codebook_size=32,
                  in_channels=16, block_out_channels=32, num_res_blocks=1, downsample=True,
                  upsample=True, block_num_heads=2, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=48, sample_size=8)
    ids = randint(40, 2, 8, 8)
    ids[:, ::2, ::3] = 39  # the mask token
    return config, dict(input_ids=ids, encoder_hidden_states=randn(2, 6, 16),
                        pooled_text_emb=randn(2, 16),
                        micro_conds=torch.tensor([[512.0, 512.0, 0.0, 0.0, 6.0]] * 2))


@recipe("DreamLiteUNetModel", backward=True)
def dreamlite():
    config = dict(sample_size=8, in_channels=4, out_channels=4,
                  down_block_types=("DreamLiteCrossAttnNoSelfAttnDownBlock2D", "DreamLiteCrossAttnDownBlock2D"),
                  up_block_types=("DreamLiteCrossAttnUpBlock2D", "DreamLiteUpBlock2D"),
                  block_out_channels=(16, 32), cross_attention_dim=16, attention_head_dim=8,
                  layers_per_block=1, norm_num_groups=8, transformer_layers_per_block=1)
    # Flow matching: float timesteps; the text mask comes from the Qwen tokenizer.
    return config, dict(sample=randn(2, 4, 8, 8), timestep=torch.tensor([850.0, 120.5]),
                        encoder_hidden_states=randn(2, 6, 16),
                        encoder_attention_mask=_mask(2, 6, (6, 4)))


@recipe("TransformerTemporalModel", backward=True)
def transformer_temporal():
    config = dict(num_attention_heads=2, attention_head_dim=8, in_channels=16, num_layers=1,
                  norm_num_groups=8, positional_embeddings="sinusoidal", num_positional_embeddings=8)
    # (batch * frames, channels, height, width), as the video UNets call it.
    return config, dict(hidden_states=randn(2 * 3, 16, 8, 8), num_frames=3)


@recipe("Transformer2DModel", backward=True)
def transformer_2d():
    # The continuous-input, text-conditioned transformer of Stable Diffusion 2's UNet blocks.
    config = dict(num_attention_heads=2, attention_head_dim=8, in_channels=16, num_layers=1,
                  norm_num_groups=8, cross_attention_dim=32, use_linear_projection=True)
    return config, dict(hidden_states=randn(2, 16, 8, 8), encoder_hidden_states=randn(2, 7, 32),
                        encoder_attention_mask=_mask(2, 7, (7, 5)))


# ---------------------------------------------------------------------------------------------
# Stable Diffusion ControlNets and adapters

_CONTROLNET = dict(in_channels=4, layers_per_block=1, block_out_channels=(16, 32), norm_num_groups=8,
                   cross_attention_dim=32, attention_head_dim=8,
                   down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                   conditioning_embedding_out_channels=(8, 16, 16))


def _controlnet_inputs(n_cond=1):
    cond = [randn(2, 3, 64, 64) for _ in range(n_cond)]
    return dict(sample=randn(2, 4, 16, 16), timestep=timesteps(2), encoder_hidden_states=randn(2, 7, 32),
                controlnet_cond=cond[0] if n_cond == 1 else cond)


@recipe("ControlNetModel", backward=True, fast=True)
def controlnet():
    return dict(_CONTROLNET), dict(_controlnet_inputs(), conditioning_scale=0.8)


@recipe("MultiControlNetModel", backward=True)
def multi_controlnet():
    import diffusers
    torch.manual_seed(0)
    nets = [diffusers.ControlNetModel(**_CONTROLNET) for _ in range(2)]
    # Pipelines call the Multi* containers with return_dict=False (they unpack the per-net tuples).
    return dict(controlnets=nets), dict(_controlnet_inputs(2), conditioning_scale=[1.0, 0.5],
                                        return_dict=False)


@recipe("ControlNetUnionModel", backward=True)
def controlnet_union():
    # SDXL ControlNet++: text_time conditioning, two control images of types 0 and 3.
    config = dict(in_channels=4, layers_per_block=1, block_out_channels=(16, 32), norm_num_groups=8,
                  cross_attention_dim=32, attention_head_dim=(2, 4), transformer_layers_per_block=(1, 1),
                  down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), use_linear_projection=True,
                  addition_embed_type="text_time", addition_time_embed_dim=8,
                  projection_class_embeddings_input_dim=16 + 6 * 8,
                  conditioning_embedding_out_channels=(8, 16, 16), num_control_type=6,
                  num_trans_channel=16, num_trans_head=2, num_trans_layer=1, num_proj_channel=16)
    control_type = torch.zeros(2, 6)
    control_type[:, [0, 3]] = 1
    return config, dict(sample=randn(2, 4, 16, 16), timestep=timesteps(2),
                        encoder_hidden_states=randn(2, 7, 32),
                        controlnet_cond=[randn(2, 3, 64, 64), randn(2, 3, 64, 64)],
                        control_type=control_type, control_type_idx=[0, 3],
                        conditioning_scale=[1.0, 0.7],
                        added_cond_kwargs=dict(text_embeds=randn(2, 16),
                                               time_ids=torch.tensor([[64.0, 64.0, 0.0, 0.0, 64.0, 64.0]] * 2)))


# UNetControlNetXSModel's blocks have two layers each: the UNet it fuses with must match.
_XS_UNET = dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=2,
                block_out_channels=(16, 32), norm_num_groups=8, cross_attention_dim=16,
                attention_head_dim=2, use_linear_projection=True,
                down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"))


def _xs_inputs():
    return dict(sample=randn(2, 4, 16, 16), timestep=timesteps(2), encoder_hidden_states=randn(2, 7, 16),
                controlnet_cond=randn(2, 3, 32, 32), conditioning_scale=0.9)


@recipe("UNetControlNetXSModel", backward=True)
def unet_controlnet_xs():
    config = dict(sample_size=16, down_block_types=_XS_UNET["down_block_types"],
                  up_block_types=_XS_UNET["up_block_types"], block_out_channels=(16, 32),
                  norm_num_groups=8, cross_attention_dim=16, num_attention_heads=2,
                  ctrl_block_out_channels=(8, 16), ctrl_num_attention_heads=2, ctrl_max_norm_num_groups=4,
                  ctrl_conditioning_embedding_out_channels=(8, 16))
    return config, _xs_inputs()


def _xs_adapter_call(adapter, **inputs):
    """ControlNet-XS: the adapter fused with a Stable Diffusion UNet (seeded, built on the
    adapter's device) into a UNetControlNetXSModel."""
    import diffusers
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(**_XS_UNET).to(adapter.device, adapter.dtype)
    model = diffusers.UNetControlNetXSModel.from_unet(unet, adapter)
    return model.to(adapter.device, adapter.dtype)(**inputs)


@recipe("ControlNetXSAdapter", call=_xs_adapter_call)
def controlnet_xs_adapter():
    # What ControlNetXSAdapter.from_unet(unet, size_ratio=0.5) builds for the UNet above.
    config = dict(conditioning_channels=3, conditioning_embedding_out_channels=(8, 16),
                  num_attention_heads=2, block_out_channels=(8, 16), base_block_out_channels=(16, 32),
                  cross_attention_dim=16, down_block_types=_XS_UNET["down_block_types"], sample_size=16,
                  transformer_layers_per_block=1, upcast_attention=False, max_norm_num_groups=8,
                  use_linear_projection=True)
    return config, _xs_inputs()


@recipe("SparseControlNetModel", backward=True)
def sparse_controlnet():
    # AnimateDiff SparseCtrl (RGB): conditioning on frame 0 of 3, with the frame mask.
    config = dict(in_channels=4, conditioning_channels=3, layers_per_block=1, block_out_channels=(16, 32),
                  norm_num_groups=8, cross_attention_dim=16, attention_head_dim=8,
                  down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
                  conditioning_embedding_out_channels=(8, 16, 16), motion_num_attention_heads=2,
                  motion_max_seq_length=8, use_simplified_condition_embedding=False)
    cond = torch.zeros(1, 3, 3, 64, 64)
    cond[:, :, 0] = randn(1, 3, 64, 64)
    mask = torch.zeros(1, 1, 3, 64, 64)
    mask[:, :, 0] = 1
    return config, dict(sample=randn(1, 4, 3, 16, 16), timestep=timesteps(1),
                        encoder_hidden_states=randn(1, 7, 16).repeat_interleave(3, dim=0),
                        controlnet_cond=cond, conditioning_mask=mask, conditioning_scale=1.0)


_T2I = dict(in_channels=3, channels=(16, 32), num_res_blocks=1, downscale_factor=8)


@recipe("T2IAdapter", backward=True)
def t2i_adapter():
    return dict(_T2I, adapter_type="full_adapter"), dict(x=randn(2, 3, 64, 64))


@recipe("MultiAdapter", backward=True)
def multi_adapter():
    import diffusers
    torch.manual_seed(0)
    adapters = [diffusers.T2IAdapter(**_T2I, adapter_type="light_adapter") for _ in range(2)]
    # One condition image per adapter, as StableDiffusionAdapterPipeline passes them.
    return dict(adapters=adapters), dict(xs=[randn(2, 3, 64, 64), randn(2, 3, 64, 64)],
                                         adapter_weights=[0.6, 0.4])


# ---------------------------------------------------------------------------------------------
# Transformer ControlNets

_FLUX_CN = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
                num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
                axes_dims_rope=(4, 4, 8), guidance_embeds=True)


def _flux_inputs():
    img_ids, txt_ids = _flux_ids(4, 4, 5)
    # Packed 8x8 latents of 4 channels: 16 tokens of 16 features; the control image packed alike.
    return dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 5, 32),
                pooled_projections=randn(2, 32), timestep=torch.tensor([0.9, 0.35]),
                guidance=torch.tensor([3.5, 3.5]), img_ids=img_ids, txt_ids=txt_ids)


@recipe("FluxControlNetModel", backward=True)
def flux_controlnet():
    return dict(_FLUX_CN), dict(_flux_inputs(), controlnet_cond=randn(2, 16, 16), conditioning_scale=0.7)


@recipe("FluxMultiControlNetModel", backward=True)
def flux_multi_controlnet():
    # Two ControlNet-Union nets, each given its control mode.
    import diffusers
    torch.manual_seed(0)
    nets = [diffusers.FluxControlNetModel(**_FLUX_CN, num_mode=4) for _ in range(2)]
    return dict(controlnets=nets), dict(_flux_inputs(),
                                        controlnet_cond=[randn(2, 16, 16), randn(2, 16, 16)],
                                        controlnet_mode=[torch.tensor([0, 0]), torch.tensor([2, 2])],
                                        conditioning_scale=[0.6, 0.4], return_dict=False)


_SD3_CN = dict(sample_size=16, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
               num_attention_heads=4, joint_attention_dim=32, caption_projection_dim=32,
               pooled_projection_dim=16, out_channels=4, pos_embed_max_size=16, qk_norm="rms_norm")


def _sd3_inputs():
    return dict(hidden_states=randn(2, 4, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                pooled_projections=randn(2, 16), timestep=torch.tensor([900.0, 312.5]))


@recipe("SD3ControlNetModel", backward=True)
def sd3_controlnet():
    return dict(_SD3_CN), dict(_sd3_inputs(), controlnet_cond=randn(2, 4, 16, 16),
                               conditioning_scale=0.7)


@recipe("SD3MultiControlNetModel", backward=True)
def sd3_multi_controlnet():
    import diffusers
    torch.manual_seed(0)
    nets = [diffusers.SD3ControlNetModel(**_SD3_CN) for _ in range(2)]
    return dict(controlnets=nets), dict(_sd3_inputs(),
                                        controlnet_cond=[randn(2, 4, 16, 16), randn(2, 4, 16, 16)],
                                        conditioning_scale=[1.0, 0.5], return_dict=False)


_HUNYUAN_CN = dict(sample_size=8, transformer_num_layers=4, patch_size=2, attention_head_dim=8,
                   num_attention_heads=3, in_channels=4, cross_attention_dim=32, cross_attention_dim_t5=32,
                   pooled_projection_dim=16, hidden_size=24, text_len=6, text_len_t5=8,
                   activation_fn="gelu-approximate")


def _hunyuan_inputs():
    from diffusers.models.embeddings import get_2d_rotary_pos_embed
    # 8x8 latents in 2x2 patches: a 4x4 grid; the pipeline's 2-D RoPE (cos, sin) for it.
    rope = get_2d_rotary_pos_embed(8, ((0, 0), (4, 4)), (4, 4), output_type="pt")
    return dict(hidden_states=randn(2, 4, 8, 8), timestep=timesteps(2).float(),
                encoder_hidden_states=randn(2, 6, 32), text_embedding_mask=_mask(2, 6, (6, 3)),
                encoder_hidden_states_t5=randn(2, 8, 32), text_embedding_mask_t5=_mask(2, 8, (8, 5)),
                image_meta_size=torch.tensor([[64.0, 64.0, 64.0, 64.0, 0.0, 0.0]] * 2),
                style=torch.tensor([0, 0]), image_rotary_emb=rope)


@recipe("HunyuanDiT2DControlNetModel", backward=True)
def hunyuan_controlnet():
    return dict(_HUNYUAN_CN), dict(_hunyuan_inputs(), controlnet_cond=randn(2, 4, 8, 8),
                                   conditioning_scale=0.8)


@recipe("HunyuanDiT2DMultiControlNetModel", backward=True)
def hunyuan_multi_controlnet():
    import diffusers
    torch.manual_seed(0)
    nets = [diffusers.HunyuanDiT2DControlNetModel(**_HUNYUAN_CN) for _ in range(2)]
    return dict(controlnets=nets), dict(_hunyuan_inputs(),
                                        controlnet_cond=[randn(2, 4, 8, 8), randn(2, 4, 8, 8)],
                                        conditioning_scale=[1.0, 0.5], return_dict=False)


@recipe("SanaControlNetModel", backward=True)
def sana_controlnet():
    config = dict(patch_size=1, in_channels=4, out_channels=4, num_layers=1, num_attention_heads=2,
                  attention_head_dim=8, num_cross_attention_heads=2, cross_attention_head_dim=8,
                  cross_attention_dim=16, caption_channels=16, sample_size=8)
    return config, dict(hidden_states=randn(2, 4, 8, 8), encoder_hidden_states=randn(2, 6, 16),
                        timestep=torch.tensor([999.0, 400.0]), controlnet_cond=randn(2, 4, 8, 8),
                        conditioning_scale=0.9, encoder_attention_mask=_mask(2, 6, (6, 4)))


_QWEN_CN = dict(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                num_attention_heads=3, joint_attention_dim=16, axes_dims_rope=(8, 4, 4))


def _qwen_inputs():
    # Packed 8x8 latents of 4 channels in 2x2 patches: 16 tokens of 16 features.
    return dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 7, 16),
                encoder_hidden_states_mask=_mask(2, 7, (7, 4)), timestep=torch.tensor([1.0, 0.45]),
                img_shapes=[[(1, 4, 4)]] * 2)


@recipe("QwenImageControlNetModel", backward=True)
def qwen_controlnet():
    return dict(_QWEN_CN), dict(_qwen_inputs(), controlnet_cond=randn(2, 16, 16), conditioning_scale=0.8)


@recipe("QwenImageMultiControlNetModel", backward=True)
def qwen_multi_controlnet():
    import diffusers
    torch.manual_seed(0)
    # Diffusers runs one ControlNet-Union net over several control images.
    nets = [diffusers.QwenImageControlNetModel(**_QWEN_CN)]
    return dict(controlnets=nets), dict(_qwen_inputs(),
                                        controlnet_cond=[randn(2, 16, 16), randn(2, 16, 16)],
                                        conditioning_scale=[1.0, 0.5], return_dict=False)


_ZIMAGE = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=32, n_layers=2,
               n_refiner_layers=1, n_heads=2, n_kv_heads=2, qk_norm=True, cap_feat_dim=16,
               axes_dims=[8, 4, 4], axes_lens=[256, 32, 32])


def _zimage_call(controlnet, **inputs):
    """Z-Image ControlNet shares its embedders and refiners with the transformer:
    attach a seeded ZImageTransformer2DModel's once (from_transformer), then run."""
    import diffusers
    if controlnet.t_embedder is None:
        torch.manual_seed(0)
        transformer = diffusers.ZImageTransformer2DModel(**_ZIMAGE)
        with torch.no_grad():  # pad tokens start as zeros: give them values
            transformer.x_pad_token.normal_()
            transformer.cap_pad_token.normal_()
        transformer.to(controlnet.device, controlnet.dtype)
        diffusers.ZImageControlNetModel.from_transformer(controlnet, transformer)
    if not hasattr(controlnet, "gradient_checkpointing"):  # Diffusers 0.42 never sets it
        controlnet.gradient_checkpointing = False
    return controlnet(**inputs)


@recipe("ZImageControlNetModel", call=_zimage_call, backward=True)
def zimage_controlnet():
    config = dict(control_layers_places=[0, 1], control_in_dim=16, all_patch_size=(2,),
                  all_f_patch_size=(1,), dim=32, n_refiner_layers=1, n_heads=2, n_kv_heads=2, qk_norm=True)
    # Per-sample latents (C, F, H, W) and captions of different lengths, as the pipeline passes them.
    return config, dict(x=[randn(16, 1, 8, 8), randn(16, 1, 8, 8)], t=torch.tensor([0.25, 0.8]),
                        cap_feats=[randn(5, 16), randn(9, 16)], control_context=randn(2, 16, 1, 8, 8),
                        conditioning_scale=0.75)
