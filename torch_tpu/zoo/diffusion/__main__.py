"""python -m torch_tpu.zoo.diffusion: see torch_tpu/zoo/diffusion/__init__.py."""
import sys

from .harness import main

sys.exit(main())
