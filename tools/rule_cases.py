"""Cases for tools/check_rules.py: ATen overloads with sample arguments."""
import torch

from check_rules import Case

aten = torch.ops.aten
F32, BF16, F16, F64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
I32, I64, U8, BOOL = torch.int32, torch.int64, torch.uint8, torch.bool

g = torch.Generator().manual_seed(0)


def rn(*shape, dtype=F32, lo=-3.0, hi=3.0):
    return (torch.rand(*shape, generator=g, dtype=F64) * (hi - lo) + lo).to(dtype)


def ri(*shape, dtype=I64, lo=-9, hi=10):
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def pos(*shape, dtype=F32):
    return rn(*shape, dtype=dtype, lo=0.1, hi=4.0)


def unit(*shape, dtype=F32):
    return rn(*shape, dtype=dtype, lo=0.05, hi=0.95)


def stats(mean, std, lo=None, hi=None, tol=0.05):
    """Checks a random result's moments instead of its values."""
    def check(got, want):
        x = got[0].double()
        if x.shape != want[0].shape:
            return f"shape {list(x.shape)} vs {list(want[0].shape)}"
        if lo is not None and (x.min() < lo or x.max() >= hi):
            return f"range [{x.min().item()}, {x.max().item()}] outside [{lo}, {hi})"
        m, s = x.mean().item(), x.std().item()
        if abs(m - mean) > tol * max(1, abs(std)) or abs(s - std) > tol * max(1, std):
            return f"mean {m:.4f} std {s:.4f}, want {mean} {std}"
        return None
    return check


def cases():
    out = []
    add = lambda op, *a, **k: out.append(Case(op, list(a), k))

    # --- unary float math (incl. opmath for bf16 and int -> float) -------
    for name, gen in [("exp", rn), ("exp2", rn), ("expm1", rn), ("log", pos),
                      ("log2", pos), ("log10", pos), ("log1p", pos), ("sqrt", pos),
                      ("rsqrt", pos), ("sin", rn), ("cos", rn), ("tan", unit),
                      ("tanh", rn), ("sigmoid", rn), ("erf", rn),
                      ("reciprocal", pos), ("neg", rn), ("abs", rn), ("sign", rn),
                      ("floor", rn), ("ceil", rn), ("round", rn), ("trunc", rn),
                      ("frac", rn), ("atan", rn), ("asin", unit), ("erfinv", unit)]:
        op = getattr(aten, name).default
        for dt in (F32, BF16, F64):
            out.append(Case(op, [gen(3, 5, dtype=dt)], None, label=f"{name} {dt}"))
        out.append(Case(getattr(aten, name + "_").default, [gen(4, dtype=F32)], None,
                        label=f"{name}_"))
    for name in ("exp", "sqrt", "sigmoid", "neg", "abs", "sign", "floor"):
        out.append(Case(getattr(aten, name).default, [ri(6, lo=0)], None, label=f"{name} int"))
    add(aten.round.decimals, rn(10) * 100, decimals=2)
    add(aten.round.decimals, rn(10) * 1000, decimals=-2)
    add(aten.bitwise_not.default, ri(7))
    add(aten.bitwise_not.default, torch.tensor([True, False]))
    add(aten.logical_not.default, rn(6).round())
    add(aten.isnan.default, torch.tensor([1.0, float("nan"), float("inf")]))
    add(aten.isinf.default, torch.tensor([1.0, float("nan"), float("-inf")]))
    add(aten.isneginf.default, torch.tensor([1.0, float("inf"), float("-inf")]))

    # --- binary arithmetic --------------------------------------------------
    for dt in (F32, BF16, F64, I64, I32):
        a, b = (rn(3, 4, dtype=dt), rn(4, dtype=dt)) if dt.is_floating_point else \
            (ri(3, 4, dtype=dt), ri(4, dtype=dt))
        out.append(Case(aten.add.Tensor, [a, b], {"alpha": 2}, label=f"add {dt}"))
        out.append(Case(aten.sub.Tensor, [a, b], None, label=f"sub {dt}"))
        out.append(Case(aten.mul.Tensor, [a, b], None, label=f"mul {dt}"))
        out.append(Case(aten.div.Tensor, [a, b.abs() + 1], None, label=f"div {dt}"))
        for mode in ("trunc", "floor"):
            out.append(Case(aten.div.Tensor_mode, [a, (b.abs() + 1) * (-1) ** torch.arange(4)],
                            {"rounding_mode": mode}, label=f"div {mode} {dt}"))
        out.append(Case(aten.remainder.Tensor, [a, (b.abs() + 1) * (-1) ** torch.arange(4)],
                        None, label=f"remainder {dt}"))
        out.append(Case(aten.fmod.Tensor, [a, (b.abs() + 1) * (-1) ** torch.arange(4)],
                        None, label=f"fmod {dt}"))
        out.append(Case(aten.maximum.default, [a, b], None, label=f"maximum {dt}"))
        out.append(Case(aten.minimum.default, [a, b], None, label=f"minimum {dt}"))
    add(aten.add.Tensor, rn(3), rn(3), alpha=0.5)
    add(aten.add.Tensor, ri(3), rn(3))                    # int + float -> float
    add(aten.add.Tensor, rn(2, 3, dtype=BF16), torch.tensor(0.1))  # 0-dim
    add(aten.add.Scalar, rn(3, dtype=BF16), 0.1)
    add(aten.add.Tensor, torch.tensor([True, False]), torch.tensor([True, True]))
    add(aten.add_.Tensor, rn(3, 4), rn(4), alpha=-1.5)
    add(aten.add_.Scalar, rn(3, 4), 2.5)
    add(aten.sub.Scalar, ri(5), 3)
    add(aten.rsub.Scalar, rn(5), 1.0)
    add(aten.rsub.Tensor, rn(5), rn(5), alpha=2)
    add(aten.mul.Scalar, rn(3, 4, dtype=BF16), 0.3)
    add(aten.mul_.Tensor, rn(3, 4), torch.tensor(3.0))
    add(aten.mul.Tensor, torch.tensor([True, False]), torch.tensor([True, True]))
    add(aten.div.Scalar, rn(5, dtype=BF16), 3.0)
    add(aten.div.Tensor, ri(6), ri(6, lo=1))              # int / int -> float
    add(aten.div_.Scalar, rn(5), 7.0)
    add(aten.div.Scalar_mode, torch.tensor([-7.5, 7.5, -0.5, 0.5, 5.0]), 2.0, rounding_mode="floor")
    add(aten.div.Tensor_mode, torch.tensor([-7, 7, -1, 1, 0, -8]), torch.tensor([2, -2, 3, -3, 5, 4]),
        rounding_mode="floor")
    add(aten.div.Tensor_mode, torch.tensor([-7.0, 7.0, -1.0, 1.0, 0.0, -0.0]),
        torch.tensor([2.0, -2.0, 3.0, -3.0, -5.0, 4.0]), rounding_mode="floor")
    add(aten.div.Tensor_mode, torch.tensor([1.0, -1.0, 0.0]), torch.tensor([0.0, 0.0, 0.0]),
        rounding_mode="floor")
    add(aten.floor_divide.default, ri(8), ri(8, lo=1) * -1)
    add(aten.remainder.Scalar, rn(6), -1.5)
    add(aten.remainder.Scalar_Tensor, 5, ri(6, lo=1))
    add(aten.fmod.Scalar, rn(6), 1.5)
    add(aten.pow.Tensor_Scalar, rn(6), 2)
    add(aten.pow.Tensor_Scalar, pos(6), 0.5)
    add(aten.pow.Tensor_Scalar, pos(6, dtype=BF16), -1.5)
    add(aten.pow.Tensor_Scalar, ri(6), 3)
    add(aten.pow.Tensor_Tensor, pos(3, 4), rn(4))
    add(aten.pow.Scalar, 0.9, rn(5))
    add(aten.pow.Scalar, 2, ri(5, lo=0))
    add(aten.pow_.Scalar, pos(6), 2.0)
    add(aten.atan2.default, rn(3, 4), rn(4))
    add(aten.fmax.default, torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([float("nan"), 3.0, 1.0]))
    add(aten.fmin.default, torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([float("nan"), 3.0, 1.0]))
    add(aten.maximum.default, torch.tensor([1.0, float("nan")]), torch.tensor([2.0, 0.0]))
    for op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        add(getattr(aten, op).Tensor, ri(6), ri(6))
        add(getattr(aten, op).Tensor, ri(4) > 0, ri(4) > 0)
        add(getattr(aten, op).Scalar, ri(6), 5)
    for op in ("logical_and", "logical_or", "logical_xor"):
        add(getattr(aten, op).default, rn(6).round(), ri(6))
    add(aten.addcmul.default, rn(3, 4), rn(4), rn(3, 1), value=0.5)
    add(aten.addcmul_.default, rn(3, 4, dtype=BF16), rn(4, dtype=BF16), rn(3, 1, dtype=BF16), value=0.5)
    add(aten.addcdiv.default, rn(3, 4), rn(4), pos(3, 1), value=-2)
    add(aten.addcdiv_.default, rn(3, 4), rn(4), pos(3, 1))
    add(aten.lerp.Scalar, rn(5), rn(5), 0.3)
    add(aten.lerp.Scalar, rn(5), rn(5), 0.8)
    add(aten.lerp_.Scalar, rn(5, dtype=BF16), rn(5, dtype=BF16), 0.1)
    add(aten.lerp.Tensor, rn(2, 5), rn(5), unit(2, 5))
    add(aten.clamp.default, rn(10), -1.0, 0.5)
    add(aten.clamp.default, rn(10), None, 0.5)
    add(aten.clamp.default, ri(10), -2, None)
    add(aten.clamp.default, torch.tensor([float("nan"), 1.0]), 0.0, 0.5)
    add(aten.clamp.Tensor, rn(3, 4), rn(4) - 1, rn(3, 1) + 1)
    add(aten.clamp_min.default, rn(10), 0.25)
    add(aten.clamp_max.default, rn(10), 0.25)
    add(aten.clamp_.default, rn(10), -0.5, 0.5)

    # --- comparisons, where -------------------------------------------------
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        add(getattr(aten, op).Tensor, rn(3, 4).round(), rn(4).round())
        add(getattr(aten, op).Scalar, ri(6), 2)
        add(getattr(aten, op).Scalar, ri(6), 2.5)   # promotes to float
        add(getattr(aten, op).Scalar, rn(6, dtype=BF16), 0.1)
    add(aten.eq.Tensor, torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))
    add(aten.where.self, rn(3, 4) > 0, rn(3, 4), rn(4))
    add(aten.where.self, rn(3, 4) > 0, ri(3, 4), rn(1))
    add(aten.masked_fill.Scalar, rn(3, 4), rn(4) > 0, -1e9)
    add(aten.masked_fill_.Scalar, rn(3, 4, dtype=BF16), rn(3, 1) > 0, 2.0)
    add(aten.masked_fill.Tensor, rn(3, 4), rn(4) > 0, torch.tensor(7.0))

    # --- activations ------------------------------------------------------------
    for dt in (F32, BF16):
        x = rn(4, 6, dtype=dt)
        gr = rn(4, 6, dtype=dt)
        add(aten.relu.default, x)
        add(aten.relu_.default, x)
        add(aten.threshold_backward.default, gr, x, 0)
        add(aten.threshold.default, x, 0.5, -2.0)
        for a in ("none", "tanh"):
            add(aten.gelu.default, x, approximate=a)
            add(aten.gelu_backward.default, gr, x, approximate=a)
        add(aten.silu.default, x)
        add(aten.silu_backward.default, gr, x)
        add(aten.sigmoid_backward.default, gr, torch.sigmoid(x))
        add(aten.tanh_backward.default, gr, torch.tanh(x))
        add(aten.leaky_relu.default, x, 0.2)
        add(aten.leaky_relu_backward.default, gr, x, 0.2, False)
        add(aten.elu.default, x, 1.5, 1.0, 1.0)
        add(aten.elu_backward.default, gr, 1.5, 1.0, 1.0, False, x)
        add(aten.elu_backward.default, gr, 1.0, 1.0, 1.0, True, torch.nn.functional.elu(x))
        add(aten.softplus.default, x * 10, 1, 20)
        add(aten.softplus.default, x, 2, 1)
        add(aten.softplus_backward.default, gr, x, 2, 1)
        add(aten.hardtanh.default, x, -1, 1)
        add(aten.hardtanh_backward.default, gr, x, -0.5, 0.7)
        add(aten.hardsigmoid.default, x)
        add(aten.hardsigmoid_backward.default, gr, x)
        add(aten.hardswish.default, x)
        add(aten.hardswish_backward.default, gr, x)
        add(aten.mish.default, x)
        add(aten.mish_backward.default, gr, x)
        add(aten.log_sigmoid_forward.default, x)
        add(aten.log_sigmoid_backward.default, gr, x, torch.exp(-x.abs()))
        add(aten.glu.default, x, -1)
        add(aten.logit.default, unit(6, dtype=dt), None)
        add(aten.native_dropout_backward.default, gr, x > 0, 2.0)

    # --- factories -------------------------------------------------------------
    add(aten.fill_.Scalar, rn(3, 4), 2.5)
    add(aten.fill_.Scalar, ri(3, 4), 7)
    add(aten.fill_.Scalar, rn(3, dtype=BF16), 0.1)
    add(aten.fill_.Tensor, rn(3, 4), torch.tensor(1.5))
    add(aten.zero_.default, rn(3, 4))
    add(aten.copy_.default, rn(3, 4), ri(4))
    add(aten.copy_.default, rn(3, 4, dtype=BF16), rn(3, 4))
    add(aten._to_copy.default, rn(3, 4), dtype=BF16)
    add(aten._to_copy.default, rn(3, 4) * 10, dtype=I32)
    add(aten._to_copy.default, rn(3, 4), dtype=BOOL)
    add(aten.clone.default, rn(3, 4))
    add(aten.arange.start_step, 0, 10, 1, dtype=I64)
    add(aten.arange.start_step, 0.0, 1.0, 0.1, dtype=F32)
    add(aten.arange.start_step, -3.0, 7.0, 0.37, dtype=F64)
    add(aten.arange.start_step, 5, -5, -2, dtype=I32)
    add(aten.arange.default, 7, dtype=BF16)
    add(aten.full.default, [2, 3], 1.5, dtype=F32)
    add(aten.scalar_tensor.default, 3.25, dtype=F64)

    # --- linear algebra ----------------------------------------------------------
    for dt in (F32, BF16, F64):
        tol = (2e-2, 2e-2) if dt == BF16 else (1e-4, 1e-4) if dt == F32 else None
        A, B, C = rn(5, 7, dtype=dt), rn(7, 3, dtype=dt), rn(3, dtype=dt)
        out.append(Case(aten.mm.default, [A, B], None, tol, label=f"mm {dt}"))
        out.append(Case(aten.addmm.default, [C, A, B], {"beta": 0.5, "alpha": 2}, tol, label=f"addmm {dt}"))
        out.append(Case(aten.bmm.default, [rn(2, 5, 7, dtype=dt), rn(2, 7, 3, dtype=dt)], None, tol,
                        label=f"bmm {dt}"))
        out.append(Case(aten.baddbmm.default, [rn(2, 5, 3, dtype=dt), rn(2, 5, 7, dtype=dt),
                                               rn(2, 7, 3, dtype=dt)], {"beta": 1, "alpha": 0.5}, tol,
                        label=f"baddbmm {dt}"))
        out.append(Case(aten.dot.default, [rn(9, dtype=dt), rn(9, dtype=dt)], None, tol, label=f"dot {dt}"))
        out.append(Case(aten.mv.default, [A, rn(7, dtype=dt)], None, tol, label=f"mv {dt}"))
    out.append(Case(aten.addmm.default, [torch.full((3,), float("nan")), rn(5, 7), rn(7, 3)],
                    {"beta": 0}, (1e-4, 1e-4), label="addmm beta=0 ignores nan"))
    out.append(Case(aten.addmv.default, [rn(5), rn(5, 7), rn(7)], {"beta": 2, "alpha": 3}, (1e-4, 1e-4)))
    out.append(Case(aten.addr.default, [rn(5, 3), rn(5), rn(3)], {"beta": 2, "alpha": 3}, (1e-4, 1e-4)))
    add(aten.mm.default, ri(3, 4), ri(4, 2))

    # --- reductions ------------------------------------------------------------------
    for dt in (F32, BF16, F64):
        x = rn(4, 5, 6, dtype=dt)
        tol = (2e-2, 2e-2) if dt == BF16 else (1e-5, 1e-5) if dt == F32 else None
        R = lambda op, *a, **k: out.append(Case(op, [x, *a], k, tol, label=f"{op_name_of(op)} {a} {k} {dt}"))
        R(aten.sum.default)
        R(aten.sum.dim_IntList, [1], False)
        R(aten.sum.dim_IntList, [0, 2], True)
        R(aten.sum.dim_IntList, [], False)
        R(aten.sum.dim_IntList, [-1], True, dtype=F64)
        R(aten.mean.default)
        R(aten.mean.dim, [1, 2], True)
        R(aten.prod.dim_int, 1, False)
        R(aten.amax.default, [1], False)
        R(aten.amin.default, [0, 2], True)
        R(aten.max.default)
        R(aten.min.default)
        R(aten.max.dim, 1, False)
        R(aten.min.dim, -1, True)
        R(aten.argmax.default, 1, False)
        R(aten.argmax.default, None, False)
        R(aten.argmin.default, 2, True)
        R(aten.var.correction, [1], correction=1, keepdim=False)
        R(aten.var.correction, None, correction=0, keepdim=True)
        R(aten.std.correction, [0, 2], correction=1, keepdim=False)
        R(aten.var_mean.correction, [2], correction=1, keepdim=True)
        R(aten.logsumexp.default, [1], False)
        R(aten.linalg_vector_norm.default, 2, [1], False)
        R(aten.linalg_vector_norm.default, 1, None, False)
        R(aten.linalg_vector_norm.default, float("inf"), [2], True)
        R(aten.linalg_vector_norm.default, 3, [0], False)
        R(aten._softmax.default, -1, False)
        R(aten._softmax.default, 1, False)
        R(aten._log_softmax.default, -1, False)
        y = torch.softmax(x.float(), -1).to(dt)
        ly = torch.log_softmax(x.float(), -1).to(dt)
        gr = rn(4, 5, 6, dtype=dt)
        out.append(Case(aten._softmax_backward_data.default, [gr, y, -1, dt], None, tol,
                        label=f"_softmax_backward_data {dt}"))
        out.append(Case(aten._log_softmax_backward_data.default, [gr, ly, -1, dt], None, tol,
                        label=f"_log_softmax_backward_data {dt}"))
    add(aten._softmax.default, rn(4, 6, dtype=BF16), -1, True)
    add(aten.sum.default, ri(5, 5))
    add(aten.sum.default, ri(5, 5) > 0)
    add(aten.sum.dim_IntList, ri(5, 5, dtype=I32), [0], False)
    add(aten.prod.default, ri(4, lo=1, hi=4))
    add(aten.max.dim, torch.tensor([[1.0, 3.0, 3.0], [float("nan"), 1.0, 2.0]]), 1, False)
    add(aten.argmax.default, torch.tensor([1, 5, 5, 2]), 0, False)
    add(aten.any.default, ri(3, 4) > 5)
    add(aten.any.dim, ri(3, 4), 1, False)
    add(aten.all.dims, rn(3, 4).round(), [0], True)
    add(aten.all.default, torch.ones(3, 4))
    add(aten.logsumexp.default, torch.tensor([[float("-inf"), float("-inf")], [1.0, 2.0]]), [1], False)

    # --- cat, indexing ---------------------------------------------------------
    add(aten.cat.default, [rn(2, 3), rn(4, 3)], 0)
    add(aten.cat.default, [rn(2, 3), rn(2, 1), ri(2, 2)], -1)
    add(aten.cat.default, [rn(2, 3), torch.empty(0), rn(1, 3)], 0)
    add(aten.stack.default, [rn(2, 3), rn(2, 3)], 1)
    add(aten.embedding.default, rn(10, 4), ri(3, 5, lo=0, hi=10))
    add(aten.embedding_dense_backward.default, rn(3, 5, 4), ri(3, 5, lo=0, hi=10), 10, 2, False)
    add(aten.embedding_dense_backward.default, rn(3, 5, 4), ri(3, 5, lo=0, hi=10), 10, -1, True)
    add(aten.index_select.default, rn(5, 6), 1, ri(4, lo=0, hi=6))
    add(aten.gather.default, rn(4, 6), 1, ri(4, 3, lo=0, hi=6))
    add(aten.scatter.src, rn(4, 6), 1, torch.tensor([[0, 1], [2, 3], [4, 5], [1, 0]]), rn(4, 2))
    add(aten.scatter.value, rn(4, 6), 0, torch.tensor([[0, 1, 2], [3, 2, 1]]), 9.0)
    add(aten.scatter_add.default, rn(4, 6), 1, ri(4, 5, lo=0, hi=6), rn(4, 5))
    add(aten.index_add.default, rn(5, 3), 0, torch.tensor([0, 2, 2, 4]), rn(4, 3), alpha=2)
    add(aten.index.Tensor, rn(5, 6, 7), [ri(3, lo=0, hi=5)])
    add(aten.index.Tensor, rn(5, 6, 7), [None, ri(2, 3, lo=-6, hi=6)])
    add(aten.index.Tensor, rn(5, 6, 7), [ri(4, lo=0, hi=5), None, ri(4, lo=0, hi=7)])
    add(aten.index.Tensor, rn(5, 6, 7), [ri(4, lo=0, hi=5), ri(1, lo=0, hi=6)])
    add(aten.index_put.default, rn(5, 6), [torch.tensor([0, 3])], rn(6), False)
    add(aten.index_put.default, rn(5, 6), [torch.tensor([0, 3, 0]), torch.tensor([1, 2, 1])],
        torch.tensor([1.0, 2.0, 3.0]), True)
    add(aten.index_put.default, rn(4, 5, 6), [None, torch.tensor([1, 3])], rn(4, 2, 6), False)
    add(aten.triu.default, rn(4, 5), 1)
    add(aten.tril.default, rn(2, 4, 5), -1)
    add(aten.flip.default, rn(3, 4), [0, 1])
    add(aten.roll.default, rn(3, 4), [1, -2], [0, 1])
    add(aten.roll.default, rn(3, 4), [5], [])
    add(aten.constant_pad_nd.default, rn(3, 4), [1, 2, -1, 0], 0.5)

    # --- losses, layer norm --------------------------------------------------------
    for dt in (F32, BF16):
        tol = (2e-2, 2e-2) if dt == BF16 else (1e-5, 1e-5)
        logp = torch.log_softmax(rn(6, 5), -1).to(dt)
        tgt = torch.tensor([0, 4, 2, -100, 1, 3])
        w = pos(5, dtype=dt)
        for red in (0, 1, 2):
            for wt in (None, w):
                o = aten.nll_loss_forward.default(logp, tgt, wt, red, -100)
                out.append(Case(aten.nll_loss_forward.default, [logp, tgt, wt, red, -100], None, tol,
                                label=f"nll_loss_forward red={red} w={wt is not None} {dt}"))
                go = rn(6, dtype=dt) if red == 0 else torch.tensor(1.3, dtype=dt)
                out.append(Case(aten.nll_loss_backward.default, [go, logp, tgt, wt, red, -100, o[1]],
                                None, tol, label=f"nll_loss_backward red={red} w={wt is not None} {dt}"))
        x, y = rn(4, 5, dtype=dt), rn(4, 5, dtype=dt)
        for red in (0, 1, 2):
            out.append(Case(aten.mse_loss.default, [x, y, red], None, tol, label=f"mse {red} {dt}"))
            go = rn(4, 5, dtype=dt) if red == 0 else torch.tensor(0.7, dtype=dt)
            out.append(Case(aten.mse_loss_backward.default, [go, x, y, red], None, tol,
                            label=f"mse_backward {red} {dt}"))
            p, t = unit(4, 5, dtype=dt), unit(4, 5, dtype=dt)
            out.append(Case(aten.binary_cross_entropy.default, [p, t, None, red], None, tol,
                            label=f"bce {red} {dt}"))
            out.append(Case(aten.binary_cross_entropy_backward.default, [go, p, t, None, red], None, tol,
                            label=f"bce_backward {red} {dt}"))
            out.append(Case(aten.smooth_l1_loss.default, [x, y, red, 0.5], None, tol,
                            label=f"smooth_l1 {red} {dt}"))
            out.append(Case(aten.smooth_l1_loss_backward.default, [go, x, y, red, 0.5], None, tol,
                            label=f"smooth_l1_backward {red} {dt}"))
            out.append(Case(aten.huber_loss.default, [x, y, red, 0.5], None, tol, label=f"huber {red} {dt}"))
        out.append(Case(aten.binary_cross_entropy_with_logits.default, [x, unit(4, 5, dtype=dt), None,
                                                                         pos(5, dtype=dt), 1], None, tol))
        xl, wl, bl = rn(3, 4, 8, dtype=dt), rn(8, dtype=dt), rn(8, dtype=dt)
        out.append(Case(aten.native_layer_norm.default, [xl, [8], wl, bl, 1e-5], None, tol,
                        label=f"native_layer_norm {dt}"))
        o, m, r = aten.native_layer_norm.default(xl, [4, 8], None, None, 1e-5)
        out.append(Case(aten.native_layer_norm_backward.default,
                        [rn(3, 4, 8, dtype=dt), xl, [8], *aten.native_layer_norm.default(xl, [8], wl, bl, 1e-5)[1:],
                         wl, bl, [True, True, True]], None, (5e-2, 5e-2) if dt == BF16 else (1e-4, 1e-4),
                        label=f"native_layer_norm_backward {dt}"))
    add(aten.nll_loss2d_forward.default, torch.log_softmax(rn(2, 3, 4, 5), 1), ri(2, 4, 5, lo=0, hi=3), None, 1, -100)

    # --- random (statistics only) -------------------------------------------------
    big = lambda dt=F32: torch.empty(200, 500, dtype=dt)
    out.append(Case(aten.normal_.default, [big(), 1.5, 2.0], None, check=stats(1.5, 2.0), label="normal_"))
    out.append(Case(aten.normal_.default, [big(BF16), 0.0, 1.0], None, check=stats(0, 1), label="normal_ bf16"))
    out.append(Case(aten.normal_.default, [big(F64), -1.0, 0.5], None, check=stats(-1, 0.5), label="normal_ f64"))
    out.append(Case(aten.uniform_.default, [big(), -2.0, 4.0], None, check=stats(1.0, 6 / 12 ** 0.5, -2, 4),
                    label="uniform_"))
    out.append(Case(aten.uniform_.default, [big(BF16), 0.0, 1.0], None,
                    check=stats(0.5, 1 / 12 ** 0.5, 0, 1), label="uniform_ bf16"))
    out.append(Case(aten.bernoulli_.float, [big(), 0.3], None, check=stats(0.3, (0.3 * 0.7) ** 0.5, 0, 1.01),
                    label="bernoulli_.float"))
    out.append(Case(aten.exponential_.default, [big(), 2.0], None, check=stats(0.5, 0.5), label="exponential_"))
    out.append(Case(getattr(aten.random_, "from"), [torch.empty(200, 500, dtype=I64), 3, 13], None,
                    check=stats(7.5, (99 / 12) ** 0.5, 3, 13), label="random_.from"))

    def dropout_check(got, want):
        y, m = got
        x = torch.ones(200, 500)
        keep = m.double().mean().item()
        if abs(keep - 0.7) > 0.01:
            return f"keep rate {keep}"
        if not torch.allclose(y, torch.where(m, x / 0.7, torch.zeros(()))):
            return "output != mask * x / (1 - p)"
        return None
    out.append(Case(aten.native_dropout.default, [torch.ones(200, 500), 0.3, True], None, check=dropout_check,
                    label="native_dropout", extra_gen=True))

    # --- foreach (optimizer paths) ----------------------------------------------------
    P = lambda: [rn(3, 4), rn(5), rn(2, 2, 2)]
    add(aten._foreach_add_.List, P(), P(), alpha=-0.1)
    add(aten._foreach_add.List, P(), P())
    add(aten._foreach_add_.Scalar, P(), 1.0)
    add(aten._foreach_add_.Tensor, P(), torch.tensor(0.5), alpha=2)
    add(aten._foreach_add_.ScalarList, P(), [1.0, 2.0, 3.0])
    add(aten._foreach_sub_.Scalar, P(), 1.0)
    add(aten._foreach_mul_.Scalar, P(), 0.9)
    add(aten._foreach_mul_.List, P(), P())
    add(aten._foreach_mul_.Tensor, P(), torch.tensor(0.25))
    add(aten._foreach_div_.ScalarList, P(), [0.9, 0.99, 0.5])
    add(aten._foreach_div_.List, P(), [pos(3, 4), pos(5), pos(2, 2, 2)])
    add(aten._foreach_div_.Scalar, P(), 3.0)
    add(aten._foreach_div_.Tensor, P(), torch.tensor(4.0))
    add(aten._foreach_lerp_.Scalar, P(), P(), 0.1)
    add(aten._foreach_lerp_.List, P(), P(), [unit(3, 4), unit(5), unit(2, 2, 2)])
    add(aten._foreach_addcmul_.Scalar, P(), P(), P(), value=0.001)
    add(aten._foreach_addcmul_.Tensor, P(), P(), P(), torch.tensor([0.1, 0.2, 0.3]))
    add(aten._foreach_addcdiv_.Scalar, P(), P(), [pos(3, 4), pos(5), pos(2, 2, 2)], value=-0.01)
    add(aten._foreach_addcdiv_.ScalarList, P(), P(), [pos(3, 4), pos(5), pos(2, 2, 2)], [-0.1, -0.2, -0.3])
    add(aten._foreach_sqrt.default, [pos(3, 4), pos(5)])
    add(aten._foreach_sqrt_.default, [pos(3, 4), pos(5)])
    add(aten._foreach_neg_.default, P())
    add(aten._foreach_reciprocal_.default, [pos(3, 4), pos(5)])
    add(aten._foreach_maximum_.List, P(), P())
    add(aten._foreach_pow.ScalarAndTensor, 0.9, [pos(3), pos(1)])
    add(aten._foreach_pow.Scalar, P(), 2.0)
    add(aten._foreach_norm.Scalar, P(), 2)
    add(aten._foreach_zero_.default, P())
    add(aten._foreach_copy_.default, P(), P())
    add(aten._foreach_clamp_min_.Scalar, P(), 0.0)
    add(aten._foreach_exp.default, P())
    add(aten._foreach_mul.List, [rn(3, dtype=BF16)], [rn(3, dtype=BF16)])
    return out


def op_name_of(op):
    return str(op._schema.name).split("::")[1] + ("" if op._overloadname == "default" else "." + op._overloadname)
