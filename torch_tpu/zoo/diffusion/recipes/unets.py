"""UNets: 1-D, 2-D, text-conditioned 2-D, 3-D and their relatives."""
from . import randn, recipe, timesteps


@recipe("UNet2DModel", backward=True, fast=True)
def unet_2d():
    config = dict(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                  block_out_channels=(32, 64), norm_num_groups=8, attention_head_dim=8,
                  down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                  up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    return config, dict(sample=randn(2, 3, 16, 16), timestep=timesteps(2))


@recipe("UNet2DConditionModel", backward=True, fast=True)
def unet_2d_condition():
    config = dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                  block_out_channels=(32, 64), norm_num_groups=8, cross_attention_dim=32,
                  attention_head_dim=8,
                  down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                  up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    return config, dict(sample=randn(2, 4, 16, 16), timestep=timesteps(2),
                        encoder_hidden_states=randn(2, 7, 32))
