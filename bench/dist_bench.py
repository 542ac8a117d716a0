"""tpu_dist against Gloo on CPU tensors, 2 processes, in one run:

* all_reduce and all_gather of 1, 16 and 128 MB of float32: median seconds
  per call on tpu (through tpu_dist) and on CPU (through Gloo), and their
  ratio (target: <= 1.5x from 16 MB, where staging must not dominate);
* DDP and FSDP2 training steps of TinyGPT (bench/models.py): steps/s on
  tpu and on CPU with 2 processes, against the same step in 1 process, so
  the distributed layer's cost shows as (2-process tpu/CPU ratio) /
  (1-process tpu/CPU ratio) (target: >= 0.9).

    python bench/dist_bench.py [--sizes 1 16 128] [--reps 7] [--steps 3] [--batch 8]

It launches itself under torchrun for the 2-process parts; the 1-process
reference runs in the first process. Figures: docs/distributed.md."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_time  # noqa: E402
from models import TinyGPT, gpt_batch, gpt_loss  # noqa: E402


def collective_times(args, dev):
    import torch.distributed as dist

    world = dist.get_world_size()
    out = {}
    for mb in args.sizes:
        n = mb * 2**20 // 4
        for device in ("tpu", "cpu"):
            d = dev if device == "tpu" else torch.device("cpu")
            x = torch.randn(n, device=d)
            g = torch.empty(n * world, device=d)

            def all_reduce():
                dist.all_reduce(x)
                if d.type == "tpu":
                    torch.tpu.synchronize()

            def all_gather():
                dist.all_gather_into_tensor(g, x)
                if d.type == "tpu":
                    torch.tpu.synchronize()

            for name, fn in (("all_reduce", all_reduce), ("all_gather", all_gather)):
                dist.barrier()
                out[f"{name} {mb} MB {device}"] = median_time(fn, reps=args.reps, warmup=2)
    return out


def train_steps_per_s(device, wrap, args):
    """Steps/s of TinyGPT (forward, backward, SGD, loss.item()) on |device|,
    the model wrapped by |wrap| ("none", "ddp" or "fsdp")."""
    torch.manual_seed(0)
    model = TinyGPT().to(device)
    if wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model)
    elif wrap == "fsdp":
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        # without a mesh FSDP2 shards onto the accelerator: name the device
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for b in model.blocks:
            fully_shard(b, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = gpt_batch(args.batch, 128, 512, device)

    def window():
        for _ in range(args.steps):
            loss = gpt_loss(model, x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()

    if wrap != "none":
        import torch.distributed as dist

        dist.barrier()
    return args.steps / median_time(window, reps=args.reps, warmup=1)


def worker(args):
    import torch.distributed as dist

    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
    dev = torch.device("tpu", torch.tpu.current_device())
    res = collective_times(args, dev)
    for wrap in ("ddp", "fsdp"):
        for device in ("tpu", "cpu"):
            res[f"{wrap} {device} steps/s"] = train_steps_per_s(
                dev if device == "tpu" else torch.device("cpu"), wrap, args)
    if dist.get_rank() == 0:
        from torch_tpu import distributed

        res["tpu_dist stats"] = distributed.stats()
        with open(args.out, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 128])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    single = {f"{d} steps/s": train_steps_per_s(torch.device(d), "none", args)
              for d in ("tpu", "cpu")}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               os.path.abspath(__file__), "--worker", "--out", out, "--reps", str(args.reps),
               "--steps", str(args.steps), "--batch", str(args.batch), "--sizes",
               *map(str, args.sizes)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        with open(out) as f:
            res = json.load(f)
    print(f"\n2 processes, {time.perf_counter() - t0:.0f} s; medians of {args.reps} runs")
    print(f"{'collective':<22}{'tpu (tpu_dist)':>16}{'cpu (gloo)':>14}{'tpu/cpu':>10}")
    for mb in args.sizes:
        for name in ("all_reduce", "all_gather"):
            t, c = res[f"{name} {mb} MB tpu"], res[f"{name} {mb} MB cpu"]
            print(f"{name + f' {mb} MB':<22}{t * 1e3:>13.2f} ms{c * 1e3:>11.2f} ms{t / c:>9.2f}x")
    base = single["tpu steps/s"] / single["cpu steps/s"]
    print(f"\nTinyGPT, batch {args.batch} per process, steps/s   tpu      cpu   tpu/cpu  vs 1 process")
    print(f"{'1 process':<36}{single['tpu steps/s']:>7.2f}{single['cpu steps/s']:>9.2f}"
          f"{base:>9.2f}x")
    for wrap in ("ddp", "fsdp"):
        t, c = res[f"{wrap} tpu steps/s"], res[f"{wrap} cpu steps/s"]
        print(f"{wrap.upper() + ', 2 processes':<36}{t:>7.2f}{c:>9.2f}{t / c:>9.2f}x"
              f"{(t / c) / base:>10.2f}")
    print("\ntpu_dist on rank 0:", res["tpu_dist stats"])


if __name__ == "__main__":
    main()
