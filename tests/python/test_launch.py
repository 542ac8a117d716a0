"""Strict eager issues executions to a launch thread (TORCH_TPU_LAUNCH_THREAD):
results come out in issue order, the same as without the thread, across
more executions than the launch queue holds, from several Python threads,
and a fork leaves both processes working."""
import os
import subprocess
import sys
import textwrap
import threading

import torch

import torch_tpu  # noqa: F401


def test_long_dependent_chain_in_issue_order():
    # More calls than the launch queue and the in-flight bound hold; every
    # call reads the previous one's result, in place and out of place.
    x = torch.zeros(8, device="tpu")
    y = torch.zeros(8, device="tpu")
    for i in range(3000):
        x.add_(1)
        y = y + x[:1]
    assert torch.equal(x.cpu(), torch.full((8,), 3000.0))
    assert torch.equal(y.cpu(), torch.full((8,), 3000.0 * 3001 / 2))


def test_threads_issue_concurrently():
    errors = []

    def work(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            a = torch.randn(64, 64, generator=g)
            t = a.to("tpu")
            for _ in range(200):
                t = torch.tanh(t @ t.T / 64)
                a = torch.tanh(a @ a.T / 64)
            torch.testing.assert_close(t.cpu(), a, rtol=1e-4, atol=1e-5)
        except Exception as e:  # reported below, with the thread's seed
            errors.append((seed, e))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


_TRAIN = textwrap.dedent("""
    import torch, torch_tpu
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 4)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(16, 32).to("tpu")
    y = torch.randint(0, 4, (16,)).to("tpu")
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(repr(losses))
""")


def _run(env_extra):
    env = dict(os.environ, **env_extra)
    r = subprocess.run([sys.executable, "-c", _TRAIN], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_same_results_without_the_launch_thread():
    # The same executables run either way: the losses agree bit for bit.
    with_thread = _run({"TORCH_TPU_LAUNCH_THREAD": "1"})
    without = _run({"TORCH_TPU_LAUNCH_THREAD": "0"})
    assert with_thread == without
    assert len(eval(with_thread)) == 5


def test_fork_after_tpu_work():
    # A forked child (a DataLoader worker, say) has no launch thread; CPU
    # work there is unaffected, and the parent's device work goes on.
    x = torch.arange(10.0, device="tpu")
    for _ in range(50):
        x = x + 1
    pid = os.fork()
    if pid == 0:
        ok = torch.equal(torch.arange(4.0) * 2, torch.tensor([0.0, 2, 4, 6]))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    for _ in range(50):
        x = x + 1
    assert torch.equal(x.cpu(), torch.arange(10.0) + 100)


def test_device_use_in_a_child_forked_after_tpu_work_is_an_error_not_a_hang():
    # The child inherits the client but not its threads: as with CUDA, it
    # gets an error naming the 'spawn' start method (a vLLM engine process
    # forked this way hung in synchronize()).
    x = torch.ones(3, device="tpu") + 1
    assert not torch.tpu._is_in_bad_fork()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        out = [str(torch.tpu._is_in_bad_fork())]
        for step in (lambda: (x + 1).cpu(), lambda: torch.ones(2, device="tpu"),
                     torch.accelerator.synchronize, lambda: x.cpu()):
            try:
                step()
                out.append("ran")
            except RuntimeError as e:
                out.append("spawn" if "'spawn' start method" in str(e) else str(e)[:200])
        os.write(wfd, "|".join(out).encode())
        os._exit(0)
    os.close(wfd)
    import select
    ready = select.select([rfd], [], [], 120)[0]
    if not ready:
        os.kill(pid, 9)
    got = os.read(rfd, 4096).decode() if ready else "hung"
    os.waitpid(pid, 0)
    assert got == "True|spawn|spawn|spawn|spawn", got
    assert torch.equal((x + 1).cpu(), torch.full((3,), 3.0))
