"""dist.set_timeout on tpu_dist groups (torch_tpu installs it where torch
lacks it): it reaches every backend of the group, so a collective that a
peer never joins fails after the new timeout, not the one the group was
made with."""
import datetime
import os
import time

import torch
import torch.distributed as dist

from common import Report, setup

rank, world, dev = setup()
report = Report()


def default_group():
    # group=None: the world's tpu_dist and its CPU Gloo; both still work
    dist.set_timeout(datetime.timedelta(minutes=5))
    t = torch.ones(2, device=dev)
    dist.all_reduce(t)
    c = torch.ones(2)
    dist.all_reduce(c)
    assert t.cpu().tolist() == c.tolist() == [float(world)] * 2


def outside_the_group():
    group = dist.new_group([0])
    if rank == 0:
        dist.set_timeout(datetime.timedelta(minutes=5), group)
        return
    try:
        dist.set_timeout(datetime.timedelta(minutes=5), group)
    except ValueError as e:
        assert "not in the group" in str(e), e
        return
    raise AssertionError("no ValueError on a rank outside the group")


def shortened(device_type):
    # Made with 120 s; set to 3 s. Rank 1 never joins.
    device = dev if device_type == "tpu" else torch.device("cpu")
    group = dist.new_group(list(range(world)), backend="cpu:gloo,tpu:tpu_dist",
                           timeout=datetime.timedelta(seconds=120))
    dist.set_timeout(datetime.timedelta(seconds=3), group)
    if rank == 0:
        t0 = time.monotonic()
        try:
            dist.all_reduce(torch.ones(2, device=device), group=group)
        except RuntimeError as e:
            report.values[f"{device_type}_seconds"] = time.monotonic() - t0
            assert "imed out" in str(e), str(e)
            return
        raise AssertionError("no timeout")
    time.sleep(8)  # alive, but never joins


report.check("default group", default_group)
report.check("rank outside the group", outside_the_group)
report.check("tpu collective times out after the new timeout", lambda: shortened("tpu"))
report.check("cpu collective times out after the new timeout", lambda: shortened("cpu"))
report.values["ours"] = dist.set_timeout.__module__ == "torch_tpu.distributed"
report.write()
# The timed-out groups are out of step: leave without tearing them down.
os._exit(0)
