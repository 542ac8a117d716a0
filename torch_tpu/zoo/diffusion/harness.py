"""Running the Diffusers zoo: each model class on the CPU and on ``tpu``,
compared; workers in subprocesses; totals and the markdown report."""
import argparse
import collections
import copy
import os
import sys
import time

from ... import _isolate
from ..harness import _delta, _fallbacks, _layout_problem, _short, _tensors, _to_tpu, compare
from ..settings import SEED

# The whole run of one class (build, CPU, tpu, backward) in seconds = hung.
TIMEOUT = 300
CHUNK = 40


def model_classes():
    """Every ModelMixin subclass Diffusers exports, sorted."""
    import inspect

    import diffusers
    from diffusers.models.modeling_utils import ModelMixin
    names = []
    for name in dir(diffusers):
        if name == "ModelMixin":
            continue
        try:
            obj = getattr(diffusers, name)
        except Exception:  # noqa: BLE001  (an optional dependency missing: not exported here)
            continue
        if inspect.isclass(obj) and issubclass(obj, ModelMixin):
            names.append(name)
    return sorted(names)


def _redraw_constant_weights(model):
    """Redraws weight tensors that start as one constant. Diffusers zero-
    initialises output projections (ControlNet's zero convolutions, adaLN-zero
    modulations, final layers), so such a model outputs exact zeros on any
    device and a comparison would test nothing."""
    import torch
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and p.numel() > 1 and \
                    bool((p == p.reshape(-1)[0]).all()):
                fan_in = max(p[0].numel(), 1)
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)


def _moved(x, device):
    import torch
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: _moved(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_moved(v, device) for v in x)
    return x


def build(r):
    """(model, inputs) on the CPU: the recipe's config built with seeded
    random weights, in evaluation mode."""
    import torch
    import diffusers

    from .recipes import reseed
    reseed(SEED)
    config, inputs = r.fn()
    torch.manual_seed(SEED)
    model = getattr(diffusers, r.name)(**config)
    _redraw_constant_weights(model)
    return model.eval(), inputs


def _forward(r, model, inputs):
    import torch
    torch.manual_seed(SEED)  # draws from the CPU generator repeat the reference's
    return r.call(model, **inputs) if r.call else model(**inputs)


def _loss(out):
    import torch
    ts = [t for t in _tensors(out, []) if t.is_floating_point() and t.requires_grad]
    return sum(t.float().pow(2).mean() for t in ts) if ts else None


def _backward(r, model, tmodel, inputs, tinputs):
    model.train()
    tmodel.train()
    try:
        loss = _loss(_forward(r, model, inputs))
        if loss is None:
            return {"status": "skip", "reason": "no differentiable output"}
        loss.backward()
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "reason": "cpu: " + _short(e)}
    try:
        _loss(_forward(r, tmodel, tinputs)).backward()
        ref = dict(model.named_parameters())
        for n, p in getattr(tmodel, "_orig_mod", tmodel).named_parameters():
            want = ref[n].grad
            if (p.grad is None) != (want is None):
                return {"status": "mismatch", "reason": f"{n}: grad presence differs"}
            if want is not None:
                problem = compare(p.grad, want)
                if problem:
                    return {"status": "mismatch", "reason": f"{n}: {problem}"}
        return {"status": "match"}
    except Exception as e:  # noqa: BLE001
        return {"status": "crash", "reason": _short(e)}


def _matches_float64(r, model, inputs, got):
    """Whether ``got`` matches the CPU in float64 (rounded to float32): the
    CPU's own float32 result can be the one that is off."""
    import torch
    try:
        m64 = copy.deepcopy(model).double()
        in64 = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                for k, v in inputs.items()}
        with torch.no_grad():
            ref = _tensors(_forward(r, m64, in64), [])
    except Exception:  # noqa: BLE001
        return False
    g = _tensors(got, [])
    ref = [w.to(t.dtype) if w.is_floating_point() and t.is_floating_point() else w
           for w, t in zip(ref, g)]
    return compare(g, ref) is None


def _stochastic(r, model, inputs, want):
    """Whether the CPU itself gives other outputs under another seed."""
    import torch
    try:
        torch.manual_seed(SEED + 7)
        with torch.no_grad():
            out = r.call(model, **inputs) if r.call else model(**inputs)
        return compare(out, want) is not None
    except Exception:  # noqa: BLE001
        return False


def run_class(name, verbose=False, compiled=False):
    """One model class on the CPU and on tpu."""
    import warnings

    import torch

    from .recipes import RECIPES, load_all
    warnings.filterwarnings("ignore")
    load_all()
    rec = {}
    r = RECIPES.get(name)
    if r is None:
        rec.update(status="no recipe", reason="no shrunk config and inputs for this class yet")
        return rec
    try:
        model, inputs = build(r)
        with torch.no_grad():
            want = _forward(r, model, inputs)
        rec["params"] = sum(p.numel() for p in model.parameters())
    except Exception as e:  # noqa: BLE001  (the recipe does not run on the CPU: not counted)
        rec.update(status="skip", reason="cpu: " + _short(e))
        return rec
    before = _fallbacks()
    tmodel = tinputs = None
    if compiled:
        torch._dynamo.reset()
    try:
        tmodel = _to_tpu(copy.deepcopy(model))
        tinputs = _moved(inputs, "tpu")
        run = torch.compile(tmodel, backend="tpu") if compiled else tmodel
        with torch.no_grad():
            got = _forward(r, run, tinputs)
        problem = compare(got, want)
        if problem and _stochastic(r, model, inputs, want):
            rec.update(note="random inside forward: compared on shapes and dtypes", random=True)
            problem = _layout_problem(got, want)
        if problem and _matches_float64(r, model, inputs, got):
            rec["note"] = f"cpu float32 was off ({problem}); tpu matches the float64 cpu result"
            problem = None
        rec.update(status="mismatch" if problem else "match", reason=problem or "")
    except Exception as e:  # noqa: BLE001
        rec.update(status="crash", reason=_short(e))
    if r.backward and rec["status"] != "crash" and tmodel is not None:
        rec["backward"] = _backward(r, model, tmodel, inputs, tinputs)
    rec["fallbacks"] = _delta(before, _fallbacks())
    if verbose:
        print(name, rec, file=sys.stderr)
    return rec


def _worker(args):
    import torch  # noqa: F401

    import torch_tpu  # noqa: F401

    _isolate.work_rows(args, lambda name, progress: (name, run_class(name, args.verbose,
                                                                      args.compile)))


def _drive(args, names):
    return _isolate.drive_rows(
        "torch_tpu.zoo.diffusion", args, names,
        lambda name, why: (name, {"status": "crash", "reason": why, "fallbacks": {}}), CHUNK,
        ["--compile"] if args.compile else [])


def totals(results):
    """Forward over the classes the CPU ran; backward over those with one."""
    fwd = collections.Counter(r["status"] for r in results.values())
    counted = fwd["match"] + fwd["mismatch"] + fwd["crash"]
    bwd = collections.Counter(r["backward"]["status"] for r in results.values()
                              if "backward" in r)
    bcounted = bwd["match"] + bwd["mismatch"] + bwd["crash"]
    fallbacks = _isolate.fallback_counts(results)
    pct = lambda a, b: 100.0 * a / b if b else 0.0  # noqa: E731
    return {
        "classes": len(results), "no_recipe": fwd["no recipe"], "skipped": fwd["skip"],
        "counted": counted, "match": fwd["match"], "mismatch": fwd["mismatch"],
        "crash": fwd["crash"], "random": sum(1 for r in results.values() if r.get("random")),
        "ran_pct": pct(fwd["match"] + fwd["mismatch"], counted),
        "match_pct": pct(fwd["match"], counted),
        "backward_counted": bcounted, "backward_match": bwd["match"],
        "backward_pct": pct(bwd["match"], bcounted), "fallback_ops": dict(fallbacks),
    }


def report(results):
    t = totals(results)
    return "\n".join([
        f"Model classes: {t['classes']}; without a recipe: {t['no_recipe']}; the CPU could not "
        f"run the recipe: {t['skipped']}; counted: {t['counted']}",
        f"Forward ran on tpu: {t['match'] + t['mismatch']}/{t['counted']} ({t['ran_pct']:.1f}%); "
        f"matched the CPU: {t['match']}/{t['counted']} ({t['match_pct']:.1f}%); "
        f"mismatch: {t['mismatch']}; crash: {t['crash']}; of the matches, {t['random']} sample "
        "inside forward and were compared on shapes and dtypes only",
        f"Backward (every parameter's gradient) matched the CPU: {t['backward_match']}/"
        f"{t['backward_counted']} ({t['backward_pct']:.1f}%)",
        _isolate.fallbacks_line(t["fallback_ops"], "classes"),
    ])


def details(results):
    rows = ["| model class | parameters | forward | backward | fallbacks | problem |",
            "|---|---|---|---|---|---|"]
    for name in sorted(results):
        r = results[name]
        b = r.get("backward", {})
        reason = r.get("reason") or b.get("reason") or r.get("note", "")
        rows.append(f"| {name} | {r.get('params', '-')} | {r['status']} | {b.get('status', '-')} | "
                    f"{', '.join(sorted(r.get('fallbacks', {})))} | "
                    f"{reason.replace('|', '/')[:160]} |")
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Diffusers model zoo on tpu against the CPU.")
    _isolate.add_zoo_arguments(ap, "zoo_diffusers.json", TIMEOUT, "class")
    ap.add_argument("--classes", default="", help="comma-separated model class names")
    ap.add_argument("--compile", action="store_true",
                    help='run the tpu models through torch.compile(backend="tpu")')
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    if args.report:
        return _write_report(args, _isolate.load_results(args.report), None)
    names = model_classes()
    from .recipes import load_all
    recipes = load_all()
    wanted = [n for n in args.classes.split(",") if n]
    if args.fast:
        wanted = sorted(n for n, r in recipes.items() if r.fast)
    if wanted:
        unknown = set(wanted) - set(names)
        if unknown:
            ap.error("not a Diffusers model class: " + ", ".join(sorted(unknown)))
        names = wanted
    t0 = time.time()
    results = _drive(args, names)
    return _write_report(args, results, time.time() - t0)


def _write_report(args, results, elapsed):
    import diffusers
    took = f", {elapsed / 60:.0f} min" if elapsed is not None else ""
    print(report(results) + f"\n({len(results)} classes{took})")
    if args.markdown:
        text = [f"# Diffusers {diffusers.__version__} model zoo on tpu vs CPU" +
                (" (torch.compile)" if args.compile else ""),
                f"Command: `python -m torch_tpu.zoo.diffusion {' '.join(sys.argv[1:])}`{took}",
                *report(results).splitlines(), details(results)]
        with open(args.markdown, "w") as f:
            f.write("\n\n".join(text) + "\n")
    return 0
