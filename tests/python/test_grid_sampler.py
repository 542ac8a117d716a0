"""grid_sampler_2d (F.grid_sample) on tpu against PyTorch's CPU results,
every interpolation x padding mode x align_corners, the CPU fallback off.

Tolerance: coordinates, reflection and tap weights are the same f32
formulas as PyTorch's kernel, but XLA may fuse or reorder the few
multiply-adds per point, so f32 results may differ by a few ulps of the
O(1) values: rtol 1e-5, atol 1e-5. bfloat16 inputs compute in f32 and round
once, so they are held to one bf16 rounding (rtol 1e-2)."""
import itertools

import pytest
import torch
import torch.nn.functional as F

MODES = ["bilinear", "nearest", "bicubic"]
PADS = ["zeros", "border", "reflection"]


pytestmark = pytest.mark.usefixtures("no_fallback")


def make(n=2, c=3, h=5, w=7, ho=4, wo=6, spread=1.6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g)
    grid = (torch.rand(n, ho, wo, 2, generator=g) * 2 - 1) * spread
    # exact corners, centres and far-out points
    grid[0, 0, :4] = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0], [3.7, -2.9]])
    return x, grid


def check_like_cpu(tpu, x, grid, equal_nan=False, **kw):
    """F.grid_sample(x, grid, **kw) on tpu equals the CPU's (f32 tolerance)."""
    want = F.grid_sample(x, grid, **kw)
    got = F.grid_sample(x.to(tpu), grid.to(tpu), **kw).cpu()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=equal_nan)


@pytest.mark.parametrize("mode,pad,align", list(itertools.product(MODES, PADS, [False, True])))
def test_grid_sample_f32(tpu, mode, pad, align):
    x, grid = make()
    check_like_cpu(tpu, x, grid, mode=mode, padding_mode=pad, align_corners=align)


@pytest.mark.parametrize("mode,pad", list(itertools.product(MODES, PADS)))
def test_grid_sample_wide_reflection_and_size1(tpu, mode, pad):
    # grid far outside (several reflections) and a size-1 spatial dim
    for h, w, spread in [(4, 6, 5.0), (1, 5, 2.5), (3, 1, 2.5)]:
        for align in (False, True):
            x, grid = make(h=h, w=w, spread=spread, seed=h * 10 + w)
            check_like_cpu(tpu, x, grid, mode=mode, padding_mode=pad, align_corners=align)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_bf16(tpu, mode):
    x, grid = make()
    x, grid = x.bfloat16(), grid.bfloat16()
    want = F.grid_sample(x.float(), grid.float(), mode=mode, align_corners=False)
    got = F.grid_sample(x.to(tpu), grid.to(tpu), mode=mode, align_corners=False).cpu()
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)


def test_grid_sample_zeros_ignores_inf_outside(tpu):
    # out-of-range taps contribute exactly 0, even next to inf values
    x = torch.ones(1, 1, 3, 3)
    x[0, 0, :, 0] = float("inf")
    grid = torch.tensor([[[[1.9, 0.0], [2.5, 0.5]]]])
    check_like_cpu(tpu, x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)


NONFINITE = [[float("nan"), 0.2], [0.3, float("nan")], [float("nan"), float("nan")],
             [float("inf"), 0.1], [float("-inf"), 0.1], [0.1, float("inf")],
             [0.1, float("-inf")], [float("inf"), float("-inf")], [1e30, 0.5],
             [-1e30, -0.5], [3e7, 0.2], [-7.3e9, 1e12]]


@pytest.mark.parametrize("mode,pad", list(itertools.product(["bilinear", "nearest"], PADS)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sample_nonfinite_and_huge_coordinates(tpu, mode, pad, dtype):
    # The CPU kernel clips NaN coordinates to 0 and reflects with
    # trunc-and-subtract, so inf and huge values reflect to NaN and clip to 0
    # too; these points must land on the same pixels (tolerance as above).
    x = torch.arange(1, 1 + 2 * 3 * 4, dtype=dtype).view(1, 2, 3, 4)
    grid = torch.tensor(NONFINITE, dtype=dtype).view(1, 1, len(NONFINITE), 2)
    for align in (False, True):
        check_like_cpu(tpu, x, grid, equal_nan=True, mode=mode, padding_mode=pad,
                       align_corners=align)


@pytest.mark.parametrize("mode,pad", list(itertools.product(["bilinear", "nearest"], PADS)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sample_3d(tpu, mode, pad, dtype):
    # grid_sampler_3d follows PyTorch's scalar CPU kernel: NaN clips to the
    # far edge, corners outside add nothing. Same formulas, so the tolerance
    # of the 2-d tests. (Huge coordinates are left out: past INT_MAX
    # reflections the CPU kernel's int cast is undefined behaviour, and in
    # float32 reflecting values near 1e8 and beyond hangs on rounding.)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 4, 5, 6, generator=g, dtype=dtype)
    grid = (torch.rand(2, 3, 4, 5, 3, generator=g, dtype=dtype) * 2 - 1) * 1.7
    special = torch.tensor(NONFINITE, dtype=dtype)
    special[(special.abs() > 1e9) & special.isfinite()] = -4.5e4
    grid[0, 0, :3, :4, :2] = special.view(3, 4, 2)
    grid[1, 1, :3, :4, 1:] = special.view(3, 4, 2)
    grid[0, 2, 0, 0] = torch.tensor([1.0, -1.0, 0.0], dtype=dtype)
    for align in (False, True):
        check_like_cpu(tpu, x, grid, equal_nan=True, mode=mode, padding_mode=pad,
                       align_corners=align)


@pytest.mark.parametrize("mode,pad", list(itertools.product(["bilinear", "nearest"], PADS)))
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_backward(tpu, mode, pad, align):
    # grad_input (scatter-added tap shares) and grad_grid (weight derivatives
    # with the padding's chain factor) against the CPU kernel; the grid
    # reaches past the borders so clipping and reflection take part. Sums
    # of a few products in another order: rtol 1e-4 / atol 1e-5.
    x, grid = make(spread=2.3, seed=4)
    up = torch.randn(2, 3, 4, 6, generator=torch.Generator().manual_seed(8))
    res = []
    for dev in ("cpu", tpu):
        xd = x.detach().to(dev).requires_grad_()
        gd = grid.detach().to(dev).requires_grad_()
        y = F.grid_sample(xd, gd, mode=mode, padding_mode=pad, align_corners=align)
        y.backward(up.to(dev))
        res.append((xd.grad.cpu(), gd.grad.cpu()))
    torch.testing.assert_close(res[1][0], res[0][0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(res[1][1], res[0][1], rtol=1e-4, atol=1e-5)


def test_grid_sample_backward_grid_only(tpu):
    # output_mask [False, True]: only grad_grid is computed.
    x, grid = make(seed=6)
    gd = grid.to(tpu).requires_grad_()
    F.grid_sample(x.to(tpu), gd, align_corners=False).sum().backward()
    gc = grid.clone().requires_grad_()
    F.grid_sample(x, gc, align_corners=False).sum().backward()
    torch.testing.assert_close(gd.grad.cpu(), gc.grad, rtol=1e-4, atol=1e-5)


def test_grid_sample_backward_input_only(tpu):
    # output_mask [True, False] (RAFT samples its correlation volume at
    # detached coordinates): grad_grid still comes back, as from the CPU kernel.
    x, grid = make(seed=7)
    xd = x.to(tpu).requires_grad_()
    F.grid_sample(xd, grid.to(tpu), align_corners=True).pow(2).sum().backward()
    xc = x.clone().requires_grad_()
    F.grid_sample(xc, grid, align_corners=True).pow(2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,pad", list(itertools.product(["bilinear", "nearest"], PADS)))
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sample_3d_backward(tpu, mode, pad, align, dtype):
    # grid_sampler_3d_backward after the scalar CPU kernel: eight corners'
    # shares scatter-added into grad_input, their values times the trilinear
    # weights' derivatives (and the padding's chain factor) into grad_grid.
    # The grid reaches past the borders, and some points sit exactly on one
    # (where clipping's gradient is 0). Tolerance as the 2-d backward's.
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 3, 4, 5, 6, generator=g, dtype=dtype)
    grid = (torch.rand(2, 3, 2, 4, 3, generator=g, dtype=dtype) * 2 - 1) * 2.1
    grid[0, 0, 0, :3] = torch.tensor([[1.0, -1.0, 0.0], [0.0, 0.0, 0.0], [-1.0, 1.0, 1.0]],
                                     dtype=dtype)
    up = torch.randn(2, 3, 3, 2, 4, generator=g, dtype=dtype)
    res = []
    for dev in ("cpu", tpu):
        xd = x.detach().to(dev).requires_grad_()
        gd = grid.detach().to(dev).requires_grad_()
        F.grid_sample(xd, gd, mode=mode, padding_mode=pad, align_corners=align).backward(
            up.to(dev))
        res.append((xd.grad.cpu(), gd.grad.cpu()))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(res[1][0], res[0][0], **tol)
    torch.testing.assert_close(res[1][1], res[0][1], **tol)


def test_grid_sample_3d_backward_grid_only_and_compiled(tpu, fresh_dynamo):
    g = torch.Generator().manual_seed(10)
    x = torch.randn(1, 2, 3, 4, 5, generator=g)
    grid = (torch.rand(1, 2, 3, 4, 3, generator=g) * 2 - 1) * 1.3

    def loss(x, grid):
        return F.grid_sample(x, grid, align_corners=False).square().sum()

    gc = grid.clone().requires_grad_()
    loss(x, gc).backward()
    for fn in (loss, torch.compile(loss, backend="tpu")):
        gd = grid.to(tpu).requires_grad_()  # input without grad: output_mask [False, True]
        fn(x.to(tpu), gd).backward()
        torch.testing.assert_close(gd.grad.cpu(), gc.grad, rtol=1e-4, atol=1e-5)
