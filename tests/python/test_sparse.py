"""Sparse COO tensors on tpu against the CPU: construction, coalescing,
masking, adding into dense tensors, moving between devices, sparse
gradients of embeddings and SparseAdam. Other sparse layouts are refused."""
import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("no_fallback")

INDICES = [[0, 1, 1, 2, 0], [3, 0, 0, 1, 3]]  # (0, 3) and (1, 0) twice


def _sparse(dev, dense_dims=()):
    g = torch.Generator().manual_seed(0)
    values = torch.randn(5, *dense_dims, generator=g)
    return torch.sparse_coo_tensor(torch.tensor(INDICES), values, (3, 4, *dense_dims),
                                   check_invariants=True).to(dev)


def _both(fn):
    """fn(device) on tpu and on the CPU; dense results compared (sparse ones
    by indices, values and flags)."""
    got, want = fn("tpu"), fn("cpu")
    if isinstance(want, torch.Tensor) and want.is_sparse:
        assert got.is_sparse and got.device.type == "tpu"
        assert (got.sparse_dim(), got.dense_dim()) == (want.sparse_dim(), want.dense_dim())
        got = got.cpu()
        if not want.is_coalesced():  # duplicates may be kept or summed: same tensor
            got, want = got.coalesce(), want.coalesce()
        assert got.is_coalesced() and want.is_coalesced()
        assert torch.equal(got._indices(), want._indices())
        torch.testing.assert_close(got._values(), want._values())
        return
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("dense_dims", [(), (2,)])
def test_coalesce_sums_duplicates_in_order(dense_dims):
    _both(lambda dev: _sparse(dev, dense_dims).coalesce())


def test_dense_plus_sparse_and_to_dense():
    _both(lambda dev: torch.ones(3, 4, device=dev) + _sparse(dev))
    _both(lambda dev: torch.ones(3, 4, device=dev).add_(_sparse(dev), alpha=-0.5))
    _both(lambda dev: _sparse(dev, (2,)).to_dense())
    _both(lambda dev: (-_sparse(dev)).to_dense())


def test_sparse_plus_sparse_stays_uncoalesced():
    _both(lambda dev: _sparse(dev) + _sparse(dev).coalesce())
    _both(lambda dev: (_sparse(dev) + _sparse(dev)).coalesce())


def test_sparse_mask_takes_the_dense_values_at_the_indices():
    dense = torch.randn(3, 4, 2)
    _both(lambda dev: dense.to(dev).sparse_mask(_sparse(dev, (2,)).coalesce()))


def test_dense_to_sparse_and_across_devices():
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    _both(lambda dev: x.to(dev).to_sparse())
    _both(lambda dev: x.to(dev).to_sparse(1))
    _both(lambda dev: x.to(dev).to_sparse(dense_dim=1))
    _both(lambda dev: torch.zeros(2, 3, device=dev).to_sparse())
    moved = _sparse("cpu").to("tpu")
    assert moved.is_sparse and moved.device.type == "tpu"
    torch.testing.assert_close(moved.to_dense().cpu(), _sparse("cpu").to_dense())


@pytest.mark.parametrize("mode", ["for-loop", "maximize", "padding_idx"])
def test_sparse_adam_on_embedding_gradients(mode):
    def train(dev):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 4, sparse=True,
                                 padding_idx=3 if mode == "padding_idx" else None).to(dev)
        opt = torch.optim.SparseAdam(emb.parameters(), lr=0.05, maximize=mode == "maximize")
        x = torch.tensor([[1, 3, 3, 7], [1, 0, 9, 3]], device=dev)
        for _ in range(4):
            opt.zero_grad()
            emb(x).pow(2).sum().backward()
            assert emb.weight.grad.is_sparse
            opt.step()
        return emb.weight.detach()
    _both(train)


def test_embedding_bag_sparse_gradient():
    def grad(dev):
        torch.manual_seed(0)
        bag = torch.nn.EmbeddingBag(10, 3, mode="sum", sparse=True).to(dev)
        bag(torch.tensor([1, 2, 4, 5, 4, 3], device=dev),
            torch.tensor([0, 3], device=dev)).sum().backward()
        return bag.weight.grad.to_dense()
    _both(grad)


def test_bad_sparse_calls_raise_as_on_cpu():
    for dev in ("cpu", "tpu"):
        s, d = _sparse(dev), torch.ones(3, 4, device=dev)
        with pytest.raises(RuntimeError, match="add\\(sparse, dense\\) is not supported"):
            s + d
        with pytest.raises(RuntimeError, match="same size|incompatible|size"):
            torch.ones(3, 5, device=dev) + s
        with pytest.raises(RuntimeError, match="incompatible sizes"):
            torch.ones(2, 4, device=dev).sparse_mask(s.coalesce())


def test_compressed_layouts_are_refused():
    x = torch.ones(2, 2, device="tpu")
    for convert in (x.to_sparse_csr, x.to_sparse_csc, lambda: x.to_sparse_bsr(1)):
        with pytest.raises(NotImplementedError, match="other than COO"):
            convert()
