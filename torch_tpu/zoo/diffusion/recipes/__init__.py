"""Recipes: for each Diffusers model class, a shrunk config and inputs.

A recipe is a function registered with ``@recipe("ClassName", ...)`` that
returns ``(config, inputs)``: the keyword arguments the class is built with
(random weights, seeded) and the keyword arguments of one forward call. It
may use ``randn``/``randint`` below, which draw from a seeded generator so the
CPU and tpu runs see the same numbers. Options:

* ``call``: ``call(model, **inputs)`` instead of ``model(**inputs)``, for
  classes whose useful entry point is not ``forward`` (a VAE's ``decode``);
* ``backward``: also compare every parameter's gradient of a loss on the
  outputs (the classes people train or fine-tune);
* ``fast``: part of the CI slice.

Each family lives in its own module; importing this package registers them
all.
"""
import importlib
import pkgutil

import torch

RECIPES = {}


class Recipe:
    def __init__(self, name, fn, call=None, backward=False, fast=False):
        self.name, self.fn, self.call = name, fn, call
        self.backward, self.fast = backward, fast


def recipe(name, call=None, backward=False, fast=False):
    def register(fn):
        if name in RECIPES:
            raise ValueError(f"two recipes for {name}")
        RECIPES[name] = Recipe(name, fn, call, backward, fast)
        return fn
    return register


_gen = torch.Generator()


def reseed(seed):
    _gen.manual_seed(seed)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=_gen, dtype=dtype)


def randint(high, *shape, low=0):
    return torch.randint(low, high, shape, generator=_gen)


def rand(*shape):
    return torch.rand(*shape, generator=_gen)


def timesteps(batch, high=1000):
    """Integer timesteps as schedulers hand them to a UNet."""
    return torch.randint(1, high, (batch,), generator=_gen)


def load_all():
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return RECIPES
