"""Op coverage against PyTorch's own OpInfo database.

    python -m torch_tpu.coverage                     # full run, float32 + bfloat16, forward + backward
    python -m torch_tpu.coverage --fast              # the CI slice
    python -m torch_tpu.coverage --ops add,mm --dtypes float32 -v
    python -m torch_tpu.coverage --core              # which torch.Tag.core ops lack a native rule

Every sample input of every OpInfo in ``op_db`` runs on the CPU and on ``tpu``
with the CPU fallback disabled (``TORCH_TPU_FALLBACK=0``), and the results are
compared. Each (op, dtype) gets one status:

* ``pass``: every sample matched the CPU within the dtype's tolerance;
* ``mismatch``: some sample gave a different value, shape or dtype;
* ``unsupported``: the backend said so (no lowering, unimplemented case);
* ``error``: anything else raised on ``tpu`` (a defect of ours), or the worker
  crashed or hung on it;
* ``skip``: not counted: the CPU itself rejects every sample, or the dtype is
  not one the op supports on the CPU.

Random ops, and samples with a ``dropout_p`` above 0, are compared on shape and
dtype only. Where PyTorch's meta kernel and its CPU kernel disagree on a result
shape, the meta one (which gives the backend its out types) is the judge.
Arguments PyTorch requires on the CPU (``CPU_ONLY_ARGS``) stay there; sparse
samples are unsupported (tpu has dense strided tensors only). Backward (float32): for ops
that support autograd, the gradients of every differentiable input, under the
same cotangents, are compared the same way.

Tolerances (|tpu - cpu| <= atol + rtol * |cpu|): float32 rtol=atol=1e-5: XLA's
vectorised transcendental functions differ from the CPU's by a few ulp and its
fused reductions associate sums differently (n terms: ~n ulp); 1e-5 is about
80 ulp. float64 1e-7. bfloat16 rtol=1.6e-2 (2 ulp of an 8-bit mantissa: both
sides compute in float32 and round once, but inputs to a rounding can differ
by an ulp), atol=1e-2 for results near zero that are differences of larger
rounded terms. float16 1e-3 for the same reasons. Integers and bools: exact.

Workers run in subprocesses; a crash or a hang (no progress for --timeout
seconds) marks that op ``error`` and the run continues with the next op.
"""
import argparse
import collections
import contextlib
import os
import sys
import time

TOLERANCES = {
    "float32": dict(rtol=1e-5, atol=1e-5),
    "float64": dict(rtol=1e-7, atol=1e-7),
    "bfloat16": dict(rtol=1.6e-2, atol=1e-2),
    "float16": dict(rtol=1e-3, atol=1e-3),
    "complex64": dict(rtol=1e-5, atol=1e-5),
}

# Ops whose values are random: compared on shape and dtype.
RANDOM_OPS = {
    "bernoulli", "normal", "normal_in_place", "rand_like", "randint_like", "randn_like",
    "randint", "randn", "rand", "uniform", "multinomial", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu", "cauchy", "exponential",
    "geometric", "log_normal", "randperm", "empty", "empty_like", "new_empty",
    "new_empty_strided", "empty_strided", "empty_permuted", "nn.functional.multi_head_attention_forward",
    # Windows placed by random samples drawn from each device's generator
    # (tests/python/test_nn_misc_ops.py compares them given the same samples).
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
}

# Ops returning (values, indices) whose index among equal values PyTorch
# leaves to the implementation (the CPU's comes from an unstable sort or a
# quickselect): the values must match and each index must point at its
# value. Each maps to the positions of its dim and keepdim arguments (None:
# the indices keep the dim). A stable sort's indices are exact.
TIED_INDEX_OPS = {"mode": (0, 1), "kthvalue": (1, 2), "topk": (1, None), "sort": (0, None),
                  "argsort": (0, None)}


def _compare_tied_index(op_name, sample, got, want, dtype_name):
    import torch
    at, keep_at = TIED_INDEX_OPS[op_name]
    dim = sample.args[at] if len(sample.args) > at else sample.kwargs.get("dim", -1)
    x = sample.input
    if op_name == "argsort":  # indices alone: compare the values they pick
        if x.dim() == 0:
            return _compare(got, want, dtype_name)
        got = (x.gather(dim, got.cpu()), got)
        want = (x.gather(dim, want), want)
    why = _compare(got[0].cpu() if op_name == "argsort" else got[0], want[0], dtype_name,
                   check_device=op_name != "argsort")
    if why:
        return why
    if op_name in ("sort", "argsort") and sample.kwargs.get("stable"):
        return "indices of a stable sort differ"
    idx = got[1].cpu()
    keep = True if keep_at is None else (
        sample.args[keep_at] if len(sample.args) > keep_at else sample.kwargs.get("keepdim", False))
    if x.dim() == 0:
        return None if int(idx) == 0 else f"index {int(idx)} of a 0-d tensor"
    i = idx if keep else idx.unsqueeze(dim)
    picked = x.gather(dim, i)
    picked = picked if keep else picked.squeeze(dim)
    ok = (picked == want[0]) | (picked.isnan() & want[0].isnan())
    if not bool(ok.all()):
        return f"an index points at another value than the {op_name}'s"
    n = idx.shape[dim] if idx.dim() else 1
    if keep_at is None and n > 1:  # sort / topk: each element picked once
        si = idx.sort(dim).values
        if not bool((si.narrow(dim, 1, n - 1) != si.narrow(dim, 0, n - 1)).all()):
            return f"{op_name} picks an element twice"
    return None


# Ops whose vectors are defined up to sign (eigenvectors, singular vectors):
# (vector output, its partner sharing each sign, True when the partner holds
# the vectors as rows). The signs of the tpu result are taken
# from the CPU's before comparing: then equal within the tolerance, or the
# vectors are wrong.
BASIS_OPS = {
    "linalg.eigh": (1, None, False),
    "linalg.svd": (0, 2, True),
    "svd": (0, 2, False),
    "svd_lowrank": (0, 2, False),
    "pca_lowrank": (0, 2, False),
}


# Ops drawing random projections (torch._lowrank's torch.randn): both sides
# draw them from the CPU generator, so tpu projects as the CPU did.
CPU_RANDOM_OPS = {"svd_lowrank", "pca_lowrank"}


@contextlib.contextmanager
def _cpu_randn():
    import torch
    randn = torch.randn

    def on_cpu(*size, device=None, **kw):
        return randn(*size, **kw).to(device) if device is not None else randn(*size, **kw)
    torch.randn = on_cpu
    try:
        yield
    finally:
        torch.randn = randn


def _align_basis(op_name, got, like):
    """|got| (a tuple of tensors) on the CPU with each vector's sign, and its
    partner's, chosen to match |like|'s. Vectors past the partner's count
    (full_matrices' completion of a basis) may be any basis of their span:
    they are rotated onto |like|'s (got R^T with R = like^T got, which is
    |like| itself only if the spans agree)."""
    import torch
    vec, partner, rows = BASIS_OPS[op_name]
    out = [t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in got]
    u, w = out[vec], like[vec].to(out[vec].dtype)
    if u.dim() < 2 or u.shape != w.shape or not u.is_floating_point():
        return tuple(out)

    def signed(a, b):  # a's columns with b's signs, and the signs
        s = torch.sign((a.double() * b.double()).sum(-2))
        s = torch.where(s == 0, torch.ones_like(s), s).to(a.dtype)
        return a * s.unsqueeze(-2), s

    def rotated(a, b):  # a's columns rotated onto b's
        r = b.double().transpose(-2, -1) @ a.double()
        return (a.double() @ r.transpose(-2, -1)).to(a.dtype)

    if partner is None:
        out[vec] = signed(u, w)[0]
        return tuple(out)
    p, pw = out[partner], like[partner].to(out[partner].dtype)
    if rows:  # work on columns
        p, pw = p.transpose(-2, -1), pw.transpose(-2, -1)
    k = min(u.shape[-1], p.shape[-1])
    us, s = signed(u[..., :k], w[..., :k])
    u = torch.cat([us, rotated(u[..., k:], w[..., k:])], -1) if u.shape[-1] > k else us
    ps = p[..., :k] * s.unsqueeze(-2)
    p = torch.cat([ps, rotated(p[..., k:], pw[..., k:])], -1) if p.shape[-1] > k else ps
    out[vec] = u
    out[partner] = p.transpose(-2, -1) if rows else p
    return tuple(out)


# Positional sample arguments PyTorch requires on the CPU (it rejects a
# device tensor there): kept on the CPU when the sample moves to tpu.
CPU_ONLY_ARGS = {
    "tensor_split": (0,),  # tensor_indices_or_sections: "expected ... on cpu"
}

# The CI slice: common ops across families, a few samples each.
FAST_OPS = [
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh",
    "pow", "maximum", "clamp", "where", "eq", "lt", "sum", "mean", "amax", "argmax", "max",
    "var", "softmax", "log_softmax", "mm", "bmm", "addmm", "matmul", "cat", "stack",
    "index_select", "gather", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    "nn.functional.cross_entropy", "nn.functional.layer_norm", "nn.functional.embedding",
    "transpose", "reshape", "flip", "tril", "masked_fill", "lerp", "addcmul",
]


def _key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def _flatten(x, out):
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for e in x:
            _flatten(e, out)
    elif isinstance(x, dict):
        for e in x.values():
            _flatten(e, out)
    else:
        out.append(x)
    return out


def _to_tpu(sample, requires_grad=False, op_name=""):
    import torch
    storages = {}  # CPU storage -> its tpu copy, shared by the tensors that share it
    tensors = {}   # id of a CPU tensor -> its tpu twin: a tensor passed twice stays one

    def move(t):
        if id(t) not in tensors:
            tensors[id(t)] = move_new(t)
        return tensors[id(t)]

    def move_new(t):
        if t.device.type != "cpu":
            return t  # a sample on another device on purpose (meta): it stays there
        if t.layout != torch.strided:
            raise NotImplementedError(f"{t.layout} tensors are not supported on tpu "
                                      "(dense strided layout only)")
        # Same storage layout as on the CPU (offset, strides, the rest of the
        # storage), so samples that look through views mean the same thing,
        # and tensors sharing a storage share it on tpu too (an out= that
        # overlaps an input must still overlap it).
        wants_grad = t.requires_grad
        t = t.detach()
        n = t.untyped_storage().nbytes() // max(t.element_size(), 1)
        key = (t.untyped_storage().data_ptr(), t.dtype)
        whole = storages.get(key) if n else None
        if whole is None:
            whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,)).to("tpu")
            if n:
                storages[key] = whole
        d = whole.as_strided(t.shape, t.stride(), t.storage_offset()).detach()
        if requires_grad and wants_grad:
            d.requires_grad_()
        return d
    moved = sample.transform(lambda t: move(t) if isinstance(t, torch.Tensor) else t)
    keep = CPU_ONLY_ARGS.get(op_name, ())
    if keep:
        moved.args = tuple(a if i not in keep else sample.args[i] for i, a in enumerate(moved.args))
    # Factory samples name their device, and Tensor.to's samples move to it
    # (positionally): make it ours.
    def is_cpu(d):
        return (isinstance(d, torch.device) and d.type == "cpu") or \
            (isinstance(d, str) and d == "cpu")
    dev = moved.kwargs.get("device")
    if dev is not None and torch.device(dev).type == "cpu":
        moved.kwargs["device"] = "tpu"
    moved.args = tuple("tpu" if is_cpu(a) else a for a in moved.args)
    return moved


def _upcast(sample):
    """The sample with floating tensors in float64, for a reference result
    (tensors that required grad still do)."""
    import torch
    return sample.transform(lambda t: t.detach().double().requires_grad_(t.requires_grad)
                            if isinstance(t, torch.Tensor) and t.is_floating_point() else t)


def _as_accurate_as_cpu(got, want, ref, dtype_name):
    """Low-precision results may round differently from the CPU's (both are
    within an ulp or two of the exact value, but not of each other): accept
    the tpu result when it is, elementwise, no farther from a float64
    reference than the CPU's own result is, plus the dtype's tolerance."""
    import torch
    g, w, r = _flatten(got, []), _flatten(want, []), _flatten(ref, [])
    if not (len(g) == len(w) == len(r)):
        return False
    tol = TOLERANCES[dtype_name]
    for a, b, c in zip(g, w, r):
        if not isinstance(b, torch.Tensor) or not b.is_floating_point():
            continue
        dtype = b.dtype
        a, b, c = a.detach().cpu().double(), b.double(), c.double()
        # the reference rounded to the dtype: inf where it overflows it
        # (a float16 matrix_exp past 65504), which tpu may match exactly
        rounded = c.to(dtype).double()
        err_tpu = (a - c).abs()
        # A CPU result that is NaN or infinite where the reference is finite
        # (PyTorch 2.13's bfloat16 matrix_exp) earns tpu no slack: tpu must
        # then be within the tolerance of the reference itself.
        err_cpu = (b - c).abs().nan_to_num(0.0, 0.0, 0.0)
        bound = err_cpu + tol["atol"] + tol["rtol"] * c.abs()
        ok = (err_tpu <= bound) | (a.isnan() & b.isnan()) | (a == b) | \
            (a.isnan() & c.isnan()) | (a == c) | (a == rounded)
        if not bool(ok.all()):
            return False
    return True


def _compare(got, want, dtype_name, values=True, cast=False, tol=None, check_device=True):
    """None if equal within tolerance (the dtype's, or |tol| for floating
    results), else a short reason. With |cast|, results are compared in the
    CPU's dtype; with |check_device|, tensor results must be on tpu."""
    import torch
    g, w = _flatten(got, []), _flatten(want, [])
    if len(g) != len(w):
        return f"{len(g)} outputs, CPU gave {len(w)}"
    for a, b in zip(g, w):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"got {type(a).__name__}, CPU gave a tensor"
            if check_device and (a.device.type not in ("tpu", "cpu") or (
                    b.device.type == "cpu" and a.device.type != "tpu" and a.numel() > 0)):
                return f"result on {a.device}"
            if a.dtype != b.dtype and not cast:
                return f"dtype {a.dtype}, CPU {b.dtype}"
            a = a.to(b.dtype)
            if a.shape != b.shape:
                return f"shape {tuple(a.shape)}, CPU {tuple(b.shape)}"
            if not values:
                continue
            t = tol if tol is not None and b.is_floating_point() else \
                TOLERANCES.get(str(b.dtype).replace("torch.", ""), dict(rtol=0, atol=0))
            try:
                torch.testing.assert_close(a.detach().cpu(), b.detach(), equal_nan=True,
                                           check_device=False, **t)
            except AssertionError as e:
                lines = [ln for ln in str(e).splitlines() if "difference" in ln or "Mismatched" in ln]
                return "; ".join(lines)[:200] or "values differ"
        elif values and a != b and not (isinstance(b, float) and b != b and a != a):
            return f"value {a!r}, CPU {b!r}"
    return None


def _dtypes(out):
    import torch
    return [t.dtype for t in _flatten(out, []) if isinstance(t, torch.Tensor)]


def _meta_out(op, sample):
    import torch
    try:
        m = sample.transform(lambda t: t.detach().to("meta") if isinstance(t, torch.Tensor) else t)
        return op(m.input, *m.args, **m.kwargs)
    except Exception:
        return None


def _meta_dtypes(op, sample):
    out = _meta_out(op, sample)
    return None if out is None else _dtypes(out)


def _compare_by_meta_shapes(got, want, meta, dtype_name, values):
    """PyTorch's meta kernel (the device-generic contract, which gives our
    out types) and its CPU kernel disagree on some shapes: native_batch_norm
    in evaluation returns save_mean/save_invstd of shape (C,) on meta and
    (0,) on the CPU. Such results may have either shape; values are compared
    where tpu's shape is the CPU's."""
    import torch
    g, w, m = _flatten(got, []), _flatten(want, []), _flatten(meta, [])
    if not (len(g) == len(w) == len(m)):
        return "shape differs from the CPU's"
    for a, b, c in zip(g, w, m):
        if isinstance(b, torch.Tensor) and isinstance(c, torch.Tensor) and isinstance(a, torch.Tensor):
            if a.shape != c.shape and a.shape != b.shape:
                return f"shape {tuple(a.shape)}, meta {tuple(c.shape)}, CPU {tuple(b.shape)}"
            if b.shape != c.shape:
                # The CPU kernel departs from meta here (evaluation batch
                # norm's empty statistics): either shape is right, and
                # values are compared where tpu follows the CPU.
                if a.shape == b.shape:
                    why = _compare(a, b, dtype_name, values=values, cast=True)
                    if why:
                        return why
                continue
        why = _compare(a, b, dtype_name, values=values, cast=True)
        if why:
            return why
    return None


def _classify_exception(e):
    msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:240]
    unsupported = isinstance(e, NotImplementedError) or "not supported on tpu" in msg \
        or "is not supported" in msg or "TORCH_TPU_FALLBACK=0" in msg
    return ("unsupported" if unsupported else "error"), msg


def _grads(op, sample, outputs):
    import torch
    outs = [o for o in _flatten(outputs, []) if isinstance(o, torch.Tensor) and o.requires_grad]
    ins = [t for t in _flatten([sample.input, list(sample.args), sample.kwargs], [])
           if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not ins:
        return None
    cots = []
    for i, o in enumerate(outs):
        g = torch.Generator().manual_seed(i)
        c = torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype)
        cots.append(c.to(o.device))
    return torch.autograd.grad(outs, ins, cots, allow_unused=True)


def _relayout(t, layout):
    """|t|'s values in another memory layout (a new tensor, or |t| where the
    layout does not apply to its rank)."""
    import torch
    if t.layout != torch.strided or t.numel() == 0:
        return t
    wants_grad = t.requires_grad
    t = t.detach()
    if layout == "transposed" and t.ndim >= 2:  # column-major in the last two dims
        out = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "channels_last" and t.ndim == 4:
        out = t.contiguous(memory_format=torch.channels_last)
    elif layout == "sliced" and t.ndim >= 1:  # every other element of a larger tensor
        out = torch.stack([t, t], -1).select(-1, 1)
    elif layout == "size1_strides" and 1 in t.shape:
        # Size-1 dims may have any stride (PyTorch ignores it): give them odd
        # ones, over a contiguous copy.
        c = t.contiguous()
        strides = [97 if n == 1 else s for n, s in zip(c.shape, c.stride())]
        out = c.as_strided(c.shape, strides)
    else:
        return t.requires_grad_(wants_grad)
    return out.requires_grad_(wants_grad)


LAYOUTS = ("transposed", "channels_last", "sliced", "size1_strides")


def run_op(op, dtypes, max_samples, backward, verbose=False, layouts=(), reference=False):
    """Returns {dtype name: {status, samples, reason}} (+ "backward", and a
    "float32 <layout>" column per layout)."""
    import torch
    result = {}
    supported = op.supported_dtypes("cpu")
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        if dtype not in supported:
            result[dtype_name] = {"status": "skip", "reason": "dtype not supported on CPU"}
            continue
        result[dtype_name] = _run_samples(op, dtype, dtype_name, max_samples, False, verbose,
                                          reference=reference)
    if backward and op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu"):
        result["backward"] = _run_samples(op, torch.float32, "float32", max_samples, True, verbose,
                                          reference=reference)
    for layout in layouts if torch.float32 in supported else ():
        result[f"float32 {layout}"] = _run_samples(op, torch.float32, "float32", max_samples,
                                                   False, verbose, layout)
    return result


def _special_inputs(op, dtype, requires_grad):
    """For elementwise OpInfos: one more sample of 1031 elements (past any
    vector width, with a remainder) holding ±0, ±inf, NaN, denormals and
    large magnitudes among ordinary values; binary ops get two such tensors,
    drawn differently. PyTorch's reference inputs have the large sizes and
    the extremal values, but not denormals or all of them in one tensor."""
    import torch
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo
    from torch.testing._internal.opinfo.core import SampleInput

    from torch_tpu.selfcheck import WIDE, _values
    if not isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo)) or dtype.is_complex or requires_grad:
        return []
    n = 1031
    a = _values(n, dtype, WIDE, True, 1)
    if isinstance(op, UnaryUfuncInfo):
        return [SampleInput(a, name=SPECIALS)]
    b = _values(n, dtype, WIDE, True, 2).flip(0).contiguous()
    return [SampleInput(a, args=(b,), name=SPECIALS)]


SPECIALS = "special values"


def _flush_sample(sample):
    """|sample| and a function for results, with denormals flushed to zero
    where tpu flushes them (torch_tpu.selfcheck.flush_denormals): the CPU
    then computes what the device can."""
    from torch_tpu import selfcheck
    if sample.name != SPECIALS or not _device_flushes():
        return sample, lambda out: out
    return sample.transform(selfcheck.flush_denormals), \
        lambda out: [selfcheck.flush_denormals(t) for t in _flatten(out, [])]


_FLUSHES = []


def _device_flushes():
    if not _FLUSHES:
        from torch_tpu import selfcheck
        _FLUSHES.append(selfcheck.flushes_denormals("tpu"))
    return _FLUSHES[0]


def _run_samples(op, dtype, dtype_name, max_samples, backward, verbose, layout=None,
                 reference=False):
    import torch
    counts = collections.Counter()
    reason = ""
    random_op = op.name in RANDOM_OPS or getattr(op, "name", "").startswith("nn.functional.dropout")
    try:
        if reference:
            samples = list(op.reference_inputs("cpu", dtype, requires_grad=backward))
            samples += _special_inputs(op, dtype, backward)
        else:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=backward))
        if max_samples:
            samples = samples[:max_samples]
    except Exception as e:  # the OpInfo itself cannot build samples
        return {"status": "skip", "reason": f"sample_inputs failed: {type(e).__name__}"}
    if layout:
        # The same values in another layout, on both sides: tpu must accept
        # every layout the CPU kernel accepts.
        samples = [s.transform(lambda t: _relayout(t, layout) if isinstance(t, torch.Tensor)
                               else t) for s in samples]
    for i, sample in enumerate(samples):
        torch.manual_seed(0)
        cpu_sample, cpu_out = _flush_sample(sample)
        try:
            want = cpu_out(op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs))
            if backward:
                want_g = _grads(op, sample, want)
                if want_g is None:
                    counts["skip"] += 1
                    continue
        except Exception:
            counts["skip"] += 1  # the CPU rejects this sample
            continue
        try:
            torch.manual_seed(0)
            dev = _to_tpu(sample, requires_grad=backward, op_name=op.name)
            if not any(isinstance(t, torch.Tensor) and t.device.type == "tpu"
                       for t in _flatten([dev.input, list(dev.args), dev.kwargs], [])) \
                    and "device" not in dev.kwargs and "tpu" not in dev.args:
                counts["skip"] += 1  # numbers only (div(2.5, 0.5)): nothing runs on tpu
                continue
            with _cpu_randn() if op.name in CPU_RANDOM_OPS else contextlib.nullcontext():
                got = op(dev.input, *dev.args, **dev.kwargs)
            if backward:
                got_g = _grads(op, dev, got)
                got, want = got_g, want_g
            # Dropout inside an op (scaled_dot_product_attention's dropout_p)
            # makes that sample random: shape and dtype only.
            random_sample = random_op or (sample.kwargs.get("dropout_p") or 0) > 0
            why = _compare(got, want, dtype_name, values=not random_sample)
            basis = op.name in BASIS_OPS and not backward
            if why and basis and not _compare(got, want, dtype_name, values=False):
                got = _align_basis(op.name, got, want)
                why = _compare(got, want, dtype_name, check_device=False)
            if why and op.name in TIED_INDEX_OPS and not backward:
                why = _compare_tied_index(op.name, sample, got, want, dtype_name)
            if why and why.startswith(("shape ", "dtype ")) and not backward:
                meta = _meta_out(op, sample)
                if meta is not None and _dtypes(meta) == _dtypes(got):
                    why = _compare_by_meta_shapes(got, want, meta, dtype_name, not random_sample)
            if why and why.startswith("dtype ") and _meta_dtypes(op, sample) == _dtypes(got):
                # PyTorch's device-generic (meta) result dtype differs from the
                # CPU kernel's (e.g. float32 statistics of bfloat16 layer_norm,
                # as on CUDA): follow meta, compare values in the CPU dtype.
                why = _compare(got, want, dtype_name, values=not random_sample, cast=True)
        except Exception as e:
            status, why = _classify_exception(e)
            counts[status] += 1
            reason = reason or f"sample {i}: {why}"
            if verbose:
                print(f"  {_key(op)} {dtype_name}{' bwd' if backward else ''} sample {i}: {why}")
            continue
        # Low-precision results, and gradients (long reductions: CTC's
        # recursions, norms), may round differently from the CPU's, both
        # near the exact value: the float64 reference decides.
        if why and (backward or reference or dtype_name in ("bfloat16", "float16")) \
                and why.startswith("Mismatched"):
            try:
                up = _upcast(cpu_sample)
                torch.manual_seed(0)
                ref = cpu_out(op(up.input, *up.args, **up.kwargs))
                if backward:
                    ref = _grads(op, up, ref)
                elif basis:
                    ref = _align_basis(op.name, ref, want)
                if ref is not None and _as_accurate_as_cpu(got, want, ref, dtype_name):
                    why = None
            except Exception:
                pass  # no float64 reference: the mismatch stands
        if why:
            counts["mismatch"] += 1
            reason = reason or f"sample {i}: {why}"
            if verbose:
                print(f"  {_key(op)} {dtype_name}{' bwd' if backward else ''} sample {i}: {why}")
        else:
            counts["pass"] += 1
    for status in ("error", "unsupported", "mismatch"):
        if counts[status]:
            return {"status": status, "samples": dict(counts), "reason": reason}
    if counts["pass"]:
        return {"status": "pass", "samples": dict(counts)}
    return {"status": "skip", "samples": dict(counts), "reason": "the CPU rejects every sample"}


# -- driver ---------------------------------------------------------------------

def load_testing_db(module, name, what):
    """PyTorch's test database torch.testing._internal.<module>.<name>."""
    # torch.testing._internal imports test-only packages (expecttest) that a
    # torch install does not bring: say which, instead of a traceback.
    import importlib
    try:
        return getattr(importlib.import_module(f"torch.testing._internal.{module}"), name)
    except ModuleNotFoundError as e:
        raise SystemExit(f"torch_tpu.coverage: PyTorch's {what} samples (torch.testing._internal) "
                         f"need the '{e.name}' package, which is not installed: "
                         f"pip install {e.name} (./setup.sh installs it)") from None


def _op_db():
    return load_testing_db("common_methods_invocations", "op_db", "OpInfo")


def _chosen(args):
    return lambda op: not args.ops or _key(op) in args.ops or op.name in args.ops


def _worker(args):
    section_worker(args, _op_db, _chosen(args), lambda op, _: {
        "op": _key(op), "result": run_op(op, _dtypes_for(op, args.dtypes), args.samples,
                                         args.backward, args.verbose, args.layouts,
                                         args.reference)})


# Every dtype a rule may accept, for --dtypes all (the conformance sweep).
ALL_DTYPES = ("float32", "float64", "bfloat16", "float16", "complex64", "int64", "int32",
              "int16", "int8", "uint8", "bool")


def _dtypes_for(op, dtypes):
    """|dtypes|, or with "all" every one of ALL_DTYPES the op takes on the CPU."""
    if "all" not in dtypes:
        return dtypes
    import torch
    supported = op.supported_dtypes("cpu")
    return [d for d in ALL_DTYPES if getattr(torch, d) in supported]


# OpInfo entries per worker process: one process that compiles every op for
# six dtypes holds so many executables that their memory mappings reach the
# kernel's limit (vm.max_map_count) and LLVM fails.
_CHUNK = 150


def plugin_in_use():
    """"package version (PJRT a.b)" of the plugin the workers will load (a
    fresh process: this one need not start the runtime)."""
    import subprocess
    code = ("import torch, torch_tpu; from torch_tpu import _C, plugins; i = _C._plugin_info(); "
            "print(plugins.describe(i['path']), '(PJRT %d.%d)' % i['api_version'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return r.stdout.strip() or f"unknown plugin ({r.stderr.strip().splitlines()[-1:]})"


def _drive(args):
    op_db = _op_db()
    return drive_workers(args, [], op_db, _chosen(args), _key, "op", "--ops", args.ops,
                         _columns(args), _CHUNK)


# -- shared by the sections (ops.py, modules.py, ...) ---------------------------

def add_common_arguments(ap, samples, samples_help, json_name):
    """The options of the sample-comparing sections (ops, modules), beside
    those every section takes."""
    from . import add_section_arguments
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--samples", type=int, default=samples, help=samples_help)
    ap.add_argument("--no-backward", dest="backward", action="store_false",
                    help="skip the gradient comparisons")
    ap.add_argument("--min-pass", type=float, default=0.0,
                    help="exit 1 if a column's pass rate (%%) is below this")
    add_section_arguments(ap, json_name)


def section_worker(args, load_db, chosen, fn):
    """A section's worker process: the CPU fallback off, warnings quiet, the
    chosen entries numbered args.start to args.end - 1 through |fn| (see
    torch_tpu._isolate.work)."""
    os.environ["TORCH_TPU_FALLBACK"] = "0"
    import warnings

    import torch_tpu  # noqa: F401
    from .. import _isolate
    db = load_db()
    warnings.filterwarnings("ignore")
    items = [(i, db[i]) for i in range(args.start, args.end) if chosen(db[i])]
    _isolate.work(args.result, items, fn)


def drive_workers(args, section, db, chosen, name_of, key, names_flag, names, lost_columns, chunk):
    """Runs a section's chosen entries of |db| in isolated worker processes
    (``python -m torch_tpu.coverage <section> --worker ...``, torch_tpu._isolate,
    started only for ranges that hold chosen entries); returns {name:
    result}. An entry whose worker crashed or hung is an ``error`` in
    |lost_columns|."""
    from .. import _isolate
    result_path = args.json + ".partial"

    def command(start, end):
        cmd = [sys.executable, "-m", "torch_tpu.coverage", *section, "--worker",
               "--start", str(start), "--end", str(end), "--result", result_path,
               "--dtypes", ",".join(args.dtypes), "--samples", str(args.samples)]
        if not args.backward:
            cmd.append("--no-backward")
        if names:
            cmd += [names_flag, ",".join(sorted(names))]
        if getattr(args, "layouts", None):
            cmd += ["--layouts", ",".join(args.layouts)]
        if getattr(args, "reference", False):
            cmd.append("--reference")
        if args.verbose:
            cmd.append("-v")
        return cmd

    def lost(i, why):
        return {key: name_of(db[i]), "result": {c: {"status": "error", "reason": why}
                                                for c in lost_columns}}

    only = [i for i, e in enumerate(db) if chosen(e)] if names else None
    done = _isolate.run(command, len(db), result_path, args.timeout, lost, chunk=chunk, only=only)
    os.replace(result_path, args.json)
    return {rec[key]: rec["result"] for rec in done}


def summary_table(results, columns, noun, skips=False):
    """Totals per column; with |skips|, the skipped entries are counted too."""
    head = f"| column | {noun} counted | pass | mismatch | unsupported | error |" + \
        (" skip |" if skips else "") + " pass rate |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for col in columns:
        c, counted = _totals(results, col)
        rate = 100.0 * c["pass"] / counted if counted else 0.0
        lines.append(f"| {col} | {counted} | {c['pass']} | {c['mismatch']} | {c['unsupported']} | "
                     f"{c['error']} |" + (f" {c['skip']} |" if skips else "") + f" {rate:.1f}% |")
    return "\n".join(lines)


def lowest_pass_rate(results, columns):
    worst = 100.0
    for col in columns:
        c, counted = _totals(results, col)
        if counted:
            worst = min(worst, 100.0 * c["pass"] / counted)
    return worst


def _totals(results, column):
    c = collections.Counter()
    for r in results.values():
        if column in r:
            c[r[column]["status"]] += 1
    counted = sum(v for k, v in c.items() if k != "skip")
    return c, counted


def _columns(args):
    dtypes = ALL_DTYPES if "all" in args.dtypes else args.dtypes
    return list(dtypes) + (["backward"] if args.backward else []) + \
        [f"float32 {layout}" for layout in args.layouts]


def report(results, columns):
    return summary_table(results, columns, "ops")


def details(results, columns, noun="op", passed_samples=False, width=160):
    """A row per entry: its status per column, then the first problem (named
    by its column when |passed_samples|, which also counts the passing
    sample comparisons over all columns)."""
    extra = " samples passed |" if passed_samples else ""
    rows = [f"| {noun} | " + " | ".join(columns) + f" |{extra} first problem |",
            "|---|" + "---|" * len(columns) + ("---|" if passed_samples else "") + "---|"]
    for name in sorted(results):
        r = results[name]
        cells = [r.get(c, {}).get("status", "-") for c in columns]
        reason = next(((f"{c}: " if passed_samples else "") + r[c].get("reason", "")
                       for c in columns if c in r and r[c]["status"] not in ("pass", "skip")), "")
        passed = sum(r.get(c, {}).get("samples", {}).get("pass", 0) for c in columns)
        rows.append(f"| {name} | " + " | ".join(cells) + " |"
                    + (f" {passed} |" if passed_samples else "")
                    + " " + reason.replace("|", "/")[:width] + " |")
    return "\n".join(rows)


def core_report():
    import torch

    import torch_tpu  # noqa: F401
    from torch_tpu import _C
    lowered = set(_C._lowered_ops())
    native_kernels = {"aten::nonzero", "aten::masked_select", "aten::equal",
                      "aten::empty.memory_format", "aten::empty_strided", "aten::as_strided",
                      "aten::view", "aten::_reshape_alias", "aten::unfold", "aten::resize_",
                      "aten::_local_scalar_dense", "aten::copy_", "aten::_copy_from",
                      "aten::_copy_from_and_resize", "aten::set_.source_Storage",
                      "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor"}
    core, missing, views, decomposed = [], [], [], []
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name, None)
        if not hasattr(packet, "overloads"):
            continue
        for ov in packet.overloads():
            op = getattr(packet, ov)
            if torch.Tag.core not in op.tags:
                continue
            full = f"aten::{name}" + ("" if ov == "default" else f".{ov}")
            core.append(full)
            if full in lowered or full in native_kernels:
                continue
            if name.startswith("sym_"):
                views.append(full)  # size/stride queries: answered from metadata
                continue
            schema = op._schema
            if schema.returns and schema.returns[0].alias_info is not None and \
                    not schema.returns[0].alias_info.is_write:
                views.append(full)  # views alias: metadata kernels, never rules
                continue
            has = torch._C._dispatch_has_kernel_for_dispatch_key
            if any(has(op.name(), k) for k in ("CompositeExplicitAutograd", "CompositeImplicitAutograd",
                                               "CompositeExplicitAutogradNonFunctional")):
                decomposed.append(full)  # PyTorch decomposes it into ops that have rules
                continue
            missing.append(full)
    return core, sorted(missing), views, decomposed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(ap, None, "max samples per op and dtype (default 8; with --reference, "
                         "0: all of them)", "coverage.json")
    ap.add_argument("--ops", default="", help="comma-separated OpInfo names")
    ap.add_argument("--layouts", default="",
                    help="also run float32 forward with inputs in these memory layouts "
                         f"(comma-separated, or 'all': {','.join(LAYOUTS)})")
    ap.add_argument("--core", action="store_true", help="list torch.Tag.core ops without a rule")
    ap.add_argument("--reference", action="store_true",
                    help="the conformance sweep's inputs: PyTorch's reference inputs (large and "
                         "odd sizes, small, large and extremal values) plus one sample of special "
                         "values per elementwise op, all of them unless --samples caps them")
    ap.add_argument("--plugin", default="",
                    help="run on this PJRT plugin: an installed package's name "
                         "(python -c 'import torch_tpu.plugins as p; print(p.installed())') "
                         "or a path to a .so")
    args = ap.parse_args(argv)
    if args.plugin and not args.worker:
        from torch_tpu import plugins
        try:
            os.environ["TORCH_TPU_PJRT_PLUGIN"] = plugins.resolve(args.plugin)
        except ValueError as e:
            ap.error(str(e))
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    if args.samples is None:
        args.samples = 0 if args.reference else 8
    args.ops = set(o for o in args.ops.split(",") if o)
    args.layouts = list(LAYOUTS) if args.layouts == "all" else \
        [la for la in args.layouts.split(",") if la]
    unknown = set(args.layouts) - set(LAYOUTS)
    if unknown:
        ap.error(f"unknown layouts {sorted(unknown)}; known: {', '.join(LAYOUTS)}")
    if args.fast:
        args.ops = set(FAST_OPS)
        args.samples = min(args.samples, 4)
    if args.worker:
        return _worker(args)
    if args.core:
        core, missing, views, decomposed = core_report()
        print(f"torch.Tag.core overloads: {len(core)}; views and size queries (metadata only): "
              f"{len(views)}; decomposed by PyTorch into lowered ops: {len(decomposed)} "
              f"({', '.join(decomposed)}); without a native rule: {len(missing)}")
        for m in missing:
            print("  " + m)
        return 0 if not missing else 1
    t0 = time.time()
    plugin = plugin_in_use()
    print(f"plugin: {plugin}", flush=True)
    results = _drive(args)
    columns = _columns(args)
    summary = report(results, columns)
    print(summary)
    print(f"({len(results)} OpInfo entries, {time.time() - t0:.0f} s, {plugin})")
    if args.markdown:
        import torch
        with open(args.markdown, "w") as f:
            what = "reference inputs (conformance)" if args.reference else "samples"
            f.write(f"# Op coverage: PyTorch OpInfo {what} on tpu vs CPU\n\n")
            f.write(f"Plugin: {plugin}; torch {torch.__version__}.\n\n")
            f.write(f"Command: `python -m torch_tpu.coverage {' '.join(sys.argv[1:])}`\n\n")
            f.write(summary + "\n\n" + details(results, columns) + "\n")
    return 1 if lowest_pass_rate(results, columns) < args.min_pass else 0


if __name__ == "__main__":
    sys.exit(main())
