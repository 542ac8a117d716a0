"""Shared timing helpers: medians of repeated runs, always against a reference
measured in the same process."""
import json
import statistics
import subprocess
import sys
import time


def child_result(cmd, env=None, timeout=900):
    """Runs |cmd| (a benchmark's child process) and returns the JSON it
    printed on its `RESULT ` line; a failure raises with its stderr."""
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode or not line:
        raise RuntimeError(f"{' '.join(map(str, cmd[:3]))} failed:\n{r.stderr[-3000:]}")
    return json.loads(line[0][7:])


def settle():
    """Waits for tpu's background compiles (tiered compilation), so that
    what is timed next runs fully optimised code: the steady state."""
    torch = sys.modules.get("torch")
    tpu = getattr(torch, "tpu", None) if torch else None
    if tpu is not None and hasattr(tpu, "wait_for_compiles"):
        tpu.wait_for_compiles()


def median_time(fn, reps=7, inner=1, warmup=2):
    """Median seconds per call of fn() over |reps| timed runs of |inner| calls."""
    for _ in range(warmup):
        fn()
    settle()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def fmt_us(s):
    return f"{s * 1e6:9.1f} us"
