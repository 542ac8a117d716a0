"""Compiled graphs that call collectives.

Dynamo traces ``dist.all_reduce`` and its kind into ``_c10d_functional``
ops. The tpu backend cuts such a graph around them: the pieces between
collectives are compiled as usual, and the collectives run eagerly, in
graph order, through the process group (``tpu_dist``). So no executable
holds a collective (ranks cannot diverge inside one, and an executable
stays a one-device program), yet Dynamo captures the code around the
collectives as one graph instead of breaking it, and graphs for other
devices (CPU, CUDA) are left to their own backends untouched.
"""
import torch

_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd")


def is_collective(node):
    """Whether an FX node calls a functional collective (or waits for one):
    an op overload, or the packet Dynamo's graphs call."""
    t = node.target
    if node.op != "call_function":
        return False
    if isinstance(t, torch._ops.OpOverload):
        name = t.name()
    elif isinstance(t, torch._ops.OpOverloadPacket):
        name = t._qualified_op_name
    else:
        return False
    return name.split("::")[0] in _NAMESPACES


def has_collectives(gm):
    return any(is_collective(n) for n in gm.graph.nodes)


class _Piece(torch.nn.Module):
    """A stretch of the graph between collectives, compiled at its first call
    (with the tensors it is called with as the example inputs)."""

    def __init__(self, gm, compile_piece):
        super().__init__()
        # A backend's graph returns a tuple (AOTAutograd insists); a piece
        # with one result returns it bare.
        out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
        self._bare = not isinstance(out.args[0], (tuple, list))
        if self._bare:
            out.args = ((out.args[0],),)
            gm.recompile()
        self.gm = gm
        self._compile_piece = compile_piece
        self._compiled = None

    def forward(self, *args):
        if self._compiled is None:
            self._compiled = self._compile_piece(self.gm, list(args))
        out = self._compiled(*args)
        return out[0] if self._bare else out


def split_at_collectives(gm, compile_piece):
    """|gm| as a module that runs each run of consecutive collectives eagerly
    and each stretch between them through compile_piece(gm, example_inputs)."""
    from torch.fx.passes.split_module import split_module

    part, last, parts = 0, None, {}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        kind = is_collective(node)
        if kind != last:
            part += 1
            last = kind
        parts[node] = part
    split = split_module(gm, gm, lambda n: parts[n], keep_original_order=True)
    cuts = 0
    for name, sub in list(split.named_children()):
        if has_collectives(sub):
            cuts += 1
        else:
            setattr(split, name, _Piece(sub, compile_piece))
    return split, cuts
