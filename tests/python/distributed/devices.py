"""The process model as torchrun launches it: one device per process, with
CUDA's idioms (set_device(LOCAL_RANK), init_device_mesh before any tpu use,
torch.device("tpu", current_device()))."""
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from common import Report

report = Report()
local_rank = int(os.environ["LOCAL_RANK"])
order = sys.argv[1]  # "mesh-first" or "tensor-first"
if order == "tensor-first":
    warm = torch.ones(2, device="tpu")  # the device is used before any mesh
    report.values["initialized_before_mesh"] = torch.tpu.is_initialized()
else:
    report.values["initialized_before_mesh"] = torch.tpu.is_initialized()
    torch.tpu.set_device(local_rank)
mesh = init_device_mesh("tpu", (int(os.environ["WORLD_SIZE"]),))
rank = dist.get_rank()
report.values.update(
    device_count=torch.tpu.device_count(), current_device=torch.tpu.current_device(),
    accelerator=str(torch.accelerator.current_accelerator()),
    accelerator_count=torch.accelerator.device_count(), mesh_device_type=mesh.device_type,
    default_backend=dist.get_default_backend_for_device("tpu"),
    tpu_backend=type(dist.group.WORLD._get_backend(torch.device("tpu"))).__name__)


def mesh_collective():
    dev = torch.device("tpu", torch.tpu.current_device())
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t, group=mesh.get_group())
    assert t.device == dev
    assert t.cpu().tolist() == [float(sum(range(1, dist.get_world_size() + 1)))] * 3


report.check("collective on the mesh", mesh_collective)
import torch_tpu  # noqa: E402
from torch_tpu import info  # noqa: E402

report.values["info"] = info.distributed_line()
report.values["metrics"] = [line for line in torch_tpu.metrics_report().splitlines()
                            if line.startswith("tpu_dist:")][0]
report.write()
dist.destroy_process_group()
