"""VAEs and other autoencoders."""
from . import randn, recipe


@recipe("AutoencoderKL", backward=True, fast=True)
def autoencoder_kl():
    config = dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64),
                  layers_per_block=1, norm_num_groups=8,
                  down_block_types=("DownEncoderBlock2D",) * 2,
                  up_block_types=("UpDecoderBlock2D",) * 2)
    return config, dict(sample=randn(2, 3, 32, 32))
