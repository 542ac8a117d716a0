"""Custom kernels on tpu: JAX functions (Pallas kernels included) and raw
StableHLO as PyTorch operators.

``jax_op("mylib::rms_norm", fn)`` registers a ``torch.library`` custom op.
On tpu tensors its StableHLO runs inside the backend's own graph: JAX only
traces (once per input signature and static arguments, without starting a
JAX runtime), and the traced functions are spliced into the graph that
strict eager, fused eager or torch.compile builds around the op, so the
kernel fuses with its neighbours and never leaves the device. On CPU
tensors the same function runs through JAX, so both can be compared.

``stablehlo_op("mylib::f", text)`` does the same for hand-written
StableHLO (no JAX needed).

Pallas kernels: XLA:CPU and XLA:GPU cannot run Mosaic TPU kernels, so a
kernel meant for them is written with ``interpret=pallas_interpret()``:
True on every plugin but a TPU's, where the kernel lowers to its Mosaic
custom call.
"""

import collections
import functools
import importlib.util
import inspect
import re
import threading

import torch

from . import _C

__all__ = ["jax_op", "custom_jax_kernel", "vjp_backward", "stablehlo_op", "pallas_interpret",
           "jax_platform", "KernelError"]

_JAX_EXTRA = ("jax_op needs JAX: install it with `pip install torch-tpu-open[jax]` "
              "(jax and jaxlib {version})")
_JAX_VERSION = "0.10.2"
_TRACE_CACHE_SIZE = 256


class KernelError(ValueError):
    """A custom kernel that cannot run on this device: output types that
    disagree with its declared ones, unsupported dtypes, StableHLO the plugin
    cannot read, host callbacks, Mosaic kernels on a non-TPU plugin."""


# -- registry (the compile backend lowers registered ops with it) ----------------

_registry = {}  # "ns::name" -> _KernelOp


def _lookup(op):
    """The _KernelOp behind OpOverload |op|, or None."""
    if not isinstance(op, torch._ops.OpOverload):
        return None
    return _registry.get(op._schema.name)


class _Kernel:
    """A traced kernel: the C kernel plus what rebuilds it (for the compile
    cache's tapes, which are pickled)."""

    __slots__ = ("c", "name", "text", "entry", "in_specs", "out_specs")

    def __init__(self, name, text, entry, in_specs, out_specs):
        self.name, self.text, self.entry = name, text, entry
        self.in_specs = [(d, list(s)) for d, s in in_specs]
        self.out_specs = [(d, list(s)) for d, s in out_specs]
        self.c = _C.Kernel(name, text, entry, self.in_specs, self.out_specs)


# -- JAX tracing -----------------------------------------------------------------

def _import_jax():
    if importlib.util.find_spec("jax") is None:
        raise ImportError(_JAX_EXTRA.format(version=_JAX_VERSION))
    import jax

    return jax


@functools.lru_cache(maxsize=None)
def _plugin_kind():
    return _C._plugin_info()["kind"]


def jax_platform():
    """The JAX platform whose lowering the tpu device runs: "cpu" on XLA's
    CPU plugin, "cuda" on its GPU plugin, "tpu" on libtpu."""
    return {"gpu": "cuda", "cuda": "cuda", "tpu": "tpu"}.get(_plugin_kind(), "cpu")


def pallas_interpret():
    """The ``interpret=`` to give ``pl.pallas_call`` for kernels run through
    jax_op: False on a TPU (Mosaic), True elsewhere (the kernel becomes
    ordinary StableHLO loops that XLA:CPU and XLA:GPU run)."""
    return jax_platform() != "tpu"


def _torch_dtype(jax_dtype, what):
    import numpy as np

    name = np.dtype(jax_dtype).name
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise KernelError(f"{what}: dtype {name} has no torch equivalent on tpu")
    return dt


def _jax_dtype(torch_dtype, what):
    import jax.numpy as jnp

    name = str(torch_dtype).replace("torch.", "")
    dt = getattr(jnp, name, None)
    if dt is None:
        raise KernelError(f"{what}: torch dtype {torch_dtype} has no JAX equivalent")
    return dt


_WIDE = (torch.float64, torch.int64, torch.uint64, torch.complex128)


def _x64(jax, dtypes):
    """JAX's 64-bit mode while tracing for 64-bit tensors (without it, JAX
    narrows them to 32 bits); functions on narrower inputs trace as JAX
    users wrote them."""
    import contextlib

    return jax.enable_x64(True) if any(d in _WIDE for d in dtypes) else contextlib.nullcontext()


def _lower_jaxpr(jax, closed, platform):
    """StableHLO module of a closed jaxpr, lowered without creating a JAX
    backend (jit's lowering asks the default device for its client)."""
    from jax._src import sharding_impls
    from jax._src.interpreters import mlir

    try:
        result = mlir.lower_jaxpr_to_module(
            "kernel", closed, num_const_args=0, in_avals=closed.in_avals, ordered_effects=[],
            platforms=(platform,), backend=None,
            axis_context=sharding_impls.ShardingContext(1),
            donated_args=[False] * len(closed.in_avals),
            lowering_parameters=mlir.LoweringParameters(
                for_export=True, hoist_constants_as_args=False))
        return result.module
    except TypeError:
        # Another JAX than the pinned one: its public path (which creates
        # JAX's CPU client once, for the device assignment, never to run).
        lowered = jax.jit(jax.core.jaxpr_as_fun(closed)).trace(
            *closed.in_avals).lower(lowering_platforms=(platform,))
        return lowered.compiler_ir("stablehlo")


_UNRUNNABLE_TARGETS = {
    "xla_python_cpu_callback": "a host callback (jax.pure_callback, io_callback, "
                               "jax.debug.print) needs JAX's runtime",
    "xla_ffi_python_cpu_callback": "a host callback (jax.pure_callback, io_callback, "
                                   "jax.debug.print) needs JAX's runtime",
    "xla_ffi_python_gpu_callback": "a host callback needs JAX's runtime",
    "xla_python_gpu_callback": "a host callback needs JAX's runtime",
}


# Custom-call targets that jaxlib registers in its own process (its CPU and
# GPU solver and FFT kernels): a plugin loaded elsewhere has none of them.
_JAXLIB_KERNEL_PREFIXES = ("lapack_", "cusolver_", "cublas_", "hipsolver_", "hipblas_",
                           "ducc_", "cu_", "hip_")


def _module_text(name, module, platform):
    """The module's functions in generic form, private, without argument
    attributes or locations; refuses what the plugin cannot run."""
    from jaxlib.mlir import ir

    full = module.operation.get_asm(print_generic_op_form=True, enable_debug_info=False)
    for target in set(re.findall(r'call_target_name = "([^"]+)"', full)):
        if target in _UNRUNNABLE_TARGETS:
            raise KernelError(f"{name}: {_UNRUNNABLE_TARGETS[target]} (custom call {target})")
        if target == "tpu_custom_call" and platform != "tpu":
            raise KernelError(_mosaic_message(name))
        if target.startswith(_JAXLIB_KERNEL_PREFIXES):
            raise KernelError(
                f"{name}: custom call {target} is one of jaxlib's own kernels (LAPACK, "
                "cuSOLVER, FFT), which PJRT plugins do not have; express it with "
                "jax.lax ops (torch.linalg on the tensors outside the kernel works)")
    funcs = []
    with module.context:
        for op in module.body.operations:
            op = op.operation
            if op.name != "func.func":
                raise KernelError(f"{name}: the lowered module holds a {op.name}, "
                                  "not only functions")
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in ("arg_attrs", "res_attrs"):
                if attr in op.attributes:
                    del op.attributes[attr]
            funcs.append(op.get_asm(print_generic_op_form=True, enable_debug_info=False))
    return "\n".join(funcs)


def _mosaic_message(name):
    return (f"{name}: a Mosaic TPU kernel (pl.pallas_call without interpret) cannot run on "
            f"the {_plugin_kind()} plugin; pass interpret=torch_tpu.pallas.pallas_interpret() "
            "to pl.pallas_call")


@functools.lru_cache(maxsize=None)
def _plugin_stablehlo_version():
    v = _C._plugin_info()["stablehlo_current_version"]
    return ".".join(map(str, v)) if v and v[0] >= 0 else None


def _check_version(name, text):
    """Serializes the kernel's functions for the plugin's StableHLO version,
    which fails when they use an op or feature newer than the plugin reads.
    A plugin at JAX's version or newer reads whatever JAX writes."""
    target = _plugin_stablehlo_version()
    if target is None:
        return
    from jaxlib.mlir.dialects import stablehlo

    def key(version):
        return tuple(int(p) for p in version.split("."))

    if key(target) >= key(stablehlo.get_current_version()):
        return
    try:
        stablehlo.serialize_portable_artifact_str("module {\n" + text + "\n}", target)
    except Exception as e:  # the bindings raise a bare error with MLIR's diagnostics
        raise KernelError(
            f"{name}: its StableHLO needs features newer than the plugin reads (plugin "
            f"StableHLO {target}, JAX's {stablehlo.get_current_version()}): {e}") from None


# -- the op ----------------------------------------------------------------------

def _schema_type(param, value, what):
    ann = param.annotation
    probe = value if value is not inspect.Parameter.empty else None
    table = {int: "int", float: "float", bool: "bool", str: "str"}
    if ann in table:
        return table[ann]
    if isinstance(probe, bool):
        return "bool"
    if isinstance(probe, int):
        return "int"
    if isinstance(probe, float):
        return "float"
    if isinstance(probe, str):
        return "str"
    if isinstance(probe, (tuple, list)) and all(isinstance(x, int) for x in probe):
        return "int[]"
    if isinstance(probe, (tuple, list)) and all(isinstance(x, (int, float)) for x in probe):
        return "float[]"
    raise TypeError(f"{what}: static argument {param.name!r} needs an int, float, bool, str "
                    "or int-list annotation or default to be part of the op's schema")


def _default_text(v):
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(map(repr, v)) + "]"
    return repr(v)


class _KernelOp:
    def __init__(self, name, fn, *, static_argnums, static_argnames, num_outputs, fake,
                 mutates_args, input_output_aliases):
        if "::" not in name:
            raise ValueError(f"jax_op: name must be 'namespace::name', got {name!r}")
        self.name, self.fn = name, fn
        self.num_outputs = num_outputs
        self.sig = inspect.signature(fn)
        params = list(self.sig.parameters.values())
        static_argnums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
        static_argnames = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
        # Parameters with a Python-value default (eps: float = 1e-6) are
        # static too: an op's tensors cannot have defaults.
        self.static = {p.name for i, p in enumerate(params)
                       if i in static_argnums or p.name in static_argnames
                       or isinstance(p.default, (bool, int, float, str, tuple, list))}
        parts, kwonly = [], False
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"jax_op {name}: *args/**kwargs are not supported; name each "
                                "argument")
            if p.kind == p.KEYWORD_ONLY and not kwonly:
                parts.append("*")
                kwonly = True
            if p.name in self.static:
                t = _schema_type(p, p.default, f"jax_op {name}")
            else:
                t = "Tensor(a!)" if p.name in mutates_args else "Tensor"
            d = "" if p.default is inspect.Parameter.empty or p.name not in self.static \
                else "=" + _default_text(p.default)
            parts.append(f"{t} {p.name}{d}")
        self.tensor_names = [p.name for p in params if p.name not in self.static]
        # {output: index among the tensor arguments} from {output: parameter}.
        self.aliases = {}
        for out_i, param_i in (input_output_aliases or {}).items():
            pname = params[param_i].name
            if pname in self.static:
                raise ValueError(f"jax_op {name}: input_output_aliases: parameter {pname!r} "
                                 "is static")
            self.aliases[out_i] = self.tensor_names.index(pname)
        # Outputs aliased onto inputs are written into those inputs (the op
        # mutates them) and not returned.
        self.returned = [i for i in range(num_outputs) if i not in self.aliases]
        rets = ", ".join(["Tensor"] * len(self.returned))
        ret = "()" if not self.returned else rets if len(self.returned) == 1 else f"({rets})"
        self.schema = f"({', '.join(parts)}) -> {ret}"
        self._cache = collections.OrderedDict()
        self._lock = threading.Lock()
        self.stats = {"traces": 0, "trace_seconds": 0.0, "hits": 0}

        self.op = torch.library.custom_op(name, self._cpu, mutates_args=tuple(mutates_args),
                                          device_types="cpu", schema=self.schema)
        _register_tpu_kernel(name, self._tpu)
        self.op.register_fake(fake if fake is not None else self._fake)
        self._user_fake = fake
        _registry[name] = self

    # Arguments: split into tensors (in order) and static values.
    def _bind(self, args, kwargs):
        bound = self.sig.bind(*args, **kwargs)
        bound.apply_defaults()
        tensors = [bound.arguments[n] for n in self.tensor_names]
        statics = {n: bound.arguments[n] for n in self.static}
        return tensors, statics

    def _jax_fn(self, statics):
        fn = self.fn
        names = self.tensor_names

        def call(*tensors):
            kw = dict(zip(names, tensors))
            kw.update(statics)
            out = fn(**kw)
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)

        return call

    def _fake(self, *args, **kwargs):
        jax = _import_jax()
        tensors, statics = self._bind(args, kwargs)
        with _x64(jax, [t.dtype for t in tensors]):
            avals = [jax.ShapeDtypeStruct(tuple(t.shape), _jax_dtype(t.dtype, self.name))
                     for t in tensors]
            outs = jax.eval_shape(self._jax_fn(statics), *avals)
        self._check_count(len(outs))
        made = [tensors[0].new_empty(tuple(o.shape), dtype=_torch_dtype(o.dtype, self.name))
                if tensors else torch.empty(tuple(o.shape), dtype=_torch_dtype(o.dtype, self.name))
                for o in outs]
        return self._returned(made)

    def _check_count(self, n):
        if n != self.num_outputs:
            raise KernelError(f"{self.name}: the JAX function returns {n} arrays, the op "
                              f"declares num_outputs={self.num_outputs}")

    def _returned(self, outs):
        r = [outs[i] for i in self.returned]
        return None if not r else r[0] if len(r) == 1 else tuple(r)

    def trace(self, in_specs, statics):
        """The kernel for inputs |in_specs| [(dtype, shape)] and |statics|,
        traced once per key (cache bounded, least recently used out)."""
        key = (tuple((d, tuple(s)) for d, s in in_specs),
               tuple(sorted((k, _hashable(v)) for k, v in statics.items())))
        with self._lock:
            k = self._cache.get(key)
            if k is not None:
                self._cache.move_to_end(key)
                self.stats["hits"] += 1
                return k
        import time

        t0 = time.perf_counter()
        jax = _import_jax()
        with _x64(jax, [d for d, _ in in_specs]):
            k = self._trace(jax, in_specs, statics)
        self.stats["traces"] += 1
        self.stats["trace_seconds"] += time.perf_counter() - t0
        with self._lock:
            self._cache[key] = k
            while len(self._cache) > _TRACE_CACHE_SIZE:
                self._cache.popitem(last=False)
        return k

    def _trace(self, jax, in_specs, statics):
        platform = jax_platform()
        avals = [jax.ShapeDtypeStruct(tuple(s), _jax_dtype(d, self.name)) for d, s in in_specs]
        try:
            closed = jax.make_jaxpr(self._jax_fn(statics))(*avals)
        except KernelError:
            raise
        except Exception as e:
            if "Only interpret mode" in str(e):
                raise KernelError(_mosaic_message(self.name)) from e
            raise KernelError(f"{self.name}: tracing the JAX function for "
                              f"{_fmt(in_specs)} failed: {e}") from e
        if closed.consts:
            raise KernelError(
                f"{self.name}: the JAX function closes over {len(closed.consts)} array(s); "
                "pass them as arguments (or build them inside the function)")
        out_specs = [(_torch_dtype(a.dtype, self.name), list(a.shape)) for a in closed.out_avals]
        self._check_count(len(out_specs))
        if self._user_fake is not None:
            self._check_fake(in_specs, statics, out_specs)
        try:
            module = _lower_jaxpr(jax, closed, platform)
        except Exception as e:
            if "Only interpret mode" in str(e):
                raise KernelError(_mosaic_message(self.name)) from e
            raise KernelError(f"{self.name}: lowering the JAX function for "
                              f"{_fmt(in_specs)} failed: {e}") from e
        text = _module_text(self.name, module, platform)
        _check_version(self.name, text)
        try:
            return _Kernel(self.name, text, "main", in_specs, out_specs)
        except TypeError as e:  # a dtype the device does not have
            raise KernelError(str(e)) from None

    def _check_fake(self, in_specs, statics, out_specs):
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            fakes = [torch.empty(s, dtype=d) for d, s in in_specs]
            kw = dict(zip(self.tensor_names, fakes))
            kw.update(statics)
            declared = self._user_fake(**kw)
        declared = [declared] if isinstance(declared, torch.Tensor) else list(declared or ())
        traced = [out_specs[i] for i in self.returned]
        got = [(t.dtype, list(t.shape)) for t in declared]
        if got != traced:
            raise KernelError(f"{self.name}: the JAX function returns {_fmt(traced)}, but "
                              f"the op's fake kernel declares {_fmt(got)}")

    def _tpu(self, *args, **kwargs):
        tensors, statics = self._bind(args, kwargs)
        for n, t in zip(self.tensor_names, tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self.name}: argument {n!r} must be a tensor, got "
                                f"{type(t).__name__}")
        k = self.trace([(t.dtype, list(t.shape)) for t in tensors], statics)
        outs = _C._run_kernel(k.c, list(tensors), list(self.aliases.items()))
        return self._returned(outs)

    def _cpu(self, *args, **kwargs):
        jax = _import_jax()
        tensors, statics = self._bind(args, kwargs)
        with _x64(jax, [t.dtype for t in tensors]):
            arrays = [jax.dlpack.from_dlpack(t.detach().contiguous()) for t in tensors]
            outs = jax.jit(self._jax_fn(statics))(*arrays)
        self._check_count(len(outs))
        outs = [torch.from_dlpack(o).clone() for o in outs]
        for out_i, in_i in self.aliases.items():
            tensors[in_i].copy_(outs[out_i])
        return self._returned(outs)


_libraries = []


def _register_tpu_kernel(name, fn):
    """Registers |fn| as the op's tpu kernel directly with the dispatcher:
    CustomOpDef.register_kernel would wrap it in torch._dynamo.disable, which
    imports Dynamo (about 2 s) at the op's first call."""
    ns, op_name = name.split("::", 1)
    lib = torch.library.Library(ns, "FRAGMENT")
    lib.impl(op_name, fn, "PrivateUse1")
    _libraries.append(lib)  # a Library deregisters its kernels when collected


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, (list, tuple)) else v


def _fmt(specs):
    return ", ".join(f"{str(d).replace('torch.', '')}{list(s)}" for d, s in specs)


def jax_op(name, jax_fn=None, *, static_argnums=(), static_argnames=(), num_outputs=1,
           fake=None, mutates_args=(), input_output_aliases=None, backward=None):
    """Registers JAX function ``jax_fn`` as the custom op ``name``
    ("namespace::op") and returns it (a ``torch.library.CustomOpDef``:
    call it with tensors; ``register_autograd`` attaches a backward).

    Tensor arguments are the function's parameters except the static ones
    (``static_argnums`` / ``static_argnames``, and every parameter whose
    default is a Python value: values baked into the trace, part of the
    op's schema). ``num_outputs``: how many arrays the
    function returns. ``fake``: a fake kernel (shapes and dtypes of the
    outputs from fake inputs) when the op should not call JAX to know them;
    each trace checks the function agrees with it.
    ``input_output_aliases={output: input}``: that output is the new value
    of that input (which the op then mutates; list it in ``mutates_args``)
    rather than a result.

    ``backward="vjp"`` attaches a backward derived with ``jax.vjp``
    (vjp_backward); otherwise give one with ``op.register_autograd``.

    Usable as a decorator: ``@jax_op("mylib::f")``.
    """
    _import_jax()
    if jax_fn is None:
        return functools.partial(jax_op, name, static_argnums=static_argnums,
                                 static_argnames=static_argnames, num_outputs=num_outputs,
                                 fake=fake, mutates_args=mutates_args,
                                 input_output_aliases=input_output_aliases, backward=backward)
    if backward not in (None, "vjp"):
        raise ValueError(f"jax_op {name}: backward must be None or 'vjp', got {backward!r}")
    aliases = dict(input_output_aliases or {})
    params = list(inspect.signature(jax_fn).parameters)
    for out_i, in_i in aliases.items():
        if not 0 <= out_i < num_outputs or not 0 <= in_i < len(params):
            raise ValueError(f"jax_op {name}: input_output_aliases {aliases} out of range")
    mutated = set(mutates_args) | {params[i] for i in aliases.values()}
    k = _KernelOp(name, jax_fn, static_argnums=static_argnums, static_argnames=static_argnames,
                  num_outputs=num_outputs, fake=fake, mutates_args=sorted(mutated),
                  input_output_aliases=aliases)
    op = k.op
    op._kernel_op = k
    if backward == "vjp":
        vjp_backward(op)
    return op


def custom_jax_kernel(name, **options):
    """Decorator spelling of jax_op: ``@custom_jax_kernel("mylib::f")``."""
    return jax_op(name, **options)


def vjp_backward(forward_op, *, name=None):
    """Attaches to ``forward_op`` (an op made by jax_op) a backward derived
    with ``jax.vjp`` from its JAX function. The backward is itself a jax_op,
    so on tpu it runs as a kernel (fused with its neighbours), recomputing
    the forward inside the vjp. Returns the backward op."""
    jax = _import_jax()
    k = getattr(forward_op, "_kernel_op", None)
    if k is None:
        raise TypeError("vjp_backward: expected an op made by jax_op")
    if k.aliases:
        raise ValueError(f"vjp_backward: {k.name} mutates its inputs; give its backward "
                         "with register_autograd")
    tensor_names, static_names = list(k.tensor_names), sorted(k.static)
    n_in, n_out = len(tensor_names), len(k.returned)

    def bwd_fn(**kw):
        arrays = [kw.pop(f"x{i}") for i in range(n_in + n_out)]
        primals, cts = arrays[:n_in], arrays[n_in:]

        def f(*xs):
            out = k.fn(**dict(zip(tensor_names, xs)), **kw)
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            return tuple(out[i] for i in k.returned)

        _, pull = jax.vjp(f, *primals)
        return tuple(pull(tuple(cts)))

    params = [inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
              for i in range(n_in + n_out)]
    params += [k.sig.parameters[s].replace(kind=inspect.Parameter.KEYWORD_ONLY)
               for s in static_names]
    bwd_fn.__signature__ = inspect.Signature(params)
    bwd = jax_op(name or k.name + "_vjp", bwd_fn, static_argnames=tuple(static_names),
                 num_outputs=n_in)

    def setup_context(ctx, inputs, output):
        bound = k.sig.bind(*inputs)
        bound.apply_defaults()
        ctx.save_for_backward(*[bound.arguments[n] for n in tensor_names])
        ctx.statics = {s: bound.arguments[s] for s in static_names}
        outs = (output,) if isinstance(output, torch.Tensor) else tuple(output)
        ctx.out_meta = [(o.shape, o.dtype) for o in outs]

    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        device = saved[0].device if saved else None
        grads = [g if g is not None else torch.zeros(s, dtype=d, device=device)
                 for g, (s, d) in zip(grads, ctx.out_meta)]
        out = bwd(*saved, *grads, **ctx.statics)
        by_name = dict(zip(tensor_names, (out,) if n_in == 1 else out))
        return tuple(by_name.get(p) for p in k.sig.parameters)

    forward_op.register_autograd(backward, setup_context=setup_context)
    return bwd


# -- raw StableHLO ---------------------------------------------------------------

_TENSOR_TYPE = re.compile(r"tensor<((?:\d+x)*)([a-z0-9]+)>")
_MLIR_DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
                "bf16": torch.bfloat16, "i1": torch.bool, "i8": torch.int8,
                "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
                "ui8": torch.uint8, "ui16": torch.uint16, "ui32": torch.uint32,
                "ui64": torch.uint64}


def _parse_types(text, name):
    specs = []
    for dims, elem in _TENSOR_TYPE.findall(text):
        if elem not in _MLIR_DTYPES:
            raise KernelError(f"{name}: element type {elem} is not supported")
        specs.append((_MLIR_DTYPES[elem], [int(d) for d in dims.split("x") if d]))
    return specs


def _entry_signature(text, entry, name):
    """(input specs, output specs) of `func.func @entry(...) -> ...` in the
    pretty form users write."""
    m = re.search(r"func\.func\s+(?:public\s+|private\s+)?@" + re.escape(entry) + r"\s*\(", text)
    if not m:
        raise KernelError(f"{name}: no func.func @{entry} in the StableHLO text")
    depth, i = 1, m.end()
    while depth and i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    args = text[m.end():i - 1]
    rest = text[i:]
    body = rest.find("{")
    arrow = rest[:body] if body >= 0 else rest
    if "->" not in arrow:
        raise KernelError(f"{name}: @{entry} returns nothing")
    # Drop attribute dictionaries ({...}) before reading types.
    strip = lambda s: re.sub(r"\{[^{}]*\}", "", s)
    return _parse_types(strip(args), name), _parse_types(strip(arrow.split("->", 1)[1]), name)


def stablehlo_op(name, mlir_text, *, entry="main"):
    """Registers hand-written StableHLO (a module or bare func.func
    definitions, pretty or generic form, entry ``@main`` unless ``entry``
    says otherwise) as the custom op ``name``: it takes the entry's
    arguments as tensors of exactly their types and returns its results. It
    runs on tpu tensors only (there is no CPU implementation)."""
    if "::" not in name:
        raise ValueError(f"stablehlo_op: name must be 'namespace::name', got {name!r}")
    in_specs, out_specs = _entry_signature(mlir_text, entry, name)
    kernel = _Kernel(name, mlir_text, entry, in_specs, out_specs)
    args = ", ".join(f"Tensor x{i}" for i in range(len(in_specs)))
    rets = ", ".join(["Tensor"] * len(out_specs))
    schema = f"({args}) -> {rets if len(out_specs) == 1 else '(' + rets + ')'}"

    def _no_cpu(*tensors):
        raise NotImplementedError(f"{name}: a StableHLO op runs on tpu tensors only")

    op = torch.library.custom_op(name, _no_cpu, mutates_args=(), device_types="cpu",
                                 schema=schema)

    def _check(tensors):
        for i, (t, (d, s)) in enumerate(zip(tensors, in_specs)):
            if t.dtype != d or list(t.shape) != s:
                raise KernelError(f"{name}: input {i} is {_fmt([(t.dtype, list(t.shape))])}, "
                                  f"the StableHLO takes {_fmt([(d, s)])}")

    def _tpu(*tensors):
        _check(tensors)
        outs = _C._run_kernel(kernel.c, list(tensors))
        return outs[0] if len(outs) == 1 else tuple(outs)

    _register_tpu_kernel(name, _tpu)

    @op.register_fake
    def _fake(*tensors):
        _check(tensors)
        outs = [tensors[0].new_empty(s, dtype=d) if tensors else torch.empty(s, dtype=d)
                for d, s in out_specs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    _registry[name] = _StableHLOOp(kernel)
    return op


class _StableHLOOp:
    """Registry entry of a stablehlo_op: one kernel whatever the call."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.static = set()
        self.aliases = {}

    def trace(self, in_specs, statics):
        return self.kernel
