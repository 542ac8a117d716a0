"""How ``tpu`` measures up against PyTorch's own test databases, each run on
``tpu`` and on the CPU and compared:

    python -m torch_tpu.coverage              # op_db: OpInfo samples (see ops.py)
    python -m torch_tpu.coverage --errors     # OpInfo error inputs: rejected as on the CPU
    python -m torch_tpu.coverage --modules    # module_db: nn modules forward and backward
    python -m torch_tpu.coverage --optims     # optim_db: optimizer configurations' steps

Each section takes ``--fast`` (the CI slice), ``--json`` and ``--markdown``;
``python -m torch_tpu.coverage --errors --help`` lists the rest.
"""
import sys

SECTIONS = ("--errors", "--modules", "--optims")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    section = next((a for a in argv if a in SECTIONS), None)
    if section is None:
        from . import ops
        return ops.main(argv)
    argv.remove(section)
    import importlib
    return importlib.import_module(f".{section[2:]}", __name__).main(argv)
