"""Shape bucketing for compiled graphs: one executable for every size up to
a bound (``torch_tpu.mark_dynamic(t, dim, max=N)``), or, for sizes Dynamo
made dynamic after a change, one per power-of-two bucket of them.

The program is built at the bounds of its symbolic sizes and gets their
runtime values as s32 scalars; inputs are padded up to the bounds and
outputs sliced back. The valid part of every value is the box its symbolic
sizes describe (the first ``s0`` rows, ...); the padding beyond it may hold
anything, NaN included. Ops keep that invariant in one of three ways:

* ops that compute a position from the same positions of their inputs
  (pointwise ops, layer norm over static dims, lookups into static tables, factories,
  ``tril``, prefix scans, random draws) need nothing;
* ops that combine positions along a dynamic dimension (reductions, softmax,
  matrix products, losses, the backward of norms and embeddings) see those
  operands masked there first, with the op's identity (0 for sums and
  products, -inf for maxima and softmax, ``ignore_index`` for targets);
  ``mean`` divides by the runtime count; ``cat`` along one copies each
  operand in at the runtime end of the ones before; ``arange`` from a
  symbolic start adds the start at run time;
* layout ops are checked to keep the valid part a box: a reshape may merge
  or split a dynamic dimension only as the outermost dimension of its group,
  a slice along one must start at a fixed index, ``select`` must not index
  one.

Any other op touching a dynamic dimension cannot run padded: the graph is
then built per exact size instead (under a ``mark_dynamic`` bound with a
warning naming the op and its source line); never a result that read the
padding. Only a bound given with ``mark_dynamic`` makes one program for
every size up to it; the ranges Dynamo infers itself (a position table's
length) just cap the buckets.
"""
import collections
import operator
import os
import sys
import threading
import time
import warnings

import sympy
import torch
from torch._inductor.output_code import OutputCode

from . import _C
from ._compile import (TpuCompileError, _Builder, _add_seconds, _count, _flat_vals,
                       _partition, _rule_name, _schema_args, _where, decompositions,
                       draws_random)

aten = torch.ops.aten


def _expr(s):
    return s.node.expr if isinstance(s, torch.SymInt) else None


def _at(e, values):
    """Size expression |e| evaluated with {symbol: int} |values|."""
    return int(e.xreplace({k: sympy.Integer(v) for k, v in values.items()}))


def _grows(e):
    """Whether size expression |e| never shrinks as its symbols grow, so that
    at the bounds it is at least what it is at any smaller sizes (sums and
    products with non-negative factors, floor and ceiling divisions by
    positive constants, max, min). 8 - s0 does not: at a bucket above s0
    the program would be built with too few rows."""
    from torch.utils._sympy.functions import CeilDiv, FloorDiv, Max, Min

    if e.is_Number or e.is_Symbol:
        return True
    if isinstance(e, sympy.Add) or isinstance(e, (Max, Min, sympy.Max, sympy.Min)):
        return all(_grows(a) for a in e.args)
    if isinstance(e, sympy.Mul):
        return all((a.is_Number and a >= 0) or (not a.is_Number and _grows(a))
                   for a in e.args)
    if isinstance(e, (FloorDiv, CeilDiv)):
        num, den = e.args
        return den.is_Number and den > 0 and _grows(num)
    return False


def _op_key(op):
    """"exp", "add.Tensor": the op name, with the overload unless default."""
    return _rule_name(op).split("::")[1]


def user_bounds(gm):
    """{symbol: max} of the sizes marked with a max (``mark_dynamic``), read
    from the tensors Dynamo traced; other symbols' ranges are Dynamo's own
    inferences (a position table's length), not a request for one program."""
    bounds = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in placeholders:
        traced = node.meta.get("example_value")  # symbolic sizes
        try:
            real = node.meta["grapharg"].example
        except (KeyError, AttributeError, RuntimeError):
            continue
        for r in getattr(real, "_dynamo_dynamic_range", None) or ():
            if r.max is not None and isinstance(traced, torch.Tensor) and r.dim < traced.dim():
                e = _expr(traced.shape[r.dim])
                if e is not None and e.is_Symbol:
                    bounds[e] = int(r.max)
    return bounds


# Ops that compute each position from the same positions of their inputs,
# beyond those tagged pointwise.
_POSITIONWISE = frozenset("""
    _to_copy clone alias detach lift_fresh_copy tril triu cumsum embedding
    gather index_select native_layer_norm convolution
""".split()) | frozenset("""
    native_dropout native_dropout_backward bernoulli bernoulli.p bernoulli.Tensor uniform
    normal_functional normal.Tensor_float normal.float_Tensor normal.Tensor_Tensor
    random random.to random.from exponential
""".split())  # random draws: drawn at the bounds, every position independent
# Factories: sizes may be symbolic (the padding gets the same fill).
_FACTORIES = frozenset("""
    full zeros ones empty.memory_format scalar_tensor arange arange.start
    arange.start_step full_like zeros_like ones_like empty_like new_zeros
    new_ones new_full new_empty normal.float_float
""".split())
_LAYOUT = frozenset("""
    view _unsafe_view reshape permute transpose.int t unsqueeze squeeze
    squeeze.dim squeeze.dims expand slice.Tensor select.int cat split.Tensor
    split_with_sizes unbind.int
""".split())
# Reductions by their reduced dims (None or []: all) at argument 1.
_REDUCE_FILL = {"sum.dim_IntList": 0.0, "amax": "-inf", "amin": "inf",
                "logsumexp": "-inf", "mean.dim": 0.0, "all.dim": True, "all.dims": True,
                "any.dim": False, "any.dims": False, "prod.dim_int": 1.0}


def _fill(value, dtype):
    """The identity |value| ("-inf", "inf" or a number) in |dtype|."""
    if dtype == torch.bool:
        return value == "inf" if isinstance(value, str) else bool(value)
    if isinstance(value, str):
        if dtype.is_floating_point:
            return float(value)
        return torch.iinfo(dtype).min if value == "-inf" else torch.iinfo(dtype).max
    return value if dtype.is_floating_point else int(value)


def _dims(dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))
    return [d % max(rank, 1) for d in ([dims] if isinstance(dims, int) else dims)]


def _box_reshape_ok(src, dst, src_b, dst_b):
    """Whether a reshape keeps the valid part a box: within each group of
    dims whose sizes (at the bounds) multiply to the same number, only the
    outermost may be dynamic, on both sides (unit dims play no part)."""
    si = [d for d in range(len(src)) if src_b[d] != 1]
    di = [d for d in range(len(dst)) if dst_b[d] != 1]
    i = j = 0
    while i < len(si) or j < len(di):
        gi, gj, pi, pj = [], [], 1, 1
        while True:
            if i < len(si) and (pi <= pj or j == len(di)):
                gi.append(si[i])
                pi *= src_b[si[i]]
                i += 1
            elif j < len(di):
                gj.append(di[j])
                pj *= dst_b[di[j]]
                j += 1
            else:
                break
            if pi == pj:
                break
        for g, sizes in ((gi, src), (gj, dst)):
            if any(_expr(sizes[d]) is not None for d in g[1:]):
                return False
    return True


_N = sympy.Symbol("_N", integer=True, positive=True)


_RUNTIME_ASSERTS = (aten._assert_scalar.default, aten.sym_constrain_range.default,
                    aten.sym_constrain_range_for_size.default)


class _Val:
    """A program value made while lowering (not a graph node)."""

    def __init__(self, vid, dtype, shape):
        self.vid, self.dtype, self.shape = vid, dtype, list(shape)


class _SymArg:
    """A graph value that is a symbolic size (never lowered)."""

    def __init__(self, node):
        self.node = node


def size_sources(example_inputs):
    """The symbols of a graph's input sizes and where each one's runtime
    value comes from: {symbol: (input position, dim or None for an integer
    input, the symbol as a function of that size _N)}; a backward graph may
    only see sizes like 12*s0."""
    sources = {}

    def add(e, i, d):
        if e is None or len(e.free_symbols) != 1:
            return
        (sym,) = e.free_symbols
        if sym in sources and sources[sym][2] == _N:
            return
        inv = sympy.solve(sympy.Eq(e, _N), sym)
        if len(inv) == 1 and (sym not in sources or e.is_Symbol):
            sources[sym] = (i, d, inv[0])

    symbols = set()
    for i, x in enumerate(example_inputs):
        for d, s in (enumerate(x.shape) if isinstance(x, torch.Tensor) else [(None, x)]):
            e = _expr(s)
            if e is not None:
                symbols |= e.free_symbols
                add(e, i, d)
    return sorted(symbols, key=str), sources


def runtime_sizes(sources, args):
    """{symbol: int} of one call's arguments."""
    return {e: int(inv.xreplace({_N: sympy.Integer(
                args[i] if d is None else args[i].shape[d])}))
            for e, (i, d, inv) in sources.items()}


class PaddingRefused(TpuCompileError):
    """An op of the graph cannot run on padded (bucketed) sizes."""


class BucketBuilder(_Builder):
    """Builds the program of an AOT graph with symbolic sizes at |bounds|
    ({symbol: int}). |exact|: the bounds are the call's own sizes, so there
    is no padding to keep out and every op may run."""

    def __init__(self, gm, example_inputs, name, bounds, exact=False):
        self.gm, self.name, self.exact = gm, name, exact
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.symbols, self.sources = size_sources(example_inputs)
        missing = [e for e in self.symbols if e not in self.sources]
        if missing:
            raise TpuCompileError(f"{name}: no input carries the size {missing[0]}")
        self.bounds = {e: bounds[e] for e in self.symbols}
        self.baked = {}
        self.tensor_pos = [i for i, x in enumerate(example_inputs) if isinstance(x, torch.Tensor)]
        self.examples = [example_inputs[i] for i in self.tensor_pos]
        for i, x in enumerate(example_inputs):
            if not isinstance(x, torch.Tensor) and _expr(x) is None:
                self.baked[i] = x
        specs = [self._spec(example_inputs[i], f"{name} input {i}") for i in self.tensor_pos]
        specs += [(torch.int32, [])] * len(self.symbols)
        self.prog = _C.Program(specs, draws_random(gm))
        ids = self.prog.inputs()
        self.size_vals = {e: _Val(v, torch.int32, []) for e, v in
                          zip(self.symbols, ids[len(self.tensor_pos):])}
        self.constants = {self.placeholders[i]: v for i, v in self.baked.items()}
        self.env, self.input_index, self.extents, self.masked = {}, {}, {}, {}
        for k, i in enumerate(self.tensor_pos):
            self.env[self.placeholders[i]] = ids[k]
            self.input_index[self.placeholders[i]] = k
        for i, x in enumerate(example_inputs):
            if _expr(x) is not None:
                self.constants[self.placeholders[i]] = _SymArg(self.placeholders[i])

    # -- shapes at the bounds ----------------------------------------------

    def _bound_shape(self, v):
        return [_at(e, self.bounds) if (e := _expr(s)) is not None else s for s in v.shape]

    def _spec(self, v, what):
        """(dtype, shape at the bounds): the rules see static shapes."""
        if not isinstance(v, torch.Tensor):
            raise TpuCompileError(f"{what}: expected a tensor, got {type(v).__name__}")
        for s in v.shape:
            e = _expr(s)
            if e is not None and not e.free_symbols <= set(self.bounds):
                raise TpuCompileError(f"{what}: size {e} is not a bounded input size "
                                      f"(only sizes marked with a max can be bucketed)")
        return (v.dtype, self._bound_shape(v))

    def _standin(self, node, tensors):
        if node in self.constants:
            return self.constants[node]
        val = node.meta.get("val")
        vid = self.masked.get(node, self.env[node])
        t = torch.empty(self._spec(val, node.name)[1] if val is not None else (),
                        device="meta", dtype=val.dtype if val is not None else torch.float32)
        tensors.append((t, vid))
        return t

    def _arg(self, a, tensors, schema_type):
        if isinstance(a, torch.fx.Node) and isinstance(self.constants.get(a), _SymArg):
            a = a.meta["val"]
        if isinstance(a, torch.SymFloat):
            a = float(a.node.expr.xreplace({k: sympy.Integer(v) for k, v in self.bounds.items()}))
        elif isinstance(a, torch.SymInt):
            a = _at(_expr(a), self.bounds)
        return super()._arg(a, tensors, schema_type)

    @staticmethod
    def _dyn_dims(val):
        return [d for d, s in enumerate(val.shape) if _expr(s) is not None] \
            if isinstance(val, torch.Tensor) else []

    # -- emitting helper ops -------------------------------------------------

    def _emit(self, op, args, dtype, shape):
        """Lowers |op| on |args| (schema order, defaults filled in; _Val for
        program values) to one value of |dtype| and |shape|."""
        tensors = []

        def conv(a):
            if isinstance(a, _Val):
                t = torch.empty(a.shape, dtype=a.dtype, device="meta")
                tensors.append((t, a.vid))
                return t
            return a

        full = list(args) + [a.default_value for a in op._schema.arguments[len(args):]]
        ids = self.prog.lower(op._schema.name, op._overloadname, [conv(a) for a in full],
                              tensors, [(dtype, list(shape))])
        return _Val(ids[0], dtype, shape)

    def _extent(self, e):
        """The runtime value of size expression |e| as an s32 scalar."""
        if e in self.extents:
            return self.extents[e]
        if e.is_Symbol:
            v = self.size_vals[e]
        elif e.is_Integer:
            v = self._emit(aten.scalar_tensor.default, [int(e), torch.int32], torch.int32, [])
        elif isinstance(e, (sympy.Add, sympy.Mul)):
            const = [a for a in e.args if a.is_Integer]
            parts = [self._extent(a) for a in e.args if not a.is_Integer]
            tensor_op, scalar_op = (aten.add.Tensor, aten.add.Scalar) \
                if isinstance(e, sympy.Add) else (aten.mul.Tensor, aten.mul.Scalar)
            v = parts[0]
            for p in parts[1:]:
                v = self._emit(tensor_op, [v, p], torch.int32, [])
            for c in const:
                v = self._emit(scalar_op, [v, int(c)], torch.int32, [])
        else:
            raise PaddingRefused(f"{self.name}: the size {e} cannot be computed at run time")
        self.extents[e] = v
        return v

    def _mask(self, node, dims, fill):
        """Node |node|'s value with its padding along |dims| set to |fill|."""
        val = node.meta["val"]
        shape = self._bound_shape(val)
        v = _Val(self.masked.get(node, self.env[node]), val.dtype, shape)
        for d in dims:
            e = _expr(val.shape[d])
            if e is None:
                continue
            idx = self._emit(aten.arange.default, [shape[d], torch.int32], torch.int32,
                             [shape[d]])
            ones = [1] * len(shape)
            ones[d] = shape[d]
            idx = self._emit(aten.view.default, [idx, ones], torch.int32, ones)
            pad = self._emit(aten.ge.Tensor, [idx, self._extent(e)], torch.bool, ones)
            v = self._emit(aten.masked_fill.Scalar, [v, pad, _fill(fill, val.dtype)],
                           val.dtype, shape)
        self.masked[node] = v.vid

    # -- which ops may touch a dynamic dimension -----------------------------

    def _plan(self, node, key, args):
        """Checks |node| against the dynamic dims it touches; returns the
        operands to mask: [(arg index, dims, fill)]. Raises the reason why
        it cannot run on bucketed sizes."""
        val = lambda i: args[i].meta.get("val") if isinstance(args[i], torch.fx.Node) else None
        out = node.meta.get("val")

        def sym(a):
            if isinstance(a, torch.fx.Node):
                return isinstance(self.constants.get(a), _SymArg)
            if isinstance(a, (list, tuple)):
                return any(sym(x) for x in a)
            return isinstance(a, torch.SymInt)

        if key in _LAYOUT:
            return self._check_layout(key, args, val, out, sym)
        if key in _FACTORIES:
            if key == "arange.start_step" and sym(args[2]):
                raise _Refused("its step is a symbolic size")
            return []
        if sym(args):
            raise _Refused("it takes a symbolic size as an argument")
        if torch.Tag.pointwise in node.target.tags or key in _POSITIONWISE:
            if key == "native_layer_norm":
                x, k = val(0), len(args[1])
                if any(d >= x.dim() - k for d in self._dyn_dims(x)):
                    raise _Refused("it normalizes over a dynamic dimension")
            if key in ("embedding", "gather", "index_select") and self._dyn_dims(val(0)):
                raise _Refused("the tensor it reads from has a dynamic dimension")
            if key == "convolution" and any(d != 0 for d in self._dyn_dims(val(0))):
                raise _Refused("only the batch dimension of a convolution may be dynamic")
            return []
        if key in _REDUCE_FILL:
            return [(0, _dims(args[1], val(0).dim()), _REDUCE_FILL[key])]
        if key in ("sum", "mean", "all", "any", "prod"):
            fill = {"all": True, "any": False, "prod": 1.0}.get(key, 0.0)
            return [(0, list(range(val(0).dim())), fill)]
        if key in ("_softmax", "_log_softmax"):
            return [(0, _dims(args[1], val(0).dim()), "-inf")]
        if key == "_softmax_backward_data":
            d = _dims(args[2], val(0).dim())
            return [(0, d, 0.0), (1, d, 0.0)]
        if key == "_log_softmax_backward_data":
            return [(0, _dims(args[2], val(0).dim()), 0.0)]
        if key == "mm":
            return [(0, [1], 0.0), (1, [0], 0.0)]
        if key == "bmm":
            return [(0, [2], 0.0), (1, [1], 0.0)]
        if key == "addmm":
            return [(1, [1], 0.0), (2, [0], 0.0)]
        if key == "nll_loss_forward" and val(0).dim() == 2:
            return [(0, [0], 0.0), (1, [0], args[4])]
        if key == "nll_loss_backward" and val(1).dim() == 2:
            return [(1, [0], 0.0), (2, [0], args[5])]
        if key == "native_layer_norm_backward":
            x, k = val(1), len(args[2])
            lead = list(range(x.dim() - k))
            if any(d not in lead for d in self._dyn_dims(x)):
                raise _Refused("it normalizes over a dynamic dimension")
            return [(0, lead, 0.0), (1, lead, 0.0), (3, lead, 0.0), (4, lead, 0.0)]
        if key == "embedding_dense_backward":
            if args[4]:
                raise _Refused("scale_grad_by_freq counts the padding")
            return [(0, list(range(val(1).dim())), 0.0)]
        if key == "convolution_backward":
            if any(d != 0 for i in (0, 1) for d in self._dyn_dims(val(i))):
                raise _Refused("only the batch dimension of a convolution may be dynamic")
            return [(0, [0], 0.0), (1, [0], 0.0)]
        raise _Refused("its lowering is not verified to ignore the padding of a "
                       "dynamic dimension")

    def _check_layout(self, key, args, val, out, sym):
        x = val(0)
        if key in ("view", "_unsafe_view", "reshape"):
            if not _box_reshape_ok(x.shape, out.shape, self._bound_shape(x),
                                   self._bound_shape(out)):
                raise _Refused(f"it moves a dynamic dimension inside another one "
                               f"({list(x.shape)} -> {list(out.shape)}: the padding would "
                               f"land between valid elements)")
        elif key == "slice.Tensor":
            d = args[1] % x.dim()
            if d in self._dyn_dims(x) and (sym(args[2]) or (args[2] or 0) < 0 or args[4] != 1):
                raise _Refused("it slices a dynamic dimension from a symbolic or "
                               "negative start, or with a step")
        elif key == "select.int":
            if args[1] % x.dim() in self._dyn_dims(x):
                raise _Refused("it selects an index of a dynamic dimension")
        elif key in ("split.Tensor", "split_with_sizes", "unbind.int"):
            d = (args[2] if key != "unbind.int" else args[1]) % x.dim()
            if d in self._dyn_dims(x):
                raise _Refused("it splits a dynamic dimension")
        return []

    # -- lowering -----------------------------------------------------------

    def lower_node(self, node):
        op = node.target
        val = node.meta.get("val")
        if not self.exact:
            for v in _flat_vals(val) if isinstance(val, (tuple, list, torch.Tensor)) else [val]:
                sizes = v.shape if isinstance(v, torch.Tensor) else [v]
                for e in (_expr(x) for x in sizes if isinstance(x, torch.SymInt)):
                    if e is not None and not _grows(e):
                        raise PaddingRefused(f"size {e} of {node.name} shrinks as a size "
                                             f"grows, {_where(node)}")
        if isinstance(val, (torch.SymInt, torch.SymFloat, int, float)) and \
                not isinstance(val, bool) and op is not operator.getitem:
            self.constants[node] = _SymArg(node)  # size arithmetic, read by _arg
            return
        if isinstance(val, (torch.SymBool, bool)) or op in _RUNTIME_ASSERTS:
            # size tests and the asserts on them: Dynamo's guards hold them
            return
        # (symbolic decompositions of some ops use these spellings)
        if op is torch.ops.prims.convert_element_type.default:
            node.target = aten._to_copy.default
            node.kwargs = {"dtype": node.args[1]}
            node.args = node.args[:1]
            op = node.target
        elif op is aten.true_divide.Tensor:
            node.target = op = aten.div.Tensor
        if not isinstance(op, torch._ops.OpOverload):
            return super().lower_node(node)
        ins = [a.meta.get("val") for a in node.all_input_nodes]
        args = _schema_args(op, node)
        touched = any(self._dyn_dims(v) for v in ins + _flat_vals(val)) or any(
            isinstance(self.constants.get(a), _SymArg) for a in node.all_input_nodes)
        if not touched or self.exact:
            return super().lower_node(node)
        key = _op_key(op)
        try:
            plan = self._plan(node, key, args)
        except _Refused as e:
            raise PaddingRefused(
                f"{_rule_name(op)} cannot run on a bucketed (padded) size: {e}, "
                f"at\n{_where(node)}") from None
        self.masked = {}
        for i, dims, fill in plan:
            if isinstance(args[i], torch.fx.Node):
                self._mask(args[i], dims, fill)
        if key in ("mean.dim", "mean"):
            self._lower_mean(node, args)
        elif key == "cat" and args[1] % val.dim() in self._dyn_dims(val):
            self._lower_cat(node, args)
        elif key.startswith("arange.") and not self._size(args[0]).is_Integer:
            self._lower_arange(node, args)
        else:
            super().lower_node(node)
        self.masked = {}

    def _size(self, s):
        """A size (int, SymInt or a size node) as an expression."""
        if isinstance(s, torch.fx.Node):
            s = s.meta["val"]
        return _expr(s) if _expr(s) is not None else sympy.Integer(s)

    def _lower_cat(self, node, args):
        """cat along a dynamic dim: each operand (its padding too) is copied
        in at the runtime end of the ones before, over their padding."""
        out = node.meta["val"]
        d = args[1] % out.dim()
        shape = self._bound_shape(out)
        v = self._emit(aten.full.default, [shape, 0, out.dtype], out.dtype, shape)
        offset = sympy.Integer(0)
        for t in args[0]:
            tv = t.meta["val"]
            b = self._bound_shape(tv)[d] if tv.dim() == out.dim() else 0
            if b == 0:  # cat skips empty operands (legacy 1-d empties too)
                continue
            idx = self._emit(aten.arange.default, [b, torch.int32], torch.int32, [b])
            if offset != 0:
                idx = self._emit(aten.add.Tensor, [idx, self._extent(offset)], torch.int32, [b])
            src = _Val(self.env[t], tv.dtype, self._bound_shape(tv))
            v = self._emit(aten.index_copy.default, [v, d, idx, src], out.dtype, shape)
            offset += self._size(tv.shape[d])
        self.env[node] = v.vid

    def _lower_arange(self, node, args):
        """arange from a symbolic start: start + step * iota."""
        out = node.meta["val"]
        shape = self._bound_shape(out)
        step = args[2] if _op_key(node.target) == "arange.start_step" else 1
        base = self._emit(aten.arange.start_step, [0, shape[0] * step, step, out.dtype],
                          out.dtype, shape)
        self.env[node] = self._emit(aten.add.Tensor, [base, self._extent(self._size(args[0]))],
                                    out.dtype, shape).vid

    def _lower_mean(self, node, args):
        """mean = masked sum / runtime element count of the reduced dims."""
        x = args[0].meta["val"]
        dims = _dims(args[1] if len(args) > 2 else None, x.dim())
        keep = args[2] if len(args) > 2 else False
        dtype = args[-1]
        count = sympy.Integer(1)
        for d in dims:
            count *= _expr(x.shape[d]) if _expr(x.shape[d]) is not None else x.shape[d]
        out = node.meta["val"]
        shape = self._bound_shape(out)
        s = self._emit(aten.sum.dim_IntList,
                       [_Val(self.masked.get(args[0], self.env[args[0]]), x.dtype,
                             self._bound_shape(x)), dims, keep, dtype], out.dtype, shape)
        self.env[node] = self._emit(aten.div.Tensor, [s, self._extent(count)], out.dtype,
                                    shape).vid

    def build(self):
        outputs = self._lower_nodes()
        layout, fresh = [], 0
        for o in outputs:
            if not isinstance(o, torch.fx.Node):
                layout.append(("const", o, None))
            elif isinstance(self.constants.get(o), _SymArg):
                v = o.meta["val"]
                layout.append(("const", v, None) if isinstance(v, int)
                              else ("sym", _expr(v), None))
            elif o in self.constants:
                layout.append(("const", self.constants[o], None))
            elif o in self.input_index:
                layout.append(("input", self.tensor_pos[self.input_index[o]], None))
            else:
                val = o.meta.get("val")
                self.prog.add_output(self.env[o], -1, val.dtype)
                layout.append(("out_cpu" if val.device.type == "cpu" else "out", fresh,
                               [_expr(s) for s in val.shape]))
                fresh += 1
        # Inputs updated in place (running statistics): written back by the
        # program; a padded input is a copy, so those must be static.
        for target, src in self.mutations:
            val = target.meta["val"]
            if self._dyn_dims(val) and not self.exact:
                raise PaddingRefused(f"{self.name}: an input with a dynamic dimension is "
                                     f"updated in place")
            v = self.prog.convert(self.env[src], val.dtype, self._bound_shape(val))
            self.prog.add_output(v, self.input_index[target], val.dtype)
        t0 = time.perf_counter()
        if self.prog.compile(self.name):
            _add_seconds("xla_seconds", time.perf_counter() - t0)
        _count("programs")
        pad_to = [[_at(e, self.bounds) if (e := _expr(s)) is not None else None
                   for s in x.shape] for x in self.examples]
        return _runner(self.prog, layout, self.baked, self.tensor_pos, pad_to,
                       self.symbols, self.bounds)


class _Refused(Exception):
    pass


def _runner(prog, layout, baked, tensor_pos, pad_to, symbols, bounds):
    """run(args, values) runs a program compiled at the bounds on a call's
    arguments and sizes ({symbol: int}): pads each tensor input up to its
    bounds (pad_to[k][d]: the bound of dim d of tensor input k, or None),
    passes the sizes as s32 scalars, and slices outputs back."""

    def run(args, values):
        for i, v in baked.items():
            if args[i] != v:
                raise TpuCompileError(f"compiled graph input {i} was specialised to {v}, "
                                      f"got {args[i]}")
        for e, n in values.items():
            if n > bounds[e]:
                raise TpuCompileError(f"size {n} exceeds the bound {bounds[e]} of a "
                                      f"bucketed dimension ({e})")
        originals, inputs = [args[i] for i in tensor_pos], []
        for k, i in enumerate(tensor_pos):
            t = args[i]
            pad = []
            for d in reversed(range(t.dim())):
                pad += [0, pad_to[k][d] - t.shape[d] if pad_to[k][d] is not None else 0]
            inputs.append(torch.nn.functional.pad(t, pad) if any(pad) else t)
        device = next((t.device for t in inputs if t.device.type == "tpu"), None)
        inputs += [torch.tensor(values[e], dtype=torch.int32, device=device) for e in symbols]
        args.clear()
        outs = prog.run(inputs)
        res = []
        for kind, v, shape in layout:
            if kind in ("out", "out_cpu"):
                o = outs[v]
                for d, e in enumerate(shape):
                    if e is not None and _at(e, values) != o.shape[d]:
                        o = o.narrow(d, 0, _at(e, values))
                # contiguous, as the graph's own result would be: strides
                # of the padded layout would fail Dynamo's guards next call.
                # Not a view either: one made here, under AOTAutograd's
                # no_grad, could never be modified in place with grad on
                # (the padded buffer is no one else's).
                o = o.contiguous()
                res.append(o.detach() if kind == "out" else o.cpu())
            elif kind == "input":  # as given, not padded: outputs are at their sizes
                res.append(originals[tensor_pos.index(v)])
            elif kind == "sym":
                res.append(_at(v, values))
            else:
                res.append(v)
        return res

    return run


def bucket_of(n, upper):
    """The bucket of a size: the next power of two, at least 8, at most the
    symbol's upper bound."""
    b = 8
    while b < n:
        b *= 2
    return max(n, min(b, upper))


def _describe(x):
    """An example input as plain data: sizes and strides as expression text."""
    def text(v):
        e = _expr(v)
        return str(e) if e is not None else int(v)
    if isinstance(x, torch.Tensor):
        return ("tensor", x.dtype, [text(v) for v in x.shape], [text(v) for v in x.stride()],
                str(x.device))
    if _expr(x) is not None:
        return ("size", text(x))
    return ("value", x)


def _revive_examples(described, hints):
    """Fake example inputs, with fresh symbols named as in |hints| ({name:
    the size the graph was traced at}), for ``_describe``'s output."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv()
    syms = {n: env.create_symbol(h, ConstantSource(f"tpu_bucket_{n}"),
                                 dynamic_dim=DimDynamic.DYNAMIC)
            for n, h in hints.items()}
    at = {syms[n]: h for n, h in hints.items()}

    def size(v):
        if isinstance(v, int):
            return v
        e = sympy.sympify(v, locals=dict(syms))
        return env.create_symintnode(e, hint=int(e.xreplace(at)))

    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    out = []
    with mode:
        for d in described:
            if d[0] == "tensor":
                _, dtype, shape, stride, device = d
                out.append(torch.empty_strided([size(v) for v in shape],
                                               [size(v) for v in stride],
                                               dtype=dtype, device=device))
            else:
                out.append(size(d[1]) if d[0] == "size" else d[1])
    return out, mode, syms


class _Buckets(OutputCode):
    """Runs an AOT graph whose sizes change at run time: one program per
    bucket of its sizes (a size marked with a max: the max; any other: the
    next power of two), built at the first call that needs it, in an LRU
    cache. A graph with an op that cannot run padded gets one program per
    exact size instead (with a warning naming the op when a max was asked
    for).

    It pickles (AOTAutograd's bundled cache, torch._dynamo.aot_compile) as
    the graph's code and its inputs' symbolic sizes; a loaded one
    re-derives the graph's metadata by fake propagation at its first call
    and builds its programs anew (the executables come from the disk cache)."""

    def __init__(self, agm, examples, name, fixed):
        self.agm, self.examples, self.name = agm, examples, name
        self.symbols, self.sources = size_sources(examples)
        self.fixed = {e: b for e, b in fixed.items() if e in self.symbols}
        env = next((s.node.shape_env for x in examples
                    for s in (x.shape if isinstance(x, torch.Tensor) else [x])
                    if isinstance(s, torch.SymInt)), None)
        ups = {e: env.var_to_range[e].upper for e in self.symbols} if env else {}
        self.upper = {e: int(u) if getattr(u, "is_Integer", False) else 2**31 - 1
                      for e, u in ups.items()}
        self.hints = {e: int(env.backed_var_to_val[e]) if env and e in env.backed_var_to_val else 8
                      for e in self.symbols}
        # False once an op refused padding, or when bucketing is turned off
        # (TORCH_TPU_COMPILE_BUCKETS=0: one program per exact size)
        self.padded = os.environ.get("TORCH_TPU_COMPILE_BUCKETS", "1") != "0"
        self._live()

    def _live(self):
        self.cache = collections.OrderedDict()
        self.max = int(os.environ.get("TORCH_TPU_COMPILE_MAX_SHAPES", "8"))
        self.lock = threading.Lock()
        self._boxed_call = True

    def __getstate__(self):
        if self.agm is None:
            return self._saved
        by_name = lambda d: {str(e): v for e, v in d.items()}
        return {"name": self.name, "graph": self.agm.__reduce__(),
                "examples": [_describe(x) for x in self.examples],
                "hints": by_name(self.hints), "fixed": by_name(self.fixed),
                "upper": by_name(self.upper), "padded": self.padded}

    def __setstate__(self, state):
        self._saved, self.agm, self.name = state, None, state["name"]
        self.padded = state["padded"]
        self._live()

    def _revive(self):
        st = self._saved
        examples, mode, syms = _revive_examples(st["examples"], st["hints"])
        fn, args = st["graph"]
        gm = fn(*args)
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp
        FakeTensorProp(gm, mode).propagate_dont_convert_inputs(
            *[x for x in examples])
        self.examples = examples
        self.symbols, self.sources = size_sources(examples)
        self.fixed = {syms[n]: b for n, b in st["fixed"].items()}
        self.upper = {syms[n]: u for n, u in st["upper"].items()}
        self.hints = {syms[n]: h for n, h in st["hints"].items()}
        self.agm = gm

    def prepare_for_serialization(self):
        pass

    def post_compile(self, example_inputs, constants, graph_kwargs):
        pass

    def set_triton_bundle(self, triton_bundle):
        pass

    def __call__(self, args):
        if self.agm is None:
            with self.lock:
                if self.agm is None:
                    self._revive()
        values = runtime_sizes(self.sources, args)  # (the runner checks the bounds)
        bounds = {e: self.fixed.get(e) or bucket_of(values[e], self.upper[e])
                  for e in self.symbols} if self.padded else values
        key = tuple(bounds[e] for e in self.symbols)
        with self.lock:
            fn = self.cache.get(key)
            if fn is not None:
                self.cache.move_to_end(key)
        if fn is None:
            fn, key = self._build(bounds, values)
        return fn(args, values)

    def _build(self, bounds, values):
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        t0 = time.perf_counter()
        with unset_fake_temporarily():
            try:
                fn = BucketBuilder(self.agm, self.examples, self.name, bounds,
                                   exact=not self.padded).build()
            except TpuCompileError as e:
                # an op that cannot run padded, or sizes that do not hold
                # together at independent buckets: exact sizes always do
                if self.fixed:
                    warnings.warn(f"torch_tpu: {e}\nThis graph is compiled per exact size "
                                  f"instead of once at the bound.", stacklevel=2)
                elif os.environ.get("TORCH_TPU_LOG_COMPILES"):
                    print(f"[torch_tpu] {self.name}: per exact size, not bucketed: {e}",
                          file=sys.stderr)
                self.padded = False
                bounds = values
                fn = BucketBuilder(self.agm, self.examples, self.name, bounds,
                                   exact=True).build()
        key = tuple(bounds[e] for e in self.symbols)
        _add_seconds("seconds", time.perf_counter() - t0)
        with self.lock:
            if self.cache:
                _count("recompiles")
            _count("bucketed" if self.padded else "specializations")
            self.cache[key] = fn
            while len(self.cache) > self.max:
                self.cache.popitem(last=False)
        return fn, key


def bucketed_backend(gm, example_inputs, fixed):
    """AOTAutograd over |gm| with its graphs (forward, backward, inference)
    run per bucket of their sizes (_Buckets); |fixed|: {symbol: max} of the
    sizes marked with a max."""
    from torch._dynamo.backends.common import aot_autograd

    def compile_graph(agm, examples):
        name = f"compiled_bucketed_{len(list(agm.graph.nodes))}nodes"
        return _Buckets(agm, examples, name, fixed)

    return aot_autograd(fw_compiler=compile_graph, inference_compiler=compile_graph,
                        decompositions=decompositions(),
                        keep_inference_input_mutations=True,
                        partition_fn=_partition)(gm, example_inputs)
