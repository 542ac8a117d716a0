"""``torch.tpu``: the device module, shaped like ``torch.cuda``."""
import contextlib
from dataclasses import dataclass

import torch

from . import _C
from . import amp  # noqa: F401  (torch.tpu.amp)

# What a failed device allocation raises (PJRT's RESOURCE_EXHAUSTED).
OutOfMemoryError = torch.OutOfMemoryError

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device",
    "set_device", "device", "synchronize", "manual_seed", "manual_seed_all", "seed",
    "seed_all", "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
    "set_rng_state_all", "mem_get_info", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "memory_stats",
    "empty_cache", "get_device_name", "get_device_properties", "get_amp_supported_dtype",
    "is_bf16_supported", "Stream", "Event", "current_stream", "default_stream",
    "set_stream", "stream", "fallback_counts", "amp", "OutOfMemoryError", "memory_summary",
    "reset_max_memory_allocated", "device_of", "is_current_stream_capturing",
    "wait_for_compiles",
]


# -- availability and devices -------------------------------------------------

def is_available():
    """True when a PJRT plugin loads and offers at least one device. Never raises."""
    return _C._try_init() and _C._device_count() > 0


def is_initialized():
    """As torch.cuda.is_initialized(): True once the device is in use (a tpu
    tensor, set_device, current_device, init()); is_available() and
    device_count() start the runtime without initializing the device, so
    DeviceMesh still gives each torchrun process the device of its
    LOCAL_RANK."""
    return _C._is_initialized()


def init():
    """Starts the runtime now (it otherwise starts at the first device use);
    raises with what to install when no plugin can be loaded."""
    _C._init()


_lazy_init = init


def __getattr__(name):
    # torch.cuda's flag, read by torch.utils.checkpoint before it saves and
    # restores device RNG states (without it, recomputed dropout draws anew).
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_in_bad_fork():
    """True in a process forked after its parent started the tpu device:
    it cannot use the device (as with CUDA, multiprocessing must spawn)."""
    return _C._is_in_bad_fork()


def device_count():
    return _C._device_count()


def current_device():
    return _C._current_device()


def _index(d):
    """The device index a device argument names: None, "tpu" and -1 are the
    current device; an index past device_count() raises IndexError naming it."""
    if d is None:
        return current_device()
    if isinstance(d, int) and not isinstance(d, bool):
        idx = d
    else:
        d = torch.device(d)
        if d.type != "tpu":
            raise ValueError(f"expected a tpu device, got {d}")
        idx = d.index
    if idx is None or idx == -1:
        return current_device()
    n = device_count()
    if not 0 <= idx < n:
        have = {0: "no tpu device", 1: "only tpu:0"}.get(n, f"tpu:0 to tpu:{n - 1}")
        raise IndexError(f"tpu device index {idx} is out of range: "
                         f"torch.tpu.device_count() is {n} ({have})")
    return idx


def set_device(d):
    """Makes |d| the current device; a negative index does nothing, as in
    torch.cuda.set_device."""
    if isinstance(d, int) and d < 0:
        return
    _C._set_device(_index(d))


class device:
    """Context manager that changes the current tpu device (a negative index
    or None changes nothing)."""

    def __init__(self, d):
        self.idx = -1 if d is None or (isinstance(d, int) and d < 0) else _index(d)
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            if self.prev != self.idx:
                set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev != self.idx:
            set_device(self.prev)
        return False


class device_of(device):
    """Context manager that makes the device of |obj| (a tensor) current;
    does nothing for an object that is not a tpu tensor."""

    def __init__(self, obj):
        on_tpu = isinstance(obj, torch.Tensor) and obj.device.type == "tpu"
        super().__init__(obj.get_device() if on_tpu else None)


def synchronize(device=None):
    """Waits for all work queued on the device."""
    _C._synchronize(_index(device))


# -- random numbers ----------------------------------------------------------

def _generator(d=None):
    return _C._default_generator(_index(d))


def manual_seed(seed):
    _generator().manual_seed(int(seed))


def manual_seed_all(seed):
    for i in range(max(device_count(), 1)):
        _C._default_generator(i).manual_seed(int(seed))


def seed():
    return _generator().seed()


def seed_all():
    s = seed()
    manual_seed_all(s)


def initial_seed():
    return _generator().initial_seed()


def get_rng_state(device="tpu"):
    """A CPU uint8 tensor of 16 bytes: (seed, offset) as int64."""
    return _generator(device).get_state()


def set_rng_state(new_state, device="tpu"):
    if not isinstance(new_state, torch.Tensor):
        raise TypeError("torch.tpu.set_rng_state: expected a CPU uint8 tensor, got "
                        f"{type(new_state).__name__}")
    # As torch.cuda.set_rng_state: the state's values, whatever its strides.
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format))


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states):
    for i, s in enumerate(list(states)):
        set_rng_state(s, i)


# -- memory ------------------------------------------------------------------

def memory_stats(device=None):
    """Runtime memory figures for the device (bytes of live buffers, peak,
    limit), with the keys of torch.cuda.memory_stats() that training loops
    read (TorchTitan's memory monitor): ``allocated_bytes``, ``active_bytes``
    and ``reserved_bytes`` ``.all.current`` / ``.all.peak`` (one figure: PJRT
    buffers are allocated, active and reserved alike), ``num_alloc_retries``
    (no caching allocator retries here: 0) and ``num_ooms``."""
    s = dict(_C._memory_stats(_index(device)))
    for kind in ("allocated_bytes", "active_bytes", "reserved_bytes"):
        s[f"{kind}.all.current"] = s["bytes_in_use"]
        s[f"{kind}.all.peak"] = s["peak_bytes_in_use"]
    s["num_alloc_retries"] = 0
    return s


def mem_get_info(device=None):
    """(free, total) bytes of device memory. On a CPU plugin the device's
    memory is the host's: total is its RAM (or its cgroup's limit), free what
    the host has available now, which other processes share."""
    s = memory_stats(device)
    return s["bytes_free"], s["bytes_limit"]


def memory_allocated(device=None):
    return memory_stats(device)["bytes_in_use"]


def max_memory_allocated(device=None):
    return memory_stats(device)["peak_bytes_in_use"]


memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(device=None):
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device=None):
    """The older name of reset_peak_memory_stats."""
    reset_peak_memory_stats(device)


def memory_summary(device=None, abbreviated=False):
    """A printable table of the device's memory figures."""
    idx = _index(device)
    s = memory_stats(idx)

    def size(n):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    rows = [("in use", size(s["bytes_in_use"])), ("peak in use", size(s["peak_bytes_in_use"])),
            ("limit", size(s["bytes_limit"])), ("live buffers", str(s["num_buffers"]))]
    width = max(len(k) for k, _ in rows)
    lines = [f"tpu:{idx} memory ({get_device_name(idx)})"]
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]
    return "\n".join(lines)


def empty_cache():
    """Buffers are freed when their last tensor dies. On the CPU plugin the
    process heap keeps what they occupied for the next ones, up to 16 MiB
    free at the top of each thread heap (TORCH_TPU_KEEP_HOST_MEMORY); this
    returns the free pages glibc can to the operating system (malloc_trim)."""
    _C._empty_cache()


# -- properties ----------------------------------------------------------------

@dataclass(frozen=True)
class _DeviceProperties:
    name: str
    platform: str
    total_memory: int
    plugin: str


def get_device_name(device=None):
    return _C._device_kind(_index(device))


def get_device_properties(device=None):
    idx = _index(device)
    info = _C._plugin_info()
    return _DeviceProperties(name=get_device_name(idx), platform=info["platform_name"],
                             total_memory=memory_stats(idx)["bytes_limit"],
                             plugin=info["path"])


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation=True):
    return True


# -- streams and events ---------------------------------------------------------
# PJRT orders work through buffer dependencies: one stream per device.

def Stream(device=None, priority=0, **kwargs):
    return torch.Stream(device=torch.device("tpu", _index(device)), priority=priority)


def Event(enable_timing=False, blocking=False, interprocess=False):
    return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking,
                       interprocess=interprocess)


def current_stream(device=None):
    return Stream(device)


default_stream = current_stream


def _check_stream(s, fn):
    if not isinstance(s, torch.Stream):
        raise TypeError(f"torch.tpu.{fn}: expected a torch.Stream, got {type(s).__name__}")
    if s.device.type != "tpu":
        raise ValueError(f"torch.tpu.{fn}: expected a tpu stream, got one on {s.device}")


def set_stream(stream):
    """There is one stream per device; setting it checks |stream| and does
    nothing else (None does nothing, as in torch.cuda.set_stream)."""
    if stream is not None:
        _check_stream(stream, "set_stream")


@contextlib.contextmanager
def stream(s):
    """Context manager for a stream (None: no stream); one stream per device,
    so work inside runs as it would outside."""
    if s is not None:
        _check_stream(s, "stream")
    yield s


def is_current_stream_capturing():
    """No stream capture (CUDA graphs) on this device: always False."""
    return False


# -- diagnostics -----------------------------------------------------------------

def wait_for_compiles(timeout=None):
    """Waits until every program is running its fully optimised code, and
    until the XLA compiles torch.compile started in the background (a
    training graph's forward and backward, whose first runs are queued on
    the code to come instead of waiting for it) are done and counted.

    With TORCH_TPU_TIERED_COMPILE=1, a program the process has not seen
    before is first compiled quickly at a lower optimisation level and runs
    at once, while a background thread compiles it fully and swaps that code
    in. Benchmarks call this after their warm-up so that they time the
    steady state. Returns False if `timeout` seconds passed first."""
    import time

    if timeout is not None:
        timeout = float(timeout)
    if not _C._is_initialized():
        return True
    end = None if timeout is None else time.monotonic() + timeout
    while True:  # in slices, so that Ctrl-C gets through
        left = 0.2 if end is None else min(0.2, end - time.monotonic())
        if left <= 0:
            return _C._wait_for_upgrades(1e-6)
        if _C._wait_for_upgrades(left):
            return True

def fallback_counts():
    """Per-op counts of ops that ran on the CPU because they lack a tpu lowering."""
    return dict(_C._runtime_stats()["fallbacks"])


def _get_cache_stats():
    """Executable cache and runtime counters, and the torch.compile backend's
    (compiled_graphs, compiled_recompiles, compiled_seconds, ...; not a stable
    API)."""
    from . import _compile, distributed

    d = _C._runtime_stats()
    d.update(_compile.stats())
    d.update({"dist_" + k: v for k, v in distributed.stats().items()})
    return d


def _reset_cache_stats():
    from . import _compile, distributed

    _C._reset_runtime_stats()
    _compile.reset_stats()
    distributed.reset_stats()
