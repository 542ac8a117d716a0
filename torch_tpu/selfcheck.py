"""A quick conformance probe of the PJRT plugin in use against PyTorch's CPU.

    python -m torch_tpu.info --check          # exit 1 and name each op that disagrees
    torch_tpu.selfcheck.run()                 # the same, as a list of Disagreement

Plugins compute some ops wrong on some sizes only (a vectorised kernel's
main loop, its remainder, a tile boundary) or on special values only, so
every probe runs at sizes on both sides of common vector widths and past a
tile (7, 64, 1031; reductions on 63x129), with ±0, ±inf, NaN, denormals and
large magnitudes among ordinary values, in float32 and bfloat16 (and the
integer dtypes where the op takes them). A result agrees when it is, element
by element, no farther from a float64 reference than PyTorch's CPU result
is, plus the dtype's tolerance (torch_tpu/coverage/ops.py explains them);
NaN and infinities must be the CPU's or the float64 reference's. Plugins
that flush denormals to zero (XLA:CPU, TPUs) are compared with the CPU's
results for the flushed values, and the report says so.

On the CPU plugins the probe takes 30-60 s with a cold executable cache
(one small executable per op, dtype and size) and under 10 s warm.
"""
import dataclasses
import math
import time

import torch

TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float16: (1e-3, 1e-3),
}

SIZES = (7, 64, 1031)
REDUCE_SHAPE = (63, 129)

# Domains of the inputs: (low, high) of the ordinary values, and whether the
# special values go in (ops whose CPU result at ±inf or 1e30 is itself an
# approximation, such as sin of a huge argument, keep to their range).
WIDE = (-40.0, 40.0)
UNIT = (-0.999, 0.999)
POS = (1e-3, 60.0)
ABOVE_ONE = (1.0, 60.0)
TRIG = (-30.0, 30.0)


@dataclasses.dataclass
class Probe:
    name: str
    fn: object
    domain: tuple = WIDE
    arity: int = 1
    specials: bool = True
    ints: bool = False      # also run in int32 and int64
    reduce: bool = False    # input is REDUCE_SHAPE


@dataclasses.dataclass
class Disagreement:
    op: str
    dtype: str
    shape: tuple
    detail: str

    def __str__(self):
        return f"{self.op} ({self.dtype}, shape {self.shape}): {self.detail}"


def _probes():
    F = torch.nn.functional
    unary = [
        ("abs", torch.abs, WIDE, True, True), ("neg", torch.neg, WIDE, True, True),
        ("exp", torch.exp, WIDE, True, False), ("exp2", torch.exp2, WIDE, True, False),
        ("expm1", torch.expm1, WIDE, True, False), ("log", torch.log, POS, True, False),
        ("log2", torch.log2, POS, True, False), ("log10", torch.log10, POS, True, False),
        ("log1p", torch.log1p, POS, True, False), ("sqrt", torch.sqrt, POS, True, False),
        ("rsqrt", torch.rsqrt, POS, True, False), ("reciprocal", torch.reciprocal, WIDE, True, False),
        ("sin", torch.sin, TRIG, False, False), ("cos", torch.cos, TRIG, False, False),
        ("tan", torch.tan, UNIT, False, False), ("tanh", torch.tanh, WIDE, True, False),
        ("sigmoid", torch.sigmoid, WIDE, True, False), ("asin", torch.asin, UNIT, False, False),
        ("acos", torch.acos, UNIT, False, False), ("atan", torch.atan, WIDE, True, False),
        ("sinh", torch.sinh, (-10.0, 10.0), True, False), ("cosh", torch.cosh, (-10.0, 10.0), True, False),
        ("asinh", torch.asinh, WIDE, True, False), ("acosh", torch.acosh, ABOVE_ONE, True, False),
        ("atanh", torch.atanh, UNIT, False, False), ("erf", torch.erf, (-5.0, 5.0), True, False),
        ("erfc", torch.erfc, (-5.0, 5.0), True, False), ("erfinv", torch.erfinv, UNIT, False, False),
        ("ndtri", torch.special.ndtri, (1e-6, 1.0), False, False),
        ("lgamma", torch.lgamma, POS, False, False), ("digamma", torch.digamma, WIDE, True, False),
        ("floor", torch.floor, WIDE, True, False), ("ceil", torch.ceil, WIDE, True, False),
        ("round", torch.round, WIDE, True, False), ("trunc", torch.trunc, WIDE, True, False),
        ("frac", torch.frac, WIDE, False, False), ("sign", torch.sign, WIDE, True, True),
        ("relu", torch.relu, WIDE, True, True), ("gelu", F.gelu, WIDE, True, False),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), WIDE, True, False),
        ("silu", F.silu, WIDE, True, False), ("softplus", F.softplus, WIDE, True, False),
        ("elu", F.elu, WIDE, True, False), ("mish", F.mish, WIDE, False, False),
        ("isnan", torch.isnan, WIDE, True, False), ("isinf", torch.isinf, WIDE, True, False),
        ("nan_to_num", torch.nan_to_num, WIDE, True, False),
    ]
    binary = [
        ("add", torch.add, True), ("sub", torch.sub, True), ("mul", torch.mul, True),
        ("div", torch.div, False), ("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), True),
        ("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), True),
        ("remainder", torch.remainder, True), ("fmod", torch.fmod, True),
        ("pow", lambda a, b: torch.pow(a.abs(), b / 8), False), ("atan2", torch.atan2, False),
        ("maximum", torch.maximum, True), ("minimum", torch.minimum, True),
        ("hypot", torch.hypot, False), ("copysign", torch.copysign, False),
        ("logaddexp", torch.logaddexp, False), ("xlogy", torch.xlogy, False),
        ("eq", torch.eq, True), ("lt", torch.lt, True),
        ("where", lambda a, b: torch.where(a > b, a, b), True),
        ("lerp", lambda a, b: torch.lerp(a, b, 0.3), False),
    ]
    reduce = [
        ("sum", lambda x: (x.sum(0), x.sum(1), x.sum()), True),
        ("mean", lambda x: (x.mean(0), x.mean(1)), False),
        ("prod", lambda x: x.prod(1), False),
        ("amax", lambda x: (x.amax(0), x.amax(1)), True),
        ("amin", lambda x: (x.amin(0), x.amin(1)), True),
        ("argmax", lambda x: (x.argmax(0), x.argmax(1)), True),
        ("var", lambda x: (x.var(0), x.var(1)), False),
        ("logsumexp", lambda x: (x.logsumexp(0), x.logsumexp(1)), False),
        ("softmax", lambda x: (x.softmax(0), x.softmax(1)), False),
        ("log_softmax", lambda x: x.log_softmax(1), False),
        ("cumsum", lambda x: (x.cumsum(0), x.cumsum(1)), True),
        ("norm", lambda x: (torch.linalg.vector_norm(x, dim=1), torch.linalg.vector_norm(x)), False),
        ("layer_norm", lambda x: F.layer_norm(x, x.shape[1:]), False),
        ("sort", lambda x: x.sort(1).values, True),
        ("topk", lambda x: x.topk(5, 1).values, True),
        ("matmul", lambda x: x @ x.T, False),
    ]
    out = [Probe(n, f, d, 1, s, i) for n, f, d, s, i in unary]
    out += [Probe(n, f, WIDE, 2, True, i) for n, f, i in binary]
    # Reductions see ordinary values only: one inf or NaN would make the
    # whole row's result special and hide the kernel's own errors.
    out += [Probe(n, f, (-4.0, 4.0), 1, False, i, reduce=True) for n, f, i in reduce]
    return out


def _values(n, dtype, domain, specials, seed):
    """|n| values in |domain|, reproducible, with the special values at fixed
    places; integers are the floats truncated."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = domain
    x = torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo
    if specials and n >= 16:
        tiny = torch.finfo(torch.float32).tiny
        big = 1e30 if dtype == torch.float32 else 1e20
        sp = [0.0, -0.0, math.inf, -math.inf, math.nan, tiny / 4, -tiny / 4, big, -big,
              hi, lo, 1.0, -1.0]
        step = max(n // len(sp), 1)
        for k, v in enumerate(sp):
            x[(k * step + k) % n] = v
    if not dtype.is_floating_point:
        x = x.clamp(-1e6, 1e6).nan_to_num(0.0, 0.0, 0.0).trunc()
        return x.to(dtype)
    return x.to(dtype)


def _same_special(a, b):
    return (a.isnan() & b.isnan()) | (a.isinf() & (a == b))


def _close(got, want, ref, dtype):
    """None if |got| agrees with |want| (the CPU's) within the dtype's
    tolerance, or is as accurate as it against |ref| (float64), element by
    element; else a description of the first element that is neither. NaN
    and infinities must be the CPU's or the reference's."""
    got = got.detach().cpu()
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)}, CPU {tuple(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, CPU {want.dtype}"
    if not want.is_floating_point():
        bad = got != want
        if not bool(bad.any()):
            return None
        i = int(bad.flatten().nonzero()[0])
        return f"{int(bad.sum())} of {want.numel()} differ (element {i}: {got.flatten()[i].item()}, " \
               f"CPU {want.flatten()[i].item()})"
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    g, w, r = got.double().flatten(), want.double().flatten(), ref.double().flatten()
    finite = g.isfinite() & w.isfinite() & r.isfinite()
    zero = torch.zeros_like(g)
    near_cpu = finite & ((g - w).abs() <= atol + rtol * w.abs())
    as_accurate = finite & ((g - r).abs() <= torch.where(finite, (w - r).abs(), zero)
                            + atol + rtol * torch.where(finite, r.abs(), zero))
    ok = near_cpu | as_accurate | _same_special(g, w) | _same_special(g, r)
    if bool(ok.all()):
        return None
    i = int((~ok).nonzero()[0])
    return (f"{int((~ok).sum())} of {w.numel()} elements wrong (element {i}: {g[i].item():.6g}, "
            f"CPU {w[i].item():.6g}, float64 {r[i].item():.6g})")


def flush_denormals(t):
    """|t| with denormals replaced by zeros of their sign: what XLA:CPU does
    to every input and result (it runs with denormals flushed, as TPUs do;
    PyTorch's CPU keeps them unless torch.set_flush_denormal(True)), so the
    CPU side can compute the same. bfloat16 computes in float32, whose
    denormals it shares; float16 computes in float32 too, where its own
    denormals are normal numbers, so it is left alone."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.dtype == torch.float16:
        return t
    tiny = torch.finfo(torch.float64 if t.dtype == torch.float64 else torch.float32).tiny
    return torch.where((t.abs() < tiny) & (t != 0), torch.zeros_like(t).copysign(t), t)


def flushes_denormals(device="tpu"):
    """True when |device| computes with denormals flushed to zero."""
    x = torch.tensor([torch.finfo(torch.float32).tiny / 4])
    return bool((x.to(device) * 1.0).cpu()[0] == 0)


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _check_one(probe, dtype, shape, device, seed, flush):
    n = math.prod(shape)
    args = [_values(n, dtype, probe.domain, probe.specials, seed + k).reshape(shape)
            for k in range(probe.arity)]
    cpu_args = [flush_denormals(a) for a in args] if flush else args
    out = flush_denormals if flush else (lambda t: t)
    with torch.no_grad():
        try:
            want = [out(t) for t in _flat(probe.fn(*cpu_args))]
        except RuntimeError:
            return None  # the CPU does not take this dtype: nothing to compare
        ref = [out(t) for t in _flat(probe.fn(*[a.double() if a.is_floating_point() else a
                                                for a in cpu_args]))]
        try:
            got = _flat(probe.fn(*[a.to(device) for a in args]))
            got = [t.cpu() for t in got]
        except Exception as e:  # noqa: BLE001  (reported, never swallowed)
            return f"raised {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    for k, (g, w, r) in enumerate(zip(got, want, ref)):
        why = _close(g, w, r if w.is_floating_point() else w, dtype)
        if why:
            return (f"result {k}: " if len(want) > 1 else "") + why
    return None


def run(device="tpu", dtypes=(torch.float32, torch.bfloat16), progress=None):
    """Runs every probe on |device| against the CPU; returns (disagreements,
    number of comparisons made)."""
    bad, count = [], 0
    flush = flushes_denormals(device)
    for probe in _probes():
        kinds = list(dtypes) + ([torch.int32, torch.int64] if probe.ints else [])
        shapes = [REDUCE_SHAPE] if probe.reduce else [(n,) for n in SIZES]
        for dtype in kinds:
            for shape in shapes:
                why = _check_one(probe, dtype, shape, device, len(probe.name) * 7919, flush)
                count += 1
                if why:
                    bad.append(Disagreement(probe.name, str(dtype).replace("torch.", ""),
                                            shape, why))
        if progress:
            progress(probe.name)
    return bad, count


def main(device="tpu"):
    """Prints the probe's result; returns the exit status (1 if any op
    disagrees with the CPU)."""
    from torch_tpu import _C, plugins
    info = _C._plugin_info()
    plugin = plugins.describe(info["path"])
    t0 = time.time()
    bad, count = run(device)
    took = time.time() - t0
    print(f"self-check on {plugin} (PJRT {info['api_version'][0]}.{info['api_version'][1]}, "
          f"{info['platform_name']}): {count} comparisons against the CPU in {took:.1f} s")
    if flushes_denormals(device):
        print("denormals: flushed to zero on this plugin, in inputs and results (as on TPUs); "
              "compared with the CPU's results for the same flushed values")
    if not bad:
        print("every probed op agrees with the CPU")
        return 0
    ops = sorted({b.op for b in bad})
    print(f"{len(ops)} op(s) disagree with the CPU on this plugin: {', '.join(ops)}")
    for b in bad:
        print(f"  {b}")
    return 1
