"""Every public device API on ``tpu``, swept: each function of
``torch.accelerator``, ``torch.accelerator.memory`` and ``torch.tpu``, the
methods of ``torch.Stream``, ``torch.Event`` and ``torch.accelerator.Graph``,
called with valid and invalid arguments, before the first tpu tensor exists
and after. Nothing may crash or hang; what raises must raise a normal Python
exception with a clear message (a device index past ``device_count()`` names
the device and the index); what has a CUDA analogue returns what CUDA's does.

The functions are enumerated from the modules, so a new public function fails
``test_every_public_function_is_swept`` until it has calls here (or a reason
in ``NOT_CALLED``).

Calls run in child interpreters. Before first use, each call runs in its own
process forked from one that imported torch and nothing more (so every call
meets an uninitialised runtime) and then makes a tpu tensor, which must still
work. After first use, the calls run one after another in one process that
made a tensor first; a call that kills or hangs that process is named from the
marker it printed, and the rest run in a new process.

``python tests/python/test_device_api_sweep.py`` prints every outcome.
"""
import inspect
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
CALL_TIMEOUT = 60  # seconds one call may take before it counts as a hang

# -- what is swept ---------------------------------------------------------------

MODULES = ("torch.accelerator", "torch.accelerator.memory", "torch.tpu")
CLASSES = ("torch.Stream", "torch.Event", "torch.accelerator.Graph")

# Public names that are not functions to call, with the reason.
NOT_CALLED = {
    "torch.tpu.OutOfMemoryError": "the exception class device OOM raises (torch.OutOfMemoryError)",
    "torch.tpu.amp": "a module (torch.tpu.amp's autocast and GradScaler have their own tests)",
}

# How a test obtains the object whose methods a class entry calls.
OBJECTS = {
    "torch.Stream": "torch.Stream(device='tpu')",
    "torch.Event": "torch.Event(device='tpu')",
    "torch.accelerator.Graph": "torch.accelerator.Graph()",
}


def _module(name):
    import importlib

    return importlib.import_module(name) if name != "torch.tpu" else importlib.import_module(
        "torch").tpu


def public_names():
    """Qualified names of the public callables of MODULES and the public
    methods and attributes of CLASSES."""
    import torch  # noqa: F401

    names = set()
    for modname in MODULES:
        mod = _module(modname)
        exported = set(getattr(mod, "__all__", ()))
        for n in dir(mod):
            if n.startswith("_"):
                continue
            obj = getattr(mod, n)
            if inspect.ismodule(obj) and n not in exported:
                continue  # torch.tpu.torch, torch.accelerator.memory, ...
            owner = getattr(obj, "__module__", None) or ""
            # Helpers a module imported (contextlib, dataclass, Any) are not its API.
            if n in exported or (callable(obj) and owner.startswith(("torch.accelerator",
                                                                     "torch_tpu"))):
                names.add(f"{modname}.{n}")
    for clsname in CLASSES:
        cls = eval(clsname, {"torch": __import__("torch")})
        for n in dir(cls):
            if not n.startswith("_"):
                names.add(f"{clsname}.{n}")
    return names


# -- the calls -------------------------------------------------------------------
# A call: (name it covers, code that sets r, expectation, check on r or None).
# Expectations: "ok" (returns; the check, if any, holds), "any" (returns or
# raises clearly), or ("raises", (exception class names), message regex).

OK, ANY = "ok", "any"


def RAISES(*types, match=None):
    return ("raises", tuple(t if isinstance(t, str) else t.__name__ for t in types), match)


ARG_ERRORS = (TypeError, ValueError, RuntimeError, IndexError, NotImplementedError)
# A device index past device_count(): an error naming the device and the index.
BAD_INDEX = RAISES(IndexError, ValueError, RuntimeError, match=r"(?s)(tpu.*\b99\b|\b99\b.*tpu)")
NOT_TPU = RAISES(ValueError, RuntimeError, TypeError, match=r"tpu|accelerator")
BAD_TYPE = RAISES(*ARG_ERRORS)

VALID_DEVICES = ["", "0", "'tpu'", "'tpu:0'", "torch.device('tpu', 0)", "torch.device('tpu')"]
VALID_INDEXED = ["0", "'tpu:0'", "torch.device('tpu', 0)"]
WRONG_DEVICES = ["'cpu'", "'cuda'", "'cuda:0'", "torch.device('cpu')"]
BAD_INDICES = ["99", "'tpu:99'", "torch.device('tpu', 99)"]
WRONG_TYPES = ["1.5", "'bogus'", "[0]", "object()"]


def C(name, code, expect=OK, check=None, phases=("before", "after")):
    return {"name": name, "code": code, "expect": expect, "check": check,
            "phases": list(phases)}


def table(name, *rows):
    """Calls ``r = name(args)`` for each row (args, expectation[, check])."""
    return [C(name, f"r = {name}({row[0]})", *row[1:]) for row in rows]


def device_calls(name, check=None, kind="optional", *, call=None, strict_types=True,
                 lenient_before=False):
    """The device-argument table for one function: valid devices, indices
    past device_count(), negative indices, devices of another type and
    arguments of the wrong type. |call| formats the code from the argument
    (default: ``r = name(arg)``); kind "required" leaves out the no-argument
    call and devices without an index."""
    call = call or (lambda a: f"r = {name}({a})")
    valid = VALID_DEVICES if kind == "optional" else VALID_INDEXED
    out = []
    for i, a in enumerate(valid):
        out.append(C(name, call(a), OK, check, ("before", "after") if i < 2 else ("after",)))
    # lenient_before: PyTorch's accelerator memory queries (and synchronize)
    # answer {} / 0 / None before the device is initialised, as CUDA's do,
    # without looking at the argument.
    for i, a in enumerate(BAD_INDICES):
        before = ANY if lenient_before else BAD_INDEX
        if i == 0:
            out.append(C(name, call(a), before, None, ("before",)))
        out.append(C(name, call(a), BAD_INDEX, None, ("after",)))
    # -1 is the current device (c10's "no index"; a no-op for set_device, as
    # on CUDA); -2 may raise, clearly; 300 does not fit a device index.
    out.append(C(name, call("-1"), OK, check, ("after",)))
    out.append(C(name, call("-2"), ANY, None))
    out.append(C(name, call("300"), BAD_TYPE, None, ("after",)))
    for i, a in enumerate(WRONG_DEVICES):
        if i == 0:
            out.append(C(name, call(a), ANY if lenient_before else NOT_TPU, None,
                         ("before",)))
        out.append(C(name, call(a), NOT_TPU, None, ("after",)))
    for a in WRONG_TYPES:
        out.append(C(name, call(a), BAD_TYPE if strict_types else ANY, None, ("after",)))
    return out


IS_INT = "type(r) is int and r >= 0"
IS_NONE = "r is None"
IS_STREAM = "isinstance(r, torch.Stream) and r.device == torch.device('tpu', 0)"
IS_STATE = "r.dtype == torch.uint8 and r.device.type == 'cpu' and r.numel() == 16"
MEM_PAIR = "len(r) == 2 and all(type(v) is int for v in r) and r[1] > 0 and r[0] <= r[1]"


def with_(expr):
    return lambda a: f"with {expr.format(a)}:\n    r = None"


def accelerator_calls():
    A = "torch.accelerator"
    M = "torch.accelerator.memory"
    out = [
        C(f"{A}.is_available", f"r = {A}.is_available()", OK, "r is True"),
        C(f"{A}.device_count", f"r = {A}.device_count()", OK, "type(r) is int and r >= 1"),
        C(f"{A}.current_accelerator", f"r = {A}.current_accelerator()", OK,
          "r == torch.device('tpu')"),
        C(f"{A}.current_accelerator", f"r = {A}.current_accelerator(True)", OK,
          "r == torch.device('tpu')"),
        C(f"{A}.current_accelerator", f"r = {A}.current_accelerator('x')", ANY),
        *table(f"{A}.current_device_index",
               ("", OK, "r == 0"),
               ("0", BAD_TYPE)),
        C(f"{A}.current_device_idx", f"r = {A}.current_device_idx()", OK, "r == 0"),
        *table(f"{A}.set_stream",
               (f"{A}.current_stream()", OK, IS_NONE),
               ("torch.Stream(device='tpu')", OK, IS_NONE),
               ("torch.Stream(device='cpu')", ANY),
               ("None", BAD_TYPE),
               ("'tpu'", BAD_TYPE),
               ("", BAD_TYPE)),
        *table(f"{A}.Graph",
               ("", RAISES(RuntimeError, match="tpu")),
               ("keep_graph=True", RAISES(RuntimeError, match="tpu"))),
        *table(f"{A}.empty_cache",
               ("", OK, IS_NONE),
               ("0", BAD_TYPE)),
        C(f"{A}.empty_host_cache", f"r = {A}.empty_host_cache()", OK, IS_NONE),
        C(f"{A}.empty_host_cache", "x = torch.ones(4).pin_memory()\n"
          f"r = {A}.empty_host_cache()\nassert x.is_pinned() and x.sum().item() == 4", OK,
          IS_NONE),
        C(f"{A}.empty_host_cache", f"r = {A}.empty_host_cache(0)", BAD_TYPE),
    ]
    out += device_calls(f"{A}.current_stream", IS_STREAM, strict_types=False)
    # A no-op before first use, as on CUDA, whatever the index.
    out += device_calls(f"{A}.synchronize", IS_NONE, strict_types=False,
                        lenient_before=True)
    out += device_calls(f"{A}.get_device_capability",
                        "isinstance(r, dict) and torch.float32 in r['supported_dtypes']",
                        strict_types=False)
    for n in ("set_device_index", "set_device_idx"):
        out += device_calls(f"{A}.{n}", IS_NONE, kind="required", strict_types=False)
    # device_index takes an int or None.
    di = with_(A + ".device_index({})")
    out += [
        C(f"{A}.device_index", di("0"), OK),
        C(f"{A}.device_index", di("None"), OK),
        C(f"{A}.device_index", di("-1"), OK),
        C(f"{A}.device_index", di("99"), BAD_INDEX),
        C(f"{A}.device_index", di("300"), BAD_TYPE),
        C(f"{A}.device_index", di("-2"), ANY),
        C(f"{A}.device_index", di("'tpu:0'"), BAD_TYPE),
        C(f"{A}.device_index", f"with {A}.device_index(0):\n    with {A}.device_index(0):\n"
          f"        pass\nr = {A}.current_device_index()", OK, "r == 0"),
    ]
    checks = {
        "memory_stats": "isinstance(r, dict) and all(type(v) is int for v in r.values())",
        "memory_allocated": IS_INT, "max_memory_allocated": IS_INT,
        "memory_reserved": IS_INT, "max_memory_reserved": IS_INT,
        "reset_peak_memory_stats": IS_NONE, "reset_accumulated_memory_stats": IS_NONE,
        "get_memory_info": MEM_PAIR,
    }
    for mod in (A, M):
        for n, check in checks.items():
            out += device_calls(f"{mod}.{n}", check, strict_types=False,
                                lenient_before=n != "get_memory_info")
    for n in ("empty_cache", "empty_host_cache"):
        out.append(C(f"{M}.{n}", f"r = {M}.{n}()", OK, IS_NONE))
    # The figures are the device's: a live 4 KiB tensor counts, and its
    # peak goes once it is freed and the peak reset.
    big = f"x = torch.ones(1024, device='tpu')\n{A}.synchronize()\n"
    out += [
        C(f"{M}.memory_allocated", f"{big}r = {M}.memory_allocated()", OK, "r >= 4096",
          ("after",)),
        C(f"{M}.memory_stats", f"{big}r = {M}.memory_stats()", OK,
          "r['allocated_bytes.all.peak'] >= r['allocated_bytes.all.current'] >= 4096",
          ("after",)),
        C(f"{M}.reset_peak_memory_stats", f"{big}peak = {M}.max_memory_allocated()\ndel x\n"
          f"{A}.synchronize()\n{M}.reset_peak_memory_stats()\n"
          f"r = (peak, {M}.max_memory_allocated(), {M}.memory_allocated())", OK,
          "r[0] >= 4096 and r[0] > r[1] >= r[2]", ("after",)),
        C(f"{M}.get_memory_info", f"r = ({M}.get_memory_info(), torch.tpu.mem_get_info())", OK,
          "r[0][1] == r[1][1]", ("after",)),
        C(f"{A}.synchronize", f"x = torch.ones(8, device='tpu') * 3\nr = {A}.synchronize()\n"
          "assert x.sum().item() == 24", OK, IS_NONE),
    ]
    return out


def tpu_calls():
    T = "torch.tpu"
    out = [
        C(f"{T}.is_available", f"r = {T}.is_available()", OK, "r is True"),
        C(f"{T}.is_initialized", f"r = {T}.is_initialized()", OK, "type(r) is bool"),
        C(f"{T}.init", f"r = {T}.init()", OK, f"r is None and {T}.is_initialized()"),
        C(f"{T}.device_count", f"r = {T}.device_count()", OK, "type(r) is int and r >= 1"),
        C(f"{T}.current_device", f"r = {T}.current_device()", OK, "r == 0"),
        *table(f"{T}.manual_seed",
               ("1", OK, IS_NONE),
               ("2**64 - 1", OK, IS_NONE),
               ("'x'", BAD_TYPE),
               ("None", BAD_TYPE),
               ("-1", ANY)),
        *table(f"{T}.manual_seed_all",
               ("3", OK, IS_NONE),
               ("'x'", BAD_TYPE)),
        C(f"{T}.seed", f"r = {T}.seed()", OK, IS_INT),
        C(f"{T}.seed_all", f"r = {T}.seed_all()", OK, IS_NONE),
        C(f"{T}.initial_seed", f"{T}.manual_seed(7)\nr = {T}.initial_seed()", OK, "r == 7"),
        C(f"{T}.get_rng_state_all", f"r = {T}.get_rng_state_all()", OK,
          "isinstance(r, list) and len(r) == torch.tpu.device_count()"),
        C(f"{T}.set_rng_state_all", f"r = {T}.set_rng_state_all({T}.get_rng_state_all())", OK,
          IS_NONE),
        *table(f"{T}.set_rng_state_all",
               ("[1]", BAD_TYPE),
               ("None", BAD_TYPE)),
        C(f"{T}.get_amp_supported_dtype", f"r = {T}.get_amp_supported_dtype()", OK,
          "torch.bfloat16 in r"),
        *table(f"{T}.is_bf16_supported",
               ("", OK, "r is True"),
               ("False", OK, "r is True")),
        C(f"{T}.Event", f"r = {T}.Event()", OK, "isinstance(r, torch.Event)"),
        C(f"{T}.Event", f"r = {T}.Event(enable_timing=True, blocking=True)", OK,
          "isinstance(r, torch.Event) and r.device.type == 'tpu'"),
        *table(f"{T}.Event",
               ("interprocess=True", ANY),
               ("enable_timing='x'", ANY)),
        *table(f"{T}.set_stream",
               (f"{T}.current_stream()", OK, IS_NONE),
               ("None", OK, IS_NONE),  # as torch.cuda's
               ("'x'", BAD_TYPE),
               ("torch.Stream(device='cpu')", NOT_TPU)),
        C(f"{T}.stream", f"with {T}.stream({T}.current_stream()) as r:\n    pass", OK,
          IS_STREAM),
        C(f"{T}.stream", f"with {T}.stream(None) as r:\n    pass", OK, IS_NONE),
        C(f"{T}.stream", f"with {T}.stream('x'):\n    r = None", BAD_TYPE),
        C(f"{T}.stream", f"with {T}.stream(torch.Stream(device='cpu')):\n    r = None",
          NOT_TPU),
        C(f"{T}.is_current_stream_capturing", f"r = {T}.is_current_stream_capturing()", OK,
          "r is False"),
        *table(f"{T}.empty_cache",
               ("", OK, IS_NONE),
               ("0", BAD_TYPE)),
        C(f"{T}.fallback_counts", f"r = {T}.fallback_counts()", OK, "isinstance(r, dict)"),
        *table(f"{T}.wait_for_compiles",
               ("", OK, "r is True"),
               ("0", OK, "type(r) is bool"),
               ("-1", OK, "type(r) is bool"),
               ("'x'", BAD_TYPE)),
        C(f"{T}.device_of", f"with {T}.device_of(torch.ones(1, device='tpu')):\n"
          f"    r = {T}.current_device()", OK, "r == 0"),
        C(f"{T}.device_of", f"with {T}.device_of(torch.ones(1)):\n    r = None", OK),
        C(f"{T}.device_of", f"with {T}.device_of(None):\n    r = None", ANY),
        C(f"{T}.memory_summary", f"r = {T}.memory_summary(abbreviated=True)", OK,
          "isinstance(r, str) and 'tpu:0' in r"),
        C(f"{T}._lazy_init", f"r = {T}._lazy_init()", OK, IS_NONE),
        C(f"{T}._is_in_bad_fork", f"r = {T}._is_in_bad_fork()", OK, "r is False"),
        C(f"{T}._get_cache_stats", f"r = {T}._get_cache_stats()", OK, "isinstance(r, dict)"),
    ]
    checks = {
        "synchronize": IS_NONE, "memory_stats": "isinstance(r, dict)",
        "mem_get_info": MEM_PAIR, "memory_allocated": IS_INT, "max_memory_allocated": IS_INT,
        "memory_reserved": IS_INT, "max_memory_reserved": IS_INT,
        "reset_peak_memory_stats": IS_NONE, "reset_max_memory_allocated": IS_NONE,
        "memory_summary": "isinstance(r, str)", "get_device_name": "isinstance(r, str) and r",
        "get_device_properties": "r.total_memory > 0 and r.name",
        "current_stream": IS_STREAM, "default_stream": IS_STREAM, "Stream": IS_STREAM,
        "get_rng_state": IS_STATE,
    }
    for n, check in checks.items():
        out += device_calls(f"{T}.{n}", check)
    out += device_calls(f"{T}.set_device", IS_NONE, kind="required")
    out += device_calls(f"{T}.device", IS_NONE, call=with_(T + ".device({})"), kind="required")
    out.append(C(f"{T}.device", f"with {T}.device(None):\n    r = None", OK))
    state = f"{T}.get_rng_state()"
    out += device_calls(f"{T}.set_rng_state", IS_NONE,
                        call=lambda a: f"r = {T}.set_rng_state({state}, {a or 'None'})")
    out += [
        C(f"{T}.set_rng_state", f"r = {T}.set_rng_state({state})", OK, IS_NONE),
        C(f"{T}.set_rng_state", f"r = {T}.set_rng_state(torch.zeros(3, dtype=torch.uint8))",
          BAD_TYPE),
        *table(f"{T}.set_rng_state",
               ("torch.zeros(16)", BAD_TYPE),
               ("'x'", BAD_TYPE),
               ("None", BAD_TYPE)),
        C(f"{T}.set_rng_state",
          f"r = {T}.set_rng_state(torch.zeros(16, dtype=torch.uint8, device='tpu'))", ANY),
        # A strided state is read as its values, as torch.cuda.set_rng_state clones it.
        C(f"{T}.set_rng_state", "s = torch.zeros(32, dtype=torch.uint8)\ns[::2] = "
          f"{state}\n{T}.set_rng_state(s[::2])\nr = {T}.get_rng_state()", OK,
          f"torch.equal(r, s[::2])"),
        C(f"{T}.Stream", f"r = {T}.Stream(priority=-1)", OK, IS_STREAM),
    ]
    return out


def stream_event_calls():
    S = "torch.Stream(device='tpu')"
    E = "torch.Event(device='tpu', enable_timing=True)"
    out = [
        C("torch.Stream", f"r = {S}", OK, IS_STREAM),
        C("torch.Stream", "r = torch.Stream(device='tpu', priority=-1)", OK, IS_STREAM),
        C("torch.Stream", "r = torch.Stream(device='tpu', priority=5)", ANY),
        C("torch.Stream", "r = torch.Stream(device='tpu:99')", BAD_INDEX),
        C("torch.Stream", "r = torch.Stream(device='tpu', priority='x')", BAD_TYPE),
        C("torch.Stream", "r = torch.Stream()", OK, IS_STREAM),
        C("torch.Stream.query", f"r = {S}.query()", OK, "r is True"),
        C("torch.Stream.synchronize", f"r = {S}.synchronize()", OK, IS_NONE),
        C("torch.Stream.synchronize", f"x = torch.ones(8, device='tpu') + 1\n"
          f"r = {S}.synchronize()", OK, IS_NONE),
        C("torch.Stream.record_event", f"r = {S}.record_event()", OK,
          "isinstance(r, torch.Event) and r.query()"),
        C("torch.Stream.record_event", f"r = {S}.record_event({E})", OK,
          "isinstance(r, torch.Event)"),
        C("torch.Stream.record_event", f"r = {S}.record_event('x')", BAD_TYPE),
        C("torch.Stream.wait_event", f"e = {E}\ne.record()\nr = {S}.wait_event(e)", OK, IS_NONE),
        C("torch.Stream.wait_event", f"r = {S}.wait_event({E})", OK, IS_NONE),
        # (PyTorch's Stream.wait_event and wait_stream, and Event.record and
        # wait, read their argument as an Event / Stream without checking its
        # type, on every device: what they do with another object is
        # undefined, so the sweep passes them none.)
        C("torch.Stream.wait_stream", f"r = {S}.wait_stream({S})", OK, IS_NONE),
        C("torch.Stream.wait_stream", f"r = {S}.wait_stream(torch.accelerator.current_stream())",
          OK, IS_NONE),
        C("torch.Stream.is_capturing", f"r = {S}.is_capturing()", OK, "r is False"),
        C("torch.Stream.native_handle", f"r = {S}.native_handle", ANY),
        C("torch.Stream.device", f"r = {S}.device", OK, "r == torch.device('tpu', 0)"),
        C("torch.Stream.device_index", f"r = {S}.device_index", OK, "r == 0"),
        C("torch.Stream.device_type", f"r = {S}.device_type", OK, "type(r) is int"),
        C("torch.Stream.stream_id", f"r = {S}.stream_id", OK, "type(r) is int"),
        C("torch.Stream", f"s = {S}\nwith s:\n    r = torch.accelerator.current_stream()", OK,
          "r == s"),
        C("torch.Stream", f"r = ({S} == {S}, hash({S}), repr({S}))", OK, "r[0] is True"),
        C("torch.Event", "r = torch.Event()", OK, "isinstance(r, torch.Event)"),
        C("torch.Event", "r = torch.Event(device='tpu:99')", ANY),
        C("torch.Event", "r = torch.Event(device='cpu')", ANY),
        C("torch.Event", "r = torch.Event(device='tpu', enable_timing='x')", ANY),
        C("torch.Event.record", f"r = {E}.record()", OK, IS_NONE),
        C("torch.Event.record", f"r = {E}.record({S})", OK, IS_NONE),
        C("torch.Event.record", f"r = {E}.record(torch.Stream(device='cpu'))", ANY),
        C("torch.Event.query", f"r = {E}.query()", OK, "r is True"),
        C("torch.Event.query", f"e = {E}\ne.record()\nr = e.query()", OK, "r is True"),
        C("torch.Event.synchronize", f"r = {E}.synchronize()", OK, IS_NONE),
        C("torch.Event.synchronize", f"e = {E}\ne.record()\nr = e.synchronize()", OK, IS_NONE),
        C("torch.Event.wait", f"e = {E}\ne.record()\nr = e.wait()", OK, IS_NONE),
        C("torch.Event.wait", f"r = {E}.wait({S})", OK, IS_NONE),
        C("torch.Event.elapsed_time",
          f"a, b = {E}, {E}\na.record()\nx = torch.ones(64, device='tpu') * 2\n"
          "b.record()\nb.synchronize()\nr = a.elapsed_time(b)", OK,
          "type(r) is float and r >= 0"),
        # As on CUDA: ValueError for events not recorded or made without timing.
        C("torch.Event.elapsed_time", f"r = {E}.elapsed_time({E})",
          RAISES(ValueError, RuntimeError, match="recorded")),
        C("torch.Event.elapsed_time",
          "a, b = torch.Event(device='tpu'), torch.Event(device='tpu')\na.record()\n"
          "b.record()\nr = a.elapsed_time(b)",
          RAISES(ValueError, RuntimeError, match="enable_timing")),
        C("torch.Event.elapsed_time", f"r = {E}.elapsed_time('x')", BAD_TYPE),
        C("torch.Event.elapsed_time", f"e = {E}\ne.record()\nr = e.elapsed_time(None)",
          BAD_TYPE),
        C("torch.Event.ipc_handle", f"r = {E}.ipc_handle()", RAISES(*ARG_ERRORS)),
        C("torch.Event.from_ipc_handle",
          "r = torch.Event.from_ipc_handle(torch.device('tpu'), b'0' * 64)", RAISES(*ARG_ERRORS)),
        C("torch.Event.from_ipc_handle", "r = torch.Event.from_ipc_handle('x', None)",
          RAISES(*ARG_ERRORS)),
        C("torch.Event.device", f"r = {E}.device", OK, "r.type == 'tpu'"),
        C("torch.Event.device", f"e = {E}\ne.record()\nr = e.device", OK, "r.type == 'tpu'"),
        C("torch.Event.event_id", f"e = {E}\ne.record()\nr = e.event_id", OK, "type(r) is int"),
        C("torch.Event", f"r = repr({E})", OK, "isinstance(r, str)"),
    ]
    G = "torch.accelerator.Graph"
    for m in ("capture_begin", "capture_end", "instantiate", "replay", "reset", "pool",
              "enable_debug_mode", "debug_dump"):
        # No graph capture on tpu: constructing a Graph raises, naming the device.
        arg = "'/tmp/g.dot'" if m == "debug_dump" else ""
        out.append(C(f"{G}.{m}", f"r = {G}().{m}({arg})", RAISES(RuntimeError, match="tpu")))
    out.append(C(G, f"with {G}():\n    r = None", RAISES(RuntimeError, match="tpu")))
    return out


def all_calls():
    return accelerator_calls() + tpu_calls() + stream_event_calls()


# -- running them ----------------------------------------------------------------

def _short(v):
    try:
        t = repr(v)
    except Exception as e:  # noqa: BLE001
        t = f"<repr failed: {type(e).__name__}>"
    return t[:200]


def _run_one(call):
    """Runs one call in this process; returns its outcome (a dict)."""
    import warnings

    import torch

    ns = {"torch": torch}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(call["code"], ns)
        out = {"status": "ok", "result": _short(ns.get("r"))}
        if call["check"]:
            try:
                out["check"] = bool(eval(call["check"], ns))
            except Exception as e:  # noqa: BLE001
                out["check"] = False
                out["check_error"] = f"{type(e).__name__}: {e}"[:300]
    except Exception as e:  # noqa: BLE001
        out = {"status": "raised", "exc": type(e).__name__,
               "mro": [c.__name__ for c in type(e).__mro__], "msg": str(e)[:2000]}
    # The device still works after whatever the call did.
    try:
        out["usable"] = torch.ones(2, device="tpu").cpu().sum().item() == 2
    except Exception as e:  # noqa: BLE001
        out["usable"] = f"{type(e).__name__}: {e}"[:300]
    return out


def _child_before(calls):
    """Each call in a process forked from this one, which has imported torch
    and nothing more; prints one JSON outcome per call."""
    import torch

    assert not torch.tpu.is_initialized(), "importing torch started the tpu runtime"
    for call in calls:
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            data = json.dumps(_run_one(call)).encode()
            while data:
                data = data[os.write(wfd, data):]
            os._exit(0)
        os.close(wfd)
        chunks, hung = [], False
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                hung = True
                os.kill(pid, signal.SIGKILL)
                break
            if select.select([rfd], [], [], left)[0]:
                b = os.read(rfd, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        os.close(rfd)
        _, st = os.waitpid(pid, 0)
        if hung:
            out = {"status": "hung"}
        elif os.WIFSIGNALED(st):
            out = {"status": "crashed", "signal": os.WTERMSIG(st)}
        elif os.WEXITSTATUS(st) != 0 or not chunks:
            out = {"status": "crashed", "exit": os.WEXITSTATUS(st)}
        else:
            out = json.loads(b"".join(chunks))
        print("@@R " + json.dumps(out), flush=True)


def _child_after(calls):
    """The calls one after another in this process, after a tpu tensor was
    made; a marker before each names the call that kills or hangs it."""
    import faulthandler

    import torch

    x = torch.ones(4, device="tpu") + 1
    assert x.cpu().sum().item() == 8
    for call in calls:
        print("@@B", flush=True)
        faulthandler.dump_traceback_later(CALL_TIMEOUT, exit=True)
        out = _run_one(call)
        faulthandler.cancel_dump_traceback_later()
        print("@@R " + json.dumps(out), flush=True)


def _spawn(phase, calls):
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(calls, f)
    f.close()
    env = dict(os.environ)
    env.pop("TORCH_TPU_LAUNCH_BLOCKING", None)
    p = subprocess.Popen([sys.executable, HERE, "--child", phase, f.name], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p, f.name


def run_phase(phase, calls, procs=None):
    """Outcomes of |calls| (one dict each) in |phase| ("before", "after")."""
    outcomes = []
    while len(outcomes) < len(calls):
        rest = calls[len(outcomes):]
        p, path = _spawn(phase, rest)
        try:
            # Per-call timeouts are enforced in the child; this bounds the rest.
            stdout, stderr = p.communicate(timeout=CALL_TIMEOUT * (len(rest) + 2))
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        finally:
            os.unlink(path)
        started, got = False, 0
        for line in stdout.splitlines():
            if line.startswith("@@B"):
                started = True
            elif line.startswith("@@R "):
                outcomes.append(json.loads(line[4:]))
                started, got = False, got + 1
        if len(outcomes) < len(calls):
            if not started and not got:
                raise AssertionError(f"the {phase} sweep's process failed before its first "
                                     f"call (rc {p.returncode}):\n{stderr[-3000:]}")
            rc = p.returncode
            status = "hung" if "Timeout" in stderr or rc is None else "crashed"
            outcomes.append({"status": status, "exit": rc, "stderr": stderr[-1500:]})
        elif p.returncode != 0:
            # Every call returned, but the process did not exit cleanly.
            raise AssertionError(f"the {phase} sweep's process exited with {p.returncode} "
                                 f"after its last call:\n{stderr[-3000:]}")
    return outcomes


def _clear(out):
    msg = out.get("msg", "").strip()
    if out["exc"] in ("SystemError", "AssertionError"):
        return f"raised {out['exc']} (not a user-facing error): {msg[:300]}"
    if not msg:
        return f"raised {out['exc']} with an empty message"
    if "INTERNAL ASSERT" in msg:
        return f"raised an internal assertion: {msg[:300]}"
    return None


def judge(call, out):
    """None when |out| is what |call| expects, else what is wrong."""
    st = out["status"]
    if st in ("crashed", "hung"):
        return f"{st}: {json.dumps(out)[:1500]}"
    if out.get("usable") is not True:
        return f"the device no longer works after it: {out.get('usable')}"
    exp = call["expect"]
    if st == "raised":
        unclear = _clear(out)
        if unclear:
            return unclear
    if exp == OK:
        if st != "ok":
            return f"raised {out['exc']}: {out['msg'][:300]}"
        if call["check"] and not out.get("check"):
            return (f"returned {out['result']}, which fails `{call['check']}` "
                    f"{out.get('check_error', '')}")
        return None
    if exp == ANY:
        return None
    _, types, match = exp
    if st != "raised":
        return f"returned {out['result']} where it should raise {'/'.join(types)}"
    if not set(types) & set(out["mro"]):
        return f"raised {out['exc']} ({out['msg'][:200]}) where it should raise {'/'.join(types)}"
    if match and not re.search(match, out["msg"]):
        return f"raised {out['exc']}: {out['msg'][:300]!r}, which does not match {match!r}"
    return None


def _aliases():
    """Names bound to the same object as a name before them (torch.accelerator
    re-exports torch.accelerator.memory; torch.tpu.memory_reserved is
    memory_allocated): the before-first-use sweep calls each object once."""
    import torch

    first, dup, keep = {}, set(), []
    for name in dict.fromkeys(c["name"] for c in all_calls()):
        obj = eval(name, {"torch": torch})
        keep.append(obj)  # alive, so that no two objects share an id
        if first.setdefault(id(obj), name) != name:
            dup.add(name)
    return dup


def sweep(phase):
    calls = [c for c in all_calls() if phase in c["phases"]]
    if phase == "before":
        skip = _aliases()
        calls = [c for c in calls if c["name"] not in skip]
    outs = run_phase(phase, calls)
    return calls, outs, [(c, o, judge(c, o)) for c, o in zip(calls, outs)]


def _report(failures):
    return "\n".join(f"{c['name']}: {c['code']!r}\n    -> {why}" for c, _, why in failures)


# -- tests -----------------------------------------------------------------------

def test_every_public_function_is_swept():
    public = public_names()
    swept = {c["name"] for c in all_calls()}
    missing = sorted(public - swept - set(NOT_CALLED))
    assert not missing, f"public device APIs with no calls in the sweep: {missing}"
    stale = sorted(set(NOT_CALLED) - public)
    assert not stale, f"NOT_CALLED names that are no longer public: {stale}"
    covered = public & swept
    # torch.accelerator and its memory module, torch.tpu, Stream/Event/Graph.
    assert len(covered) >= 100, sorted(covered)
    print(f"{len(covered)} public device APIs swept, {len(all_calls())} calls")


def test_sweep_before_first_use():
    _, _, results = sweep("before")
    failures = [r for r in results if r[2]]
    assert not failures, f"{len(failures)} of {len(results)} calls:\n" + _report(failures)


def test_sweep_after_first_use():
    _, _, results = sweep("after")
    failures = [r for r in results if r[2]]
    assert not failures, f"{len(failures)} of {len(results)} calls:\n" + _report(failures)


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=e, timeout=120)


def test_empty_host_cache_after_first_use():
    """torch.accelerator.empty_host_cache() reached a missing host allocator
    once a tpu tensor existed and crashed the process (SIGSEGV)."""
    p = _run("import torch\n"
             "x = torch.ones(2, device='tpu')\n"
             "torch.accelerator.empty_host_cache()\n"
             "y = torch.ones(3).pin_memory()\n"
             "torch.accelerator.empty_host_cache()\n"
             "assert y.is_pinned() and (x + 1).sum().item() == 4\n"
             "print('done')")
    assert p.returncode == 0 and "done" in p.stdout, (p.returncode, p.stderr[-2000:])


def test_device_index_checks_with_two_devices():
    """With two devices, index 1 works everywhere and index 2 raises an
    IndexError naming it, through torch.tpu and torch.accelerator alike."""
    p = _run("""
import torch
assert torch.tpu.device_count() == 2
x = torch.ones(2, device='tpu:1')
assert torch.accelerator.current_stream(1).device_index == 1
assert torch.Stream(device='tpu:1').device_index == 1
torch.accelerator.synchronize(1); torch.tpu.synchronize(1)
assert torch.accelerator.memory_allocated(1) >= 8
assert torch.tpu.get_rng_state(1).numel() == 16
with torch.accelerator.device_index(1):
    assert torch.accelerator.current_device_index() == 1
    assert torch.Stream(device='tpu').device_index == 1
assert torch.accelerator.current_device_index() == 0
calls = [lambda: torch.accelerator.current_stream(2), lambda: torch.accelerator.synchronize(2),
         lambda: torch.accelerator.memory_allocated(2), lambda: torch.tpu.synchronize(2),
         lambda: torch.tpu.get_rng_state(2), lambda: torch.tpu.memory_allocated('tpu:2'),
         lambda: torch.accelerator.get_memory_info(2), lambda: torch.Stream(device='tpu:2'),
         lambda: torch.tpu.set_device(2), lambda: torch.Generator('tpu:2')]
for f in calls:
    try:
        f()
    except IndexError as e:
        assert 'tpu device index 2 is out of range' in str(e), str(e)
    else:
        raise AssertionError('no error')
print('done')
""", TORCH_TPU_CPU_DEVICE_COUNT="2")
    assert p.returncode == 0 and "done" in p.stdout, (p.returncode, p.stderr[-2000:])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        with open(sys.argv[3]) as f:
            todo = json.load(f)
        (_child_before if sys.argv[2] == "before" else _child_after)(todo)
        sys.exit(0)
    phases = sys.argv[1:] or ["before", "after"]
    for ph in phases:
        t0 = time.time()
        _, _, res = sweep(ph)
        bad = [r for r in res if r[2]]
        for c, o, why in res:
            mark = "FAIL" if why else "ok  "
            what = o.get("result") if o["status"] == "ok" else (
                f"{o.get('exc', o['status'])}: {o.get('msg', '')[:120]!r}")
            print(f"[{ph}] {mark} {c['code'].splitlines()[-1][:70]:<70} {what}"
                  + (f"\n        {why}" if why else ""))
        print(f"[{ph}] {len(res)} calls, {len(bad)} failures, {time.time() - t0:.1f}s")
