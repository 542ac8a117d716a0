"""Diffusers on tpu: the zoo's CI slice (every class marked fast in
torch_tpu/zoo/diffusion/recipes, forward and gradients against the CPU),
Diffusers' accelerator paths (model and sequential CPU offload with tpu as
the accelerator, torch.compile of a whole model and of its repeated blocks)
and the attention dispatcher's backends that run on tpu.

Tolerances are the zoo's (max|tpu - cpu| <= 1e-3 of the output's scale, see
torch_tpu/zoo/__init__.py) for the zoo rows. The tests below build their own
models and compare at 1e-5 of the scale: one to six small blocks, which XLA
fuses and reassociates by a few ulp per op; the largest seen is 4e-7 of it.
"""
import copy
import subprocess
import sys
import warnings

import pytest
import torch

diffusers = pytest.importorskip("diffusers")

from torch_tpu.zoo.diffusion import harness  # noqa: E402
from torch_tpu.zoo.diffusion.recipes import load_all  # noqa: E402

REL_TOL = 1e-5
FAST = sorted(n for n, r in load_all().items() if r.fast)


def assert_close(got, want):
    got = got.detach().cpu()
    scale = max(want.abs().max().item(), 1e-2)
    err = (got - want).abs().max().item()
    assert got.shape == want.shape and err <= REL_TOL * scale, \
        f"max error {err:.3g} vs scale {scale:.3g}"


@pytest.mark.parametrize("name", FAST)
def test_zoo_fast_slice(name):
    rec = harness.run_class(name)
    assert rec["status"] == "match", rec
    if "backward" in rec:
        assert rec["backward"]["status"] == "match", rec["backward"]
    assert not rec["fallbacks"], rec["fallbacks"]


def test_fast_slice_spans_the_families():
    # one or two classes from each recipe family: UNets, VAEs, image and
    # video transformers, audio
    families = {load_all()[n].fn.__module__.rsplit(".", 1)[1] for n in FAST}
    assert len(FAST) >= 5 and len(families) >= 4, (FAST, families)


def test_zoo_command(tmp_path):
    # the zoo as users run it: driver, worker subprocess, records, report
    from torch_tpu import _isolate
    out, md = tmp_path / "d.json", tmp_path / "d.md"
    proc = subprocess.run([sys.executable, "-m", "torch_tpu.zoo.diffusion", "--classes",
                           "AutoencoderKL", "--json", str(out), "--markdown", str(md)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = _isolate.load_results(out)
    assert list(results) == ["AutoencoderKL"] and results["AutoencoderKL"]["status"] == "match"
    assert "matched the CPU: 1/1" in proc.stdout and "AutoencoderKL" in md.read_text()


def _ddpm():
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel
    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(32, 64), norm_num_groups=8, attention_head_dim=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    return DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=1000))


def _images(pipe):
    return pipe(generator=torch.Generator().manual_seed(0), num_inference_steps=3,
                output_type="pt", return_dict=False)[0]


@pytest.fixture
def quiet():
    from diffusers.utils import logging
    logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_accelerator_is_tpu():
    from diffusers.utils.torch_utils import get_device
    assert get_device() == "tpu"


def test_model_cpu_offload_runs_on_tpu(quiet):
    pipe = _ddpm()
    pipe.set_progress_bar_config(disable=True)
    want = _images(pipe)
    pipe.enable_model_cpu_offload()
    assert pipe._execution_device == torch.device("tpu", 0)
    seen = []
    hook = pipe.unet.conv_in.register_forward_hook(
        lambda m, args, out: seen.append(out.device.type))
    got = _images(pipe)
    hook.remove()
    assert seen and set(seen) == {"tpu"}, seen
    # offloaded back to the host when the call ends
    assert next(pipe.unet.parameters()).device.type == "cpu"
    assert_close(got, want)


def test_sequential_cpu_offload_runs_on_tpu(quiet):
    pipe = _ddpm()
    pipe.set_progress_bar_config(disable=True)
    want = _images(pipe)
    pipe.enable_sequential_cpu_offload()
    assert pipe._execution_device == torch.device("tpu", 0)
    seen = []
    conv = pipe.unet.conv_in
    hook = conv.register_forward_hook(lambda m, args, out: seen.append(out.device.type))
    got = _images(pipe)
    hook.remove()
    assert seen and set(seen) == {"tpu"}, seen
    assert_close(got, want)


def _flux():
    from diffusers import FluxTransformer2DModel
    torch.manual_seed(0)
    model = FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=2, num_single_layers=2,
                                   attention_head_dim=16, num_attention_heads=2,
                                   joint_attention_dim=32, pooled_projection_dim=32,
                                   axes_dims_rope=(4, 4, 8)).eval()
    harness._redraw_constant_weights(model)
    g = torch.Generator().manual_seed(1)
    inputs = dict(hidden_states=torch.randn(1, 16, 16, generator=g),
                  encoder_hidden_states=torch.randn(1, 5, 32, generator=g),
                  pooled_projections=torch.randn(1, 32, generator=g),
                  img_ids=torch.randn(16, 3, generator=g), txt_ids=torch.randn(5, 3, generator=g),
                  timestep=torch.tensor([0.5]))
    with torch.no_grad():
        want = model(**inputs).sample
    return model, inputs, want


def _on_tpu(model, inputs):
    return copy.deepcopy(model).to("tpu"), {k: v.to("tpu") for k, v in inputs.items()}


def test_compile_repeated_blocks_fullgraph(fresh_dynamo):
    model, inputs, want = _flux()
    tmodel, tinputs = _on_tpu(model, inputs)
    before = torch.tpu._get_cache_stats()["compiled_graphs"]
    tmodel.compile_repeated_blocks(backend="tpu", fullgraph=True)
    with torch.no_grad():
        got = tmodel(**tinputs).sample
    # one graph per kind of repeated block (double- and single-stream)
    assert torch.tpu._get_cache_stats()["compiled_graphs"] - before == 2
    assert_close(got, want)


def test_compiled_unet_matches_cpu(fresh_dynamo):
    from diffusers import UNet2DConditionModel
    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), norm_num_groups=8, cross_attention_dim=32,
        attention_head_dim=8, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")).eval()
    g = torch.Generator().manual_seed(1)
    inputs = dict(sample=torch.randn(2, 4, 16, 16, generator=g), timestep=torch.tensor([10, 500]),
                  encoder_hidden_states=torch.randn(2, 7, 32, generator=g))
    with torch.no_grad():
        want = unet(**inputs).sample
    tunet, tinputs = _on_tpu(unet, inputs)
    before = torch.tpu._get_cache_stats()["compiled_graphs"]
    compiled = torch.compile(tunet, backend="tpu", fullgraph=True)
    with torch.no_grad():
        got = compiled(**tinputs).sample
        again = compiled(**tinputs).sample
    assert torch.tpu._get_cache_stats()["compiled_graphs"] - before == 1
    assert_close(got, want)
    assert torch.equal(got.cpu(), again.cpu())


# The dispatcher's backends that are PyTorch's own attention: SDPA under each
# of its kernel choices, and flex attention. The CUDA kernel libraries
# (flash-attn, sage, xformers) and other vendors' (NPU, XLA) do not apply.
ATTENTION_BACKENDS = ["native", "_native_math", "_native_efficient", "_native_flash",
                      "_native_cudnn", "flex"]


@pytest.mark.parametrize("backend", ATTENTION_BACKENDS)
def test_attention_backend(backend, quiet):
    model, inputs, want = _flux()
    tmodel, tinputs = _on_tpu(model, inputs)
    before = dict(torch.tpu._get_cache_stats()["fallbacks"])
    # set_attention_backend also makes it Diffusers' process-wide default,
    # which reset_attention_backend leaves (the next test's CPU reference
    # would run it): restored here
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry as registry
    default = registry._active_backend
    tmodel.set_attention_backend(backend)
    try:
        with torch.no_grad():
            got = tmodel(**tinputs).sample
    finally:
        tmodel.reset_attention_backend()
        registry.set_active_backend(default)
    assert torch.tpu._get_cache_stats()["fallbacks"] == before
    assert_close(got, want)
