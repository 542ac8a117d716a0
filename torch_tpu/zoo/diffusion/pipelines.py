"""Diffusers pipelines end to end on ``tpu`` against the CPU.

    python -m torch_tpu.zoo.diffusion.pipelines                    # every pipeline
    python -m torch_tpu.zoo.diffusion.pipelines --pipelines ddpm,sd -v
    python -m torch_tpu.zoo.diffusion.pipelines --markdown pipelines.md

Each pipeline is built from tiny components with seeded random weights
(no hub access: the tokenizers are built from a few-letter vocabulary in
memory), run a few denoising steps with every component on the CPU, then
copied, moved with ``pipe.to("tpu")`` and run again with the same seeded CPU
generator (Diffusers draws its noise on the generator's device and moves it).
The images / frames / audio are compared with the zoo's tolerance
(``max|tpu - cpu| <= 1e-3 * max(max|cpu|, 1e-2)``), and so are the latents
after every step where the pipeline has ``callback_on_step_end`` (an image
clamped to [0, 1] can hide a difference; the latents show where it starts).

Statuses: ``match``, ``mismatch`` (with the max difference), ``crash`` (the
tpu run raised, died or hung: the message is kept) and ``skip`` (the CPU
itself could not build or run the pipeline). The ops that fell back to the
CPU during the tpu run are counted per pipeline.

Tests import ``run_pipeline(name) -> dict``; ``PIPELINES`` maps each name to
its builder, which returns ``(pipeline, call kwargs)`` on the CPU.
"""
import argparse
import copy
import json
import os
import string
import sys
import time

from ..harness import _delta, _fallbacks, _short, _tensors, _to_tpu, compare
from ..settings import RTOL_SCALE, SCALE_FLOOR, SEED

TIMEOUT = 600  # seconds without a result from one pipeline = hung
STEPS = 2

PIPELINES = {}   # name -> builder() -> (pipeline, call kwargs)
CLASSES = {}     # name -> Diffusers pipeline class name
SLOW = set()     # the names too slow for the default test run


def pipeline(name, cls, slow=False):
    def register(fn):
        PIPELINES[name] = fn
        CLASSES[name] = cls
        if slow:
            SLOW.add(name)
        return fn
    return register


# ---------------------------------------------------------------- components

_LETTERS = string.ascii_lowercase
PROMPT = "a cat on a mat"


def clip_tokenizer(max_length=77):
    """A CLIPTokenizer over single letters (no merges): ids 0 = start, 1 =
    end (also padding), then the letters, then the word-final letters."""
    from transformers import CLIPTokenizer
    toks = ["<|startoftext|>", "<|endoftext|>"] + list(_LETTERS) + [c + "</w>" for c in _LETTERS]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(toks)}, merges=[],
                         model_max_length=max_length)


def t5_tokenizer(max_length=32):
    """A T5Tokenizer (Unigram) over single letters: 0 = pad, 1 = </s>, 2 = unk."""
    from transformers import T5Tokenizer
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + \
        [(c, -1.0) for c in _LETTERS] + [("\u2581" + c, -1.0) for c in _LETTERS] + \
        [("\u2581", -2.0)]
    return T5Tokenizer(vocab=vocab, extra_ids=0, model_max_length=max_length)


def roberta_tokenizer(max_length=32):
    """A byte-level RobertaTokenizer without merges (one token per byte):
    0 = <s>, 1 = <pad>, 2 = </s>."""
    from transformers import RobertaTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    toks = ["<s>", "<pad>", "</s>", "<unk>"] + sorted(set(bytes_to_unicode().values())) + ["<mask>"]
    return RobertaTokenizer(vocab={t: i for i, t in enumerate(toks)}, merges=[],
                            model_max_length=max_length)


def clip_config(hidden=32, projection=32, layers=2):
    from transformers import CLIPTextConfig
    # bos/eos/pad match clip_tokenizer; eos != 2 so the pooled output is taken
    # at the first end token
    return CLIPTextConfig(bos_token_id=0, eos_token_id=1, pad_token_id=1, vocab_size=64,
                          hidden_size=hidden, intermediate_size=37, num_attention_heads=4,
                          num_hidden_layers=layers, projection_dim=projection,
                          max_position_embeddings=77, hidden_act="gelu")


def t5_encoder(d_model=32, umt5=False):
    from transformers import T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel
    cfg = dict(vocab_size=64, d_model=d_model, d_ff=37, d_kv=8, num_heads=4, num_layers=2,
               relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1,
               decoder_start_token_id=0)
    if umt5:
        return UMT5EncoderModel(UMT5Config(**cfg))
    return T5EncoderModel(T5Config(**cfg))


def sd_vae(latent_channels=4, **kw):
    from diffusers import AutoencoderKL
    cfg = dict(block_out_channels=(8, 16), in_channels=3, out_channels=3,
               down_block_types=("DownEncoderBlock2D",) * 2,
               up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=latent_channels,
               norm_num_groups=4, layers_per_block=1, sample_size=32)
    cfg.update(kw)
    return AutoencoderKL(**cfg)


def sd_unet(**kw):
    from diffusers import UNet2DConditionModel
    cfg = dict(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4,
               out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
               up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
               norm_num_groups=4, attention_head_dim=4)
    cfg.update(kw)
    return UNet2DConditionModel(**cfg)


def sd_scheduler():
    from diffusers import DDIMScheduler
    return DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                         clip_sample=False, set_alpha_to_one=False)


def flow_vae(latent_channels):
    """An SD3/Flux-style VAE: no quant convs, a shift and a scale."""
    return sd_vae(latent_channels=latent_channels, use_quant_conv=False,
                  use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035)


def _fan_in_init(module):
    """Every weight redrawn as N(0, 1 / fan_in) (seeded)."""
    import torch
    g = torch.Generator().manual_seed(SEED + 5)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / max(p[0].numel(), 1) ** 0.5)


def _image(shape):
    import torch
    return torch.rand(*shape, generator=torch.Generator().manual_seed(SEED + 3))


def _sd_components():
    from transformers import CLIPTextModel
    return dict(unet=sd_unet(), scheduler=sd_scheduler(), vae=sd_vae(),
                text_encoder=CLIPTextModel(clip_config()), tokenizer=clip_tokenizer(),
                safety_checker=None, feature_extractor=None, requires_safety_checker=False)


# ------------------------------------------------------------------ builders

@pipeline("ddpm", "DDPMPipeline")
def build_ddpm():
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel
    unet = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), norm_num_groups=8, attention_head_dim=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    pipe = DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=1000))
    return pipe, dict(batch_size=2, num_inference_steps=STEPS, output_type="np")


@pipeline("ddim", "DDIMPipeline")
def build_ddim():
    from diffusers import DDIMPipeline, DDIMScheduler, UNet2DModel
    unet = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), norm_num_groups=8, attention_head_dim=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    pipe = DDIMPipeline(unet=unet, scheduler=DDIMScheduler(num_train_timesteps=1000))
    # eta > 0: the step also draws noise from the generator
    return pipe, dict(batch_size=2, num_inference_steps=STEPS, eta=0.5, output_type="np")


@pipeline("sd", "StableDiffusionPipeline")
def build_sd():
    from diffusers import StableDiffusionPipeline
    pipe = StableDiffusionPipeline(**_sd_components())
    return pipe, dict(prompt=PROMPT, negative_prompt="blurry", height=32, width=32,
                      num_inference_steps=STEPS, guidance_scale=6.0, output_type="pt")


@pipeline("sd-img2img", "StableDiffusionImg2ImgPipeline")
def build_sd_img2img():
    from diffusers import StableDiffusionImg2ImgPipeline
    pipe = StableDiffusionImg2ImgPipeline(**_sd_components())
    return pipe, dict(prompt=PROMPT, image=_image((1, 3, 32, 32)), strength=0.75,
                      num_inference_steps=3, guidance_scale=6.0, output_type="pt")


@pipeline("sd3", "StableDiffusion3Pipeline")
def build_sd3():
    from diffusers import (FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel,
                           StableDiffusion3Pipeline)
    from transformers import CLIPTextModelWithProjection
    transformer = SD3Transformer2DModel(sample_size=16, patch_size=1, in_channels=4, num_layers=1,
                                        attention_head_dim=8, num_attention_heads=4,
                                        caption_projection_dim=32, joint_attention_dim=32,
                                        pooled_projection_dim=64, out_channels=4)
    pipe = StableDiffusion3Pipeline(
        transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=flow_vae(4),
        text_encoder=CLIPTextModelWithProjection(clip_config()), tokenizer=clip_tokenizer(),
        text_encoder_2=CLIPTextModelWithProjection(clip_config()), tokenizer_2=clip_tokenizer(),
        text_encoder_3=t5_encoder(32), tokenizer_3=t5_tokenizer())
    return pipe, dict(prompt=PROMPT, height=32, width=32, num_inference_steps=STEPS,
                      guidance_scale=5.0, max_sequence_length=16, output_type="pt")


@pipeline("flux", "FluxPipeline")
def build_flux():
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextModel
    transformer = FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1,
                                         num_single_layers=1, attention_head_dim=16,
                                         num_attention_heads=2, joint_attention_dim=32,
                                         pooled_projection_dim=32, axes_dims_rope=(4, 4, 8))
    pipe = FluxPipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(),
                        vae=flow_vae(4), text_encoder=CLIPTextModel(clip_config()),
                        tokenizer=clip_tokenizer(), text_encoder_2=t5_encoder(32),
                        tokenizer_2=t5_tokenizer())
    return pipe, dict(prompt=PROMPT, height=32, width=32, num_inference_steps=STEPS,
                      guidance_scale=3.5, max_sequence_length=16, output_type="pt")


@pipeline("wan", "WanPipeline")
def build_wan():
    from diffusers import (AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline,
                           WanTransformer3DModel)
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    transformer = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2,
                                        attention_head_dim=12, in_channels=16, out_channels=16,
                                        text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2,
                                        cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                        rope_max_seq_len=32)
    pipe = WanPipeline(tokenizer=t5_tokenizer(), text_encoder=t5_encoder(32, umt5=True),
                       transformer=transformer, vae=vae,
                       scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0))
    return pipe, dict(prompt=PROMPT, negative_prompt="blurry", height=16, width=16,
                      num_frames=5, num_inference_steps=STEPS, guidance_scale=6.0,
                      max_sequence_length=16, output_type="pt")


@pipeline("sd-controlnet", "StableDiffusionControlNetPipeline")
def build_sd_controlnet():
    from diffusers import ControlNetModel, StableDiffusionControlNetPipeline
    controlnet = ControlNetModel(block_out_channels=(8, 16), layers_per_block=1, in_channels=4,
                                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                 cross_attention_dim=32, norm_num_groups=4, attention_head_dim=4,
                                 conditioning_embedding_out_channels=(8, 8))
    pipe = StableDiffusionControlNetPipeline(controlnet=controlnet, **_sd_components())
    return pipe, dict(prompt=PROMPT, image=_image((1, 3, 32, 32)), height=32, width=32,
                      num_inference_steps=STEPS, guidance_scale=6.0, output_type="pt")


@pipeline("sdxl", "StableDiffusionXLPipeline")
def build_sdxl():
    from diffusers import StableDiffusionXLPipeline
    from transformers import CLIPTextModel, CLIPTextModelWithProjection
    # cross attention = 32 + 32 (the two encoders' hidden states concatenated);
    # the added time embedding takes the pooled 32 + 6 micro-conditions * 8
    unet = sd_unet(cross_attention_dim=64, addition_embed_type="text_time",
                   addition_time_embed_dim=8, projection_class_embeddings_input_dim=80,
                   transformer_layers_per_block=(1, 2), attention_head_dim=(2, 4),
                   use_linear_projection=True)
    pipe = StableDiffusionXLPipeline(
        unet=unet, scheduler=sd_scheduler(), vae=sd_vae(),
        text_encoder=CLIPTextModel(clip_config()), tokenizer=clip_tokenizer(),
        text_encoder_2=CLIPTextModelWithProjection(clip_config()), tokenizer_2=clip_tokenizer(),
        force_zeros_for_empty_prompt=True)
    return pipe, dict(prompt=PROMPT, height=32, width=32, num_inference_steps=STEPS,
                      guidance_scale=5.0, output_type="pt")


@pipeline("pixart-sigma", "PixArtSigmaPipeline")
def build_pixart_sigma():
    from diffusers import DDIMScheduler, PixArtSigmaPipeline, PixArtTransformer2DModel
    transformer = PixArtTransformer2DModel(sample_size=8, num_layers=2, patch_size=2,
                                           attention_head_dim=8, num_attention_heads=3,
                                           caption_channels=32, in_channels=4,
                                           cross_attention_dim=24, out_channels=8,
                                           attention_bias=True, activation_fn="gelu-approximate",
                                           num_embeds_ada_norm=1000, norm_type="ada_norm_single",
                                           norm_elementwise_affine=False, norm_eps=1e-6)
    pipe = PixArtSigmaPipeline(tokenizer=t5_tokenizer(), text_encoder=t5_encoder(32),
                               transformer=transformer, vae=sd_vae(),
                               scheduler=DDIMScheduler())
    return pipe, dict(prompt=PROMPT, height=16, width=16, num_inference_steps=STEPS,
                      guidance_scale=4.5, use_resolution_binning=False, clean_caption=False,
                      max_sequence_length=16,
                      output_type="pt")


@pipeline("animatediff", "AnimateDiffPipeline")
def build_animatediff():
    from diffusers import AnimateDiffPipeline, MotionAdapter
    from transformers import CLIPTextModel
    unet = sd_unet(block_out_channels=(8, 8), sample_size=8, norm_num_groups=2,
                   down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                   up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    adapter = MotionAdapter(block_out_channels=(8, 8), motion_layers_per_block=1,
                            motion_norm_num_groups=2, motion_num_attention_heads=2)
    pipe = AnimateDiffPipeline(unet=unet, motion_adapter=adapter, scheduler=sd_scheduler(),
                               vae=sd_vae(block_out_channels=(8, 8), norm_num_groups=2),
                               text_encoder=CLIPTextModel(clip_config()),
                               tokenizer=clip_tokenizer(), feature_extractor=None,
                               image_encoder=None)
    return pipe, dict(prompt=PROMPT, negative_prompt="blurry", num_frames=4, height=16, width=16,
                      num_inference_steps=STEPS, guidance_scale=7.5, output_type="pt")


@pipeline("audioldm", "AudioLDMPipeline")
def build_audioldm():
    from diffusers import AudioLDMPipeline
    from transformers import (ClapTextConfig, ClapTextModelWithProjection, SpeechT5HifiGan,
                              SpeechT5HifiGanConfig)
    unet = sd_unet(block_out_channels=(8, 16), norm_num_groups=8, sample_size=32,
                   cross_attention_dim=(8, 16), class_embed_type="simple_projection",
                   projection_class_embeddings_input_dim=8, class_embeddings_concat=True)
    vae = sd_vae(block_out_channels=(8, 16), in_channels=1, out_channels=1, norm_num_groups=8)
    text_encoder = ClapTextModelWithProjection(ClapTextConfig(
        bos_token_id=0, eos_token_id=2, pad_token_id=1, vocab_size=261, hidden_size=8,
        intermediate_size=37, num_attention_heads=1, num_hidden_layers=1, projection_dim=8))
    vocoder = SpeechT5HifiGan(SpeechT5HifiGanConfig(
        model_in_dim=8, sampling_rate=16000, upsample_initial_channel=16, upsample_rates=[2, 2],
        upsample_kernel_sizes=[4, 4], resblock_kernel_sizes=[3, 7],
        resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5]], normalize_before=False))
    _fan_in_init(vocoder)  # its own init (std 0.01) gives a waveform of ~1e-6
    pipe = AudioLDMPipeline(vae=vae, text_encoder=text_encoder, tokenizer=roberta_tokenizer(),
                            unet=unet, scheduler=sd_scheduler(), vocoder=vocoder)
    # 16 mel frames x 8 bins -> a 4 x 2 latent
    return pipe, dict(prompt=PROMPT, negative_prompt="noise", audio_length_in_s=0.04,
                      num_inference_steps=STEPS, guidance_scale=2.5, output_type="pt")


@pipeline("dance-diffusion", "DanceDiffusionPipeline")
def build_dance_diffusion():
    from diffusers import DanceDiffusionPipeline, IPNDMScheduler, UNet1DModel
    unet = UNet1DModel(block_out_channels=(32, 32, 64), extra_in_channels=16, sample_size=512,
                       sample_rate=16_000, in_channels=2, out_channels=2, flip_sin_to_cos=True,
                       use_timestep_embedding=False, time_embedding_type="fourier",
                       time_embedding_dim=16,
                       mid_block_type="UNetMidBlock1D",
                       down_block_types=("DownBlock1DNoSkip", "DownBlock1D", "AttnDownBlock1D"),
                       up_block_types=("AttnUpBlock1D", "UpBlock1D", "UpBlock1DNoSkip"))
    pipe = DanceDiffusionPipeline(unet=unet, scheduler=IPNDMScheduler())
    return pipe, dict(batch_size=1, num_inference_steps=3, audio_length_in_s=512 / 16_000)


# ------------------------------------------------------------------- running

def _redraw_constant_weights(module):
    """Redraws weights that start as one constant (ControlNet's zero
    convolutions, zero-initialised output layers): else their paths give
    exact zeros on every device and the comparison tests nothing there."""
    from .harness import _redraw_constant_weights as redraw
    redraw(module)


def _modules(pipe):
    import torch
    return {k: v for k, v in pipe.components.items() if isinstance(v, torch.nn.Module)}


def build(name):
    """(pipeline, call kwargs) on the CPU, seeded, evaluation mode."""
    import torch
    torch.manual_seed(SEED)
    pipe, kwargs = PIPELINES[name]()
    for m in _modules(pipe).values():
        _redraw_constant_weights(m)
        m.eval()
    pipe.set_progress_bar_config(disable=True)
    return pipe, kwargs


def _outputs(out):
    """The pipeline output's images / frames / audio as float tensors."""
    import numpy as np
    import torch
    found = {}
    for key in ("images", "frames", "audios", "audio"):
        v = getattr(out, key, None)
        if v is None:
            continue
        if isinstance(v, np.ndarray):
            v = torch.from_numpy(np.ascontiguousarray(v))
        elif isinstance(v, list) and v and isinstance(v[0], np.ndarray):
            v = torch.from_numpy(np.stack(v))
        if isinstance(v, torch.Tensor):
            found[key] = v.detach().float().cpu()
        else:
            raise TypeError(f"output {key} is {type(v).__name__}, not an array")
    if not found:
        raise TypeError(f"no images, frames or audio in {type(out).__name__}")
    return found


def _call(pipe, kwargs):
    """One seeded call; returns (outputs, latents after each step)."""
    import inspect

    import torch
    kw = copy.deepcopy(kwargs)
    kw["generator"] = torch.Generator().manual_seed(SEED)
    steps = []
    if "callback_on_step_end" in inspect.signature(pipe.__call__).parameters:
        def keep(p, i, t, cb):
            steps.append(cb["latents"].detach().float().cpu().clone())
            return {}
        kw["callback_on_step_end"] = keep
        kw["callback_on_step_end_tensor_inputs"] = ["latents"]
    torch.manual_seed(SEED)  # anything drawn from the global generator repeats too
    with torch.no_grad():
        out = pipe(**kw)
    return _outputs(out), steps


def _max_diff(got, want):
    diffs = [(a.double() - b.double()).abs().max().item()
             for a, b in zip(_tensors(got, []), _tensors(want, []))
             if a.shape == b.shape and a.numel()]
    return max(diffs) if diffs else None


def _move_to_tpu(pipe):
    """``pipe.to("tpu")``, plus tensors modules cache in plain attributes."""
    pipe = pipe.to("tpu")
    for m in _modules(pipe).values():
        _to_tpu(m)
    return pipe


def run_pipeline(name, verbose=False, keep_outputs=False):
    """The pipeline |name| on the CPU and on tpu; a JSON-able record with
    status, max_diff, scale (the tolerance is RTOL_SCALE * scale), reason,
    fallbacks, tpu_ops, seconds (cpu, tpu). With |keep_outputs|, also
    ``outputs``: {"cpu": ..., "tpu": ...}, each {name: tensor} (not JSON-able)."""
    import warnings

    import torch
    warnings.filterwarnings("ignore")
    rec = {"pipeline": CLASSES[name]}
    t0 = time.time()
    try:
        pipe, kwargs = build(name)
        rec["params"] = sum(p.numel() for m in _modules(pipe).values() for p in m.parameters())
        tpipe = copy.deepcopy(pipe)  # the CPU run leaves no state behind in it
        want, want_steps = _call(pipe, kwargs)
    except Exception as e:  # noqa: BLE001  (the CPU could not run it: not counted)
        rec.update(status="skip", reason="cpu: " + _short(e),
                   seconds={"cpu": round(time.time() - t0, 1)})
        return rec
    t1 = time.time()
    rec["shapes"] = {k: list(v.shape) for k, v in want.items()}
    before = _fallbacks()
    ops_before = torch.tpu._get_cache_stats()["ops"]
    try:
        tpipe = _move_to_tpu(tpipe)
        got, got_steps = _call(tpipe, kwargs)
        if keep_outputs:
            rec["outputs"] = {"cpu": want, "tpu": got}
        problem = compare(got, want)
        rec["max_diff"] = _max_diff(got, want)
        rec["scale"] = max(max(v.abs().max().item() for v in want.values()), SCALE_FLOOR)
        if want_steps:
            rec["steps"] = len(want_steps)
            rec["latents_max_diff"] = _max_diff(got_steps, want_steps)
            for i, (g, w) in enumerate(zip(got_steps, want_steps)):
                p = compare(g, w)
                if p:
                    problem = problem or f"latents after step {i}: {p}"
                    rec["first_bad_step"] = i
                    break
        rec.update(status="mismatch" if problem else "match", reason=problem or "")
    except Exception as e:  # noqa: BLE001
        rec.update(status="crash", reason=_short(e))
        if verbose:
            import traceback
            traceback.print_exc()
    rec["fallbacks"] = _delta(before, _fallbacks())
    rec["tpu_ops"] = torch.tpu._get_cache_stats()["ops"] - ops_before  # ran on the device
    rec["seconds"] = {"cpu": round(t1 - t0, 1), "tpu": round(time.time() - t1, 1)}
    if verbose:
        print(name, json.dumps(rec), file=sys.stderr)
    return rec


# ------------------------------------------------------------------ the driver

def _worker(args):
    import torch  # noqa: F401

    import torch_tpu  # noqa: F401

    from ... import _isolate
    names = args.pipelines.split(",")
    items = [(i, names[i]) for i in range(args.start, min(args.end, len(names)))]
    _isolate.work(args.result, items,
                  lambda name, progress: {"name": name, "result": run_pipeline(name, args.verbose)})
    return 0


def _drive(args, names):
    from ... import _isolate
    result = args.json + ".partial"

    def command(start, end):
        return [sys.executable, "-m", "torch_tpu.zoo.diffusion.pipelines", "--worker",
                "--pipelines", ",".join(names), "--start", str(start), "--end", str(end),
                "--result", result] + (["-v"] if args.verbose else [])

    def lost(i, why):
        if why == "hung":
            why = f"hung (no result in {args.timeout} s)"
        return {"name": names[i], "result": {"pipeline": CLASSES[names[i]], "status": "crash",
                                             "reason": why, "fallbacks": {}}}

    done = _isolate.run(command, len(names), result, args.timeout, lost)
    os.replace(result, args.json)
    return {rec["name"]: rec["result"] for rec in done}


def _fmt(x):
    return "-" if x is None else f"{x:.3g}"


def table(results):
    rows = ["| pipeline | class | status | max diff (tol) | latents max diff | fallbacks | "
            "tpu ops | seconds cpu / tpu | problem |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        tol = RTOL_SCALE * r["scale"] if "scale" in r else None
        fb = ", ".join(f"{k} ({v})" for k, v in sorted(r.get("fallbacks", {}).items())) or "none"
        s = r.get("seconds", {})
        rows.append(f"| {name} | {r.get('pipeline', '')} | {r['status']} | "
                    f"{_fmt(r.get('max_diff'))} ({_fmt(tol)}) | "
                    f"{_fmt(r.get('latents_max_diff'))} | "
                    f"{fb} | {r.get('tpu_ops', '-')} | {s.get('cpu', '-')} / {s.get('tpu', '-')} | "
                    f"{r.get('reason', '').replace('|', '/')[:200]} |")
    return "\n".join(rows)


def summary(results):
    counts = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    counted = sum(counts.get(k, 0) for k in ("match", "mismatch", "crash"))
    return (f"Pipelines: {len(results)}; the CPU could not run: {counts.get('skip', 0)}; "
            f"matched the CPU on tpu: {counts.get('match', 0)}/{counted}; "
            f"mismatch: {counts.get('mismatch', 0)}; crash: {counts.get('crash', 0)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Diffusers pipelines end to end on tpu vs the CPU.")
    ap.add_argument("--pipelines", default="",
                    help="comma-separated names (default: all): " + ", ".join(PIPELINES))
    ap.add_argument("--markdown", default="", help="write the report here")
    ap.add_argument("--json", default="zoo_diffusers_pipelines.json")
    ap.add_argument("--timeout", type=int, default=TIMEOUT,
                    help="seconds without a result from one pipeline = hung")
    ap.add_argument("--inline", action="store_true",
                    help="run in this process (no worker subprocess)")
    ap.add_argument("-v", "--verbose", action="store_true")
    from ... import _isolate
    _isolate.add_worker_arguments(ap)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args)
    names = [n for n in args.pipelines.split(",") if n] or list(PIPELINES)
    unknown = [n for n in names if n not in PIPELINES]
    if unknown:
        ap.error("unknown pipeline(s): " + ", ".join(unknown) + "; known: " + ", ".join(PIPELINES))
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    t0 = time.time()
    if args.inline:
        results = {n: run_pipeline(n, args.verbose) for n in names}
    else:
        results = _drive(args, names)
    results = {n: results[n] for n in names if n in results}
    took = time.time() - t0
    print(summary(results))
    print(table(results))
    if args.markdown:
        import diffusers
        text = [f"# Diffusers {diffusers.__version__} pipelines end to end on tpu vs CPU",
                f"Command: `python -m torch_tpu.zoo.diffusion.pipelines "
                f"{' '.join(sys.argv[1:] if argv is None else argv)}`, {took:.0f} s",
                "Each pipeline: tiny random components, a few denoising steps, the same seeded "
                "CPU generator; outputs compared with max|tpu - cpu| <= "
                f"{RTOL_SCALE:g} * max(max|cpu|, {SCALE_FLOOR:g}) (the tolerance in brackets), "
                "and the latents after each step where the pipeline reports them.",
                summary(results), table(results)]
        with open(args.markdown, "w") as f:
            f.write("\n\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
