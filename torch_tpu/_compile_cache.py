"""Persistent caching of the "tpu" backend's AOTAutograd results.

AOTAutograd (functionalization, the joint forward/backward trace, the
partition) is most of a warm process's compile time once XLA executables come
from the disk cache. PyTorch caches its results itself (AOTAutogradCache)
when the backend's compilers are ``SerializableAOTDispatchCompiler``s that
return a picklable ``OutputCode``; the entry is then "bundled": it holds our
output code directly instead of an Inductor FX-graph-cache key.

Our output code is a *program tape*: the exact sequence of calls the FX
lowering made on ``_C.Program`` (op, arguments in schema order, result ids).
Replaying it rebuilds the identical graph without the FX graph, its metadata
or per-node Python work, and the executable then comes from the executor's
caches by the graph's hash, as always: no executable is ever stored here.

Where entries live: ``<tpu cache root>/torch_compile/<fingerprint>/``, with
the root from TORCH_TPU_CACHE_DIR (or its default) and nothing cached when
that cache is off (TORCH_TPU_CACHE_DIR=0, an unusable folder). PyTorch's key
covers the graph, its inputs, torch's version and configs; the fingerprint
adds ours (the extension binary, our Python sources, the rule set, torch and
Python versions), so another build never reads these entries. An entry that
does not unpickle or replay is a cache miss or bypass inside PyTorch, which
then compiles from scratch. The folder is bounded (``prune``): the newest
few other builds' folders are kept, and this build's entries beyond
TORCH_TPU_COMPILE_CACHE_MAX_BYTES go oldest first.
"""
import contextlib
import dataclasses
import functools
import hashlib
import os
import shutil
import sys
import threading
from typing import Any, Optional

import torch
from torch._inductor.output_code import OutputCode

from . import _C

# PyTorch's AOTAutograd cache finds its folder through TORCHINDUCTOR_CACHE_DIR;
# it is pointed at ours only while our backend compiles, one compile at a time.
_scope_lock = threading.RLock()


@dataclasses.dataclass(frozen=True)
class Ref:
    """A graph value in a recorded ``lower`` call (a stand-in tensor)."""
    value: int
    dtype: torch.dtype
    shape: tuple


class Tape:
    """The calls that built one program, replayable in a fresh process."""

    def __init__(self, specs, random=False):
        self.specs = specs
        self.random = random  # the program takes the generator state
        self.inputs = None
        self.calls = []

    def replay(self):
        prog = _C.Program(self.specs, self.random)
        ids = dict(zip(self.inputs, prog.inputs()))

        def decode(a, tensors):
            if isinstance(a, Ref):
                t = torch.empty(a.shape, dtype=a.dtype, device="meta")
                tensors.append((t, ids[a.value]))
                return t
            if isinstance(a, list):
                return [decode(x, tensors) for x in a]
            return a

        for call in self.calls:
            kind = call[0]
            if kind == "lower":
                _, name, overload, args, out_specs, rng_state, results = call
                tensors = []
                got = prog.lower(name, overload, [decode(a, tensors) for a in args], tensors,
                                 out_specs, ids[rng_state] if rng_state >= 0 else -1)
                ids.update(zip(results, got))
            elif kind == "reserve_state":
                _, name, out_specs, result = call
                ids[result] = prog.reserve_state(name, out_specs)
            elif kind == "convert":
                _, v, dtype, shape, result = call
                ids[result] = prog.convert(ids[v], dtype, shape)
            elif kind == "call_kernel":
                _, name, text, in_specs, statics, args, results = call
                kernel = _current_kernel(name, text, in_specs, statics)
                ids.update(zip(results, prog.call_kernel(kernel.c, [ids[a] for a in args])))
            else:  # add_output
                _, v, mutates, dtype = call
                prog.add_output(ids[v], mutates, dtype)
        return prog

    def check_kernels(self):
        """Raises if a kernel the tape calls is not what its op traces to in
        this process (the op's function changed since the entry was made):
        the entry then does not load, and the graph compiles afresh."""
        for call in self.calls:
            if call[0] == "call_kernel":
                _, name, text, in_specs, statics, _, _ = call
                _current_kernel(name, text, in_specs, statics)


def _current_kernel(name, text, in_specs, statics):
    from . import custom_ops

    op = custom_ops._registry.get(name)
    if op is None:
        raise RuntimeError(f"custom op {name} is not registered in this process")
    kernel = op.trace(in_specs, statics)
    if kernel.text != text:
        raise RuntimeError(f"custom op {name} traces to other StableHLO than the cached graph")
    return kernel


class RecordingProgram:
    """``_C.Program`` that also writes each call onto a Tape."""

    def __init__(self, specs, random=False):
        self.prog = _C.Program(specs, random)
        self.tape = Tape(specs, random)
        self.tape.inputs = self.prog.inputs()

    def inputs(self):
        return list(self.tape.inputs)

    def lower(self, name, overload, args, tensors, out_specs, rng_state=-1):
        ids = self.prog.lower(name, overload, args, tensors, out_specs, rng_state)
        standins = {id(t): v for t, v in tensors}

        def encode(a):
            if isinstance(a, torch.Tensor) and id(a) in standins:
                return Ref(standins[id(a)], a.dtype, tuple(a.shape))
            if isinstance(a, (list, tuple)):
                return [encode(x) for x in a]
            return a

        self.tape.calls.append(("lower", name, overload, [encode(a) for a in args],
                                out_specs, rng_state, list(ids)))
        return ids

    def call_kernel(self, kernel, ids, statics):
        r = self.prog.call_kernel(kernel.c, ids)
        self.tape.calls.append(("call_kernel", kernel.name, kernel.text, kernel.in_specs,
                                dict(statics), list(ids), list(r)))
        return r

    def reserve_state(self, name, out_specs):
        r = self.prog.reserve_state(name, out_specs)
        self.tape.calls.append(("reserve_state", name, out_specs, r))
        return r

    def convert(self, v, dtype, shape):
        r = self.prog.convert(v, dtype, shape)
        self.tape.calls.append(("convert", v, dtype, list(shape), r))
        return r

    def add_output(self, v, mutates, dtype):
        self.prog.add_output(v, mutates, dtype)
        self.tape.calls.append(("add_output", v, mutates, dtype))


@dataclasses.dataclass
class TpuOutputCode(OutputCode):
    """One compiled forward, backward or inference graph, as AOTAutograd
    caches it: the program tape and how to assemble the graph's outputs.
    ``lazy``: get the executable at the first call (backward graphs, which
    AOTAutograd would otherwise compile only when a backward runs)."""

    name: str
    tape: Tape
    layout: list
    baked: dict
    lazy: bool
    # Live state, never pickled: the program (fresh compiles) and its runner.
    _prog: Optional[Any] = dataclasses.field(default=None, repr=False)
    _run: Optional[Any] = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        # Boxed calls (the argument list, freed as it is consumed); in the
        # instance dict so that wrappers (torch._dynamo.disable) copy it.
        self._boxed_call = True

    def _program(self):
        """The live program: the fresh compile's, or (loaded from the cache)
        the tape's replay."""
        if self._prog is None:
            from . import _compile

            self._prog = self.tape.replay()
            _compile._count("cache_loads")
        return self._prog

    def _ensure(self):
        if self._run is None:
            from . import _compile

            self._run = _compile._finish(self._program(), self.name, self.layout, self.baked)
            self._prog = None
        return self._run

    def load_start(self):
        """Gets the executable now where it needs no compile: from memory, or
        from the disk cache on a thread of its own, runs queueing on the code
        to come (start). Otherwise compiles it here (_ensure), so that a
        compile's errors still belong to the caller."""
        if self._run is None and self._program().load_start(self.name):
            return self.start()
        return self._ensure()

    def start(self):
        """Runs from now on without waiting for a compile in flight (build's
        |background|): a run before it ends is queued on the code to come,
        and the wait moves to the first read of a result."""
        if self._run is None and self._prog is not None:
            from . import _compile

            self._run = _compile._runner(self._prog, self.layout, self.baked)
            self._prog = None
        return self

    def __call__(self, inputs):
        return self._ensure()(inputs)

    def prepare_for_serialization(self):
        # Called on a shallow copy about to be pickled: drop the live program.
        from . import _compile

        self._run = self._prog = None
        _compile._count("cache_stores")

    def post_compile(self, example_inputs, constants, graph_kwargs):
        if self._prog is None:  # loaded from the cache
            self.tape.check_kernels()
        if not self.lazy:
            self._ensure()

    def set_triton_bundle(self, triton_bundle):
        pass


class FailedOutputCode(OutputCode):
    """A backward graph that could not be lowered: raises its error when a
    backward runs, and is never cached."""

    def __init__(self, error):
        self.error = error
        self._boxed_call = True

    def __call__(self, inputs):
        raise self.error

    def prepare_for_serialization(self):
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        raise BypassAOTAutogradCache(f"the backward graph failed to lower: {self.error}")

    def post_compile(self, example_inputs, constants, graph_kwargs):
        pass

    def set_triton_bundle(self, triton_bundle):
        pass


# -- where entries live -------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def fingerprint():
    """Identity of everything besides the graph that shapes an entry: a new
    extension build, changed Python sources, another rule set or another
    torch / Python gives another folder."""
    h = hashlib.sha256()
    so = _C.__file__
    st = os.stat(so)
    h.update(f"{so}|{st.st_size}|{st.st_mtime_ns}|".encode())
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    h.update("\n".join(sorted(_C._lowered_ops())).encode())
    h.update(f"|{torch.__version__}|{torch.version.git_version}|{sys.version}".encode())
    return h.hexdigest()[:24]


def cache_root():
    """Our folder for AOTAutograd entries, or None when caching is off (or
    the folder cannot be trusted)."""
    disk = _C._runtime_stats().get("disk_cache_dir") or ""
    if not disk:
        return None
    # disk is <root>/<plugin id>; entries do not depend on the PJRT plugin.
    # The runtime checked <root> and its ancestors.
    top = os.path.join(os.path.dirname(disk), "torch_compile")
    root = os.path.join(top, fingerprint())
    return root if _trusted_folders(top, root) else None


_distrust_warned = False


def _trusted_folders(*paths):
    """Creates |paths| (0700) if missing and checks each is a real folder
    owned by this user that nobody else can write: the entries below are
    pickles, and loading one runs its code. Warns once and returns False
    otherwise."""
    global _distrust_warned
    import stat
    import warnings

    for path in paths:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        try:
            st = os.lstat(path)
        except OSError as e:
            why = str(e)
        else:
            why = ("it is a symbolic link" if stat.S_ISLNK(st.st_mode) else
                   "it is not a directory" if not stat.S_ISDIR(st.st_mode) else
                   "another user owns it" if st.st_uid != os.geteuid() else
                   "its group or other users can write it"
                   if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) else None)
        if why:
            if not _distrust_warned:
                _distrust_warned = True
                warnings.warn(f"torch_tpu: not caching compiled graphs in {path}: {why}; a "
                              "cache others can write could hand this process their code")
            return False
    return True


@contextlib.contextmanager
def _without_inductor_backends():
    """PyTorch's AOTAutograd cache key includes Inductor's per-device code
    generator passes, and computing it imports and registers every Inductor
    code generator (about 0.3 s in each process). Our graphs never reach
    Inductor, so within our scope the key sees none: that is cheaper, and
    the same whether or not the process has used Inductor. (Dynamo
    compiles one frame at a time, so nothing else reads these meanwhile.)"""
    from torch._inductor import codecache

    saved = (codecache.init_backend_registration, codecache.custom_backend_passes)
    codecache.init_backend_registration = lambda: None
    codecache.custom_backend_passes = {}
    try:
        yield
    finally:
        codecache.init_backend_registration, codecache.custom_backend_passes = saved


def _check_no_view_replay(entry):
    """Refuses (a cache bypass: the graph compiles in every process) an entry
    whose outputs are views that AOTAutograd replays from recorded view
    metadata. PyTorch 2.13 pickles that metadata, and some comes back as
    garbage in the next process (a slice after an _unsafe_view: in
    GraniteSpeech's backward, sizes like -1181394619924949965, or a crash);
    regenerating those outputs from sizes and strides instead gave wrong
    values."""
    from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

    meta = getattr(entry, "runtime_metadata", None)
    for o in getattr(meta, "output_info", None) or []:
        if getattr(o, "view_meta_sequence", None) is not None:
            raise BypassAOTAutogradCache("an output replays views (not stored: PyTorch "
                                         "2.13 does not reload that metadata intact)")


@contextlib.contextmanager
def _entries_without_view_replay():
    from torch._functorch._aot_autograd import autograd_cache as ac

    cls = ac.AOTAutogradCache
    pickle_entry = cls._pickle_entry

    def checked(entry, remote):
        _check_no_view_replay(entry)
        return pickle_entry(entry, remote)

    cls._pickle_entry = staticmethod(checked)
    try:
        yield
    finally:
        cls._pickle_entry = staticmethod(pickle_entry)


@contextlib.contextmanager
def scope():
    """Runs one AOTAutograd call with its cache in our folder (or off) and the
    backward graph compiled with the forward, so that the cache entry, which
    holds both, is written inside this scope."""
    from torch._functorch import config as fconfig

    from . import _compile

    root = cache_root()
    with _scope_lock:
        if root is None:
            with fconfig.patch(enable_autograd_cache=False):
                yield
            return
        old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = root
        stores = _compile.stats()["compiled_cache_stores"]
        try:
            with fconfig.patch(bundled_autograd_cache=True,
                               force_non_lazy_backward_lowering=True), \
                    _without_inductor_backends(), _entries_without_view_replay():
                yield
        finally:
            if old is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = old
            if _compile.stats()["compiled_cache_stores"] != stores or not _pruned:
                prune(root)


# -- bounds -----------------------------------------------------------------------

# Folders of other builds kept besides this one (a rebuild, another torch).
KEEP_OTHER_BUILDS = 2
_pruned = False


def _max_bytes():
    return int(os.environ.get("TORCH_TPU_COMPILE_CACHE_MAX_BYTES", str(1 << 30)))


def prune(root):
    """Bounds the AOTAutograd entries: folders of other builds beyond the
    KEEP_OTHER_BUILDS most recently used go, and this build's entries beyond
    TORCH_TPU_COMPILE_CACHE_MAX_BYTES (default 1 GiB) go oldest first.
    Another process may be reading or writing: a vanished file is just a
    miss for it, and every error here is ignored (the cache stays usable)."""
    global _pruned
    _pruned = True
    base = os.path.dirname(root)
    try:
        if os.path.isdir(root):
            os.utime(root)  # this build is the most recently used
        others = sorted((e for e in os.scandir(base) if e.is_dir() and e.path != root),
                        key=lambda e: e.stat().st_mtime, reverse=True)
        for e in others[KEEP_OTHER_BUILDS:]:
            shutil.rmtree(e.path, ignore_errors=True)
        files = []
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                with contextlib.suppress(OSError):
                    st = os.lstat(p)
                    if st.st_mode & 0o077:  # PyTorch writes with the umask's bits
                        os.chmod(p, 0o600)
                    files.append((st.st_mtime, st.st_size, p))
        total, limit = sum(f[1] for f in files), _max_bytes()
        for _, size, p in sorted(files):
            if total <= limit:
                break
            with contextlib.suppress(OSError):
                os.unlink(p)
                total -= size
    except OSError:
        pass
