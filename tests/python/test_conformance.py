"""Every installed CPU plugin against PyTorch's CPU, at the sizes and values
where plugins go wrong (odd sizes past the vector widths, ±0, ±inf, NaN,
denormals, large magnitudes): the self-check users run
(`python -m torch_tpu.info --check`) and a slice of the conformance sweep
(`python -m torch_tpu.coverage --reference`, docs/conformance.md), each on
each plugin. The whole sweep runs whenever the plugin, its version or the
default changes."""
import os
import subprocess
import sys

import pytest

from conftest import run_coverage
from torch_tpu import plugins

CPU_PLUGINS = [p["name"] for p in plugins.installed("cpu")]


def _env(plugin, **extra):
    return dict(os.environ, TORCH_TPU_PJRT_PLUGIN=plugins.resolve(plugin), **extra)


def _self_check(plugin, **extra):
    return subprocess.run([sys.executable, "-m", "torch_tpu.info", "--check"],
                          capture_output=True, text=True, env=_env(plugin, **extra), timeout=600)


def test_both_cpu_plugins_are_installed():
    import platform
    want = {"xla-cpu-pjrt"} | ({"lammps-jax-pjrt-cpu"} if platform.machine() == "x86_64" else set())
    assert want <= set(CPU_PLUGINS), CPU_PLUGINS


@pytest.mark.parametrize("plugin", CPU_PLUGINS)
def test_self_check_passes(plugin):
    r = _self_check(plugin)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    version = next(p["version"] for p in plugins.installed() if p["name"] == plugin)
    assert f"self-check on {plugin} {version}" in out, out
    assert "every probed op agrees with the CPU" in out, out


@pytest.mark.skipif("lammps-jax-pjrt-cpu" not in CPU_PLUGINS,
                    reason="lammps-jax-pjrt-cpu has a wheel for x86-64 only")
def test_self_check_names_what_the_plugin_computes_wrong():
    # Without its workaround, lammps-jax-pjrt-cpu 0.11.2's atan is wrong
    # past ~63 elements: the probe must say so, naming the op and plugin.
    r = _self_check("lammps-jax-pjrt-cpu", TORCH_TPU_PLUGIN_WORKAROUNDS="0")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "disagree with the CPU on this plugin: atan" in out, out
    assert "atan (float32, shape (1031,))" in out, out
    assert "atan (float32, shape (7,))" not in out, out  # short tensors were always right


# Elementwise ops whose kernels XLA vectorises, with PyTorch's reference
# inputs (1029x917 and 812-element tensors; small, large and extremal
# values; noncontiguous) and our special-values sample.
SLICE = ["atan", "asin", "acos", "tan", "tanh", "sin", "cos", "exp", "expm1", "log", "log1p",
         "sigmoid", "erf", "erfinv", "sqrt", "rsqrt", "reciprocal", "nn.functional.gelu",
         "nn.functional.silu", "div", "remainder", "fmod", "pow", "atan2", "addr", "softmax",
         "special.ndtri", "digamma", "linalg.svd", "svd_lowrank"]


def _sweep_slice(tmp_path, plugin, ops, dtypes, *extra):
    """The reference sweep of |ops| on |plugin|: every column passes (or the
    CPU skips it); the results."""
    r, results = run_coverage(["--reference", *extra, "--plugin", plugin, "--ops", ",".join(ops),
                               "--dtypes", dtypes, "--no-backward"],
                              tmp_path / "conformance.json", "op", timeout=1500)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"plugin: {plugin} " in r.stdout, r.stdout
    assert len(results) >= len(ops), sorted(results)
    bad = {(op, c): v for op, res in results.items() for c, v in res.items()
           if v["status"] not in ("pass", "skip")}
    assert not bad, bad
    return results


@pytest.mark.parametrize("plugin", CPU_PLUGINS)
def test_conformance_slice(tmp_path, plugin):
    results = _sweep_slice(tmp_path, plugin, SLICE, "float32,bfloat16")
    # (variants the CPU runs in other dtypes only, such as silu.complex, skip)
    assert all(res["float32"]["status"] == "pass" for name, res in results.items()
               if name in SLICE), results


# The other dtypes, reference inputs capped at 4 samples: ops whose dtype
# paths differ (double coordinates, integer shifts, ties among indices).
DTYPE_SLICE = ["nn.functional.interpolate", "bitwise_left_shift", "bitwise_right_shift",
               "kthvalue", "topk", "sort", "argsort", "matrix_exp", "add", "mul", "sum",
               "cumsum", "matmul", "floor_divide", "remainder"]


@pytest.mark.parametrize("plugin", CPU_PLUGINS)
def test_conformance_slice_other_dtypes(tmp_path, plugin):
    _sweep_slice(tmp_path, plugin, DTYPE_SLICE, "float64,float16,int32,int64,bool",
                 "--samples", "4")


def test_basis_alignment_takes_signs_not_vectors():
    # Eigen- and singular vectors are compared up to sign (and full_matrices'
    # completion up to a rotation of its span); other vectors still differ.
    import torch
    from torch_tpu.coverage.ops import _align_basis
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 5, generator=g, dtype=torch.float64)
    L, Q = torch.linalg.eigh(a + a.T)
    flip = torch.tensor([1.0, -1, 1, -1, -1], dtype=torch.float64)
    assert torch.equal(_align_basis("linalg.eigh", (L, Q * flip), (L, Q))[1], Q)
    swapped = Q[:, [1, 0, 2, 3, 4]]
    assert not torch.allclose(_align_basis("linalg.eigh", (L, swapped), (L, Q))[1], Q)

    U, S, Vh = torch.linalg.svd(torch.randn(5, 3, generator=g, dtype=torch.float64))
    c, s_ = 0.6, 0.8
    turn = torch.tensor([[c, -s_], [s_, c]], dtype=torch.float64)
    other = torch.cat([U[:, :3] * flip[:3], U[:, 3:] @ turn], 1)
    got = _align_basis("linalg.svd", (other, S, Vh * flip[:3, None]), (U, S, Vh))
    torch.testing.assert_close(got[0], U)
    torch.testing.assert_close(got[2], Vh)
    # a left vector flipped without its right partner is a wrong result
    got = _align_basis("linalg.svd", (U * flip, S, Vh), (U, S, Vh))
    assert not torch.allclose(got[2], Vh)


def test_plugin_names_resolve():
    for p in plugins.installed():
        assert plugins.resolve(p["name"]) == p["path"]
        assert plugins.describe(p["path"]) == f"{p['name']} {p['version']}"
    with pytest.raises(ValueError, match="no installed PJRT plugin package 'nope'"):
        plugins.resolve("nope")
    with pytest.raises(ValueError, match="does not exist"):
        plugins.resolve("/nonexistent/libpjrt.so")
