#!/usr/bin/env python3
"""Differential check of the lowering rules against PyTorch CPU.

Each case calls an ATen overload on CPU tensors, then runs the same overload
through tpr_lower on the PJRT plugin (build/tpr_lower_run) with the arguments
converted the way the eager executor converts them, and compares.

  python tools/check_rules.py [-k FILTER] [--build build] [-v]

The plugin comes from TORCH_TPU_PJRT_PLUGIN, else the xla-cpu-pjrt wheel.
Exit status 1 when any case fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch

aten = torch.ops.aten

DT = {torch.bool: 1, torch.int8: 2, torch.int16: 3, torch.int32: 4,
      torch.int64: 5, torch.uint8: 6, torch.float16: 10, torch.float32: 11,
      torch.float64: 12, torch.bfloat16: 13}
TOL = {torch.float16: (2e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2),
       torch.float32: (2e-5, 1e-5), torch.float64: (1e-10, 1e-12)}


def op_name(op):
    ov = op._overloadname
    return str(op._schema.name) + ("" if ov == "default" else "." + ov)


class Case:
    def __init__(self, op, args, kwargs, tol=None, check=None, label=None,
                 extra_gen=False):
        self.op, self.args, self.kwargs = op, args, kwargs or {}
        self.extra_gen = extra_gen
        self.tol, self.check = tol, check
        self.label = label or op_name(op)


class Batch:
    def __init__(self):
        self.spec, self.data, self.cases = [], bytearray(), []

    def _tensor_line(self, t, is_scalar=False):
        t = t.contiguous()
        off = len(self.data)
        self.data += t.numpy().tobytes() if t.dtype != torch.bfloat16 else \
            t.view(torch.int16).numpy().tobytes()
        dims = " ".join(str(d) for d in t.shape)
        return f"tensor {DT[t.dtype]} {int(is_scalar)} {t.dim()} {dims} {off}"

    def _scalar_line(self, v):
        if isinstance(v, bool):
            t = torch.tensor(v)
        elif isinstance(v, int):
            t = torch.tensor(v, dtype=torch.int64)
        else:
            t = torch.tensor(float(v), dtype=torch.float64)
        return self._tensor_line(t, True)

    def add(self, case):
        schema = case.op._schema
        bound = []
        pos = list(case.args)
        for a in schema.arguments:
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write:
                continue  # out arguments: the executor strips them
            if pos and not a.kwarg_only:
                v = pos.pop(0)
            elif a.name in case.kwargs:
                v = case.kwargs[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                v = None
            bound.append((a, v))
        lines = [f"case {op_name(case.op)} {len(bound)} OUTS"]
        for a, v in bound:
            ty = str(a.type)
            if "Generator" in ty:
                off = len(self.data)
                self.data += torch.randint(0, 2**62, (2,)).numpy().tobytes()
                lines.append(f"gen {off}")
            elif v is None:
                lines.append("none")
            elif isinstance(v, torch.dtype):
                lines.append(f"dtype {DT[v]}")
            elif isinstance(v, (torch.layout, torch.device, torch.memory_format)):
                lines.append("none")
            elif isinstance(v, torch.Tensor):
                lines.append(self._tensor_line(v))
            elif ty in ("number", "Optional[number]"):
                lines.append(self._scalar_line(v))
            elif isinstance(v, (list, tuple)) and "Tensor" in ty:
                lines.append(f"list {len(v)}")
                for t in v:
                    lines.append("none" if t is None else self._tensor_line(t))
            elif isinstance(v, (list, tuple)):
                if all(isinstance(x, bool) for x in v) and "bool" in ty:
                    lines.append(f"bools {len(v)} " + " ".join(str(int(x)) for x in v))
                elif all(isinstance(x, int) for x in v) and "number" not in ty:
                    lines.append(f"ints {len(v)} " + " ".join(str(x) for x in v))
                else:
                    lines.append(f"doubles {len(v)} " + " ".join(repr(float(x)) for x in v))
            elif isinstance(v, bool):
                lines.append(f"bool {int(v)}")
            elif isinstance(v, int):
                lines.append(f"int {v}")
            elif isinstance(v, float):
                lines.append(f"double {v!r}")
            elif isinstance(v, str):
                lines.append(f"str {v}")
            else:
                raise TypeError(f"{case.label}: cannot convert {a.name}={v!r}")
        if case.extra_gen:  # ops without a Generator in their schema
            off = len(self.data)
            self.data += torch.randint(0, 2**62, (2,)).numpy().tobytes()
            lines.append(f"gen {off}")
            lines[0] = lines[0].replace(f" {len(bound)} ", f" {len(bound) + 1} ")
        # Expected results on CPU.
        clone = lambda x: x.clone() if isinstance(x, torch.Tensor) else \
            [y.clone() if isinstance(y, torch.Tensor) else y for y in x] \
            if isinstance(x, list) else x
        args = [clone(x) for x in case.args]
        kwargs = {k: clone(v) for k, v in case.kwargs.items()}
        r = case.op(*args, **kwargs)
        name = str(schema.name)
        if r is None or (name.startswith("aten::_foreach_") and name.endswith("_")):
            r = args[0]
        expected = list(r) if isinstance(r, (list, tuple)) else [r]
        lines[0] = lines[0].replace("OUTS", str(len(expected)))
        for e in expected:
            lines.append(f"out {DT[e.dtype]} {e.dim()} " + " ".join(str(d) for d in e.shape))
        lines.append("end")
        self.spec += lines
        self.cases.append((case, expected))


def from_bytes(buf, like):
    if like.dtype == torch.bfloat16:
        return torch.frombuffer(bytearray(buf), dtype=torch.int16).view(torch.bfloat16).reshape(like.shape) \
            if len(buf) else torch.empty(like.shape, dtype=like.dtype)
    if not len(buf):
        return torch.empty(like.shape, dtype=like.dtype)
    return torch.frombuffer(bytearray(buf), dtype=like.dtype).reshape(like.shape)


def compare(case, got, want):
    if case.check:
        return case.check(got, want)
    for g, w in zip(got, want):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"type {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}"
        if w.dtype.is_floating_point:
            rtol, atol = case.tol or TOL[w.dtype]
            gf, wf = g.double(), w.double()
            ok = torch.isclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True)
            if not bool(ok.all()):
                bad = (~ok).nonzero()[0].tolist()
                err = ((gf - wf).abs() / (wf.abs() + atol)).nan_to_num(1e9).max().item()
                return f"mismatch at {bad}: got {gf[tuple(bad)].item()!r} want {wf[tuple(bad)].item()!r} (max rel err {err:.3g})"
        elif not torch.equal(g, w):
            bad = (g != w).nonzero()[0].tolist() if g.dim() else []
            return f"mismatch at {bad}: got {g[tuple(bad)].item()} want {w[tuple(bad)].item()}"
    return None


def plugin_path():
    p = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if p:
        return p
    import xla_plugins.xla_cpu_pjrt as m
    return os.path.join(os.path.dirname(m.__file__), "xla_cpu_pjrt.so")


def run(batch, build, verbose):
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "spec.txt"), "w").write("\n".join(batch.spec) + "\n")
        open(os.path.join(d, "data.bin"), "wb").write(bytes(batch.data) or b"\0")
        env = dict(os.environ, TORCH_TPU_PJRT_PLUGIN=plugin_path(), TF_CPP_MIN_LOG_LEVEL="2")
        subprocess.run([os.path.join(build, "tpr_lower_run"), d], env=env, check=True)
        results = open(os.path.join(d, "result.txt")).read().splitlines()
        out = open(os.path.join(d, "out.bin"), "rb").read()
    failures = 0
    for i, (case, want) in enumerate(batch.cases):
        line = results[i] if i < len(results) else "err no result (crash?)"
        if line.startswith("ok"):
            nums = [int(x) for x in line.split()[1:]]
            got = [from_bytes(out[nums[2 * k]:nums[2 * k] + nums[2 * k + 1]], w)
                   for k, w in enumerate(want)]
            msg = compare(case, got, want)
        else:
            msg = line
        if msg:
            failures += 1
            print(f"FAIL {case.label}: {msg}")
        elif verbose:
            print(f"ok   {case.label}")
    return failures, len(batch.cases)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--cases", default="rule_cases",
                    help="module under tools/ with a cases() function")
    opts = ap.parse_args()
    sys.path.insert(0, os.path.dirname(__file__))
    os.environ.setdefault("TPR_BUILD", opts.build)
    module = __import__(opts.cases)
    batch = Batch()
    for case in module.cases():
        if opts.k in case.label:
            try:
                batch.add(case)
            except Exception as e:  # a case PyTorch itself rejects
                print(f"SKIP {case.label}: {type(e).__name__}: {e}")
    failures, total = run(batch, opts.build, opts.v)
    print(f"{total - failures}/{total} cases match PyTorch CPU")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
