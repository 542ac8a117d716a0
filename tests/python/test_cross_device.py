"""CUDA's cross-device semantics with several tpu devices in one process
(the CPU plugin presents 2 with TORCH_TPU_CPU_DEVICE_COUNT=2): the checks in
cross_device_checks.py run in a fresh interpreter, in strict and in fused
eager, under a timeout."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = ["ops_run_on_their_tensors_device", "factories_and_random_ops_take_their_device",
          "foreach_ops_on_one_other_device", "copies_between_devices",
          "foreach_copy_between_devices", "foreach_ops_over_several_devices",
          "sparse_tensors_stay_on_their_device", "mixed_devices_raise_pytorchs_error", "device_index_past_device_count_raises",
          "training_on_the_other_device"]


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_ops_follow_their_tensors_across_two_devices(mode):
    env = dict(os.environ, TORCH_TPU_CPU_DEVICE_COUNT="2")
    env.pop("TORCH_TPU_DEFER_AND_FUSE", None)
    if mode == "fused":
        env["TORCH_TPU_DEFER_AND_FUSE"] = "1"
    r = subprocess.run([sys.executable, os.path.join(HERE, "cross_device_checks.py"), mode],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert not result["failed"], "\n".join(f"{k}: {v}" for k, v in result["failed"].items())
    want = CHECKS + (["compiled_graphs_run_on_their_device"] if mode == "strict" else [])
    assert result["passed"] == want, result["passed"]
