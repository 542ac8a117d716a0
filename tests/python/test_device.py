"""The device module, registration and runtime information."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_tpu
from conftest import run_python


def test_device_is_registered_and_available():
    assert torch._C._get_privateuse1_backend_name() == "tpu"
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    assert torch.tpu.is_initialized()
    assert torch.get_device_module("tpu") is torch.tpu


def test_smoke_matmul_relu_sum():
    torch.manual_seed(0)
    x = torch.randn(64, 64, device="tpu")
    got = (x @ x).relu().sum().item()
    xc = x.cpu()
    want = (xc @ xc).relu().sum().item()
    assert got == pytest.approx(want, rel=1e-4)


def test_api_tpu_device_is_idempotent():
    assert torch_tpu.api.tpu_device() == torch.device("tpu", 0)
    assert torch_tpu.api.tpu_device() == torch_tpu.tpu_device()


def test_bad_device_index_raises():
    with pytest.raises(IndexError, match="out of range"):
        torch.tpu.set_device(99)
    with pytest.raises((IndexError, RuntimeError)):
        torch.empty(2, device="tpu:99")


def test_device_context_manager():
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    assert torch.tpu.current_device() == 0


def test_generated_methods():
    t = torch.ones(2).tpu()
    assert t.is_tpu and t.device.type == "tpu"
    m = torch.nn.Linear(2, 2).tpu()
    assert m.weight.device.type == "tpu"


def test_rng_state_roundtrip_and_reproducible():
    torch.tpu.manual_seed(123)
    a = torch.randn(100, device="tpu").cpu()
    torch.tpu.manual_seed(123)
    b = torch.randn(100, device="tpu").cpu()
    assert torch.equal(a, b)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    c = torch.rand(50, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    d = torch.rand(50, device="tpu").cpu()
    assert torch.equal(c, d)
    e = torch.rand(50, device="tpu").cpu()
    assert not torch.equal(d, e)  # the offset advanced
    torch.manual_seed(7)  # torch.manual_seed seeds the tpu generator too
    f = torch.randn(10, device="tpu").cpu()
    torch.manual_seed(7)
    assert torch.equal(f, torch.randn(10, device="tpu").cpu())


def test_generator_object_on_device():
    g = torch.Generator(device="tpu")
    g.manual_seed(5)
    a = torch.randn(8, device="tpu", generator=g).cpu()
    g.manual_seed(5)
    b = torch.randn(8, device="tpu", generator=g).cpu()
    assert torch.equal(a, b)


def test_memory_figures_are_real():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    x = torch.ones(1024, 1024, device="tpu")  # 4 MiB
    x.add_(1)
    torch.tpu.synchronize()
    during = torch.tpu.memory_allocated()
    assert during - before >= 4 * 2**20
    assert torch.tpu.max_memory_allocated() >= during
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    del x
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() <= during - 4 * 2**20


def _host_available():
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))


def test_free_memory_of_a_host_memory_device_is_what_the_host_has_left():
    # On a CPU plugin the device's memory is the host's, shared with every
    # process: free must not exceed what the host has available (a serving
    # engine that sized its KV cache from total - ours was OOM-killed).
    torch.ones(2, device="tpu").add_(1).cpu()
    a = _host_available()
    free, total = torch.accelerator.get_memory_info(0)
    b = _host_available()
    assert free <= max(a, b) + 64 * 2**20, (free, a, b)
    assert total == torch.tpu.mem_get_info()[1] and free <= total


def test_cuda_style_memory_stats_keys():
    # the torch.cuda.memory_stats() keys training loops read (TorchTitan)
    x = torch.ones(256, 256, device="tpu")
    torch.tpu.synchronize()
    s = torch.tpu.memory_stats()
    for kind in ("allocated_bytes", "active_bytes", "reserved_bytes"):
        assert s[f"{kind}.all.current"] == s["bytes_in_use"] >= x.nbytes
        assert s[f"{kind}.all.peak"] == s["peak_bytes_in_use"] >= s[f"{kind}.all.current"]
    assert s["num_alloc_retries"] == 0 and s["num_ooms"] >= 0
    assert torch.tpu.get_device_properties().total_memory == s["bytes_limit"] > 0


def test_properties_and_amp():
    p = torch.tpu.get_device_properties(0)
    assert p.total_memory > 0 and p.name
    assert isinstance(torch.tpu.get_device_name(), str)
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()
    assert torch.tpu.is_bf16_supported()


def test_cuda_shaped_helpers():
    """Names code moved from torch.cuda calls, beside the core ones."""
    x = torch.ones(256, 1024, device="tpu")  # 1 MiB
    x.add_(1)
    torch.tpu.synchronize()
    summary = torch.tpu.memory_summary()
    assert "tpu:0" in summary and "peak in use" in summary
    torch.tpu.reset_max_memory_allocated()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    with torch.tpu.device_of(x):
        assert torch.tpu.current_device() == 0
    with torch.tpu.device_of(torch.ones(1)):  # not a tpu tensor: nothing changes
        assert torch.tpu.current_device() == 0
    assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError
    assert torch.tpu.is_current_stream_capturing() is False


def test_streams_and_events():
    s = torch.tpu.current_stream()
    assert s.device.type == "tpu"
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    start.record()
    torch.ones(10, device="tpu").sum().item()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    with torch.tpu.stream(s):
        pass
    torch.tpu.synchronize()


def test_pinned_host_memory():
    # DDP's reducer pins its host-side maps for a device; views of pinned
    # memory are pinned too, and copies from it land on the device.
    x = torch.randn(4, 4).pin_memory()
    assert x.is_pinned() and x[1:].is_pinned()
    assert not torch.randn(3).is_pinned()
    y = x.to("tpu", non_blocking=True)
    assert torch.equal(y.cpu(), x)


def test_info_cli():
    """`python -m torch_tpu.info`, as the README shows it."""
    r = subprocess.run([sys.executable, "-m", "torch_tpu.info"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "PJRT C API version: 0." in r.stdout and "execution mode: strict" in r.stdout
    fields = dict(line.split(": ", 1) for line in r.stdout.splitlines()
                  if ": " in line and not line.startswith(" "))
    assert Path(fields["PJRT plugin"]).is_file(), r.stdout
    from torch_tpu import plugins
    assert fields["plugin package"] == plugins.describe(fields["PJRT plugin"]), r.stdout
    assert fields["plugin package"].split()[0] in {p["name"] for p in plugins.installed()}, r.stdout
    assert int(fields["devices"]) == torch.tpu.device_count() >= 1, r.stdout
    assert re.search(r"^  tpu:0 ", r.stdout, re.M), r.stdout
    assert int(fields["native lowering rules"]) > 1000, r.stdout
    assert fields["distributed"].startswith("backend tpu_dist registered for tpu"), r.stdout


def test_autoload_with_plain_import_torch():
    r = run_python("import torch; x = torch.randn(64, 64, device='tpu'); "
                   "print((x @ x).relu().sum().item())")
    assert r.returncode == 0, r.stderr
    float(r.stdout.strip())


def test_autoload_can_be_disabled():
    r = run_python("import torch; print(hasattr(torch, 'tpu'))",
                   env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_missing_plugin_is_a_clear_lazy_error():
    code = (
        "import torch\n"
        "assert torch.tpu.is_available() is False\n"
        "assert torch.tpu.device_count() == 0\n"
        "try:\n"
        "    torch.ones(2, device='tpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n")
    r = run_python(code, env={"TORCH_TPU_PJRT_PLUGIN": "/nonexistent/libpjrt.so"})
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "/nonexistent/libpjrt.so" in r.stdout


def test_missing_cpu_plugin_names_the_package():
    code = (
        "import torch\n"
        "assert not torch.tpu.is_available()\n"
        "try:\n"
        "    torch.ones(2, device='tpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n")
    # Hide every site-packages folder from discovery.
    r = run_python("import torch_tpu._C as C, torch_tpu; C._set_search_dirs([])\n" + code,
                   env={"TORCH_TPU_PJRT_PLUGIN": "cpu"})
    assert r.returncode == 0, r.stderr
    assert "pip install" in r.stdout


def test_unknown_xla_flag_is_an_error_not_an_abort():
    """XLA aborts the process on a flag in XLA_FLAGS it does not know; one
    that the plugin does not name is refused first, with the flag named."""
    code = (
        "import torch, torch_tpu\n"
        "try:\n"
        "    torch.ones(2, device='tpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n")
    r = run_python(code, env={"XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_no_such_flag=3"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERR" in r.stdout and "'--xla_no_such_flag=3'" in r.stdout, r.stdout


def test_several_devices_on_the_cpu_plugin():
    code = (
        "import torch\n"
        "assert torch.tpu.device_count() == 2\n"
        "x = torch.arange(4.0, device='tpu:1') * 2\n"
        "assert x.device == torch.device('tpu', 1)\n"
        "y = x.to('tpu:0')\n"
        "assert y.device == torch.device('tpu', 0) and y.tolist() == [0.0, 2.0, 4.0, 6.0]\n"
        "with torch.tpu.device(1):\n"
        "    z = torch.ones(3, device='tpu') + 1\n"
        "assert z.device.index == 1 and z.sum().item() == 6.0\n"
        "assert torch.tpu.memory_allocated(1) > 0\n"
        "print('OK')\n")
    r = run_python(code, env={"TORCH_TPU_CPU_DEVICE_COUNT": "2"})
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_refuses_to_load_beside_another_privateuse1_backend():
    r = run_python("import torch\n"
                   "torch.utils.rename_privateuse1_backend('foo')\n"
                   "import torch_tpu\n",
                   env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode != 0
    assert "another out-of-tree device backend" in r.stderr and "'foo'" in r.stderr


def test_clean_exit_after_backward():
    code = ("import torch\n"
            "x = torch.randn(4, 4, device='tpu', requires_grad=True)\n"
            "torch.nn.functional.layer_norm(x, (4,)).sum().backward()\n"
            "print('done')\n")
    for _ in range(3):
        r = run_python(code)
        assert r.returncode == 0, r.stderr
        assert "done" in r.stdout
