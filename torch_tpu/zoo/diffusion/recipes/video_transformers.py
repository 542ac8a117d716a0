"""Video diffusion transformers (Wan, CogVideoX, HunyuanVideo, LTX, Mochi, Cosmos, ...)."""
import torch

from . import rand, randint, randn, recipe


def _sigmas(batch):
    """Flow-matching timesteps as the pipelines pass them: floats in [0, 1000)."""
    return rand(batch) * 1000


# --- Wan and its derivatives -------------------------------------------------------------

_WAN = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
            out_channels=4, text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2,
            rope_max_seq_len=32)


@recipe("WanTransformer3DModel", backward=True, fast=True)
def wan():
    # Wan 2.1 image-to-video layout: an image-embedding stream next to the text.
    config = dict(_WAN, in_channels=8, image_dim=24, added_kv_proj_dim=32)
    return config, dict(hidden_states=randn(2, 8, 3, 8, 8), timestep=_sigmas(2),
                        encoder_hidden_states=randn(2, 7, 32),
                        encoder_hidden_states_image=randn(2, 5, 24))


@recipe("WanVACETransformer3DModel", backward=True)
def wan_vace():
    config = dict(_WAN, num_layers=3, vace_layers=[0, 2], vace_in_channels=12)
    return config, dict(hidden_states=randn(1, 4, 3, 8, 8), timestep=_sigmas(1),
                        encoder_hidden_states=randn(1, 7, 32),
                        control_hidden_states=randn(1, 12, 3, 8, 8),
                        control_hidden_states_scale=torch.tensor([1.0, 0.5]))


@recipe("ChronoEditTransformer3DModel", backward=True)
def chronoedit():
    config = dict(_WAN, rope_temporal_skip_len=2)
    return config, dict(hidden_states=randn(1, 4, 3, 8, 8), timestep=_sigmas(1),
                        encoder_hidden_states=randn(1, 7, 32))


@recipe("SkyReelsV2Transformer3DModel", backward=True)
def skyreels_v2():
    # Diffusion forcing: one timestep per latent frame, with the fps embedding.
    config = dict(_WAN, inject_sample_info=True)
    # (batch 1 as the diffusion-forcing pipeline runs it: the fps term broadcasts over frames only)
    return config, dict(hidden_states=randn(1, 4, 3, 8, 8), timestep=_sigmas(3)[None],
                        encoder_hidden_states=randn(1, 7, 32), enable_diffusion_forcing=True,
                        fps=[1])


@recipe("HeliosTransformer3DModel", backward=True)
def helios():
    # Autoregressive chunk with short/mid/long history latents (patchified 1x, 2x, 4x coarser)
    # at earlier frame indices, the history at timestep 0.
    config = dict(_WAN, rope_dim=(8, 4, 4))
    config.pop("rope_max_seq_len")
    f = 2
    return config, dict(hidden_states=randn(1, 4, f, 16, 16), timestep=_sigmas(1),
                        encoder_hidden_states=randn(1, 7, 32),
                        indices_hidden_states=torch.arange(5, 5 + f)[None],
                        indices_latents_history_short=torch.arange(4, 5)[None],
                        indices_latents_history_mid=torch.arange(2, 4)[None],
                        indices_latents_history_long=torch.arange(0, 2)[None],
                        latents_history_short=randn(1, 4, 1, 16, 16),
                        latents_history_mid=randn(1, 4, 2, 16, 16),
                        latents_history_long=randn(1, 4, 2, 16, 16))


@recipe("WanAnimateTransformer3DModel", backward=True)
def wan_animate():
    # Latent = noise + reference (2 * 4) + mask (4); pose latents one frame shorter; 5 face crops
    # go through the motion encoder (face size = motion_encoder_size) down to 2 frames + 1 pad.
    config = dict(_WAN, in_channels=12, latent_channels=4, image_dim=24,
                  motion_encoder_channel_sizes={"4": 16, "8": 16, "16": 16},
                  motion_encoder_size=16, motion_style_dim=8, motion_dim=4, motion_encoder_dim=16,
                  face_encoder_hidden_dim=16, face_encoder_num_heads=2,
                  inject_face_latents_blocks=1, motion_encoder_batch_size=4)
    return config, dict(hidden_states=randn(1, 12, 3, 8, 8), timestep=_sigmas(1),
                        encoder_hidden_states=randn(1, 7, 32),
                        encoder_hidden_states_image=randn(1, 5, 24),
                        pose_hidden_states=randn(1, 4, 2, 8, 8),
                        face_pixel_values=randn(1, 3, 5, 16, 16))


def _wan_animate2(model, **inputs):
    # The reference pass: dense self-attention over the driving latents, filling a fresh
    # per-layer K/V cache (the generation pass then attends to it through flex attention).
    from diffusers.models.transformers.transformer_wan_animate_2 import WanAnimate2KVCache
    return model(**inputs, kv_cache=WanAnimate2KVCache(model.config.num_layers),
                 kv_cache_mode="extract")


@recipe("WanAnimate2Transformer3DModel", call=_wan_animate2, backward=True)
def wan_animate2():
    # in_dim = 16 latent + 20 conditioning (latents + 4-channel mask); the CLIP projection
    # (MLPProj) is fixed at 1280 wide.
    config = dict(patch_size=(1, 2, 2), text_len=8, in_dim=36, dim=32, ffn_dim=64, freq_dim=32,
                  text_dim=32, out_dim=16, num_heads=2, num_layers=2)
    f, h, w = 2, 8, 8
    return config, dict(hidden_states=[randn(16, f, h, w)], timestep=torch.tensor([1.0]),
                        encoder_hidden_states=[randn(8, 32)], condition_latents=[randn(20, f, h, w)],
                        encoder_hidden_states_image=randn(1, 4, 1280),
                        seq_len=f * (h // 2) * (w // 2),
                        offset_grid_sizes=torch.tensor([[f, h // 2, w // 2]]))


_ANYFLOW = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                out_channels=4, text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2,
                rope_max_seq_len=32, deltatime_type="r")


@recipe("AnyFlowTransformer3DModel", backward=True)
def anyflow():
    # (batch, frames, channels, h, w); per-frame flow-map timesteps t and r <= t
    t = _sigmas(3)[None]
    return _ANYFLOW, dict(hidden_states=randn(1, 3, 4, 8, 8), timestep=t, r_timestep=t * rand(1, 3),
                          encoder_hidden_states=randn(1, 7, 32))


@recipe("AnyFlowFARTransformer3DModel")
def anyflow_far():
    # (no backward: the CPU reference cannot run flex attention backward)
    # Frame-autoregressive rollout: chunks of 1 and 2 frames, causal mask built inside.
    config = dict(_ANYFLOW, compressed_patch_size=(1, 4, 4), full_chunk_limit=3)
    t = _sigmas(3)[None]
    return config, dict(hidden_states=randn(1, 3, 4, 8, 8), timestep=t, r_timestep=t * rand(1, 3),
                        encoder_hidden_states=randn(1, 7, 32), chunk_partition=[1, 2])


# --- CogVideoX family -------------------------------------------------------------------


def _cogvideox_rope(head_dim, frames, grid, base, slice_grid):
    """The (cos, sin) rotary tables the CogVideoX pipelines compute for the transformer."""
    from diffusers.models.embeddings import get_3d_rotary_pos_embed
    if slice_grid:  # CogVideoX 1.5
        return get_3d_rotary_pos_embed(embed_dim=head_dim, crops_coords=None, grid_size=(grid, grid),
                                       temporal_size=frames, grid_type="slice", max_size=(base, base))
    # CogVideoX 1.0: the grid is the base size here, so the crop region is all of it
    return get_3d_rotary_pos_embed(embed_dim=head_dim, crops_coords=((0, 0), (grid, grid)),
                                   grid_size=(grid, grid), temporal_size=frames)


@recipe("CogVideoXTransformer3DModel", backward=True)
def cogvideox():
    # CogVideoX 1.5 layout: temporal patches of 2 and rotary embeddings; DDIM-style integer timesteps.
    config = dict(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                  time_embed_dim=32, text_embed_dim=24, num_layers=2, sample_width=8,
                  sample_height=8, sample_frames=13, patch_size=2, patch_size_t=2,
                  max_text_seq_length=6, use_rotary_positional_embeddings=True)
    return config, dict(hidden_states=randn(2, 4, 4, 8, 8), encoder_hidden_states=randn(2, 6, 24),
                        timestep=randint(1000, 2),
                        image_rotary_emb=_cogvideox_rope(16, 2, 4, 4, slice_grid=True))


@recipe("ConsisIDTransformer3DModel", backward=True)
def consisid():
    # CogVideoX 1.0 backbone plus the identity branch: a local facial extractor over two ViT
    # feature scales and perceiver cross-attention every block (kv width = 2/3 of 48).
    config = dict(num_attention_heads=3, attention_head_dim=16, in_channels=4, out_channels=4,
                  time_embed_dim=32, text_embed_dim=24, num_layers=2, sample_width=8,
                  sample_height=8, sample_frames=9, patch_size=2, max_text_seq_length=6,
                  use_rotary_positional_embeddings=True, is_train_face=True, is_kps=False,
                  cross_attn_interval=1, cross_attn_dim_head=8, cross_attn_num_heads=2,
                  LFE_id_dim=24, LFE_vit_dim=16, LFE_depth=2, LFE_dim_head=8, LFE_num_heads=2,
                  LFE_num_id_token=2, LFE_num_querie=4, LFE_output_dim=32, LFE_ff_mult=1,
                  LFE_num_scale=2)
    return config, dict(hidden_states=randn(1, 3, 4, 8, 8), encoder_hidden_states=randn(1, 6, 24),
                        timestep=randint(1000, 1),
                        image_rotary_emb=_cogvideox_rope(16, 3, 4, 4, slice_grid=False),
                        id_cond=randn(1, 24), id_vit_hidden=[randn(1, 5, 16), randn(1, 5, 16)])


# --- Other DiT-style video transformers -------------------------------------------------


def _allegro_rope(model_config, frames, grid):
    """Allegro's rotary tables and integer grid positions, as its pipeline builds them."""
    from diffusers.models.embeddings import get_3d_rotary_pos_embed_allegro
    c = model_config
    freqs_t, freqs_h, freqs_w, grid_t, grid_h, grid_w = get_3d_rotary_pos_embed_allegro(
        embed_dim=c["attention_head_dim"], crops_coords=((0, 0), (grid, grid)), grid_size=(grid, grid),
        temporal_size=frames, interpolation_scale=(2.2, 2.0, 2.0))
    pos = torch.cartesian_prod(grid_t.long(), grid_h.long(), grid_w.long())
    pos = pos.reshape(-1, 3).transpose(0, 1).reshape(3, 1, -1).contiguous()
    return (freqs_t, freqs_h, freqs_w), tuple(pos)


@recipe("AllegroTransformer3DModel", backward=True)
def allegro():
    config = dict(num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
                  num_layers=2, cross_attention_dim=48, sample_width=8, sample_height=8,
                  sample_frames=3, caption_channels=24)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 4:] = 0  # the second prompt is padded
    return config, dict(hidden_states=randn(2, 4, 3, 8, 8), encoder_hidden_states=randn(2, 7, 24),
                        timestep=randint(1000, 2), encoder_attention_mask=mask,
                        image_rotary_emb=_allegro_rope(config, 3, 4))


@recipe("LatteTransformer3DModel", backward=True)
def latte():
    # Latte-1: spatial and temporal blocks, adaLN-single, learned sigma (out = 2 x in channels).
    config = dict(sample_size=8, num_layers=2, patch_size=2, attention_head_dim=16,
                  num_attention_heads=2, caption_channels=24, in_channels=4, out_channels=8,
                  cross_attention_dim=32, attention_bias=True, activation_fn="gelu-approximate",
                  num_embeds_ada_norm=1000, norm_type="ada_norm_single",
                  norm_elementwise_affine=False, norm_eps=1e-6, video_length=3)
    return config, dict(hidden_states=randn(2, 4, 3, 8, 8), encoder_hidden_states=randn(2, 7, 24),
                        timestep=randint(1000, 2), enable_temporal_attentions=True)


@recipe("MochiTransformer3DModel", backward=True)
def mochi():
    config = dict(patch_size=2, num_attention_heads=2, attention_head_dim=16, num_layers=2,
                  pooled_projection_dim=24, in_channels=4, text_embed_dim=24, time_embed_dim=32,
                  max_sequence_length=8)
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, 5:] = False
    return config, dict(hidden_states=randn(2, 4, 3, 8, 8), encoder_hidden_states=randn(2, 8, 24),
                        timestep=_sigmas(2), encoder_attention_mask=mask)


@recipe("LTXVideoTransformer3DModel", backward=True)
def ltx_video():
    # Tokens come packed (batch, frames * h * w, channels), positions from num_frames/height/width.
    config = dict(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                  cross_attention_dim=32, num_layers=2, caption_channels=24)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    return config, dict(hidden_states=randn(2, 3 * 4 * 4, 8), encoder_hidden_states=randn(2, 7, 24),
                        timestep=_sigmas(2), encoder_attention_mask=mask, num_frames=3, height=4,
                        width=4, rope_interpolation_scale=(8 / 25, 32, 32))


@recipe("EasyAnimateTransformer3DModel", backward=True)
def easyanimate():
    config = dict(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                  patch_size=2, sample_width=8, sample_height=8, num_layers=2, mmdit_layers=2,
                  time_embed_dim=32, text_embed_dim=24, time_position_encoding_type="3d_rope")
    return config, dict(hidden_states=randn(2, 4, 3, 8, 8), timestep=_sigmas(2),
                        encoder_hidden_states=randn(2, 7, 24))


@recipe("CosmosTransformer3DModel", backward=True)
def cosmos():
    # Cosmos-Predict2 video2world: a conditioning-mask channel, one (EDM-preconditioned) timestep
    # per latent frame, the first frame clean. (concat_padding_mask=False: resizing the padding
    # mask needs torchvision, which this environment does not have.)
    config = dict(in_channels=5, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                  num_layers=2, mlp_ratio=2.0, text_embed_dim=24, adaln_lora_dim=8,
                  max_size=(8, 32, 32), patch_size=(1, 2, 2), rope_scale=(1.0, 3.0, 3.0),
                  concat_padding_mask=False, extra_pos_embed_type=None)
    cond = torch.zeros(1, 1, 3, 1, 1)
    cond[:, :, :1] = 1.0
    t = rand(2).reshape(2, 1, 1, 1, 1).expand(2, 1, 3, 1, 1)
    return config, dict(hidden_states=randn(2, 4, 3, 8, 8), timestep=cond * 0.0001 + (1 - cond) * t,
                        encoder_hidden_states=randn(2, 7, 24), fps=16,
                        condition_mask=cond.expand(2, 1, 3, 8, 8).contiguous())


@recipe("CosmosControlNetModel", backward=True)
def cosmos_controlnet():
    # Cosmos-Transfer's control branch: control latents padded to in_channels - 2, then the
    # condition mask and the padding mask (resized with torchvision: without it the CPU cannot
    # run this class) as extra channels, on both the control and the base latents.
    config = dict(n_controlnet_blocks=2, in_channels=8, latent_channels=6, model_channels=32,
                  num_attention_heads=2, attention_head_dim=16, mlp_ratio=2.0, text_embed_dim=24,
                  adaln_lora_dim=8, max_size=(8, 32, 32), patch_size=(1, 2, 2),
                  rope_scale=(1.0, 3.0, 3.0))
    cond = torch.zeros(2, 1, 3, 8, 8)
    cond[:, :, :1] = 1.0
    return config, dict(controls_latents=randn(2, 4, 3, 8, 8), latents=randn(2, 4, 3, 8, 8),
                        timestep=rand(2) * 1000, encoder_hidden_states=randn(2, 7, 24),
                        condition_mask=cond, padding_mask=torch.zeros(1, 1, 16, 16), fps=16)


# --- HunyuanVideo family ----------------------------------------------------------------


def _text_mask(batch, length, valid):
    """A prompt attention mask: 1 on the first ``valid[i]`` tokens of prompt i, 0 on padding."""
    return (torch.arange(length)[None] < torch.tensor(valid)[:, None]).long()


@recipe("HunyuanVideoTransformer3DModel", backward=True)
def hunyuan_video():
    config = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                  num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=2,
                  patch_size_t=1, guidance_embeds=True, text_embed_dim=24,
                  pooled_projection_dim=16, rope_axes_dim=(4, 6, 6))
    return config, dict(hidden_states=randn(2, 4, 3, 8, 8), timestep=_sigmas(2),
                        encoder_hidden_states=randn(2, 7, 24),
                        encoder_attention_mask=_text_mask(2, 7, [7, 4]),
                        pooled_projections=randn(2, 16), guidance=torch.tensor([6000.0, 6000.0]))


@recipe("HunyuanVideo15Transformer3DModel", backward=True)
def hunyuan_video15():
    # Image-to-video: latent + image latent + mask channels; MLLM text, ByT5 glyph text and
    # SigLIP image tokens are packed per sample by their masks.
    config = dict(in_channels=9, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                  num_layers=2, num_refiner_layers=1, mlp_ratio=2.0, patch_size=1, patch_size_t=1,
                  text_embed_dim=24, text_embed_2_dim=20, image_embed_dim=16,
                  rope_axes_dim=(4, 6, 6), target_size=64, task_type="i2v")
    return config, dict(hidden_states=randn(2, 9, 2, 6, 6), timestep=_sigmas(2),
                        encoder_hidden_states=randn(2, 7, 24),
                        encoder_attention_mask=_text_mask(2, 7, [7, 3]),
                        encoder_hidden_states_2=randn(2, 5, 20),
                        encoder_attention_mask_2=_text_mask(2, 5, [2, 5]),
                        image_embeds=randn(2, 4, 16))


@recipe("HunyuanVideoFramepackTransformer3DModel", backward=True)
def hunyuan_video_framepack():
    # Frame packing: the window's 2 latent frames plus clean (prefix + 1x history), 2x and 4x
    # history latents embedded with coarser patches; indices as the pipeline splits them.
    config = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                  num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=2,
                  patch_size_t=1, guidance_embeds=True, text_embed_dim=24,
                  pooled_projection_dim=16, rope_axes_dim=(4, 6, 6), image_condition_type=None,
                  has_image_proj=True, image_proj_dim=16, has_clean_x_embedder=True)
    prefix, h4x, h2x, h1x, window = torch.arange(10).split([1, 4, 2, 1, 2])
    return config, dict(hidden_states=randn(1, 4, 2, 8, 8), timestep=_sigmas(1),
                        encoder_hidden_states=randn(1, 7, 24),
                        encoder_attention_mask=_text_mask(1, 7, [5]),
                        pooled_projections=randn(1, 16), image_embeds=randn(1, 5, 16),
                        indices_latents=window, guidance=torch.tensor([10000.0]),
                        latents_clean=randn(1, 4, 2, 8, 8),
                        indices_latents_clean=torch.cat([prefix, h1x]),
                        latents_history_2x=randn(1, 4, 2, 8, 8), indices_latents_history_2x=h2x,
                        latents_history_4x=randn(1, 4, 4, 8, 8), indices_latents_history_4x=h4x)


@recipe("MotifVideoTransformer3DModel", backward=True)
def motif_video():
    # Image-to-video: latent + first-frame latent + mask channels, image tokens before the text,
    # dual- and single-stream blocks plus a decoder block.
    config = dict(in_channels=9, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                  num_layers=1, num_single_layers=1, num_decoder_layers=1, mlp_ratio=2.0,
                  patch_size=2, patch_size_t=1, text_embed_dim=24, image_embed_dim=16,
                  rope_axes_dim=(4, 6, 6))
    return config, dict(hidden_states=randn(2, 9, 3, 8, 8), timestep=_sigmas(2),
                        encoder_hidden_states=randn(2, 7, 24),
                        encoder_attention_mask=_text_mask(2, 7, [7, 4]),
                        image_embeds=randn(2, 3, 16))


@recipe("JoyImageEditTransformer3DModel", backward=True)
def joyimage_edit():
    # Two items per sample (reference image and target), each (channels, 1 frame, h, w).
    config = dict(patch_size=[1, 2, 2], in_channels=8, hidden_size=32, num_attention_heads=2,
                  text_dim=24, num_layers=2, rope_dim_list=[4, 6, 6])
    return config, dict(hidden_states=randn(1, 2, 8, 1, 8, 8), timestep=_sigmas(1),
                        encoder_hidden_states=randn(1, 7, 24))


@recipe("JoyImageEditPlusTransformer3DModel", backward=True)
def joyimage_edit_plus():
    # Pre-patchified tokens (batch, max patches, channels, 1, 2, 2): target 4x4 plus a reference
    # 2x3 (sample 0) or 3x2 (sample 1) patch grid, padded to 24; text padding mask.
    config = dict(patch_size=[1, 2, 2], in_channels=8, hidden_size=32, num_attention_heads=2,
                  text_dim=24, num_layers=2, rope_dim_list=[4, 6, 6])
    return config, dict(hidden_states=randn(2, 24, 8, 1, 2, 2), timestep=_sigmas(2),
                        encoder_hidden_states=randn(2, 7, 24),
                        encoder_hidden_states_mask=_text_mask(2, 7, [7, 4]),
                        shape_list=[[(1, 4, 4), (1, 2, 3)], [(1, 4, 4), (1, 3, 2)]])


# --- Kandinsky 5 / 6 --------------------------------------------------------------------


@recipe("Kandinsky5Transformer3DModel", backward=True)
def kandinsky5():
    # Channels-last (batch, frames, h, w, 2 * 4 + 1) with visual conditioning; Qwen text tokens
    # and a pooled CLIP vector; rope positions over the patch grid and the text.
    config = dict(in_visual_dim=4, in_text_dim=24, in_text_dim2=16, time_dim=32, out_visual_dim=4,
                  patch_size=(1, 2, 2), model_dim=32, ff_dim=64, num_text_blocks=1,
                  num_visual_blocks=2, axes_dims=(4, 6, 6), visual_cond=True)
    return config, dict(hidden_states=randn(1, 3, 8, 8, 9), encoder_hidden_states=randn(1, 7, 24),
                        timestep=_sigmas(1), pooled_projections=randn(1, 16),
                        visual_rope_pos=[torch.arange(3), torch.arange(4), torch.arange(4)],
                        text_rope_pos=torch.arange(7), scale_factor=(1.0, 1.0, 1.0))


@recipe("Kandinsky6Transformer3DModel", backward=True)
def kandinsky6():
    # Joint video + audio generation: channels-last video with conditioning channels, audio
    # latents, a padded prompt, per-frame token types.
    config = dict(in_visual_dim=4, out_visual_dim=4, in_text_dim=24, in_text_dim2=16, time_dim=32,
                  patch_size=(1, 2, 2), model_dim=32, ff_dim=64, num_text_blocks=1,
                  num_visual_blocks=2, axes_dims=(4, 6, 6), visual_cond=True, in_audio_dim=8,
                  out_audio_dim=8, visual_token_type_num_embeddings=2)
    mask = _text_mask(2, 7, [7, 5]).bool()
    return config, dict(hidden_states=randn(2, 3, 8, 8, 9), encoder_hidden_states=randn(2, 7, 24),
                        pooled_projections=randn(2, 16), timestep=_sigmas(2),
                        audio_hidden_states=randn(2, 10, 8), encoder_attention_mask=mask,
                        visual_token_type_ids=torch.tensor([[1, 0, 0], [1, 0, 0]]))


@recipe("Kandinsky6SRTransformer3DModel")
def kandinsky6_sr():
    # Video super-resolution tile: noisy latent + anchor latent + mask, channels last; NABLA
    # sparse attention over 8x8 token blocks (flex attention: no backward on the CPU reference).
    config = dict(in_visual_dim=4, out_visual_dim=8, time_dim=32, patch_size=(1, 1, 1),
                  model_dim=32, ff_dim=64, num_visual_blocks=2, axes_dims=(4, 6, 6))
    return config, dict(hidden_states=randn(1, 2, 8, 16, 9), timestep=_sigmas(1))


@recipe("Kandinsky6SRLatentUpscalerBank", backward=True)
def kandinsky6_sr_upscaler():
    # The x4 cascade (2x + 2x) of the bank, on K-VAE-like latents.
    config = dict(in_channels=8, stage_channels=(32, 16, 16), num_pre_blocks=1, num_mid_blocks=1,
                  num_post_blocks=1, num_x2_adapter_blocks=1, scales=(2, 4))
    return config, dict(latents=randn(1, 8, 2, 4, 4), scale=4)


# --- LTX-2 and Sana video ---------------------------------------------------------------


@recipe("LTX2VideoTransformer3DModel", backward=True)
def ltx2_video():
    # Joint audio-video: packed video tokens (3 x 4 x 4) and audio tokens (9 frames of
    # 2 channels x 4 mel bins), text for each stream, sigma for the LTX-2.3 heads; positions
    # computed inside from the sizes and fps.
    config = dict(in_channels=8, out_channels=8, patch_size=1, patch_size_t=1,
                  num_attention_heads=2, attention_head_dim=16, cross_attention_dim=32,
                  audio_in_channels=8, audio_out_channels=8, audio_num_attention_heads=2,
                  audio_attention_head_dim=8, audio_cross_attention_dim=16, num_layers=2,
                  caption_channels=24, rope_double_precision=False, gated_attn=True,
                  audio_gated_attn=True)
    t = _sigmas(2)
    return config, dict(hidden_states=randn(2, 3 * 4 * 4, 8), audio_hidden_states=randn(2, 9, 8),
                        encoder_hidden_states=randn(2, 7, 24),
                        audio_encoder_hidden_states=randn(2, 7, 24), timestep=t, sigma=t / 1000,
                        encoder_attention_mask=_text_mask(2, 7, [7, 4]),
                        audio_encoder_attention_mask=_text_mask(2, 7, [7, 4]),
                        num_frames=3, height=4, width=4, fps=25.0, audio_num_frames=9)


def _ltx2_diffusion_decode(model, **inputs):
    # The decoder denoises from noise it draws itself: a fresh seeded CPU generator per call, so
    # the CPU and tpu runs start from the same noise.
    return model(**inputs, generator=torch.Generator().manual_seed(0))


@recipe("LTX2VideoDiffusionDecoderModel", call=_ltx2_diffusion_decode)
def ltx2_diffusion_decoder():
    # One-step diffusion decoder: 2 latent frames of 3x3 decode to 9 frames of 48x48 pixels.
    # (No backward: its attention is flex attention, which has no CPU backward.)
    config = dict(out_channels=3, latent_channels=8, patch_size=2, decoder_head_dim=8,
                  decoder_stage_channels=(32, 16, 16, 16, 16), decoder_stage_depths=(1, 1, 1, 1, 1),
                  decoder_stage_kernels=((3, 3, 3),) * 4,
                  decoder_upsample_strides=((1, 2, 2), (2, 1, 1), (2, 2, 2), (2, 2, 2)),
                  decoder_upsample_channel_reductions=(2, 1, 1, 1), decoder_stage5_kernel=(3, 3, 3),
                  decoder_t_emb_dim=16, spatial_compression_ratio=16, temporal_compression_ratio=8)
    return config, dict(z=randn(1, 8, 2, 3, 3))


@recipe("SanaVideoTransformer3DModel", backward=True)
def sana_video():
    config = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                  num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=16,
                  cross_attention_dim=32, caption_channels=24, mlp_ratio=2.5, sample_size=8,
                  patch_size=(1, 2, 2), rope_max_seq_len=32)
    return config, dict(hidden_states=randn(2, 4, 3, 8, 8), encoder_hidden_states=randn(2, 7, 24),
                        timestep=_sigmas(2), encoder_attention_mask=_text_mask(2, 7, [7, 3]))


def _camera_path(batch, frames, height, width):
    """SANA-WM camera conditions (batch, frames, 20): a flattened 4x4 camera-to-world matrix
    (moving forward, slowly turning) followed by pinhole intrinsics [fx, fy, cx, cy]."""
    angle = torch.arange(frames, dtype=torch.float32) * 0.05
    c2w = torch.eye(4).repeat(batch, frames, 1, 1)
    c2w[..., 0, 0], c2w[..., 0, 2] = torch.cos(angle), torch.sin(angle)
    c2w[..., 2, 0], c2w[..., 2, 2] = -torch.sin(angle), torch.cos(angle)
    c2w[..., 2, 3] = torch.arange(frames, dtype=torch.float32) * 0.1
    intrinsics = torch.tensor([float(width), float(height), width / 2, height / 2]).expand(batch, frames, 4)
    return torch.cat([c2w.flatten(-2), intrinsics], dim=-1)


@recipe("SanaWMTransformer3DModel", backward=True)
def sana_wm():
    # Camera-controlled world model: block 0 uses gated-delta (linear) attention, block 1 softmax
    # attention; per-frame timesteps, (batch, 1, L, D) text, Plucker rays after attention.
    config = dict(in_channels=4, num_layers=2, hidden_size=32, num_attention_heads=2,
                  patch_size=(1, 1, 1), softmax_every_n=2, linear_head_dim=16, t_kernel_size=3,
                  conv_kernel_size=4, caption_channels=24, mlp_ratio=2.0, chunk_plucker_channels=8,
                  chunk_plucker_post_attn_blocks=2)
    f, h, w = 4, 8, 8
    return config, dict(hidden_states=randn(1, 4, f, h, w), timestep=_sigmas(f).reshape(1, 1, f),
                        encoder_hidden_states=randn(1, 1, 7, 24),
                        encoder_attention_mask=_text_mask(1, 7, [5]),
                        camera_conditions=_camera_path(1, f, h, w), chunk_plucker=randn(1, 8, f, h, w))


def _sana_wm_refine(model, latents, noise, encoder_hidden_states, encoder_attention_mask, sigma):
    """One window of SANA-WM's autoregressive LTX-2 refiner, as its pipeline runs it: the first
    (sink) frame's pre-RoPE K/V are captured into a fresh cache at t = 0, then the next frames,
    noised to ``sigma``, are denoised attending to [sink + current]."""
    from diffusers.models.transformers.transformer_sana_wm_refiner import SanaWMRefinerKVCache
    batch, _, frames, height, width = latents.shape

    def rope(positions):
        return model.build_rotary_emb_for_absolute_positions(
            batch_size=batch, frame_positions=positions, height=height, width=width,
            device=latents.device, fps=24.0)

    def pack(x):
        return x.flatten(2).transpose(1, 2)  # patch size 1: (batch, frames * h * w, channels)

    cache = SanaWMRefinerKVCache(model.config.num_layers)
    sink = pack(latents[:, :, :1])
    model(hidden_states=sink, encoder_hidden_states=encoder_hidden_states,
          timestep=torch.zeros(sink.shape[:2], device=latents.device), video_rotary_emb=rope([0]),
          encoder_attention_mask=encoder_attention_mask, kv_cache=cache,
          kv_cache_mode="capture_pre_rope", return_dict=False)
    for i in range(len(cache)):
        layer = cache.get(i)
        layer.store_sink(*layer.get_captured_pre_rope())
    cache.sink_pe = rope([0])
    block = pack((1 - sigma) * latents[:, :, 1:] + sigma * noise)
    timestep = torch.full(block.shape[:2], 1000.0, device=latents.device) * sigma
    return model(hidden_states=block, encoder_hidden_states=encoder_hidden_states, timestep=timestep,
                 video_rotary_emb=rope(list(range(1, frames))),
                 encoder_attention_mask=encoder_attention_mask, kv_cache=cache,
                 kv_cache_mode="inject", return_dict=False)


@recipe("SanaWMLTX2RefinerTransformer3DModel", call=_sana_wm_refine, backward=True)
def sana_wm_refiner():
    config = dict(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                  cross_attention_dim=32, caption_channels=24, num_layers=2,
                  rope_double_precision=False,
                  # the (unused by this video-only refiner) audio stream, kept tiny
                  audio_in_channels=8, audio_out_channels=8, audio_num_attention_heads=2,
                  audio_attention_head_dim=8, audio_cross_attention_dim=16)
    return config, dict(latents=randn(1, 8, 3, 4, 4), noise=randn(1, 8, 2, 4, 4),
                        encoder_hidden_states=randn(1, 7, 24),
                        encoder_attention_mask=_text_mask(1, 7, [5]), sigma=0.7)


@recipe("MiniMaxH3Transformer3DModel", backward=True)
def minimax_h3():
    # One packed sequence [text | video | audio] as the pipelines build it: modality tags, (t, h, w)
    # rope coordinates, and per-row indices into the distinct timesteps (a clean conditioning
    # frame at t = 0, the 2 target video frames and the audio on their own schedules).
    # heads x head_dim (32) != hidden (24) and partial rotary (2 * 3 * 2 < 16), as released.
    config = dict(num_attention_heads=2, attention_head_dim=16, hidden_size=24, num_layers=2,
                  num_refiner_layers=1, ffn_dim=48, in_channels=4, audio_in_channels=6,
                  patch_size=(1, 2, 2), text_dim=16, freq_dim=16, time_embed_hidden_dim=24,
                  time_embed_dim=16, rope_freq_dim=2)
    n_text, n_audio, frames, hw = 5, 6, 3, 4  # video: 3 frames of a 2x2 token grid
    n_video = frames * hw
    text = torch.arange(n_text)
    video = torch.arange(n_text, n_text + n_video)
    audio = torch.arange(n_text + n_video, n_text + n_video + n_audio)
    length = n_text + n_video + n_audio
    tags = torch.zeros(length, dtype=torch.long)
    tags[text], tags[audio] = 1, 2
    t_index = torch.ones(length, dtype=torch.long)
    t_index[video[:hw]] = 0  # the conditioning frame
    t_index[audio] = 2
    pos = torch.zeros(length, 3)
    pos[:, 0] = torch.arange(length, dtype=torch.float32)
    grid = torch.arange(n_video)
    pos[video, 0] = n_text + (grid // hw).float()
    pos[video, 1] = (grid % hw // 2).float()
    pos[video, 2] = (grid % 2).float()
    return config, dict(hidden_states=randn(2, n_video, 16), audio_hidden_states=randn(2, n_audio, 6),
                        encoder_hidden_states=randn(2, n_text, 16),
                        timestep=torch.tensor([0.0, 0.7, 0.4]), timestep_indices=t_index,
                        token_tags=tags, position_ids=pos, video_indices=video,
                        audio_indices=audio, text_indices=text)


@recipe("Cosmos3OmniTransformer", backward=True)
def cosmos3_omni():
    # Mixture-of-transformers over one packed sequence: 5 prompt tokens (the causal
    # "understanding" part), then a 3-frame 4x4 video latent in 2x2 patches (frame 0 clean, frames
    # 1-2 noisy) and 6 sound latent frames, all noisy; 3-axis mrope positions; grouped-query
    # attention (2 query heads, 1 key/value head).
    config = dict(head_dim=16, hidden_size=32, intermediate_size=64, latent_channel=4,
                  latent_patch_size=2, num_attention_heads=2, num_hidden_layers=2,
                  num_key_value_heads=1, patch_latent_dim=16, rope_axes_dim=[2, 3, 3],
                  rope_theta=10000.0, vocab_size=64, sound_dim=8, sound_gen=True)
    n_text, frames, grid, n_sound = 5, 3, 2, 6
    n_vision = frames * grid * grid
    vision = torch.arange(n_text, n_text + n_vision)
    sound = torch.arange(n_text + n_vision, n_text + n_vision + n_sound)
    length = n_text + n_vision + n_sound
    pos = torch.arange(length).repeat(3, 1)
    cell = torch.arange(n_vision)
    pos[0, vision] = n_text + cell // (grid * grid)
    pos[1, vision] = cell % (grid * grid) // grid
    pos[2, vision] = cell % grid
    pos[:, sound] = (n_text + frames + torch.arange(n_sound)).repeat(3, 1)
    noisy_frames = torch.tensor([1, 2])
    return config, dict(input_ids=randint(64, n_text), text_indexes=torch.arange(n_text),
                        position_ids=pos, und_len=n_text, sequence_length=length,
                        vision_tokens=[randn(1, 4, frames, 4, 4)],
                        vision_token_shapes=[(frames, grid, grid)],
                        vision_sequence_indexes=vision,
                        vision_mse_loss_indexes=vision[grid * grid:],
                        vision_timesteps=(rand(2) * 1000).repeat_interleave(grid * grid),
                        vision_noisy_frame_indexes=[noisy_frames],
                        sound_tokens=[randn(8, n_sound)], sound_token_shapes=[(n_sound, 1, 1)],
                        sound_sequence_indexes=sound, sound_mse_loss_indexes=sound,
                        sound_timesteps=rand(n_sound) * 1000,
                        sound_noisy_frame_indexes=[torch.arange(n_sound)])
