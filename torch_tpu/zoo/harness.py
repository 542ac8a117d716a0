"""Running the zoo: each architecture on the CPU and on ``tpu``, compared;
workers in subprocesses; totals and the markdown report."""
import argparse
import collections
import os
import sys
import time

from .. import _isolate
from .settings import FAST_ARCHS, LM_TASKS, RTOL_SCALE, SCALE_FLOOR, SEED, TASKS, _CHUNK
from .models import architectures, build
from .recipes import TRAIN_BACKWARD


def _tensors(x, out, seen=None):
    import torch
    seen = set() if seen is None else seen
    if id(x) in seen:
        return out
    seen.add(id(x))
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, dict):
        for v in x.values():
            _tensors(v, out, seen)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _tensors(v, out, seen)
    return out


def compare(got, want):
    """None if every tensor matches within tolerance, else the first problem."""
    import torch
    layout = _layout_problem(got, want)
    if layout:
        return layout
    for i, (a, b) in enumerate(zip(_tensors(got, []), _tensors(want, []))):
        a = a.detach().cpu()
        b = b.detach()
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return f"output {i}: integer values differ"
            continue
        a, b = a.double(), b.double()
        if not torch.equal(torch.isnan(a), torch.isnan(b)):
            return f"output {i}: NaN pattern differs"
        a, b = a.nan_to_num(0.0), b.nan_to_num(0.0)
        scale = max(b.abs().max().item() if b.numel() else 0.0, SCALE_FLOOR)
        err = (a - b).abs().max().item() if b.numel() else 0.0
        if err > RTOL_SCALE * scale:
            return f"output {i} {list(b.shape)}: max error {err:.3g} vs scale {scale:.3g}"
    return None


def _fallbacks():
    import torch
    return dict(torch.tpu._get_cache_stats().get("fallbacks", {}))


def _delta(before, after):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def _short(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {' '.join(lines[:2])[:300]}"


def _loss(out):
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    return loss


def _to_tpu(model):
    """``model.to("tpu")``, plus the tensors modules cache in plain attributes
    during the CPU run (Mimi's codebook caches its centroids), which ``to``
    does not move. LRU caches of results by input (OmDet-Turbo's text
    embeddings) start empty: tpu would otherwise reuse the CPU's results."""
    import torch
    model = model.to("tpu")
    for m in model.modules():
        for k, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor) and v.device.type == "cpu":
                setattr(m, k, v.to("tpu"))
            elif type(v).__name__.endswith("LRUCache") and hasattr(v, "capacity"):
                setattr(m, k, type(v)(v.capacity))
    return model


def run_arch(name, task, model_type, verbose=False, compiled=False):
    """One architecture on the CPU and on tpu; |compiled|: the tpu model runs
    through torch.compile(backend="tpu") (forward and, for LM heads, the
    backward through the compiled graphs)."""
    import copy
    import warnings

    import torch
    import transformers
    warnings.filterwarnings("ignore")
    rec = {"task": task, "model_type": model_type}
    try:
        cls = getattr(transformers, name)
        if cls.forward is torch.nn.Module.forward:
            # containers of sub-models driven by generate() or decode helpers
            rec.update(status="skip", not_a_model=True,
                       reason=f"not a model: {name} defines no forward (its sub-models run "
                              "through generate() or decode helpers)")
            return rec
        model, config, inputs, want, level = build(cls, model_type, task)
        rec["shrink"] = level
        if getattr(model, "zoo_text_only", None):
            # compared, but without its images/audio: said in the report
            rec["text_only"] = model.zoo_text_only
    except Exception as e:  # noqa: BLE001  (any harness failure: not counted)
        rec.update(status="skip", reason="cpu: " + _short(e))
        return rec
    before = _fallbacks()
    stats_before = torch.tpu._get_cache_stats()
    from .. import _compile_direct

    reasons_before = collections.Counter(_compile_direct.fallback_reasons)
    tmodel = None
    if compiled:
        # A fresh Dynamo per architecture: code shared between models (mask
        # helpers) would otherwise reach the recompile limit and run eagerly.
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
    try:
        tmodel = _to_tpu(copy.deepcopy(model))
        if compiled:
            tmodel = torch.compile(tmodel, backend="tpu")
        tinputs = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        torch.manual_seed(SEED)  # draws from the CPU generator repeat the reference's
        with torch.no_grad():
            got = tmodel(**tinputs)
        problem = compare(got, want)
        if problem and _stochastic(model, inputs, want):
            # sampled inside forward (MAE masking, ViLT patch sampling, vocoder
            # noise): the devices draw different numbers, so shapes and dtypes only
            rec.update(note="random inside forward: compared on shapes and dtypes", random=True)
            problem = _layout_problem(got, want)
        if problem and _matches_float64(model, inputs, got):
            rec["note"] = f"cpu float32 was off ({problem}); tpu matches the float64 cpu result"
            problem = None
        if problem and compiled and _matches_cpu_under_dynamo(model, inputs, got):
            rec.update(note=f"compiled, the model computes otherwise ({problem}): the CPU "
                            "under torch.compile(backend='eager') gives the tpu result",
                       dynamo_reference=True)
            problem = None
        rec.update(status="mismatch" if problem else "match", reason=problem or "")
    except Exception as e:  # noqa: BLE001
        rec.update(status="crash", reason=_short(e))
        cpu_error = _cpu_under_dynamo_error(model, inputs) if compiled else None
        # Not counted, as any model the CPU cannot run, when the CPU under
        # Dynamo fails with the same kind of error (a failure of the tpu
        # backend itself, BackendCompilerFailed, never is).
        if cpu_error and cpu_error.split(":")[0] == rec["reason"].split(":")[0]:
            rec.update(status="skip", reason="cpu under torch.compile(backend='eager'): " +
                       cpu_error)
            return rec
    if task in LM_TASKS and rec["status"] != "crash" and tmodel is not None:
        rec["backward"] = _backward(model, tmodel, inputs, tinputs,
                                    train=model_type in TRAIN_BACKWARD, compiled=compiled)
    rec["fallbacks"] = _delta(before, _fallbacks())
    if compiled:
        from torch._dynamo.utils import counters
        # Graphs the backend compiled and Dynamo's graph breaks: a model that
        # compiled nothing ran eagerly and proves nothing about compiling.
        stats = torch.tpu._get_cache_stats()
        rec["compiled_graphs"] = stats["compiled_graphs"] - stats_before["compiled_graphs"]
        # Of those, graphs lowered without AOTAutograd (with a backward:
        # training graphs), and ones that path sent back to it.
        for k in ("direct_graphs", "direct_training_graphs", "direct_fallbacks"):
            rec[k] = stats["compiled_" + k] - stats_before["compiled_" + k]
        rec["direct_fallback_reasons"] = dict(_compile_direct.fallback_reasons - reasons_before)
        rec["graph_breaks"] = sum(counters["graph_break"].values())
        if rec["status"] == "match" and rec["compiled_graphs"] == 0:
            rec.update(status="crash", reason="nothing was compiled (ran eagerly)")
    if verbose:
        print(name, rec, file=sys.stderr)
    return rec


def _layout_problem(got, want):
    g, w = _tensors(got, []), _tensors(want, [])
    if len(g) != len(w):
        return f"{len(g)} output tensors, cpu gave {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)} vs cpu {b.dtype}{list(b.shape)}"
    return None


def _stochastic(model, inputs, want):
    """Whether a second CPU forward under another seed gives other outputs."""
    import torch
    torch.manual_seed(SEED + 7)
    try:
        with torch.no_grad():
            return compare(model(**inputs), want) is not None
    except Exception:  # noqa: BLE001
        return False


def _matches_float64(model, inputs, got):
    """Whether ``got`` matches the model run on the CPU in float64 (rounded to
    float32). The CPU's float32 kernels are not exact either: a norm of
    1e-24-sized values loses bits in its subnormal squares, for one. Where
    float64 cannot run, the float32 CPU result stands."""
    import copy

    import torch
    try:
        m64 = copy.deepcopy(model).double()
        in64 = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                for k, v in inputs.items()}
        with torch.no_grad():
            ref = _tensors(m64(**in64), [])
    except Exception:  # noqa: BLE001
        return False
    g = _tensors(got, [])
    ref = [r.to(t.dtype) if r.is_floating_point() and t.is_floating_point() else r
           for r, t in zip(ref, g)]
    return compare(g, ref) is None


def _cpu_under_dynamo(model, inputs):
    """The model traced by Dynamo and run on the CPU with no compiler."""
    import copy

    import torch
    torch._dynamo.reset()
    try:
        m = torch.compile(copy.deepcopy(model), backend="eager")
        torch.manual_seed(SEED)
        with torch.no_grad():
            return m(**inputs)
    finally:
        torch._dynamo.reset()


def _cpu_under_dynamo_error(model, inputs):
    """Why the model fails on the CPU under Dynamo too (None if it runs)."""
    try:
        _cpu_under_dynamo(model, inputs)
    except Exception as e:  # noqa: BLE001
        return _short(e)
    return None


def _matches_cpu_under_dynamo(model, inputs, got):
    """Whether ``got`` matches the model traced by Dynamo and run on the CPU
    with no compiler (backend="eager"). Some models compute otherwise when
    compiled (a branch on is_torchdynamo_compiling(), Dynamo's own
    semantics): that reference is what the tpu backend must equal then."""
    try:
        ref = _cpu_under_dynamo(model, inputs)
    except Exception:  # noqa: BLE001
        return False
    return compare(got, ref) is None


def _backward(model, tmodel, inputs, tinputs, train=False, compiled=False):
    if train:
        model.train()
        tmodel.train()
    try:
        loss_cpu = _loss(model(**inputs))
        if loss_cpu is None:
            return {"status": "skip", "reason": "no loss"}
        loss_cpu.backward()
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "reason": "cpu: " + _short(e)}
    try:
        _loss(tmodel(**tinputs)).backward()
        names = dict(model.named_parameters())
        zeros = []
        for n, p in getattr(tmodel, "_orig_mod", tmodel).named_parameters():
            ref = names[n].grad
            if compiled and ref is None and p.grad is not None and not p.grad.any():
                # AOTAutograd returns zeros for a parameter the loss does not
                # reach, on every backend (the CPU's aot_eager too).
                zeros.append(n)
                continue
            if (p.grad is None) != (ref is None):
                return {"status": "mismatch", "reason": f"{n}: grad presence differs"}
            if ref is not None:
                problem = compare(p.grad, ref)
                if problem:
                    return {"status": "mismatch", "reason": f"{n}: {problem}"}
        if zeros:
            return {"status": "match", "note": f"zero gradients where eager has none "
                                               f"(AOTAutograd): {', '.join(zeros[:3])}"}
        return {"status": "match"}
    except Exception as e:  # noqa: BLE001
        return {"status": "crash", "reason": _short(e)}


def _worker(args):
    import torch  # noqa: F401

    import torch_tpu  # noqa: F401

    def one(row, progress):
        name, task, model_type = row
        return name, run_arch(name, task, model_type, args.verbose, args.compile)
    _isolate.work_rows(args, one)


def _drive(args, rows):

    def lost(row, why):
        name, task, model_type = row
        return name, {"task": task, "model_type": model_type, "status": "crash", "reason": why,
                      "fallbacks": {}}
    return _isolate.drive_rows("torch_tpu.zoo", args, rows, lost, _CHUNK,
                               ["--compile"] if args.compile else [])


def totals(results):
    """Counts and rates: forward over architectures the CPU ran; backward over causal LMs."""
    fwd = collections.Counter(r["status"] for r in results.values())
    counted = fwd["match"] + fwd["mismatch"] + fwd["crash"]
    bwd = collections.Counter(r["backward"]["status"] for r in results.values()
                              if r["task"] == "causal-lm" and "backward" in r)
    bwd["crash"] += sum(1 for r in results.values() if r["task"] == "causal-lm"
                        and r["status"] == "crash")
    bcounted = bwd["match"] + bwd["mismatch"] + bwd["crash"]
    fallbacks = _isolate.fallback_counts(results)
    pct = lambda a, b: 100.0 * a / b if b else 0.0  # noqa: E731
    return {
        "random": sum(1 for r in results.values() if r.get("random")),
        "dynamo_reference": sum(1 for r in results.values() if r.get("dynamo_reference")
                                and r["status"] == "match"),
        "text_only": sum(1 for r in results.values() if r.get("text_only") and
                         r["status"] != "skip"),
        "architectures": len(results), "skipped": fwd["skip"], "counted": counted,
        "match": fwd["match"], "mismatch": fwd["mismatch"], "crash": fwd["crash"],
        "ran_pct": pct(fwd["match"] + fwd["mismatch"], counted), "match_pct": pct(fwd["match"], counted),
        "causal_backward_counted": bcounted, "causal_backward_match": bwd["match"],
        "causal_backward_pct": pct(bwd["match"], bcounted), "fallback_ops": dict(fallbacks),
        **{k: sum(r.get(k, 0) for r in results.values())
           for k in ("compiled_graphs", "direct_graphs", "direct_training_graphs",
                     "direct_fallbacks")},
        "direct_fallback_reasons": sum((collections.Counter(r.get("direct_fallback_reasons", {}))
                                        for r in results.values()), collections.Counter()),
    }


def report(results):
    t = totals(results)
    lines = [
        f"Architectures: {t['architectures']} ({t['skipped']} skipped: the harness could not run "
        f"them on the CPU), counted: {t['counted']}",
        f"Forward ran on tpu: {t['match'] + t['mismatch']}/{t['counted']} ({t['ran_pct']:.1f}%); "
        f"matched the CPU: {t['match']}/{t['counted']} ({t['match_pct']:.1f}%); "
        f"mismatch: {t['mismatch']}; crash: {t['crash']}; of the matches, {t['random']} sample "
        f"inside forward and were compared on shapes and dtypes only"
        + (f", {t['dynamo_reference']} compute otherwise when compiled and equal the CPU "
           f"under torch.compile(backend='eager')" if t["dynamo_reference"] else "")
        + f"; {t['text_only']} multimodal rows ran text-only (their images/audio were refused)",
        f"Causal-LM backward matched the CPU: {t['causal_backward_match']}/"
        f"{t['causal_backward_counted']} ({t['causal_backward_pct']:.1f}%)",
        _isolate.fallbacks_line(t["fallback_ops"], "architectures"),
    ]
    if t["compiled_graphs"]:
        lines.append(f"Compiled graphs: {t['compiled_graphs']}; lowered without AOTAutograd: "
                     f"{t['direct_graphs']} ({t['direct_training_graphs']} with a backward), "
                     f"sent back to it: {t['direct_fallbacks']}")
        for why, n in t["direct_fallback_reasons"].most_common():
            lines.append(f"  sent back ({n}): {why}")
    return "\n".join(lines)


def by_task(results):
    rows = ["| task | architectures | skipped | counted | ran | matched |", "|---|---|---|---|---|---|"]
    for task, _ in TASKS:
        rs = [r for r in results.values() if r["task"] == task]
        c = collections.Counter(r["status"] for r in rs)
        counted = c["match"] + c["mismatch"] + c["crash"]
        rows.append(f"| {task} | {len(rs)} | {c['skip']} | {counted} | "
                    f"{c['match'] + c['mismatch']} | {c['match']} |")
    return "\n".join(rows)


def details(results):
    rows = ["| architecture | task | forward | backward | fallbacks | problem |",
            "|---|---|---|---|---|---|"]
    for name in sorted(results):
        r = results[name]
        b = r.get("backward", {})
        reason = r.get("reason") or b.get("reason") or r.get("note", "")
        if r.get("text_only"):
            reason = f"text only, images/audio refused ({r['text_only']}) {reason}".strip()
        rows.append(f"| {name} | {r['task']} | {r['status']} | {b.get('status', '-')} | "
                    f"{', '.join(sorted(r.get('fallbacks', {})))} | "
                    f"{reason.replace('|', '/')[:160]} |")
    return "\n".join(rows)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--diffusers"]:
        # the same zoo over Diffusers' model classes (torch_tpu.zoo.diffusion)
        from .diffusion.harness import main as diffusers_main
        return diffusers_main(argv[1:])
    ap = argparse.ArgumentParser(description="Hugging Face model zoo on tpu against the CPU "
                                 "(--diffusers first: Diffusers' model classes).")
    _isolate.add_zoo_arguments(ap, "zoo.json", 300, "architecture")
    ap.add_argument("--archs", default="", help="comma-separated model class names")
    ap.add_argument("--tasks", default="", help="comma-separated task labels (see TASKS)")
    ap.add_argument("--every", type=int, default=1,
                    help="run every N-th architecture of the sorted list (a spread sample)")
    ap.add_argument("--compile", action="store_true",
                    help='run the tpu models through torch.compile(backend="tpu")')
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    rows = architectures(set(t for t in args.tasks.split(",") if t))
    wanted = set(FAST_ARCHS) if args.fast else set(a for a in args.archs.split(",") if a)
    if wanted:
        unknown = wanted - {r[0] for r in rows}
        if unknown:
            ap.error("not in the auto mappings: " + ", ".join(sorted(unknown)))
        rows = [r for r in rows if r[0] in wanted]
    rows = rows[::args.every]
    if args.report:
        return _write_report(args, _isolate.load_results(args.report), elapsed=None)
    t0 = time.time()
    results = _drive(args, rows)
    return _write_report(args, results, time.time() - t0)


def _write_report(args, results, elapsed):
    took = f", {elapsed / 60:.0f} min" if elapsed is not None else ""
    print(report(results) + f"\n({len(results)} architectures{took})")
    if args.markdown:
        text = ["# Hugging Face model zoo on tpu vs CPU" +
                (" (torch.compile)" if args.compile else ""),
                f"Command: `python -m torch_tpu.zoo {' '.join(sys.argv[1:])}`{took}",
                *report(results).splitlines(), by_task(results), details(results)]
        with open(args.markdown, "w") as f:
            f.write("\n\n".join(text) + "\n")
    return 0
