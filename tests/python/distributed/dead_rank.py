"""Rank 1 dies mid-step; rank 0 must get an exception naming the collective
within the group's timeout, not hang or abort."""
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
for step in range(3):
    loss = model(torch.randn(4, 8, device=dev)).sum()
    loss.backward()
    if step == 1 and rank == 1:
        os._exit(17)  # dies without a word
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
