"""Device memory is released when the last tensor or view of a storage dies,
and a training loop keeps device and host memory flat."""
import gc
import os

import pytest
import torch
from torch import nn


def rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_views_keep_storage_alive_until_last_dies():
    gc.collect()  # garbage of earlier tests must not be freed mid-test
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    x = torch.ones(512, 512, device="tpu")
    v = x[10:20]
    del x
    gc.collect()
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() >= base + 512 * 512 * 4
    assert torch.equal(v.cpu(), torch.ones(10, 512))
    del v
    gc.collect()
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() <= base + 4096


def run_training(steps, report_at):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, device="tpu")
    y = torch.randint(0, 10, (32,), device="tpu")
    out = {}
    for i in range(1, steps + 1):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if i in report_at:
            loss.item()
            torch.tpu.synchronize()
            gc.collect()
            out[i] = (torch.tpu.memory_allocated(), rss_bytes())
    return out


def test_training_loop_memory_flat_short():
    r = run_training(300, (100, 300))
    (dev100, rss100), (dev300, rss300) = r[100], r[300]
    assert dev300 == dev100, r
    assert rss300 - rss100 < 16 * 2**20, r


@pytest.mark.slow
def test_training_loop_memory_flat_1000_steps():
    r = run_training(1000, (100, 1000))
    (dev100, rss100), (dev1000, rss1000) = r[100], r[1000]
    print(f"\nmemory_allocated: step 100 {dev100} B, step 1000 {dev1000} B; "
          f"RSS: step 100 {rss100 / 2**20:.1f} MiB, step 1000 {rss1000 / 2**20:.1f} MiB")
    assert dev1000 == dev100, r
    assert rss1000 - rss100 < 16 * 2**20, r
