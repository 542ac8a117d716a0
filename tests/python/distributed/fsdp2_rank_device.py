"""FSDP2 set up as PyTorch's FSDP2 example does it: the device is
tpu:LOCAL_RANK, chosen through torch.accelerator, but never made the current
device (torch.accelerator.device_index(rank) outside a `with` changes
nothing); the process group comes from get_default_backend_for_device with
device_id; the model is built on the meta device, sharded per block and at
the root (optionally with bf16 parameters and explicit prefetching), then
materialised with to_empty(device=tpu:LOCAL_RANK). As on CUDA, DeviceMesh
makes LOCAL_RANK the current device because nothing used the device before
it, so FSDP2's buffers land beside the parameters.

Run twice: `save` trains 3 steps and checkpoints the model and optimizer;
`load` (a new run) restores them and trains 2 more steps. Every step's loss
(mean over the ranks) is compared with one process training the same model
on the whole batch on the CPU, and the restored parameters with the ones
the save phase had (exactly) and, in float32, with the one-process run's.

    fsdp2_rank_device.py save|load fp32|bf16 prefetch|no-prefetch sharded|full FOLDER
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict,
                                                     set_model_state_dict,
                                                     set_optimizer_state_dict)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from common import Report
from models import GPT, batches, loss_fn

phase, precision, prefetch, kind, folder = sys.argv[1:6]
report = Report()
local_rank = int(os.environ["LOCAL_RANK"])
SAVED_STEPS, MORE_STEPS, GLOBAL = 3, 2, 8
data = batches(SAVED_STEPS + MORE_STEPS, GLOBAL, seed=11)
steps = range(SAVED_STEPS) if phase == "save" else range(SAVED_STEPS, SAVED_STEPS + MORE_STEPS)


def reference():
    """One process, the whole batch, on the CPU: the losses of every step,
    and the parameters after the steps the save phase takes."""
    torch.manual_seed(0)
    model = GPT(layers=3)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses, saved = [], None
    for i, idx in enumerate(data):
        if i == SAVED_STEPS:
            saved = {k: v.clone() for k, v in model.state_dict().items()}
        loss = loss_fn(model, idx)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return init, saved, losses


ref_init, ref_saved, ref_losses = reference()

assert torch.accelerator.is_available() and torch.accelerator.device_count() >= 2
device = torch.device(torch.accelerator.current_accelerator().type, local_rank)
torch.accelerator.device_index(local_rank)  # as the example: outside a `with`
report.values["initialized_before_mesh"] = torch.tpu.is_initialized()
dist.init_process_group(backend=dist.get_default_backend_for_device(device), device_id=device)
rank, world = dist.get_rank(), dist.get_world_size()

with torch.device("meta"):
    model = GPT(layers=3)
mp = dict(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)) \
    if precision == "bf16" else {}
for block in model.blocks:
    fully_shard(block, **mp)
fully_shard(model, **mp)
report.values["current_device_after_mesh"] = torch.tpu.current_device()
if prefetch == "prefetch":
    blocks = list(model.blocks)
    for i, block in enumerate(blocks):
        if i + 1 < len(blocks):
            block.set_modules_to_forward_prefetch(blocks[i + 1:i + 3])
        if i > 0:
            block.set_modules_to_backward_prefetch(blocks[max(0, i - 2):i][::-1])

model_path = os.path.join(folder, "model.pt")
optim_path = os.path.join(folder, "optim.pt")
if phase == "save":
    model.to_empty(device=device)
    set_model_state_dict(model, ref_init, options=StateDictOptions(full_state_dict=True))
elif kind == "full":
    # the example's --dcp-api load: a full CPU dict from rank 0, onto the meta model
    full = torch.load(model_path, mmap=True, weights_only=True, map_location="cpu")
    set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True,
                                                               broadcast_from_rank0=True))
else:
    model.to_empty(device=device)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
if phase == "load":
    if kind == "full":
        full_optim = torch.load(optim_path, mmap=True, weights_only=True, map_location="cpu")
        set_optimizer_state_dict(model, opt, full_optim, options=StateDictOptions(
            full_state_dict=True, broadcast_from_rank0=True))
    else:
        state = {"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)}
        dcp.load(state, checkpoint_id=os.path.join(folder, "dcp"))
        model.load_state_dict(state["model"])
        set_optimizer_state_dict(model, opt, state["optim"])


def shards_on_the_rank_device():
    for name, p in model.named_parameters():
        local = p.to_local()
        assert local.device == device, (name, local.device, device)
        assert p.dtype == torch.float32, (name, p.dtype)


def full_parameters():
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    for k, v in full.items():
        assert v.device == device, (k, v.device)
    return {k: v.cpu() for k, v in full.items()}


def restored_parameters_equal_the_saved_ones():
    if phase == "save":
        return
    full = full_parameters()
    saved = torch.load(os.path.join(folder, "expected.pt"), weights_only=True)
    assert sorted(full) == sorted(saved) == sorted(ref_saved)
    for k, v in saved.items():
        torch.testing.assert_close(full[k], v, rtol=0, atol=0,
                                   msg=lambda m, k=k: f"{k} after reload: {m}")
    if precision == "fp32":  # and the one-process run's, to float32 tolerance
        for k, v in ref_saved.items():
            torch.testing.assert_close(full[k], v, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, k=k: f"{k} against one process: {m}")


def unsharded_parameters_on_the_rank_device():
    model.unshard()
    for name, p in model.named_parameters(recurse=False):
        assert p.device == device, (name, p.device, device)
        assert p.dtype == (torch.bfloat16 if precision == "bf16" else torch.float32), (name, p.dtype)
    model.reshard()


losses = []


def train():
    for i in steps:
        if prefetch == "prefetch":
            model.unshard()
        n = GLOBAL // world
        idx = data[i][rank * n:(rank + 1) * n].to(device)
        loss = loss_fn(model, idx)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        opt.zero_grad()
        mean = loss.detach().float().reshape(1)
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        assert mean.device == device
        losses.append(mean.item())
    tol = 5e-2 if precision == "bf16" else 1e-4
    want = [ref_losses[i] for i in steps]
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(want), rtol=tol, atol=tol)


def save():
    if phase != "save":
        return
    expected = full_parameters()
    if rank == 0:
        torch.save(expected, os.path.join(folder, "expected.pt"))
    if kind == "full":
        # the example's --dcp-api save: full dicts on the CPU, written by rank 0
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                    cpu_offload=True))
        full_optim = get_optimizer_state_dict(model, opt, options=StateDictOptions(
            full_state_dict=True, cpu_offload=True))
        if rank == 0:
            torch.save(full, model_path)
            torch.save(full_optim, optim_path)
    else:
        dcp.save({"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)},
                 checkpoint_id=os.path.join(folder, "dcp"))
    dist.barrier()


report.check("shards on the rank's device", shards_on_the_rank_device)
report.check("restored parameters equal the saved ones", restored_parameters_equal_the_saved_ones)
report.check("unsharded parameters on the rank's device", unsharded_parameters_on_the_rank_device)
report.check("losses match one process on the whole batch", train)
report.check("shards still on the rank's device", shards_on_the_rank_device)
report.check("checkpoint saved", save)
report.values["losses"] = losses
report.write()
dist.destroy_process_group()
