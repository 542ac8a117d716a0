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


def add_section_arguments(ap, json_default):
    """The options every section takes: --fast, --json, --markdown,
    --timeout, -v, and the hidden ones its worker subprocesses get
    (--worker, --start, --end, --result)."""
    import argparse
    ap.add_argument("--fast", action="store_true", help="the CI slice")
    ap.add_argument("--json", default=json_default)
    ap.add_argument("--markdown", default="", help="write the report here")
    ap.add_argument("--timeout", type=int, default=180, help="seconds without progress = hung")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--end", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)


def section_parser(prog, description, json_default):
    """An argument parser with --ops and the options every section takes."""
    import argparse
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--ops", default="", help="comma-separated OpInfo names")
    add_section_arguments(ap, json_default)
    return ap


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    section = next((a for a in argv if a in SECTIONS), None)
    if section is None:
        from . import ops
        return ops.main(argv)
    argv.remove(section)
    import importlib
    return importlib.import_module(f".{section[2:]}", __name__).main(argv)
