"""Shared by the tpu_dist worker scripts (run under torchrun by
tests/python/test_distributed.py): setup, and a result file per rank."""
import json
import os
import traceback

import torch
import torch.distributed as dist


def setup(backend="cpu:gloo,tpu:tpu_dist"):
    """Initialises the default group; returns (rank, world size, this rank's tpu device)."""
    dist.init_process_group(backend)
    torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
    return dist.get_rank(), dist.get_world_size(), torch.device("tpu", torch.tpu.current_device())


class Report:
    """Collects named checks; write() leaves them where the test reads them."""

    def __init__(self):
        self.passed = []
        self.failed = {}
        self.values = {}

    def check(self, name, fn):
        try:
            fn()
            self.passed.append(name)
        except Exception as e:  # noqa: BLE001 (each case reports its own failure)
            self.failed[name] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"

    def write(self):
        path = os.environ["TPU_DIST_OUT"] + f".{dist.get_rank() if dist.is_initialized() else os.environ['RANK']}"
        with open(path, "w") as f:
            json.dump({"passed": self.passed, "failed": self.failed, "values": self.values}, f)
