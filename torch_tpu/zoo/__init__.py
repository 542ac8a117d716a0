"""Hugging Face model zoo on ``tpu`` against the CPU.

    python -m torch_tpu.zoo                          # every architecture (long)
    python -m torch_tpu.zoo --fast                   # the CI slice
    python -m torch_tpu.zoo --archs LlamaForCausalLM,GPT2LMHeadModel -v
    python -m torch_tpu.zoo --markdown docs/zoo.md   # write the report
    python -m torch_tpu.zoo.moe                      # MoE families over routing settings
    python -m torch_tpu.zoo --diffusers ...          # Diffusers' models (torch_tpu.zoo.diffusion)

The architectures are the model classes in Transformers' auto mappings for base
models and the task heads listed in ``TASKS``. For each one the harness builds
the model type's default config shrunk to a few small layers (``shrink``),
creates the model with random weights (seeded; matrices initialised to a
constant are redrawn, see ``_unflatten_constant_weights``), makes inputs from the forward
signature, runs forward on the CPU, copies the same model to ``tpu`` and runs
it on the same inputs. LM heads (causal, masked, seq2seq) also run a backward
pass of their loss and compare every parameter's gradient. Statuses:

* ``match``: every output tensor is within tolerance of the CPU (or, where
  the CPU's float32 result is itself off, of the CPU's float64 result: the
  record then carries a ``note``). A model that samples inside forward (a
  second CPU run under another seed differs: MAE masking, vocoder noise) is
  compared on shapes and dtypes only and marked ``random``; the seed is reset
  before each forward, so draws from the CPU generator do repeat. Under
  ``--compile``, a model that computes otherwise when compiled (it branches
  on ``is_torchdynamo_compiling()``; the CPU under
  ``torch.compile(backend="eager")`` differs from CPU eager too) is compared
  with that CPU result and marked ``dynamo_reference``;
* ``mismatch``: some output differs (value, shape or dtype);
* ``crash``: forward raised on ``tpu`` (the message is kept), or the worker
  died or hung on it;
* ``skip``: not counted: the harness could not build or run the architecture
  on the CPU (config constraints the generic shrink or inputs break, required
  inputs it cannot synthesise); the reason is kept.

Tolerance (float32): ``max|tpu - cpu| <= 1e-3 * max(max|cpu|, 1e-2)`` per
tensor. XLA fuses and reassociates reductions and uses its own vectorised
transcendental functions, so each op may differ by a few ulp; a two-layer
model chains a few hundred such ops and softmax/normalisation amplify
differences, which puts honest results around 1e-6..1e-4 of the tensor's
scale. 1e-3 still catches every wrong-op defect (those are O(1)). Gradients
use the same bound, per parameter.

CPU fallbacks stay enabled (the zoo measures what users get) and every op that
fell back is counted per architecture from ``torch.tpu._get_cache_stats()``.
Workers run in subprocesses; a crash or a hang (``--timeout`` seconds on one
architecture) marks that architecture ``crash`` and the run goes on.
"""
from .harness import compare, main, report, run_arch, totals
from .models import architectures, build, build_level, fit_config, make_inputs
from .settings import (
    BATCH, DEC_SEQ, FAST_ARCHS, FFN, HEADS, HIDDEN, IMAGE, KV_HEADS, SEQ, TASKS, VOCAB,
)
from .configs import LEVELS, shrink

__all__ = [
    "BATCH", "DEC_SEQ", "FAST_ARCHS", "FFN", "HEADS", "HIDDEN", "IMAGE", "KV_HEADS", "LEVELS",
    "SEQ", "TASKS", "VOCAB", "architectures", "build", "build_level", "compare", "fit_config",
    "main", "make_inputs", "report", "run_arch", "shrink", "totals",
]
