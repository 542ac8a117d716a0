"""torch.special.gammainc / gammaincc (aten::igamma, aten::igammac) on tpu
against PyTorch's CPU results, the CPU fallback off.

Tolerance: tpu evaluates series and continued fraction in float64 to
convergence; the CPU uses Cephes (with asymptotic expansions near a ~ x).
The CPU's asymptotic branch is the less accurate one: at a = 30, x = 35 it
is 1.3e-9 off in relative terms (tpu 1e-13, against a 30-digit mpmath
value), so float64 is held to rtol 5e-9 / atol 1e-12. float32 results are the
rounded float64 values, within the CPU float32 kernel's own error: rtol
2e-5 / atol 1e-6."""
import pytest
import torch

FNS = [torch.special.gammainc, torch.special.gammaincc]
SPECIAL = [(0.0, 1.0), (0.0, 0.0), (2.0, 0.0), (float("inf"), 3.0), (float("inf"), float("inf")),
           (3.0, float("inf")), (-1.0, 2.0), (2.0, -1.0), (float("nan"), 1.0), (1.0, float("nan"))]


pytestmark = pytest.mark.usefixtures("no_fallback")


def grid(dtype, a_vals, x_vals):
    a = torch.tensor(a_vals, dtype=dtype)[:, None].expand(-1, len(x_vals))
    x = torch.tensor(x_vals, dtype=dtype)[None, :].expand(len(a_vals), -1)
    return a.contiguous(), x.contiguous()


@pytest.mark.parametrize("fn", FNS)
def test_float64_wide_range(fn):
    a, x = grid(torch.float64, [0.01, 0.5, 1.0, 2.5, 7.0, 30.0, 120.0, 1000.0],
                [1e-4, 0.1, 0.9, 2.0, 6.5, 7.5, 29.0, 35.0, 110.0, 1100.0])
    want = fn(a, x)
    torch.testing.assert_close(fn(a.to("tpu"), x.to("tpu")).cpu(), want, rtol=5e-9, atol=1e-12)


@pytest.mark.parametrize("fn", FNS)
def test_float32(fn):
    a, x = grid(torch.float32, [0.05, 0.7, 1.0, 3.0, 9.5, 40.0], [0.01, 0.5, 1.5, 3.2, 9.0, 12.0, 45.0])
    torch.testing.assert_close(fn(a.to("tpu"), x.to("tpu")).cpu(), fn(a, x), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("fn", FNS)
def test_special_values_and_broadcast(fn):
    a = torch.tensor([p[0] for p in SPECIAL], dtype=torch.float64)
    x = torch.tensor([p[1] for p in SPECIAL], dtype=torch.float64)
    torch.testing.assert_close(fn(a.to("tpu"), x.to("tpu")).cpu(), fn(a, x), equal_nan=True,
                               rtol=0, atol=0)
    # a tensor against a 0-d x
    a = torch.linspace(0.1, 5, 7)
    torch.testing.assert_close(fn(a.to("tpu"), torch.tensor(2.0, device="tpu")).cpu(),
                               fn(a, torch.tensor(2.0)), rtol=2e-5, atol=1e-6)
