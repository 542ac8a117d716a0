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
