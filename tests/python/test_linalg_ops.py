"""Linear algebra on tpu vs PyTorch's CPU, the CPU fallback off: Cholesky,
triangular solves, LU (and det/slogdet/solve/inv on it), Householder QR,
Jacobi eigh/SVD, matrix_exp, with batch dims, float32 and float64.

Tolerances: factorizations reorder floating-point work relative to LAPACK
(unblocked vs blocked updates), so results agree to a small multiple of the
dtype's epsilon times the condition number; the well-conditioned inputs below
(diagonally dominant or SPD) keep that under rtol/atol 1e-4 in float32 and
1e-10 in float64. Eigen/singular vectors are compared through
reconstructions, since their signs are a free choice."""
import pytest
import torch

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-10, atol=1e-10)}
DTYPES = [torch.float32, torch.float64]


pytestmark = pytest.mark.usefixtures("no_fallback")


def mat(*shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=g, dtype=torch.float64)
    return a.to(dtype)


def well(*shape, dtype, seed=0):
    n = shape[-1]
    return (mat(*shape, dtype=torch.float64, seed=seed) + 3 * n ** 0.5 * torch.eye(n)).to(dtype)


def spd(*shape, dtype, seed=0):
    a = mat(*shape, dtype=torch.float64, seed=seed)
    return (a @ a.mT + shape[-1] * torch.eye(shape[-1])).to(dtype)


def close(got, want):
    assert got.device.type == "tpu" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, **TOL.get(want.dtype, dict(rtol=0, atol=0)))


def compare(fn, *args, **kwargs):
    want = fn(*args, **kwargs)
    got = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    if isinstance(want, torch.Tensor):
        want, got = (want,), (got,)
    for g, w in zip(got, want):
        close(g, w)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(dtype, upper):
    a = spd(2, 4, 4, dtype=dtype)
    b = mat(2, 4, 3, dtype=dtype, seed=1)
    compare(torch.linalg.cholesky_ex, a, upper=upper)
    l = torch.linalg.cholesky(a, upper=upper)
    compare(torch.cholesky_inverse, l, upper=upper)
    compare(torch.cholesky_solve, b, l, upper=upper)
    compare(torch.linalg.solve_triangular, l, b, upper=upper)
    compare(torch.linalg.solve_triangular, l, b.mT, upper=upper, left=False)
    compare(torch.triangular_solve, b, l, upper=upper, transpose=True)


def test_cholesky_info_not_positive_definite():
    a = torch.diag(torch.tensor([1.0, -1.0, 2.0]))
    got = torch.linalg.cholesky_ex(a.to("tpu")).info
    assert got.item() == torch.linalg.cholesky_ex(a).info.item() == 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (5, 3), (3, 5)])
def test_lu(dtype, shape):
    a = mat(*shape, dtype=dtype)
    compare(torch.linalg.lu_factor_ex, a)  # same pivots as LAPACK
    compare(torch.linalg.lu, a)
    lu, piv = torch.linalg.lu_factor(a)
    compare(torch.lu_unpack, lu, piv)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_users(dtype):
    a = well(2, 4, 4, dtype=dtype)
    b = mat(2, 4, 2, dtype=dtype, seed=2)
    compare(torch.linalg.det, a)
    compare(torch.linalg.slogdet, a)
    compare(torch.linalg.inv_ex, a)
    compare(torch.linalg.solve, a, b)
    compare(torch.linalg.solve, a, b.mT, left=False)
    compare(torch.linalg.solve, a, b[..., 0])  # batch of vectors
    lu, piv = torch.linalg.lu_factor(a)
    for left in (True, False):
        for adjoint in (True, False):
            compare(torch.linalg.lu_solve, lu, piv, b if left else b.mT, left=left,
                    adjoint=adjoint)


def test_singular_lu_info_and_det():
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    compare(torch.linalg.det, a)
    assert torch.linalg.lu_factor_ex(a.to("tpu")).info.item() == \
        torch.linalg.lu_factor_ex(a).info.item()


def test_det_backward_matches_cpu():
    a = well(3, 3, dtype=torch.float64)
    for x in (a, a.mT):  # contiguous (LU of A^T) and not
        w = x.clone().requires_grad_()
        torch.linalg.det(w).backward()
        t = x.to("tpu").requires_grad_()
        torch.linalg.det(t).backward()
        close(t.grad, w.grad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5)])
def test_qr(dtype, shape):
    a = mat(*shape, dtype=dtype)
    for mode in ("reduced", "complete", "r"):
        compare(torch.linalg.qr, a, mode=mode)
    compare(torch.geqrf, a)
    h, tau = torch.geqrf(a)
    if shape[-2] >= shape[-1]:
        compare(torch.linalg.householder_product, h, tau)
    c = mat(*shape[:-1], 2, dtype=dtype, seed=3)
    compare(torch.ormqr, h, tau, c, transpose=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 4, 5])
def test_eigh(dtype, n):
    a = spd(2, n, n, dtype=dtype) - n * torch.eye(n, dtype=dtype)
    compare(torch.linalg.eigvalsh, a)
    w, v = torch.linalg.eigh(a.to("tpu"))
    close(w, torch.linalg.eigvalsh(a))
    close(v @ torch.diag_embed(w) @ v.mT, a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 6)])
def test_svd(dtype, shape):
    a = mat(*shape, dtype=dtype)
    compare(torch.linalg.svdvals, a)
    compare(torch.linalg.pinv, a)
    compare(torch.linalg.matrix_norm, a, ord="nuc")
    for full in (False, True):
        u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=full)
        k = s.shape[-1]
        close(u[..., :k] * s.unsqueeze(-2) @ vh[..., :k, :], a)
        m = u.shape[-1]
        close(u.mT @ u, torch.eye(m, dtype=dtype).expand(u.mT.shape[:-1] + (m,)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp(dtype):
    compare(torch.linalg.matrix_exp, mat(2, 4, 4, dtype=dtype))
    compare(torch.linalg.matrix_exp, 10 * mat(3, 3, dtype=dtype, seed=4))


def test_cross_and_sgn():
    a, b = mat(4, 3, dtype=torch.float32), mat(4, 3, dtype=torch.float32, seed=5)
    compare(torch.linalg.cross, a, b)
    compare(torch.sgn, a)


def test_complex_is_unimplemented():
    a = torch.eye(2, dtype=torch.complex64).to("tpu")
    with pytest.raises(Exception, match="complex"):
        torch.linalg.cholesky(a)
