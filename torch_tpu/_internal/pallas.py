"""TorchTPU's spelling of the custom-kernel API: ``pallas.jax_op(name, fn)``."""
from ..custom_ops import custom_jax_kernel, jax_op, pallas_interpret, vjp_backward

__all__ = ["jax_op", "custom_jax_kernel", "pallas_interpret", "vjp_backward"]
