"""One denoising step of a Diffusers UNet and of a diffusion transformer on
tpu (strict eager, fused eager, torch.compile) against PyTorch's CPU eager
path, in the same run: median milliseconds per step and ratios.

A step is what a pipeline's loop does: the model's noise (or velocity)
prediction for a classifier-free-guidance batch, the guidance mix and an
Euler update of the latents, all under no_grad.

    python bench/diffusion_step.py [--models unet,dit] [--reps 7] [--json PATH]"""
import argparse
import copy
import json
import os
import sys
import time
import warnings

import torch

import torch_tpu

sys.path.insert(0, os.path.dirname(__file__))
from common import median_time  # noqa: E402


def unet():
    """A Stable-Diffusion-shaped UNet, narrowed: 3 levels, cross-attention
    on two, 32x32 latents, a 16-token prompt, CFG batch 2."""
    from diffusers import UNet2DConditionModel
    model = UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(64, 128, 128), norm_num_groups=32, cross_attention_dim=128,
        attention_head_dim=32,
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"))
    latents = torch.randn(1, 4, 32, 32)
    text = torch.randn(2, 16, 128)

    def predict(m, x, t, text):
        out = m(torch.cat([x, x]), t, encoder_hidden_states=text).sample
        return out
    return model, latents, dict(text=text), predict


def dit():
    """A Flux-shaped transformer: 2 double-stream and 4 single-stream
    blocks, width 128, 256 image tokens (16x16 packed latents), 32 text
    tokens, CFG batch 2."""
    from diffusers import FluxTransformer2DModel
    model = FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=2, num_single_layers=4, attention_head_dim=32,
        num_attention_heads=4, joint_attention_dim=64, pooled_projection_dim=64,
        axes_dims_rope=(8, 12, 12))
    latents = torch.randn(1, 256, 16)
    rows, cols = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    img_ids = torch.stack([torch.zeros(256), rows.reshape(-1), cols.reshape(-1)], -1)
    extra = dict(text=torch.randn(2, 32, 64), pooled=torch.randn(2, 64), img_ids=img_ids,
                 txt_ids=torch.zeros(32, 3))

    def predict(m, x, t, text, pooled, img_ids, txt_ids):
        return m(hidden_states=torch.cat([x, x]), encoder_hidden_states=text,
                 pooled_projections=pooled, timestep=t.float().expand(2) / 1000,
                 img_ids=img_ids, txt_ids=txt_ids).sample
    return model, latents, extra, predict


MODELS = {"unet": unet, "dit": dit}


def step_fn(model, predict, latents, extra, device):
    x0 = latents.to(device)
    extra = {k: v.to(device) for k, v in extra.items()}
    t = torch.tensor([500], device=device)
    state = {"x": x0}

    def step():
        with torch.no_grad():
            pred = predict(model, state["x"], t, **extra)
            uncond, cond = pred.chunk(2)
            guided = uncond + 5.0 * (cond - uncond)
            state["x"] = state["x"] - 0.02 * guided
        return state["x"]

    def reset():
        state["x"] = x0
    return step, reset


def run_model(name, reps):
    torch.manual_seed(0)
    model, latents, extra, predict = MODELS[name]()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    row = {"model": name, "params": params}
    outs = {}
    for mode in ("cpu", "strict", "fused", "compiled"):
        device = "cpu" if mode == "cpu" else "tpu"
        torch_tpu.set_execution_mode("fused" if mode == "fused" else "strict")
        m = copy.deepcopy(model).to(device)
        if mode == "compiled":
            torch._dynamo.reset()
            m = torch.compile(m, backend="tpu")
        step, reset = step_fn(m, predict, latents, extra, device)
        t0 = time.perf_counter()
        outs[mode] = step().cpu()
        row[f"{mode}_first_s"] = time.perf_counter() - t0
        reset()

        def timed():
            step()
            if device == "tpu":
                torch.tpu.synchronize()
        row[f"{mode}_ms"] = median_time(timed, reps=reps) * 1e3
    torch_tpu.set_execution_mode("strict")
    ref = outs["cpu"]
    for mode in ("strict", "fused", "compiled"):
        row[f"{mode}_max_diff"] = (outs[mode] - ref).abs().max().item()
        row[f"{mode}_vs_cpu"] = row["cpu_ms"] / row[f"{mode}_ms"]
    row["compiled_vs_strict"] = row["strict_ms"] / row["compiled_ms"]
    row["fused_vs_strict"] = row["strict_ms"] / row["fused_ms"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="unet,dit")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    rows = [run_model(name, args.reps) for name in args.models.split(",")]
    print(f"{'model':6} {'params':>9} {'cpu ms':>8} {'strict':>8} {'fused':>8} {'compiled':>8} "
          f"{'compiled/strict':>15} {'fused/strict':>12} {'compiled/cpu':>12} {'max diff':>9}")
    for r in rows:
        print(f"{r['model']:6} {r['params']:9d} {r['cpu_ms']:8.2f} {r['strict_ms']:8.2f} "
              f"{r['fused_ms']:8.2f} {r['compiled_ms']:8.2f} {r['compiled_vs_strict']:14.2f}x "
              f"{r['fused_vs_strict']:11.2f}x {r['compiled_vs_cpu']:11.2f}x "
              f"{max(r['strict_max_diff'], r['compiled_max_diff']):9.2g}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
