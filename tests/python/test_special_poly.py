"""Orthogonal polynomials of torch.special on tpu against PyTorch's CPU
results, the CPU fallback off.

Tolerance: the same three-term recurrences (and closed forms) run as graph
ops; in f32 the recurrence amplifies per-step rounding differences (fused
ops, a different order in XLA) roughly linearly in the degree, so f32 is
held to rtol 1e-4 with atol 1e-4 times the column's magnitude; f64 to 1e-9.

High degrees: Chebyshev switches to closed forms above 64; Hermite, Laguerre
and Legendre run the recurrence in a loop to any degree, and Hermite gives NaN
above PyTorch's own limit (128 for float32, 512 for float64)."""
import pytest
import torch

FNS = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u",
    "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
]


pytestmark = pytest.mark.usefixtures("no_fallback")


def close(got, want, dtype):
    assert got.dtype == want.dtype
    fin = torch.isfinite(want)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    scale = want.where(fin, 0).abs().amax(dim=0, keepdim=True).clamp_min(1)
    tol = 1e-4 if dtype == torch.float32 else 1e-9
    err = (got - want).abs().where(fin, 0)
    bound = tol * want.where(fin, 0).abs() + tol * scale
    assert bool((err <= bound).all()), (got, want)
    assert torch.equal(got.where(fin, 0) * 0, want.where(fin, 0) * 0)


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_degrees(name, dtype):
    fn = getattr(torch.special, name)
    x = torch.tensor([-1.5, -1.0, -0.7, -0.3, 0.0, 0.25, 0.5, 0.9, 1.0, 1.2,
                      2.5, float("nan")], dtype=dtype)[:, None]
    n = torch.tensor([-2, 0, 1, 2, 3, 5, 7, 9, 12, 20], dtype=dtype)[None, :]
    want = fn(x, n)
    got = fn(x.to("tpu"), n.to("tpu")).cpu()
    close(got, want, dtype)


@pytest.mark.parametrize("name", FNS[:8])
def test_chebyshev_high_degrees(name):
    fn = getattr(torch.special, name)
    x = torch.tensor([-1.01, -0.6, 0.2, 0.45, 0.8, 1.003], dtype=torch.float64)[:, None]
    n = torch.tensor([30, 64, 65, 100, 200], dtype=torch.float64)[None, :]
    close(fn(x.to("tpu"), n.to("tpu")).cpu(), fn(x, n), torch.float64)


@pytest.mark.parametrize("name", FNS[8:])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_high_degrees(name, dtype):
    # Mixed degrees in one tensor, across PyTorch's Hermite limits; the f32
    # Hermite values overflow to NaN on the CPU long before the limit.
    fn = getattr(torch.special, name)
    x = torch.tensor([-1.0, -0.4, 0.0, 0.3, 0.95, 1.0, 1.2], dtype=dtype)[:, None]
    n = torch.tensor([3, 127, 128, 129, 200, 511, 512, 513, 700], dtype=dtype)[None, :]
    want = fn(x, n)
    assert torch.isfinite(want).any()
    close(fn(x.to("tpu"), n.to("tpu")).cpu(), want, dtype)
    # A scalar degree above every limit of the old unrolled lowering.
    close(fn(x.to("tpu"), 300).cpu(), fn(x, 300), dtype)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "legendre_polynomial_p"])
def test_scalar_forms_and_out(name):
    fn = getattr(torch.special, name)
    n = torch.arange(0, 6)
    x = torch.linspace(-1, 1, 6)
    close(fn(0.3, n.to("tpu")).cpu(), fn(0.3, n), torch.float32)
    close(fn(x.to("tpu"), 4).cpu(), fn(x, 4), torch.float32)
    out = torch.empty(6, device="tpu")
    fn(x.to("tpu"), n.to("tpu"), out=out)
    close(out.cpu(), fn(x, n), torch.float32)


@pytest.mark.parametrize("name", FNS[:10])
def test_degree_past_int64_counts_as_negative(name):
    # The CPU kernel casts n to int64; past its range (and for NaN) that
    # gives INT64_MIN on x86-64, a negative degree: 0.
    fn = getattr(torch.special, name)
    x = torch.tensor([0.5, -0.5, 2.0, 1.0, -1.0, 0.5])
    n = torch.tensor([1e20, 9.3e18, 1e20, 1e20, 1e20, float("nan")])
    want = fn(x, n)
    assert torch.equal(fn(x.to("tpu"), n.to("tpu")).cpu(), want)
