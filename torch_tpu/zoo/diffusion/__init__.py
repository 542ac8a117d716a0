"""Diffusers model zoo on ``tpu`` against the CPU.

    python -m torch_tpu.zoo.diffusion                      # every model class
    python -m torch_tpu.zoo.diffusion --fast               # the CI slice
    python -m torch_tpu.zoo.diffusion --classes UNet2DModel,FluxTransformer2DModel -v
    python -m torch_tpu.zoo.diffusion --markdown docs/zoo_diffusers.md

The classes are every ``ModelMixin`` subclass Diffusers exports. Each has a
recipe (``recipes/``): a config shrunk to a few small blocks and the inputs
of one forward call. The harness builds the model with seeded random weights
(weights that start as one constant, such as zero convolutions, are redrawn so
the outputs mean something), runs it on the CPU, copies it to ``tpu`` and runs
it on the same inputs. Classes people train also compare every parameter's
gradient of a loss on the outputs. Statuses and tolerances are the
Transformers zoo's (``torch_tpu.zoo``): ``match``, ``mismatch``, ``crash``
(raised on tpu, died or hung), ``skip`` (the recipe does not run on the CPU:
not counted) and ``no recipe`` (listed, not counted). CPU fallbacks stay on
and are counted per class.
"""
from .harness import build, main, model_classes, report, run_class, totals

__all__ = ["build", "main", "model_classes", "report", "run_class", "totals"]
