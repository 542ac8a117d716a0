"""The PJRT plugins installed beside torch_tpu, by package name and version.

A figure about correctness or speed means little without the plugin that
produced it: these names ("lammps-jax-pjrt-cpu 0.11.2") are what reports,
``python -m torch_tpu.info`` and the conformance sweep print, and what
``--plugin`` options accept (besides a path to a ``.so``).
"""
import importlib.metadata
import os

# (package, library inside it, kind), in the order the automatic choice
# prefers them within a kind (runtime/discovery.c).
KNOWN = (
    ("lammps-jax-pjrt-cpu", "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so", "cpu"),
    ("xla-cpu-pjrt", "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "cpu"),
    ("jax-cuda13-pjrt", "jax_plugins/xla_cuda13/xla_cuda_plugin.so", "cuda"),
    ("jax-cuda12-pjrt", "jax_plugins/xla_cuda12/xla_cuda_plugin.so", "cuda"),
    ("libtpu", "libtpu/libtpu.so", "tpu"),
)


def installed(kind=None):
    """[{name, version, path, kind}] for each known plugin package installed
    in this Python (of |kind| only, if given), in preference order."""
    found = []
    for name, library, k in KNOWN:
        if kind and k != kind:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        path = os.path.realpath(str(dist.locate_file(library)))
        if os.path.exists(path):
            found.append({"name": name, "version": dist.version, "path": path, "kind": k})
    return found


def describe(path):
    """"package version" for the plugin library at |path|, or the path itself
    for a library no known package installed."""
    real = os.path.realpath(path)
    for p in installed():
        if p["path"] == real:
            return f"{p['name']} {p['version']}"
    return real


def resolve(spec):
    """The library path for |spec|: a package name of KNOWN ("xla-cpu-pjrt"),
    or a path to a .so. Raises ValueError naming what is installed."""
    if os.sep in spec or spec.endswith(".so"):
        if not os.path.exists(spec):
            raise ValueError(f"PJRT plugin {spec!r} does not exist")
        return os.path.realpath(spec)
    have = installed()
    for p in have:
        if p["name"] == spec:
            return p["path"]
    names = ", ".join(p["name"] for p in have) or "none"
    raise ValueError(f"no installed PJRT plugin package {spec!r} (installed: {names})")
