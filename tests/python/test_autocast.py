"""torch.autocast("tpu") and torch.amp.GradScaler("tpu"): ATen's CUDA cast
policies on the tpu device, eager and compiled, against the CPU computing
the same ops on inputs cast by hand.

Tolerances: a lower-precision result is compared with the CPU's op on the
same lower-precision inputs. XLA and the CPU may accumulate a product in a
different order and round the result once more, so two units of the
format's precision (bf16: 2 * 2**-8, fp16: 2 * 2**-11) relative, with an
absolute floor of the same size for values near zero."""
import copy

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("no_fallback")

LOW = [torch.bfloat16, torch.float16]
TOL = {torch.bfloat16: dict(rtol=2 ** -7, atol=2 ** -7),
       torch.float16: dict(rtol=2 ** -10, atol=2 ** -10),
       torch.float32: dict(rtol=1e-5, atol=1e-5)}


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(4, 8, generator=g), "w": torch.randn(6, 8, generator=g),
        "b": torch.randn(6, generator=g), "m": torch.randn(8, 5, generator=g),
        "bx": torch.randn(3, 4, 8, generator=g), "bm": torch.randn(3, 8, 2, generator=g),
        "img": torch.randn(2, 3, 6, 6, generator=g), "k": torch.randn(4, 3, 3, 3, generator=g),
        "q": torch.randn(2, 2, 5, 8, generator=g),
    }


# (name, fn, policy): "low" casts float inputs to the autocast dtype, "fp32"
# to float32, "keep" leaves them as they are.
CASES = [
    ("linear", lambda t: F.linear(t["x"], t["w"], t["b"]), "low"),
    ("mm", lambda t: t["x"] @ t["m"], "low"),
    ("bmm", lambda t: torch.bmm(t["bx"], t["bm"]), "low"),
    ("addmm", lambda t: torch.addmm(t["b"][:5], t["x"], t["m"]), "low"),
    ("conv2d", lambda t: F.conv2d(t["img"], t["k"], padding=1), "low"),
    ("sdpa", lambda t: F.scaled_dot_product_attention(t["q"], t["q"], t["q"], is_causal=True),
     "low"),
    ("exp", lambda t: torch.exp(t["x"]), "fp32"),
    ("softmax", lambda t: torch.softmax(t["x"], -1), "fp32"),
    ("layer_norm", lambda t: F.layer_norm(t["x"], (8,)), "fp32"),
    ("mse_loss", lambda t: F.mse_loss(t["x"], t["x"].flip(0)), "fp32"),
    ("sum", lambda t: t["x"].sum(), "fp32"),
    ("relu", lambda t: torch.relu(t["x"]), "keep"),
]


def _cast(inputs, dtype):
    return {k: v.to(dtype) for k, v in inputs.items()}


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name,fn,policy", CASES, ids=[c[0] for c in CASES])
def test_cast_policy_matches_cuda_policy(name, fn, policy, dtype):
    inputs = _inputs()
    on_tpu = {k: v.to("tpu") for k, v in inputs.items()}
    with torch.autocast("tpu", dtype=dtype):
        got = fn(on_tpu)
    want_dtype = {"low": dtype, "fp32": torch.float32, "keep": torch.float32}[policy]
    assert got.dtype == want_dtype, (name, got.dtype)
    want = fn(_cast(inputs, dtype) if policy == "low" else inputs)
    torch.testing.assert_close(got.cpu(), want.to(want_dtype), **TOL[want_dtype])


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_lower_precision_inputs_run_fp32_ops_in_fp32(dtype):
    x = torch.randn(4, 8).to(dtype)
    with torch.autocast("tpu", dtype=dtype):
        soft = torch.softmax(x.to("tpu"), -1)
        mixed = torch.addcmul(x.to("tpu"), torch.randn(4, 8, device="tpu"),
                              torch.randn(4, 8, device="tpu"))  # promote: the widest
        kept = torch.relu(x.to("tpu"))
    assert soft.dtype == torch.float32 and mixed.dtype == torch.float32 and kept.dtype == dtype
    torch.testing.assert_close(soft.cpu(), torch.softmax(x.float(), -1), **TOL[torch.float32])


def test_default_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    with torch.autocast("tpu"):
        assert F.linear(torch.randn(2, 3, device="tpu"),
                        torch.randn(4, 3, device="tpu")).dtype == torch.bfloat16


def test_outside_autocast_nothing_is_cast():
    with torch.autocast("tpu"):
        pass
    assert F.linear(torch.randn(2, 3, device="tpu"),
                    torch.randn(4, 3, device="tpu")).dtype == torch.float32
    with torch.autocast("tpu", enabled=False):
        assert (torch.randn(2, 3, device="tpu") @ torch.randn(3, 2, device="tpu")).dtype == \
            torch.float32


def test_binary_cross_entropy_is_refused_with_the_safe_alternative():
    p, y = torch.rand(4, device="tpu"), torch.rand(4, device="tpu")
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="unsafe to autocast.*"
                                                                  "binary_cross_entropy_with_logits"):
        F.binary_cross_entropy(p, y)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), \
            torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.norm(F.gelu(self.fc1(x))))


def _loss(model, x, y):
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        return F.cross_entropy(model(x), y)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_training_step_under_autocast_matches_cpu(compiled, fresh_dynamo):
    """Forward under autocast, backward outside it: float32 gradients of the
    float32 parameters, as on the CPU (whose autocast casts the same ops of
    this model: linear to bf16, layer_norm and the loss in float32)."""
    torch.manual_seed(0)
    ref = _Net()
    model = copy.deepcopy(ref).to("tpu")
    x, y = torch.randn(6, 8), torch.randint(0, 3, (6,))
    want = _loss(ref, x, y)
    want.backward()
    fn = torch.compile(_loss, backend="tpu") if compiled else _loss
    got = fn(model, x.to("tpu"), y.to("tpu"))
    got.backward()
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), want.detach(), **TOL[torch.bfloat16])
    for (name, p), pr in zip(model.named_parameters(), ref.parameters()):
        assert p.grad.dtype == torch.float32, name
        # gradients through two bf16 products: relative to their scale
        scale = pr.grad.abs().max().item()
        torch.testing.assert_close(p.grad.cpu(), pr.grad, rtol=2 ** -6, atol=2 ** -6 * scale)


# -- GradScaler ------------------------------------------------------------------

UPDATE_CASES = [  # found_inf, growth_tracker, growth_interval, scale
    (0.0, 0, 2, 65536.0), (0.0, 1, 2, 65536.0), (1.0, 1, 2, 65536.0),
    (0.0, 5, 3, 65536.0), (float("inf"), 0, 2, 65536.0),
    (0.0, 1, 2, 3e38),  # growing would overflow float32: the scale stays
]


@pytest.mark.parametrize("found,tracker,interval,scale", UPDATE_CASES)
def test_amp_update_scale_matches_cpu(found, tracker, interval, scale):
    def run(device):
        s = torch.full((), scale, device=device)
        g = torch.full((), tracker, dtype=torch.int32, device=device)
        torch._amp_update_scale_(s, g, torch.full((), found, device=device), 2.0, 0.5, interval)
        return s.cpu(), g.cpu()

    assert run("tpu") == run("cpu")


def test_amp_unscale_and_non_finite_check_match_cpu():
    def run(device, values):
        xs = [v.to(device) for v in values]
        found = torch.zeros(1, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(xs, found, torch.full((1,), 0.25,
                                                                              device=device))
        return [x.cpu() for x in xs], found.cpu()

    finite = [torch.randn(3, 4), torch.randn(5).to(torch.bfloat16), torch.randn(2, 2, 2).half()]
    for values in (finite, finite + [torch.tensor([1.0, float("nan")])],
                   [torch.tensor([float("-inf")]), torch.randn(3)]):
        got, want = run("tpu", values), run("cpu", values)
        assert torch.equal(got[1], want[1])
        for g, w in zip(got[0], want[0]):
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


def test_grad_scaler_training_skips_overflowing_steps():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("tpu", init_scale=2.0 ** 10, growth_interval=2)

    def step(x):
        opt.zero_grad()
        with torch.autocast("tpu", dtype=torch.float16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    before = model.weight.detach().cpu()
    for _ in range(2):
        step(torch.randn(4, 8, device="tpu"))
    assert scaler.get_scale() == 2.0 ** 11  # two good steps: grown once
    assert not torch.equal(model.weight.detach().cpu(), before)
    before = model.weight.detach().cpu()
    step(torch.full((4, 8), 6e4, device="tpu"))  # fp16 overflow: the step is skipped
    assert torch.equal(model.weight.detach().cpu(), before)
    assert scaler.get_scale() == 2.0 ** 10


def test_grad_scaler_ops_in_a_compiled_graph(fresh_dynamo):
    """AOTAutograd turns the in-place ops into their functional forms."""
    def unscale_and_update(grads, found, inv, scale, tracker):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 1)
        return grads[0] * 1

    def args(device):
        return ([torch.tensor([2.0, 4.0], device=device), torch.tensor([float("inf")],
                                                                       device=device)],
                torch.zeros(1, device=device), torch.full((1,), 0.5, device=device),
                torch.full((), 8.0, device=device),
                torch.zeros((), dtype=torch.int32, device=device))

    want_args, got_args = args("cpu"), args("tpu")
    want = unscale_and_update(*want_args)
    got = torch.compile(unscale_and_update, backend="tpu")(*got_args)
    torch.testing.assert_close(got.cpu(), want)
    for g, w in zip(got_args[1:], want_args[1:]):
        assert torch.equal(g.cpu(), w)
    for g, w in zip(got_args[0], want_args[0]):
        assert torch.equal(g.cpu(), w)


# -- torch.tpu.amp: the names torch.cuda.amp code uses ---------------------------------

def test_tpu_amp_names_eager_and_compiled(fresh_dynamo):
    model = torch.nn.Linear(4, 3).to("tpu")
    x = torch.randn(2, 4, device="tpu")
    with torch.tpu.amp.autocast():
        assert model(x).dtype == torch.bfloat16
    with torch.tpu.amp.autocast(dtype=torch.float16):
        assert model(x).dtype == torch.float16
    with torch.tpu.amp.autocast(enabled=False):
        assert model(x).dtype == torch.float32

    @torch.compile(backend="tpu", fullgraph=True)
    def forward(x):
        with torch.tpu.amp.autocast():
            return model(x)

    got = forward(x)
    assert got.dtype == torch.bfloat16
    with torch.tpu.amp.autocast():
        torch.testing.assert_close(got.cpu(), model(x).cpu(), rtol=0, atol=0)
    scaler = torch.tpu.amp.GradScaler(init_scale=8.0)
    assert scaler.get_scale() == 8.0 and scaler.scale(torch.ones((), device="tpu")).item() == 8.0


def test_tpu_amp_custom_fwd_casts_inputs():
    class Double(torch.autograd.Function):
        @staticmethod
        @torch.tpu.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            assert not torch.is_autocast_enabled("tpu")  # cast_inputs runs it outside
            return x * 2

        @staticmethod
        @torch.tpu.amp.custom_bwd
        def backward(ctx, grad):
            return grad * 2

    x = torch.randn(3, device="tpu", dtype=torch.bfloat16, requires_grad=True)
    with torch.tpu.amp.autocast():
        y = Double.apply(x)
    assert y.dtype == torch.float32
    y.sum().backward()
    assert torch.equal(x.grad.cpu(), torch.full((3,), 2.0, dtype=torch.bfloat16))
