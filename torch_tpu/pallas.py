"""Custom JAX and Pallas kernels as PyTorch ops (``torch_tpu.pallas.jax_op``,
``@torch_tpu.pallas.custom_jax_kernel``); see torch_tpu.custom_ops."""
from .custom_ops import custom_jax_kernel, jax_op, pallas_interpret, vjp_backward

__all__ = ["jax_op", "custom_jax_kernel", "pallas_interpret", "vjp_backward"]
