"""Vision models on tpu: the vision zoo's CI slice (torch_tpu/zoo/vision.py:
a ResNet, a ViT, a ConvNeXt, an EfficientNet, a Swin and a MobileNet from
torchvision and timm), forward and 3 SGD training steps against the CPU with
no op falling back; and torchvision importing beside CPU torch without its
C++ extension (TORCH_TPU_TORCHVISION_WITHOUT_OPS=1, torch_tpu/_torchvision.py).

Selected by `-m vision` (deselected by default: torchvision and timm are not
in setup.sh). PyPI's torchvision for Linux x86-64 is a CUDA build: run with
TORCH_TPU_TORCHVISION_WITHOUT_OPS=1 there (.ci/run does).
"""
import subprocess
import sys

import pytest

from conftest import run_python

from torch_tpu.zoo import vision  # imports torchvision only when a model is built

pytestmark = pytest.mark.vision


@pytest.fixture(scope="module", autouse=True)
def _torchvision_imports():
    # selected on purpose: a missing or broken torchvision is a failure here
    import timm  # noqa: F401
    import torchvision  # noqa: F401


@pytest.mark.parametrize("row_id", vision.FAST)
def test_zoo_fast_slice(row_id):
    rec = vision.run_model(row_id)
    assert rec["status"] == "match", rec
    assert rec["training"]["status"] == "match", rec["training"]
    assert not rec["fallbacks"], rec["fallbacks"]


def test_fast_slice_spans_the_families():
    table = vision.rows()
    families = {table[r][0] for r in vision.FAST}
    sources = {table[r][1] for r in vision.FAST}
    assert len(families) == len(vision.FAST) >= 6 and sources == {"torchvision", "timm"}


def test_zoo_command(tmp_path):
    # the zoo as users run it: driver, worker subprocess, records, report
    from torch_tpu import _isolate
    out, md = tmp_path / "v.json", tmp_path / "v.md"
    proc = subprocess.run([sys.executable, "-m", "torch_tpu.zoo.vision", "--models",
                           "torchvision/resnet18", "--json", str(out), "--markdown", str(md)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = _isolate.load_results(out)
    assert list(results) == ["torchvision/resnet18"], results
    assert results["torchvision/resnet18"]["training"]["status"] == "match", results
    assert "matched the CPU: 1/1" in proc.stdout and "resnet18" in md.read_text()


def test_torchvision_without_its_extension():
    # In a fresh interpreter, as a user would: torchvision and Transformers
    # (which imports torchvision when installed) import; the extension's own
    # operators raise torchvision's RuntimeError.
    proc = run_python(
        "import torch, torchvision, transformers\n"
        "from torch_tpu import _torchvision\n"
        "boxes = torch.tensor([[0., 0., 1., 1.], [0., 0., 1., 1.]])\n"
        "try:\n"
        "    torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8]), 0.5)\n"
        "except RuntimeError as e:\n"
        "    print('nms raised:', str(e).splitlines()[0])\n"
        "else:\n"
        "    print('nms ran', _torchvision.state)\n"
        "m = torchvision.models.resnet18(num_classes=10).eval().to('tpu')\n"
        "print('resnet18 on tpu:', tuple(m(torch.randn(1, 3, 32, 32, device='tpu')).shape))\n",
        env={"TORCH_TPU_TORCHVISION_WITHOUT_OPS": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from torch_tpu import _torchvision
    if _torchvision._extension_loads():  # a CPU build of torchvision: nms is real
        pytest.skip("torchvision's extension loads here: nothing to stand in for")
    assert "nms raised:" in proc.stdout, proc.stdout
    assert "resnet18 on tpu: (1, 10)" in proc.stdout, proc.stdout


def test_training_judgement():
    # (tpu error, CPU float32 error, float32 spread) per step, against float64
    judge, tol = vision._judge_stepwise, vision.RTOL_SCALE
    calm = (tol / 10, tol / 10, tol / 10)
    assert judge([calm] * 3)[0] is None
    # tpu off while float32 is not: a mismatch at that step, whatever follows
    assert judge([(3 * tol, tol / 10, tol / 10), (1, 1, 1), (1, 1, 1)])[0].startswith("step 1")
    # float32 itself drifts at step 2: tpu within 4x of the spread passes...
    problem, note = judge([calm, (0.3, 0.01, 0.1), (50, 9, 9)])
    assert problem is None and note.startswith("ill-conditioned from step 2")
    # ...and beyond it does not, nor a step 1 that was already off
    assert judge([calm, (0.5, 0.01, 0.1), (1, 1, 1)])[0].startswith("step 2")
    assert judge([(2 * tol, tol / 10, tol / 10), (0.3, 0.01, 0.1), calm])[0].startswith("step 1")
