"""Rank 1 dies mid-step; rank 0 must get an exception naming the collective
within the group's timeout, not hang or abort. Rank 1 dies once rank 0 is
about to enter the all_reduce, so the failure happens inside the collective
however slowly rank 0 got there."""
import datetime
import os
import time

import torch
import torch.distributed as dist

from common import Report

dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=20))
rank = dist.get_rank()
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
dev = torch.device("tpu", torch.tpu.current_device())
report = Report()
model = torch.nn.Linear(8, 8).to(dev)
store = dist.distributed_c10d._get_default_store()
for step in range(3):
    loss = model(torch.randn(4, 8, device=dev)).sum()
    loss.backward()
    if step == 1 and rank == 1:
        store.wait(["rank0_in_step1"])
        os._exit(17)  # dies without a word
    if step == 1:
        store.set("rank0_in_step1", "1")
    t0 = time.monotonic()
    try:
        for p in model.parameters():
            dist.all_reduce(p.grad)
    except RuntimeError as e:
        report.values["seconds"] = time.monotonic() - t0
        report.values["error"] = f"{type(e).__name__}: {e}"[:500]
        report.values["step"] = step
        break
report.write()
os._exit(0)
