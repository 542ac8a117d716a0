"""vLLM's unquantized fused MoE on tpu: the experts in PyTorch ops.

vLLM leaves an out-of-tree platform's MoE to the platform (its fused
kernels are CUDA or Triton). Every expert runs on every token as batched
matmuls, and a dense [tokens, experts] routing matrix (zero off the top-k)
combines them: static shapes, so the whole layer compiles into one program,
at num_experts / top_k times the FLOPs of a gathered dispatch.
"""
import torch
import torch.nn.functional as F
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.router import fused_topk_router
from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import (
    UnquantizedFusedMoEMethod)

_ACTIVATIONS = {MoEActivation.SILU: F.silu, MoEActivation.GELU: F.gelu}


@UnquantizedFusedMoEMethod.register_oot(name="UnquantizedFusedMoEMethod")
class TpuUnquantizedFusedMoEMethod(UnquantizedFusedMoEMethod):
    @property
    def is_monolithic(self):
        return False

    def forward_oot(self, layer, x, topk_weights, topk_ids, shared_experts=None,
                    shared_experts_input=None):
        if shared_experts is not None:
            raise NotImplementedError("tpu MoE: shared experts are not supported yet")
        if layer.expert_map is not None:
            raise NotImplementedError("tpu MoE: expert parallelism is not supported")
        act = _ACTIVATIONS.get(layer.activation)
        if act is None:
            raise NotImplementedError(f"tpu MoE: activation {layer.activation} is not supported")
        w13, w2 = layer.w13_weight, layer.w2_weight  # [E, 2I, H], [E, H, I]
        num_experts = w13.shape[0]
        route = torch.zeros(x.shape[0], num_experts, dtype=torch.float32, device=x.device)
        route.scatter_add_(1, topk_ids.to(torch.int64), topk_weights.float())
        if layer.apply_router_weight_on_input:
            x = x * route.sum(1, keepdim=True).to(x.dtype)
            route = (route > 0).float()
        h = torch.einsum("th,eih->eti", x, w13)  # [E, T, 2I]
        gate, up = h.chunk(2, dim=-1)
        y = torch.einsum("eti,ehi->eth", act(gate) * up, w2)  # [E, T, H]
        return torch.einsum("te,eth->th", route.to(y.dtype), y)


def _topk(scores, topk_weights, topk_indices, renormalize):
    w, i = scores.topk(topk_weights.shape[1], dim=-1)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    topk_weights.copy_(w)
    topk_indices.copy_(i)
    return topk_weights, topk_indices


def topk_softmax(topk_weights, topk_indices, token_expert_indices, gating_output,
                 renormalize=False):
    """The router's top-k of softmax(gating_output), as vLLM's CUDA op."""
    return _topk(gating_output.float().softmax(-1), topk_weights, topk_indices, renormalize)


def topk_sigmoid(topk_weights, topk_indices, token_expert_indices, gating_output,
                 renormalize=False):
    return _topk(gating_output.float().sigmoid(), topk_weights, topk_indices, renormalize)


# The router calls these by their module names (vllm._C ops inside).
fused_topk_router.vllm_topk_softmax = topk_softmax
fused_topk_router.vllm_topk_sigmoid = topk_sigmoid
