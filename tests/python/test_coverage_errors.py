"""Bad calls are refused on tpu as on the CPU, with the CPU's exception type.

The CI slice of PyTorch's OpInfo error inputs (python -m torch_tpu.coverage
--errors --fast), and one regression test per class of check tpu makes
itself: out= tensors sharing memory with an input, argument values, dtypes
and shapes that the CPU kernels check and PyTorch's meta kernels do not, and
the checks that read tensor data (at the op in debug eager, at the next
synchronization in strict and fused eager). Each also runs a valid
neighbouring call and compares it with the CPU."""
import json
import subprocess
import sys

import pytest
import torch

from torch_tpu.coverage import errors
from torch_tpu.mode import execution_mode

pytestmark = pytest.mark.usefixtures("no_fallback")

OVERLAP = "single memory location"


def _same_as_cpu(fn):
    """Runs |fn(device)| on tpu and on the CPU; the results must agree."""
    got, want = fn("tpu"), fn("cpu")
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def test_fast_slice(tmp_path):
    out = tmp_path / "errors.json"
    r = subprocess.run([sys.executable, "-m", "torch_tpu.coverage", "--errors", "--fast",
                        "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    records = errors.annotate([rec for rec in map(json.loads, out.read_text().splitlines())
                               if "done" in rec])
    counted = [rec for rec in records if rec["status"] != "cpu accepts"]
    assert len({(rec["op"], rec["input"]) for rec in counted}) >= 50, r.stdout
    bad = [rec for rec in counted if rec["status"] in ("silent", "crash", "hang")]
    assert not bad, bad
    for mode in errors.MODES:
        assert errors.same_rate(records, mode) >= 98.0, [
            rec for rec in counted if rec["mode"] == mode and rec["status"] != "same"]


# -- out= sharing memory with an input ---------------------------------------------

def _overlap_cases(dev):
    x = torch.arange(12.0, device=dev)
    i = torch.tensor([0, 2, 1], device=dev)
    m = torch.tensor([True, False] * 3, device=dev)
    return {
        "cat": lambda out: torch.cat([x[:3], x[3:6]], out=out),
        "gather": lambda out: torch.gather(x[:6], 0, i, out=out),
        "index_select": lambda out: torch.index_select(x[:6], 0, i, out=out),
        "take": lambda out: torch.take(x[:6], i, out=out),
        "masked_select": lambda out: torch.masked_select(x[:6], m, out=out),
    }, x


@pytest.mark.parametrize("op", ["cat", "gather", "index_select", "take", "masked_select"])
def test_out_overlapping_an_input_is_refused(op):
    cases, x = _overlap_cases("tpu")
    with pytest.raises(RuntimeError, match=OVERLAP):
        cases[op](x[:6] if op == "cat" else x[:3])  # out is (part of) the input
    with pytest.raises(RuntimeError, match=OVERLAP):
        n = 6 if op == "cat" else 3  # the result's size: out is not resized
        cases[op](torch.zeros(1, device="tpu").expand(n))  # out overlaps itself

    def valid(dev):  # out is another part of the same storage
        cases, x = _overlap_cases(dev)
        cases[op](x[6:12] if op == "cat" else x[8:11])
        return x
    _same_as_cpu(valid)


def test_pointwise_out_partially_overlapping_an_input_is_refused():
    x = torch.arange(6.0, device="tpu")
    with pytest.raises(RuntimeError, match=OVERLAP):
        torch.add(x[:3], 1, out=x[1:4])
    with pytest.raises(RuntimeError, match=OVERLAP):
        x[:3].mul_(x[1:4])

    def valid(dev):  # the same elements in place, and disjoint views
        x = torch.arange(6.0, device=dev)
        x.mul_(x)
        torch.add(x[:3], 1, out=x[3:])
        return x
    _same_as_cpu(valid)


def test_out_with_internal_overlap_is_refused():
    p = torch.full((6,), 0.5, device="tpu")
    with pytest.raises(RuntimeError, match=OVERLAP):
        torch.bernoulli(p, out=torch.zeros(1, device="tpu").expand(6))
    out = torch.empty(6, device="tpu")
    torch.bernoulli(p, out=out)
    assert set(out.cpu().tolist()) <= {0.0, 1.0}


# -- argument values, dtypes and shapes the CPU kernels check ----------------------

def test_multinomial_arguments():
    p = torch.tensor([0.2, 0.3, 0.5], device="tpu")
    with pytest.raises(RuntimeError, match="floating-point dtypes"):
        torch.multinomial(torch.ones(1, 2, dtype=torch.long, device="tpu"), 2)
    with pytest.raises(RuntimeError, match="expects Long tensor out"):
        torch.multinomial(p, 2, out=torch.empty(2, device="tpu"))
    with pytest.raises(RuntimeError, match="n_sample <= 0"):
        torch.multinomial(p, 0)
    with pytest.raises(RuntimeError, match="cannot exceed 2"):
        torch.multinomial(torch.ones(2 ** 24 + 1, device="tpu"), 1)
    out = torch.empty(0, dtype=torch.long, device="tpu")
    torch.multinomial(p, 2, out=out)
    got = out.cpu()
    assert got.shape == (2,) and got.dtype == torch.long
    assert ((got >= 0) & (got < 3)).all() and len(set(got.tolist())) == 2


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_multinomial_probabilities_are_checked(mode):
    with execution_mode(mode):
        for bad, replacement in (([0.5, -1.0, 0.5], False), ([0.5, float("inf"), 0.5], True),
                                 ([0.0, 0.0, 0.0], True)):
            with pytest.raises(RuntimeError, match="multinomial distribution|probability tensor"):
                torch.multinomial(torch.tensor(bad, device="tpu"), 2, replacement=replacement)
                torch.tpu.synchronize()
        got = torch.multinomial(torch.tensor([0.0, 1.0, 0.0], device="tpu"), 1).cpu()
        assert got.tolist() == [1]


# -- data checks: at the op in debug eager, at the next synchronization otherwise ------

LATER = "found at a later synchronization"

_BOUNDS = [  # (call with an out-of-range index, exception type, message)
    (lambda x: torch.gather(x, 1, torch.tensor([[0, 4]], device="tpu")), RuntimeError,
     r"index 4 is out of bounds for dimension 1 with size 4"),
    (lambda x: x.index_select(0, torch.tensor([3], device="tpu")), IndexError,
     r"index 3 is out of bounds for dimension 0 with size 3"),
    (lambda x: x[torch.tensor([-4], device="tpu")], IndexError, r"index -4 is out of bounds"),
    (lambda x: torch.zeros(3, device="tpu").scatter_add_(
        0, torch.tensor([5], device="tpu"), torch.ones(1, device="tpu")), RuntimeError,
     r"index 5 is out of bounds for dimension 0 with size 3"),
    (lambda x: torch.nn.functional.embedding(torch.tensor([[1, 7]], device="tpu"), x),
     IndexError, r"index 7 is out of bounds"),
    (lambda x: torch.nn.functional.cross_entropy(x, torch.tensor([0, 4, 1], device="tpu")),
     IndexError, r"Target 4 is out of bounds"),
    (lambda x: torch.nn.functional.nll_loss(x, torch.tensor([0, -1, -100], device="tpu")),
     IndexError, r"Target -1 is out of bounds"),
]


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("case", range(len(_BOUNDS)))
def test_index_bounds_are_checked(mode, case):
    call, kind, match = _BOUNDS[case]
    x = torch.randn(3, 4, device="tpu")
    with execution_mode(mode):
        with pytest.raises(kind, match=match) as info:
            call(x)
            x.sum().item()  # strict and fused: raised here
        assert (LATER in str(info.value)) == (mode != "debug")
        # Raised once: the device and later calls are unaffected. (A sum of
        # 12 f32 values of |x| < 5 in another order: within 12 * 5 * 2**-23.)
        torch.testing.assert_close(x.sum().cpu(), x.cpu().sum(), rtol=1e-5, atol=1e-5)


def test_checks_judge_values_as_they_were():
    # The range is taken when the op runs, not when it is judged.
    idx = torch.tensor([2], device="tpu")
    got = torch.randn(3, device="tpu").index_select(0, idx)
    idx.fill_(9)
    torch.tpu.synchronize()
    assert got.shape == (1,)
    with pytest.raises(IndexError, match="index 9"):
        torch.randn(3, device="tpu").index_select(0, idx)
        torch.tpu.synchronize()


def test_valid_targets_and_indices_pass():
    def run(dev):
        x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0)).to(dev)
        t = torch.tensor([0, -100, 4, 2], device=dev)
        loss = torch.nn.functional.cross_entropy(x, t, ignore_index=-100)
        all_ignored = torch.nn.functional.cross_entropy(x, torch.full((4,), 7, device=dev),
                                                        ignore_index=7)
        g = x.gather(1, torch.tensor([[4], [0], [1], [3]], device=dev))
        return torch.cat([loss.reshape(1), all_ignored.isnan().float().reshape(1),
                          g.reshape(-1), x[torch.tensor([-1, 0], device=dev)].reshape(-1)])
    _same_as_cpu(run)


def test_waiting_checks_are_bounded():
    # A loop that never synchronizes has its checks judged as they pile up.
    x = torch.randn(3, device="tpu")
    bad = torch.tensor([3], device="tpu")
    good = torch.tensor([1], device="tpu")
    with pytest.raises(IndexError, match=LATER):
        for i in range(2000):
            x.index_select(0, bad if i == 10 else good)
    torch.tpu.synchronize()


def test_uniform_range():
    x = torch.empty(100, device="tpu")
    with pytest.raises(RuntimeError, match=r"\[from, to\) range"):
        x.uniform_(3, -1)
    got = x.uniform_(-1, 3).cpu()
    assert ((got >= -1) & (got < 3)).all()


def test_masked_fill_value_must_fit_the_dtype():
    mask = torch.tensor([True, False], device="tpu")
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.zeros(2, device="tpu").masked_fill(mask, 1j)
    with pytest.raises(RuntimeError, match="without overflow"):  # a CPU value: read for free
        torch.zeros(2, dtype=torch.long, device="tpu").masked_fill(mask, torch.tensor(1e300))
    with execution_mode("debug"):  # a tpu value: read in debug mode
        with pytest.raises(RuntimeError, match="without overflow"):
            torch.zeros(2, dtype=torch.long, device="tpu").masked_fill(
                mask, torch.tensor(1e300, device="tpu"))
    _same_as_cpu(lambda dev: torch.zeros(2, device=dev).masked_fill(
        torch.tensor([True, False], device=dev), 2.5))
    _same_as_cpu(lambda dev: torch.zeros(2, dtype=torch.uint8, device=dev).masked_fill(
        torch.tensor([True, False], device=dev), -1))


def test_complex_needs_one_float_width():
    a32, a64 = torch.ones(3, device="tpu"), torch.ones(3, dtype=torch.float64, device="tpu")
    with pytest.raises(RuntimeError, match="scalar type Float but got scalar type Double"):
        torch.complex(a32, a64)
    with pytest.raises(RuntimeError, match="for argument 'out'"):
        torch.complex(a64, a64, out=torch.empty(3, dtype=torch.complex64, device="tpu"))
    _same_as_cpu(lambda dev: torch.complex(torch.arange(3.0, device=dev),
                                           torch.ones(3, device=dev)))


def test_layer_norm_shapes():
    x = torch.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        torch.native_layer_norm(x.to("tpu"), [], None, None, 1e-5)
    with pytest.raises(RuntimeError, match="weight to be of same shape"):
        torch.native_layer_norm(x.to("tpu"), [3, 4], torch.ones(3, device="tpu"), None, 1e-5)
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 2, 4\]"):
        torch.native_layer_norm(x.to("tpu"), [2, 4], None, None, 1e-5)
    _same_as_cpu(lambda dev: torch.native_layer_norm(
        x.to(dev), [3, 4], torch.ones(3, 4, device=dev), None, 1e-5)[0])


@pytest.mark.parametrize("kwargs,match", [
    (dict(padding=-1), "negative padding"),
    (dict(stride=0), "non-positive stride"),
    (dict(dilation=-1), "dilation should be greater than zero"),
])
def test_convolution_window_arguments(kwargs, match):
    x, w = torch.randn(1, 1, 6), torch.randn(1, 1, 2)
    with pytest.raises(RuntimeError, match=match):
        torch.nn.functional.conv1d(x.to("tpu"), w.to("tpu"), **kwargs)
    _same_as_cpu(lambda dev: torch.nn.functional.conv1d(x.to(dev), w.to(dev), padding=1,
                                                        dilation=2))


def test_other_cpu_argument_checks():
    x = torch.randn(3, 4, device="tpu")
    with pytest.raises(RuntimeError, match="approximate argument"):
        torch.nn.functional.gelu(x, approximate="asdf")
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(x, torch.zeros(2, 2, device="tpu"))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_scatter(torch.ones(3, 4, dtype=torch.uint8, device="tpu"), x)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float"):
        torch.aminmax(x, dim=0, out=(torch.empty(4, device="tpu"),
                                     torch.empty(4, dtype=torch.float64, device="tpu")))
    with pytest.raises(RuntimeError, match="dtype for input and out to match"):
        torch.amax(x, 0, out=torch.empty(4, dtype=torch.float64, device="tpu"))
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.logcumsumexp(x, 3)
    y = torch.randn(3, 4)
    _same_as_cpu(lambda dev: torch.nn.functional.gelu(y.to(dev), approximate="tanh"))
    _same_as_cpu(lambda dev: torch.bucketize(y.to(dev), torch.tensor([-1.0, 0.0, 1.0], device=dev)))
    _same_as_cpu(lambda dev: torch.logcumsumexp(y.to(dev), -1))
    _same_as_cpu(lambda dev: torch.amax(y.to(dev), 0, out=torch.empty(4, device=dev)))


# -- debug eager: index bounds ----------------------------------------------------

def test_index_bounds_raise_the_cpus_type_in_debug_mode():
    x = torch.randn(3, 4)
    bad = torch.tensor([[5, 0, 0, 0]])
    with execution_mode("debug"):
        # gather and scatter raise RuntimeError on the CPU, index_select IndexError.
        with pytest.raises(RuntimeError, match="out of bounds") as e:
            torch.gather(x.to("tpu"), 0, bad.to("tpu"))
        assert not isinstance(e.value, IndexError)
        with pytest.raises(IndexError):
            torch.index_select(x.to("tpu"), 0, torch.tensor([3], device="tpu"))
        _same_as_cpu(lambda dev: torch.gather(x.to(dev), 0, torch.tensor([[2, 0, 1, 0]],
                                                                         device=dev)))
