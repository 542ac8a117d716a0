"""DDP on tpu under Ray Train (tests/python/test_ray.py): a TorchTrainer with
2 local workers and the tpu_dist backend trains a small MLP on fixed data,
written as a CUDA user's Ray script with "cuda" made "tpu"
(docs/distributed.md, "Ray"). The reference runs (one process, the whole
batch) use the same model, data and loop from this file.

    python tests/python/distributed/ray_train.py OUT.json [--steps N]

runs the job on a local Ray instance (2 CPUs, no dashboard, every address
127.0.0.1) and writes to OUT.json what each worker saw (per-step losses,
final parameters, device, backend), Ray's result (the last reported metrics,
the checkpointed weights) and the times."""
import argparse
import json
import os
import shutil
import tempfile
import time

import torch
import torch.distributed as dist
from torch import nn

SEED = 0
BATCH = 64  # the global batch: each of the 2 workers trains on half of it
STEPS = 5


def make_model():
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def make_data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, 16, generator=g), torch.randint(0, 4, (BATCH,), generator=g)


def make_optimizer(params):
    return torch.optim.SGD(params, lr=0.5, momentum=0.9)


def flat(tensors):
    return torch.cat([t.detach().reshape(-1).cpu() for t in tensors]).tolist()


def train_one_process(device, steps=STEPS):
    """The reference: one process, the whole batch on |device|; returns
    (per-step losses, final parameters)."""
    model = make_model().to(device)
    opt = make_optimizer(model.parameters())
    x, y = (t.to(device) for t in make_data())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, flat(model.parameters())


def train_fn(config):
    """Each Ray worker: a CUDA user's loop with the device made "tpu"."""
    import ray.train
    import ray.train.torch
    from ray.train import Checkpoint

    import torch_tpu.distributed

    t0 = time.time()
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = torch.device("tpu")  # CUDA: ray.train.torch.get_device()
    model = ray.train.torch.prepare_model(make_model(), move_to_device=device)  # to tpu, DDP
    opt = make_optimizer(model.parameters())
    x, y = make_data()
    shard = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    x, y = x[shard].to(device), y[shard].to(device)
    losses, local = [], []
    for step in range(config["steps"]):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        # the global batch's loss: the mean over the workers' equal shards
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        local.append(loss.item())
        losses.append(mean.item())
        metrics = {"loss": losses[-1], "step": step + 1}
        if step + 1 < config["steps"]:
            ray.train.report(metrics)
        else:  # the last step: rank 0 checkpoints the weights, as a CUDA script does
            with tempfile.TemporaryDirectory() as d:
                if rank == 0:
                    torch.save(model.module.state_dict(), os.path.join(d, "model.pt"))
                ray.train.report(metrics, checkpoint=Checkpoint.from_directory(d) if rank == 0 else None)
    seen = {
        "rank": rank, "world_size": world, "local_rank": ctx.get_local_rank(),
        "losses": losses, "local_losses": local, "params": flat(model.module.parameters()),
        "param_device": str(next(model.parameters()).device),
        "wrapper": type(model).__name__,
        "backend": dist.get_backend(),
        "tpu_dist": torch_tpu.distributed.is_tpu_dist(),
        "collectives": torch_tpu.distributed.stats().get("collectives"),
        "fallbacks": dict(torch.tpu.fallback_counts()),
        "device_count": torch.tpu.device_count(),
        "ray_get_device": str(ray.train.torch.get_device()),
        "master_addr": os.environ.get("MASTER_ADDR"),
        "node_ip": ray.util.get_node_ip_address(),
        "seconds": time.time() - t0,
    }
    with open(f"{config['out']}.{rank}", "w") as f:
        json.dump(seen, f)


def run_ray(out, steps):
    # Local only: no usage report, no dashboard, and every address 127.0.0.1
    # (Ray's single-machine mode, its default on macOS and Windows; on Linux
    # Ray would otherwise advertise the machine's outward address). Read when
    # ray is imported; the workers inherit them.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths have a length limit
    try:
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                 _temp_dir=tmp, configure_logging=False)
        try:
            started = time.time()
            trainer = TorchTrainer(
                train_fn,
                train_loop_config={"steps": steps, "out": out},
                scaling_config=ScalingConfig(num_workers=2),  # CUDA: use_gpu=True
                torch_config=TorchConfig(backend="tpu_dist"),  # CUDA: backend="nccl"
                run_config=RunConfig(storage_path=os.path.join(tmp, "results"), name="ray_train"),
            )
            result = trainer.fit()
            fitted = time.time()
        finally:
            ray.shutdown()
        checkpoint = None
        if result.checkpoint is not None:
            with result.checkpoint.as_directory() as d:
                state = torch.load(os.path.join(d, "model.pt"), map_location="cpu")
            checkpoint = flat(state.values())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    workers = {}
    for r in range(2):
        path = f"{out}.{r}"
        if os.path.exists(path):
            with open(path) as f:
                workers[r] = json.load(f)
    summary = {"workers": workers, "metrics": dict(result.metrics or {}),
               "checkpoint": checkpoint,
               "error": repr(result.error) if result.error else None,
               "seconds": {"ray_init": started - t0, "fit": fitted - started,
                           "total": time.time() - t0}}
    with open(out, "w") as f:
        json.dump(summary, f)
    print("ray_train:", json.dumps({k: summary[k] for k in ("metrics", "error", "seconds")}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=STEPS)
    args = ap.parse_args()
    run_ray(os.path.abspath(args.out), args.steps)
