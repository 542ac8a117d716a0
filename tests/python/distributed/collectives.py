"""Every c10d collective on tpu tensors through tpu_dist, against the same
collective on CPU tensors through Gloo in the same group. The host transport
is Gloo too, so the results must be equal exactly (PREMUL_SUM, which Gloo
lacks, is compared with the scaled SUM it means)."""
import datetime

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

from common import Report, setup

rank, world, dev = setup()
report = Report()
R = dist.ReduceOp
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool, torch.complex64]


def sample(shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 7, shape, generator=g).to(dtype)


def same(tpu, cpu):
    got = tpu.cpu()
    assert got.dtype == cpu.dtype and got.shape == cpu.shape, (got.dtype, got.shape, cpu.dtype, cpu.shape)
    assert torch.equal(got, cpu), f"tpu {got} != cpu {cpu}"


def layouts(shape, dtype, salt):
    """(name, cpu tensor, tpu tensor, tpu base): contiguous, a transposed
    view, a narrow window of a bigger buffer (FSDP's shape) and zero-size."""
    x = sample(shape, dtype, salt)
    yield "contiguous", x.clone(), x.to(dev), None
    base = sample((shape[1], shape[0]), dtype, salt)
    yield "transposed", base.t().clone(), None, base.to(dev)
    flat = sample((shape[0] * shape[1] + 5,), dtype, salt)
    yield "window", flat[3:3 + shape[0] * shape[1]].view(shape).clone(), None, flat.to(dev)
    yield "empty", sample((0, shape[1]), dtype, salt), sample((0, shape[1]), dtype, salt).to(dev), None


def view_of(name, base, shape):
    if name == "transposed":
        return base.t()
    return base[3:3 + shape[0] * shape[1]].view(shape)


def all_reduce_case(dtype, op, layout):
    shape = (3, 4)
    for name, cpu, tpu, base in layouts(shape, dtype, salt=7):
        if name != layout:
            continue
        if tpu is None:
            tpu = view_of(name, base, shape)
            before = base.cpu()
        dist.all_reduce(cpu, op=op)
        dist.all_reduce(tpu, op=op)
        same(tpu, cpu)
        if base is not None:  # the write landed in the base buffer, the rest kept
            expect = before.clone()
            view_of(name, expect, shape).copy_(cpu)
            same(base, expect)


INTEGRAL = {torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool}
for dtype in DTYPES:
    ops = [R.SUM, R.MIN, R.MAX, R.PRODUCT]
    if dtype in INTEGRAL:
        ops += [R.BAND, R.BOR, R.BXOR]
    else:
        ops += [R.AVG]
    if dtype.is_complex:  # c10d itself refuses PRODUCT, MIN and MAX on complex
        ops = [R.SUM, R.AVG]
    if dtype == torch.bool:
        ops = [R.SUM, R.MIN, R.MAX, R.BAND, R.BOR]
    for op in ops:
        report.check(f"all_reduce {dtype} {op}", lambda d=dtype, o=op: all_reduce_case(d, o, "contiguous"))
for layout in ["transposed", "window", "empty"]:
    for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
        report.check(f"all_reduce {dtype} {layout}",
                     lambda d=dtype, lay=layout: all_reduce_case(d, R.SUM, lay))


def premul(dtype, factor):
    x = sample((5,), dtype, 3)
    t = x.to(dev)
    f = factor if isinstance(factor, float) else torch.tensor(factor, dtype=dtype, device=dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(f))
    ref = x * float(factor)
    dist.all_reduce(ref)
    torch.testing.assert_close(t.cpu(), ref, rtol=0, atol=0) if dtype == torch.float32 else \
        torch.testing.assert_close(t.cpu(), ref)


for dtype in [torch.float32, torch.bfloat16]:
    report.check(f"all_reduce PREMUL_SUM {dtype} float", lambda d=dtype: premul(d, 0.5))
    report.check(f"all_reduce PREMUL_SUM {dtype} tensor", lambda d=dtype: premul(d, 0.25))


def broadcast(dtype, src):
    x = sample((2, 3), dtype, 11)
    t = x.to(dev)
    dist.broadcast(x, src)
    dist.broadcast(t, src)
    same(t, x)


def reduce(dtype, dst, op):
    x = sample((4,), dtype, 12)
    t = x.to(dev)
    dist.reduce(x, dst, op=op)
    dist.reduce(t, dst, op=op)
    if rank == dst:
        same(t, x)


def all_gather(dtype):
    x = sample((2, 3), dtype, 13)
    outs_c = [torch.empty_like(x) for _ in range(world)]
    outs_t = [torch.empty_like(x).to(dev) for _ in range(world)]
    dist.all_gather(outs_c, x)
    dist.all_gather(outs_t, x.to(dev))
    for a, b in zip(outs_t, outs_c):
        same(a, b)


def all_gather_single(dtype, window):
    x = sample((6,), dtype, 14)
    out_c = torch.empty(6 * world, dtype=dtype)
    dist.all_gather_into_tensor(out_c, x)
    if window:  # FSDP2: gather into a view of a bigger buffer
        buf = torch.zeros(6 * world + 4, dtype=dtype, device=dev)
        out_t = buf[2:2 + 6 * world]
    else:
        out_t = torch.empty(world, 6, dtype=dtype, device=dev)
    dist.all_gather_into_tensor(out_t, x.to(dev))
    same(out_t.reshape(-1), out_c)
    if window:
        assert not buf.cpu()[:2].any() and not buf.cpu()[-2:].any()


def all_gather_coalesced():
    xs = [sample((3,), torch.float32, 15), sample((2, 2), torch.bfloat16, 16)]
    # Gloo wants the gathered rows stacked; tpu_dist also takes a flat output (as NCCL does)
    outs_c = [torch.empty(world * x.shape[0], *x.shape[1:], dtype=x.dtype) for x in xs]
    for o, x in zip(outs_c, xs):
        dist.all_gather_into_tensor(o, x)
    for device in [None, dev]:  # the fast path, then the per-op one
        outs_t = [torch.empty(o.numel(), dtype=o.dtype, device=dev) for o in outs_c]
        with dist._coalescing_manager(device=device):
            for o, x in zip(outs_t, xs):
                dist.all_gather_into_tensor(o, x.to(dev))
        for a, b in zip(outs_t, outs_c):
            same(a, b.reshape(-1))


def reduce_scatter_single(dtype, op):
    x = sample((4 * world,), dtype, 17)
    out_c = torch.empty(4, dtype=dtype)
    out_t = torch.empty(4, dtype=dtype, device=dev)
    dist.reduce_scatter_tensor(out_c, x.clone(), op=op)
    dist.reduce_scatter_tensor(out_t, x.to(dev), op=op)
    same(out_t, out_c)


def reduce_scatter_list(dtype):
    xs = [sample((3,), dtype, 18 + i) for i in range(world)]
    out_c = torch.empty(3, dtype=dtype)
    out_t = torch.empty(3, dtype=dtype, device=dev)
    dist.reduce_scatter(out_c, [x.clone() for x in xs])
    dist.reduce_scatter(out_t, [x.to(dev) for x in xs])
    same(out_t, out_c)


def reduce_scatter_coalesced():
    xs = [sample((2 * world,), torch.float32, 19), sample((4 * world,), torch.float32, 20)]
    outs_c = [torch.empty(x.numel() // world) for x in xs]
    for o, x in zip(outs_c, xs):
        dist.reduce_scatter_tensor(o, x.clone())
    for device in [None, dev]:
        outs_t = [torch.empty_like(o, device=dev) for o in outs_c]
        with dist._coalescing_manager(device=device):
            for o, x in zip(outs_t, xs):
                dist.reduce_scatter_tensor(o, x.to(dev))
        for a, b in zip(outs_t, outs_c):
            same(a, b)
    # all_reduce's fast path
    ys = [sample((3,), torch.float32, 24), sample((2, 2), torch.float32, 25)]
    refs = [y.clone() for y in ys]
    for y in refs:
        dist.all_reduce(y)
    ts = [y.to(dev) for y in ys]
    with dist._coalescing_manager():
        for t in ts:
            dist.all_reduce(t)
    for a, b in zip(ts, refs):
        same(a, b)


def all_to_all_single(uneven):
    if uneven:  # rank r sends r+1+j rows to rank j
        send = [rank + 1 + j for j in range(world)]
        recv = [j + 1 + rank for j in range(world)]
    else:
        send = recv = None
    n_in = sum(send) if send else 2 * world
    n_out = sum(recv) if recv else 2 * world
    x = sample((n_in, 3), torch.float32, 21)
    out_c = torch.empty(n_out, 3)
    out_t = torch.empty(n_out, 3, device=dev)
    dist.all_to_all_single(out_c, x, recv, send)
    dist.all_to_all_single(out_t, x.to(dev), recv, send)
    same(out_t, out_c)


def all_to_all_list():
    xs = [sample((j + 1, 2), torch.float32, 22 + j) for j in range(world)]
    # rank r receives from rank j what j made for r: (r + 1, 2)
    outs_t = [torch.empty(rank + 1, 2, device=dev) for _ in range(world)]
    dist.all_to_all(outs_t, [x.to(dev) for x in xs])
    # reference through all_gather on CPU
    for j in range(world):
        g = torch.Generator().manual_seed(1000 * j + 22 + rank)
        expect = torch.randn((rank + 1, 2), generator=g)
        same(outs_t[j], expect)


def gather_scatter(dst):
    x = sample((3,), torch.float32, 23)
    if rank == dst:
        outs_c = [torch.empty(3) for _ in range(world)]
        outs_t = [torch.empty(3, device=dev) for _ in range(world)]
    else:
        outs_c = outs_t = None
    dist.gather(x, outs_c, dst=dst)
    dist.gather(x.to(dev), outs_t, dst=dst)
    if rank == dst:
        for a, b in zip(outs_t, outs_c):
            same(a, b)
    chunks = [sample((2, 2), torch.float32, 30 + i) for i in range(world)] if rank == dst else None
    out_c = torch.empty(2, 2)
    out_t = torch.empty(2, 2, device=dev)
    dist.scatter(out_c, chunks, src=dst)
    dist.scatter(out_t, [c.to(dev) for c in chunks] if chunks else None, src=dst)
    same(out_t, out_c)


def send_recv():
    # A ring, posted as one batch: isend and irecv in either order must not block.
    x = sample((4,), torch.float32, 40)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    got = torch.empty(4, device=dev)
    ops = [dist.P2POp(dist.irecv, got, prv), dist.P2POp(dist.isend, x.to(dev), nxt)]
    if rank % 2:
        ops.reverse()
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    g = torch.Generator().manual_seed(1000 * prv + 40)
    same(got, torch.randn((4,), generator=g))
    # blocking send/recv
    if rank == 0:
        dist.send(torch.arange(5., device=dev), 1)
    elif rank == 1:
        y = torch.zeros(5, device=dev)
        dist.recv(y, 0)
        same(y, torch.arange(5.))


def async_ops():
    t = torch.full((3,), float(rank + 1), device=dev)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert w.is_completed()
    same(t, torch.full((3,), float(sum(range(1, world + 1)))))
    fut = dist.all_reduce(torch.ones(2, device=dev), async_op=True).get_future()
    same(fut.wait()[0], torch.full((2,), float(world)))


def functional():
    x = sample((4,), torch.float32, 50)
    ref = x.clone()
    dist.all_reduce(ref)
    y = fc.all_reduce(x.to(dev), "sum", dist.group.WORLD)
    same(fc.wait_tensor(y), ref)
    g = fc.all_gather_tensor(x.to(dev), 0, dist.group.WORLD)
    ref_g = torch.empty(4 * world)
    dist.all_gather_into_tensor(ref_g, x)
    same(g, ref_g)
    rs = fc.reduce_scatter_tensor(torch.arange(4. * world, device=dev), "sum", 0, dist.group.WORLD)
    same(rs, torch.arange(4. * world)[4 * rank:4 * rank + 4] * world)
    a2a = fc.all_to_all_single(torch.arange(2. * world, device=dev) + rank, None, None, dist.group.WORLD)
    exp = torch.cat([torch.arange(2. * world)[2 * rank:2 * rank + 2] + j for j in range(world)])
    same(a2a, exp)


def objects():
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "t": [rank] * 3})
    assert objs == [{"rank": j, "t": [j] * 3} for j in range(world)]
    lst = [rank * 10, "x"] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [0, "x"]


def subgroups():
    everyone = dist.new_group(list(range(world)), backend="tpu_dist")
    t = torch.ones(2, device=dev)
    dist.all_reduce(t, group=everyone)
    same(t, torch.full((2,), float(world)))
    solo = dist.new_group([rank], backend="tpu_dist") if world == 1 else None
    # every rank builds every group, in the same order
    singles = [dist.new_group([j], backend="tpu_dist") for j in range(world)]
    u = torch.full((2,), float(rank), device=dev)
    dist.all_reduce(u, group=singles[rank])
    same(u, torch.full((2,), float(rank)))
    del solo


def barrier():
    dist.barrier()
    # dist.monitored_barrier itself accepts only a Gloo group; the group's
    # own method reaches the backend.
    tpu_only = dist.new_group(list(range(world)), backend="tpu_dist")
    dist.barrier(group=tpu_only)
    tpu_only.monitored_barrier(datetime.timedelta(seconds=30), wait_all_ranks=True)


def results_keep_their_memory():
    """Where the device works in host memory (the CPU plugin) a result is
    not copied into the tpu tensor: the transport's host block becomes the
    tensor's buffer, and serves another collective only once that buffer is
    gone. Earlier results keep their values while later collectives run,
    through eager in-place updates and compiled ones (which donate the
    buffer), and inputs read in place stay as they were."""
    from torch_tpu import distributed as tpu_dist_stats

    n = 1 << 14
    xs = [sample((n,), torch.float32, 60 + i) for i in range(3)]
    expect = [x.clone() for x in xs]
    for e in expect:
        dist.all_reduce(e)
    before = tpu_dist_stats.stats()
    ts = [x.to(dev) for x in xs]
    for t in ts:
        dist.all_reduce(t)
    for t, e in zip(ts, expect):
        same(t, e)
    after = tpu_dist_stats.stats()
    # every result lent, each input copied once (all_reduce works in place)
    assert after["zero_copy_bytes"] - before["zero_copy_bytes"] == 3 * n * 4, (before, after)
    assert after["staged_bytes"] - before["staged_bytes"] == 3 * n * 4, (before, after)
    first, _, last = ts
    first.mul_(2)
    del ts, _  # the middle result dies: its block serves the next ones
    more = [sample((n,), torch.float32, 70 + i).to(dev) for i in range(2)]
    for m in more:
        dist.all_reduce(m)
    same(first, expect[0] * 2)
    same(last, expect[2])
    bump = torch.compile(lambda z: z.add_(1), backend="tpu")
    bump(last)
    again = sample((n,), torch.float32, 80).to(dev)
    dist.all_reduce(again)
    same(last, expect[2] + 1)
    # read in place: the input of an all_gather and a broadcast root keep
    # their values, also when the input is a window of the output (FSDP2)
    x = sample((n,), torch.float32, 81)
    t = x.to(dev)
    out = torch.empty(world * n, device=dev)
    dist.all_gather_into_tensor(out, t)
    same(t, x)
    same(out[rank * n:(rank + 1) * n], x)
    buf = torch.zeros(world * n, device=dev)
    buf[rank * n:(rank + 1) * n].copy_(t)
    dist.all_gather_into_tensor(buf, buf[rank * n:(rank + 1) * n])
    same(buf, out.cpu())
    for src in range(world):
        t = x.to(dev)
        dist.broadcast(t, src=src)
        g = torch.Generator().manual_seed(1000 * src + 81)
        same(t, torch.randn((n,), generator=g))


report.check("results keep their memory", results_keep_their_memory)


for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
    for src in range(world):
        report.check(f"broadcast {dtype} src={src}", lambda d=dtype, s=src: broadcast(d, s))
    report.check(f"all_gather {dtype}", lambda d=dtype: all_gather(d))
    report.check(f"all_gather_into_tensor {dtype}", lambda d=dtype: all_gather_single(d, False))
    report.check(f"all_gather_into_tensor window {dtype}", lambda d=dtype: all_gather_single(d, True))
for dst in range(world):
    report.check(f"reduce dst={dst}", lambda d=dst: reduce(torch.float32, d, R.SUM))
    report.check(f"reduce MAX int dst={dst}", lambda d=dst: reduce(torch.int64, d, R.MAX))
    report.check(f"gather/scatter root={dst}", lambda d=dst: gather_scatter(d))
for dtype, op in [(torch.float32, R.SUM), (torch.float32, R.AVG), (torch.bfloat16, R.SUM),
                  (torch.int64, R.MAX), (torch.bool, R.SUM)]:
    report.check(f"reduce_scatter_tensor {dtype} {op}", lambda d=dtype, o=op: reduce_scatter_single(d, o))
report.check("reduce_scatter list", lambda: reduce_scatter_list(torch.float32))
report.check("all_gather coalesced", all_gather_coalesced)
report.check("reduce_scatter coalesced", reduce_scatter_coalesced)
report.check("all_to_all_single even", lambda: all_to_all_single(False))
report.check("all_to_all_single uneven", lambda: all_to_all_single(True))
report.check("all_to_all list", all_to_all_list)
report.check("send/recv", send_recv)
report.check("async", async_ops)
report.check("functional collectives", functional)
report.check("object collectives", objects)
report.check("subgroups", subgroups)
report.check("barrier", barrier)
report.write()
dist.destroy_process_group()
