"""Cases replayed from real training traces, for tools/check_rules.py
(--cases trace_cases): every ATen call of a Linear-ReLU-Linear MLP trained
with cross-entropy and SGD(momentum, nesterov) / AdamW / Adam(amsgrad,
capturable), captured with a TorchDispatchMode, arguments cloned at call
time. Ops without a rule (views, empty, _local_scalar_dense, ...) are the
executor's and are skipped."""
import os
import subprocess

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

import torch.optim.adam as _adam
import torch.optim.adamw as _adamw
import torch.optim.optimizer as _optim
from check_rules import Case

# Let capturable optimizers run on CPU so their device-side paths
# (_foreach_pow.ScalarAndTensor, ...) are traced.
_orig = _optim._get_capturable_supported_devices
for _m in (_optim, _adam, _adamw):
    if hasattr(_m, "_get_capturable_supported_devices"):
        _m._get_capturable_supported_devices = \
            lambda supports_xla=True: _orig(supports_xla) + ["cpu"]


def _rules():
    build = os.environ.get("TPR_BUILD", os.path.join(os.path.dirname(__file__), "..", "build"))
    out = subprocess.run([os.path.join(build, "tpr_lower_run"), "--list"], capture_output=True,
                         text=True, check=True).stdout
    return {l.split()[0] for l in out.splitlines() if l.strip()}


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(y) for y in x)
    return x


class _Capture(TorchDispatchMode):
    def __init__(self, rules, sink, tag):
        super().__init__()
        self.rules, self.sink, self.tag = rules, sink, tag

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ov = func._overloadname
        name = str(func._schema.name) + ("" if ov == "default" else "." + ov)
        if name in self.rules:
            self.sink.append(Case(func, list(_clone(args)), _clone(kwargs),
                                  tol=(1e-5, 1e-5), label=f"{self.tag}: {name}"))
        return func(*args, **kwargs)


def cases():
    rules = _rules()
    configs = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2,
                                         foreach=True),
        "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
        "adam-amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, weight_decay=1e-2,
                                                   foreach=True),
        "adamw-capturable": lambda p: torch.optim.AdamW(p, lr=1e-2, capturable=True, foreach=True),
    }
    out = []
    for tag, make in configs.items():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        opt = make(model.parameters())
        x, y = torch.randn(5, 8), torch.randint(0, 4, (5,))
        with _Capture(rules, out, tag):
            for _ in range(2):
                loss = nn.CrossEntropyLoss()(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    return out
