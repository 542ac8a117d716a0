"""A small accelerate training script, launched by `accelerate launch`: each
process trains on its own data; the prepared (DDP) model must end with the
same weights on every rank, on tpu."""
import os

import torch
from accelerate import Accelerator

acc = Accelerator()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
g = torch.Generator().manual_seed(10 + acc.process_index)
for _ in range(3):
    x = torch.randn(4, 8, generator=g).to(acc.device)
    loss = model(x).square().mean()
    acc.backward(loss)
    opt.step()
    opt.zero_grad()
w = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
ws = acc.gather(w[None])
result = {"device": str(acc.device), "processes": acc.num_processes,
          "distributed_type": str(acc.distributed_type),
          "same_weights": bool(torch.equal(ws[0].cpu(), ws[-1].cpu()))}
if acc.is_main_process:
    import json

    with open(os.environ["TPU_DIST_OUT"] + ".accelerate.json", "w") as f:
        json.dump(result, f)
