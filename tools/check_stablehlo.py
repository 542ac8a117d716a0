#!/usr/bin/env python3
"""Compile and run emitted StableHLO modules with JAX's own XLA.

  check_stablehlo.py MODULE.mlir [-]      compile, run on random inputs, print
  check_stablehlo.py --dir DIR            check every DIR/*.mlir (see below)
  check_stablehlo.py --build BUILD_DIR    dump the C sample graphs
                                          (BUILD_DIR/tpr_tests emit_dump) into a
                                          temporary folder, then --dir it
  --plugin PATH                           compile and run with that PJRT plugin
                                          (e.g. the xla-cpu-pjrt .so: the oldest
                                          parser we target) instead of jaxlib's
                                          own CPU client

A module NAME.mlir may have a sidecar NAME.json:
  {"inputs": [{"range": [lo, hi]} | {"values": [...]} | {}, ...],
   "expect": ["numpy expression over a0, a1, ...", ...],   one per result
   "rtol": 1e-6, "atol": 0, "compile_error": false}
Expressions may use np, and the helpers view(base, sizes, strides, offset) and
view_write(base, sizes, strides, offset, value) (PyTorch as_strided semantics
in elements). Without "expect" the module only has to compile and run.

Exit status 0 iff every module compiled, ran and matched.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

try:
    import ml_dtypes
except ImportError:  # jax depends on it; keep the tool importable anyway
    ml_dtypes = None

DTYPES = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32,
    "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32,
    "ui64": np.uint64, "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "complex<f32>": np.complex64, "complex<f64>": np.complex128,
}
if ml_dtypes is not None:
    DTYPES.update({"bf16": ml_dtypes.bfloat16,
                   "f8E4M3FN": ml_dtypes.float8_e4m3fn,
                   "f8E5M2": ml_dtypes.float8_e5m2})


def parse_tensor_type(s):
    """'tensor<2x3xf32>' -> ((2, 3), 'f32')."""
    body = s[len("tensor<"):-1]
    m = re.match(r"^((?:\d+x)*)(.*)$", body)  # dims, then e.g. complex<f32>
    return tuple(int(d) for d in m.group(1).split("x") if d), m.group(2)


def _tensor_types(s):
    """Every balanced 'tensor<...>' in s, in order."""
    out, i = [], 0
    while True:
        i = s.find("tensor<", i)
        if i < 0:
            return out
        depth, j = 0, i + len("tensor")
        while True:
            depth += {"<": 1, ">": -1}.get(s[j], 0)
            j += 1
            if depth == 0:
                break
        out.append(s[i:j])
        i = j


def main_signature(text):
    start = text.find("@main(")
    if start < 0:
        raise ValueError("no func.func public @main found")
    body = text.find("{\n", start)
    head = text[start:body]
    args, results = head.split(") -> (", 1)
    # Drop argument attributes such as {tf.aliasing_output = 0 : i32}.
    args = re.sub(r"\{[^}]*\}", "", args)
    return ([parse_tensor_type(a) for a in _tensor_types(args)],
            [parse_tensor_type(r) for r in _tensor_types(results)])


def random_input(rng, shape, dt, spec):
    np_dt = DTYPES[dt]
    if spec and "values" in spec:
        return np.asarray(spec["values"]).astype(np_dt).reshape(shape)
    if spec and "range" in spec:
        lo, hi = spec["range"]
        return rng.integers(lo, hi, size=shape).astype(np_dt)
    if dt == "i1":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dt.startswith("ui"):
        return rng.integers(0, 50, size=shape).astype(np_dt)
    if dt.startswith("i"):
        return rng.integers(-20, 20, size=shape).astype(np_dt)
    if dt.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dt)
    return rng.standard_normal(shape).astype(np_dt)


def view(base, sizes, strides, offset):
    base = np.asarray(base)
    it = base.itemsize
    return np.lib.stride_tricks.as_strided(
        base[offset:] if base.size > offset else base, shape=tuple(sizes),
        strides=tuple(s * it for s in strides)).copy()


def view_write(base, sizes, strides, offset, value):
    out = np.array(base, copy=True)
    it = out.itemsize
    w = np.lib.stride_tricks.as_strided(out[offset:], shape=tuple(sizes),
                                        strides=tuple(s * it for s in strides),
                                        writeable=True)
    w[...] = value
    return out


_backend = None
PLUGIN = None


def backend():
    global _backend
    if _backend is None:
        import jax
        jax.config.update("jax_enable_x64", True)
        if PLUGIN:
            from jax._src.lib import xla_client as xc
            xc.load_pjrt_plugin_dynamically("tpr_check", PLUGIN)
            _backend = xc.make_c_api_client("tpr_check", {"cpu_device_count": 1})
        else:
            from jax.extend import backend as jbackend
            _backend = jbackend.get_backend("cpu")
    return _backend


def compile_and_run(text, inputs):
    import jax
    from jax._src.lib import xla_client as xc
    b = backend()
    dev = b.devices()[0]
    exe = b.compile_and_load(text, xc.DeviceList((dev,)), xc.CompileOptions())
    args = [jax.device_put(x, dev) for x in inputs]
    return [np.asarray(o) for o in exe.execute(args)]


def check_module(path, seed=0, verbose=False):
    text = open(path).read() if path != "-" else sys.stdin.read()
    side = {}
    jpath = os.path.splitext(path)[0] + ".json"
    if path != "-" and os.path.exists(jpath):
        side = json.load(open(jpath))
    args, _ = main_signature(text)
    rng = np.random.default_rng(seed)
    specs = side.get("inputs", [])
    inputs = [random_input(rng, shape, dt, specs[i] if i < len(specs) else None)
              for i, (shape, dt) in enumerate(args)]
    try:
        outs = compile_and_run(text, inputs)
    except Exception as e:  # noqa: BLE001 - report any XLA error
        if side.get("compile_error"):
            return True, "failed as expected"
        return False, "compile/run failed: %s" % str(e).splitlines()[0][:400]
    if side.get("compile_error"):
        return False, "compiled but an error was expected"
    if verbose or "expect" not in side:
        for i, o in enumerate(outs):
            print("  result %d: %s %s\n%s" % (i, o.dtype, o.shape, o))
    expect = side.get("expect")
    if not expect:
        return True, "ran"
    env = {"np": np, "view": view, "view_write": view_write, "ml_dtypes": ml_dtypes}
    env.update({"a%d" % i: x for i, x in enumerate(inputs)})
    if len(expect) != len(outs):
        return False, "%d results, %d expectations" % (len(outs), len(expect))
    for i, (ex, got) in enumerate(zip(expect, outs)):
        want = np.asarray(eval(ex, env))  # noqa: S307 - our own sidecars
        if want.shape != got.shape:
            return False, "result %d: shape %s, want %s (%s)" % (i, got.shape, want.shape, ex)
        if got.dtype.kind in "fc" or str(got.dtype) == "bfloat16":
            ok = np.allclose(got.astype(np.complex128 if got.dtype.kind == "c" else np.float64),
                             want.astype(np.complex128 if got.dtype.kind == "c" else np.float64),
                             rtol=side.get("rtol", 1e-6), atol=side.get("atol", 0),
                             equal_nan=True)
        else:
            ok = np.array_equal(got, want.astype(got.dtype))
        if not ok:
            return False, "result %d mismatch (%s):\n got %s\nwant %s" % (i, ex, got, want)
    return True, "matched"


def check_dir(d, verbose=False):
    files = sorted(f for f in os.listdir(d) if f.endswith(".mlir"))
    bad = 0
    for f in files:
        ok, msg = check_module(os.path.join(d, f), verbose=verbose)
        print("%s %s: %s" % ("ok  " if ok else "FAIL", f, msg))
        bad += not ok
    print("%d modules, %d failed" % (len(files), bad))
    return 1 if bad or not files else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module", nargs="?", help="a .mlir file, or - for stdin")
    ap.add_argument("--dir")
    ap.add_argument("--build", help="CMake build dir holding tpr_tests")
    ap.add_argument("--plugin", help="PJRT plugin .so to run with")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    global PLUGIN
    PLUGIN = a.plugin
    if a.build:
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, TPR_EMIT_DUMP_DIR=d)
            subprocess.run([os.path.join(a.build, "tpr_tests"), "emit_dump"],
                           env=env, check=True)
            return check_dir(d, a.verbose)
    if a.dir:
        return check_dir(a.dir, a.verbose)
    if not a.module:
        ap.error("give a module, --dir or --build")
    ok, msg = check_module(a.module, a.seed, verbose=True)
    print(msg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
