"""More image diffusion transformers (PixArt, Sana, Lumina, Qwen-Image, ...), small side models."""
import torch

from . import randint, randn, recipe, timesteps


def _grid_ids(h, w, axes=3, first=0.0):
    """Flux-style position ids of an h x w latent grid: (h*w, axes), rows and columns in the last
    two axes (the second and third of four for Flux 2)."""
    ids = torch.zeros(h, w, axes)
    ids[..., 0] = first
    ids[..., 1] = torch.arange(h, dtype=torch.float32)[:, None]
    ids[..., 2] = torch.arange(w, dtype=torch.float32)[None, :]
    return ids.reshape(h * w, axes)


def _text_ids(n, axes=3):
    return torch.zeros(n, axes)


# --- MMDiT / Flux-style ----------------------------------------------------------------------


@recipe("AuraFlowTransformer2DModel", backward=True)
def auraflow():
    config = dict(sample_size=16, patch_size=2, in_channels=4, num_mmdit_layers=1,
                  num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=4,
                  joint_attention_dim=32, caption_projection_dim=32, out_channels=4,
                  pos_embed_max_size=64)
    return config, dict(hidden_states=randn(2, 4, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        timestep=torch.tensor([0.25, 0.8]))


@recipe("BriaTransformer2DModel", backward=True)
def bria():
    config = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                  axes_dims_rope=[0, 8, 8])
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        img_ids=_grid_ids(4, 4), txt_ids=_text_ids(6),
                        timestep=torch.tensor([250.0, 800.0]))


@recipe("BriaFiboTransformer2DModel", backward=True)
def bria_fibo():
    # one text-encoder layer per block (1 double + 1 single), each projected to half the width
    config = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=48,
                  text_encoder_dim=24, axes_dims_rope=[0, 8, 8])
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 48),
                        text_encoder_layers=[randn(2, 6, 24), randn(2, 6, 24)],
                        img_ids=_grid_ids(4, 4), txt_ids=_text_ids(6),
                        timestep=torch.tensor([250.0, 800.0]))


@recipe("ChromaTransformer2DModel", backward=True)
def chroma():
    config = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                  axes_dims_rope=(4, 4, 8), approximator_num_channels=16,
                  approximator_hidden_dim=32, approximator_layers=1)
    # the pipeline's mask: prompt tokens (the second prompt is 2 shorter), then every image token
    mask = torch.ones(2, 6 + 16, dtype=torch.bool)
    mask[1, 4:6] = False
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        img_ids=_grid_ids(4, 4), txt_ids=_text_ids(6), attention_mask=mask,
                        timestep=torch.tensor([0.25, 0.8]))


@recipe("LongCatImageTransformer2DModel", backward=True)
def longcat_image():
    config = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                  pooled_projection_dim=32, axes_dims_rope=[4, 6, 6])
    txt_ids = _text_ids(6)
    txt_ids[:, 1] = txt_ids[:, 2] = torch.arange(6.0)
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        img_ids=_grid_ids(4, 4, first=1.0), txt_ids=txt_ids,
                        timestep=torch.tensor([0.25, 0.8]))


@recipe("OvisImageTransformer2DModel", backward=True)
def ovis_image():
    config = dict(patch_size=1, in_channels=16, out_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                  axes_dims_rope=(4, 6, 6))
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        img_ids=_grid_ids(4, 4), txt_ids=_text_ids(6),
                        timestep=torch.tensor([0.25, 0.8]))


def _flux2_ids(h, w, text_len):
    img = torch.cartesian_prod(torch.arange(1), torch.arange(h), torch.arange(w), torch.arange(1))
    txt = torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1),
                               torch.arange(text_len))
    return img, txt


@recipe("Flux2Transformer2DModel", backward=True)
def flux2():
    config = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                  timestep_guidance_channels=32, axes_dims_rope=(4, 4, 4, 4))
    img_ids, txt_ids = _flux2_ids(4, 4, 6)
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        img_ids=img_ids, txt_ids=txt_ids, timestep=torch.tensor([0.25, 0.8]),
                        guidance=torch.tensor([4.0, 4.0]))


@recipe("Flux3Transformer2DModel", backward=True)
def flux3():
    config = dict(in_channels=16, cond_in_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                  timestep_channels=32, axes_dims_rope=(4, 4, 4, 4))
    img_ids, txt_ids = _flux2_ids(4, 4, 6)
    cond_ids, _ = _flux2_ids(2, 2, 1)
    cond_ids[:, 0] = 1  # the reference image on its own time plane
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        img_ids=img_ids, txt_ids=txt_ids, timestep=torch.tensor([0.25, 0.8]),
                        image_cond_hidden_states=randn(2, 4, 16), image_cond_ids=cond_ids)


# --- DiT / PixArt / Sana (2-D latents) --------------------------------------------------------


def _dit_call(model, **inputs):
    # In training DiT drops class labels (p=0.1, fixed in its embedder) with torch.rand on the
    # labels' device, whose stream differs between the CPU and tpu: the gradients would differ by
    # which labels were dropped. Keep every label so the comparison tests the arithmetic.
    for module in model.modules():
        if type(module).__name__ == "LabelEmbedding":
            module.dropout_prob = 0.0
    return model(**inputs)


@recipe("DiTTransformer2DModel", call=_dit_call, backward=True)
def dit():
    config = dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
                  num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10)
    return config, dict(hidden_states=randn(2, 4, 8, 8), timestep=timesteps(2),
                        class_labels=randint(10, 2))


@recipe("PixArtTransformer2DModel", backward=True)
def pixart():
    # PixArt-alpha style: caption projection and resolution / aspect-ratio conditions
    config = dict(num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=8,
                  num_layers=2, cross_attention_dim=24, caption_channels=32, sample_size=8,
                  patch_size=2, use_additional_conditions=True)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    return config, dict(hidden_states=randn(2, 4, 8, 8), encoder_hidden_states=randn(2, 6, 32),
                        timestep=timesteps(2), encoder_attention_mask=mask,
                        added_cond_kwargs=dict(resolution=torch.tensor([[64.0, 64.0]] * 2),
                                               aspect_ratio=torch.tensor([[1.0]] * 2)))


@recipe("SanaTransformer2DModel", backward=True)
def sana():
    config = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8,
                  num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=8,
                  cross_attention_dim=16, caption_channels=24, sample_size=8, patch_size=1)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    return config, dict(hidden_states=randn(2, 4, 8, 8), encoder_hidden_states=randn(2, 6, 24),
                        timestep=torch.tensor([250.0, 800.0]), encoder_attention_mask=mask)


@recipe("HunyuanDiT2DModel", backward=True)
def hunyuan_dit():
    config = dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, patch_size=2,
                  sample_size=8, hidden_size=16, num_layers=4, cross_attention_dim=16,
                  cross_attention_dim_t5=24, pooled_projection_dim=8, text_len=5, text_len_t5=6)
    from diffusers.models.embeddings import get_2d_rotary_pos_embed
    rope = get_2d_rotary_pos_embed(8, ((0, 0), (4, 4)), (4, 4), use_real=True)
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1, 3:] = 0
    mask_t5 = torch.ones(2, 6, dtype=torch.long)
    mask_t5[1, 4:] = 0
    meta = torch.tensor([[64.0, 64.0, 64.0, 64.0, 0.0, 0.0]] * 2)
    return config, dict(hidden_states=randn(2, 4, 8, 8), timestep=torch.tensor([250.0, 800.0]),
                        encoder_hidden_states=randn(2, 5, 16), text_embedding_mask=mask,
                        encoder_hidden_states_t5=randn(2, 6, 24), text_embedding_mask_t5=mask_t5,
                        image_meta_size=meta, style=torch.zeros(2, dtype=torch.long),
                        image_rotary_emb=rope)


@recipe("CogView3PlusTransformer2DModel", backward=True)
def cogview3plus():
    config = dict(patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
                  num_attention_heads=2, out_channels=4, text_embed_dim=24, time_embed_dim=16,
                  condition_dim=4, pos_embed_max_size=8, sample_size=8)
    sizes = torch.tensor([[64.0, 64.0]] * 2)
    return config, dict(hidden_states=randn(2, 4, 8, 8), encoder_hidden_states=randn(2, 6, 24),
                        timestep=timesteps(2), original_size=sizes, target_size=sizes,
                        crop_coords=torch.zeros(2, 2))


@recipe("CogView4Transformer2DModel", backward=True)
def cogview4():
    config = dict(patch_size=2, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=8,
                  num_attention_heads=2, text_embed_dim=24, time_embed_dim=16, condition_dim=4,
                  rope_axes_dim=(8, 8))
    sizes = torch.tensor([[64.0, 64.0]] * 2)
    return config, dict(hidden_states=randn(2, 4, 8, 8), encoder_hidden_states=randn(2, 6, 24),
                        timestep=torch.tensor([250.0, 800.0]), original_size=sizes,
                        target_size=sizes, crop_coords=torch.zeros(2, 2))


@recipe("GlmImageTransformer2DModel", backward=True)
def glm_image():
    config = dict(patch_size=2, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=8,
                  num_attention_heads=2, text_embed_dim=24, time_embed_dim=16, condition_dim=4,
                  prior_vq_quantizer_codebook_size=64)
    # one prior (VQ) token per latent patch; the second row is the unconditional branch
    drop = torch.zeros(2, 16, dtype=torch.bool)
    drop[1] = True
    return config, dict(hidden_states=randn(2, 4, 8, 8), encoder_hidden_states=randn(2, 6, 24),
                        prior_token_id=randint(64, 2, 16), prior_token_drop=drop,
                        timestep=torch.tensor([250.0, 800.0]),
                        target_size=torch.tensor([[64.0, 64.0]] * 2), crop_coords=torch.zeros(2, 2))


@recipe("PriorTransformer")
def prior():
    config = dict(num_attention_heads=2, attention_head_dim=8, num_layers=2, embedding_dim=16,
                  num_embeddings=6, additional_embeddings=4)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False
    return config, dict(hidden_states=randn(2, 16), timestep=timesteps(2),
                        proj_embedding=randn(2, 16), encoder_hidden_states=randn(2, 6, 16),
                        attention_mask=mask)


# --- Single-stream / unified-sequence transformers --------------------------------------------


@recipe("HiDreamImageTransformer2DModel", backward=True)
def hidream():
    # T5 and two Llama layers (one per block); a mixture of 2 routed experts in every block
    config = dict(patch_size=2, in_channels=4, out_channels=4, num_layers=1, num_single_layers=1,
                  attention_head_dim=8, num_attention_heads=4, caption_channels=[16, 8],
                  text_emb_dim=8, num_routed_experts=2, num_activated_experts=2,
                  axes_dims_rope=(4, 2, 2), max_resolution=(16, 16), llama_layers=[0, 1],
                  force_inference_output=True)
    return config, dict(hidden_states=randn(2, 4, 8, 8), timesteps=torch.tensor([250.0, 800.0]),
                        encoder_hidden_states_t5=randn(2, 6, 16),
                        encoder_hidden_states_llama3=randn(2, 2, 5, 8), pooled_embeds=randn(2, 8))


@recipe("HunyuanImageTransformer2DModel", backward=True)
def hunyuan_image():
    # Hunyuan-Image 2.1: MLLM prompt tokens plus ByT5 glyph tokens, both right-padded
    config = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                  num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=(1, 1),
                  text_embed_dim=24, text_embed_2_dim=8, rope_axes_dim=(8, 8))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    mask_2 = torch.ones(2, 4, dtype=torch.long)
    mask_2[0, 3:] = 0
    return config, dict(hidden_states=randn(2, 4, 4, 4), timestep=torch.tensor([250.0, 800.0]),
                        encoder_hidden_states=randn(2, 6, 24), encoder_attention_mask=mask,
                        encoder_hidden_states_2=randn(2, 4, 8), encoder_attention_mask_2=mask_2)


@recipe("ErnieImageTransformer2DModel", backward=True)
def ernie_image():
    config = dict(hidden_size=32, num_attention_heads=2, num_layers=2, ffn_hidden_size=64,
                  in_channels=8, out_channels=8, patch_size=1, text_in_dim=24,
                  rope_axes_dim=(8, 4, 4))
    # padded text batch: the second prompt has 4 real tokens of 6
    return config, dict(hidden_states=randn(2, 8, 4, 4), timestep=torch.tensor([250.0, 800.0]),
                        text_bth=randn(2, 6, 24), text_lens=torch.tensor([6, 4]))


@recipe("Ideogram4Transformer2DModel", backward=True)
def ideogram4():
    from diffusers.models.transformers.transformer_ideogram4 import (
        IMAGE_POSITION_OFFSET, LLM_TOKEN_INDICATOR, OUTPUT_IMAGE_INDICATOR)
    config = dict(in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=4,
                  intermediate_size=64, adaln_dim=16, llm_features_dim=24, rope_theta=10000,
                  mrope_section=(2, 1, 1))
    # one packed sequence per sample: 4 text tokens then a 4x4 image grid
    n_text, h, w = 4, 4, 4
    seq = n_text + h * w
    hidden_states = torch.zeros(2, seq, 16)
    hidden_states[:, n_text:] = randn(2, h * w, 16)
    encoder_hidden_states = torch.zeros(2, seq, 24)
    encoder_hidden_states[:, :n_text] = randn(2, n_text, 24)
    position_ids = torch.zeros(2, seq, 3, dtype=torch.long)
    position_ids[:, :n_text] = torch.arange(n_text)[:, None]
    position_ids[:, n_text:, 0] = IMAGE_POSITION_OFFSET
    position_ids[:, n_text:, 1] = torch.arange(h).repeat_interleave(w) + IMAGE_POSITION_OFFSET
    position_ids[:, n_text:, 2] = torch.arange(w).repeat(h) + IMAGE_POSITION_OFFSET
    indicator = torch.full((2, seq), OUTPUT_IMAGE_INDICATOR, dtype=torch.long)
    indicator[:, :n_text] = LLM_TOKEN_INDICATOR
    return config, dict(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                        timestep=torch.tensor([0.25, 0.8]), position_ids=position_ids,
                        segment_ids=torch.ones(2, seq, dtype=torch.long), indicator=indicator)


@recipe("Krea2Transformer2DModel", backward=True)
def krea2():
    # text features from 3 encoder layers, fused; GQA in both the text and the image blocks
    config = dict(in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=64, timestep_embed_dim=16,
                  text_hidden_dim=16, num_text_layers=3, text_num_attention_heads=2,
                  text_num_key_value_heads=1, text_intermediate_size=32,
                  num_layerwise_text_blocks=1, num_refiner_text_blocks=1, axes_dims_rope=(4, 2, 2))
    n_text, h, w = 5, 4, 4
    position_ids = torch.zeros(n_text + h * w, 3)
    position_ids[n_text:] = _grid_ids(h, w)
    mask = torch.ones(2, n_text, dtype=torch.bool)
    mask[1, 3:] = False
    return config, dict(hidden_states=randn(2, h * w, 16),
                        encoder_hidden_states=randn(2, n_text, 3, 16),
                        timestep=torch.tensor([0.25, 0.8]), position_ids=position_ids,
                        encoder_attention_mask=mask)


@recipe("Lumina2Transformer2DModel", backward=True)
def lumina2():
    config = dict(sample_size=8, patch_size=2, in_channels=4, hidden_size=32, num_layers=2,
                  num_refiner_layers=1, num_attention_heads=4, num_kv_heads=2, multiple_of=16,
                  axes_dim_rope=(4, 2, 2), axes_lens=(64, 32, 32), cap_feat_dim=24)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False
    return config, dict(hidden_states=randn(2, 4, 8, 8), timestep=torch.tensor([0.25, 0.8]),
                        encoder_hidden_states=randn(2, 6, 24), encoder_attention_mask=mask)


@recipe("LuminaNextDiT2DModel", backward=True)
def lumina_next():
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina
    config = dict(sample_size=8, patch_size=2, in_channels=4, hidden_size=32, num_layers=2,
                  num_attention_heads=4, num_kv_heads=2, multiple_of=16, learn_sigma=True,
                  cross_attention_dim=24)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    # the pipeline's complex RoPE table (head_dim 8), larger than the latent grid
    rope = get_2d_rotary_pos_embed_lumina(8, 16, 16)
    return config, dict(hidden_states=randn(2, 4, 8, 8), timestep=torch.tensor([0.25, 0.8]),
                        encoder_hidden_states=randn(2, 6, 24), encoder_mask=mask,
                        image_rotary_emb=rope, cross_attention_kwargs={})


@recipe("NucleusMoEImageTransformer2DModel", backward=True)
def nucleus_moe():
    # the first block dense, the second a mixture of 4 experts with a shared expert
    config = dict(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                  num_attention_heads=2, num_key_value_heads=1, joint_attention_dim=24,
                  axes_dims_rope=(8, 4, 4), dense_moe_strategy="leave_first_block_dense",
                  num_experts=4, moe_intermediate_dim=32, capacity_factors=2.0)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    return config, dict(hidden_states=randn(2, 16, 16), img_shapes=[(1, 4, 4)] * 2,
                        encoder_hidden_states=randn(2, 6, 24), encoder_hidden_states_mask=mask,
                        timestep=torch.tensor([0.25, 0.8]))


@recipe("QwenImageTransformer2DModel", backward=True, fast=True)
def qwen_image():
    config = dict(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                  num_attention_heads=2, joint_attention_dim=24, axes_dims_rope=(8, 4, 4))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 6, 24),
                        encoder_hidden_states_mask=mask, timestep=torch.tensor([0.25, 0.8]),
                        img_shapes=[(1, 4, 4)] * 2)


@recipe("QwenImage21Transformer2DModel", backward=True)
def qwen_image21():
    # text tokens then one vision slot per 2x2 target latents (4x4 latents: 4 slots)
    config = dict(patch_size=1, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=16,
                  num_attention_heads=2, context_in_dim=24, mlp_ratio=2, axes_dims_rope=(4, 6, 6))
    n_text, h, w = 6, 4, 4
    mask = torch.ones(2, n_text, dtype=torch.long)
    mask[1, 4:] = 0
    img_mask = torch.zeros(2, n_text + h * w // 4, dtype=torch.bool)
    img_mask[:, n_text:] = True
    return config, dict(hidden_states=randn(2, h * w, 4),
                        encoder_hidden_states=randn(2, n_text, 24),
                        encoder_hidden_states_mask=mask, timestep=torch.tensor([0.25, 0.8]),
                        img_shapes=[[(1, h, w)]] * 2, img_mask=img_mask)


@recipe("OmniGenTransformer2DModel", backward=True)
def omnigen():
    # a prompt with one input image: 8 text tokens, 4 input-image latent tokens inside them,
    # then the time token and the 16 output tokens
    head_dim = 8
    config = dict(in_channels=4, patch_size=2, hidden_size=32, num_attention_heads=4,
                  num_key_value_heads=4, intermediate_size=64, num_layers=2, pad_token_id=0,
                  vocab_size=100, time_step_dim=16,
                  rope_scaling=dict(long_factor=[1.0] * (head_dim // 2),
                                    short_factor=[1.0 + i / 4 for i in range(head_dim // 2)]))
    n_text, n_out = 8, 16
    seq = n_text + 1 + n_out
    mask = torch.tril(torch.ones(2, seq, seq))
    mask[:, n_text:, n_text:] = 1  # output image tokens attend to each other
    return config, dict(hidden_states=randn(2, 4, 8, 8), timestep=torch.tensor([0.25, 0.8]),
                        input_ids=randint(100, 2, n_text, low=1),
                        input_img_latents=[randn(1, 4, 4, 4), randn(1, 4, 4, 4)],
                        input_image_sizes={0: [[2, 6]], 1: [[2, 6]]}, attention_mask=mask,
                        position_ids=torch.arange(seq).repeat(2, 1))


@recipe("PRXTransformer2DModel", backward=True)
def prx():
    config = dict(in_channels=4, patch_size=2, context_in_dim=24, hidden_size=32, mlp_ratio=2.0,
                  num_heads=2, depth=2, axes_dim=[8, 8])
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False
    return config, dict(hidden_states=randn(2, 4, 8, 8), timestep=torch.tensor([0.25, 0.8]),
                        encoder_hidden_states=randn(2, 6, 24), attention_mask=mask)


@recipe("ZImageTransformer2DModel", backward=True)
def z_image():
    # lists of per-sample latents (C, F, H, W) and caption features of different lengths
    config = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=32, n_layers=2,
                  n_refiner_layers=1, n_heads=2, n_kv_heads=2, cap_feat_dim=24,
                  axes_dims=[8, 4, 4], axes_lens=[64, 16, 16])
    return config, dict(x=[randn(4, 1, 8, 8), randn(4, 1, 8, 8)], t=torch.tensor([0.25, 0.8]),
                        cap_feats=[randn(6, 24), randn(4, 24)])


@recipe("BriaFibo2Transformer2DModel", backward=True)
def bria_fibo2():
    # text bundles: one for the Perceiver (gist tokens), one per injection layer
    config = dict(in_channels=4, patch_size=2, dim=32, n_layers=2, n_refiner_layers=1, n_heads=2,
                  cap_feat_dim=24, injection_layer_ids=(1,), perceiver_num_layers=1,
                  min_num_gist_tokens=4, max_num_gist_tokens=8, gist_step=4, gist_min_text_len=4,
                  gist_max_text_len=16, axes_dims=(4, 6, 6), axes_lens=(16, 16, 16))
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[1, 5:] = False
    return config, dict(hidden_states=randn(2, 4, 8, 8), timestep=torch.tensor([0.25, 0.8]),
                        encoder_hidden_states=randn(2, 2, 12, 24), encoder_attention_mask=mask)


def _dreamlite_call(model, **inputs):
    # as the DreamLite U-Net does: its GQA-aware processor in every attention layer
    from diffusers.models.attention_processor import Attention
    from diffusers.models.unets.unet_dreamlite import DreamLiteAttnProcessor2_0
    for module in model.modules():
        if isinstance(module, Attention):
            module.set_processor(DreamLiteAttnProcessor2_0())
    return model(**inputs)


@recipe("DreamLiteTransformer2DModel", call=_dreamlite_call, backward=True)
def dreamlite():
    # the DreamLite U-Net's attention: GQA with RMS q/k norm, linear projections
    config = dict(num_attention_heads=4, attention_head_dim=8, in_channels=32, num_layers=1,
                  norm_num_groups=8, cross_attention_dim=24, use_linear_projection=True,
                  qk_norm="rms_norm", num_kv_heads=2, ff_mult=2)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    return config, dict(hidden_states=randn(2, 32, 8, 8), encoder_hidden_states=randn(2, 6, 24),
                        encoder_attention_mask=mask)


# --- Small pipeline-side models ---------------------------------------------------------------


@recipe("UniDiffuserModel", backward=True)
def unidiffuser():
    # UniDiffuser-v1: joint VAE-latent / CLIP-image / text denoiser with a data-type token
    config = dict(text_dim=24, clip_img_dim=16, num_text_tokens=6, num_attention_heads=2,
                  attention_head_dim=8, in_channels=4, out_channels=4, num_layers=2,
                  sample_size=8, patch_size=2, activation_fn="gelu", norm_type="layer_norm",
                  block_type="unidiffuser", use_data_type_embedding=True)
    return config, dict(latent_image_embeds=randn(2, 4, 8, 8), image_embeds=randn(2, 1, 16),
                        prompt_embeds=randn(2, 6, 24), timestep_img=timesteps(2),
                        timestep_text=timesteps(2), data_type=torch.tensor([1, 1]))


@recipe("UniDiffuserTextDecoder")
def unidiffuser_text_decoder():
    # the caption decoder: a GPT-2 fed the prefix (projected CLIP text latents) then the tokens
    config = dict(prefix_length=4, prefix_inner_dim=16, prefix_hidden_dim=8, vocab_size=100,
                  n_positions=32, n_embd=32, n_layer=2, n_head=2, n_inner=64,
                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    return config, dict(input_ids=randint(100, 2, 6), prefix_embeds=randn(2, 4, 16))


@recipe("AnimaTextConditioner", backward=True)
def anima_text_conditioner():
    # Qwen3 hidden states cross-attended from learned T5 token embeddings, padded to 8 tokens
    config = dict(source_dim=24, target_dim=16, model_dim=32, num_layers=2, num_attention_heads=4,
                  target_vocab_size=100, min_sequence_length=8)
    target_mask = torch.ones(2, 6, dtype=torch.long)
    target_mask[1, 4:] = 0
    source_mask = torch.ones(2, 7, dtype=torch.long)
    source_mask[1, 5:] = 0
    return config, dict(source_hidden_states=randn(2, 7, 24), target_input_ids=randint(100, 2, 6),
                        target_attention_mask=target_mask, source_attention_mask=source_mask)


@recipe("CLIPImageProjection")
def clip_image_projection():
    return dict(hidden_size=32), dict(x=randn(2, 1, 32))


@recipe("ReduxImageEncoder", backward=True)
def redux_image_encoder():
    # SigLIP patch features to Flux text-token space
    return dict(redux_dim=32, txt_in_features=48), dict(x=randn(2, 16, 32))


@recipe("Ideogram4PromptEnhancerHead")
def ideogram4_prompt_enhancer_head():
    return dict(hidden_size=32, vocab_size=128), dict(hidden_states=randn(2, 5, 32))
