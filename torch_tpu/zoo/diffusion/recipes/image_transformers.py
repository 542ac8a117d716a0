"""Image diffusion transformers (DiT, PixArt, SD3, Flux, ...)."""
import torch

from . import rand, randn, recipe


@recipe("FluxTransformer2DModel", backward=True, fast=True)
def flux():
    config = dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                  pooled_projection_dim=32, axes_dims_rope=(4, 4, 8))
    return config, dict(hidden_states=randn(2, 16, 16), encoder_hidden_states=randn(2, 5, 32),
                        pooled_projections=randn(2, 32), img_ids=randn(16, 3),
                        txt_ids=randn(5, 3), timestep=rand(2))


@recipe("SD3Transformer2DModel", backward=True, fast=True)
def sd3():
    config = dict(sample_size=16, patch_size=2, in_channels=4, num_layers=2,
                  attention_head_dim=8, num_attention_heads=4, joint_attention_dim=32,
                  caption_projection_dim=32, pooled_projection_dim=16, out_channels=4)
    return config, dict(hidden_states=randn(2, 4, 16, 16), encoder_hidden_states=randn(2, 6, 32),
                        pooled_projections=randn(2, 16),
                        timestep=torch.tensor([10, 700]))
