"""Training graphs lowered without AOTAutograd: one joint trace, our own
autograd.Function.

For a Dynamo graph whose outputs need gradients, AOTAutograd runs a metadata
pass over the graph on fake tensors, hashes its own sources for a cache key,
then traces forward and backward together under functionalization. When the
graph mutates no input and draws no random numbers, none of that is needed:
the forward and ``torch.autograd.grad`` of its differentiable outputs are
traced once to ATen (``make_fx`` on fake tensors), the in-place ops of that
trace become values (``_compile_direct.functionalize``), and PyTorch's
default partition splits it into a forward that also returns what the
backward reads and a backward from those values and the outputs' gradients.
Each becomes one program; ``_Train`` runs them as an autograd.Function, the
saved values held by ``save_for_backward`` (so an in-place change of one
before the backward is refused, as in eager).

Everything else (input mutation, random draws, an output that is an input or
a view of one, any failure here) goes to AOTAutograd, as the caller decides.
"""
import dataclasses
import time

import torch

from . import _compile, _compile_direct


class Unsupported(Exception):
    pass


@dataclasses.dataclass
class Plan:
    """How the two programs' values map onto the graph's (picklable; the
    programs are TpuOutputCode)."""
    forward: object
    backward: object
    n_outputs: int  # the graph's outputs; the forward's later ones are saved
    differentiable: list  # positions of outputs with a gradient (tangents)
    grad_inputs: list  # input positions the backward returns gradients for
    backward_inputs: list  # ("saved", k) / ("tangent", j), in backward input order
    # Outputs made at run time as views of an input or another output
    # (_compile_direct.replay); the program returns a copy there, unused.
    aliases: dict = dataclasses.field(default_factory=dict)


class _Train(torch.autograd.Function):
    @staticmethod
    def forward(ctx, plan, *inputs):
        outs = plan.forward(list(inputs))
        user, saved = outs[:plan.n_outputs], outs[plan.n_outputs:]
        ctx.plan = plan
        ctx.n_inputs = len(inputs)
        ctx.save_for_backward(*saved)
        differentiable = set(plan.differentiable)
        fixed = [o for i, o in enumerate(user)
                 if i not in differentiable and isinstance(o, torch.Tensor)]
        if fixed:
            ctx.mark_non_differentiable(*fixed)
        return tuple(user)

    @staticmethod
    def backward(ctx, *grads):
        plan = ctx.plan
        saved = ctx.saved_tensors
        if torch.is_grad_enabled() and any(
                isinstance(t, torch.Tensor) and t.requires_grad for t in (*saved, *grads)):
            # (The program's gradients carry no autograd history of their own.)
            raise RuntimeError(
                "torch.compile(backend='tpu'): a backward with create_graph=True (double "
                "backward) through a compiled graph is not supported; compute the "
                "higher-order gradient outside torch.compile")
        tangents = [grads[i] for i in plan.differentiable]
        args = [saved[k] if kind == "saved" else tangents[k]
                for kind, k in plan.backward_inputs]
        outs = plan.backward(args)
        result = [None] * (1 + ctx.n_inputs)
        for pos, g in zip(plan.grad_inputs, outs):
            result[1 + pos] = g
        return tuple(result)


def differentiable_outputs(gm):
    """Positions of |gm|'s outputs that need a gradient (Dynamo's example
    values), or None where the outputs are not a flat list of values."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    vals = out.args[0]
    if not isinstance(vals, (tuple, list)):
        return None
    found = []
    for i, o in enumerate(vals):
        if isinstance(o, torch.fx.Node):
            v = o.meta.get("example_value")
            if isinstance(v, torch.Tensor) and v.requires_grad:
                found.append(i)
    return found


def trace(gm, names, flat, differentiable, functional=False):
    """The joint graph of |gm| on fake |flat| (parameters and buffers
    first, named |names|): placeholders primals_1.. then tangents_1.., outputs
    the graph's then the gradients of the inputs that require them;
    |functional|: traced under PyTorch's functionalization. Returns
    (joint, its fake inputs, grad_inputs positions, n_outputs)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx

    mode = FakeTensorMode()
    fakes = [mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x
             for x in flat]
    grad_inputs = [i for i, x in enumerate(fakes)
                   if isinstance(x, torch.Tensor) and x.requires_grad]
    out = next(n for n in gm.graph.nodes if n.op == "output")
    n_outputs = len(out.args[0])
    k = len(names)
    with mode:
        tangents = []
        for i in differentiable:
            v = out.args[0][i].meta["example_value"]
            tangents.append(torch.empty(tuple(v.shape), dtype=v.dtype, device=v.device))

    def joint(primals, tangents):
        outs = torch.func.functional_call(gm, dict(zip(names, primals[:k])), tuple(primals[k:]))
        outs = list(outs)
        if len(outs) != n_outputs or any(
                not (isinstance(outs[i], torch.Tensor) and outs[i].requires_grad)
                for i in differentiable):
            raise Unsupported("the trace's outputs differ from Dynamo's")
        # What exists now is the forward: the partition keeps it there and
        # saves what the backward reads, rather than recompute it.
        for node in get_proxy_mode().tracer.graph.nodes:
            if not node.name.startswith("tangents"):
                node.meta["partitioner_tag"] = "is_forward"
        grads = torch.autograd.grad([outs[i] for i in differentiable],
                                    [primals[i] for i in grad_inputs], tangents,
                                    allow_unused=True)
        return [*outs, *grads]

    if functional:
        functional_joint = _compile_direct.functional_form(joint)

        def traced_fn(primals, tangents):  # (placeholders are named after these)
            return functional_joint(primals, tangents)
    else:
        traced_fn = joint
    with mode, torch.enable_grad():
        traced = make_fx(traced_fn, decomposition_table=_compile.decompositions())(fakes, tangents)
    return traced, (fakes, tangents), grad_inputs, n_outputs


def split(joint, joint_inputs, n_outputs, differentiable, grad_inputs, t0):
    """Partitions |joint| and lowers both halves: a Plan. (Time from |t0|
    to the partition's end counts as the trace's.)"""
    fw, bw = _compile._partition(joint, joint_inputs, num_fwd_outputs=n_outputs)
    _compile._add_seconds("direct_trace_seconds", time.perf_counter() - t0)
    fw_out = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    saved = {o.name: k for k, o in enumerate(fw_out[n_outputs:])}
    tangent = {n.name: j for j, n in enumerate(
        n for n in joint.graph.nodes if n.op == "placeholder" and n.name.startswith("tangents"))}
    backward_inputs = []
    for n in bw.graph.nodes:
        if n.op != "placeholder":
            continue
        if n.name in tangent:
            backward_inputs.append(("tangent", tangent[n.name]))
        elif n.name in saved:
            backward_inputs.append(("saved", saved[n.name]))
        else:
            raise Unsupported(f"backward input {n.name} is neither saved nor a tangent")
    bw_out = next(n for n in bw.graph.nodes if n.op == "output").args[0]
    if len(bw_out) != len(grad_inputs):
        raise Unsupported("the backward's outputs are not the inputs' gradients")
    fw_in = [n.meta["val"] for n in fw.graph.nodes if n.op == "placeholder"]
    bw_in = [n.meta["val"] for n in bw.graph.nodes if n.op == "placeholder"]
    nodes = len(joint.graph.nodes)
    # Side by side, each on a thread of its own, and awaited by neither the
    # forward's first run nor the backward's: their launches wait for the
    # code, so Dynamo goes on tracing (the resume frames, the optimizer's
    # step) while XLA compiles; a compile that fails fails the results.
    forward = _compile._Builder(fw, fw_in, f"compiled_forward_{nodes}nodes").build(
        lazy=True, background=True).start()
    backward = _compile._Builder(bw, bw_in, f"compiled_backward_{nodes}nodes").build(
        lazy=True, background=True).start()
    return Plan(forward, backward, n_outputs, list(differentiable), list(grad_inputs),
                backward_inputs)


def runner(plan, state):
    def run(*args):
        outs = list(_Train.apply(plan, *state, *args))
        if not plan.aliases:
            return outs
        return _compile_direct.replay(outs, plan.aliases, [*state, *args], grad=True)

    return run
