"""``torch.compile(backend="tpu")``: Dynamo graphs into one XLA executable
per forward / backward / inference graph. Most skip AOTAutograd: graphs
without autograd (an optimizer step, inference under no_grad) take one trace
to ATen (``_compile_direct.py``), training graphs one joint trace of forward
and backward and our own autograd.Function (``_compile_joint.py``); the rest
(input mutation with a backward, random draws, outputs aliasing inputs,
higher-order ops) go through AOTAutograd.

Each FX node is lowered by the same C rule table eager uses
(``torch_tpu._C.Program``); the decomposition table only covers ops that have
no rule, and a node that still has none is a compile error naming the op and
its source line (never a CPU round trip inside a graph). Executables go
through the eager executor's memory and disk caches, so a second process
starts warm. Mutated inputs (optimizer state, parameters updated under
``no_grad``) are donated and updated in place.

Sizes that change (shape bucketing, ``_compile_bucket.py``): a graph traced
with symbolic sizes is built at bounds of those sizes, inputs padded up to
them and outputs sliced back, the padding kept out of every result (a graph
with an op that cannot keep it out is built per exact size). With a bound given
(``torch_tpu.mark_dynamic(t, dim, max=N)``, or ``torch._dynamo.mark_dynamic``
with ``max``), forward, backward and inference graphs are each one
executable for every size up to N. Sizes that Dynamo made dynamic after a
change (automatic dynamic) get one executable per bucket (the next power of
two), or per exact size where an op cannot run padded, in a bounded LRU
cache (``TORCH_TPU_COMPILE_MAX_SHAPES``, default 8); each executable after a
graph's first counts as a recompile.

Random ops (dropout, rand, randn, bernoulli, randint, in-place inits) draw
from the tpu default generator exactly as eager does: a graph that draws
takes the generator's (seed, offset) as a hidden input, each op draws at the
offset the same eager call would get, and each run advances the generator by
what the graph drew. A compiled graph thus draws eager's numbers for the same
ops from the same state, and ``torch.manual_seed`` reproduces a run. The
random factories are decomposed as eager runs them (an empty tensor and the
in-place draw) for the same reason. Under activation checkpointing the
forward returns the state a recomputed op drew with, and the backward draws
again with it.
"""
import collections
import functools
import gc
import operator
import os
import threading
import time

import torch

from . import _C

_stats_lock = threading.Lock()
_stats = collections.Counter()
_seconds = collections.Counter()


def stats():
    """Counters of the compile backend (merged into torch.tpu._get_cache_stats)."""
    with _stats_lock:
        d = {"compiled_" + k: v for k, v in _stats.items()}
        d.update({"compiled_" + k: v for k, v in _seconds.items()})
    # programs: lowered from FX graphs; cache_loads: replayed from AOTAutograd
    # cache entries; cache_stores: entries written.
    # bucketed: programs built at bounds of changing sizes; specializations:
    # built per exact size (an op could not run padded). collective_cuts:
    # runs of collectives a graph was cut around (they run eagerly).
    # direct_graphs / direct_fallbacks: graphs lowered without AOTAutograd
    # / sent back to it (_compile_direct.py); direct_training_graphs: those
    # of them with a backward (_compile_joint.py). multi_device_graphs:
    # graphs over several tpu devices, run op by op.
    for k in ("graphs", "programs", "recompiles", "bucketed", "specializations",
              "cache_loads", "cache_stores", "collective_cuts", "direct_graphs",
              "direct_training_graphs", "direct_fallbacks", "multi_device_graphs"):
        d.setdefault("compiled_" + k, 0)
    for k in ("seconds", "xla_seconds", "lower_seconds", "direct_trace_seconds"):
        d.setdefault("compiled_" + k, 0.0)
    return d


def reset_stats():
    with _stats_lock:
        _stats.clear()
        _seconds.clear()


def _count(key, n=1):
    with _stats_lock:
        _stats[key] += n


def _add_seconds(key, s):
    with _stats_lock:
        _seconds[key] += s


class TpuCompileError(RuntimeError):
    """A graph the tpu backend cannot compile (names the op and source line)."""


# -- decompositions -------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _rules():
    return frozenset(_C._lowered_ops())


def _rule_name(op):
    name = op._schema.name
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def _auto_functionalized():
    return getattr(torch.ops.higher_order, "auto_functionalized_v2", None)


def _custom_ops():
    from . import custom_ops

    return custom_ops


def has_rule(op):
    return _rule_name(op) in _rules()


def _random_factories():
    """Random factories as eager runs them: an empty tensor filled by the
    in-place draw (here its functional form), so that a compiled graph makes
    the same draws, from the same generator offsets, as eager."""
    aten = torch.ops.aten

    random_from = getattr(aten.random, "from")

    def empty(size, dtype, device):
        return aten.empty.memory_format(size, dtype=dtype or torch.get_default_dtype(),
                                        device=device)

    def like(self, dtype, device):
        return aten.empty_like.default(self, dtype=dtype or self.dtype,
                                       device=device or self.device)

    def rand(size, *, generator=None, dtype=None, device=None, **_):
        return aten.uniform.default(empty(size, dtype, device), 0.0, 1.0, generator=generator)

    def randn(size, *, generator=None, dtype=None, device=None, **_):
        x = empty(size, dtype, device)
        return aten.normal.float_float(0.0, 1.0, size, generator=generator, dtype=x.dtype,
                                       device=x.device)

    def randint(high, size, *, generator=None, dtype=torch.int64, device=None, **_):
        return randint_low(0, high, size, generator=generator, dtype=dtype, device=device)

    def randint_low(low, high, size, *, generator=None, dtype=torch.int64, device=None, **_):
        return random_from(empty(size, dtype or torch.int64, device), low, high,
                                 generator=generator)

    def rand_like(self, *, generator=None, dtype=None, device=None, **_):
        return aten.uniform.default(like(self, dtype, device), 0.0, 1.0, generator=generator)

    def randn_like(self, *, generator=None, dtype=None, device=None, **_):
        x = like(self, dtype, device)
        return aten.normal.float_float(0.0, 1.0, list(x.shape), generator=generator,
                                       dtype=x.dtype, device=x.device)

    def randint_like(self, high, *, generator=None, dtype=None, device=None, **_):
        return random_from(like(self, dtype, device), 0, high, generator=generator)

    def randint_like_low(self, low, high, *, generator=None, dtype=None, device=None, **_):
        return random_from(like(self, dtype, device), low, high, generator=generator)

    def randperm(n, *, dtype=torch.int64, device=None, **_):
        return aten.randperm.generator(n, generator=None, dtype=dtype, device=device)

    return {
        aten.randperm.default: randperm,
        aten.rand.default: rand, aten.rand.generator: rand,
        aten.randn.default: randn, aten.randn.generator: randn,
        aten.randint.default: randint, aten.randint.generator: randint,
        aten.randint.low: randint_low, aten.randint.low_generator: randint_low,
        aten.rand_like.default: rand_like, aten.rand_like.generator: rand_like,
        aten.randn_like.default: randn_like, aten.randn_like.generator: randn_like,
        aten.randint_like.default: randint_like, aten.randint_like.generator: randint_like,
        aten.randint_like.low_dtype: randint_like_low,
        aten.randint_like.low_generator_dtype: randint_like_low,
    }


def _rng_hops():
    """Activation checkpointing's RNG wrappers: the forward runs a random op
    and saves the state it drew with, the backward's recompute draws again
    with that state."""
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state

    return run_and_save_rng_state, run_with_rng_state


def _draws_random(node):
    if node.target is _rng_hops()[0]:
        return True
    return isinstance(node.target, torch._ops.OpOverload) and \
        torch.Tag.nondeterministic_seeded in node.target.tags


def draws_random(gm):
    """Whether an AOT graph draws random numbers (its program then takes the
    tpu generator's state as a hidden input)."""
    return any(n.op == "call_function" and _draws_random(n) for n in gm.graph.nodes)


@functools.lru_cache(maxsize=None)
def decompositions():
    """PyTorch's decompositions for exactly the ops that have no C rule, so
    high-level ops with a rule (layer norm, SDPA pieces, softmax) stay whole
    and XLA sees them as written: the core ATen table's, built without
    materialising it (see _implicit_decompositions)."""
    from torch._decomp import decomposition_table

    # lift / lift_fresh turn constants made while tracing (torch.tensor(...)
    # on the device) into fake tensors; decomposed to alias they would reach
    # the fake mode as real tensors.
    keep = {torch.ops.aten.lift.default, torch.ops.aten.lift_fresh.default}
    table = dict(_random_factories())
    if not has_rule(torch.ops.aten._grouped_mm.default):
        from ._grouped_mm import grouped_mm

        table[torch.ops.aten._grouped_mm.default] = grouped_mm
    for source in (decomposition_table, _implicit_decompositions()):
        for op, fn in source.items():
            if isinstance(op, torch._ops.OpOverload) and not has_rule(op) and op not in keep:
                table.setdefault(op, fn)
    return table


def _implicit_decompositions():
    """What torch._decomp.core_aten_decompositions() adds to
    decomposition_table: an entry per CompositeImplicitAutograd op, running
    its own decomposition. Tracing (make_fx, functionalization) runs that
    decomposition anyway unless the tensors' device has a kernel of its own
    for the op, so only ops with a tpu or CPU kernel need the entry. Listing
    those takes milliseconds; materialising the core table (all ~800 such
    ops, over every operator namespace) cost each cold process 0.09 s.
    Ops the core table leaves whole stay whole here."""
    try:
        from torch.export.decomp_utils import PRESERVED_ATEN_CIA_OPS as preserved
    except ImportError:
        preserved = set()
    registered = torch._C._dispatch_get_registrations_for_dispatch_key
    with_kernels = set(registered("PrivateUse1")) | set(registered("CPU"))
    table = {}
    for name in sorted(set(registered("CompositeImplicitAutograd")) & with_kernels):
        namespace, _, rest = name.partition("::")
        op_name, _, overload = rest.partition(".")
        try:
            op = getattr(getattr(getattr(torch.ops, namespace), op_name), overload or "default")
        except (AttributeError, RuntimeError):  # not reachable from Python: never traced
            continue
        if op not in preserved:
            table[op] = op.decompose
    return table


# -- FX graph -> program ----------------------------------------------------------

def _type_spec(v, what):
    if not isinstance(v, torch.Tensor):
        raise TpuCompileError(f"{what}: expected a tensor, got {type(v).__name__}")
    shape = []
    for s in v.shape:
        if not isinstance(s, int):
            raise TpuCompileError(f"{what}: symbolic size {s} (shapes must be static)")
        shape.append(s)
    return (v.dtype, shape)


def _where(node):
    trace = node.meta.get("stack_trace")
    if trace:
        lines = [ln for ln in trace.strip().splitlines() if ln.strip()]
        return "\n".join(lines[-2:])
    return f"(graph node {node.name})"


def _schema_args(op, node, args=None, kwargs=None):
    """The node's arguments (or |args|, |kwargs|) in schema order, defaults
    filled in."""
    schema = op._schema
    out = []
    pos = list(node.args if args is None else args)
    kwargs = node.kwargs if kwargs is None else kwargs
    for i, a in enumerate(schema.arguments):
        if i < len(pos) and not a.kwarg_only:
            out.append(pos[i])
        elif a.name in kwargs:
            out.append(kwargs[a.name])
        elif a.has_default_value():
            out.append(a.default_value)
        else:
            raise TpuCompileError(f"{_rule_name(op)}: missing argument {a.name}")
    return out


def _flat_vals(val):
    """Tensors of a node's meta value in rule result order (None skipped;
    a list result, as in (Tensor[] self_out, Tensor found_inf_out), in
    place)."""
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [t for v in val for t in _flat_vals(v)]
    return []


def _meta_val(op, args, kwargs):
    """|op|'s result on meta tensors shaped like the graph values |args|
    (the partitioner leaves its RNG wrappers without a "val")."""
    def meta(a):
        if isinstance(a, torch.fx.Node):
            v = a.meta["val"]
            return torch.empty(v.shape, dtype=v.dtype, device="meta") \
                if isinstance(v, torch.Tensor) else v
        if isinstance(a, torch.device):
            return torch.device("meta")
        return a

    args, kwargs = torch.utils._pytree.tree_map(meta, (list(args), dict(kwargs)))
    return op(*args, **kwargs)


def _static_layout(x, *more):
    """Whether |x| is a tensor whose layout, and the integers |more|, are
    all static."""
    return isinstance(x, torch.Tensor) and all(
        isinstance(i, int) for i in (x.storage_offset(), *x.shape, *x.stride(), *more))


def _unit_dims_dropped(size, stride):
    return [(int(a), int(b)) for a, b in zip(size, stride) if a != 1]


def _storage_root(x_node):
    """The first value in the chain of views that ends in |x_node|: as
    as_strided reads storage, a window of any view in the chain is the same
    window of the root. An overlapping view (UnivNet's unfold of an unfold)
    has no flat stand-in of its own, and its root, dense as a rule, does.
    The chain ends at a view of another dtype (view.dtype, view_as_real),
    whose strides count other elements."""
    from torch.multiprocessing.reductions import StorageWeakRef

    def storage(n):
        v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
        return (StorageWeakRef(v.untyped_storage()), v.dtype) \
            if isinstance(v, torch.Tensor) else None

    mine = storage(x_node)
    while mine is not None and x_node.op == "call_function" and \
            isinstance(x_node.target, torch._ops.OpOverload) and _is_view_op(x_node.target) \
            and x_node.args and storage(x_node.args[0]) == mine:
        x_node = x_node.args[0]
    return x_node


def _is_view_op(op):
    """Whether |op|'s result is a view of its first argument (an alias it
    does not write: copy_ into a graph input aliases it too, with new
    values)."""
    schema = op._schema
    if len(schema.returns) != 1 or not schema.arguments:
        return False
    out, first = schema.returns[0].alias_info, schema.arguments[0].alias_info
    return out is not None and not out.is_write and first is not None and \
        out.before_set == first.before_set


def _as_strided_over_storage(gm):
    """as_strided indexes its input's storage, and a graph value has none of
    its own: the rules read a value densely in row-major order, which is its
    storage only when it is contiguous. A non-contiguous input (Longformer's
    chunks of a transposed tensor) is first written at its strides into a
    flat stand-in of its storage (as_strided_scatter into zeros); a window
    reaching outside what the input covers would read memory the graph does
    not hold, and is refused. as_strided_scatter of a non-contiguous self
    writes into such a stand-in (of the clone it returns: self's strides,
    offset 0) and reads the result back at self's strides."""
    from torch._prims_common import is_non_overlapping_and_dense_or_false as dense

    aten = torch.ops.aten

    def flat(anchor, x_node, x, offset):
        n = x.numel()
        zeros = gm.graph.call_function(aten.zeros.default, ([offset + n],),
                                       {"dtype": x.dtype, "device": x.device})
        zeros.meta["val"] = torch.empty(offset + n, dtype=x.dtype, device="meta")
        st = gm.graph.call_function(aten.as_strided_scatter.default,
                                    (zeros, x_node, list(x.shape), list(x.stride()), offset))
        st.meta["val"] = zeros.meta["val"]
        st.meta["stack_trace"] = anchor.meta.get("stack_trace")
        return st

    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in (
                aten.as_strided.default, aten.as_strided_scatter.default):
            continue
        scatter = node.target is aten.as_strided_scatter.default
        if not scatter:
            node.args = (_storage_root(node.args[0]), *node.args[1:])
        x_node = node.args[0]
        x = x_node.meta.get("val") if isinstance(x_node, torch.fx.Node) else None
        size, stride = node.args[2:4] if scatter else node.args[1:3]
        offset = (node.args[4 if scatter else 3] if len(node.args) > (4 if scatter else 3)
                  else node.kwargs.get("storage_offset")) or 0
        if not _static_layout(x, offset, *size, *stride) or (
                x.is_contiguous() and (scatter or x.storage_offset() == 0)):
            continue  # (a scatter writes into a clone of self, at offset 0)
        if scatter:
            if not dense(x):
                continue  # its clone is contiguous: the row-major reading holds
            with gm.graph.inserting_before(node):
                st = flat(node, x_node, x, 0)
                node.args = (st, *node.args[1:])
                node.meta["val"] = st.meta["val"]
            with gm.graph.inserting_after(node):
                back = gm.graph.call_function(aten.as_strided.default,
                                              (node, list(x.shape), list(x.stride()), 0))
            back.meta["val"] = torch.empty(list(x.shape), dtype=x.dtype, device="meta")
            node.replace_all_uses_with(back, delete_user_cb=lambda u: u is not back)
            continue
        if offset == x.storage_offset() and _unit_dims_dropped(size, stride) == \
                _unit_dims_dropped(x.shape, x.stride()):
            # The window is the input itself, with dims of one added or
            # removed (UnivNet's unsqueeze of a padded view): a reshape.
            with gm.graph.inserting_before(node):
                view = gm.graph.call_function(aten.view.default, (x_node, list(size)))
            view.meta.update(node.meta)
            node.replace_all_uses_with(view)
            gm.graph.erase_node(node)
            continue
        base, n = x.storage_offset(), x.numel()
        last = offset + sum((a - 1) * b for a, b in zip(size, stride))
        if n == 0 or not dense(x) or min(stride, default=0) < 0 or \
                offset < base or last >= base + n:
            raise TpuCompileError(
                f"aten::as_strided: a window {list(size)} / {list(stride)} at {offset} of a "
                f"{list(x.shape)} tensor with strides {list(x.stride())} at "
                f"{x.storage_offset()} reads memory outside it, which a compiled graph "
                f"does not hold, at\n{_where(node)}")
        with gm.graph.inserting_before(node):
            node.args = (flat(node, x_node, x, base), *node.args[1:])


class _Builder:
    def __init__(self, gm, example_inputs, name):
        self.gm, self.name = gm, name
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # Integer inputs (sizes of a graph specialised per shape) are baked
        # in as constants; the runner checks they still hold.
        self.baked = {i: v for i, v in enumerate(example_inputs) if isinstance(v, int)}
        tensor_pos = [i for i in range(len(example_inputs)) if i not in self.baked]
        # Generator states saved by the forward (run_and_save_rng_state): the
        # u64[2] values that forward's program returned for them.
        saved_states = {n.args[0] for n in gm.graph.nodes if n.target is _rng_hops()[1]}
        specs = [(torch.uint64, [2]) if self.placeholders[i] in saved_states else
                 _type_spec(example_inputs[i], f"{name} input {i}") for i in tensor_pos]
        from ._compile_cache import RecordingProgram

        self.prog = RecordingProgram(specs, draws_random(gm))
        ids = self.prog.inputs()
        self.constants = {self.placeholders[i]: v for i, v in self.baked.items()}
        self.env = {self.placeholders[i]: ids[k] for k, i in enumerate(tensor_pos)}
        # Placeholder -> program input index (tensors only).
        self.input_index = {self.placeholders[i]: k for k, i in enumerate(tensor_pos)}

    def _spec(self, v, what):
        return _type_spec(v, what)

    def _standin(self, node, tensors):
        """A meta tensor standing for |node|'s graph value in a C call."""
        if node in self.constants:  # get_attr tensors, baked integer inputs
            return self.constants[node]
        v = self.env[node]
        val = node.meta.get("val")
        t = torch.empty(tuple(val.shape) if val is not None else (), device="meta",
                        dtype=val.dtype if val is not None else torch.float32)
        tensors.append((t, v))
        return t

    def _arg(self, a, tensors, schema_type):
        if isinstance(a, torch.fx.Node):
            return self._standin(a, tensors)
        if isinstance(a, (list, tuple)):
            return [self._arg(x, tensors, None) for x in a]
        if isinstance(a, (int, float, bool)) and schema_type is not None and \
                isinstance(schema_type, torch.TensorType):
            return torch.scalar_tensor(a, dtype=torch.float64 if isinstance(a, float)
                                       else torch.bool if isinstance(a, bool) else torch.int64)
        if isinstance(a, torch.device) and a.type == "tpu":
            return torch.device("meta")
        return a

    def lower_node(self, node):
        op = node.target
        if op is operator.getitem:
            base, idx = node.args
            self.env[node] = self.env[base][idx]
            return
        if op in _rng_hops():
            self.env[node] = self._lower_rng_hop(node)
            return
        if op is _auto_functionalized() and op is not None:
            kernel_op = _custom_ops()._lookup(node.args[0])
            if kernel_op is None:
                raise TpuCompileError(
                    f"{self.name}: in-place custom op {node.args[0]} has no tpu lowering, "
                    f"at\n{_where(node)}")
            self.env[node] = self._lower_kernel(node, node.args[0], kernel_op, node.kwargs)
            return
        if not isinstance(op, torch._ops.OpOverload):
            raise TpuCompileError(
                f"{self.name}: unsupported call {op} in a compiled tpu graph, at\n{_where(node)}")
        kernel_op = _custom_ops()._lookup(op)
        if kernel_op is not None:
            self.env[node] = self._lower_kernel(node, op, kernel_op)
            return
        if op is torch.ops.aten.copy_.default and node.args[0] in self.input_index:
            self.mutations.append((node.args[0], node.args[1]))
            self.env[node] = self.env[node.args[1]]
            return
        self.env[node] = self._lower_op(node, op, node.args, node.kwargs, node.meta.get("val"))

    def _lower_kernel(self, node, op, kernel_op, functionalized=None):
        """A jax_op / stablehlo_op node: its kernel, traced for the node's
        input types, called on their values. |functionalized|: the kwargs of
        the auto_functionalized_v2 node standing for an in-place kernel,
        whose mutated arguments are its bases; the node's value is then the
        op's returns followed by the bases' new values."""
        where = f"{_rule_name(op)}"
        if functionalized is None:
            if kernel_op.aliases:
                raise TpuCompileError(f"{where}: an in-place kernel reached the backend "
                                      f"unfunctionalized, at\n{_where(node)}")
            args = dict(zip([a.name for a in op._schema.arguments], _schema_args(op, node)))
        else:
            args, bases = dict(functionalized), functionalized["_all_bases"]
            for a in op._schema.arguments:
                if a.alias_info is None or not a.alias_info.is_write:
                    continue
                if any(k.startswith(f"_{a.name}_") and k != f"_{a.name}_base_index"
                       for k in args):
                    raise TpuCompileError(
                        f"{where}: its in-place argument {a.name} is a view of a graph "
                        f"input, which compiled tpu graphs do not support (pass the whole "
                        f"tensor), at\n{_where(node)}")
                args[a.name] = bases[args[f"_{a.name}_base_index"]]
            for a in op._schema.arguments:
                if a.name not in args and a.has_default_value():
                    args[a.name] = a.default_value
        names = [a.name for a in op._schema.arguments]
        statics = {n: args[n] for n in names if n in kernel_op.static}
        specs, ids = [], []
        for n in names:
            if n in kernel_op.static:
                continue
            a = args[n]
            if not isinstance(a, torch.fx.Node):
                raise TpuCompileError(f"{where}: argument {n} is not a tensor, at\n"
                                      f"{_where(node)}")
            specs.append(self._spec(a.meta.get("val"), where))
            ids.append(self._value(a))
        try:
            kernel = kernel_op.trace(specs, statics)
            outs = self.prog.call_kernel(kernel, ids, statics)
        except Exception as e:
            raise TpuCompileError(f"{where}: {e}\n  at {_where(node)}") from e
        returned = getattr(kernel_op, "returned", None)
        results = list(outs) if returned is None else [outs[i] for i in returned]
        if functionalized is not None:
            # (returns..., new bases...), a None standing for no returns.
            results = results or [None]
            new_base = {}
            tensor_names = [n for n in names if n not in kernel_op.static]
            for out_i, in_i in kernel_op.aliases.items():
                new_base[functionalized[f"_{tensor_names[in_i]}_base_index"]] = outs[out_i]
            for b in range(len(functionalized["_all_bases"])):
                if b not in new_base:
                    raise TpuCompileError(f"{where}: base {b} has no new value, at\n"
                                          f"{_where(node)}")
                results.append(new_base[b])
            return results
        val = node.meta.get("val")
        return results if isinstance(val, (tuple, list)) else results[0]

    def _value(self, node):
        """The graph value of |node|."""
        if node in self.env:
            return self.env[node]
        raise TpuCompileError(f"{self.name}: {node.name} has no graph value")

    def _lower_rng_hop(self, node):
        """run_and_save_rng_state(op, *args): op's results after the state it
        drew with; run_with_rng_state(state, op, *args): op drawing with it."""
        save, _ = _rng_hops()
        if node.target is save:
            op, *args = node.args
            val = _meta_val(op, args, node.kwargs)
            specs = [self._spec(o, _rule_name(op)) for o in _flat_vals(val)]
            state = self.prog.reserve_state(op._schema.name, specs)
            self.saved_states.add(state)
            return [state, self._lower_op(node, op, args, node.kwargs, val, state)]
        state, op, *args = node.args
        val = _meta_val(op, args, node.kwargs)
        return self._lower_op(node, op, args, node.kwargs, val, self.env[state])

    def _lower_op(self, node, op, args, kwargs, val, rng_state=-1):
        """Lowers |op| on |args| for |node|; returns its value (a list for
        tuple results)."""
        name = _rule_name(op)
        if not has_rule(op):
            raise TpuCompileError(
                f"{name} has no tpu lowering (needed by a compiled graph), at\n{_where(node)}")
        tensors = []
        args = [self._arg(a, tensors, s.type)
                for a, s in zip(_schema_args(op, node, args, kwargs), op._schema.arguments)]
        outs = _flat_vals(val)
        try:
            ids = self.prog.lower(op._schema.name, op._overloadname, args, tensors,
                                  [self._spec(o, name) for o in outs], rng_state)
        except Exception as e:
            raise TpuCompileError(f"{name}: {e}\n  at {_where(node)}") from e
        if isinstance(val, (tuple, list)):
            it = iter(ids)

            def take(v):
                if isinstance(v, (tuple, list)):
                    return [take(e) for e in v]
                return next(it) if isinstance(v, torch.Tensor) else None

            return take(val)
        return ids[0] if ids else None

    def _lower_nodes(self):
        """Lowers every node in graph order (constants kept aside); returns
        the output node's values."""
        self.mutations = []
        self.saved_states = set()
        _as_strided_over_storage(self.gm)
        outputs = None
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "get_attr":
                t = getattr(self.gm, node.target)
                self.constants[node] = t.detach().cpu() if isinstance(t, torch.Tensor) else t
            elif node.op == "call_function":
                self.lower_node(node)
            elif node.op == "output":
                outputs = node.args[0]
            else:
                raise TpuCompileError(f"{self.name}: unsupported FX node {node.op} {node.target}")
        return outputs

    def build(self, lazy=False, background=False):
        """The graph as a TpuOutputCode; |lazy|: its executable is fetched at
        the first call; |background|: and XLA starts compiling it now, on a
        thread of its own."""
        t0 = time.perf_counter()
        outputs = self._lower_nodes()
        layout, fresh = [], 0
        for o in outputs:
            if isinstance(o, torch.fx.Node) and o in self.constants:
                layout.append(("const", self.constants[o]))
            elif isinstance(o, torch.fx.Node) and o in self.input_index:
                layout.append(("input", self.input_index[o]))
            elif isinstance(o, torch.fx.Node):
                val = o.meta.get("val")
                saved = self.env[o] in self.saved_states  # u64[2], whatever its meta says
                self.prog.add_output(self.env[o], -1, torch.uint64 if saved else val.dtype)
                # A CPU value of the graph (torch.arange without a device)
                # is returned on the CPU, as eager makes it.
                cpu = val.device.type == "cpu" and not saved
                layout.append(("out_cpu" if cpu else "out", fresh))
                fresh += 1
            else:
                layout.append(("const", o))
        for target, src in self.mutations:
            val = target.meta["val"]
            v = self.prog.convert(self.env[src], val.dtype, list(val.shape))
            self.prog.add_output(v, self.input_index[target], val.dtype)
        _count("programs")
        from ._compile_cache import TpuOutputCode

        code = TpuOutputCode(self.name, self.prog.tape, layout, self.baked, lazy)
        code._prog = self.prog.prog
        _add_seconds("lower_seconds", time.perf_counter() - t0)  # FX graph to program, no XLA
        if not lazy:
            code.load_start()
        elif background:
            self.prog.prog.compile_start(self.name)
        return code


def _finish(prog, name, layout, baked):
    """Gets |prog|'s executable (memory cache, disk cache or XLA) and returns
    its runner."""
    t0 = time.perf_counter()
    if prog.compile(name):
        _add_seconds("xla_seconds", time.perf_counter() - t0)
    return _runner(prog, layout, baked)


def _runner(prog, layout, baked):
    """A boxed callable running one program: ("out", k) fresh output k
    (("out_cpu", k): copied to the CPU),
    ("input", i) tensor input i returned as it is, ("const", v) a constant."""

    def run(args):
        for i, v in baked.items():
            if args[i] != v:
                raise TpuCompileError(f"compiled graph input {i} was specialised to {v}, "
                                      f"got {args[i]}")
        inputs = [a for i, a in enumerate(args) if i not in baked]
        args.clear()  # boxed convention: inputs may die as soon as possible
        outs = prog.run(inputs)
        return [outs[v] if kind == "out" else outs[v].cpu() if kind == "out_cpu" else
                inputs[v] if kind == "input" else v for kind, v in layout]

    run._boxed_call = True
    return run


# The forward whose XLA compile runs while AOTAutograd lowers its backward.
_forward_compiling = threading.local()


def _compile_graph(gm, example_inputs, kind):
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    t0 = time.perf_counter()
    name = f"compiled_{kind}_{len(list(gm.graph.nodes))}nodes"
    with unset_fake_temporarily():  # constants and stand-ins are real tensors
        # A training graph's forward and backward compile side by side, each
        # on a thread of its own (a compile keeps only part of the cores busy). The
        # backward's executable is awaited at the first backward, as if
        # AOTAutograd compiled it lazily; the forward's before the backward's
        # lowering returns, so its errors still belong to torch.compile.
        try:
            compiled = _Builder(gm, example_inputs, name).build(
                lazy=kind != "inference", background=kind != "inference")
        except TpuCompileError as e:
            if kind != "backward":
                raise
            # The backward is lowered with the forward only so the cache entry
            # holds both; its errors still belong to the first backward.
            from ._compile_cache import FailedOutputCode

            compiled = FailedOutputCode(e)
        finally:
            forward = getattr(_forward_compiling, "code", None)
            _forward_compiling.code = None
        if kind == "forward":
            _forward_compiling.code = compiled
        elif forward is not None:
            forward._ensure()
    _add_seconds("seconds", time.perf_counter() - t0)
    return compiled


def _view_ops():
    aten = torch.ops.aten
    return {aten.t.default, aten.transpose.int, aten.permute.default, aten.view.default,
            aten._unsafe_view.default, aten.unsqueeze.default, aten.squeeze.dim,
            aten.squeeze.dims, aten.squeeze.default, aten.alias.default, aten.detach.default,
            aten.expand.default}


def _partition(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):
    """AOTAutograd's default partition, except that the forward saves the
    base of a view (a transposed weight, a reshaped activation) rather than
    the view: a program output is a buffer of its own, so a saved view cost
    a copy (a weight's transpose, each step), and the backward's program
    recomputes the view for free."""
    from torch._functorch import partitioners
    from torch.utils.checkpoint import CheckpointPolicy

    if partitioners._is_functional_graph(joint_module.graph)[0] is None:
        views = _view_ops()
        for node in joint_module.graph.nodes:
            if node.op == "call_function" and node.target in views and \
                    "recompute" not in node.meta:
                node.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
    return partitioners.default_partition(joint_module, joint_inputs,
                                          num_fwd_outputs=num_fwd_outputs, **kwargs)


def _aot_compile(gm, example_inputs):
    """AOTAutograd with our compilers, through PyTorch's AOTAutograd cache
    (serializable compilers: see _compile_cache)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    from . import _compile_cache

    def compiler(kind):
        return SerializableAOTDispatchCompiler(
            _compile_cache.TpuOutputCode, functools.partial(_compile_graph, kind=kind))

    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=decompositions(),
        keep_inference_input_mutations=True,
        partition_fn=_partition,
    )
    with _compile_cache.scope():
        return backend(gm, example_inputs)


def _is_symbolic(x):
    if isinstance(x, torch.SymInt) or isinstance(x, torch.SymFloat):
        return True
    return isinstance(x, torch.Tensor) and any(not isinstance(s, int) for s in x.shape)


def tpu_backend(gm, example_inputs, **kwargs):
    """The Dynamo backend registered as "tpu"."""
    _gc_pause.register()
    if kwargs.get("options"):
        raise TpuCompileError(f"backend 'tpu' takes no options, got {kwargs['options']}")
    from . import _compile_collectives

    if _compile_collectives.has_collectives(gm):
        split, cuts = _compile_collectives.split_at_collectives(gm, tpu_backend)
        _count("collective_cuts", cuts)
        return split
    devices, tpu_inputs = _tpu_devices(gm, example_inputs)
    if len(devices) > 1:
        # A program runs on one device: a graph moving tensors between tpu
        # devices runs op by op, each op on its tensors' device.
        _count("multi_device_graphs")
        return gm.forward
    _count("graphs")
    compiled = _tpu_backend_one_device(gm, example_inputs)
    if devices and not tpu_inputs:
        # A program runs on the device of its first tpu input; one without
        # (factories only) runs where its values were traced.
        return _on_device(compiled, devices.pop())
    return compiled


def _tpu_devices(gm, example_inputs):
    """The tpu device indices of |gm|'s inputs and values, and whether any
    input is a tpu tensor."""
    from . import tpu

    def indices(v):
        for t in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(t, torch.Tensor) and t.device.type == "tpu":
                yield tpu.current_device() if t.device.index is None else t.device.index

    inputs = set(indices(list(example_inputs)))
    devices = set(inputs)
    for node in gm.graph.nodes:
        devices.update(indices(node.meta.get("val", node.meta.get("example_value"))))
    return devices, bool(inputs)


def _on_device(compiled, index):
    """|compiled|, called with tpu:|index| as the current device."""
    from . import tpu

    if getattr(compiled, "_boxed_call", False):
        def run(args):
            with tpu.device(index):
                return compiled(args)

        run._boxed_call = True
    else:
        def run(*args, **kwargs):
            with tpu.device(index):
                return compiled(*args, **kwargs)
    return run


def _tpu_backend_one_device(gm, example_inputs):
    from . import _flex_attention

    _flex_attention.inline_dense(gm)
    if any(_is_symbolic(x) for x in example_inputs):
        from ._compile_bucket import bucketed_backend, user_bounds

        return bucketed_backend(gm, example_inputs, user_bounds(gm))
    from . import _compile_direct

    direct = _compile_direct.compile_graph(gm, example_inputs)
    if direct is not None:
        return direct
    return _aot_compile(gm, example_inputs)


def _any_tpu(gm, example_inputs):
    """Whether the graph computes on tpu: a tpu input, or (a graph of
    factories: create_block_mask, torch.arange(device="tpu")) a tpu value
    inside it."""
    def on_tpu(x):
        return isinstance(x, torch.Tensor) and x.device.type == "tpu"

    if any(on_tpu(x) for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        v = node.meta.get("example_value", node.meta.get("val"))
        if any(on_tpu(t) for t in (v if isinstance(v, (tuple, list)) else (v,))):
            return True
    return False


def default_backend(gm, example_inputs, **kwargs):
    """torch.compile's default: graphs on tpu tensors go to the tpu backend,
    everything else to Inductor as before."""
    if _any_tpu(gm, example_inputs):
        return tpu_backend(gm, example_inputs)
    return torch._TorchCompileInductorWrapper(
        kwargs.get("mode"), kwargs.get("options"), None)(gm, example_inputs)


def _route_named_inductor():
    """torch.compile(backend="inductor") names Inductor, whose code generator
    for tpu (Pallas) needs another package's internals and fails at the
    first kernel: graphs on tpu tensors go to the tpu backend, as they do
    without a backend argument, so CUDA code naming Inductor runs
    unchanged. Other graphs stay Inductor's."""
    cls = torch._TorchCompileInductorWrapper
    call = cls.__call__
    if getattr(call, "_tpu_wrapped", False):
        return

    @functools.wraps(call)
    def routed(self, model_, inputs_, **kwargs):
        if _any_tpu(model_, inputs_):
            if not _routed_inductor_warned:
                _warn_routed_inductor()
            return tpu_backend(model_, inputs_)
        return call(self, model_, inputs_, **kwargs)

    routed._tpu_wrapped = True
    cls.__call__ = routed


_routed_inductor_warned = False


def _warn_routed_inductor():
    global _routed_inductor_warned
    _routed_inductor_warned = True
    import warnings

    warnings.warn("torch.compile(backend='inductor'): graphs on tpu tensors are compiled by "
                  "the tpu backend (XLA); Inductor has no code generator for this device",
                  stacklevel=2)


def _patch_tpu_interface():
    """Dynamo's in-tree TpuInterface assumes Google's package; fill in what it
    leaves to the base class from torch.tpu."""
    from torch._dynamo import device_interface as di

    iface = getattr(di, "TpuInterface", None)
    if iface is None:
        return
    tpu = torch.tpu
    for name, fn in (("device_count", tpu.device_count),
                     ("current_device", tpu.current_device),
                     ("set_device", tpu.set_device),
                     ("synchronize", tpu.synchronize),
                     ("memory_allocated", tpu.memory_allocated),
                     ("get_raw_stream", lambda device_idx=None: 0)):
        setattr(iface, name, staticmethod(fn))


def _replace_in_dynamo(module_name, name, make):
    """Replaces |name| in Dynamo's module |module_name| by make(original),
    once; leaves it be where this PyTorch has no such thing."""
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return
    original = getattr(module, name, None)
    if original is None or getattr(original, "_tpu_wrapped", False):
        return
    replacement = make(original)
    replacement._tpu_wrapped = True
    setattr(module, name, replacement)


def _patch_optimizer_tracing():
    """Dynamo asks, for every gradient of an optimizer it traces, whether
    the tensor is static for CUDA graphs; the check imports Inductor's
    CUDA-graph trees (with all of Inductor's code generators, about 0.3 s)
    before it looks at the device. Non-CUDA tensors get the answer the check
    gives them (True) without the import."""
    def make(check):
        def is_static_for_cudagraphs(x):
            return check(x) if x.is_cuda else True
        return is_static_for_cudagraphs

    _replace_in_dynamo("torch._dynamo.variables.optimizer", "_is_static_for_cudagraphs", make)


def _patch_foreach_lerp_tracing():
    """Dynamo traces torch._foreach_lerp_ (Adam's and AdamW's first-moment
    update) through a polyfill that matches CUDA's rounding: with a number
    for the weight it makes a full-size tensor of it per parameter and an
    addcmul_, each traced op by op, 0.23 s of TinyGPT's first training step
    (52 parameters). On tpu tensors the op is traced as itself, one node that
    lowers to the same rule eager mode runs, so compiled and eager steps
    round alike."""
    def make(polyfill):
        def foreach_lerp_inplace(self, end, weight):
            if not isinstance(weight, torch.Tensor) and len(self) > 0 and \
                    self[0].device.type == "tpu":
                torch.ops.aten._foreach_lerp_.Scalar(self, end, weight)
                return self
            return polyfill(self, end, weight)
        return foreach_lerp_inplace

    _replace_in_dynamo("torch._dynamo.polyfills", "foreach_lerp_inplace", make)


def _patch_guard_latency_probe():
    """After building a frame's guards Dynamo times one evaluation of them
    for its compile metrics (guard_latency_us), and before it evicts the CPU
    caches by filling a fresh buffer of tens of MiB: 20-25 ms of page faults
    for each frame it compiles, 0.11 s of TinyGPT's first training step cold
    or warm (five frames). The probe here times the same evaluation without
    the eviction, so the metric is a warm-cache latency."""
    def make(_):
        def guard_latency_us(root, f_locals, n_iters):
            n = max(int(n_iters), 1)
            t0 = time.perf_counter_ns()
            for _ in range(n):
                root.check(f_locals)
            return (time.perf_counter_ns() - t0) / 1e3 / n
        return guard_latency_us

    _replace_in_dynamo("torch._dynamo.guards", "profile_guard_manager", make)


def _patch_backward_graph_break():
    """A frame that calls loss.backward() breaks its graph there. Dynamo
    finds a break by tracing up to it, failing, and tracing the frame again
    from its first instruction so that it can stop at the break: the whole
    forward is traced twice, 0.4 s of TinyGPT's first training step. A call
    of Tensor.backward() in the frame Dynamo compiles (not inlined) always
    breaks (unless trace_autograd_ops is on), and it is seen on the stack
    before the call runs, so the break is taken in the first pass: the
    partial graph and the resume function are the ones the second pass
    would have made, from the same tracer state."""
    import dis
    import sys

    try:
        from torch._dynamo import config, exc
        from torch._dynamo import symbolic_convert as sc
        from torch._dynamo.variables import TensorVariable
        from torch._dynamo.variables.misc import GetAttrVariable, NullVariable
    except ImportError:
        return
    op = dis.opmap.get("CALL")
    table = getattr(sc.InstructionTranslator, "dispatch_table", None)
    if op is None or table is None or table[op] is None or \
            getattr(table[op], "_tpu_wrapped", False) or \
            not hasattr(TensorVariable, "method_backward") or \
            not hasattr(sc.InstructionTranslatorBase, "speculate"):
        return
    prefix = "Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y)"

    def callee(tx, inst):  # the stack as CALL sees it: [NULL, fn, *args] (3.13+: [fn, NULL, ...])
        contents = tx.stack[-(inst.arg + 2):]
        if sys.version_info >= (3, 13) or not isinstance(contents[0], NullVariable):
            return contents[0]
        return contents[1]

    def break_at_backward(tx, inst):
        if type(tx) is not sc.InstructionTranslator or config.trace_autograd_ops or \
                inst.arg is None or len(tx.stack) < inst.arg + 2:
            return
        fn = callee(tx, inst)
        if type(fn) is not GetAttrVariable or fn.name != "backward" or \
                type(fn.obj) is not TensorVariable:
            return
        # Where the break would not be a partial graph, the usual path decides.
        if tx.one_graph or getattr(tx, "error_on_graph_break", False) or \
                tx.active_generic_context_managers or not tx.should_compile_partial_graph() or \
                tx.maybe_has_backedge():
            return
        try:
            fn.obj.method_backward(tx)  # raises before it traces anything
            return
        except exc.Unsupported as e:
            err = e
        entry = tx.speculate()
        if getattr(entry, "_failed", False):  # taken already (and logged)
            tx.speculation_log.index -= 1
            return
        try:
            entry.reason = sc.GraphCompileReason(getattr(err, "msg", str(err)),
                                                 getattr(err, "real_stack", None) or
                                                 [tx.frame_summary()])
            entry.fail_and_restart_analysis(tx.error_on_graph_break)
        except exc.SpeculationRestartAnalysis:
            pass  # the entry is marked: CALL breaks the graph at once
        except Exception:  # a Dynamo unlike this one: its own path decides
            return
        finally:
            tx.speculation_log.index -= 1  # CALL's own speculate() takes this entry
        tx.log_graph_break(tx.code_options, reason=f"{prefix}:\n\n{err}", exc=err)
        if hasattr(err, "add_to_stats"):
            err.remove_from_stats()
            err.add_to_stats("graph_break")

    call = table[op]

    def CALL(tx, inst):
        break_at_backward(tx, inst)
        return call(tx, inst)

    CALL._tpu_wrapped = True
    CALL._tpu_original = call
    table[op] = CALL


class _CompileGcPause:
    """Pauses Python's cyclic garbage collector while Dynamo compiles, in
    processes that use the tpu device. A compile allocates hundreds of
    thousands of objects that mostly stay alive (graphs, guards, fake
    tensors), so the full collections they trigger walk the whole heap and
    find next to nothing: on TinyGPT's training step two of them took 0.4 of
    a warm start's 2.1 s and freed 1,920 objects. Garbage a compile leaves
    waits for the next collection after it. Dynamo calls the start and end
    callbacks once around the outermost compile (nested and concurrent
    compiles share them); torch._dynamo.reset() drops them, so the backend
    registers them again. TORCH_TPU_COMPILE_GC=1 keeps collecting."""

    def __init__(self):
        self.paused = False

    def start(self, args):
        if gc.isenabled() and torch.tpu.is_initialized():
            gc.disable()
            self.paused = True

    def end(self, args):
        if self.paused:
            self.paused = False
            gc.enable()

    def register(self):
        if os.environ.get("TORCH_TPU_COMPILE_GC") == "1":
            return
        handler = getattr(torch._dynamo, "callback_handler", None)
        if handler is None or self.start in handler.start_callbacks:
            return
        handler.register_start_callback(self.start)
        handler.register_end_callback(self.end)


_gc_pause = _CompileGcPause()
_installed = False


def install():
    """Registers backend "tpu", makes it torch.compile's default for tpu
    tensors, and completes Dynamo's TpuInterface. Needs torch._dynamo, so it
    runs when that is first imported (import torch stays fast)."""
    global _installed
    if _installed:
        return
    _installed = True
    from torch._dynamo.backends import registry

    if "tpu" not in registry._COMPILER_FNS:
        registry.register_backend(compiler_fn=tpu_backend, name="tpu")
    set_default = getattr(torch.compiler, "set_default_backend", None)
    if set_default is not None and torch.compiler.get_default_backend() == "inductor":
        set_default(default_backend)
    _route_named_inductor()
    _patch_tpu_interface()
    _patch_optimizer_tracing()
    _patch_foreach_lerp_tracing()
    _patch_guard_latency_probe()
    _patch_backward_graph_break()
    _gc_pause.register()
    from ._grouped_mm import install_fake

    install_fake()
