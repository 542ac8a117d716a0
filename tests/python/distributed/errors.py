"""Misuse of tpu_dist: each case must raise on every rank, name the op, the
shapes or dtypes and the ranks, and leave the group usable; nothing hangs."""
import datetime
import os
import time

import torch
import torch.distributed as dist

from common import Report, setup

rank, world, dev = setup("tpu_dist")
report = Report()


def raises(fn, *needles):
    def run():
        try:
            fn()
        except (RuntimeError, ValueError, TypeError) as e:
            msg = str(e)
            for n in needles:
                assert n in msg, f"{n!r} not in {msg!r}"
            return
        raise AssertionError("no error raised")
    return run


def healthy():
    t = torch.ones(2, device=dev)
    dist.all_reduce(t)
    assert t.cpu().tolist() == [float(world)] * 2


report.check("shape mismatch", raises(lambda: dist.all_reduce(torch.ones(3 + rank, device=dev)),
                                      "all_reduce", "different shapes", "rank 0: float32[3]",
                                      "rank 1: float32[4]"))
report.check("healthy after shape mismatch", healthy)
report.check("dtype mismatch", raises(
    lambda: dist.all_reduce(torch.ones(3, device=dev, dtype=torch.float32 if rank == 0 else torch.bfloat16)),
    "all_reduce", "different dtypes", "bfloat16"))
report.check("different collectives", raises(
    lambda: dist.all_reduce(torch.ones(4, device=dev)) if rank == 0 else
    dist.broadcast(torch.ones(4, device=dev), 0), "different collectives"))
report.check("different roots", raises(lambda: dist.broadcast(torch.ones(2, device=dev), rank),
                                       "broadcast", "different roots"))
report.check("different reduce ops", raises(
    lambda: dist.all_reduce(torch.ones(2, device=dev), op=dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX),
    "different reduce ops", "SUM", "MAX"))
report.check("gather shape mismatch", raises(
    lambda: dist.all_gather_into_tensor(torch.empty(2 * (2 + rank) * world, device=dev), torch.ones(2 * (2 + rank), device=dev)),
    "all_gather_into_tensor", "different shapes"))
report.check("bitwise op on float", raises(
    lambda: dist.all_reduce(torch.ones(2, device=dev), op=dist.ReduceOp.BAND), "BAND", "float32[2]"))
report.check("AVG on integers", raises(
    lambda: dist.all_reduce(torch.ones(2, device=dev, dtype=torch.int64), op=dist.ReduceOp.AVG), "AVG", "int64"))
report.check("bad output size", raises(
    lambda: dist.all_gather_into_tensor(torch.empty(3, device=dev), torch.ones(2, device=dev)),
    "all_gather_into_tensor", "float32[3]", "float32[2]"))
report.check("uneven splits that disagree", raises(
    lambda: dist.all_to_all_single(torch.empty(3, device=dev), torch.ones(3, device=dev),
                                   [1, 2], [2, 1] if rank == 0 else [1, 2]),
    "all_to_all_single", "rows to rank"))
report.check("splits that do not sum", raises(
    lambda: dist.all_to_all_single(torch.empty(4, device=dev), torch.ones(4, device=dev), [1, 1], [1, 1]),
    "split sizes sum to 2"))
report.check("tpu and cpu mixed", raises(
    lambda: dist.all_gather_into_tensor(torch.empty(2 * world), torch.ones(2, device=dev)),
    "mixed", "cpu"))
report.check("healthy after errors", healthy)


def timeout():
    # Rank 1 never joins: rank 0's collective must fail within the timeout.
    group = dist.new_group(list(range(world)), backend="tpu_dist", timeout=datetime.timedelta(seconds=3))
    if rank == 0:
        t0 = time.monotonic()
        try:
            dist.all_reduce(torch.ones(2, device=dev), group=group)
        except RuntimeError as e:
            report.values["timeout_seconds"] = time.monotonic() - t0
            report.values["timeout_message"] = str(e)[:300]
            assert time.monotonic() - t0 < 30
            assert "tpu_dist all_reduce" in str(e) and "imed out" in str(e), str(e)
            return
        raise AssertionError("no timeout")
    time.sleep(10)  # alive, but never joins


report.check("timeout", timeout)
report.write()
# After a timeout the group's transport is out of step: leave without
# tearing it down (as a CUDA job would after a NCCL timeout).
os._exit(0)
