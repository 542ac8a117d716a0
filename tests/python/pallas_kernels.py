"""Pallas kernels written as for a TPU, run through torch_tpu.jax_op: on
XLA:CPU in interpret mode (torch_tpu.pallas.pallas_interpret())."""
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from torch_tpu.pallas import pallas_interpret


def _matmul_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def tiled_matmul(x, y, bm: int = 32, bn: int = 32, bk: int = 32):
    """x [m, k] @ y [k, n] in (bm, bn) output tiles accumulated over bk."""
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        _matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        interpret=pallas_interpret())(x, y)


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, *, causal, block_k, scale):
    q = q_ref[...].astype(jnp.float32) * scale  # [block_q, d]
    block_q = q.shape[0]
    q_start = pl.program_id(1) * block_q

    def step(j, carry):
        m, l, acc = carry
        k = k_ref[pl.ds(j * block_k, block_k), :].astype(jnp.float32)
        v = v_ref[pl.ds(j * block_k, block_k), :].astype(jnp.float32)
        s = q @ k.T
        if causal:
            rows = q_start + jnp.arange(block_q)[:, None]
            cols = j * block_k + jnp.arange(block_k)[None, :]
            s = jnp.where(cols <= rows, s, -jnp.inf)
        m_new = jnp.maximum(m, s.max(axis=1))
        p = jnp.exp(s - m_new[:, None])
        alpha = jnp.exp(m - m_new)
        return m_new, l * alpha + p.sum(axis=1), acc * alpha[:, None] + p @ v

    d = q.shape[1]
    init = (jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32),
            jnp.zeros((block_q, d), jnp.float32))
    # Causal: key blocks past the query block's last row contribute nothing.
    n_blocks = k_ref.shape[0] // block_k
    if causal:
        n_blocks = jnp.minimum(n_blocks, (q_start + block_q + block_k - 1) // block_k)
    m, l, acc = jax.lax.fori_loop(0, n_blocks, step, init)
    o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)


def flash_attention(q, k, v, causal: bool = False, block_q: int = 64, block_k: int = 64):
    """softmax(q k^T / sqrt(d)) v over [batch, heads, seq, d], one query
    block per program, streaming key/value blocks with an online softmax."""
    b, h, s, d = q.shape
    sk = k.shape[2]
    fold = lambda t: t.reshape(b * h, t.shape[2], d)
    kernel = lambda q_ref, k_ref, v_ref, o_ref: _flash_kernel(
        q_ref, k_ref, v_ref, o_ref, causal=causal, block_k=block_k, scale=1.0 / math.sqrt(d))
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((b * h, s, d), q.dtype),
        grid=(b * h, s // block_q),
        in_specs=[pl.BlockSpec((None, block_q, d), lambda i, j: (i, j, 0)),
                  pl.BlockSpec((None, sk, d), lambda i, j: (i, 0, 0)),
                  pl.BlockSpec((None, sk, d), lambda i, j: (i, 0, 0))],
        out_specs=pl.BlockSpec((None, block_q, d), lambda i, j: (i, j, 0)),
        interpret=pallas_interpret())(fold(q), fold(k), fold(v))
    return out.reshape(b, h, s, d)
