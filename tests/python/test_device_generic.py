"""PyTorch's device-generic test machinery, instantiated for tpu as PyTorch's
own CI does for its backends: ``@ops(op_db)``, ``@modules(module_db)`` and
``@optims(optim_db)`` give ``...PRIVATEUSE1`` classes whose tests are named
``..._tpu_float32``. Each test checks tpu against the CPU with PyTorch's
``TestCase.assertEqual`` (its per-dtype tolerances).

This file is the CI sample of each database; the full databases run through
``python -m torch_tpu.coverage`` (``--errors``, ``--modules``, ``--optims``),
whose totals are in docs/coverage*.md."""
import copy
import os

# Read when the test classes are instantiated: only the tpu variants.
os.environ["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "tpu"

import torch  # noqa: E402

import torch_tpu  # noqa: E402,F401
from torch.testing._internal.common_device_type import (  # noqa: E402
    instantiate_device_type_tests, ops)
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_modules import module_db, modules  # noqa: E402
from torch.testing._internal.common_optimizers import optim_db, optims  # noqa: E402
from torch.testing._internal.common_utils import TestCase  # noqa: E402

from torch_tpu.coverage import ops as op_harness  # noqa: E402
from torch_tpu.coverage import optims as optim_harness  # noqa: E402

OPS = [op for op in op_db if op.name in op_harness.FAST_OPS and not op.variant_test_name]
# Error inputs whose checks need no tensor data (strict eager raises them):
# out= overlap, dtypes, shapes, argument values.
ERROR_OPS = [op for op in op_db if op.name in (
    "cat", "gather", "index_select", "take", "masked_fill", "masked_select", "complex",
    "bucketize", "index_add", "clamp", "nn.functional.conv2d")
    and op.error_inputs_func is not None]
MODULES = [m for m in module_db if m.name in (
    "nn.Linear", "nn.Conv2d", "nn.LayerNorm", "nn.BatchNorm2d", "nn.Embedding", "nn.LSTM",
    "nn.GRU", "nn.MultiheadAttention", "nn.TransformerEncoderLayer", "nn.GELU")]
OPTIMS = [o for o in optim_db if o.optim_cls.__name__ in ("SGD", "Adam", "AdamW", "Adagrad")]


class NativeOnly(TestCase):
    """Ops without a tpu lowering raise instead of running on the CPU, so a
    passing test proves tpu ran it (pytest fixtures do not reach unittest
    classes: set here, restored after each test)."""

    def setUp(self):
        super().setUp()
        self._fallback = os.environ.get("TORCH_TPU_FALLBACK")
        os.environ["TORCH_TPU_FALLBACK"] = "0"

    def tearDown(self):
        if self._fallback is None:
            os.environ.pop("TORCH_TPU_FALLBACK", None)
        else:
            os.environ["TORCH_TPU_FALLBACK"] = self._fallback
        super().tearDown()


def _on_cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


class TestTpuOps(NativeOnly):
    @ops(OPS, allowed_dtypes=(torch.float32,))
    def test_matches_cpu(self, device, dtype, op):
        self.assertEqual(torch.device(device).type, "tpu")
        for sample in list(op.sample_inputs("cpu", dtype))[:4]:
            want = op(sample.input, *sample.args, **sample.kwargs)
            moved = op_harness._to_tpu(sample, op_name=op.name)
            got = op(moved.input, *moved.args, **moved.kwargs)
            got_flat = op_harness._flatten(got, [])
            for g in got_flat:
                if isinstance(g, torch.Tensor):
                    self.assertEqual(g.device.type, "tpu")
            try:
                self.assertEqual([_on_cpu(g) for g in got_flat], op_harness._flatten(want, []),
                                 exact_device=False)
            except AssertionError:
                # Sums whose terms cancel (a 10-term dot product of values
                # near 100 that ends near 0) differ by an ulp of the terms,
                # and the CPU's own order depends on the processor's BLAS
                # kernel: tpu passes when it is as close to a float64 result
                # as the CPU is (the op harness's rule).
                up = op_harness._upcast(sample)
                ref = op(up.input, *up.args, **up.kwargs)
                if not op_harness._as_accurate_as_cpu(got, want, ref, "float32"):
                    raise

    @ops(ERROR_OPS, dtypes=(torch.float32,))
    def test_error_inputs_raise_like_cpu(self, device, dtype, op):
        # The CPU's exception type; the messages are ours.
        for ei in op.error_inputs(device):
            s = ei.sample_input
            with self.assertRaises(ei.error_type):
                op(s.input, *s.args, **s.kwargs)
                torch.tpu.synchronize()


def _module_run(module, args, kwargs):
    """Outputs, then the gradients of the parameters and of the inputs that
    require grad under a ones cotangent on every float output."""
    outs = op_harness._flatten(module(*args, **kwargs), [])
    diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    params = [p for p in module.parameters() if p.requires_grad]
    ins = [t for t in op_harness._flatten([list(args), kwargs], [])
           if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = []
    if diff and params + ins:
        grads = torch.autograd.grad(diff, params + ins, [torch.ones_like(o) for o in diff],
                                    allow_unused=True)
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outs] + list(grads)


def _moved(x, device, dtype=None):
    if isinstance(x, torch.Tensor):
        y = x.detach().to(device, dtype if x.is_floating_point() else None)
        return y.requires_grad_(x.requires_grad)
    if isinstance(x, (tuple, list)):
        return type(x)(_moved(e, device, dtype) for e in x)
    if isinstance(x, dict):
        return {k: _moved(v, device, dtype) for k, v in x.items()}
    return x


class TestTpuModules(NativeOnly):
    @modules(MODULES, allowed_dtypes=(torch.float32,))
    def test_forward_backward_match_cpu(self, device, dtype, module_info, training):
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype,
                                                requires_grad=True, training=training)
        for mi in inputs[:3]:
            if mi.forward_input is None:
                continue
            torch.manual_seed(0)
            cpu_module = module_info.module_cls(*mi.constructor_input.args,
                                                **mi.constructor_input.kwargs)
            cpu_module = cpu_module.to(dtype).train(training)
            f_args, f_kwargs = mi.forward_input.args, mi.forward_input.kwargs
            want = _module_run(cpu_module, f_args, f_kwargs)
            got = _module_run(copy.deepcopy(cpu_module).to(device), _moved(f_args, device),
                              _moved(f_kwargs, device))
            for g in got:
                if isinstance(g, torch.Tensor):
                    self.assertEqual(g.device.type, "tpu")
            try:
                self.assertEqual([_on_cpu(g) for g in got], want, exact_device=False)
            except AssertionError:
                # Gradients of parameters are sums over the batch, which XLA
                # associates differently: as in the op harness, the tpu
                # result must be no farther from a float64 run than the
                # CPU's own, plus float32's tolerance.
                ref = _module_run(copy.deepcopy(cpu_module).double(),
                                  _moved(f_args, "cpu", torch.float64),
                                  _moved(f_kwargs, "cpu", torch.float64))
                self.assertTrue(op_harness._as_accurate_as_cpu(got, want, ref, "float32"),
                                msg=f"{module_info.name} differs from the CPU beyond its "
                                    "own distance from float64")


class TestTpuOptims(NativeOnly):
    @optims(OPTIMS, dtypes=[torch.float32])
    def test_steps_match_cpu(self, device, dtype, optim_info):
        name = optim_info.optim_cls.__name__
        for inp in optim_info.optim_inputs_func(device="cpu")[:3]:
            for impl in optim_harness._impls(optim_info):
                if impl == "compiled":
                    continue  # the compiled step runs in tests/python/test_coverage_optims.py
                r = optim_harness.run_config(name, inp.desc, impl)
                self.assertEqual(r["status"], "pass", msg=f"{name} [{inp.desc}] {impl}: {r}")


instantiate_device_type_tests(TestTpuOps, globals())
instantiate_device_type_tests(TestTpuModules, globals())
instantiate_device_type_tests(TestTpuOptims, globals())
