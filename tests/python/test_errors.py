"""Bad input: clear Python exceptions naming the op, shapes and dtypes."""
import pytest
import torch


def test_shape_mismatch_names_shapes():
    a, b = torch.ones(3, 4, device="tpu"), torch.ones(5, device="tpu")
    with pytest.raises(RuntimeError, match=r"size of tensor a \(4\) must match .* \(5\)"):
        a + b
    with pytest.raises(RuntimeError, match=r"3x4 and 5x2|mat1 and mat2 shapes"):
        torch.mm(a, torch.ones(5, 2, device="tpu"))


def test_unsupported_dtype_names_op_and_dtype():
    with pytest.raises(TypeError, match=r"complex32|ComplexHalf"):
        torch.empty(3, dtype=torch.complex32, device="tpu")


def test_mixed_devices_rejected():
    with pytest.raises(RuntimeError, match="same device|device"):
        torch.ones(3, device="tpu") + torch.ones(3)


def test_inplace_on_overlapping_view_rejected():
    x = torch.zeros(1, device="tpu").expand(4)
    with pytest.raises(RuntimeError, match="single memory location"):
        x.add_(1)


def test_debug_mode_reports_at_the_op():
    from torch_tpu.mode import execution_mode
    with execution_mode("debug"):
        y = (torch.ones(4, device="tpu") * 2).sum()
        assert y.item() == 8.0


@pytest.mark.parametrize("make", [
    lambda: torch.linspace(0, 1 + 2j, 5, device="tpu"),
    lambda: torch.logspace(0, 1j, 5, device="tpu", dtype=torch.complex64),
    lambda: torch.logcumsumexp(torch.ones(3, 4, dtype=torch.complex64, device="tpu"), 0),
])
def test_complex_sequences_are_cleanly_unsupported(monkeypatch, make):
    # Not lowered for complex: an UNIMPLEMENTED error naming op and dtype
    # (NotImplementedError), never an internal error or a silent CPU run.
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    with pytest.raises(NotImplementedError, match=r"aten::\w+.*c64.*not supported"):
        make()


@pytest.mark.parametrize("rows", [0, 2])
def test_nll_loss_weight_dtype_must_match_the_input(rows):
    # The CPU and CUDA kernels reject class weights of another dtype, even
    # for an empty input (PyTorch's meta kernel does not): tpu too.
    def call(device):
        torch.nn.functional.nll_loss(torch.randn(rows, 3, device=device),
                                     torch.zeros(rows, dtype=torch.long, device=device),
                                     weight=torch.ones(3, dtype=torch.half, device=device))

    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="expected scalar type Float but found Half"):
            call(device)


def test_multi_margin_loss_target_size_error_is_the_cpus():
    # One target per input row; the message is the CPU kernel's (PyTorch's
    # meta kernel words it otherwise).
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=r"target tensor should be 1-D with size equal to.*"
                                                r"Expected target size \[5\], but got \[3\]"):
            torch.nn.functional.multi_margin_loss(torch.randn(5, 10, device=device),
                                                  torch.tensor([0, 1, 2], device=device))
    # A well-shaped call still runs.
    x, t = torch.randn(5, 10), torch.tensor([0, 1, 2, 3, 4])
    torch.testing.assert_close(torch.nn.functional.multi_margin_loss(x.to("tpu"), t.to("tpu")).cpu(),
                               torch.nn.functional.multi_margin_loss(x, t))
