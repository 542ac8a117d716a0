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
import bisect
import json
import os
import subprocess
import sys
import time


def run(command, n, result_path, timeout, lost, chunk=None, only=None):
    """Returns the ``done`` records, in file order. With |only| (item
    numbers), workers start only for ranges that hold some of them (a worker
    skips the others), and a chunk counts that many of them."""
    if os.path.exists(result_path):
        os.remove(result_path)
    todo = sorted(set(only)) if only is not None else range(n)
    pos = 0
    while pos < len(todo):
        part = todo[pos:pos + chunk] if chunk else todo[pos:]
        start, end = part[0], part[-1] + 1
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
            pos += len(part)  # the chunk is finished, or the worker died between items
            continue
        why = "hung" if proc.returncode == -9 else f"worker crashed (exit {proc.returncode})"
        with open(result_path, "a") as f:
            f.write(json.dumps({"done": begun, **lost(begun, why)}) + "\n")
        pos = bisect.bisect_right(todo, begun)
    open(result_path, "a").close()  # there even when no item wrote a record
    return [rec for rec in _records(result_path) if "done" in rec]


def add_worker_arguments(ap, rows=False):
    """The hidden options run() passes a worker: ``--worker --start --end
    --result`` (and ``--rows``, a file naming the items, with |rows|)."""
    import argparse
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--end", type=int, default=1 << 30, help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    if rows:
        ap.add_argument("--rows", default="", help=argparse.SUPPRESS)


def add_zoo_arguments(ap, json_default, timeout, item):
    """The options every zoo command shares (``--fast --report --timeout
    --json --markdown -v``, and the worker's); |item| names what one row is."""
    ap.add_argument("--fast", action="store_true", help="the CI slice")
    ap.add_argument("--report", default="", help="only write the report from this results JSON "
                    "(a finished run or its .partial file)")
    ap.add_argument("--timeout", type=int, default=timeout,
                    help=f"seconds without progress on one {item} = hung")
    ap.add_argument("--json", default=json_default)
    ap.add_argument("--markdown", default="", help="write the report here")
    ap.add_argument("-v", "--verbose", action="store_true")
    add_worker_arguments(ap, rows=True)


def fallback_counts(results):
    """{op: how many rows fell back to the CPU for it} over zoo results."""
    import collections
    counts = collections.Counter()
    for r in results.values():
        counts.update(r.get("fallbacks", {}).keys())
    return counts


def fallbacks_line(fallback_ops, item):
    """The report line of fallback_counts(): most used first, or "none"."""
    ops = sorted(fallback_ops.items(), key=lambda kv: -kv[1])
    return (f"Ops that fell back to the CPU ({item} using them): " +
            (", ".join(f"{k} ({v})" for k, v in ops) or "none"))


def work(result_path, items, fn):
    """The worker side of run(): for each (i, item) of |items|, appends
    ``{"begin": i}``, then ``{"done": i, **fn(item, progress)}``; |fn| may call
    ``progress()`` within a long item so that it does not read as hung."""
    with open(result_path, "a") as out:
        def progress():
            out.write("{}\n")
            out.flush()

        for i, item in items:
            out.write(json.dumps({"begin": i}) + "\n")
            out.flush()
            out.write(json.dumps({"done": i, **fn(item, progress)}) + "\n")
            out.flush()


def drive_rows(module, args, rows, lost, chunk, flags=()):
    """The driver of a zoo run as ``python -m module``: |rows| (JSON-able)
    go to a file beside ``args.json``, workers take them in chunks
    (``args.timeout`` seconds without progress = hung; ``-v`` passed on,
    and |flags|) and ``args.json`` keeps the records. ``lost(row, why)``
    gives (arch, result) for a row whose worker crashed or hung. Returns
    {arch: result}."""
    flags = (["-v"] if args.verbose else []) + list(flags)
    rows_path, partial = args.json + ".rows", args.json + ".partial"
    with open(rows_path, "w") as f:
        json.dump(rows, f)

    def command(start, end):
        return [sys.executable, "-m", module, "--worker", "--start", str(start), "--end", str(end),
                "--rows", rows_path, "--result", partial, *flags]

    def lost_record(i, why):
        if why == "hung":
            why = f"hung (no result in {args.timeout} s)"
        arch, result = lost(rows[i], why)
        return {"arch": arch, "result": result}

    done = run(command, len(rows), partial, args.timeout, lost_record, chunk=chunk)
    os.replace(partial, args.json)
    os.remove(rows_path)
    return {rec["arch"]: rec["result"] for rec in done}


def work_rows(args, fn):
    """The worker side of drive_rows(): ``fn(row, progress)`` gives (arch,
    result) for each row from ``args.start`` to ``args.end``; the result
    gets the row's seconds."""
    with open(args.rows) as f:
        rows = json.load(f)

    def one(row, progress):
        t0 = time.time()
        arch, result = fn(row, progress)
        result["seconds"] = round(time.time() - t0, 1)
        return {"arch": arch, "result": result}
    work(args.result, [(i, rows[i]) for i in range(args.start, min(args.end, len(rows)))], one)


def load_results(path):
    """{arch: result} from a zoo's records file (drive_rows' ``args.json``)."""
    return {rec["arch"]: rec["result"] for rec in _records(path) if "done" in rec}


def _records(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
