"""tpu_dist under torchrun with 2 processes (the machine's core count): the
worker scripts in tests/python/distributed/ check each case on every rank
and leave a result file per rank. Every launch runs under a timeout, so a
hang fails its test instead of stalling the suite."""
import json
import os
import signal
import subprocess
import sys

import pytest
import torch.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch built without distributed")

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed")


def torchrun(tmp_path, script, *args, nproc=2, timeout=300, env=None, monitor_interval=None):
    """Runs |script| under torchrun; returns (exit code, output, {rank: result}).
    |monitor_interval| is how often torchrun polls its workers; once one has
    failed it kills the others at its next poll."""
    out = tmp_path / "result"
    e = dict(os.environ, TPU_DIST_OUT=str(out), PYTHONUNBUFFERED="1")
    e.update(env or {})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}"]
    if monitor_interval is not None:
        cmd.append(f"--monitor-interval={monitor_interval}")
    cmd += [os.path.join(WORKERS, script), *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=e, start_new_session=True)
    try:
        text, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        text, _ = p.communicate()
        pytest.fail(f"{script} {' '.join(args)} hung for {timeout} s:\n{text[-4000:]}")
    results = {}
    for r in range(nproc):
        f = tmp_path / f"result.{r}"
        if f.exists():
            results[r] = json.loads(f.read_text())
    return p.returncode, text, results


def assert_all_passed(rc, text, results, nproc=2, at_least=1):
    assert rc == 0, text[-4000:]
    assert sorted(results) == list(range(nproc)), text[-4000:]
    for r, res in results.items():
        assert not res["failed"], f"rank {r}:\n" + "\n".join(f"{k}: {v}" for k, v in res["failed"].items())
        assert len(res["passed"]) >= at_least, (r, res["passed"])


FUSED = {"TORCH_TPU_DEFER_AND_FUSE": "1"}


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_collectives_match_gloo(tmp_path, mode):
    """Every collective, dtype and layout on tpu equals Gloo on CPU, in
    strict and in fused eager (where each collective is a cut)."""
    rc, text, results = torchrun(tmp_path, "collectives.py", env=FUSED if mode == "fused" else None)
    assert_all_passed(rc, text, results, at_least=110)


def test_misuse_raises_on_every_rank(tmp_path):
    rc, text, results = torchrun(tmp_path, "errors.py")
    assert_all_passed(rc, text, results, at_least=15)
    assert 2.5 < results[0]["values"]["timeout_seconds"] < 30


def test_dead_rank_is_an_error_not_a_hang(tmp_path):
    # torchrun kills the survivor at its first poll after rank 1 dies; polling
    # every 5 s gives rank 0 time to report what it saw on a loaded machine.
    rc, text, results = torchrun(tmp_path, "dead_rank.py", timeout=120, monitor_interval=5)
    assert rc != 0  # torchrun reports the dead rank
    assert 0 in results, text[-4000:]
    survivor = results[0]["values"]
    assert survivor["step"] == 1, survivor
    assert "DistBackendError: tpu_dist all_reduce" in survivor["error"], survivor
    assert survivor["seconds"] < 25, survivor


@pytest.mark.parametrize("order", ["mesh-first", "tensor-first"])
def test_device_model_under_torchrun(tmp_path, order):
    rc, text, results = torchrun(tmp_path, "devices.py", order)
    assert_all_passed(rc, text, results)
    for r, res in results.items():
        v = res["values"]
        assert v["device_count"] == 2 and v["accelerator_count"] == 2, v
        assert v["accelerator"] == "tpu" and v["mesh_device_type"] == "tpu", v
        assert v["default_backend"] == "tpu_dist" and v["tpu_backend"] == "ProcessGroupTpu", v
        # set_device(LOCAL_RANK) picks the rank's own device, as on CUDA; a
        # process that used the device first stays on tpu:0.
        assert v["current_device"] == (r if order == "mesh-first" else 0), v
        # the diagnostics see the group and count its collectives
        assert v["info"].startswith(f"distributed: rank {r} of 2, backends tpu:tpu_dist"), v
        assert not v["metrics"].startswith("tpu_dist: 0 collectives"), v


@pytest.mark.parametrize("variant", [("fp32", "prefetch", "sharded"),
                                     ("bf16", "no-prefetch", "full")])
def test_fsdp2_on_the_rank_device_as_pytorchs_example(tmp_path, variant):
    """PyTorch's FSDP2 example's setup (tpu:LOCAL_RANK never made current,
    the model built on meta and moved with to_empty): DeviceMesh makes
    LOCAL_RANK current, the losses equal one process on the whole batch, and
    a checkpoint (sharded DCP, or the example's full dicts broadcast from
    rank 0) reloads in a new run that trains on to the same losses."""
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    for phase, steps in (("save", 3), ("load", 2)):
        run = tmp_path / phase
        run.mkdir()
        rc, text, results = torchrun(run, "fsdp2_rank_device.py", phase, *variant, str(folder),
                                     timeout=600)
        assert_all_passed(rc, text, results, at_least=6)
        for r, res in results.items():
            v = res["values"]
            assert v["initialized_before_mesh"] is False, v
            assert v["current_device_after_mesh"] == r, v
            assert len(v["losses"]) == steps, v
        assert results[0]["values"]["losses"] == results[1]["values"]["losses"]


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_training_matches_one_process(tmp_path, mode):
    """DDP, FSDP2, DTensor, TP, 2-D FSDP x TP and distributed checkpoint on
    2 processes equal the 1-process run after 5 steps (float32 tolerance)."""
    rc, text, results = torchrun(tmp_path, "training.py", timeout=600,
                                 env=FUSED if mode == "fused" else None)
    assert_all_passed(rc, text, results, at_least=14)


def test_compiled_code_with_collectives(tmp_path):
    """Graphs break at collectives (no graph holds one); compiled DDP and
    compiled FSDP2 blocks match eager."""
    rc, text, results = torchrun(tmp_path, "compiled.py", timeout=600)
    assert_all_passed(rc, text, results, at_least=3)


def test_hugging_face_trainer_under_torchrun(tmp_path):
    """Trainer, unmodified, under torchrun: DDP on tpu over 2 processes logs
    the losses of the 1-process run with the same global batch, and ends
    with its weights (float32 tolerance)."""
    import torch

    out = tmp_path / "result"
    env = dict(os.environ, TPU_DIST_OUT=str(out))
    script = os.path.join(WORKERS, "hf_trainer.py")
    r = subprocess.run([sys.executable, script, "single"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    rc, text, _ = torchrun(tmp_path, "hf_trainer.py", "ddp")
    assert rc == 0, text[-4000:]
    one = torch.load(f"{out}.single.pt")
    two = torch.load(f"{out}.ddp.pt")
    assert (one["world"], two["world"]) == (1, 2) and two["device"] == "tpu:0", (one, two)
    assert len(two["losses"]) == 6
    torch.testing.assert_close(torch.tensor(two["losses"]), torch.tensor(one["losses"]),
                               rtol=1e-5, atol=1e-5)
    for k, v in one["params"].items():
        torch.testing.assert_close(two["params"][k], v, rtol=1e-4, atol=1e-5, msg=k)


def test_accelerate_launch(tmp_path):
    """`accelerate launch --multi_gpu --num_processes 2` (the flag CUDA users
    pass) runs a script on tpu with DDP through tpu_dist."""
    out = tmp_path / "result"
    env = dict(os.environ, TPU_DIST_OUT=str(out))
    launcher = os.path.join(os.path.dirname(sys.executable), "accelerate")
    r = subprocess.run([launcher, "launch", "--multi_gpu", "--num_processes", "2",
                        "--main_process_port", "0", os.path.join(WORKERS, "accelerate_script.py")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "result.accelerate.json").read_text())
    assert res == {"device": "tpu:0", "processes": 2, "distributed_type": "DistributedType.MULTI_GPU",
                   "same_weights": True}, res


def test_set_timeout_reaches_every_backend(tmp_path):
    """dist.set_timeout (TorchTitan shortens its timeouts with it after the
    first step) on a group made with 120 s: 3 s then holds for its tpu_dist
    and its CPU Gloo."""
    rc, text, results = torchrun(tmp_path, "timeouts.py", timeout=180)
    assert_all_passed(rc, text, results, at_least=4)
    for device in ("tpu", "cpu"):
        assert 2.5 < results[0]["values"][f"{device}_seconds"] < 30, results[0]["values"]


def test_set_timeout_installed_only_where_torch_lacks_it(monkeypatch):
    import torch_tpu.distributed as td

    assert callable(dist.set_timeout)  # torch's own, or installed at import
    monkeypatch.delattr(dist, "set_timeout", raising=False)
    td._install_set_timeout()
    assert dist.set_timeout is td.set_timeout
    theirs = lambda timeout, group=None: None  # noqa: E731
    monkeypatch.setattr(dist, "set_timeout", theirs)
    td._install_set_timeout()
    assert dist.set_timeout is theirs
