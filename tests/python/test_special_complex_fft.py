"""Special functions, complex numbers and FFTs on tpu against PyTorch's CPU
results, the CPU fallback off.

Tolerances: elementwise formulas (series, Chebyshev tables, continued
fractions) are evaluated in f32 with a different operation order than the
CPU's scalar code, so a few ulp (rtol 1e-5) is allowed; FFTs sum n terms in a
different order (XLA's DUCC vs PocketFFT), so errors grow like log(n) ulp of
the largest coefficient: atol 1e-4 for unit-scale inputs of length <= 64."""
import pytest
import torch

ELEM_TOL = dict(rtol=1e-5, atol=1e-5)
FFT_TOL = dict(rtol=1e-4, atol=1e-4)


pytestmark = pytest.mark.usefixtures("no_fallback")


def rand(*shape, low=-3.0, high=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * (high - low) + low


def crand(*shape, seed=0):
    return torch.complex(rand(*shape, seed=seed), rand(*shape, seed=seed + 1))


def compare(fn, *args, tol=ELEM_TOL, **kwargs):
    want = fn(*args, **kwargs)
    got = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    wants = want if isinstance(want, (tuple, list)) else (want,)
    gots = got if isinstance(got, (tuple, list)) else (got,)
    for w, g in zip(wants, gots):
        assert g.device.type == "tpu"
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, **tol)


UNARY = {
    "sinc": torch.sinc, "i0": torch.i0, "i0e": torch.special.i0e, "i1": torch.special.i1,
    "i1e": torch.special.i1e, "entr": torch.special.entr, "erfcx": torch.special.erfcx,
    "log_ndtr": torch.special.log_ndtr, "signbit": torch.signbit, "sgn": torch.sgn,
    "angle": torch.angle, "nan_to_num": torch.nan_to_num, "frexp": torch.frexp,
    "trigamma": lambda x: torch.polygamma(1, x), "polygamma3": lambda x: torch.polygamma(3, x),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    x = rand(4, 7, low=-6, high=6)
    x[0, 0], x[0, 1], x[0, 2] = 0.0, -0.0, float("nan")
    x[1, 0], x[1, 1] = float("inf"), float("-inf")
    if name in ("trigamma", "polygamma3"):
        x = x.nan_to_num(0.5, 0.5, 0.5)
        x[x == 0] = 0.5
    compare(UNARY[name], x)


def test_digamma_poles():
    # digamma(+-0) is -+inf; negative integers and -inf give NaN. The
    # plugins' own digamma gave NaN at +0 (xla-cpu-pjrt) and -inf at -0.
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, float("-inf"), float("inf"), 1e-30, -1e-30,
                      -3.5, 2.5, float("nan")])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        compare(torch.digamma, x.to(dtype), tol=dict(rtol=1e-5, atol=1e-5))
        compare(torch.polygamma, 0, x.to(dtype), tol=dict(rtol=1e-5, atol=1e-5))


def test_ndtri():
    compare(torch.special.ndtri, torch.linspace(0.001, 0.999, 50))
    # The tails, where 2p - 1 loses p's low bits (3e-4 off at p = 9e-5),
    # and the ends and outside of [0, 1].
    p = torch.tensor([1e-30, 1e-12, 3.2e-5, 8.7e-5, 0.13, 0.14, 0.86, 0.87, 1 - 1e-7,
                      0.0, 1.0, -0.5, 1.5, float("nan")])
    compare(torch.special.ndtri, p)
    compare(torch.special.ndtri, p.double(), tol=dict(rtol=1e-12, atol=1e-12))


BINARY = {
    "copysign": torch.copysign, "heaviside": torch.heaviside, "hypot": torch.hypot,
    "logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2, "xlogy": torch.xlogy,
    "xlog1py": torch.special.xlog1py, "nextafter": torch.nextafter,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    a, b = rand(3, 5, seed=1), rand(5, seed=2, low=0.1)
    a[0, 0] = 0.0
    compare(BINARY[name], a, b)


def test_zeta():
    compare(torch.special.zeta, rand(6, low=1.5, high=5), rand(6, low=0.5, high=4, seed=3))
    # negative q, shifted up as far as the tensor needs (past 48 terms too),
    # poles, and integer s (the only s a negative q admits)
    s = torch.tensor([2.0, 3.0, 2.0, 4.0, 2.0, 2.0, 3.0, 2.0])
    q = torch.tensor([-50.5, -60.3, -200.2, -3.25, -47.5, float("-inf"), -3.0, 0.5])
    compare(torch.special.zeta, s, q, tol=dict(rtol=1e-5, atol=1e-5))
    compare(torch.special.zeta, s.double(), q.double(), tol=dict(rtol=1e-10, atol=1e-10))


def test_nansum_count_nonzero():
    x = rand(4, 5)
    x[x > 2] = float("nan")
    compare(torch.nansum, x)
    compare(lambda t: torch.nansum(t, dim=1, keepdim=True), x)
    compare(lambda t: torch.count_nonzero(t > 0, dim=0), x)


def test_complex_construction_and_views():
    re, im = rand(3, 4), rand(3, 4, seed=5)
    compare(torch.complex, re, im, tol={})
    compare(torch.polar, re.abs(), im)
    z = crand(3, 4)
    compare(torch.view_as_real, z, tol={})
    compare(lambda t: torch.view_as_complex(t), torch.stack([re, im], -1), tol={})
    compare(lambda t: t.real * 2 + t.imag, z)
    compare(lambda t: (t.sum(), t.mean(dim=0), t * t, t.abs(), t.conj().resolve_conj()), z)


def test_view_as_real_aliases():
    z = crand(4).to("tpu")
    r = torch.view_as_real(z)
    r[1, 1] = 7.0  # writes the imaginary part of z[1]
    assert z[1].imag.item() == 7.0
    z.mul_(2)
    assert r[1, 1].item() == 14.0


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_family(norm):
    x, z = rand(4, 6, 8), crand(4, 6, 8)
    compare(lambda t: torch.fft.fft(t, norm=norm), z, tol=FFT_TOL)
    compare(lambda t: torch.fft.ifft(t, n=10, dim=1, norm=norm), z, tol=FFT_TOL)
    compare(lambda t: torch.fft.rfft(t, norm=norm), x, tol=FFT_TOL)
    compare(lambda t: torch.fft.irfft(t, n=8, norm=norm), z, tol=FFT_TOL)
    compare(lambda t: torch.fft.fftn(t, norm=norm), z, tol=FFT_TOL)
    compare(lambda t: torch.fft.rfft2(t, norm=norm), x, tol=FFT_TOL)
    compare(lambda t: torch.fft.irfftn(t, s=(6, 8), norm=norm), z, tol=FFT_TOL)
    compare(lambda t: torch.fft.hfft(t, norm=norm), z, tol=FFT_TOL)


def test_fft_backward():
    x = rand(3, 16)
    xt = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    torch.fft.rfft(xc).abs().sum().backward()
    torch.fft.rfft(xt).abs().sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, **FFT_TOL)


def test_random_distributions_shape_and_range():
    x = torch.empty(1000, device="tpu")
    assert x.cauchy_().isfinite().all()
    assert (x.log_normal_() > 0).all()
    g = x.geometric_(0.3).cpu()
    assert (g >= 1).all() and (g == g.round()).all()
    assert abs(g.mean().item() - 1 / 0.3) < 0.5


def test_bad_input_is_an_error():
    with pytest.raises((RuntimeError, ValueError)):
        torch.view_as_complex(torch.zeros(3, 3, device="tpu"))
