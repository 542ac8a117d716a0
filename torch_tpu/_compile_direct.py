"""Graphs lowered without AOTAutograd: those without autograd (an
optimizer step, inference under no_grad) here, training graphs through a
joint trace of their forward and backward (_compile_joint.py).

AOTAutograd serves such a graph with two full passes over it on fake
tensors (one collecting metadata, one tracing under functionalization),
which for an AdamW step of a small GPT took four times a plain trace. Here
the Dynamo graph is traced once to ATen (``make_fx`` on fake tensors, the
backend's decompositions) and its in-place updates are turned into values
by a pass of our own, which handles exactly the case where no view ever
aliases a mutated tensor: each in-place op then becomes its functional
twin, later reads take the newest value, and a mutated graph input gets
one ``copy_`` of its final value, the form the lowering already takes from
AOTAutograd (the input's buffer is donated and replaced). Where a view does
alias a mutated tensor, the graph is traced once more under PyTorch's
functionalization (as AOTAutograd runs it, below autograd), which replays
views and scatters writes through them into their bases.

An output that aliases an input or another output (a view of it, or the
same tensor twice) is made at run time from what it aliases, with the
view's sizes, strides and offset, as AOTAutograd replays views; with a
backward the view is made with autograd, so its gradient flows into what
it views.

Anything else goes to AOTAutograd as before: a graph that draws random
numbers, holds higher-order ops, mutates an input that aliases another (or,
with a backward, any input), changes a tensor's sizes in place, returns
views of memory it does not return itself (two rows of an intermediate)
or, with a backward, an input itself, or whose trace or lowering fails
here. ``TORCH_TPU_COMPILE_DIRECT=0`` sends every graph there.

Results are cached on disk (the folder of the AOTAutograd entries) as
program tapes (two, with a backward), keyed by the Dynamo graph's code,
its inputs' layouts and aliasing, and the global modes a trace reads (grad,
default dtype, autocast, deterministic algorithms), so a warm process
neither traces nor lowers.
"""
import collections
import contextlib
import hashlib
import operator
import os
import pickle
import re
import time

import torch

from . import _compile, _compile_joint


# Why the last graph that tried this path went to AOTAutograd (for tests and
# debugging; counted in torch.tpu._get_cache_stats()["compiled_direct_fallbacks"]),
# and how many graphs went for each reason, node names left out (the zoo's report).
last_fallback = None
fallback_reasons = collections.Counter()


def enabled():
    return os.environ.get("TORCH_TPU_COMPILE_DIRECT", "1") != "0"


# -- which graphs -------------------------------------------------------------------

def _attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj


def _set_grad_off_first(gm):
    """Whether the graph's first call turns grad mode off (Dynamo keeps
    torch.no_grad() inside the graph: an optimizer step)."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            return node.target is torch._C._set_grad_enabled and node.args == (False,)
    return False


def _candidate(gm, flat):
    for n in gm.graph.nodes:
        if n.op == "call_module" or isinstance(n.target, torch._ops.HigherOrderOperator) or (
                n.op == "get_attr" and isinstance(_attr(gm, n.target), torch.nn.Module)):
            return False  # subgraphs: higher-order ops, even those inlined as functions
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    for x in flat:  # plain dense tensors (no DTensor, no sparse) and static ints
        if isinstance(x, torch.Tensor):
            if is_traceable_wrapper_subclass(x) or x.layout != torch.strided:
                return False
        elif type(x) is not int:
            return False
    needs_grad = torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in flat)
    if not needs_grad or _set_grad_off_first(gm):
        return "inference"
    differentiable = _compile_joint.differentiable_outputs(gm)
    if differentiable is None:
        return False
    return "training" if differentiable else "inference"


# -- in-place ops to values ---------------------------------------------------------

def _written(op):
    return [i for i, a in enumerate(op._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write]


def _twin(op):
    """The functional form of in-place |op| (aten::add_.Tensor ->
    aten::add.Tensor), or None."""
    ns, name = op._schema.name.split("::")
    if not name.endswith("_") or name.startswith("__"):
        return None
    packet = getattr(getattr(torch.ops, ns), name[:-1], None)
    twin = getattr(packet, op._overloadname, None) if packet is not None else None
    if twin is None or _written(twin):
        return None
    return twin


def _storage(t):
    """A key of |t|'s storage (fake tensors' too): equal keys, one memory."""
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(t.untyped_storage())


def _layout(t):
    return (t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t.storage_offset())


def _returns_views(node):
    op = node.target
    if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
        return True
    return any(r.alias_info is not None for r in op._schema.returns)


def _meta(shape, dtype):
    return torch.empty(tuple(shape), dtype=dtype, device="meta")


def _natural_dtypes(twin, args, kwargs, n):
    """The dtype of each of foreach op |twin|'s n results on |args| (graph
    nodes), found on one-element lists, once per distinct element types
    (a model's parameters share one or two)."""
    def sig(a, i):
        if isinstance(a, (list, tuple)) and len(a) == n:
            e = a[i]
            if isinstance(e, torch.fx.Node):
                v = e.meta["val"]
                return ("t", v.dtype, v.dim())
            return ("s", type(e))
        return None

    found, out = {}, []
    for i in range(n):
        key = tuple(sig(a, i) for a in args)
        if key not in found:
            one = [[a[i]] if s is not None else a for a, s in zip(args, key)]
            found[key] = _compile._meta_val(twin, one, kwargs)[0].dtype
        out.append(found[key])
    return out


class _Unsupported(Exception):
    pass


class _ViewsMutated(_Unsupported):
    """A view aliases a mutated tensor: the graph is traced again under
    PyTorch's functionalization, which replays views and scatters their
    updates into their bases."""


def functionalize(gm):
    """Rewrites |gm| (ATen, with in-place ops) in place so that it mutates
    nothing but its placeholders, each by one final copy_; returns the
    positions of the placeholders it mutates. Raises _Unsupported where a
    view aliases a mutated tensor."""
    aten = torch.ops.aten
    graph = gm.graph
    key = _storage

    # Storages some op writes.
    mutated = set()
    for node in graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        written = _written(node.target)
        if not written:
            continue
        if written != [0] or (node.target is not aten.copy_.default and
                              _twin(node.target) is None):
            raise _Unsupported(f"{node.target} writes arguments {written}")
        if torch.Tag.inplace_view in node.target.tags or \
                node.target._schema.name in ("aten::set_", "aten::resize_", "aten::resize_as_"):
            raise _Unsupported(f"{node.target} changes a tensor's sizes or storage")
        self_arg = node.args[0]
        targets = self_arg if isinstance(self_arg, (list, tuple)) else [self_arg]
        for a in targets:
            v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if not isinstance(v, torch.Tensor):
                raise _Unsupported(f"{node.target} writes a non-graph value")
            mutated.add(key(v))
    if not mutated:
        return []
    # Every value in a mutated storage must be the whole tensor: then it is
    # one value over time, and an update is a rebinding.
    root, first = {}, {}
    for node in graph.nodes:
        v = node.meta.get("val")
        if isinstance(v, torch.Tensor):
            k = key(v)
            if k not in mutated:
                continue
            if k not in first:
                if node.op == "get_attr":
                    raise _Unsupported("a mutated constant")
                first[k] = node
            elif _layout(v) != _layout(first[k].meta["val"]):
                if node.op in ("placeholder", "get_attr"):
                    # (functionalization would take the two for two tensors)
                    raise _Unsupported(f"{node.name} views a mutated input")
                raise _ViewsMutated(f"{node.name} views a mutated tensor")
            elif node.op == "placeholder":
                raise _Unsupported("a mutated input aliases another input")
            root[node] = first[k]
        elif any(key(t) in mutated for t in _compile._flat_vals(v)) and \
                _returns_views(node):
            # (A list of fresh tensors, as a foreach op returns, is fine:
            # its elements, read through getitem, are the roots.)
            raise _ViewsMutated(f"{node.name} holds views of a mutated tensor")

    newest = {}  # root -> its value now

    def current(a):
        if isinstance(a, torch.fx.Node) and a in root:
            return newest.get(root[a], root[a])
        return a

    def value(node, target, args, kwargs, val):
        with graph.inserting_before(node):
            n = graph.call_function(target, tuple(args), dict(kwargs))
        n.meta.update(node.meta)
        n.meta["val"] = val
        return n

    def like(node, src, dst):
        """|src| as an in-place write into |dst| leaves it: dst's dtype and
        device (float16 += float32 stays float16), broadcast to its shape."""
        sv = src.meta["val"]
        same_shape = tuple(sv.shape) == tuple(dst.shape)
        if sv.dtype != dst.dtype or sv.device != dst.device:
            src = value(node, aten._to_copy.default, [src],
                        {"dtype": dst.dtype, "device": dst.device},
                        dst if same_shape else _meta(sv.shape, dst.dtype))
        if not same_shape:
            src = value(node, aten.expand.default, [src, list(dst.shape)], {}, dst)
        return src

    def result(dst, dtype):
        # (A value that is not dst's dtype is converted before anything
        # else reads it: a meta stand-in is enough for the lowering.)
        return dst if dtype == dst.dtype else _meta(dst.shape, dtype)

    dead = []
    for node in list(graph.nodes):
        if node.op in ("placeholder", "get_attr"):
            continue
        self_arg = node.args[0] if node.args else None
        node.args = torch.fx.map_arg(node.args, current)
        node.kwargs = torch.fx.map_arg(node.kwargs, current)
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) \
                or not _written(node.target):
            continue
        op = node.target
        if op is aten.copy_.default:
            newest[root[self_arg]] = like(node, node.args[1], self_arg.meta["val"])
        elif isinstance(self_arg, (list, tuple)):  # a foreach op: a list of results
            twin = _twin(op)
            dsts = [t.meta["val"] for t in self_arg]
            dtypes = _natural_dtypes(twin, node.args, node.kwargs, len(dsts))
            n = value(node, twin, node.args, node.kwargs,
                      [result(d, t) for d, t in zip(dsts, dtypes)])
            for i, t in enumerate(self_arg):
                item = value(node, operator.getitem, [n, i], {}, n.meta["val"][i])
                newest[root[t]] = like(node, item, dsts[i])
        else:
            twin = _twin(op)
            dst = self_arg.meta["val"]
            natural = _compile._meta_val(twin, node.args, node.kwargs)
            n = value(node, twin, node.args, node.kwargs, result(dst, natural.dtype))
            newest[root[self_arg]] = like(node, n, dst)
        dead.append(node)
    out = next(n for n in graph.nodes if n.op == "output")
    for r, v in newest.items():
        if r.op == "placeholder":
            with graph.inserting_before(out):
                c = graph.call_function(aten.copy_.default, (r, v))
            c.meta["val"] = r.meta["val"]
    for node in reversed(dead):
        if node.users:
            raise _Unsupported(f"{node.name} is read after its rewrite")
        graph.erase_node(node)
    graph.lint()
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    return sorted(placeholders.index(r) for r in newest if r.op == "placeholder")


def functional_form(fn):
    """|fn| under PyTorch's functionalization, as AOTAutograd runs it (for
    make_fx): views are replayed from their bases and updates through them
    scattered into the bases; an input |fn| updates gets one copy_ of its
    final value at the end. Autograd runs above it (a joint trace's
    autograd.grad sees functional tensors that require grad)."""
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
    from torch.utils import _pytree as pytree

    def run(*args):
        flat, spec = pytree.tree_flatten(args)
        with FunctionalTensorMode():
            wrapped = [FunctionalTensor.to_functional(a) if isinstance(a, torch.Tensor) else a
                       for a in flat]
            outs = fn(*pytree.tree_unflatten(wrapped, spec))

        def value(t):
            torch._sync(t)
            return torch._from_functional_tensor(t.elem)

        outs = pytree.tree_map_only(FunctionalTensor, value, outs)
        for a, w in zip(flat, wrapped):
            if not isinstance(w, FunctionalTensor):
                continue
            torch._sync(w)
            if torch._functionalize_has_metadata_mutation(w.elem):
                raise _Unsupported("changes an input's sizes or strides")
            if torch._functionalize_has_data_mutation(w.elem):
                a.copy_(value(w))
        return outs

    return run


def written_inputs(gm):
    """The placeholders a functionalized graph writes, each by one copy_
    after all its reads (what PyTorch's functionalization leaves): their
    positions. Raises _Unsupported for any other write."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    mutated = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) \
                or not _written(node.target):
            continue
        dst = node.args[0]
        if node.target is not torch.ops.aten.copy_.default or \
                not isinstance(dst, torch.fx.Node) or dst.op != "placeholder":
            raise _Unsupported(f"{node.target} is left after functionalization")
        if placeholders.index(dst) in mutated or any(
                order[u] > order[node] for u in dst.users):
            raise _Unsupported(f"{dst.name} is read or written after its update")
        mutated.append(placeholders.index(dst))
    return sorted(mutated)


# -- trace, lower, cache ------------------------------------------------------------

def _trace(gm, names, flat, functional=False):
    """|gm| traced to ATen on fake tensors, parameters and buffers first;
    |functional|: under PyTorch's functionalization (no in-place op left
    but one copy_ into each mutated input)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    mode = FakeTensorMode()
    fakes = [mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x
             for x in flat]
    k = len(names)

    def run(*args):
        return torch.func.functional_call(gm, dict(zip(names, args[:k])), args[k:])

    if functional:
        run = functional_form(run)
    with mode:
        return make_fx(run, decomposition_table=_compile.decompositions())(*fakes)


def _check_outputs(traced, outputs, training=False):
    """|outputs| (of graph |traced|) must be values of their own, except
    that an output may alias an input or another output the way replay
    makes it again (returned as {position: how}; of the outputs on one
    storage, the program returns one holding the others' values, wherever
    it stands). Without a backward an input may be returned as it is and no
    output may require grad; with one (|training|) an output may not be an
    input."""
    def key(n):
        return _storage(n.meta["val"])

    inputs = {}
    for i, n in enumerate(n for n in traced.graph.nodes if n.op == "placeholder"):
        if isinstance(n.meta.get("val"), torch.Tensor):
            inputs.setdefault(key(n), []).append((i, n))
    groups = {}  # storage -> [(position, node)] of the outputs on it
    for j, o in enumerate(outputs):
        if not isinstance(o, torch.fx.Node):
            continue
        if o.op == "placeholder":
            if training:
                raise _Unsupported(f"output {o.name} is an input")
            continue
        v = o.meta.get("val")
        if not isinstance(v, torch.Tensor):
            continue
        if v.requires_grad and not training:
            raise _Unsupported("an output requires grad")
        groups.setdefault(key(o), []).append((j, o))
    aliases = {}
    for k, group in groups.items():
        base = None if k in inputs else _base_output(group)
        for j, o in group:
            if base is None or j != base[0]:
                aliases[j] = _alias(o, inputs.get(k, ()), base)
    return aliases


def _base_output(group):
    """The output of |group| (outputs on one storage) that the program
    returns, the others being made from it: the first whose values hold all
    the others' (_inside: a contiguous one), else the first."""
    def holds(b, o):
        return b is o or _inside(o.meta["val"], b.meta["val"]) is not None

    for j, b in group:
        if all(holds(b, o) for _, o in group):
            return j, b
    return group[0]


def _inside(v, bv):
    """Offset of view |v| in contiguous |bv|'s values (of one storage and
    dtype), or None where it reaches outside them."""
    first = v.storage_offset() - bv.storage_offset()
    last = first + sum((n - 1) * st for n, st in zip(v.shape, v.stride()) if n > 0)
    if bv.dtype == v.dtype and bv.is_contiguous() and v.numel() > 0 and \
            first >= 0 and last < bv.numel():
        return first
    return None


def _alias(o, inputs, base):
    """How output |o| is made again from what it aliases: ("same", k) the
    output at k (the same node), ("input", i, size, stride, offset) a view
    of input i, ("output", k, size, stride, offset) a view of output k
    (which the program returns contiguous, offset 0). An input's offset is
    from the input's own: Dynamo's guards let a graph run on an input of
    the same sizes and strides at another offset (a row of a batch)."""
    v = o.meta["val"]
    view = (tuple(v.shape), tuple(v.stride()))
    for i, n in inputs:
        if n.meta["val"].dtype == v.dtype:
            return ("input", i, *view, v.storage_offset() - n.meta["val"].storage_offset())
    if base is not None and not inputs:
        k, b = base
        if b is o:
            return ("same", k)
        first = _inside(v, b.meta["val"])  # the view must lie inside what it is made from
        if first is not None:
            return ("output", k, *view, first)
    raise _Unsupported(f"output {o.name} is a view of an input or another output")


def replay(outs, aliases, inputs, grad=False):
    """Puts the aliasing outputs in |outs|, from the graph's |inputs| and
    the other outputs; views are made with autograd only where the
    graph made them so (|grad|: a training graph, whose program also
    returns a copy at each aliasing position, which this replaces)."""
    with contextlib.nullcontext() if grad else torch.no_grad():
        for j, how in aliases.items():
            if how[0] == "same":
                outs[j] = outs[how[1]]
            elif how[0] == "input":
                _, i, size, stride, offset = how
                x = inputs[i]
                outs[j] = x.as_strided(size, stride, x.storage_offset() + offset)
            else:
                _, k, size, stride, offset = how
                outs[j] = outs[k].as_strided(size, stride, offset)
    return outs


def _cache_key(gm, flat, state):
    """The Dynamo graph's code, its inputs' layouts and aliasing, and the
    global modes a trace reads; None where the graph holds constants the
    code does not show."""
    ids = {id(t) for t in state}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            v = _attr(gm, node.target)
            if isinstance(v, torch.Tensor) and id(v) not in ids:
                return None
    h = hashlib.sha256(gm.code.encode())
    storages = {}
    for x in flat:
        if isinstance(x, torch.Tensor):
            alias = storages.setdefault(x.untyped_storage()._cdata, len(storages))
            h.update(repr((_layout(x), x.requires_grad, alias)).encode())
        else:
            h.update(repr(("int", x)).encode())
    modes = [torch.is_grad_enabled(), torch.get_default_dtype(),
             torch.are_deterministic_algorithms_enabled()]
    for dev in ("tpu", "cpu"):
        modes += [torch.is_autocast_enabled(dev), torch.get_autocast_dtype(dev)]
    h.update(repr(modes).encode())
    return h.hexdigest()


def _cache_folder(key):
    """The folder of |key|'s entries: more than one where a custom op's
    function differs between processes (an entry whose kernels this process
    traces otherwise does not load)."""
    from . import _compile_cache

    root = _compile_cache.cache_root()
    if root is None or key is None:
        return None
    return os.path.join(root, "direct", key)


def _saved(code):
    return (code.name, code.tape, code.layout, code.baked)


def _revived(saved):
    from ._compile_cache import TpuOutputCode

    name, tape, layout, baked = saved
    tape.check_kernels()
    return TpuOutputCode(name, tape, layout, baked, True)


def _load(folder):
    """A cached entry of |folder|: ("inference", code, mutated, aliases)
    or ("training", plan), or None."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    for entry in names:
        if not entry.endswith(".pkl"):
            continue
        path = os.path.join(folder, entry)
        try:
            with open(path, "rb") as f:
                kind, *rest = pickle.load(f)
            if kind not in ("inference", "training"):
                raise ValueError(kind)
        except Exception:  # damaged: a miss, and gone
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        try:
            if kind == "inference":
                code, mutated = _revived(rest[0]), rest[1]
                aliases = rest[2] if len(rest) > 2 else {}
                code.load_start()
                return kind, code, mutated, aliases
            fields, fw, bw = rest
            plan = _compile_joint.Plan(_revived(fw), _revived(bw), **fields)
            plan.forward.load_start()
            plan.backward.load_start()
        except Exception:  # made with another function of a custom op: a miss
            continue
        return kind, plan
    return None


def _store(folder, entry):
    kind = entry[0]
    try:
        if kind == "inference":
            data = pickle.dumps((kind, _saved(entry[1]), entry[2], entry[3]))
        else:
            plan = entry[1]
            fields = {f: getattr(plan, f) for f in
                      ("n_outputs", "differentiable", "grad_inputs", "backward_inputs",
                       "aliases")}
            data = pickle.dumps((kind, fields, _saved(plan.forward), _saved(plan.backward)))
    except Exception:  # a constant that does not pickle: the graph is not cached
        return
    path = os.path.join(folder, hashlib.sha256(data).hexdigest()[:24] + ".pkl")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # whole entries only: a reader never sees a partial one
        _compile._count("cache_stores")
    except OSError:
        pass
    finally:  # an interrupted or failed write leaves nothing behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def compile_graph(gm, example_inputs):
    """A callable running |gm| as one program, or None where the graph
    needs AOTAutograd (see the module's docstring)."""
    global last_fallback
    if not enabled():
        return None
    try:
        return _direct(gm, example_inputs)
    except Exception as e:  # whatever fails here, AOTAutograd gets the graph
        _compile._count("direct_fallbacks")
        last_fallback = f"{type(e).__name__}: {e}"
        fallback_reasons[re.sub(r"\b[a-z_]+_\d+\b", "<node>", last_fallback)[:200]] += 1
        return None


def _direct(gm, example_inputs):
    params = dict(gm.named_parameters())
    buffers = dict(gm.named_buffers())
    names = [*params, *buffers]
    state = [*params.values(), *buffers.values()]
    flat = state + list(example_inputs)
    kind = _candidate(gm, flat)
    if not kind:
        return None
    t0 = time.perf_counter()
    folder = _cache_folder(_cache_key(gm, flat, state))
    # (a load counts as a cache load)
    entry = _load(folder) if folder is not None else None
    if entry is None:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():
            entry = _trace_training(gm, names, flat, t0) if kind == "training" else \
                _trace_inference(gm, names, flat, t0)
        if folder is not None:
            _store(folder, entry)
    _compile._count("direct_graphs")
    if kind == "training":
        _compile._count("direct_training_graphs")
    _compile._add_seconds("seconds", time.perf_counter() - t0)
    if kind == "training":
        return _compile_joint.runner(entry[1], state)
    _, code, mutated, aliases = entry

    def run(*args):
        inputs = [*state, *args]
        written = [inputs[i] for i in mutated]
        kept = list(inputs) if aliases else None
        outs = code(inputs)  # (empties |inputs|: the boxed convention)
        # As an in-place op would: autograd then refuses a backward through a
        # value saved before this update.
        if written:
            torch.autograd.graph.increment_version(written)
        return replay(outs, aliases, kept) if aliases else outs

    return run


def _functional_where_needed(trace, *args):
    """trace(*args, functional=False), or where a view aliases a mutated
    tensor, the trace again under PyTorch's functionalization."""
    try:
        return trace(*args, functional=False)
    except _ViewsMutated:
        return trace(*args, functional=True)


def _trace_inference(gm, names, flat, t0):
    return _functional_where_needed(_trace_inference_as, gm, names, flat, t0)


def _trace_inference_as(gm, names, flat, t0, functional):
    traced = _trace(gm, names, flat, functional)
    if _compile.draws_random(traced):
        raise _Unsupported("draws random numbers")
    out = next(n for n in traced.graph.nodes if n.op == "output")
    outputs = list(torch.fx.node.map_aggregate(out.args[0], lambda a: a) or ())
    aliases = _check_outputs(traced, outputs)
    if aliases:  # made at run time from what they alias, not by the program
        out.args = ([None if j in aliases else o for j, o in enumerate(outputs)],)
    mutated = written_inputs(traced) if functional else functionalize(traced)
    # The trace and rewrite (in place of AOTAutograd's passes), before the
    # lowering and XLA.
    _compile._add_seconds("direct_trace_seconds", time.perf_counter() - t0)
    name = f"compiled_inference_{len(list(gm.graph.nodes))}nodes"
    return "inference", _compile._Builder(traced, flat, name).build(), mutated, aliases


def _joint(gm, names, flat, differentiable, functional):
    joint, joint_inputs, grad_inputs, n_outputs = _compile_joint.trace(
        gm, names, flat, differentiable, functional)
    if _compile.draws_random(joint):
        raise _Unsupported("draws random numbers")
    out = next(n for n in joint.graph.nodes if n.op == "output")
    aliases = _check_outputs(joint, out.args[0][:n_outputs], training=True)
    if written_inputs(joint) if functional else functionalize(joint):
        raise _Unsupported("updates an input")
    return joint, joint_inputs, grad_inputs, n_outputs, aliases


def _trace_training(gm, names, flat, t0):
    differentiable = _compile_joint.differentiable_outputs(gm)
    joint, joint_inputs, grad_inputs, n_outputs, aliases = _functional_where_needed(
        _joint, gm, names, flat, differentiable)
    plan = _compile_joint.split(joint, joint_inputs, n_outputs, differentiable, grad_inputs, t0)
    plan.aliases = aliases
    return "training", plan
