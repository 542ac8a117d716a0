"""torch.compile with collectives on tpu: Dynamo captures code around a
collective as one graph; the tpu backend cuts it there, so the collective
runs eagerly through tpu_dist and no executable holds one; graphs on CPU
tensors keep their collectives for their own backend; a compiled DDP model
and compiled FSDP2 blocks train and match eager."""
import copy

import torch
import torch.distributed as dist
import torch_tpu._compile

from common import Report, setup
from models import GPT, batches, loss_fn

rank, world, dev = setup("tpu_dist")
report = Report()
TOL = dict(rtol=1e-4, atol=1e-5)


def my_rows(idx):
    n = idx.shape[0] // world
    return idx[rank * n:(rank + 1) * n]


def collectives_in_compiled_code():
    import torch._dynamo

    from torch_tpu._compile_collectives import _Piece, is_collective

    torch._dynamo.reset()
    graphs, compiled = [], []

    def count(gm, ex):  # the graphs Dynamo hands to a backend
        graphs.append(gm)
        from torch_tpu._compile import tpu_backend
        compiled.append(tpu_backend(gm, ex))
        return compiled[-1]

    @torch.compile(backend=count)
    def f(x):
        y = x * 2
        dist.all_reduce(y)
        if rank == 0:  # rank-dependent code around the collective
            y = y + 1
        g = torch.empty(world * 3, device=x.device)
        dist.all_gather_into_tensor(g, y)
        return g.sum() + y

    x = torch.full((3,), float(rank + 1), device=dev)
    before = torch_tpu._compile.stats()["compiled_collective_cuts"]
    out = f(x)
    again = f(x)  # the compiled pieces, run again
    y = x * 2 * 0 + 2 * sum(range(1, world + 1))
    ys = [y + (1 if r == 0 else 0) for r in range(world)]
    expect = torch.cat(ys).sum() + ys[rank]
    torch.testing.assert_close(out.cpu(), expect.cpu())
    torch.testing.assert_close(again.cpu(), expect.cpu())
    # one graph, with both collectives in it; cut around each, and none of
    # the compiled pieces holds one
    assert len(graphs) == 1, [g.graph for g in graphs]
    assert sum(is_collective(n) for n in graphs[0].graph.nodes) >= 2, graphs[0].graph
    assert torch_tpu._compile.stats()["compiled_collective_cuts"] - before >= 2
    pieces = [m for m in compiled[0].children() if isinstance(m, _Piece)]
    assert len(pieces) >= 2 and all(p._compiled is not None for p in pieces)
    for p in pieces:
        for n in p.gm.graph.nodes:
            assert "c10d" not in str(n.target), f"a collective inside an executable: {n.target}"
    report.values["graphs"] = len(graphs)


def cpu_graphs_keep_their_collectives():
    """Importing torch_tpu changes nothing for other devices' graphs: a
    collective on CPU tensors stays in the graph Dynamo captures."""
    import torch._dynamo

    torch._dynamo.reset()
    graphs = []

    def eager_backend(gm, ex):
        graphs.append(gm)
        return gm.forward

    @torch.compile(backend=eager_backend)
    def f(x):
        y = x + 1
        dist.all_reduce(y)
        return y * 2

    out = f(torch.ones(4))
    torch.testing.assert_close(out, torch.full((4,), 2.0 * (2 * world)))
    assert len(graphs) == 1 and any("c10d" in str(n.target) for n in graphs[0].graph.nodes), \
        [g.graph for g in graphs]


def train(model, data, steps_compiled):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for idx in data:
        loss = loss_fn(steps_compiled, my_rows(idx).to(dev))
        loss.backward()
        opt.step()
        opt.zero_grad()
        t = torch.tensor([loss.item()], device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(t.item())
    return losses


def compiled_ddp():
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    base = GPT().to(dev)
    data = batches(4, 4)
    eager = DDP(copy.deepcopy(base))
    compiled = DDP(copy.deepcopy(base))
    le = train(eager, data, eager)
    before = torch_tpu._compile.stats()["compiled_graphs"]
    lc = train(compiled, data, torch.compile(compiled, backend="tpu"))
    assert torch_tpu._compile.stats()["compiled_graphs"] > before  # it did compile
    torch.testing.assert_close(torch.tensor(lc), torch.tensor(le), **TOL)
    for p, q in zip(compiled.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), **TOL)


def compiled_fsdp():
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    base = GPT().to(dev)
    data = batches(4, 4)
    models = []
    for compile_blocks in (False, True):
        m = copy.deepcopy(base)
        for b in m.blocks:
            if compile_blocks:
                b.compile(backend="tpu")
            fully_shard(b)
        fully_shard(m)
        before = torch_tpu._compile.stats()["compiled_graphs"]
        models.append((m, train(m, data, m)))
        assert (torch_tpu._compile.stats()["compiled_graphs"] > before) == compile_blocks
    (eager, le), (compiled, lc) = models
    torch.testing.assert_close(torch.tensor(lc), torch.tensor(le), **TOL)
    for p, q in zip(compiled.parameters(), eager.parameters()):
        torch.testing.assert_close(p.full_tensor().cpu(), q.full_tensor().cpu(), **TOL)


report.check("collectives in compiled code", collectives_in_compiled_code)
report.check("CPU graphs keep their collectives", cpu_graphs_keep_their_collectives)
report.check("compiled DDP", compiled_ddp)
report.check("compiled FSDP2 blocks", compiled_fsdp)
report.write()
dist.destroy_process_group()
