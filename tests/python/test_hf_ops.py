"""Ops that Hugging Face models reach on accelerators, against the CPU."""
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("lo,hi", [(0, 7), (2, 5), (0, 0)])
def test_histc_integer_input(dtype, lo, hi):
    # MoE routers count expert ids with histc on an int tensor (CUDA accepts
    # it; the CPU does not): the reference is the CPU on the same values as
    # float, counted in the input's type. Counts are exact.
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 8, (3, 37), generator=g).to(dtype)
    got = torch.histc(x.to("tpu"), bins=8, min=lo, max=hi)
    want = torch.histc(x.float(), bins=8, min=lo, max=hi).to(dtype)
    assert got.dtype == dtype
    assert torch.equal(got.cpu(), want)


def test_histc_bool_is_rejected_with_the_op_name():
    with pytest.raises((ValueError, RuntimeError), match="histc"):
        torch.histc(torch.ones(4, dtype=torch.bool, device="tpu"), bins=2).cpu()
