"""nn module coverage against PyTorch's own ModuleInfo database (module_db).

    python -m torch_tpu.coverage --modules                  # full run
    python -m torch_tpu.coverage --modules --fast           # the CI slice
    python -m torch_tpu.coverage --modules --names nn.GRU,nn.Conv2d --dtypes float32 -v

For every ModuleInfo, every dtype asked for (float32 and bfloat16 by
default), training and evaluation mode, and every sample of its
``module_inputs_func``: the module is built on the CPU from the sample's
constructor arguments under a fixed seed (lazy modules see one forward there
to materialise their parameters), deep-copied to ``tpu``, and both run the
sample's forward under the same seed with the CPU fallback off
(``TORCH_TPU_FALLBACK=0``). Columns, each with one status per module:

* ``<dtype>``: the outputs, and the buffers after the forward (batch norm's
  running statistics), match the CPU's;
* ``<dtype>.backward``: under the same cotangents, the gradients of the
  inputs that require grad and of every parameter match the CPU's;
* ``memory_format`` (float32): for samples with a 4-d or 5-d input, every
  combination of the input in contiguous/channels_last(_3d) and the module
  in preserve/contiguous/channels_last(_3d), as PyTorch's
  test_modules.py::test_memory_format makes them (cotangents laid out like
  their outputs): outputs and gradients match the CPU's in the same
  combination, and are laid out (contiguous or channels last) as the CPU's
  are (values only where the ModuleInfo skips the test on CUDA: the layouts
  of PyTorch's accelerator path, which tpu takes, differ from the CPU's).
  ModuleInfos that skip test_memory_format on the CPU are skipped;
* ``errors``: each of the ModuleInfo's ``module_error_inputs_func`` cases,
  built with tpu tensors, raises as it does with those tensors on the CPU:
  the same exception type, and PyTorch's expected message where the CPU's
  has it (a case the CPU accepts is skipped).

Statuses, as in the op_db section (ops.py): ``pass`` (every sample
matched), ``mismatch`` (some value, shape, dtype, layout or error differs),
``unsupported`` (the backend said so: no lowering, unimplemented case),
``error`` (anything else raised on tpu, or the worker crashed or hung), and
``skip`` (not counted: the CPU rejects every sample in that dtype, or the
module has nothing for that column). bfloat16 runs for every module whose
samples the CPU runs in bfloat16: ModuleInfo.dtypes lists it for two
modules only, since PyTorch's own module tests are gradchecks in float64.

Samples whose result is random (the same CPU module run under two seeds
gives different outputs: dropout in training) are compared on shapes and
dtypes only.

Tolerances (|tpu - cpu| <= atol + rtol * |cpu|): a tolerance the ModuleInfo
itself sets for the CPU in its module tests (a ``toleranceOverride`` or
``precisionOverride`` DecorateInfo on test_forward, test_cpu_gpu_parity or
test_non_contiguous_tensors; on test_memory_format for that column, e.g.
1e-4 for convolutions) is used where there is one; otherwise the op_db
section's per-dtype tolerances: float32 rtol=atol=1e-5 (a few ulp of XLA's
vectorised transcendental functions, and sums associated differently: about
80 ulp), bfloat16 rtol=1.6e-2, atol=1e-2 (2 ulp of an 8-bit mantissa).
PyTorch's test_cpu_gpu_parity itself allows float32 atol=5e-2, too loose to
find defects, so it is not used. Where a bfloat16 result, or a gradient,
differs beyond that, a float64 run of the same module is the judge, as in
ops.py, but per sample rather than per element: the tpu result passes when
its largest error against the float64 result, over all of the sample's
tensors and each relative to its tensor's scale, is at most twice the CPU's
plus rtol (PyTorch's own attention tests allow a device 4 to 160 times the
error of the low-precision reference). A module chains many rounded ops, so
the two sides' rounding errors grow on different elements and tensors, and
a ReLU or a max that one side's rounding tips the other way moves a whole
gradient; float32 outputs, held to the plain tolerance, are where defects
show first.

Workers run in subprocesses (torch_tpu._isolate); a crash or a hang (no
progress for --timeout seconds) marks the module ``error`` in every column.
"""
import argparse
import collections
import copy
import sys
import time

from .ops import (TOLERANCES, _classify_exception, _compare, _flatten, add_common_arguments,
                  details, drive_workers, load_testing_db, lowest_pass_rate, plugin_in_use,
                  section_worker, summary_table)

# The CI slice: the common layer families, recurrent cells included.
FAST_MODULES = [
    "nn.Linear", "nn.Conv2d", "nn.LSTM", "nn.GRU", "nn.TransformerEncoderLayer",
    "nn.BatchNorm2d", "nn.Embedding", "nn.MultiheadAttention",
]
FAST_SAMPLES = 3

# ModuleInfo tests whose tolerance overrides are for comparing a module's
# results on one device with another's (or with a reference).
_VALUE_TESTS = ("test_forward", "test_cpu_gpu_parity", "test_non_contiguous_tensors")
_MEMFORMAT_TEST = "test_memory_format"


def _module_db():
    return load_testing_db("common_modules", "module_db", "ModuleInfo")


def _columns(dtypes, backward):
    cols = []
    for d in dtypes:
        cols.append(d)
        if backward:
            cols.append(d + ".backward")
    return cols + ["memory_format", "errors"]


# -- tolerances -------------------------------------------------------------------

def _active(info, tests, dtype, training, device="cpu"):
    """The DecorateInfos of |info| that apply on |device| to one of |tests|."""
    for d in info.decorators:
        if not hasattr(d, "is_active"):
            continue
        for test in tests:
            if d.is_active("TestModule", test, device, dtype, {"training": training}):
                yield d
                break


def _tolerance(info, dtype, training, tests):
    """PyTorch's tolerance for |info| in |dtype| where its ModuleInfo sets
    one for these tests, else ours (the loosest when several apply)."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    name = str(dtype).replace("torch.", "")
    ours = dict(TOLERANCES.get(name, dict(rtol=0, atol=0)))
    found = None
    for d in _active(info, tests, dtype, training):
        for dec in d.decorators:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                t = dict(atol=dec.d[dtype].atol, rtol=dec.d[dtype].rtol)
            elif isinstance(dec, precisionOverride) and dtype in dec.d:
                t = dict(atol=dec.d[dtype], rtol=ours["rtol"])
            else:
                continue
            found = t if found is None else {k: max(found[k], t[k]) for k in t}
    return found or ours


def _skipped(info, test, dtype, training, device="cpu"):
    """Whether the ModuleInfo skips |test| on |device| (unittest.skip)."""
    for d in _active(info, (test,), dtype, training, device):
        for dec in d.decorators:
            try:
                probe = dec(lambda: None)
            except Exception:
                continue
            if getattr(probe, "__unittest_skip__", False):
                return True
    return False


# -- moving samples -----------------------------------------------------------------

def _move(x, device, dtype=None):
    """|x| with every tensor on |device| (as a fresh leaf that requires grad
    where the original does); floating tensors cast to |dtype| if given.
    PackedSequences keep their batch sizes on the CPU, as PyTorch requires."""
    import torch
    from torch.nn.utils.rnn import PackedSequence
    if isinstance(x, torch.Tensor):
        to = dtype if dtype is not None and x.is_floating_point() else x.dtype
        # A copy always (same strides): the sample itself stays untouched.
        return x.detach().to(device=device, dtype=to, copy=True).requires_grad_(x.requires_grad)
    if isinstance(x, PackedSequence):
        return PackedSequence(_move(x.data, device, dtype), x.batch_sizes,
                              _move(x.sorted_indices, device), _move(x.unsorted_indices, device))
    if isinstance(x, tuple):
        return tuple(_move(e, device, dtype) for e in x)
    if isinstance(x, list):
        return [_move(e, device, dtype) for e in x]
    if isinstance(x, dict):
        return {k: _move(v, device, dtype) for k, v in x.items()}
    return x


def _leaves(x):
    import torch
    return [t for t in _flatten(list(x), []) if isinstance(t, torch.Tensor) and t.requires_grad]


def _to_memory_format(x, fmt):
    """Tensors of the rank |fmt| is for, in |fmt|; the rest unchanged."""
    import torch
    rank = {torch.channels_last: 4, torch.channels_last_3d: 5}.get(fmt)
    if isinstance(x, torch.Tensor):
        if rank is None or x.dim() == rank:
            return x.detach().clone(memory_format=fmt).requires_grad_(x.requires_grad)
        return x
    if isinstance(x, (tuple, list)):
        return type(x)(_to_memory_format(e, fmt) for e in x)
    if isinstance(x, dict):
        return {k: _to_memory_format(v, fmt) for k, v in x.items()}
    return x


def _layouts(x):
    """For each tensor of |x|: which of contiguous / channels_last(_3d) it is."""
    import torch
    out = []
    for t in _flatten(x, []):
        if isinstance(t, torch.Tensor):
            fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
            out.append((t.is_contiguous(), fmt is not None and t.is_contiguous(memory_format=fmt)))
    return out


# -- one sample ------------------------------------------------------------------------

def _build(info, sample, dtype, training):
    """The module on the CPU, deterministic, ready to copy."""
    import torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        m = info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
        m.to(dtype)
        m.train(training)
        if isinstance(m, torch.nn.modules.lazy.LazyModuleMixin):
            with torch.no_grad():
                fi = sample.forward_input
                m(*_move(fi.args, "cpu"), **_move(fi.kwargs, "cpu"))
    return m


def _forward(m, args, kwargs, seed=0):
    import torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return m(*args, **kwargs)


def _cotangents(outs, seed):
    """Deterministic cotangents, made on the CPU (for any device's outputs)."""
    import torch
    cots = []
    for i, o in enumerate(outs):
        g = torch.Generator().manual_seed(seed * 1000 + i)
        cots.append(torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype))
    return cots


def _grads(m, args, kwargs, out, seed, like_outputs=False):
    """Gradients of the differentiable outputs, under the seed's cotangents,
    with respect to the inputs that require grad and every parameter that
    does; None where nothing is differentiable. With |like_outputs| the
    cotangents take their outputs' layouts (as PyTorch's memory-format test
    makes them), else they are contiguous."""
    import torch
    outs = [o for o in _flatten(out, []) if isinstance(o, torch.Tensor) and o.requires_grad]
    ins = _leaves(args) + _leaves(kwargs.values()) + [p for p in m.parameters() if p.requires_grad]
    if not outs or not ins:
        return None
    cots = [torch.empty_like(o).copy_(c) if like_outputs else c.to(o.device)
            for o, c in zip(outs, _cotangents(outs, seed))]
    return list(torch.autograd.grad(outs, ins, cots, allow_unused=True))


def _state(m):
    return [b for _, b in m.named_buffers()]


class _Tally:
    """Per-column sample counts and the first problem of each kind."""

    def __init__(self):
        self.counts = collections.defaultdict(collections.Counter)
        self.reasons = {}

    def add(self, column, status, why=None, where=""):
        self.counts[column][status] += 1
        if why:
            self.reasons.setdefault((column, status), f"{where}: {why}")

    def result(self, column):
        c = self.counts.get(column, collections.Counter())
        for status in ("error", "unsupported", "mismatch"):
            if c[status]:
                return {"status": status, "samples": dict(c),
                        "reason": self.reasons.get((column, status), "")}
        if c["pass"]:
            return {"status": "pass", "samples": dict(c)}
        return {"status": "skip", "samples": dict(c),
                "reason": self.reasons.get((column, "skip"), "nothing to compare")}


def _worst_relative_error(x, ref, same_nan):
    """max |x - ref| over a tensor, relative to the tensor's scale (max |ref|);
    NaN where |ref| has none counts as infinite, unless |same_nan| marks it."""
    import torch
    r = ref.detach().double()
    e = (x.detach().cpu().double() - r).abs()
    e = torch.where(same_nan, torch.zeros_like(e), e).nan_to_num(nan=float("inf"))
    scale = float(r.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).max()) if r.numel() else 0.0
    return float(e.max()) / (scale or 1.0) if e.numel() else 0.0


# How much larger than the CPU's own error (against float64) the tpu's may
# be in a low-precision or gradient result: PyTorch's attention tests hold
# devices to 4-160 times the error of the low-precision math reference
# (test_transformers.py's fudge factors); 2 is stricter.
_ERROR_FACTOR = 2.0


def _judge(got, want, dtype_name, tol, reference):
    """None if |got| matches |want|. Beyond the tolerance, |reference()|, a
    float64 run, decides whether the difference is rounding: the tpu result
    passes when its largest error over all of the sample's tensors, each
    relative to its scale, is at most _ERROR_FACTOR times the CPU's plus
    rtol. (Coarser than ops.py's elementwise judge: a module chains many
    rounded ops, and the two sides' rounding errors grow on different
    elements and tensors, a ReLU or a max tipping one way on one side only;
    float32 outputs, held to the plain tolerance, are where defects show
    first.)"""
    import torch
    why = _compare(got, want, dtype_name, tol=tol)
    if not why or not why.startswith("Mismatched") or reference is None:
        return why
    try:
        ref = _flatten(reference(), [])
    except Exception:
        return why  # no float64 reference: the mismatch stands
    g, w = _flatten(got, []), _flatten(want, [])
    if not len(g) == len(w) == len(ref):
        return why
    worst_tpu = worst_cpu = 0.0
    for a, b, r in zip(g, w, ref):
        if isinstance(b, torch.Tensor) and b.is_floating_point():
            both = a.detach().cpu().isnan() & b.isnan()
            worst_tpu = max(worst_tpu, _worst_relative_error(a, r, both))
            worst_cpu = max(worst_cpu, _worst_relative_error(b, r, both))
    if worst_tpu <= _ERROR_FACTOR * worst_cpu + tol["rtol"]:
        return None
    return f"largest error against float64, relative: tpu {worst_tpu:.3g}, CPU {worst_cpu:.3g}; {why}"


def _is_random(m_cpu, fi):
    """Whether the module's output depends on the random seed (dropout in
    training, fractional pooling): such samples are compared on shape only."""
    import torch
    with torch.no_grad():
        a = _forward(copy.deepcopy(m_cpu), _move(fi.args, "cpu"), _move(fi.kwargs, "cpu"), seed=0)
        b = _forward(copy.deepcopy(m_cpu), _move(fi.args, "cpu"), _move(fi.kwargs, "cpu"), seed=1)
    fa, fb = _flatten(a, []), _flatten(b, [])
    return any(isinstance(x, torch.Tensor) and not torch.equal(x.nan_to_num(), y.nan_to_num())
               for x, y in zip(fa, fb))


def _run_sample(info, sample, dtype, dtype_name, training, backward, tally, where, seed):
    import torch
    fwd_col, bwd_col = dtype_name, dtype_name + ".backward"
    fi = sample.forward_input
    try:
        m_cpu = _build(info, sample, dtype, training)
        pristine = copy.deepcopy(m_cpu)
        random = _is_random(m_cpu, fi)
        args_c, kwargs_c = _move(fi.args, "cpu"), _move(fi.kwargs, "cpu")
        want = _forward(m_cpu, args_c, kwargs_c)
        want_g = _grads(m_cpu, args_c, kwargs_c, want, seed) if backward else None
    except Exception as e:
        tally.add(fwd_col, "skip", f"the CPU rejects it ({type(e).__name__})", where)
        return
    tol = _tolerance(info, dtype, training, _VALUE_TESTS)
    low = dtype_name in ("bfloat16", "float16")

    def reference(grads):
        m64 = copy.deepcopy(pristine).double()
        a64 = _move(fi.args, "cpu", torch.float64)
        k64 = _move(fi.kwargs, "cpu", torch.float64)
        out = _forward(m64, a64, k64)
        if grads:
            return _grads(m64, a64, k64, out, seed)
        return [out, _state(m64)]


    stage = fwd_col  # where an exception counts
    try:
        m_tpu = copy.deepcopy(pristine).to("tpu")
        args_t, kwargs_t = _move(fi.args, "tpu"), _move(fi.kwargs, "tpu")
        got = _forward(m_tpu, args_t, kwargs_t)
        why = _judge([got, _state(m_tpu)], [want, _state(m_cpu)], dtype_name, tol,
                     (lambda: reference(False)) if low else None) \
            if not random else _compare(got, want, dtype_name, values=False)
        tally.add(fwd_col, "mismatch" if why else "pass", why, where)
        if backward:
            stage = bwd_col
            if want_g is None:
                tally.add(bwd_col, "skip", "nothing differentiable", where)
                return
            got_g = _grads(m_tpu, args_t, kwargs_t, got, seed)
            why = _compare(got_g, want_g, dtype_name, values=False) if random else \
                _judge(got_g, want_g, dtype_name, tol, lambda: reference(True))
            tally.add(bwd_col, "mismatch" if why else "pass", why, where)
    except Exception as e:
        status, why = _classify_exception(e)
        tally.add(stage, status, why, where)
        if stage == fwd_col and backward:
            tally.add(bwd_col, status, "forward failed: " + why, where)


def _run_memory_format(info, sample, training, tally, where, seed):
    """PyTorch's test_memory_format combinations, each compared with the CPU
    in the same combination. Layouts too, unless the ModuleInfo skips the
    test on CUDA: there PyTorch's own kernels or autograd formulas lay
    results out otherwise on accelerators (group_norm's backward makes its
    inputs contiguous off the CPU), and tpu takes the accelerator path."""
    import torch
    fi = sample.forward_input
    tensors = [t for t in _flatten(list(fi.args), []) if isinstance(t, torch.Tensor)]
    fmt = torch.channels_last if any(t.dim() == 4 for t in tensors) else \
        torch.channels_last_3d if any(t.dim() == 5 for t in tensors) else None
    if fmt is None:
        return
    col = "memory_format"
    tol = _tolerance(info, torch.float32, training, (_MEMFORMAT_TEST,))
    layouts = not _skipped(info, _MEMFORMAT_TEST, torch.float32, training, "cuda")
    try:
        base = _build(info, sample, torch.float32, training)
        if _is_random(base, fi):
            tally.add(col, "skip", "random results", where)
            return
    except Exception as e:
        tally.add(col, "skip", f"the CPU rejects it ({type(e).__name__})", where)
        return
    for in_fmt in (torch.contiguous_format, fmt):
        for mod_fmt in (torch.preserve_format, torch.contiguous_format, fmt):
            if in_fmt == torch.contiguous_format and mod_fmt != fmt:
                continue  # the plain layout: the float32 column covers it
            here = f"{where} input {str(in_fmt)[6:]} module {str(mod_fmt)[6:]}"
            try:
                m_cpu = copy.deepcopy(base).to(memory_format=mod_fmt)
                args_c = _to_memory_format(_move(fi.args, "cpu"), in_fmt)
                kwargs_c = _to_memory_format(_move(fi.kwargs, "cpu"), in_fmt)
                want = _forward(m_cpu, args_c, kwargs_c)
                want_g = _grads(m_cpu, args_c, kwargs_c, want, seed, True) if training else None
            except Exception as e:
                tally.add(col, "skip", f"the CPU rejects it ({type(e).__name__})", here)
                continue
            try:
                m_tpu = copy.deepcopy(base).to("tpu").to(memory_format=mod_fmt)
                args_t = _to_memory_format(_move(fi.args, "tpu"), in_fmt)
                kwargs_t = _to_memory_format(_move(fi.kwargs, "tpu"), in_fmt)
                got = _forward(m_tpu, args_t, kwargs_t)
                why = _compare(got, want, "float32", tol=tol)
                if not why and layouts and _layouts(got) != _layouts(want):
                    why = f"output layouts {_layouts(got)}, CPU {_layouts(want)} (contiguous, channels last)"
                if not why and want_g is not None:
                    got_g = _grads(m_tpu, args_t, kwargs_t, got, seed, True)
                    why = _compare(got_g, want_g, "float32", tol=tol)
                    if not why and layouts and _layouts(got_g) != _layouts(want_g):
                        why = f"gradient layouts {_layouts(got_g)}, CPU {_layouts(want_g)}"
                tally.add(col, "mismatch" if why else "pass", why, here)
            except Exception as e:
                status, why = _classify_exception(e)
                tally.add(col, status, why, here)


def _raise_of(info, case, device, training):
    """The exception a ModuleInfo error case raises with its tensors on
    |device|, or None."""
    from torch.testing._internal.common_modules import ModuleErrorEnum
    mi = case.module_error_input
    try:
        m = info.module_cls(*_move(mi.constructor_input.args, device),
                            **_move(mi.constructor_input.kwargs, device))
        if case.error_on == ModuleErrorEnum.FORWARD_ERROR:
            m.to(device).train(training)
            m(*_move(mi.forward_input.args, device), **_move(mi.forward_input.kwargs, device))
    except Exception as e:
        return e
    return None


def _run_errors(info, tally, heartbeat):
    """The ModuleInfo's error inputs for tpu: each must raise as it does with
    the same tensors on the CPU, with PyTorch's expected message where the
    CPU's has it. A case the CPU itself accepts (batch norm's eps=0 in
    evaluation) is skipped: it is not an error there."""
    import re

    import torch
    col = "errors"
    if info.module_error_inputs_func is None:
        return
    for training in (True, False):
        try:
            torch.manual_seed(0)
            cases = list(info.module_error_inputs_func(info, device="tpu", dtype=torch.float32,
                                                       requires_grad=False, training=training))
        except Exception as e:
            status, why = _classify_exception(e)
            tally.add(col, status, f"building error inputs: {why}", "")
            continue
        for i, case in enumerate(cases):
            heartbeat()
            where = f"{'train' if training else 'eval'} case {i}"
            want = _raise_of(info, case, "cpu", training)
            if want is None:
                tally.add(col, "skip", "the CPU accepts it", where)
                continue
            got = _raise_of(info, case, "tpu", training)
            expected = f"{type(want).__name__}: {str(want).splitlines()[0][:120] if str(want) else ''}"
            if got is None:
                tally.add(col, "mismatch", f"no error on tpu (CPU: {expected})", where)
                continue
            message_ok = not re.search(case.error_regex, str(want)) or \
                re.search(case.error_regex, str(got))
            if type(got) is type(want) and message_ok:
                tally.add(col, "pass")
            else:
                status, why = _classify_exception(got)
                tally.add(col, status if status == "unsupported" else "mismatch",
                          f"{why} (CPU: {expected})", where)


def run_module(info, dtypes, max_samples, backward, heartbeat=lambda: None, verbose=False):
    """Returns {column: {status, samples, reason}}."""
    import torch
    tally = _Tally()
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for training in (True, False):
            mode = "train" if training else "eval"
            try:
                torch.manual_seed(0)  # the samples' values: the same on every run
                samples = list(info.module_inputs_func(info, device="cpu", dtype=dtype,
                                                       requires_grad=True, training=training))
            except Exception as e:
                tally.add(dtype_name, "skip", f"module_inputs_func failed: {type(e).__name__}", mode)
                continue
            samples = [s for s in samples if s.forward_input is not None]
            if max_samples:
                samples = samples[:max_samples]
            for i, s in enumerate(samples):
                heartbeat()
                _run_sample(info, s, dtype, dtype_name, training, backward, tally,
                            f"{mode} sample {i}", seed=i)
                if dtype_name == "float32" and not _skipped(info, _MEMFORMAT_TEST, dtype, training):
                    _run_memory_format(info, s, training, tally, f"{mode} sample {i}", seed=i)
    if "float32" in dtypes:
        _run_errors(info, tally, heartbeat)
    result = {col: tally.result(col) for col in _columns(dtypes, backward)}
    if "float32" in dtypes and _skipped(info, _MEMFORMAT_TEST, torch.float32, True):
        result["memory_format"] = {"status": "skip", "reason": "the ModuleInfo skips test_memory_format"}
    if verbose:
        for col, r in result.items():
            if r["status"] not in ("pass", "skip"):
                print(f"  {info.name} {col}: {r['status']}: {r.get('reason', '')}", flush=True)
    return result


# -- driver ------------------------------------------------------------------------

def _worker(args):
    section_worker(args, _module_db, lambda info: not args.names or info.name in args.names,
                   lambda info, progress: {"module": info.name, "result": run_module(
                       info, args.dtypes, args.samples, args.backward, progress, args.verbose)})


# Modules per worker process: bounds the executables one process holds.
_CHUNK = 16


def _sample_totals(results, columns):
    """"float32 3618/3618 passed, ..." over all modules."""
    parts = []
    for col in columns:
        c = collections.Counter()
        for r in results.values():
            c.update(r.get(col, {}).get("samples") or {})
        counted = sum(n for k, n in c.items() if k != "skip")
        parts.append(f"{col} {c['pass']}/{counted} passed")
    return ", ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.coverage --modules",
                                 description=__doc__.splitlines()[0])
    add_common_arguments(ap, 0, "max samples per module, dtype and mode (default: all)",
                         "coverage_modules.json")
    ap.add_argument("--names", "--modules-list", dest="names", default="",
                    help="comma-separated ModuleInfo names (nn.Linear,nn.GRU)")
    args = ap.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.names = set(n for n in args.names.split(",") if n)
    if args.fast:
        args.names = set(FAST_MODULES)
        args.samples = min(args.samples or FAST_SAMPLES, FAST_SAMPLES)
    if args.worker:
        return _worker(args)
    t0 = time.time()
    results = drive_workers(args, ["--modules"], _module_db(), lambda info: info.name in args.names,
                            lambda info: info.name, "module", "--names", args.names,
                            _columns(args.dtypes, args.backward), _CHUNK)
    columns = _columns(args.dtypes, args.backward)
    summary = summary_table(results, columns, "modules", skips=True)
    print(summary)
    print(f"({len(results)} ModuleInfo entries, {time.time() - t0:.0f} s)")
    if args.markdown:
        import torch
        with open(args.markdown, "w") as f:
            f.write("# Module coverage: PyTorch ModuleInfo samples on tpu vs CPU\n\n")
            f.write(f"Plugin: {plugin_in_use()}.\n\n")
            f.write(f"Command: `python -m torch_tpu.coverage --modules {' '.join(argv or sys.argv[2:])}` "
                    f"({', '.join(args.dtypes)}; training and evaluation; "
                    f"{'all' if not args.samples else f'up to {args.samples}'} samples per module, "
                    f"dtype and mode; CPU fallback off; {len(results)} ModuleInfo entries; "
                    f"torch {torch.__version__}; {time.time() - t0:.0f} s)\n\n")
            f.write("Statuses and tolerances: see `torch_tpu/coverage/modules.py`. "
                    "\"samples passed\" counts sample comparisons over all columns. "
                    f"Sample comparisons per column: {_sample_totals(results, columns)}.\n\n")
            f.write(summary + "\n\n" + details(results, columns, "module", True, 200) + "\n")
    return 1 if lowest_pass_rate(results, columns) < args.min_pass else 0
