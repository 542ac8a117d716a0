"""FlexAttention (``torch.nn.attention.flex_attention``) on tpu.

PyTorch lets it run on a fixed list of devices only. On tpu it runs
PyTorch's own dense implementation (scores, the score and mask functions
vmapped over them, a safe softmax): in eager through the higher-order op's
composite kernel, and in compiled graphs by calling that implementation in
place of the op before AOTAutograd, so that forward and backward are plain
ATen ops lowered by the same rules as everything else. The result is the
math path's, with its memory (the whole score matrix), not a fused kernel's.
"""
import torch


def allow_tpu(fa):
    """Lets the device check of torch.nn.attention.flex_attention (|fa|)
    accept tpu tensors (backward included: the dense implementation has
    one)."""
    check = getattr(fa, "_validate_device", None)
    if check is None or getattr(check, "_tpu_wrapped", False):
        return

    def validate_device(query, key, value):
        if query.device.type != "tpu":
            check(query, key, value)

    validate_device._tpu_wrapped = True
    fa._validate_device = validate_device


def inline_dense(gm):
    """Calls the dense implementation (the op's composite kernel, same
    arguments) in place of every flex_attention op of Dynamo's graph |gm|;
    returns how many it replaced."""
    hop = getattr(torch.ops.higher_order, "flex_attention", None)
    if hop is None:
        return 0
    from torch._higher_order_ops.flex_attention import sdpa_dense

    n = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is hop:
            node.target = sdpa_dense
            n += 1
    if n:
        gm.recompile()
    return n
