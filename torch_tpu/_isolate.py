"""Runs a numbered list of work items in worker subprocesses, so that a crash
(segfault, abort) or a hang on one item costs that item only.

A worker started with ``command(start, end)`` handles items ``start`` to
``end - 1`` (at most ``chunk`` of them: a fresh process per chunk bounds what
one process accumulates, such as compiled executables) and appends JSON lines
to ``result_path``: ``{"begin": i}`` before item ``i`` and ``{"done": i, ...}``
after it (other lines, such as ``{}`` written as progress within an item,
only count as progress). If the worker dies, or the file does not grow for ``timeout``
seconds, the item it had begun is recorded through ``lost(i, why)`` (a
JSON-able dict to append) and a new worker resumes after it."""
import json
import os
import subprocess
import time


def run(command, n, result_path, timeout, lost, chunk=None):
    """Returns the ``done`` records, in file order."""
    if os.path.exists(result_path):
        os.remove(result_path)
    start = 0
    while start < n:
        end = min(start + chunk, n) if chunk else n
        proc = subprocess.Popen(command(start, end))
        last_size, last_change = -1, time.time()
        while proc.poll() is None:
            time.sleep(0.5)
            size = os.path.getsize(result_path) if os.path.exists(result_path) else 0
            if size != last_size:
                last_size, last_change = size, time.time()
            elif time.time() - last_change > timeout:
                proc.kill()
                proc.wait()
                break
        begun, done = None, set()
        for rec in _records(result_path):
            if "begin" in rec:
                begun = rec["begin"]
            elif "done" in rec:
                done.add(rec["done"])
        if proc.returncode == 0 or begun is None or begun < start or begun in done:
            start = end  # the chunk is finished, or the worker died between items
            continue
        why = "hung" if proc.returncode == -9 else f"worker crashed (exit {proc.returncode})"
        with open(result_path, "a") as f:
            f.write(json.dumps({"done": begun, **lost(begun, why)}) + "\n")
        start = begun + 1
    return [rec for rec in _records(result_path) if "done" in rec]


def _records(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
