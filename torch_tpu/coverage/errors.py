"""Error inputs: what PyTorch's OpInfos say every device must reject.

    python -m torch_tpu.coverage --errors                 # every ErrorInput of op_db
    python -m torch_tpu.coverage --errors --fast          # the CI slice
    python -m torch_tpu.coverage --errors --ops cat,take -v

Each ``ErrorInput`` (``op.error_inputs("cpu")``) runs on the CPU first; an
input the CPU accepts is counted ``cpu accepts`` and left out. The rest run
on ``tpu`` (the sample moved with its storage layout and aliasing intact),
in strict eager and in debug eager, with the CPU fallback off
(``TORCH_TPU_FALLBACK=0``), and the device is synchronized after the op so
that an asynchronous failure counts against it. Per input and mode:

* ``same``: raised the CPU's exception type (or a subclass of it);
* ``other``: raised a different type;
* ``unsupported``: raised only because tpu lacks the op (no lowering and
  the fallback is off): the input's own defect went unchecked;
* ``silent``: raised nothing;
* ``debug only`` (strict mode): raised nothing in strict eager but the CPU's
  type in debug eager: the check reads tensor data (index bounds,
  probabilities, a device-resident fill value), which costs a device round
  trip, so only debug eager makes it;
* ``crash`` / ``hang``: the worker died, or made no progress for --timeout s.
"""
import collections
import json
import os
import re
import sys
import time

from . import ops

MODES = ("strict", "debug")

# Work item numbering: op index * _PER_OP + input index * len(MODES) + mode,
# so a crash or hang costs one input in one mode and the worker that
# replaces it resumes right after, without the driver enumerating inputs.
_MAX_INPUTS = 256
_PER_OP = _MAX_INPUTS * len(MODES)
# OpInfo entries per worker process (a fresh process bounds what one
# accumulates; importing op_db costs each new one several seconds).
_CHUNK_OPS = 60

# The CI slice: every op whose error inputs once passed silently or with
# another exception type on tpu, plus inputs the CPU accepts.
FAST_OPS = [
    "cat", "gather", "index_select", "take", "masked_select", "masked_fill", "uniform",
    "multinomial", "complex", "native_layer_norm", "kthvalue", "scatter", "bernoulli", "amax",
    "aminmax", "bucketize", "logcumsumexp", "masked_scatter", "nn.functional.conv1d",
    "nn.functional.gelu", "clamp_min", "__rsub__",
]

# What tpu says when it lacks an op (no lowering, fallback off).
_UNSUPPORTED_MARKS = ("TORCH_TPU_FALLBACK=0", "not supported on tpu")


def _item(pos, ei_idx, mode_idx):
    return pos * _PER_OP + ei_idx * len(MODES) + mode_idx


def _wanted(op_db, names):
    """op_db indices of the ops that have error inputs (and were asked for);
    work items are numbered by position in this list, which the driver and
    its workers compute alike."""
    return [i for i, op in enumerate(op_db) if op.error_inputs_func is not None and
            (not names or ops._key(op) in names or op.name in names)]


def _exc_text(e):
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:240]


def _attempt(op, sample, synchronize):
    """The exception the call raises (None if it returns)."""
    try:
        op(sample.input, *sample.args, **sample.kwargs)
        if synchronize is not None:
            synchronize()
    except Exception as e:  # every exception is a result here
        return e
    return None


def classify(cpu_exc, tpu_exc):
    """Status of one input in one mode, given the CPU's exception."""
    if tpu_exc is None:
        return "silent"
    if any(m in str(tpu_exc) for m in _UNSUPPORTED_MARKS):
        return "unsupported"
    return "same" if isinstance(tpu_exc, type(cpu_exc)) else "other"


def _worker(args):
    os.environ["TORCH_TPU_FALLBACK"] = "0"
    import warnings

    import torch

    import torch_tpu
    op_db = ops._op_db()
    warnings.filterwarnings("ignore")
    wanted = _wanted(op_db, args.ops)
    with open(args.result, "a") as out:
        def write(rec):
            out.write(json.dumps(rec) + "\n")
            out.flush()

        for pos in range(args.start // _PER_OP, min((args.end - 1) // _PER_OP + 1, len(wanted))):
            op = op_db[wanted[pos]]
            try:
                eis = list(op.error_inputs("cpu"))
            except Exception as e:  # PyTorch's generator itself failed: nothing to count
                print(f"{ops._key(op)}: error_inputs failed: {_exc_text(e)}", file=sys.stderr)
                continue
            if len(eis) > _MAX_INPUTS:
                raise SystemExit(f"{ops._key(op)} has {len(eis)} error inputs; "
                                 f"raise _MAX_INPUTS above it")
            for ei_idx, ei in enumerate(eis):
                todo = [m for m in range(len(MODES))
                        if args.start <= _item(pos, ei_idx, m) < args.end]
                if todo:
                    _run_input(op, pos, ei_idx, ei, todo, write, args.verbose,
                               torch, torch_tpu)


def _run_input(op, pos, ei_idx, ei, todo, write, verbose, torch, torch_tpu):
    sample = ei.sample_input
    base = {"op": ops._key(op), "input": ei_idx}
    write({"begin": _item(pos, ei_idx, todo[0])})
    # One tpu copy per mode, made before the CPU run can mutate the sample.
    moved = {}
    for m in todo:
        try:
            moved[m] = ops._to_tpu(sample, op_name=op.name)
        except Exception as e:  # the sample itself cannot live on tpu
            moved[m] = e
    torch.manual_seed(0)
    cpu_exc = _attempt(op, sample, None)
    for n, m in enumerate(todo):
        item = _item(pos, ei_idx, m)
        if n:
            write({"begin": item})
        rec = dict(base, done=item, mode=MODES[m])
        if cpu_exc is None:
            write(dict(rec, status="cpu accepts"))
            continue
        rec["cpu"] = type(cpu_exc).__name__
        dev = moved[m]
        torch_tpu.set_execution_mode(MODES[m])
        try:
            torch.manual_seed(0)
            tpu_exc = dev if isinstance(dev, Exception) else \
                _attempt(op, dev, torch.tpu.synchronize)
        finally:
            torch_tpu.set_execution_mode("strict")
        status = classify(cpu_exc, tpu_exc)
        rec["status"] = status
        if tpu_exc is not None:
            rec["tpu"] = _exc_text(tpu_exc)
            # PyTorch's own test also matches the message: say whether ours does.
            rec["regex"] = bool(re.search(ei.error_regex, str(tpu_exc)))
        if verbose and status != "same":
            print(f"  {ops._key(op)} input {ei_idx} {MODES[m]}: {status} "
                  f"(CPU {rec['cpu']}; tpu {rec.get('tpu', '-')})", flush=True)
        write(rec)


def _drive(args):
    from .. import _isolate
    op_db = ops._op_db()
    wanted = _wanted(op_db, args.ops)
    result_path = args.json + ".partial"

    def command(start, end):
        cmd = [sys.executable, "-m", "torch_tpu.coverage", "--errors", "--worker",
               "--start", str(start), "--end", str(end), "--result", result_path]
        if args.ops:
            cmd += ["--ops", ",".join(sorted(args.ops))]
        if args.verbose:
            cmd.append("-v")
        return cmd

    def lost(item, why):
        pos, rest = divmod(item, _PER_OP)
        ei_idx, m = divmod(rest, len(MODES))
        return {"op": ops._key(op_db[wanted[pos]]), "input": ei_idx, "mode": MODES[m],
                "status": "hang" if why == "hung" else "crash", "tpu": why}

    done = _isolate.run(command, len(wanted) * _PER_OP, result_path, args.timeout, lost,
                        chunk=_CHUNK_OPS * _PER_OP)
    os.replace(result_path, args.json)
    return done


# -- report -----------------------------------------------------------------------

STATUSES = ("same", "other", "unsupported", "debug only", "silent", "crash", "hang")


def annotate(records):
    """Strict-mode silences whose input debug eager rejects with the CPU's
    type become ``debug only`` (the check exists and needs tensor data)."""
    debug_same = {(r["op"], r["input"]) for r in records
                  if r.get("mode") == "debug" and r["status"] == "same"}
    for r in records:
        if r.get("mode") == "strict" and r["status"] == "silent" and \
                (r["op"], r["input"]) in debug_same:
            r["status"] = "debug only"
    return records


def totals(records):
    """{mode: Counter of statuses}, and the inputs the CPU accepts."""
    by_mode = {m: collections.Counter() for m in MODES}
    accepted = set()
    for r in records:
        if r["status"] == "cpu accepts":
            accepted.add((r["op"], r["input"]))
        else:
            by_mode[r["mode"]][r["status"]] += 1
    return by_mode, accepted


def _rate(part, whole):
    return 100.0 * part / whole if whole else 100.0


def same_rate(records, mode):
    """% of the mode's counted inputs rejected with the CPU's type; inputs
    whose check is debug-only are not counted against strict mode."""
    c = totals(records)[0][mode]
    return _rate(c["same"], sum(c.values()) - c["debug only"])


def report(records):
    by_mode, accepted = totals(records)
    inputs = {(r["op"], r["input"]) for r in records}
    lines = [f"{len(inputs)} error inputs of {len({r['op'] for r in records})} OpInfo entries; "
             f"the CPU accepts {len(accepted)} of them (not counted).", "",
             "| mode | inputs | " + " | ".join(STATUSES) +
             " | raised | same type | same type, data checks aside | message as PyTorch's |",
             "|---|---|" + "---|" * len(STATUSES) + "---|---|---|---|"]
    for m in MODES:
        c = by_mode[m]
        n = sum(c.values())
        raised = c["same"] + c["other"] + c["unsupported"]
        regex = sum(1 for r in records if r.get("mode") == m and r["status"] == "same"
                    and r.get("regex"))
        lines.append(f"| {m} | {n} | " + " | ".join(str(c[s]) for s in STATUSES) +
                     f" | {_rate(raised, n):.1f}% | {_rate(c['same'], n):.1f}% | "
                     f"{same_rate(records, m):.1f}% | {regex} of {c['same']} |")
    return "\n".join(lines)


def details(records):
    """One row per input that is not ``same`` in some mode (modes that agree
    share the row)."""
    rows = collections.OrderedDict()
    for r in sorted(records, key=lambda r: (r["op"], r["input"], r.get("mode", ""))):
        if r["status"] in ("same", "cpu accepts"):
            continue
        key = (r["op"], r["input"], r["status"], r.get("tpu", ""))
        rows.setdefault(key, dict(r, modes=[]))["modes"].append(r["mode"])
    out = ["| op | input | mode | CPU | status | tpu |", "|---|---|---|---|---|---|"]
    for r in rows.values():
        tpu = r.get("tpu", "-").replace("|", "/")[:160]
        out.append(f"| {r['op']} | {r['input']} | {', '.join(r['modes'])} | {r.get('cpu', '-')} | "
                   f"{r['status']} | {tpu} |")
    return "\n".join(out) if rows else "Every counted error input raised the CPU's exception type."


def _read(path):
    with open(path) as f:
        return [rec for rec in map(json.loads, f) if "done" in rec]


def main(argv=None):
    from . import section_parser
    ap = section_parser("python -m torch_tpu.coverage --errors", __doc__.splitlines()[0],
                        "coverage_errors.json")
    ap.add_argument("--min-same", type=float, default=0.0,
                    help="exit 1 if a mode's same-type rate (%%) is below this")
    args = ap.parse_args(argv)
    args.ops = set(o for o in args.ops.split(",") if o)
    if args.fast:
        args.ops = set(FAST_OPS)
    if args.worker:
        return _worker(args)
    t0 = time.time()
    records = annotate(_drive(args))
    summary = report(records)
    print(summary)
    print(f"({time.time() - t0:.0f} s)")
    rows = details(records)
    if args.verbose or len(rows.splitlines()) <= 40:
        print(rows)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("# Error inputs: PyTorch OpInfo ErrorInputs on tpu vs CPU\n\n")
            f.write(f"Plugin: {ops.plugin_in_use()}.\n\n")
            f.write(f"Command: `python -m torch_tpu.coverage --errors {' '.join(argv or [])}`\n\n")
            import torch
            f.write(f"torch {torch.__version__}; CPU fallback off (`TORCH_TPU_FALLBACK=0`); the "
                    "device synchronized after each op. The statuses are defined in "
                    "`torch_tpu/coverage/errors.py`; \"message as PyTorch's\" counts the raises "
                    "whose message also matches the ErrorInput's regex.\n\n")
            f.write(summary + "\n\n" + rows + "\n")
    worst = min(same_rate(records, m) for m in MODES)
    return 1 if worst < args.min_same else 0
