"""Cross-device semantics with two tpu devices in one process (run by
test_cross_device.py with TORCH_TPU_CPU_DEVICE_COUNT=2): an op runs on the
device of its tensors whatever the current device is, copies move values
between devices, and ops given tensors on two devices raise PyTorch's own
error. Prints one JSON line: {"passed": [...], "failed": {name: error}}."""
import json
import re
import sys
import traceback

import torch

mode = sys.argv[1]  # "strict" or "fused"
D0, D1 = torch.device("tpu", 0), torch.device("tpu", 1)
passed, failed = [], {}


def check(fn):
    try:
        fn()
        passed.append(fn.__name__)
    except Exception as e:  # noqa: BLE001 (each check reports its own failure)
        failed[fn.__name__] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=5)}"


def raises(exc, pattern, fn):
    try:
        fn()
    except exc as e:
        assert re.search(pattern, str(e)), f"{type(e).__name__} without {pattern!r}: {e}"
        return str(e)
    raise AssertionError(f"no {exc.__name__} raised")


def same(t, want, device):
    assert t.device == device, (t.device, device)
    torch.testing.assert_close(t.cpu(), want, rtol=1e-6, atol=1e-6)


def ops_run_on_their_tensors_device():
    assert torch.tpu.device_count() == 2 and torch.tpu.current_device() == 0
    x = torch.arange(12.0, device=D1).reshape(3, 4)
    before0 = torch.tpu.memory_allocated(0)
    y = (x * 2 + 1).relu_()
    z = x @ x.t()
    s = x.sum(dim=0)
    torch.tpu.synchronize(1)
    # nothing was stored on tpu:0: the ops and their results live on tpu:1
    assert torch.tpu.memory_allocated(0) == before0, (torch.tpu.memory_allocated(0), before0)
    xc = torch.arange(12.0).reshape(3, 4)
    same(y, xc * 2 + 1, D1)
    same(z, xc @ xc.t(), D1)
    same(s, xc.sum(dim=0), D1)
    assert torch.tpu.current_device() == 0
    # a CPU scalar tensor joins the tpu:1 op, as on CUDA
    same(x * torch.tensor(3.0), xc * 3, D1)


def factories_and_random_ops_take_their_device():
    torch.tpu.manual_seed_all(7)
    a = torch.randn(64, device=D1)
    b = torch.rand(8, device=D1)
    assert a.device == D1 and b.device == D1
    assert 0.5 < a.std().item() < 1.5 and 0.0 <= b.min().item() and b.max().item() < 1.0
    same(torch.tril_indices(3, 3, device=D1), torch.tril_indices(3, 3), D1)
    same(torch.eye(3, device=D1), torch.eye(3), D1)
    same(torch.full((2, 2), 5.0, device=D1), torch.full((2, 2), 5.0), D1)
    same(torch.zeros_like(a), torch.zeros(64), D1)


def foreach_ops_on_one_other_device():
    xs = [torch.full((3,), float(i), device=D1) for i in range(3)]
    out = torch._foreach_add(xs, xs)
    for i, t in enumerate(out):
        same(t, torch.full((3,), 2.0 * i), D1)
    torch._foreach_mul_(xs, [1.0, 2.0, 3.0])  # per-tensor scalars: a tpu:1 list argument
    for i, t in enumerate(xs):
        same(t, torch.full((3,), i * (i + 1.0)), D1)


def copies_between_devices():
    a0 = torch.arange(6.0, device=D0)
    a1 = torch.zeros(6, device=D1)
    a1.copy_(a0)
    same(a1, torch.arange(6.0), D1)
    # dtype conversion and broadcasting, both ways
    b0 = torch.zeros(2, 3, dtype=torch.float64, device=D0)
    b0.copy_(torch.arange(3, device=D1))
    same(b0, torch.arange(3, dtype=torch.float64).expand(2, 3), D0)
    # into a transposed view: the rest of the base keeps its values
    base = torch.full((3, 2), -1.0, device=D1)
    base.t().copy_(torch.arange(6.0, device=D0).reshape(2, 3))
    same(base, torch.arange(6.0).reshape(2, 3).t(), D1)
    same(a0.to("tpu:1"), torch.arange(6.0), D1)
    same(a1.to(D0, dtype=torch.int32), torch.arange(6, dtype=torch.int32), D0)
    same(a0.to(D1, non_blocking=True), torch.arange(6.0), D1)
    # the source is untouched
    same(a0, torch.arange(6.0), D0)


def foreach_copy_between_devices():
    # FSDP2's pattern: shards copied into views of one flat buffer on
    # another device
    flat = torch.full((10,), -1.0, device=D0)
    dsts = [flat[0:4].view(2, 2), flat[4:10]]
    srcs = [torch.arange(4.0, device=D1).view(2, 2), torch.arange(10.0, 16.0, device=D1)]
    torch._foreach_copy_(dsts, srcs)
    same(flat, torch.cat([torch.arange(4.0), torch.arange(10.0, 16.0)]), D0)
    # lists mixing devices on both sides
    d = [torch.zeros(2, device=D1), torch.zeros(3, device=D0)]
    s = [torch.tensor([1.0, 2.0], device=D0), torch.tensor([3.0, 4.0, 5.0], device=D1)]
    torch._foreach_copy_(d, s)
    same(d[0], torch.tensor([1.0, 2.0]), D1)
    same(d[1], torch.tensor([3.0, 4.0, 5.0]), D0)


def foreach_ops_over_several_devices():
    # lists spanning devices, each pair on one device: per tensor, as CUDA's
    # foreach kernels do
    xs = [torch.ones(2, device=D0), torch.ones(3, device=D1)]
    ys = [torch.full((2,), 2.0, device=D0), torch.full((3,), 3.0, device=D1)]
    out = torch._foreach_mul(xs, ys)
    same(out[0], torch.full((2,), 2.0), D0)
    same(out[1], torch.full((3,), 3.0), D1)
    norms = torch._foreach_norm(ys)
    same(norms[0], torch.tensor(8.0).sqrt(), D0)
    same(norms[1], torch.tensor(27.0).sqrt(), D1)
    # a pair on two devices is the per-tensor op's error
    raises(RuntimeError, r"Expected all tensors to be on the same device.*tpu:[01].*tpu:[01]",
           lambda: torch._foreach_add_([torch.ones(2, device=D0)], [torch.ones(2, device=D1)]))


def sparse_tensors_stay_on_their_device():
    dense = torch.tensor([[0.0, 2.0], [3.0, 0.0]])
    s = dense.to_sparse().to(D1)
    for name, t, want in [("to", s, dense), ("clone", s.clone(), dense), ("neg", -s, -dense),
                          ("add", s + s, 2 * dense), ("coalesce", (s + s).coalesce(), 2 * dense),
                          ("to_sparse", dense.to(D1).to_sparse(), dense),
                          ("sparse_coo_tensor", torch.sparse_coo_tensor(
                              torch.tensor([[0], [1]], device=D1), torch.tensor([2.0], device=D1),
                              (2, 2)), torch.tensor([[0.0, 2.0], [0.0, 0.0]]))]:
        assert t.is_sparse and t.device == D1, (name, t.device)
        assert t._indices().device == D1 and t._values().device == D1, name
        same(t.to_dense(), want, D1)
    same(torch.ones(2, 2, device=D1) + s, dense + 1, D1)
    bag = torch.nn.EmbeddingBag(5, 3, mode="sum", sparse=True).to(D1)
    bag(torch.tensor([[1, 2]], device=D1)).sum().backward()
    grad = bag.weight.grad
    assert grad.is_sparse and grad.device == D1 and grad._values().device == D1
    same(grad.to_dense(), torch.tensor([[0.0] * 3, [1.0] * 3, [1.0] * 3, [0.0] * 3, [0.0] * 3]), D1)


def mixed_devices_raise_pytorchs_error():
    a0 = torch.ones(4, device=D0)
    a1 = torch.ones(4, device=D1)
    msg = raises(RuntimeError, r"^Expected all tensors to be on the same device",
                 lambda: torch.add(a0, a1))
    assert "tpu:0" in msg and "tpu:1" in msg and "aten::add.Tensor" in msg, msg
    for name, fn in [("aten::mul.Tensor", lambda: a1 * a0),
                     ("aten::add_.Tensor", lambda: a0.add_(a1)),
                     ("aten::cat", lambda: torch.cat([a0, a1])),
                     ("aten::where.self", lambda: torch.where(a0 > 0, a0, a1)),
                     ("aten::mm", lambda: a0.view(2, 2) @ a1.view(2, 2)),
                     ("aten::index_select", lambda: a0.index_select(0, torch.tensor([0], device=D1)))]:
        msg = raises(RuntimeError, r"Expected all tensors to be on the same device", fn)
        assert "tpu:0" in msg and "tpu:1" in msg and name in msg, (name, msg)
    # nothing was written, and both devices still work
    same(a0, torch.ones(4), D0)
    same(a0 + a0, torch.full((4,), 2.0), D0)
    same(a1 + a1, torch.full((4,), 2.0), D1)


def device_index_past_device_count_raises():
    for fn in (lambda: torch.ones(2, device="tpu:99"),
               lambda: torch.empty(3, 3, device="tpu:2"),
               lambda: torch.arange(4.0, device=D0).to("tpu:5"),
               lambda: torch.tpu.set_device(7)):
        msg = raises(IndexError, r"tpu device index \d+ is out of range", fn)
        assert "device_count() is 2" in msg and "tpu:0 to tpu:1" in msg, msg
    msg = raises(IndexError, "out of range", lambda: torch.ones(2, device="tpu:99"))
    assert "99" in msg and "aten::empty" in msg, msg
    assert torch.tpu.current_device() == 0


def training_on_the_other_device():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    model.load_state_dict(ref.state_dict())
    model.to(D1)
    x, y = torch.randn(32, 8), torch.randn(32, 2)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (ref, model)]
    for _ in range(3):
        for m, opt, dev in ((ref, opts[0], "cpu"), (model, opts[1], D1)):
            loss = torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            opt.zero_grad()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.device == D1 and opts[1].state[p]["exp_avg"].device == D1
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
    assert torch.tpu.current_device() == 0


def compiled_graphs_run_on_their_device():
    import torch_tpu._compile as C

    C.reset_stats()
    f = torch.compile(lambda x: x * 2 + 1, backend="tpu")
    same(f(torch.arange(4.0, device=D1)), torch.arange(4.0) * 2 + 1, D1)
    g = torch.compile(lambda n: torch.ones(n, device="tpu:1") * 3, backend="tpu")
    same(g(3), torch.full((3,), 3.0), D1)
    h = torch.compile(lambda a, b: (a.to("tpu:1") + b, (b * 2).to("tpu:0")), backend="tpu")
    u, v = h(torch.arange(3.0, device=D0), torch.ones(3, device=D1))
    same(u, torch.arange(3.0) + 1, D1)
    same(v, torch.full((3,), 2.0), D0)
    assert C.stats()["compiled_multi_device_graphs"] == 1, C.stats()
    assert torch.tpu.current_device() == 0


CHECKS = [ops_run_on_their_tensors_device, factories_and_random_ops_take_their_device,
          foreach_ops_on_one_other_device, copies_between_devices, foreach_copy_between_devices,
          foreach_ops_over_several_devices, sparse_tensors_stay_on_their_device,
          mixed_devices_raise_pytorchs_error,
          device_index_past_device_count_raises, training_on_the_other_device]
if mode == "strict":
    CHECKS.append(compiled_graphs_run_on_their_device)
for c in CHECKS:
    check(c)
print(json.dumps({"passed": passed, "failed": failed}))
