"""Bessel and Airy functions of torch.special on tpu against PyTorch's CPU
results, the CPU fallback off.

Tolerance: the same Cephes rational and Chebyshev approximations are
evaluated as graph ops in f32 with a different operation order (and fused
exp/sin/cos from XLA), so a few ulp differ: rtol 1e-5, atol 1e-6 in f32;
f64 is held to rtol 1e-10."""
import pytest
import torch

F32_TOL = dict(rtol=1e-5, atol=1e-6)
F64_TOL = dict(rtol=1e-10, atol=1e-12)

FNS = [
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
    "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
    "modified_bessel_k1", "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai",
]


pytestmark = pytest.mark.usefixtures("no_fallback")


def inputs(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64, generator=g, dtype=torch.float64) * 30 - 10
    special = torch.tensor([0.0, -0.0, 1e-6, -1e-6, 0.3, 2.0, 2.09, -2.09, 5.0,
                            -5.0, 8.0, 8.5, 20.0, -20.0, 150.0, float("inf"),
                            float("-inf"), float("nan")], dtype=torch.float64)
    return torch.cat([x, special]).to(dtype)


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_against_cpu(name, dtype):
    fn = getattr(torch.special, name)
    x = inputs(dtype)
    want = fn(x)
    got = fn(x.to("tpu")).cpu()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, equal_nan=True,
                               **(F32_TOL if dtype == torch.float32 else F64_TOL))


@pytest.mark.parametrize("name", ["bessel_j0", "modified_bessel_k1", "airy_ai"])
def test_out_and_int_input(name):
    fn = getattr(torch.special, name)
    x = torch.arange(1, 7)
    out = torch.empty(6, device="tpu")
    fn(x.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), fn(x), **F32_TOL)


def test_airy_ai_phase_far_left():
    # Ai's phase 2/3 |x|^1.5 is divided by 3 as the CPU divides: one ulp of
    # it (a multiplication by 1/3) moved Ai(-501) by 6e-5.
    x = torch.tensor([-501.0, -300.0, -1000.0, -30.0])
    torch.testing.assert_close(torch.special.airy_ai(x.to("tpu")).cpu(),
                               torch.special.airy_ai(x), **F32_TOL)


def test_complex_is_refused():
    x = torch.ones(3, dtype=torch.complex64, device="tpu")
    with pytest.raises(Exception):
        torch.special.bessel_j0(x).cpu()


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
def test_cdist_pdist(p):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(2, 5, 4, generator=g)
    b = torch.randn(6, 4, generator=g)
    got = torch.cdist(a.to("tpu"), b.to("tpu"), p=p).cpu()
    torch.testing.assert_close(got, torch.cdist(a, b, p=p), **F32_TOL)
    x = torch.randn(7, 3, generator=g)
    torch.testing.assert_close(torch.nn.functional.pdist(x.to("tpu"), p=p).cpu(),
                               torch.nn.functional.pdist(x, p=p), **F32_TOL)
