"""python -m torch_tpu.zoo: see torch_tpu/zoo/__init__.py."""
import sys

from .harness import main

sys.exit(main())
