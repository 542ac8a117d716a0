"""Ray Train on tpu: a TorchTrainer runs DDP on 2 local Ray workers with the
tpu_dist backend, written as a CUDA user's script with "cuda" made "tpu"
(tests/python/distributed/ray_train.py; docs/distributed.md, "Ray"), and
logs the per-step losses of the same training in one process, on tpu and on
the CPU; the workers end with the same weights, which Ray's checkpoint holds.

The Ray test is selected by `-m ray` (deselected by default: Ray is not in
setup.sh; the install command is in docs/distributed.md, and .ci/run installs
it after the suite and requires the test to pass). About 45 s on 2 cores.
The loader Ray calls is tested in the default suite."""
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed")
SCRIPT = os.path.join(WORKERS, "ray_train.py")
sys.path.insert(0, WORKERS)
import ray_train  # noqa: E402  (the model, data and loop the Ray workers run)

# float32: the runs differ only in summation order (each worker's mean over
# its half of the batch, averaged by the all-reduce, against one mean over
# the whole batch); measured: 0 against tpu in one process, 2.4e-7 against
# the CPU. A wrong batch, or gradients summed instead of averaged, moves the
# losses by 1e-2 or more.
TOL = 1e-5


def test_loader_ray_calls_registers_tpu_dist():
    """Ray Train calls torch_tpu._loader.load() in each worker before
    init_process_group when the backend is "tpu_dist" (and fails without
    it); loading again changes nothing, and selects no device."""
    import torch.distributed as dist

    import torch_tpu._loader

    before = torch.tpu.current_device()
    torch_tpu._loader.load()
    torch_tpu._loader.load(allow_xla_backend=True)
    assert torch_tpu._loader._LOADED
    assert "tpu_dist" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu_dist"
    assert torch.tpu.current_device() == before


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory):
    # selected on purpose: a missing or broken Ray is a failure here
    import ray.train.torch  # noqa: F401

    out = tmp_path_factory.mktemp("ray") / "result.json"
    p = subprocess.Popen([sys.executable, SCRIPT, str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True,
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        text, _ = p.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        text, _ = p.communicate()
        pytest.fail(f"ray_train.py hung for 420 s:\n{text[-4000:]}")
    assert p.returncode == 0, text[-6000:]
    result = json.loads(out.read_text())
    assert result["error"] is None, result["error"]
    assert sorted(result["workers"]) == ["0", "1"], text[-6000:]
    print(f"ray_train.py: {result['seconds']}")
    return result


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_torch_trainer_ddp_matches_one_process(ray_run):
    tpu_losses, tpu_params = ray_train.train_one_process(torch.device("tpu"))
    cpu_losses, cpu_params = ray_train.train_one_process(torch.device("cpu"))
    w0, w1 = ray_run["workers"]["0"], ray_run["workers"]["1"]
    for r, w in (("0", w0), ("1", w1)):
        assert w["rank"] == int(r) and w["world_size"] == 2 and w["local_rank"] == int(r), w
        # DDP on tpu through tpu_dist, nothing on the CPU fallback
        assert w["wrapper"] == "DistributedDataParallel", w
        assert w["param_device"].startswith("tpu"), w
        assert w["backend"] == "tpu_dist" and w["tpu_dist"], w
        # DDP's parameter broadcast, a gradient all-reduce and the loss's per step
        assert w["collectives"] >= 1 + 2 * ray_train.STEPS, w
        assert not w["fallbacks"], w["fallbacks"]
        assert w["master_addr"] == w["node_ip"] == "127.0.0.1", w
    # each worker trained on its own half of the batch
    assert w0["local_losses"] != w1["local_losses"]
    # the all-reduced loss and the weights: the same on both workers ...
    assert w0["losses"] == w1["losses"]
    assert w0["params"] == w1["params"]
    ray_losses = w0["losses"]
    assert len(ray_losses) == ray_train.STEPS
    # ... and the one-process run's, on tpu and on the CPU
    for name, ref in (("tpu", tpu_losses), ("cpu", cpu_losses)):
        diff = [abs(a - b) for a, b in zip(ray_losses, ref)]
        assert max(diff) <= TOL, (name, ray_losses, ref, diff)
    for name, ref in (("tpu", tpu_params), ("cpu", cpu_params)):
        assert max(abs(a - b) for a, b in zip(w0["params"], ref)) <= TOL, name
    assert ray_losses[-1] < ray_losses[0] - 0.2, ray_losses  # it trains
    # Ray's own record: the last metrics reported, the checkpointed weights
    assert ray_run["metrics"] == {"loss": ray_losses[-1], "step": ray_train.STEPS}, ray_run["metrics"]
    assert ray_run["checkpoint"] == w0["params"]
    print("losses (Ray, 2 workers):", ray_losses)
    print("losses (tpu, 1 process): ", tpu_losses)
    print("losses (cpu, 1 process): ", cpu_losses)
