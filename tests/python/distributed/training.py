"""Training on 2 processes against a 1-process reference with the same init
and the same global batch: DDP, FSDP2, DTensor, tensor parallel, 2-D
FSDP x TP and distributed checkpoint, on tpu through tpu_dist. Each rank
also trains the reference model itself, on its own device, so the losses
and parameters compare on the spot (float32 tolerance)."""
import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

from common import Report, setup
from models import GPT, batches, loss_fn

rank, world, dev = setup("tpu_dist")
report = Report()
STEPS = 5
GLOBAL = 4  # sequences per step, split over the ranks
TOL = dict(rtol=1e-4, atol=1e-5)


def reference(model, data, lr=0.05, accumulate=1):
    """The single-process run: the whole batch, plain SGD."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for i, idx in enumerate(data):
        loss = loss_fn(model, idx.to(dev)) / accumulate
        loss.backward()
        losses.append(loss.item() * accumulate)
        if (i + 1) % accumulate == 0:
            opt.step()
            opt.zero_grad()
    return model, losses


def my_rows(idx):
    n = idx.shape[0] // world
    return idx[rank * n:(rank + 1) * n]


def mean_over_ranks(x):
    t = torch.tensor([x], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return t.item()


def close(a, b, what, **tol):
    torch.testing.assert_close(a, b, **(tol or TOL), msg=lambda m: f"{what}: {m}")


def train_and_compare(model, data, ref, ref_losses, opt=None, split_batch=True):
    """Trains |model| on |data| (each rank its rows, unless |split_batch| is
    off) and checks losses and parameters against the reference run."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for idx in data:
        loss = loss_fn(model, (my_rows(idx) if split_batch else idx).to(dev))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(mean_over_ranks(loss.item()))
    close(torch.tensor(losses), torch.tensor(ref_losses), "losses")
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        p = p.full_tensor() if hasattr(p, "full_tensor") else p
        close(p.detach().cpu(), q.detach().cpu(), n)


def fresh_model(seed=0):
    torch.manual_seed(seed)
    return GPT().to(dev)


def ddp(find_unused, no_sync):
    from torch.nn.parallel import DistributedDataParallel as DDP

    base = fresh_model()
    if find_unused:  # a branch that never runs
        base.unused = nn.Linear(4, 4).to(dev)
    data = batches(STEPS * (2 if no_sync else 1), GLOBAL)
    ref, ref_losses = reference(base, data, accumulate=2 if no_sync else 1)
    model = DDP(copy.deepcopy(base), find_unused_parameters=find_unused)
    model._set_ddp_runtime_logging_sample_rate(1)  # DDP's timing stats every step
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for i, idx in enumerate(data):
        accumulate = no_sync and i % 2 == 0
        ctx = model.no_sync() if accumulate else __import__("contextlib").nullcontext()
        with ctx:
            loss = loss_fn(model, my_rows(idx).to(dev)) / (2 if no_sync else 1)
            loss.backward()
        losses.append(mean_over_ranks(loss.item() * (2 if no_sync else 1)))
        if not accumulate:
            opt.step()
            opt.zero_grad()
    close(torch.tensor(losses), torch.tensor(ref_losses), "losses")
    for (n, p), q in zip(model.module.named_parameters(), ref.parameters()):
        close(p.detach().cpu(), q.detach().cpu(), n)
    report.values.setdefault("ddp_losses", losses)
    # the reducer times tpu iterations as it does CPU and CUDA ones
    stats = model._get_ddp_logging_data()
    for k in ("avg_forward_compute_time", "avg_backward_compute_time", "avg_backward_comm_time"):
        assert stats.get(k, 0) > 0, (k, {k: v for k, v in stats.items() if "time" in k})


def ddp_buffers():
    from torch.nn.parallel import DistributedDataParallel as DDP

    base = fresh_model()
    base.register_buffer("marker", torch.full((3,), float(rank), device=dev))
    model = DDP(base, broadcast_buffers=True)
    assert model.module.marker.cpu().tolist() == [0.0] * 3  # rank 0's, from the start
    model.module.marker.fill_(10.0 + rank)
    loss_fn(model, my_rows(batches(1, GLOBAL)[0]).to(dev)).backward()  # forward broadcasts again
    assert model.module.marker.cpu().tolist() == [10.0] * 3


def fsdp(reshard, per_block=True):
    from torch.distributed.fsdp import fully_shard

    base = fresh_model()
    data = batches(STEPS, GLOBAL)
    ref, ref_losses = reference(base, data)
    model = copy.deepcopy(base)
    if per_block:
        for b in model.blocks:
            fully_shard(b, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    train_and_compare(model, data, ref, ref_losses)
    return model, ref


def fsdp_mixed_precision():
    """bf16 params and compute, fp32 gradient reduction: the same run as the
    reference with its weights rounded to bf16 for each forward."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    base = fresh_model()
    data = batches(STEPS, GLOBAL)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = copy.deepcopy(base)
    for b in model.blocks:
        fully_shard(b, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref = copy.deepcopy(base)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for idx in data:
        loss = loss_fn(model, my_rows(idx).to(dev))
        loss.backward()
        opt.step()
        opt.zero_grad()
        # reference: a bf16 copy computes, fp32 master weights take the step
        low = copy.deepcopy(ref).to(torch.bfloat16)
        ref_loss = loss_fn(low, idx.to(dev))
        ref_loss.backward()
        for p, q in zip(ref.parameters(), low.parameters()):
            p.grad = q.grad.float()
        ref_opt.step()
        ref_opt.zero_grad()
        close(torch.tensor(mean_over_ranks(loss.item())), torch.tensor(ref_loss.item()), "loss",
              rtol=2e-2, atol=2e-2)
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        assert p.dtype == torch.float32, (n, p.dtype)
        close(p.full_tensor().cpu(), q.detach().cpu(), n, rtol=2e-2, atol=2e-3)


def fsdp_state_dict():
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         set_model_state_dict)
    from torch.distributed.fsdp import fully_shard

    model, ref = fsdp(True)
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    for k, v in ref.state_dict().items():
        close(full[k].cpu(), v.cpu(), k)
    # a fresh sharded model takes the full dict, then the sharded one
    other = fresh_model(seed=1)
    for b in other.blocks:
        fully_shard(b)
    fully_shard(other)
    set_model_state_dict(other, full, options=StateDictOptions(full_state_dict=True))
    idx = batches(1, GLOBAL, seed=5)[0]
    close(loss_fn(other, my_rows(idx).to(dev)).cpu(), loss_fn(model, my_rows(idx).to(dev)).cpu(), "full dict")
    third = fresh_model(seed=2)
    for b in third.blocks:
        fully_shard(b)
    fully_shard(third)
    third.load_state_dict(model.state_dict())  # sharded (DTensor) dicts
    close(loss_fn(third, my_rows(idx).to(dev)).cpu(), loss_fn(model, my_rows(idx).to(dev)).cpu(), "sharded dict")


def dtensor():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("tpu", (world,))
    torch.manual_seed(3)
    full = torch.randn(6, 4)
    d = distribute_tensor(full.to(dev), mesh, [Shard(0)])
    assert d.to_local().shape == (6 // world, 4)
    close(d.to_local().cpu(), full[rank * 3:(rank + 1) * 3], "shard")
    close(d.full_tensor().cpu(), full, "full_tensor")
    close(d.redistribute(mesh, [Replicate()]).to_local().cpu(), full, "Shard->Replicate")
    s1 = d.redistribute(mesh, [Shard(1)])
    close(s1.to_local().cpu(), full[:, rank * 2:(rank + 1) * 2], "Shard(0)->Shard(1)")
    p2 = torch.distributed.tensor.DTensor.from_local(full.to(dev) * (rank + 1), mesh, [Partial()])
    close(p2.redistribute(mesh, [Shard(0)]).to_local().cpu(),
          (full * sum(range(1, world + 1)))[rank * 3:(rank + 1) * 3], "Partial->Shard")
    y = (d @ distribute_tensor(torch.eye(4).to(dev), mesh, [Replicate()])).full_tensor()
    close(y.cpu(), full, "matmul on DTensor")


def tensor_parallel(sequence_parallel):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    mesh = init_device_mesh("tpu", (world,))
    base = fresh_model()
    data = batches(STEPS, GLOBAL)
    ref, ref_losses = reference(base, data)
    model = copy.deepcopy(base)
    for b in model.blocks:
        plan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(),
                "attn.wv": ColwiseParallel(), "attn.wo": RowwiseParallel(),
                "w1": ColwiseParallel(), "w2": RowwiseParallel()}
        if sequence_parallel:
            plan.update({
                "norm1": SequenceParallel(), "norm2": SequenceParallel(),
                "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                "attn.wo": RowwiseParallel(output_layouts=Shard(1)),
                "w1": ColwiseParallel(input_layouts=Shard(1)),
                "w2": RowwiseParallel(output_layouts=Shard(1))})
        parallelize_module(b, mesh, plan)
    if sequence_parallel:
        parallelize_module(model, mesh, {
            "blocks.0": PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Shard(1),),
                                           use_local_output=True),
            "norm": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                                       use_local_output=True)})
    # DTensor and plain parameters side by side: the per-tensor step (the
    # foreach kernels refuse the mix, on CUDA as here).
    opt = torch.optim.SGD(model.parameters(), lr=0.05, foreach=False)
    # every rank sees the whole batch: TP splits the model, not the data
    train_and_compare(model, data, ref, ref_losses, opt=opt, split_batch=False)


def fsdp_tp_2d():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("tpu", (world, 1), mesh_dim_names=("dp", "tp"))
    base = fresh_model()
    data = batches(STEPS, GLOBAL)
    ref, ref_losses = reference(base, data)
    model = copy.deepcopy(base)
    for b in model.blocks:
        parallelize_module(b, mesh["tp"], {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
        fully_shard(b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    train_and_compare(model, data, ref, ref_losses)


def checkpoint():
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    model, _ = fsdp(True)
    path = os.environ["TPU_DIST_OUT"] + ".ckpt"
    dcp.save({"model": model.state_dict()}, checkpoint_id=path)
    other = fresh_model(seed=4)
    for b in other.blocks:
        fully_shard(b)
    fully_shard(other)
    state = {"model": other.state_dict()}
    dcp.load(state, checkpoint_id=path)
    other.load_state_dict(state["model"])
    for (n, p), (_, q) in zip(model.named_parameters(), other.named_parameters()):
        assert q.device.type == "tpu", (n, q.device)
        close(q.full_tensor().cpu(), p.full_tensor().cpu(), n)


CASES = {
    "ddp": lambda: ddp(False, False),
    "ddp find_unused_parameters": lambda: ddp(True, False),
    "ddp no_sync accumulation": lambda: ddp(False, True),
    "ddp buffers broadcast": ddp_buffers,
    "fsdp2 reshard_after_forward": lambda: fsdp(True),
    "fsdp2 keep unsharded": lambda: fsdp(False),
    "fsdp2 root only": lambda: fsdp(True, per_block=False),
    "fsdp2 mixed precision": fsdp_mixed_precision,
    "fsdp2 state_dict": fsdp_state_dict,
    "dtensor": dtensor,
    "tensor parallel": lambda: tensor_parallel(False),
    "tensor parallel + sequence parallel": lambda: tensor_parallel(True),
    "fsdp2 x tp 2-d": fsdp_tp_2d,
    "distributed checkpoint": checkpoint,
}
chosen = sys.argv[1:] or list(CASES)
for name in chosen:
    report.check(name, CASES[name])
report.write()
dist.destroy_process_group()
