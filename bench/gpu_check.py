"""The GPU path in one command: torch_tpu on XLA's CUDA plugin against
PyTorch's own CUDA, on a machine with an NVIDIA GPU, torch and the
jax-cuda13-pjrt plugin installed (no network needed).

    python bench/gpu_check.py [--device cuda|cpu] [--out DIR] [--jobs N]
                              [--gemm 4096] [--quick]

1. build: compiles the C core and the C++ glue against the installed torch,
   in parallel, into torch_tpu/_C (no CMake, ninja or pip needed);
2. info: plugin discovery and `python -m torch_tpu.info --check` with the
   plugin (its self-check against PyTorch's CPU, docs/conformance.md);
3. smoke: a few hundred op calls (elementwise, reductions, shapes, matmul,
   convolution, normalisation, attention, losses; float32 and bfloat16),
   each on torch CUDA and on tpu, compared with per-dtype tolerances;
4. GEMM: bf16 NxNxN matmul TFLOP/s, tpu against torch CUDA;
5. GPT training step (forward, backward, AdamW) of a GPT-2-small-sized
   model in bf16 autocast: tokens/s and MFU of torch.compile(backend="tpu")
   against torch CUDA eager and Inductor.

PyTorch's CUDA runs in one process and torch_tpu in another (XLA's allocator
reserves most of the GPU's memory for itself). `--device cpu` runs the same
script with the CPU plugin against PyTorch's CPU path, at small sizes: the
dry run that checks the script itself on a machine without a GPU. Results go
to DIR/gpu_check.json and a summary table to stdout (figures for
docs/figures.md)."""
import argparse
import concurrent.futures
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Dense bf16 peak of the GPUs this check expects (TFLOP/s), for MFU.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L4": 121.0}


# -- build ------------------------------------------------------------------------

def _compile(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)}\n{p.stderr[-4000:]}")


def build(jobs):
    """torch_tpu/_C for the installed torch: the C core (C11) and csrc (C++17),
    compiled in parallel; objects newer than their source are kept."""
    import torch
    from torch.utils import cpp_extension as ce

    out = os.path.join(ROOT, "build", f"gpu_check-torch{torch.__version__.split('+')[0]}")
    cc, cxx = os.environ.get("CC", "cc"), os.environ.get("CXX", "c++")
    inc = ["-I", os.path.join(ROOT, "include"), "-I", ROOT]
    c_flags = ["-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", "-DNDEBUG", *inc]
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    pybind = getattr(ce, "_get_pybind11_abi_build_flags", lambda: [])()
    cxx_flags = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-DNDEBUG",
                 f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                 "-DTORCH_EXTENSION_NAME=_C", *pybind, "-I", os.path.join(ROOT, "include"),
                 "-I", os.path.join(ROOT, "csrc"),
                 *[f"-I{p}" for p in ce.include_paths()], f"-I{sysconfig.get_paths()['include']}"]
    units = [(cc, c_flags, s) for d in ("runtime", "compiler", "eager")
             for s in sorted(glob.glob(os.path.join(ROOT, d, "**", "*.c"), recursive=True))]
    units += [(cxx, cxx_flags, s) for s in
              sorted(glob.glob(os.path.join(ROOT, "csrc", "**", "*.cpp"), recursive=True))]
    objs, todo = [], []
    for comp, flags, src in units:
        obj = os.path.join(out, os.path.relpath(src, ROOT) + ".o")
        objs.append(obj)
        if not (os.path.exists(obj) and os.path.getmtime(obj) >= os.path.getmtime(src)):
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            todo.append([comp, *flags, "-c", src, "-o", obj])
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(_compile, todo))
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    so = os.path.join(ROOT, "torch_tpu", "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
    _compile([cxx, "-shared", *objs, f"-L{lib}", "-lc10", "-ltorch", "-ltorch_cpu",
              "-ltorch_python", "-ldl", "-lpthread", f"-Wl,-rpath,{lib}", "-o", so])
    return {"compiled": len(todo), "units": len(units), "seconds": time.perf_counter() - t0,
            "torch": torch.__version__}


# -- the op smoke -------------------------------------------------------------------

def smoke_cases():
    """(name, fn(make) -> tensor or tuple, dtypes). make(shape, kind) gives
    the case's inputs on the device under test, the same values on both."""
    import torch
    import torch.nn.functional as F

    unary = {
        "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "sin": torch.sin,
        "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": F.relu,
        "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
        "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
        "sign": torch.sign, "atan": torch.atan, "expm1": torch.expm1, "softplus": F.softplus,
        "elu": F.elu, "leaky_relu": F.leaky_relu, "hardswish": F.hardswish, "mish": F.mish,
        "square": torch.square, "clamp": lambda x: x.clamp(-0.5, 0.5),
    }
    positive = {"log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
                "log1p": torch.log1p, "reciprocal": torch.reciprocal, "log2": torch.log2}
    binary = {
        "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
        "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
        "pow": lambda a, b: a.abs().pow(b), "where": lambda a, b: torch.where(a > 0, a, b),
        "lerp": lambda a, b: torch.lerp(a, b, 0.3), "hypot": torch.hypot,
        "eq": torch.eq, "lt": torch.lt, "ge": torch.ge,
    }
    cases = []
    both = ("float32", "bfloat16")
    for n, f in unary.items():
        cases.append((f"unary {n}", lambda m, f=f: f(m((64, 257))), both))
    for n, f in positive.items():
        cases.append((f"unary {n}", lambda m, f=f: f(m((64, 257), "positive")), both))
    for n, f in binary.items():
        cases.append((f"binary {n}", lambda m, f=f: f(m((64, 257)), m((257,))), both))
    for n in ("sum", "mean", "amax", "amin", "std", "var", "logsumexp", "norm", "prod"):
        for dim in (0, 1, None):
            if dim is None and n == "logsumexp":
                continue
            args = {} if dim is None else {"dim": dim}
            cases.append((f"reduce {n} dim={dim}",
                          lambda m, n=n, a=args: getattr(torch, n)(m((33, 65), "small"), **a),
                          both if n != "prod" else ("float32",)))
    for n in ("argmax", "argmin"):
        cases.append((f"reduce {n}", lambda m, n=n: getattr(torch, n)(m((33, 65)), dim=1),
                      ("float32",)))
    shape_ops = {
        "cat": lambda m: torch.cat([m((8, 16)), m((4, 16))]),
        "stack": lambda m: torch.stack([m((8, 16)), m((8, 16))], 1),
        "transpose": lambda m: m((16, 32)).t().contiguous(),
        "permute": lambda m: m((4, 8, 16)).permute(2, 0, 1).contiguous(),
        "flip": lambda m: m((8, 16)).flip(1), "roll": lambda m: m((8, 16)).roll(3, 1),
        "tril": lambda m: m((16, 16)).tril(), "triu": lambda m: m((16, 16)).triu(1),
        "cumsum": lambda m: m((8, 64), "small").cumsum(1),
        "sort": lambda m: m((8, 64)).sort(1).values, "topk": lambda m: m((8, 64)).topk(5).values,
        "gather": lambda m: m((8, 16)).gather(1, m((8, 4), "index16")),
        "index_select": lambda m: m((32, 8)).index_select(0, m((10,), "index16")),
        "scatter_add": lambda m: torch.zeros_like(m((8, 16))).scatter_add(
            1, m((8, 4), "index16"), m((8, 4))),
        "masked_fill": lambda m: m((8, 16)).masked_fill(m((8, 16)) > 0, -1.0),
        "pad": lambda m: F.pad(m((2, 3, 8, 8)), (1, 2, 0, 1)),
        "repeat": lambda m: m((4, 8)).repeat(2, 3), "expand_add": lambda m: m((4, 1)) + m((1, 8)),
    }
    for n, f in shape_ops.items():
        cases.append((f"shape {n}", f, both))
    nn_ops = {
        "linear": lambda m: F.linear(m((32, 64)), m((48, 64)), m((48,))),
        "mm": lambda m: m((64, 96)) @ m((96, 80)),
        "bmm": lambda m: torch.bmm(m((4, 32, 48)), m((4, 48, 16))),
        "einsum": lambda m: torch.einsum("bij,bjk->bik", m((4, 16, 24)), m((4, 24, 8))),
        "conv2d": lambda m: F.conv2d(m((2, 8, 16, 16)), m((16, 8, 3, 3)), m((16,)), padding=1),
        "conv2d_stride": lambda m: F.conv2d(m((2, 8, 17, 17)), m((8, 8, 3, 3)), stride=2),
        "conv1d": lambda m: F.conv1d(m((2, 8, 32)), m((16, 8, 5))),
        "max_pool2d": lambda m: F.max_pool2d(m((2, 4, 16, 16)), 2),
        "avg_pool2d": lambda m: F.avg_pool2d(m((2, 4, 16, 16)), 3, 2),
        "softmax": lambda m: m((16, 100)).softmax(-1),
        "log_softmax": lambda m: m((16, 100)).log_softmax(-1),
        "layer_norm": lambda m: F.layer_norm(m((8, 64)), (64,), m((64,)), m((64,))),
        "group_norm": lambda m: F.group_norm(m((2, 8, 6, 6)), 4),
        "batch_norm_eval": lambda m: F.batch_norm(m((4, 8, 5, 5)), m((8,)), m((8,), "positive"),
                                                  training=False),
        "rms_norm": lambda m: F.rms_norm(m((8, 64)), (64,)),
        "embedding": lambda m: F.embedding(m((6, 7), "index16"), m((16, 32))),
        "sdpa_causal": lambda m: F.scaled_dot_product_attention(
            m((2, 4, 32, 16)), m((2, 4, 32, 16)), m((2, 4, 32, 16)), is_causal=True),
        "cross_entropy": lambda m: F.cross_entropy(m((16, 10)), m((16,), "index10")),
        "mse_loss": lambda m: F.mse_loss(m((16, 10)), m((16, 10))),
        "interpolate_bilinear": lambda m: F.interpolate(m((1, 2, 8, 8)), scale_factor=2,
                                                        mode="bilinear"),
    }
    for n, f in nn_ops.items():
        cases.append((f"nn {n}", f, both))
    return cases


# Tolerances: float32 elementwise work differs in the last bits between
# XLA's and CUDA's math libraries; matmul-like ops may use TF32 on XLA:GPU
# (PyTorch's CUDA does not by default); bfloat16 keeps 8 bits.
TOL = {"float32": (1e-4, 1e-5), "float32 matmul": (2e-2, 2e-2), "bfloat16": (3e-2, 3e-2)}
MATMUL_LIKE = ("linear", "mm", "bmm", "einsum", "conv", "sdpa")


def _maker(device, dtype, seed):
    import torch

    def make(shape, kind="normal"):
        g = torch.Generator().manual_seed(seed + 7919 * len(shape) + sum(shape))
        if kind.startswith("index"):
            return torch.randint(0, int(kind[5:]), shape, generator=g).to(device)
        x = torch.randn(shape, generator=g)
        if kind == "positive":
            x = x.abs() + 0.1
        elif kind == "small":
            x = x * 0.3
        return x.to(device=device, dtype=getattr(torch, dtype))

    return make


def run_smoke(device):
    """Runs every case on |device|; returns {name: result on the host} and
    {name: error}."""
    import torch

    results, errors = {}, {}
    for i, (name, fn, dtypes) in enumerate(smoke_cases()):
        for dt in dtypes:
            key = f"{name} {dt}"
            try:
                r = fn(_maker(device, dt, i))
                r = r if isinstance(r, torch.Tensor) else r[0]
                results[key] = r.detach().to("cpu")
            except Exception as e:  # noqa: BLE001 (each case reports its own failure)
                errors[key] = f"{type(e).__name__}: {str(e)[:300]}"
    return results, errors


def compare(ours, ref):
    import torch

    ok, bad = 0, {}
    for key, r in ref.items():
        if key not in ours:
            continue
        got = ours[key]
        dt = key.rsplit(" ", 1)[1]
        tol = TOL["float32 matmul" if dt == "float32" and any(m in key for m in MATMUL_LIKE)
                  else dt]
        try:
            if r.dtype.is_floating_point:
                torch.testing.assert_close(got.float(), r.float(), rtol=tol[0], atol=tol[1],
                                           equal_nan=True)
            else:
                torch.testing.assert_close(got, r)
            ok += 1
        except AssertionError as e:
            bad[key] = str(e).splitlines()[2] if len(str(e).splitlines()) > 2 else str(e)
    return ok, bad


# -- GEMM and the training step -------------------------------------------------------

def _sync(device):
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device.startswith("tpu"):
        torch.tpu.synchronize()


def gemm_tflops(device, n, reps=20):
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        c = a @ b
    _sync(device)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            c = a @ b
        _sync(device)
        times.append((time.perf_counter() - t0) / reps)
    del c
    return 2 * n ** 3 / statistics.median(times) / 1e12


def gpt_config(quick):
    # GPT-2 small's shape on a GPU; a small one for the CPU dry run.
    return (dict(vocab=8192, d=256, layers=2, heads=4, seq=128), 4) if quick else \
        (dict(vocab=50304, d=768, layers=12, heads=12, seq=1024), 8)


def train_tokens_per_s(device, backend, quick, steps=10):
    """Tokens/s of the GPT training step (bf16 autocast, AdamW) and the
    model's FLOPs per token (6 x parameters + attention)."""
    import torch

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from models import TinyGPT, gpt_batch, gpt_loss

    torch.manual_seed(0)
    cfg, batch = gpt_config(quick)
    model = TinyGPT(**cfg).to(device)
    kind = device.split(":")[0]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=kind == "tpu")

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(kind, dtype=torch.bfloat16):
            loss = gpt_loss(model, x, y)
        loss.backward()
        opt.step()
        return loss

    if backend:
        step = torch.compile(step, backend=backend)
    x, y = gpt_batch(batch, cfg["seq"], cfg["vocab"], device)
    t0 = time.perf_counter()
    for _ in range(3):
        step(x, y)
    _sync(device)
    first = time.perf_counter() - t0
    if device == "tpu":
        torch.tpu.wait_for_compiles()  # tiered compiles (CPU plugin): time the full code
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step(x, y)
    loss.item()
    dt = (time.perf_counter() - t0) / steps
    params = sum(p.numel() for p in model.parameters())
    flops_per_token = 6 * params + 12 * cfg["layers"] * cfg["d"] * cfg["seq"]
    return {"tokens_per_s": batch * cfg["seq"] / dt, "step_s": dt, "warmup_s": first,
            "flops_per_token": flops_per_token, "params": params}


# -- the two sides ----------------------------------------------------------------------

def reference_side(args):
    """PyTorch's own path on the device: smoke results, GEMM, training."""
    import torch

    dev = args.device
    res = {"torch": torch.__version__}
    if dev == "cuda":
        res["gpu"] = torch.cuda.get_device_name()
    results, errors = run_smoke(dev)
    torch.save(results, os.path.join(args.out, "reference.pt"))
    res["smoke_cases"], res["smoke_errors"] = len(results), errors
    res["gemm_tflops"] = gemm_tflops(dev, args.gemm)
    res["train_eager"] = train_tokens_per_s(dev, None, args.quick)
    res["train_inductor"] = train_tokens_per_s(dev, "inductor", args.quick)
    return res


def tpu_side(args):
    """torch_tpu on the plugin: info, smoke against the reference, GEMM,
    compiled training."""
    import torch
    import torch_tpu  # noqa: F401 (registers the device)

    res = {}
    # The plugin's self-check against PyTorch's CPU (docs/conformance.md):
    # it names every probed op the plugin computes wrong.
    info = subprocess.run([sys.executable, "-m", "torch_tpu.info", "--check"],
                          capture_output=True, text=True, env=dict(os.environ))
    res["info"] = info.stdout + info.stderr[-2000:]
    out = info.stdout.splitlines()
    start = next((i for i, ln in enumerate(out) if ln.startswith("self-check")), len(out))
    res["self_check"] = {"exit": info.returncode, "lines": out[start:]}
    results, errors = run_smoke("tpu")
    ref = torch.load(os.path.join(args.out, "reference.pt"))
    ok, bad = compare(results, ref)
    res["smoke"] = {"cases": len(ref), "match": ok, "mismatch": bad, "errors": errors}
    res["gemm_tflops"] = gemm_tflops("tpu", args.gemm)
    res["train_compiled"] = train_tokens_per_s("tpu", "tpu", args.quick)
    res["cache_stats"] = {k: v for k, v in torch.tpu._get_cache_stats().items()
                          if isinstance(v, (int, float))}
    return res


def side(role, args):
    """Runs one side in a fresh process (each owns the GPU while it runs)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if role == "tpu":
        env["TORCH_TPU_PJRT_PLUGIN"] = "cuda" if args.device == "cuda" else "cpu"
    else:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # PyTorch alone
    cmd = [sys.executable, os.path.abspath(__file__), "--role", role, "--device", args.device,
           "--out", args.out, "--gemm", str(args.gemm)] + (["--quick"] if args.quick else [])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    path = os.path.join(args.out, f"{role}.json")
    res = json.load(open(path)) if p.returncode == 0 and os.path.exists(path) else {
        "failed": f"exit {p.returncode}", "stderr": p.stderr[-6000:]}
    res["seconds"] = time.perf_counter() - t0
    return res


def summary(report, args):
    ref, ours = report["reference"], report["tpu"]
    lines = [f"gpu_check ({args.device}): torch {ref.get('torch')}, {ref.get('gpu', 'no GPU')}, "
             f"build {report['build'].get('seconds', 0):.0f} s"]
    if "failed" in ours:
        lines.append(f"torch_tpu side failed: {ours['failed']}\n{ours['stderr']}")
        return "\n".join(lines)
    lines += ours.get("self_check", {}).get("lines", [])[:30]
    s = ours["smoke"]
    lines.append(f"smoke: {s['match']}/{s['cases']} match torch, {len(s['mismatch'])} differ, "
                 f"{len(s['errors'])} raised on tpu")
    for k, v in list(s["mismatch"].items())[:20] + list(s["errors"].items())[:20]:
        lines.append(f"  {k}: {v}")
    g, gr = ours["gemm_tflops"], ref["gemm_tflops"]
    lines.append(f"bf16 GEMM {args.gemm}^3: tpu {g:.3g} TFLOP/s, torch {gr:.3g} TFLOP/s, "
                 f"tpu/torch {g / gr:.2f}x")
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in ref.get("gpu", "")), None)
    c = ours["train_compiled"]
    for name, r in (("tpu compiled", c), ("torch eager", ref["train_eager"]),
                    ("torch inductor", ref["train_inductor"])):
        mfu = (f", MFU {r['tokens_per_s'] * r['flops_per_token'] / (peak * 1e12):.1%}"
               if peak else "")
        vs = "" if r is c else f", tpu compiled / this {c['tokens_per_s'] / r['tokens_per_s']:.2f}x"
        lines.append(f"GPT step {name}: {r['tokens_per_s']:,.0f} tokens/s{mfu}{vs}, "
                     f"first 3 steps {r['warmup_s']:.1f} s")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "gpu_check_out"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--gemm", type=int, default=None, help="GEMM size (4096; 1024 on cpu)")
    p.add_argument("--quick", action="store_true", help="small GPT (default on cpu)")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--skip-build", action="store_true")
    p.add_argument("--role", choices=("reference", "tpu"), help=argparse.SUPPRESS)
    args = p.parse_args()
    args.gemm = args.gemm or (4096 if args.device == "cuda" else 1024)
    args.quick = args.quick or args.device == "cpu"
    os.makedirs(args.out, exist_ok=True)
    if args.role:
        res = (reference_side if args.role == "reference" else tpu_side)(args)
        with open(os.path.join(args.out, f"{args.role}.json"), "w") as f:
            json.dump(res, f, indent=1, default=str)
        return
    t0 = time.perf_counter()
    report = {"build": {"skipped": True} if args.skip_build else build(args.jobs)}
    report["gpus"] = shutil.which("nvidia-smi") and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
    report["reference"] = side("reference", args)
    report["tpu"] = side("tpu", args)
    report["seconds"] = time.perf_counter() - t0
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(summary(report, args))
    print(f"total {report['seconds']:.0f} s; details: {os.path.join(args.out, 'gpu_check.json')}")
    sys.exit(0 if "failed" not in report["tpu"] and "failed" not in report["reference"] else 1)


if __name__ == "__main__":
    main()
