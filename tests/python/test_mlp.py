"""A small MLP trains on tpu with the same losses as on the CPU.

Tolerance: per-step losses agree to 1e-4 relative over 50 steps. Float32
matmuls and reductions in XLA associate sums differently from PyTorch's CPU
kernels (~1e-7 relative per op); SGD/AdamW feed those differences back, and
after 50 steps they stay below 1e-5 in practice: 1e-4 leaves 10x headroom."""
import pytest
import torch
from torch import nn


def make_data(n=256, d=20, classes=4):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, classes, generator=g)
    y = (x @ w).argmax(1)
    return x, y


def train(device, opt_name, steps=50):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(),
                          nn.Linear(64, 4))
    model.to(device)
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    x, y = make_data()
    x, y = x.to(device), y.to(device)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for i in range(steps):
        xb, yb = x[(i * 32) % 256:(i * 32) % 256 + 32], y[(i * 32) % 256:(i * 32) % 256 + 32]
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_mlp_losses_match_cpu(opt_name, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    cpu_losses, cpu_model = train("cpu", opt_name)
    tpu_losses, tpu_model = train("tpu", opt_name)
    assert tpu_losses[-1] < tpu_losses[0] * 0.5  # it learns
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses),
                               rtol=1e-4, atol=1e-5)
    for pc, pt in zip(cpu_model.parameters(), tpu_model.parameters()):
        torch.testing.assert_close(pt.detach().cpu(), pc.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt_name", ["sgd", "adamw", "adam_amsgrad"])
def test_foreach_optimizers_over_many_parameters(opt_name, monkeypatch):
    """Foreach optimizer steps run as one graph over the whole parameter list
    (here 150 tensors of mixed shapes) and match the CPU."""
    monkeypatch.setenv("TORCH_TPU_FALLBACK", "0")
    g = torch.Generator().manual_seed(0)
    init = [torch.randn((i % 5) + 1, 3, generator=g) for i in range(150)]
    results = {}
    for dev in ("cpu", "tpu"):
        ps = [p.clone().to(dev).requires_grad_() for p in init]
        if opt_name == "sgd":
            opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True)
        elif opt_name == "adamw":
            opt = torch.optim.AdamW(ps, lr=0.05, foreach=True)
        else:
            opt = torch.optim.Adam(ps, lr=0.05, amsgrad=True, foreach=True)
        for _ in range(3):
            opt.zero_grad()
            sum(((p - 1) ** 2).sum() for p in ps).backward()
            opt.step()
        results[dev] = [p.detach().cpu() for p in ps]
    for a, b in zip(results["tpu"], results["cpu"]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
