"""More autoencoders: image, video and audio VAEs, VQ and tiny/consistency decoders beyond AutoencoderKL."""
import torch

from . import rand, randint, randn, recipe


def _mode_roundtrip(m, **kw):
    """encode -> posterior mode -> decode, as a pipeline's image-to-latent-to-image round trip."""
    return m.decode(m.encode(kw["sample"]).latent_dist.mode()).sample


# ---------------------------------------------------------------- image VAEs


@recipe("AsymmetricAutoencoderKL", backward=True)
def asymmetric_autoencoder_kl():
    config = dict(in_channels=3, out_channels=3, latent_channels=4,
                  down_block_types=("DownEncoderBlock2D",) * 2, down_block_out_channels=(16, 32),
                  layers_per_down_block=1,
                  up_block_types=("UpDecoderBlock2D",) * 2, up_block_out_channels=(16, 32),
                  layers_per_up_block=1, norm_num_groups=8, sample_size=16)
    sample = randn(2, 3, 16, 16)
    mask = (rand(2, 1, 16, 16) > 0.5).float()
    return config, dict(sample=sample, mask=mask, sample_posterior=False)


@recipe("AutoencoderDC", backward=True)
def autoencoder_dc():
    config = dict(in_channels=3, latent_channels=4, attention_head_dim=8,
                  encoder_block_types=("ResBlock", "EfficientViTBlock"),
                  decoder_block_types=("ResBlock", "EfficientViTBlock"),
                  encoder_block_out_channels=(16, 32), decoder_block_out_channels=(16, 32),
                  encoder_layers_per_block=(1, 1), decoder_layers_per_block=(1, 1),
                  encoder_qkv_multiscales=((), (5,)), decoder_qkv_multiscales=((), (5,)),
                  downsample_block_type="pixel_unshuffle", upsample_block_type="pixel_shuffle",
                  decoder_norm_types="rms_norm", decoder_act_fns="silu")
    return config, dict(sample=randn(2, 3, 16, 16))


@recipe("AutoencoderKLFlux2", backward=True)
def autoencoder_kl_flux2():
    config = dict(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(16, 32),
                  down_block_types=("DownEncoderBlock2D",) * 2,
                  up_block_types=("UpDecoderBlock2D",) * 2,
                  layers_per_block=1, norm_num_groups=8, sample_size=16, patch_size=(2, 2))
    return config, dict(sample=randn(2, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLHunyuanImage", backward=True)
def autoencoder_kl_hunyuan_image():
    # The encoder's and decoder's GroupNorms have 32 groups: widths are multiples of 32.
    config = dict(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(32, 64),
                  layers_per_block=1, spatial_compression_ratio=2, sample_size=16)
    return config, dict(sample=randn(1, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLKVAE", backward=True)
def autoencoder_kl_kvae():
    config = dict(in_channels=3, channels=32, num_enc_blocks=1, num_dec_blocks=1, z_channels=4,
                  double_z=True, ch_mult=(1, 2), sample_size=16)
    return config, dict(sample=randn(2, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLQwenImage", backward=True)
def autoencoder_kl_qwen_image():
    config = dict(base_dim=16, z_dim=4, dim_mult=[1, 2], num_res_blocks=1, temperal_downsample=[False],
                  latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    # An image is a one-frame video.
    return config, dict(sample=randn(1, 3, 1, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLQwenImage21", backward=True)
def autoencoder_kl_qwen_image21():
    # Residual down/up paths: the last stage keeps its width, as in the released [1, 2, 4, 8, 8].
    config = dict(base_dim=16, decoder_base_dim=16, z_dim=4, dim_mult=[1, 2, 2], num_res_blocks=1,
                  temperal_downsample=[False, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4,
                  in_channels=4, out_channels=4, scale_factor_temporal=2, scale_factor_spatial=4)
    return config, dict(sample=randn(1, 4, 1, 16, 16), sample_posterior=False)


@recipe("AutoencoderRAE", backward=True)
def autoencoder_rae():
    # The representation encoder (a DINOv2 with registers) is built from its config, heads of 64.
    config = dict(encoder_type="dinov2", encoder_hidden_size=64, encoder_patch_size=8,
                  encoder_num_hidden_layers=1, decoder_hidden_size=32, decoder_num_hidden_layers=1,
                  decoder_num_attention_heads=2, decoder_intermediate_size=64, patch_size=4,
                  encoder_input_size=32, image_size=16)
    return config, dict(sample=randn(1, 3, 16, 16))


@recipe("AutoencoderTiny", backward=True)
def autoencoder_tiny():
    config = dict(in_channels=3, out_channels=3, encoder_block_out_channels=(16, 16),
                  decoder_block_out_channels=(16, 16), num_encoder_blocks=(1, 1),
                  num_decoder_blocks=(1, 1), latent_channels=4)
    return config, dict(sample=randn(2, 3, 16, 16))


@recipe("ConsistencyDecoderVAE",
        call=lambda m, **kw: m.decode(m.encode(kw["sample"]).latent_dist.mode(),
                                      generator=torch.Generator().manual_seed(0),
                                      num_inference_steps=2).sample)
def consistency_decoder_vae():
    config = dict(latent_channels=4, encoder_block_out_channels=(16, 32), encoder_in_channels=3,
                  encoder_out_channels=4, encoder_down_block_types=("DownEncoderBlock2D",) * 2,
                  encoder_layers_per_block=1, encoder_norm_num_groups=8,
                  decoder_block_out_channels=(16, 32), decoder_layers_per_block=1,
                  decoder_norm_num_groups=8, decoder_add_attention=False,
                  decoder_down_block_types=("ResnetDownsampleBlock2D",) * 2,
                  decoder_up_block_types=("ResnetUpsampleBlock2D",) * 2, scaling_factor=1.0)
    return config, dict(sample=randn(1, 3, 16, 16))


@recipe("VQModel", backward=True)
def vq_model():
    config = dict(in_channels=3, out_channels=3, block_out_channels=(16, 32), norm_num_groups=8,
                  down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                  layers_per_block=1, latent_channels=4, num_vq_embeddings=32, sample_size=16)
    return config, dict(sample=randn(2, 3, 16, 16))


# ---------------------------------------------------------------- video VAEs


def _allegro(m, **kw):
    # Allegro encodes and decodes only through its tiles. Its temporal convolutions hold a
    # fixed Dropout(0.1), which would make the training-mode pass (backward) random: off.
    m.enable_tiling()
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.eval()
    return m(**kw)


@recipe("AutoencoderKLAllegro", backward=True, call=_allegro)
def autoencoder_kl_allegro():
    # One tile, 24 frames of sample_size^2 pixels (tiles overlap by 120 x 80): the smallest it accepts.
    config = dict(in_channels=3, out_channels=3, block_out_channels=(4, 4),
                  down_block_types=("AllegroDownBlock3D",) * 2, up_block_types=("AllegroUpBlock3D",) * 2,
                  temporal_downsample_blocks=(True, False), temporal_upsample_blocks=(False, True),
                  temporal_compression_ratio=2, latent_channels=4, layers_per_block=1,
                  norm_num_groups=2, sample_size=128)
    return config, dict(sample=randn(1, 3, 24, 128, 128), sample_posterior=False)


@recipe("AutoencoderKLCogVideoX", backward=True)
def autoencoder_kl_cogvideox():
    config = dict(in_channels=3, out_channels=3, block_out_channels=(8, 16),
                  down_block_types=("CogVideoXDownBlock3D",) * 2, up_block_types=("CogVideoXUpBlock3D",) * 2,
                  latent_channels=4, layers_per_block=1, norm_num_groups=4, temporal_compression_ratio=2)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLCosmos", backward=True)
def autoencoder_kl_cosmos():
    config = dict(in_channels=3, out_channels=3, latent_channels=4, encoder_block_out_channels=(8, 8),
                  decode_block_out_channels=(8, 8), attention_resolutions=(8,), resolution=16,
                  num_layers=1, patch_size=2, patch_type="haar", spatial_compression_ratio=4,
                  temporal_compression_ratio=2, latents_mean=None, latents_std=None)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLHunyuanImageRefiner", backward=True)
def autoencoder_kl_hunyuan_image_refiner():
    config = dict(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(16, 32),
                  layers_per_block=1, spatial_compression_ratio=2, temporal_compression_ratio=2)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLHunyuanVideo", backward=True)
def autoencoder_kl_hunyuan_video():
    # Temporal compression is 4 or 8 only; four stages give the 8x spatial, 4x temporal layout.
    config = dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 8, 16, 16),
                  down_block_types=("HunyuanVideoDownBlock3D",) * 4,
                  up_block_types=("HunyuanVideoUpBlock3D",) * 4, layers_per_block=1,
                  norm_num_groups=4, spatial_compression_ratio=8, temporal_compression_ratio=4,
                  mid_block_add_attention=True)
    return config, dict(sample=randn(1, 3, 5, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLHunyuanVideo15", backward=True)
def autoencoder_kl_hunyuan_video15():
    config = dict(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(16, 32),
                  layers_per_block=1, spatial_compression_ratio=2, temporal_compression_ratio=2)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLKVAEVideo", backward=True)
def autoencoder_kl_kvae_video():
    # GroupNorms of 32 groups: widths are multiples of 32.
    config = dict(ch=32, ch_mult=(1, 2), num_res_blocks=1, in_channels=3, out_ch=3, z_channels=4,
                  temporal_compress_times=2)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLLTXVideo", backward=True)
def autoencoder_kl_ltx_video():
    config = dict(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(8, 16),
                  decoder_block_out_channels=(8, 16), layers_per_block=(1, 1, 1),
                  decoder_layers_per_block=(1, 1, 1), spatio_temporal_scaling=(True, False),
                  decoder_spatio_temporal_scaling=(True, False), decoder_inject_noise=(False, False, False),
                  upsample_residual=(False, False), upsample_factor=(1, 1), timestep_conditioning=False,
                  patch_size=1, patch_size_t=1, encoder_causal=True, decoder_causal=False)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLLTX2Video", backward=True)
def autoencoder_kl_ltx2_video():
    config = dict(in_channels=3, out_channels=3, latent_channels=8, block_out_channels=(8, 16),
                  down_block_types=("LTX2VideoDownBlock3D",) * 2, decoder_block_out_channels=(8, 16),
                  layers_per_block=(1, 1, 1), decoder_layers_per_block=(1, 1, 1),
                  spatio_temporal_scaling=(True, True), decoder_spatio_temporal_scaling=(True, True),
                  decoder_inject_noise=(False, False, False), downsample_type=("spatial", "spatiotemporal"),
                  upsample_type=("spatiotemporal", "spatial"), upsample_residual=(True, True),
                  upsample_factor=(2, 2), timestep_conditioning=False, patch_size=1, patch_size_t=1,
                  encoder_causal=True, decoder_causal=False)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLMagvit", backward=True)
def autoencoder_kl_magvit():
    config = dict(in_channels=3, latent_channels=4, out_channels=3, block_out_channels=[8, 16],
                  down_block_types=["SpatialDownBlock3D", "SpatialTemporalDownBlock3D"],
                  up_block_types=["SpatialUpBlock3D", "SpatialTemporalUpBlock3D"],
                  layers_per_block=1, norm_num_groups=4, spatial_group_norm=True)
    return config, dict(sample=randn(1, 3, 5, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLMiniMaxH3", backward=True)
def autoencoder_kl_minimax_h3():
    config = dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16),
                  layers_per_block=1, spatial_downsample_factors=(2, 2), temporal_downsample_factors=(2, 2),
                  norm_num_groups=4, decoder_num_layers=1, decoder_num_attention_heads=2,
                  decoder_attention_head_dim=8, decoder_num_register_tokens=2, decoder_ffn_mult=2,
                  latents_mean=(0.0,) * 4, latents_std=(1.0,) * 4)
    return config, dict(sample=randn(1, 3, 22, 8, 8), sample_posterior=False)


@recipe("AutoencoderKLMochi", backward=True)
def autoencoder_kl_mochi():
    config = dict(in_channels=15, out_channels=3, latent_channels=4,
                  encoder_block_out_channels=(32, 32, 32, 32), decoder_block_out_channels=(32, 32, 32, 32),
                  layers_per_block=(1, 1, 1, 1, 1), latents_mean=(0.0,) * 4, latents_std=(1.0,) * 4)
    return config, dict(sample=randn(1, 3, 7, 16, 16), sample_posterior=False)


@recipe("AutoencoderKLTemporalDecoder", backward=True)
def autoencoder_kl_temporal_decoder():
    config = dict(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                  block_out_channels=(32, 64), layers_per_block=1, latent_channels=4, sample_size=16)
    # Frames stacked in the batch, as Stable Video Diffusion decodes them.
    return config, dict(sample=randn(3, 3, 16, 16), num_frames=3, sample_posterior=False)


@recipe("AutoencoderKLWan", backward=True, fast=True)
def autoencoder_kl_wan():
    config = dict(base_dim=16, z_dim=4, dim_mult=[1, 2], num_res_blocks=1, temperal_downsample=[True],
                  latents_mean=[0.0] * 4, latents_std=[1.0] * 4, scale_factor_temporal=2,
                  scale_factor_spatial=2)
    return config, dict(sample=randn(1, 3, 5, 16, 16), sample_posterior=False)


@recipe("AutoencoderVidTok", backward=True)
def autoencoder_vidtok():
    config = dict(in_channels=3, out_channels=3, ch=16, ch_mult=[1, 2], z_channels=4, double_z=True,
                  num_res_blocks=1, regularizer="kl", is_causal=True)
    return config, dict(sample=randn(1, 3, 5, 16, 16), sample_posterior=False)


@recipe("Kandinsky6SRVAE", backward=True)
def kandinsky6_sr_vae():
    config = dict(in_channels=3, out_channels=3, latent_channels=4, encoder_block_out_channels=(8, 16),
                  decoder_block_out_channels=(8, 16), layers_per_block=1, temporal_compression_ratio=2,
                  temporal_compression_start_level=1)
    return config, dict(sample=randn(1, 3, 3, 16, 16), sample_posterior=False)


# ---------------------------------------------------------------- audio VAEs and vocoders


@recipe("AutoencoderOobleck")
def autoencoder_oobleck():
    config = dict(encoder_hidden_size=8, downsampling_ratios=[2, 4], channel_multiples=[1, 2],
                  decoder_channels=8, decoder_input_channels=4, audio_channels=2)
    return config, dict(sample=randn(2, 2, 64), sample_posterior=False)


@recipe("AutoencoderKLKVAEAudio")
def autoencoder_kl_kvae_audio():
    config = dict(encoder_dim=8, encoder_rates=[2, 3], latent_dim=32, codebook_dim=8, decoder_dim=32,
                  decoder_rates=[3, 2], num_channels=1, attn_num_heads=2)
    return config, dict(sample=randn(2, 1, 60), sample_posterior=False)


@recipe("AutoencoderKLLTX2Audio")
def autoencoder_kl_ltx2_audio():
    config = dict(in_channels=2, output_channels=2, latent_channels=4, base_channels=16, ch_mult=(1, 2),
                  resolution=16, attn_resolutions=None, num_res_blocks=1, norm_type="pixel",
                  causality_axis="height", mid_block_add_attention=False, mel_bins=16, is_causal=True,
                  double_z=True)
    # A stereo mel spectrogram: (batch, channels, frames, mel bins).
    return config, dict(sample=randn(2, 2, 8, 16), sample_posterior=False)


@recipe("AutoencoderKLMiniMaxH3Audio")
def autoencoder_kl_minimax_h3_audio():
    config = dict(encoder_dim=4, encoder_rates=(2, 2), latent_dim=32, latent_channels=8,
                  num_attention_heads=2, decoder_dim=16, decoder_rates=(2, 2), decoder_kernel_sizes=(4, 4),
                  resblock_kernel_sizes=(3, 7), resblock_dilation_sizes=((1, 3), (1, 3)),
                  latents_mean=[0.0] * 8, latents_std=[1.0] * 8)
    return config, dict(sample=randn(2, 1, 32), sample_posterior=False)


@recipe("AutoencoderSAME")
def autoencoder_same():
    config = dict(audio_channels=2, patch_size=4, encoder_channels=16, encoder_c_mults=[1, 2],
                  encoder_strides=[2, 2], encoder_transformer_depths=[1, 1], latent_dim=8,
                  use_differential_attention=True, dim_heads=8, ff_mult=2)
    return config, dict(sample=randn(2, 2, 64))


@recipe("LongCatAudioDiTVae")
def longcat_audio_dit_vae():
    config = dict(in_channels=1, channels=8, c_mults=[1, 2], strides=[2, 2], latent_dim=4,
                  encoder_latent_dim=8, downsampling_ratio=4)
    return config, dict(sample=randn(2, 1, 32), sample_posterior=False)


@recipe("MMAudioVAE")
def mmaudio_vae():
    config = dict(mel_bins=16, latent_channels=4, hidden_channels=16, channel_multipliers=(1, 2),
                  layers_per_block=1, sample_rate=16000, n_fft=64, hop_length=16)
    # A mono waveform in [-1, 1].
    return config, dict(sample=rand(2, 256) * 2 - 1, sample_posterior=False)


@recipe("MMAudioVocoder")
def mmaudio_vocoder():
    config = dict(num_mels=16, upsample_initial_channel=32, upsample_rates=(4, 2),
                  upsample_kernel_sizes=(8, 4), resblock_kernel_sizes=(3, 5),
                  resblock_dilation_sizes=((1, 3), (1, 3)))
    return config, dict(mel=randn(2, 16, 8))


@recipe("Cosmos3AVAEAudioTokenizer")
def cosmos3_avae_audio_tokenizer():
    config = dict(sampling_rate=16, hop_size=4, input_channels=1, stereo=True, normalize_volume=True,
                  enc_dim=8, enc_num_blocks=1, enc_n_fft=8, enc_hop_length=2, enc_latent_dim=8,
                  enc_c_mults=(1,), enc_strides=(2,), vocoder_input_dim=4, dec_dim=8, dec_c_mults=(1, 2),
                  dec_strides=(2, 2), dec_out_channels=2)
    return config, dict(sample=randn(2, 2, 32), sample_posterior=False)


# ---------------------------------------------------------------- other modalities


@recipe("RFD4ProteinaAutoencoder")
def rfd4_proteina_autoencoder():
    n_res, n_types, tokens = 8, 3, 6
    g = torch.Generator().manual_seed(3)
    atom37_mask = (torch.rand(n_res, 37, generator=g) > 0.3)
    atom37_mask[:, 1] = True
    allowed = torch.ones(n_types, n_res, dtype=torch.bool)
    allowed[0, n_res // 2:] = False
    config = dict(atom37_mask=atom37_mask.tolist(), allowed_residue_types=allowed.tolist(), latent_dim=8,
                  n_residue_types=n_res, num_token_types=n_types, nlayers=1, token_dim=32, nheads=2,
                  dim_cond=16, pair_repr_dim=16, token_type_emb_dim=8)
    padding = torch.ones(2, tokens, dtype=torch.bool)
    padding[1, -2:] = False
    conditioning = dict(is_in_context_conditioning=torch.zeros(2, tokens, dtype=torch.bool),
                        supports_local_latent=torch.ones(2, tokens, dtype=torch.bool),
                        condition_sequence_1_residue=torch.tensor([[0, 3, 0, 0, 5, 0], [1, 0, 0, 2, 0, 0]]))
    return config, dict(z_latent=randn(2, tokens, 8), ca_coors_nm=randn(2, tokens, 3),
                        padding_mask=padding, token_type=randint(n_types, 2, tokens),
                        conditioning=conditioning)
