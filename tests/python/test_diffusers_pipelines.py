"""Diffusers pipelines end to end (torch_tpu.zoo.diffusion.pipelines): tiny
random components, a few denoising steps on the CPU and after
``pipe.to("tpu")`` with the same seeded CPU generator; the tpu images must
match the CPU's."""
import subprocess
import sys

import pytest
import torch

pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from torch_tpu.zoo.diffusion import pipelines  # noqa: E402
from torch_tpu.zoo.settings import RTOL_SCALE, SCALE_FLOOR  # noqa: E402


def _assert_matches(name):
    rec = pipelines.run_pipeline(name, keep_outputs=True)
    assert rec["status"] == "match", {k: v for k, v in rec.items() if k != "outputs"}
    assert rec["tpu_ops"] > 0  # the tpu run computed on the device
    want, got = rec["outputs"]["cpu"], rec["outputs"]["tpu"]
    assert set(got) == set(want) and want
    for key in want:
        w, g = want[key], got[key]
        assert g.shape == w.shape and g.dtype == w.dtype, key
        assert torch.isfinite(w).all() and w.abs().max() > 0, key  # a real image, not blank
        scale = max(w.abs().max().item(), SCALE_FLOOR)
        err = (g.double() - w.double()).abs().max().item()
        assert err <= RTOL_SCALE * scale, f"{name} {key}: max error {err:.3g} vs scale {scale:.3g}"
    return rec


def test_ddpm_pipeline_matches_cpu():
    _assert_matches("ddpm")


def test_stable_diffusion_pipeline_matches_cpu():
    rec = _assert_matches("sd")
    # the latents after every denoising step were compared too
    assert rec["steps"] == pipelines.STEPS and rec["latents_max_diff"] is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in pipelines.PIPELINES if n not in ("ddpm", "sd")])
def test_pipeline_matches_cpu(name):
    _assert_matches(name)


@pytest.mark.slow
def test_cli_writes_report(tmp_path):
    md, js = tmp_path / "p.md", tmp_path / "p.json"
    proc = subprocess.run([sys.executable, "-m", "torch_tpu.zoo.diffusion.pipelines",
                           "--pipelines", "ddim", "--markdown", str(md), "--json", str(js)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "matched the CPU on tpu: 1/1" in proc.stdout
    assert "| ddim | DDIMPipeline | match |" in md.read_text()
