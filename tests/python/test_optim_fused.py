"""torch.optim.Adam/AdamW(fused=True) (Hugging Face Trainer's default
optimizer) run natively on tpu and match PyTorch's CPU fused kernels.

Tolerances: float32 parameters move by lr-sized steps computed from the same
formulas in a different order (the CPU kernel rounds its coefficients from
float64, tpu forms them in float32), so they agree to a few ulps of the
parameter (atol 1e-6 on values of order 1) and the second moments to 1e-6
relative. bfloat16 states are rounded to 8 bits after float32 arithmetic on
both sides and agree to one bfloat16 ulp."""
import pytest
import torch

pytestmark = pytest.mark.usefixtures("no_fallback")

SHAPES = [(4, 3), (7,), (2, 2, 5)]


def _train(device, opt_cls, dtype, steps=3, **kw):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, dtype=dtype).to(device)) for s in SHAPES]
    opt = opt_cls(params, fused=True, **kw)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g, dtype=dtype).to(device)
        opt.step()
    state = [opt.state[p] for p in params]
    return ([p.detach().cpu() for p in params],
            [s["exp_avg"].cpu() for s in state],
            [s["exp_avg_sq"].cpu() for s in state])


def _close(got, want, dtype, rel=False):
    for a, b in zip(got, want):
        assert a.dtype == b.dtype == dtype
        if dtype == torch.bfloat16:
            torch.testing.assert_close(a, b, atol=0, rtol=2 ** -7)
        elif rel:
            torch.testing.assert_close(a, b, atol=0, rtol=1e-6)
        else:
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1},
                                {"amsgrad": True, "weight_decay": 0.01},
                                {"maximize": True}, {"lr": "tensor"}],
                         ids=["plain", "decay", "amsgrad", "maximize", "tensor_lr"])
def test_fused_adam_matches_cpu(opt_cls, dtype, kw):
    if kw.get("lr") == "tensor":
        kw = {"lr": torch.tensor(0.01)}
    p_tpu, m_tpu, v_tpu = _train("tpu", opt_cls, dtype, **kw)
    p_cpu, m_cpu, v_cpu = _train("cpu", opt_cls, dtype, **kw)
    _close(p_tpu, p_cpu, dtype)
    _close(m_tpu, m_cpu, dtype)
    _close(v_tpu, v_cpu, dtype, rel=True)


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
def test_fused_adamw_unscales_and_skips_like_cpu(found_inf):
    # GradScaler passes grad_scale (grads are unscaled in place) and found_inf
    # (1 leaves every tensor untouched).
    def step(device):
        torch.manual_seed(0)
        p, g, m, v = (torch.randn(5, 4).to(device) for _ in range(4))
        v = v.abs()
        steps = [torch.tensor(2.0, device=device)]
        torch._fused_adamw_([p], [g], [m], [v], [], steps, lr=0.01, beta1=0.9,
                            beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False,
                            maximize=False, grad_scale=torch.tensor(8.0, device=device),
                            found_inf=torch.tensor(found_inf, device=device))
        return [t.cpu() for t in (p, g, m, v)]
    for got, want in zip(step("tpu"), step("cpu")):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


def test_mismatched_lists_name_the_op():
    p = [torch.zeros(3, device="tpu")]
    with pytest.raises(ValueError, match="_fused_adamw_.*shape"):
        torch._fused_adamw_(p, [torch.zeros(4, device="tpu")], [torch.zeros(3, device="tpu")],
                            [torch.zeros(3, device="tpu")], [],
                            [torch.tensor(1.0, device="tpu")], lr=0.1, beta1=0.9,
                            beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False,
                            maximize=False)


def _train_state(device, opt_cls, dtype, state_key, steps=3, round_to=None, **kw):
    """Parameters and one state list after |steps| fused steps. With
    |round_to|, the step runs in |dtype| and parameters and state are rounded
    to |round_to| after each step: the fused kernels' arithmetic for
    low-precision tensors (opmath float32, one rounding on store)."""
    torch.manual_seed(0)
    store = round_to or dtype
    params = [torch.nn.Parameter(torch.randn(*s, dtype=store).to(device, dtype))
              for s in SHAPES]
    if isinstance(kw.get("lr"), torch.Tensor):
        kw["lr"] = kw["lr"].to(device)
    opt = opt_cls(params, fused=True, **kw)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g, dtype=store).to(device, dtype)
        opt.step()
        for p in params if round_to else ():
            p.data = p.data.to(round_to).to(dtype)
            for k, v in opt.state[p].items():
                if k != "step" and isinstance(v, torch.Tensor) and v.is_floating_point():
                    v.copy_(v.to(round_to))
    state = [opt.state[p][state_key].cpu().to(store) for p in params] if state_key else []
    return [p.detach().cpu().to(store) for p in params], state


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True,
                                                       "weight_decay": 0.1},
                                {"momentum": 0.8, "dampening": 0.3, "maximize": True},
                                {"lr": "tensor", "momentum": 0.9}],
                         ids=["plain", "momentum", "nesterov_decay", "dampening_maximize",
                              "tensor_lr"])
def test_fused_sgd_matches_cpu(dtype, kw):
    kw = dict(kw, lr=torch.tensor(0.05) if kw.get("lr") == "tensor" else 0.05)
    key = "momentum_buffer" if kw.get("momentum") else None
    p_tpu, b_tpu = _train_state("tpu", torch.optim.SGD, dtype, key, **kw)
    # PyTorch's CPU fused SGD leaves half-precision parameters unchanged in
    # its vectorised loop (torch 2.13: only the tail elements move), so the
    # bfloat16 reference is its float32 kernel rounded after each step.
    ref = dict(dtype=torch.float32, round_to=dtype) if dtype == torch.bfloat16 else {}
    p_cpu, b_cpu = _train_state("cpu", torch.optim.SGD, ref.pop("dtype", dtype), key, **ref,
                                **kw)
    _close(p_tpu, p_cpu, dtype)
    _close(b_tpu, b_cpu, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [{}, {"lr_decay": 0.3, "weight_decay": 0.1},
                                {"initial_accumulator_value": 0.1, "maximize": True},
                                {"lr": "tensor", "lr_decay": 0.2}],
                         ids=["plain", "decay", "accumulator_maximize", "tensor_lr"])
def test_fused_adagrad_matches_cpu(dtype, kw):
    kw = dict(kw, lr=torch.tensor(0.05) if kw.get("lr") == "tensor" else 0.05)
    p_tpu, s_tpu = _train_state("tpu", torch.optim.Adagrad, dtype, "sum", **kw)
    p_cpu, s_cpu = _train_state("cpu", torch.optim.Adagrad, dtype, "sum", **kw)
    _close(p_tpu, p_cpu, dtype)
    _close(s_tpu, s_cpu, dtype, rel=True)


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize("op", ["sgd", "adagrad"])
def test_fused_sgd_adagrad_unscale_and_skip_like_cpu(op, found_inf):
    def step(device):
        torch.manual_seed(0)
        p, g, s = (torch.randn(5, 4).to(device) for _ in range(3))
        scale = dict(grad_scale=torch.tensor(8.0, device=device),
                     found_inf=torch.tensor(found_inf, device=device))
        if op == "sgd":
            torch._fused_sgd_([p], [g], [s], weight_decay=0.01, momentum=0.9, lr=0.1,
                              dampening=0.0, nesterov=True, maximize=False,
                              is_first_step=False, **scale)
        else:
            s = s.abs()
            torch._fused_adagrad_([p], [g], [s], [torch.tensor(2.0, device=device)], lr=0.1,
                                  lr_decay=0.1, weight_decay=0.01, eps=1e-10,
                                  maximize=False, **scale)
        return [t.cpu() for t in (p, g, s)]
    for got, want in zip(step("tpu"), step("cpu")):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


def test_fused_sgd_without_buffers_for_momentum_names_the_op():
    p = [torch.zeros(3, device="tpu")]
    with pytest.raises(ValueError, match="_fused_sgd_.*momentum buffers"):
        torch._fused_sgd_(p, [torch.zeros(3, device="tpu")], [], weight_decay=0.0,
                          momentum=0.9, lr=0.1, dampening=0.0, nesterov=False,
                          maximize=False, is_first_step=False)
