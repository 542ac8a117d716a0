"""``python -m torch_tpu.info``: what the tpu device runs on.

``--check`` also runs a quick conformance probe of the plugin in use against
PyTorch's CPU (torch_tpu/selfcheck.py) and exits 1 naming each op that
disagrees."""
import os
import sys

import torch

import torch_tpu  # noqa: F401  (registers the device even with autoload off)
from torch_tpu import _C
from torch_tpu.mode import get_execution_mode


def report():
    lines = [f"torch {torch.__version__}", f"torch_tpu execution mode: {get_execution_mode()}"]
    if not torch.tpu.is_available():
        try:
            torch.tpu.init()
        except RuntimeError as e:
            lines.append(f"tpu unavailable: {e}")
        return lines, 1
    from torch_tpu import plugins

    info = _C._plugin_info()
    lines += [
        f"PJRT plugin: {info['path']}",
        f"plugin package: {plugins.describe(info['path'])}",
        f"plugin kind: {info['kind']}  platform: {info['platform_name']} {info['platform_version']}",
        "PJRT C API version: %d.%d" % info["api_version"],
        f"XLA version: {info['xla_version']}",
        "StableHLO versions: current %s, minimum %s" % (
            ".".join(map(str, info["stablehlo_current_version"])),
            ".".join(map(str, info["stablehlo_minimum_version"]))),
        f"devices: {torch.tpu.device_count()}",
    ]
    for i in range(torch.tpu.device_count()):
        free, total = torch.tpu.mem_get_info(i)
        lines.append(f"  tpu:{i}  {torch.tpu.get_device_name(i)}  memory {total / 2**30:.1f} GiB "
                     f"({free / 2**30:.1f} GiB free)")
    lines.append(f"native lowering rules: {len(_C._lowered_ops())}")
    lines.append(distributed_line())
    return lines, 0


def distributed_line():
    from torch_tpu import distributed

    d = distributed.state()
    if not d["available"]:
        return "distributed: unavailable (torch built without distributed support)"
    if not d["initialized"]:
        launcher = ""
        if "LOCAL_RANK" in os.environ:
            launcher = (f"; launched as local rank {os.environ['LOCAL_RANK']} of "
                        f"{os.environ.get('LOCAL_WORLD_SIZE', '?')}")
        return (f"distributed: backend tpu_dist {'registered' if d['registered'] else 'not registered'}"
                f" for tpu, no process group{launcher}")
    return (f"distributed: rank {d['rank']} of {d['world_size']}, backends {d['backend']},"
            f" {d.get('collectives', 0)} tpu_dist collectives so far")


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(prog="python -m torch_tpu.info", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="also compare a probe of ops with the CPU on the plugin in use")
    args = ap.parse_args(argv)
    lines, rc = report()
    print("\n".join(lines), flush=True)
    if args.check and rc == 0:
        from torch_tpu import selfcheck
        rc = selfcheck.main()
    return rc


if __name__ == "__main__":
    sys.exit(main())
