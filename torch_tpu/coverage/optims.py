"""Optimizers against PyTorch's OptimInfo database (``optim_db``).

    python -m torch_tpu.coverage --optims                 # every configuration
    python -m torch_tpu.coverage --optims --fast          # the CI slice
    python -m torch_tpu.coverage --optims --names Adam,SGD -v

Every optimizer configuration PyTorch tests (each ``OptimizerInput`` of each
``OptimizerInfo``) trains the same small model for ``--steps`` steps on the CPU
and on ``tpu`` (CPU fallback off), once per implementation the optimizer
supports:

* ``for-loop`` (``foreach=False``), ``foreach``, ``fused`` (``fused=True``
  runs natively on tpu, as CUDA users set it);
* ``differentiable``: the step is part of the autograd graph; the gradient of
  the final parameters with respect to the initial ones is compared too;
* ``capturable``: optimizer state stays on the device;
* ``compiled``: the whole step (forward, backward, ``optimizer.step()``)
  inside ``torch.compile(backend="tpu")``, with ``capturable=True`` where the
  optimizer has the flag;
* ``scheduler N``: the default configuration with the Nth LR-scheduler
  combination of the OptimizerInfo stepping after each optimizer step.

The CPU runs the same implementation where it has one, else the for-loop
one (``capturable`` and ``fused`` on the CPU mean the same arithmetic). After
the steps, every parameter and every floating-point state tensor is compared.
Statuses as in the op_db section: pass, mismatch, unsupported (the backend
said so), error (anything else, or the worker crashed or hung), skip (the CPU
rejects the configuration, e.g. a flag combination PyTorch forbids).

Tolerance, float32 (float64 for the differentiable rows, whose derivatives
through ``m / (sqrt(v) + eps)`` amplify float32 rounding; PyTorch checks them
in float64 too): rtol = atol = 1e-5 (1e-7). Each step is a chain of ~10
elementwise operations and a few reductions (the loss, LBFGS's dot products,
Adafactor's row means, Muon's Newton-Schulz matmuls); XLA fuses and
reassociates them, so results drift by a few ulp per step from the CPU's.
"""
import collections
import os
import sys
import time

from .ops import _classify_exception, _compare, plugin_in_use

STEPS = 5
FAST_NAMES = ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "LBFGS", "SparseAdam"]


def _optim_db():
    from .ops import _op_db
    _op_db()  # the same friendly error if torch.testing._internal cannot import
    from torch.testing._internal.common_optimizers import optim_db
    return optim_db


def _impls(info):
    impls = ["for-loop"]
    if "foreach" in info.supported_impls:
        impls.append("foreach")
    if "fused" in info.supported_impls:
        impls.append("fused")
    if "differentiable" in info.supported_impls:
        impls.append("differentiable")
    if info.has_capturable_arg:
        impls.append("capturable")
    if not info.only_supports_sparse_grads:
        impls.append("compiled")
    return impls


def configurations(fast=False, names=()):
    """[(optim name, input desc, impl)] in a fixed order (workers index it)."""
    rows = []
    for info in _optim_db():
        name = info.optim_cls.__name__
        if (names and name not in names) or (fast and name not in FAST_NAMES):
            continue
        inputs = info.optim_inputs_func(device="cpu")
        for inp in inputs[:2] if fast else inputs:
            for impl in _impls(info):
                if impl == "compiled" and inp.desc != "default" and not fast:
                    # The compiled step follows the eager one: the default
                    # configuration and every scheduler row are enough.
                    continue
                if fast and impl in ("differentiable", "compiled") and inp.desc != "default":
                    continue
                rows.append((name, inp.desc, impl))
        for k in range(len(info.scheduler_inputs) if not fast else 0):
            rows.append((name, "default", f"scheduler {k}"))
    return rows


def _model(info, device, dtype):
    import torch
    torch.manual_seed(0)
    if info.only_supports_sparse_grads:
        model = torch.nn.Embedding(10, 4, sparse=True)
    else:
        # Linear layers (2-D weights for Muon, which takes matrices only) and
        # a bias, through a nonlinearity, so the loss surface is curved.
        model = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.Tanh(),
                                    torch.nn.Linear(6, 3, bias=False))
    return model.to(device, dtype)


def _params(info, model):
    if info.optim_cls.__name__ == "Muon":
        return [p for p in model.parameters() if p.ndim == 2]
    return list(model.parameters())


def _loss(info, model, x, target):
    if info.only_supports_sparse_grads:
        return (model(x) - target).pow(2).sum()
    return ((model(x) - target) ** 2).mean()


def _data(info, device, dtype):
    import torch
    g = torch.Generator().manual_seed(1)
    if info.only_supports_sparse_grads:
        x = torch.randint(0, 10, (7,), generator=g)
        target = torch.randn(7, 4, generator=g)
    else:
        x = torch.randn(8, 5, generator=g).to(dtype)
        target = torch.randn(8, 3, generator=g)
    return x.to(device), target.to(device, dtype)


def _kwargs(info, desc, impl, device):
    import torch
    inp = next(i for i in info.optim_inputs_func(device=device) if i.desc == desc)
    kw = dict(inp.kwargs)
    # Tensor hyperparameters (a tensor lr) live where the optimizer runs.
    kw = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    flag = {"for-loop": "foreach", "foreach": "foreach", "fused": "fused",
            "differentiable": "differentiable", "capturable": "capturable"}.get(impl)
    if impl == "for-loop" and "foreach" in info.supported_impls:
        kw["foreach"] = False
    elif impl == "foreach":
        kw["foreach"] = True
    elif flag in ("fused", "differentiable", "capturable"):
        kw[flag] = True
    elif impl == "compiled" and info.has_capturable_arg and device != "cpu":
        kw["capturable"] = True
    if device == "cpu" and impl == "capturable":
        kw.pop("capturable")  # the CPU has no capturable mode: same arithmetic
    return kw


def _state_tensors(opt):
    import torch
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            for k, v in sorted(opt.state.get(p, {}).items()):
                if isinstance(v, torch.Tensor) and v.is_floating_point():
                    out.append((k, v.detach()))
    return out


def train(info, desc, impl, device, steps=STEPS, dtype=None):
    """(parameters, optimizer state) after |steps| steps; for the
    differentiable implementation the parameters are followed by the
    gradients of its last step (see _last_step_grads)."""
    import torch
    dtype = dtype or torch.float32
    model = _model(info, device, dtype)
    x, target = _data(info, device, dtype)
    kw = _kwargs(info, desc, impl, device)
    differentiable = impl == "differentiable"
    # A differentiable optimizer steps in grad mode: its parameters must not
    # be leaves that require grad, so it trains detached copies.
    params = _params(info, model)
    if differentiable:
        params = [p.detach().clone() for p in params]
    opt = info.optim_cls(params, **kw)
    schedulers = []
    if impl.startswith("scheduler "):
        for make in info.scheduler_inputs[int(impl.split()[1])]:
            schedulers.append(make(opt))

    def gradients(at):
        ps = [p.detach().requires_grad_() for p in at]
        loss = _loss_with(info, model, ps, x, target)
        return loss.detach(), torch.autograd.grad(loss, ps)

    def closure():
        opt.zero_grad()
        if differentiable:
            loss, grads = gradients(params)
            for p, g in zip(params, grads):
                p.grad = g
        else:
            loss = _loss(info, model, x, target)
            loss.backward()
        return loss

    def step():
        if info.step_requires_closure:
            return opt.step(closure)
        loss = closure()
        opt.step()
        return loss

    if impl == "compiled" and device != "cpu":
        step = torch.compile(step, backend="tpu")
    for _ in range(steps - 1 if differentiable else steps):
        loss = step()
        for s in schedulers:
            # ReduceLROnPlateau steps on the loss; the others on the epoch.
            if isinstance(s, torch.optim.lr_scheduler.ReduceLROnPlateau):
                s.step(loss.item())
            else:
                s.step()
    grads = []
    if differentiable:
        opt, params, grads = _last_step_grads(info, opt, params, kw, gradients(params)[1])
    # Parameters and gradients with respect to them stay where they are (tpu
    # results must be on tpu); optimizer state, and gradients with respect to
    # it, are compared on the CPU, since PyTorch keeps some state there on
    # purpose (step counts, NAdam's mu_product, outside capturable mode).
    on_device = [p.detach() for p in params] + grads[:2 * len(params)]
    return on_device, [v.cpu() for v in grads[2 * len(params):]] + \
        [v.cpu() for _, v in _state_tensors(opt)]


def _last_step_grads(info, opt, params, kw, grads):
    """The last step as PyTorch checks differentiable optimizers: a fresh
    optimizer over copies of the parameters, given the state so far, takes
    one step; the parameters, the gradients and the floating-point state
    (not the step count) enter as leaves, and the result is the gradient of
    the sum of the new parameters and state with respect to them. Returns
    (the optimizer, its parameters, the gradients)."""
    import torch
    leaves = [p.detach().clone().requires_grad_() for p in params]
    grad_leaves = [g.detach().clone().requires_grad_() for g in grads]
    new = [leaf.clone() for leaf in leaves]
    stepper = info.optim_cls(new, **kw)
    state_leaves = []
    for old, p in zip(params, new):
        state = {}
        for k, v in opt.state.get(old, {}).items():
            if isinstance(v, torch.Tensor) and v.is_floating_point() and k != "step":
                state_leaves.append(v.detach().clone().requires_grad_())
                v = state_leaves[-1].clone()  # the step writes it in place
            elif isinstance(v, torch.Tensor):
                v = v.clone()
            state[k] = v
        stepper.state[p] = state
    for p, g in zip(new, grad_leaves):
        p.grad = g
    stepper.step()
    total = sum(p.sum() for p in new) + sum(
        v.sum() for st in stepper.state.values() for v in st.values()
        if isinstance(v, torch.Tensor) and v.requires_grad)
    wrt = leaves + grad_leaves + state_leaves
    grads = torch.autograd.grad(total, wrt, allow_unused=True, materialize_grads=True)
    return stepper, new, list(grads)


def _loss_with(info, model, params, x, target):
    """The loss with |params| substituted for the model's parameters."""
    from torch.func import functional_call
    names = [n for n, p in model.named_parameters() if p in set(_params(info, model))]
    return _loss(info, lambda inp: functional_call(model, dict(zip(names, params)), (inp,)),
                 x, target)


def run_config(name, desc, impl, steps=STEPS):
    import torch
    info = next(i for i in _optim_db() if i.optim_cls.__name__ == name)
    # Differentiable steps run in float64, as PyTorch checks them (gradcheck):
    # the derivative of an update with respect to a near-zero gradient (Adam's
    # m / (sqrt(v) + eps)) amplifies float32 rounding beyond any tolerance.
    dtype = torch.float64 if impl == "differentiable" else torch.float32
    dtype_name = str(dtype).replace("torch.", "")
    try:
        want, want_state = train(info, desc, impl, "cpu", steps, dtype)
    except Exception as e:
        return {"status": "skip", "reason": f"the CPU rejects it: {type(e).__name__}: "
                                            f"{str(e).splitlines()[0] if str(e) else ''}"[:200]}
    try:
        got, got_state = train(info, desc, impl, "tpu", steps, dtype)
        torch.tpu.synchronize()
    except Exception as e:
        status, why = _classify_exception(e)
        return {"status": status, "reason": why}
    why = _compare(got, want, dtype_name) or \
        _compare(got_state, want_state, dtype_name, check_device=False)
    if why and "difference" in why and dtype == torch.float32:  # values, not shapes
        ref, _ = train(info, desc, impl, "cpu", steps, dtype=torch.float64)
        if _as_near_reference(got, want, ref):
            why = None
    return {"status": "mismatch", "reason": why} if why else {"status": "pass"}


def _as_near_reference(got, want, ref):
    """Some configurations amplify rounding (LBFGS's curvature pairs near a
    minimum divide differences of nearly equal gradients): there the CPU's own
    float32 result is far from the float64 one, and tpu's cannot be expected
    to be closer to it. Accept the parameters (and gradients) when each
    tensor's largest error against the float64 run is at most twice the
    CPU's (two float32 trajectories drift from the exact one by similar
    amounts, on either side) or within the tolerance. Internal state is not
    judged then: its ill-conditioned parts (LBFGS's curvature ratio) carry
    no information the parameters do not."""
    import torch
    for a, b, c in zip(got, want, ref):
        if not (isinstance(b, torch.Tensor) and b.is_floating_point()) or b.numel() == 0:
            continue
        a, b, c = a.detach().cpu().double(), b.double(), c.detach().double()
        err_tpu, err_cpu = (a - c).abs().max().item(), (b - c).abs().max().item()
        if not err_tpu <= max(2 * err_cpu, 1e-5 + 1e-5 * c.abs().max().item()):
            return False
    return True


# -- driver ---------------------------------------------------------------------

def _worker(args):
    from .ops import section_worker

    def run(row, _progress):
        name, desc, impl = row
        r = run_config(name, desc, impl, args.steps)
        if args.verbose and r["status"] != "pass":
            print(f"  {name} [{desc}] {impl}: {r['status']}: {r.get('reason', '')}")
        return {"row": [name, desc, impl], "result": r}
    section_worker(args, lambda: configurations(args.fast, args.names), lambda row: True, run)


def _drive(args):
    from .. import _isolate
    rows = configurations(args.fast, args.names)
    result_path = args.json + ".partial"

    def command(start, end):
        cmd = [sys.executable, "-m", "torch_tpu.coverage", "--optims", "--worker",
               "--start", str(start), "--end", str(end), "--result", result_path,
               "--steps", str(args.steps)]
        if args.fast:
            cmd.append("--fast")
        if args.names:
            cmd += ["--names", ",".join(args.names)]
        if args.verbose:
            cmd.append("-v")
        return cmd

    def lost(i, why):
        return {"row": list(rows[i]), "result": {"status": "error", "reason": why}}

    # Compiled rows accumulate Dynamo and XLA state: a fresh process per 60.
    done = _isolate.run(command, len(rows), result_path, args.timeout, lost, chunk=60)
    os.replace(result_path, args.json)
    return [(tuple(rec["row"]), rec["result"]) for rec in done]


def report(results):
    by_impl = collections.defaultdict(collections.Counter)
    for (_, _, impl), r in results:
        by_impl[impl.split()[0]][r["status"]] += 1
    lines = ["| implementation | configurations counted | pass | mismatch | unsupported | error "
             "| skipped (CPU rejects) |", "|---|---|---|---|---|---|---|"]
    total = collections.Counter()
    for impl in sorted(by_impl):
        c = by_impl[impl]
        total.update(c)
        counted = sum(v for k, v in c.items() if k != "skip")
        lines.append(f"| {impl} | {counted} | {c['pass']} | {c['mismatch']} | "
                     f"{c['unsupported']} | {c['error']} | {c['skip']} |")
    counted = sum(v for k, v in total.items() if k != "skip")
    lines.append(f"| **all** | {counted} | {total['pass']} | {total['mismatch']} | "
                 f"{total['unsupported']} | {total['error']} | {total['skip']} |")
    return "\n".join(lines), total


def details(results):
    rows = ["| optimizer | configuration | implementation | status | reason |",
            "|---|---|---|---|---|"]
    for (name, desc, impl), r in results:
        rows.append(f"| {name} | {desc} | {impl} | {r['status']} | "
                    f"{r.get('reason', '').replace('|', '/')[:160]} |")
    return "\n".join(rows)


def main(argv=None):
    from . import section_parser
    ap = section_parser("python -m torch_tpu.coverage --optims", __doc__.splitlines()[0],
                        "coverage_optims.json")
    ap.add_argument("--names", default="", help="comma-separated optimizer classes")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--min-pass", type=float, default=0.0,
                    help="exit 1 if the pass rate (%%) of counted configurations is below this")
    ap.set_defaults(timeout=300)
    args = ap.parse_args(argv)
    args.names = tuple(n for n in args.names.split(",") if n)
    if args.worker:
        return _worker(args)
    t0 = time.time()
    results = _drive(args)
    summary, total = report(results)
    print(summary)
    print(f"({len(results)} configurations, {args.steps} steps each, {time.time() - t0:.0f} s)")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("# Optimizer coverage: PyTorch's optim_db on tpu vs CPU\n\n")
            f.write(f"Plugin: {plugin_in_use()}.\n\n")
            f.write(f"Command: `python -m torch_tpu.coverage --optims "
                    f"{' '.join(sys.argv[1:] if argv is None else argv)}`\n\n")
            f.write(summary + "\n\n" + details(results) + "\n")
    counted = sum(v for k, v in total.items() if k != "skip")
    rate = 100.0 * total["pass"] / counted if counted else 0.0
    return 1 if rate < args.min_pass else 0
