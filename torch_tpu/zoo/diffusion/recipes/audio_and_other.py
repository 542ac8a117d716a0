"""Audio (Stable Audio, AudioLDM2, ACE-Step, LongCat, MiniMax Music, spectrogram) and protein models."""
import torch

from . import rand, randint, randn, recipe


def _lengths_mask(lengths, total):
    """Bool padding mask: True for the first ``lengths[b]`` positions of each row."""
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]


# --------------------------------------------------------------------------- Stable Audio

@recipe("StableAudioDiTModel", backward=True, fast=True)
def stable_audio_dit():
    from diffusers.models.embeddings import get_1d_rotary_pos_embed
    config = dict(sample_size=16, in_channels=8, num_layers=2, attention_head_dim=16,
                  num_attention_heads=4, num_key_value_attention_heads=2, out_channels=8,
                  cross_attention_dim=32, time_proj_dim=16, global_states_input_dim=32,
                  cross_attention_input_dim=16)
    length, num_global = 16, 1
    # As the pipeline builds it: over the latent frames plus the prepended global token.
    rotary = get_1d_rotary_pos_embed(16 // 2, length + num_global, use_real=True,
                                     repeat_interleave_real=False)
    return config, dict(hidden_states=randn(2, 8, length), timestep=rand(2) * 80,
                        encoder_hidden_states=randn(2, 7, 16),
                        global_hidden_states=randn(2, num_global, 32), rotary_embedding=rotary)


@recipe("StableAudioProjectionModel")
def stable_audio_projection():
    config = dict(text_encoder_dim=16, conditioning_dim=32, min_value=0, max_value=512)
    return config, dict(text_hidden_states=randn(2, 6, 16), start_seconds=torch.tensor([0.0, 5.0]),
                        end_seconds=torch.tensor([10.0, 47.0]))


@recipe("StableAudio3DiTModel", backward=True)
def stable_audio3_dit():
    config = dict(io_channels=8, patch_size=1, embed_dim=32, depth=2, num_heads=2,
                  cond_token_dim=16, global_cond_dim=16, local_add_cond_dim=9,
                  timestep_features_dim=16, ff_mult=2.0, num_memory_tokens=4)
    return config, dict(hidden_states=randn(2, 8, 16), timestep=rand(2),
                        encoder_hidden_states=randn(2, 6, 16), global_hidden_states=randn(2, 16),
                        encoder_attention_mask=_lengths_mask([6, 4], 6),
                        local_add_cond=randn(2, 9, 16))


@recipe("StableAudio3DurationEmbedder")
def stable_audio3_duration():
    config = dict(output_dim=32, fourier_dim=16)
    return config, dict(seconds=torch.tensor([12.5, 300.0]))


# --------------------------------------------------------------------------- AudioLDM2

@recipe("AudioLDM2ProjectionModel")
def audioldm2_projection():
    config = dict(text_encoder_dim=16, text_encoder_1_dim=24, langauge_model_dim=32,
                  use_learned_position_embedding=True, max_seq_length=6)
    return config, dict(hidden_states=randn(2, 1, 16),
                        hidden_states_1=randn(2, 6, 24),
                        attention_mask=torch.ones(2, 1, dtype=torch.long),
                        attention_mask_1=_lengths_mask([6, 4], 6).long())


# --------------------------------------------------------------------------- ACE-Step 1.5

_ACE = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, sliding_window=2)


@recipe("AceStepTransformer1DModel", backward=True)
def ace_step_transformer():
    # in_channels = context (src latents + chunk mask, 16) + noisy latents (8); an odd length
    # takes the padding path before the stride-2 patchify.
    config = dict(_ACE, num_hidden_layers=2, in_channels=24, audio_acoustic_hidden_dim=8,
                  patch_size=2, encoder_hidden_size=24)
    t = rand(2)
    return config, dict(hidden_states=randn(2, 15, 8), timestep=t, timestep_r=t * 0.5,
                        encoder_hidden_states=randn(2, 6, 24), context_latents=randn(2, 15, 16))


@recipe("AceStepConditionEncoder", backward=True)
def ace_step_condition_encoder():
    config = dict(_ACE, text_hidden_dim=16, timbre_hidden_dim=8, num_lyric_encoder_hidden_layers=2,
                  num_timbre_encoder_hidden_layers=2)
    # Three reference clips: one for batch row 0, two for row 1.
    return config, dict(text_hidden_states=randn(2, 5, 16),
                        text_attention_mask=_lengths_mask([5, 3], 5),
                        lyric_hidden_states=randn(2, 7, 16),
                        lyric_attention_mask=_lengths_mask([7, 4], 7),
                        refer_audio_acoustic_hidden_states_packed=randn(3, 6, 8),
                        refer_audio_order_mask=torch.tensor([0, 1, 1]))


@recipe("AceStepAudioTokenizer", call=lambda m, **kw: m.tokenize(**kw))
def ace_step_audio_tokenizer():
    config = dict(_ACE, audio_acoustic_hidden_dim=8, pool_window_size=5, fsq_dim=32,
                  fsq_input_levels=[8, 5, 5, 5], num_attention_pooler_hidden_layers=2)
    # 13 frames: padded to 15 with the silence latent, pooled to 3 tokens.
    return config, dict(hidden_states=randn(2, 13, 8), silence_latent=randn(1, 10, 8))


@recipe("AceStepAudioTokenDetokenizer")
def ace_step_audio_detokenizer():
    config = dict(_ACE, audio_acoustic_hidden_dim=8, pool_window_size=5,
                  num_attention_pooler_hidden_layers=2)
    return config, dict(hidden_states=randn(2, 3, 32))


# --------------------------------------------------------------------------- LongCat-AudioDiT

@recipe("LongCatAudioDiTTransformer", backward=True)
def longcat_audio_dit():
    config = dict(dit_dim=32, dit_depth=2, dit_heads=4, dit_text_dim=16, latent_dim=8)
    return config, dict(hidden_states=randn(2, 12, 8), encoder_hidden_states=randn(2, 6, 16),
                        encoder_attention_mask=_lengths_mask([6, 4], 6), timestep=rand(2),
                        attention_mask=_lengths_mask([12, 9], 12), latent_cond=randn(2, 12, 8))


# --------------------------------------------------------------------------- MiniMax Music 3

@recipe("MiniMaxMusic3Transformer1DModel", backward=True)
def minimax_music3_transformer():
    config = dict(in_channels=8, condition_dim=16, num_layers=2, num_attention_heads=2,
                  attention_head_dim=16, ff_inner_dim=64, rotary_dim=8, fourier_embedding_dim=16)
    return config, dict(hidden_states=randn(2, 8, 12), timestep=rand(2),
                        encoder_hidden_states=randn(2, 12, 16))


@recipe("MiniMaxMusic3ConditionEncoder")
def minimax_music3_condition_encoder():
    config = dict(condition_hidden_dim=16, num_condition_layers=3, out_dim=32)
    # 5 language-model frames resampled to int(5 * 44100/24000 * 960/512) = 17 latent frames.
    return config, dict(hidden_states=randn(2, 5, 3 * 16))


@recipe("MiniMaxMusic3RVQDepthDecoder")
def minimax_music3_depth_decoder():
    config = dict(hidden_size=32, num_layers=2, num_attention_heads=4, intermediate_size=64,
                  audio_vocab_size=16, num_codebooks=4, max_position_embeddings=8)
    return config, dict(inputs_embeds=randn(2, 4, 32))


@recipe("MiniMaxMusic3Vocoder", backward=True)
def minimax_music3_vocoder():
    config = dict(latent_channels=8, decoder_input_dim=16, decoder_hidden_dim=32,
                  upsampling_ratios=(2, 2))
    return config, dict(latents=randn(2, 8, 6))


# --------------------------------------------------------------------------- spectrogram diffusion

@recipe("T5FilmDecoder", backward=True)
def t5_film_decoder():
    config = dict(input_dims=16, targets_length=16, d_model=32, num_layers=2, num_heads=4, d_kv=8,
                  d_ff=64, dropout_rate=0.0)
    # Two encoders (note tokens, continuous context), each with its padding mask.
    encodings = [(randn(2, 6, 32), _lengths_mask([6, 4], 6)),
                 (randn(2, 5, 32), _lengths_mask([5, 5], 5))]
    return config, dict(encodings_and_masks=encodings, decoder_input_tokens=randn(2, 16, 16),
                        decoder_noise_time=rand(2))


# --------------------------------------------------------------------------- RFD4-Proteina

@recipe("RFD4ProteinaTransformer", backward=True)
def rfd4_proteina():
    config = dict(nlayers=2, token_dim=32, nheads=4, dim_cond=16, pair_repr_dim=16, latent_dim=8,
                  token_type_emb_dim=8, cath_emb_dim=4, t_emb_dim=16, seq_sep_dim=8,
                  xt_pair_dist_dim=8, update_pair_repr_every_n=1, tri_mult_c=8,
                  num_sequence_classes=21, recycle_conditioning_dim=2,
                  feats_seq=("xt_bb_ca", "xt_local_latents", "token_type", "rasa_binned",
                             "secondary_structure", "chain_centroid_xyz", "sequence_probabilities"),
                  feats_cond_seq=("time_emb_bb_ca", "time_emb_local_latents", "cath_code",
                                  "recycle_remaining"),
                  feats_pair_repr=("xt_bb_ca_pair_dists", "bond_mask", "bond_order",
                                   "molecule_idx_pair", "token_bond_path_length"),
                  feats_pair_cond=("time_emb_bb_ca", "time_emb_local_latents"))
    b, n = 2, 6
    cath = torch.stack([randint(5, b, n, low=-1), randint(43, b, n, low=-1),
                        randint(1472, b, n, low=-1)], dim=-1)
    conditioning = {
        "is_in_context_conditioning": _lengths_mask([1, 0], n),
        "supports_local_latent": rand(b, n) > 0.2,
        "condition_rasa-binned_1_atom": (rand(b, n, 37) > 0.5).float(),
        "condition_secondary-structure_1_residue": randint(4, b, n),
        "condition_ChainCentroid_1_atom": randn(b, n, 3),
        "condition_sequence-probability-ALA_1_residue": rand(b, n),
        "condition_cath-label_1_residue": cath,
        "molecule_iid": randint(2, b, n),
        "bond_mask": rand(b, n, n) > 0.7,
        "bond_order": randint(5, b, n, n),
        "token_bond_path_length": randint(8, b, n, n),
    }
    return config, dict(bb_ca=randn(b, n, 3), local_latents=randn(b, n, 8), bb_ca_time=rand(b),
                        local_latents_time=rand(b), padding_mask=_lengths_mask([6, 5], n),
                        token_type=randint(7, b, n), atom37_mask=rand(b, n, 37) > 0.3,
                        conditioning=conditioning, recycle_depth=2)
