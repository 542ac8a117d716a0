"""Vision model zoo on ``tpu`` against the CPU: torchvision's classification
models (one or two per family; --all-torchvision for every one), a few
segmentation, video and optical-flow ones, and a spread of
timm architectures, one small variant per family.

    python -m torch_tpu.zoo.vision                        # every row (about 2 h)
    python -m torch_tpu.zoo.vision --fast                 # the CI slice
    python -m torch_tpu.zoo.vision --models resnet18,timm/convnext_atto -v
    python -m torch_tpu.zoo.vision --markdown zoo_vision.md

torchvision wheels for Linux x86-64 on PyPI are CUDA builds whose C++
extension does not load beside PyTorch's CPU build; run with
``TORCH_TPU_TORCHVISION_WITHOUT_OPS=1`` there (torch_tpu/_torchvision.py).
Detection models are left out: they need the extension's operators (nms,
roi_align). Quantized models are left out too (quantized CPU kernels, not a
float model to compare).

Each row: the model with seeded random weights, ``num_classes=10`` where the
constructor takes it, dropout and stochastic depth off, batch 2 at a small
input size the architecture accepts. Forward in evaluation mode on the CPU
and on a copy on ``tpu``, compared with the Transformers zoo's ``compare``
(``max|tpu - cpu| <= 1e-3 * max(max|cpu|, 1e-2)`` per tensor). Then
training from those same weights: 3 SGD steps (lr 0.01, momentum 0.9) in
training mode (batch norm updates its statistics) with cross-entropy on
random labels (per pixel for segmentation; an L1 loss to a random flow for
optical flow), on both devices; the loss of each step and every final
parameter and floating buffer are compared. Models over ``TRAIN_MAX_PARAMS``
parameters run forward only (their training would not fit this machine's
memory twice over). Statuses as in the other zoos: match, mismatch, crash
(raised on tpu, or the worker died or hung), skip (the CPU could not run it:
not counted). CPU fallbacks stay enabled and the ops that fell back are
counted per row.
"""
import argparse
import collections
import copy
import os
import sys
import time

from .. import _isolate
from .harness import _delta, _fallbacks, _short, _tensors, _to_tpu, compare
from .settings import RTOL_SCALE, SEED

BATCH = 2
NUM_CLASSES = 10
STEPS, LR, MOMENTUM = 3, 0.01, 0.9
# Training keeps two models, their gradients and momentum buffers (and a
# copy of the initial weights): six to seven times the weights in float32.
TRAIN_MAX_PARAMS = 150_000_000
# A training mismatch where the CPU's float32 run is itself further than the
# tolerance from its float64 run, and tpu is within this factor of the CPU's
# error, is ill-conditioned (counted as a match, flagged): a wrong op is off
# by O(1) where rounding is not.
ILL_CONDITIONED_FACTOR = 4
PERTURBED_RUNS = 3  # CPU float32 trainings from inputs 8 ulp away (conditioning)
TIMEOUT = 300  # seconds without progress on one row = hung
CHUNK = 20  # rows per worker process

# row id -> (family, source, constructor name, input size, extra kwargs)
# source: "torchvision", "segmentation", "video", "optical_flow" (torchvision
# submodules) or "timm". Sizes are the smallest the architecture takes
# without changing its structure (or the default where it fixes one).

_TV_SIZE = {  # default 64
    "googlenet": 64, "inception_v3": 80, "maxvit_t": 224, "vit_h_14": 56,
    # at 64x64 the last maps are 2x2: batch norm over 8 values per channel
    # makes their training ill-conditioned (a 1e-6 change of the input moves
    # the third loss by 7%)
    **{f"efficientnet_b{i}": 128 for i in range(8)},
    **{f"efficientnet_v2_{s}": 128 for s in "sml"},
}
# families of torchvision's classification models, by name prefix (longest first)
_TV_FAMILIES = ["efficientnet_v2", "efficientnet", "mobilenet_v2", "mobilenet_v3", "swin_v2",
                "swin", "regnet_x", "regnet_y", "wide_resnet", "resnext", "resnet", "shufflenet",
                "squeezenet", "mnasnet", "densenet", "convnext", "vit", "vgg", "maxvit",
                "googlenet", "inception", "alexnet"]
_TV_KW = {
    "googlenet": {"aux_logits": False, "init_weights": True},
    "inception_v3": {"aux_logits": False, "init_weights": True},
}

# timm: (family, name, input size, kwargs); "img_size" in kwargs when the
# constructor fixes its token grid from it.
TIMM = [
    ("resnet", "resnet10t", 64, {}),
    ("resnet-d", "resnet18d", 64, {}),
    ("resnetv2", "resnetv2_50", 64, {}),
    ("vit", "vit_tiny_patch16_224", 64, {"img_size": 64}),
    ("vit-relpos", "vit_relpos_small_patch16_224", 64, {"img_size": 64}),
    ("vit-reg", "vit_little_patch16_reg4_gap_256", 64, {"img_size": 64}),
    ("deit", "deit_tiny_patch16_224", 64, {"img_size": 64}),
    ("deit3", "deit3_small_patch16_224", 64, {"img_size": 64}),
    ("flexivit", "flexivit_small", 64, {"img_size": 64}),
    ("beit", "beit_base_patch16_224", 32, {"img_size": 32}),
    ("eva02", "eva02_tiny_patch14_224", 56, {"img_size": 56}),
    ("cait", "cait_xxs24_224", 64, {"img_size": 64}),
    ("xcit", "xcit_nano_12_p16_224", 64, {"img_size": 64}),
    ("convit", "convit_tiny", 64, {"img_size": 64}),
    ("pit", "pit_ti_224", 64, {"img_size": 64}),
    ("tnt", "tnt_s_patch16_224", 64, {"img_size": 64}),
    ("crossvit", "crossvit_tiny_240", 240, {}),
    ("levit", "levit_128s", 64, {"img_size": 64}),
    ("volo", "volo_d1_224", 64, {"img_size": 64}),
    ("nest", "nest_tiny", 64, {"img_size": 64}),
    ("visformer", "visformer_tiny", 64, {"img_size": 64}),
    ("mixer", "mixer_s16_224", 64, {"img_size": 64}),
    ("resmlp", "resmlp_12_224", 64, {"img_size": 64}),
    ("gmlp", "gmlp_ti16_224", 64, {"img_size": 64}),
    ("convnext", "convnext_atto", 64, {}),
    ("convnextv2", "convnextv2_atto", 64, {}),
    ("efficientnet", "efficientnet_b0", 64, {}),
    ("efficientnetv2", "efficientnetv2_rw_t", 64, {}),
    ("mobilenetv3", "mobilenetv3_small_050", 64, {}),
    ("mobilenetv4", "mobilenetv4_conv_small", 64, {}),
    ("mnasnet", "mnasnet_small", 64, {}),
    ("mixnet", "mixnet_s", 64, {}),
    ("tinynet", "tinynet_e", 64, {}),
    ("lcnet", "lcnet_050", 64, {}),
    ("rexnet", "rexnet_100", 64, {}),
    ("ghostnet", "ghostnet_050", 64, {}),
    ("repghostnet", "repghostnet_050", 64, {}),
    ("regnet", "regnetx_002", 64, {}),
    ("regnetz", "regnetz_b16", 64, {}),
    ("densenet", "densenet121", 64, {}),
    ("dla", "dla34", 64, {}),
    ("dpn", "dpn48b", 64, {}),
    ("res2net", "res2net50_14w_8s", 64, {}),
    ("resnest", "resnest14d", 64, {}),
    ("seresnext", "seresnext26d_32x4d", 64, {}),
    ("skresnet", "skresnet18", 64, {}),
    ("cspnet", "cs3darknet_focus_s", 64, {}),
    ("darknet", "darknet17", 64, {}),
    ("selecsls", "selecsls42b", 64, {}),
    ("hrnet", "hrnet_w18_small", 64, {}),
    ("inception", "inception_v3", 96, {}),
    ("xception", "xception41", 96, {}),
    ("nfnet", "nf_resnet26", 64, {}),
    ("nfnet-dm", "dm_nfnet_f0", 64, {}),
    ("vovnet", "ese_vovnet19b_dw", 64, {}),
    ("tresnet", "tresnet_m", 64, {}),
    ("repvgg", "repvgg_a0", 64, {}),
    ("mobileone", "mobileone_s0", 64, {}),
    ("hgnet", "hgnetv2_b0", 64, {}),
    ("botnet", "botnet26t_256", 64, {"img_size": 64}),
    ("halonet", "halonet26t", 256, {"img_size": 256}),
    ("lambda", "lambda_resnet26t", 64, {"img_size": 64}),
    ("gcresnext", "gcresnext26ts", 64, {}),
    ("maxvit", "maxvit_nano_rw_256", 64, {"img_size": 64}),
    ("coatnet", "coatnet_nano_rw_224", 64, {"img_size": 64}),
    ("coat", "coat_lite_tiny", 64, {"img_size": 64}),
    ("swin", "swin_tiny_patch4_window7_224", 64, {"img_size": 64, "window_size": 4}),
    ("swinv2", "swinv2_cr_tiny_ns_224", 64, {"img_size": 64, "window_size": 4}),
    ("efficientformer", "efficientformer_l1", 224, {}),
    ("efficientformerv2", "efficientformerv2_s0", 64, {"img_size": 64}),
    ("poolformer", "poolformer_s12", 64, {}),
    ("pvt_v2", "pvt_v2_b0", 64, {}),
    ("twins", "twins_svt_small", 64, {"img_size": 64}),
    ("mobilevit", "mobilevit_xxs", 64, {}),
    ("mobilevitv2", "mobilevitv2_050", 64, {}),
    ("edgenext", "edgenext_xx_small", 64, {}),
    ("convmixer", "convmixer_768_32", 64, {}),
    ("fastvit", "fastvit_t8", 64, {}),
    ("tiny_vit", "tiny_vit_5m_224", 224, {}),
    ("efficientvit", "efficientvit_b0", 64, {}),
    ("efficientvit-msra", "efficientvit_m0", 64, {"img_size": 64}),
    ("hiera", "hiera_tiny_224", 64, {"img_size": 64}),
    ("sequencer", "sequencer2d_s", 64, {}),
    ("inception_next", "inception_next_tiny", 64, {}),
    ("focalnet", "focalnet_tiny_srf", 64, {}),
    ("davit", "davit_tiny", 64, {}),
    ("gcvit", "gcvit_xxtiny", 64, {"img_size": 64}),
    ("mvitv2", "mvitv2_tiny", 64, {"img_size": 64}),
    ("rdnet", "rdnet_tiny", 64, {}),
    ("mambaout", "mambaout_femto", 64, {}),
    ("starnet", "starnet_s050", 64, {}),
    ("repvit", "repvit_m0_9", 64, {}),
    ("shvit", "shvit_s1", 64, {}),
    ("swiftformer", "swiftformer_xs", 64, {}),
    ("nextvit", "nextvit_small", 64, {}),
]
# timm's tiny test models (timm.list_models("test_*")), at their own 160x160
# where the grid is fixed, else 64x64.
TIMM_TEST_FIXED = {"test_coatnet", "test_maxvit", "test_vit", "test_vit2", "test_vit3",
                   "test_vit4", "test_vit_relpos"}

SEGMENTATION = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50",
                "deeplabv3_resnet50"]
VIDEO = ["r3d_18", "mc3_18", "r2plus1d_18", "swin3d_t"]
VIDEO_FRAMES = 4
OPTICAL_FLOW = ["raft_small"]
FLOW_UPDATES = 3

# The CI slice: a ResNet, a ViT, a ConvNeXt, an EfficientNet, a Swin, a MobileNet.
FAST = ["torchvision/resnet18", "timm/vit_tiny_patch16_224", "timm/convnext_atto",
        "torchvision/efficientnet_b0", "torchvision/swin_t", "torchvision/mobilenet_v3_small"]


# torchvision's classifiers: the smallest of each family, and the block
# variants within a family that are different code (ResNet's bottleneck,
# MobileNetV3's large head); --all-torchvision runs all of them (about 80,
# hours on a 2-core machine).
TORCHVISION = ["alexnet", "convnext_tiny", "densenet121", "efficientnet_b0",
               "efficientnet_v2_s", "googlenet", "inception_v3", "maxvit_t", "mnasnet0_5",
               "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "regnet_x_400mf",
               "regnet_y_400mf", "resnet18", "resnet50", "resnext50_32x4d",
               "shufflenet_v2_x0_5", "squeezenet1_1", "swin_t", "swin_v2_t", "vgg11_bn",
               "vit_b_16", "wide_resnet50_2"]


def torchvision_classification(every=False):
    import torchvision.models as M
    return sorted(M.list_models(module=M)) if every else TORCHVISION


def rows(every_torchvision=False):
    """{row id: (family, source, name, size, kwargs)}, in run order."""
    import timm
    out = {}
    for name in torchvision_classification(every_torchvision):
        family = next((f for f in _TV_FAMILIES if name.startswith(f)), name)
        out["torchvision/" + name] = (family, "torchvision", name, _TV_SIZE.get(name, 64),
                                      _TV_KW.get(name, {}))
    for name in SEGMENTATION:
        out["torchvision/segmentation/" + name] = ("segmentation", "segmentation", name, 64, {})
    for name in VIDEO:
        out["torchvision/video/" + name] = ("video", "video", name, 32, {})
    for name in OPTICAL_FLOW:
        out["torchvision/optical_flow/" + name] = ("optical_flow", "optical_flow", name, 128, {})
    for family, name, size, kw in TIMM:
        out["timm/" + name] = (family, "timm", name, size, kw)
    for name in sorted(timm.list_models("test_*")):
        fixed = name in TIMM_TEST_FIXED
        out["timm/" + name] = ("timm-test", "timm", name, 160 if fixed else 64, {})
    return out


def _quiet_dropout(model):
    """Dropout, stochastic depth and drop-path off (their draws differ
    between devices): probabilities set to 0 in every module."""
    import torch
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) or \
                type(m).__name__ in ("StochasticDepth", "DropPath", "DropBlock2d"):
            if isinstance(getattr(m, "p", None), float):
                m.p = 0.0
        if isinstance(m, torch.nn.MultiheadAttention):
            m.dropout = 0.0
        for attr in ("drop_prob", "drop_rate", "drop_path_rate", "dropout_rate", "attn_drop_rate",
                     "proj_drop_rate", "pos_drop_rate", "attention_dropout", "dropout_p",
                     "stochastic_depth_prob"):
            v = getattr(m, attr, None)
            if isinstance(v, float) and not isinstance(v, bool) and v != 0.0:
                setattr(m, attr, 0.0)
    return model


def _timm_model(name, kw):
    import timm
    kw = dict(kw)
    extra = {"drop_rate": 0.0, "drop_path_rate": 0.0}
    while True:
        try:
            return timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES, **kw, **extra)
        except TypeError as e:
            dropped = [k for k in extra if k in str(e)]
            if not dropped:
                raise
            for k in dropped:
                del extra[k]


def build(row):
    """(model, inputs, kind) on the CPU: seeded random weights, evaluation mode.
    kind: "cls", "seg", "video" or "flow" (what the training loss is)."""
    import torch
    _, source, name, size, kw = row
    torch.manual_seed(SEED)
    if source == "timm":
        model = _timm_model(name, kw)
        kind = "cls"
    else:
        import torchvision.models as M
        kw = dict(kw)
        if source == "optical_flow":
            kind = "flow"
        else:
            kw["num_classes"] = NUM_CLASSES
            kind = {"torchvision": "cls", "segmentation": "seg", "video": "video"}[source]
        if source == "segmentation":
            kw.update(weights_backbone=None, aux_loss=False)
        if name.startswith("vit_"):
            kw["image_size"] = size
        model = M.get_model(name, weights=None, **kw)
    _quiet_dropout(model).eval()
    g = torch.Generator().manual_seed(SEED + 1)
    if kind == "video":
        x = (torch.randn(BATCH, 3, VIDEO_FRAMES, size, size, generator=g),)
    elif kind == "flow":
        x = (torch.randn(BATCH, 3, size, size, generator=g),
             torch.randn(BATCH, 3, size, size, generator=g))
    else:
        x = (torch.randn(BATCH, 3, size, size, generator=g),)
    return model, x, kind


def _forward(model, x, kind):
    if kind == "flow":
        return model(*x, num_flow_updates=FLOW_UPDATES)
    return model(*x)


def _targets(kind, size):
    """Random labels (or flow) for the training loss, drawn on the CPU."""
    import torch
    g = torch.Generator().manual_seed(SEED + 2)
    if kind == "seg":
        return torch.randint(0, NUM_CLASSES, (BATCH, size, size), generator=g)
    if kind == "flow":
        return torch.randn(BATCH, 2, size, size, generator=g)
    return torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)


def _loss(kind, out, target):
    import torch.nn.functional as F
    if kind == "flow":
        return sum((p - target).abs().mean() for p in out) / len(out)
    if kind == "seg":
        return F.cross_entropy(out["out"], target)
    # classifiers whose training forward returns several heads (distillation
    # tokens, auxiliary classifiers): the mean of their cross-entropies
    heads = [t for t in _tensors(out, []) if t.dim() == 2 and t.shape[-1] == NUM_CLASSES]
    return sum(F.cross_entropy(h, target) for h in heads) / len(heads)


def _steps(model, x, kind, target):
    """SGD steps, one per next(): yields each step's detached loss."""
    import torch
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = _loss(kind, _forward(model, x, kind), target)
        loss.backward()
        opt.step()
        yield loss.detach()


def _train(model, x, kind, target):
    """STEPS SGD steps; returns the detached losses."""
    return list(_steps(model, x, kind, target))


def _state(model):
    """Parameters and floating buffers, by name."""
    out = dict(model.named_parameters())
    out.update((k, v) for k, v in model.named_buffers() if v.is_floating_point())
    return out


def _compare_training(tlosses, losses, tmodel, model):
    for i, (a, b) in enumerate(zip(tlosses, losses)):
        problem = compare(a, b)
        if problem:
            return f"loss of step {i + 1}: {a.item():.6g} vs cpu {b.item():.6g}"
    ref = _state(model)
    for n, t in _state(tmodel).items():
        problem = compare(t, ref[n])
        if problem:
            return f"{n} after {STEPS} steps: {problem}"
    return None


def _rel_err(got, want):
    """The largest max|got - want| / max(max|want|, floor) over the tensors."""
    from .settings import SCALE_FLOOR
    worst = 0.0
    for a, b in zip(got, want):
        a, b = a.detach().cpu().double(), b.detach().cpu().double()
        if b.numel():
            scale = max(b.abs().max().item(), SCALE_FLOOR)
            worst = max(worst, (a - b).abs().max().item() / scale)
    return worst


def _perturbed(t, seed):
    """|t| with each element moved by up to 2^-20 of itself (8 float32 ulp,
    seeded): far below the rounding a float32 forward accumulates in its
    deep layers (1e-4 of the scale there), so a float32 problem cannot
    tell it from |t|."""
    import torch
    if not t.is_floating_point():
        return t
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1
    return (t.double() * (1 + u * 2.0 ** -20)).to(t.dtype)


def _stepwise_errors(model_init, x, kind, target):
    """Per step, (tpu error, CPU float32 error, float32 spread) against the
    CPU's float64 training from the same weights, all run in lockstep: the
    loss and every parameter and floating buffer after that step. The spread
    is the largest error of PERTURBED_RUNS more CPU float32 trainings whose
    inputs differ from |x| by a few ulp: how far float32 rounding alone moves
    the result (a ReLU input within rounding of zero passes or stops a
    gradient at random, and the CPU's own run may happen to agree with
    float64)."""
    import torch
    runs = [("cpu", torch.float64, x), ("cpu", torch.float32, x), ("tpu", torch.float32, x)]
    runs += [("cpu", torch.float32, tuple(_perturbed(t, SEED + 10 + k) for t in x))
             for k in range(PERTURBED_RUNS)]
    gens, states = [], []
    for dev, dtype, xk in runs:
        m = copy.deepcopy(model_init).to(dtype)
        m = _to_tpu(m) if dev == "tpu" else m
        xs = tuple(t.to(dev, dtype) for t in xk)
        ts = target.to(dev, dtype) if target.is_floating_point() else target.to(dev)
        gens.append(_steps(m, xs, kind, ts))
        states.append(m)
    out = []
    for _ in range(STEPS):
        ref, cpu, tpu, *others = ([next(g)] + list(_state(m).values()) for g, m in zip(gens, states))
        cpu_err = _rel_err(cpu, ref)
        spread = max([cpu_err] + [_rel_err(o, ref) for o in others])
        out.append((_rel_err(tpu, ref), cpu_err, spread))
    return out


def _judge_stepwise(errs):
    """(problem, note) from _stepwise_errors(). Batch norm over a few values
    per channel (batch 2, small maps) amplifies rounding step by step, until
    float32 training is itself off its float64 run by more than the
    tolerance (the CPU's run, or one whose inputs moved by a few ulp): up to
    that step tpu must match float64 within the tolerance; at it, within
    ILL_CONDITIONED_FACTOR of that float32 spread; after it float32 runs
    follow rounding, and comparing them says nothing."""
    for step, (tpu_err, cpu_err, spread) in enumerate(errs, 1):
        errs_s = f"step {step}, error against the float64 cpu run: tpu {tpu_err:.2g}, " \
                 f"cpu float32 {cpu_err:.2g}, with inputs 8 ulp away {spread:.2g}"
        if spread > RTOL_SCALE:
            if tpu_err <= ILL_CONDITIONED_FACTOR * spread:
                return None, f"ill-conditioned from {errs_s}"
            return errs_s, None
        if tpu_err > RTOL_SCALE:
            return errs_s, None
    return None, "tpu and cpu float32 both within the tolerance of float64 at every step"


def _training(model, tmodel, x, tx, kind, size, progress):
    model_init = copy.deepcopy(model)
    try:
        target = _targets(kind, size)
        losses = _train(model, x, kind, target)
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "reason": "cpu: " + _short(e)}
    progress()
    try:
        tlosses = _train(tmodel, tx, kind, target.to("tpu"))
        problem = _compare_training(tlosses, losses, tmodel, model)
        rec = {"losses": [round(v.item(), 6) for v in losses]}
        if problem:
            try:
                errs = _stepwise_errors(model_init, x, kind, target)
            except Exception:  # noqa: BLE001  (float64 does not run: the float32 CPU result stands)
                errs = None
            if errs is not None:
                why, note = _judge_stepwise(errs)
                if why is None:
                    rec.update(note=f"{problem}; {note}", ill_conditioned=note.startswith("ill"))
                    problem = None
                else:
                    problem += f" ({why})"
        rec.update(status="mismatch" if problem else "match", reason=problem or "")
        return rec
    except Exception as e:  # noqa: BLE001
        return {"status": "crash", "reason": _short(e)}


def run_model(row_id, row=None, verbose=False, progress=lambda: None):
    """One row: forward on the CPU and on tpu, then training on both."""
    import warnings

    import torch
    warnings.filterwarnings("ignore")
    row = row or rows()[row_id]
    rec = {"family": row[0]}
    try:
        t0 = time.time()
        model, x, kind = build(row)
        rec["params"] = sum(p.numel() for p in model.parameters())
        rec["input"] = [list(t.shape) for t in x]
        with torch.no_grad():
            want = _forward(model, x, kind)
        rec["cpu_seconds"] = round(time.time() - t0, 1)
    except Exception as e:  # noqa: BLE001  (the CPU could not run it: not counted)
        rec.update(status="skip", reason="cpu: " + _short(e), fallbacks={})
        return rec
    progress()
    train = rec["params"] <= TRAIN_MAX_PARAMS
    before = _fallbacks()
    tmodel = None
    try:
        # forward only: the model itself moves (one copy in memory)
        tmodel = _to_tpu(copy.deepcopy(model) if train else model)
        tx = tuple(t.to("tpu") for t in x)
        with torch.no_grad():
            got = _forward(tmodel, tx, kind)
        problem = compare(got, want)
        rec.update(status="mismatch" if problem else "match", reason=problem or "")
    except Exception as e:  # noqa: BLE001
        rec.update(status="crash", reason=_short(e))
    progress()
    if rec["status"] != "crash":
        if train:
            t0 = time.time()
            rec["training"] = _training(model, tmodel, x, tx, kind, row[3], progress)
            rec["training"]["seconds"] = round(time.time() - t0, 1)
        else:
            rec["training"] = {"status": "skip", "reason": f"{rec['params'] / 1e6:.0f}M "
                               f"parameters: forward only (training over {TRAIN_MAX_PARAMS // 10**6}M"
                               " would not fit this machine's memory)", "too_large": True}
    rec["fallbacks"] = _delta(before, _fallbacks())
    if verbose:
        print(row_id, rec, file=sys.stderr)
    return rec


def _worker(args):
    import torch  # noqa: F401

    import torch_tpu  # noqa: F401

    def one(item, progress):
        row_id, row = item
        return row_id, run_model(row_id, tuple(row), args.verbose, progress)
    _isolate.work_rows(args, one)


def _drive(args, table):

    def lost(item, why):
        row_id, row = item
        return row_id, {"family": row[0], "status": "crash", "reason": why, "fallbacks": {}}
    return _isolate.drive_rows("torch_tpu.zoo.vision", args, table, lost, CHUNK)


def totals(results):
    """Forward over the rows the CPU ran; training over those it trained."""
    fwd = collections.Counter(r["status"] for r in results.values())
    counted = fwd["match"] + fwd["mismatch"] + fwd["crash"]
    trn = collections.Counter(r["training"]["status"] for r in results.values()
                              if "training" in r)
    trn["crash"] += fwd["crash"]  # a forward crash is a training crash too
    tcounted = trn["match"] + trn["mismatch"] + trn["crash"]
    fallbacks = _isolate.fallback_counts(results)
    pct = lambda a, b: 100.0 * a / b if b else 0.0  # noqa: E731
    return {
        "models": len(results), "skipped": fwd["skip"], "counted": counted,
        "match": fwd["match"], "mismatch": fwd["mismatch"], "crash": fwd["crash"],
        "match_pct": pct(fwd["match"], counted),
        "training_counted": tcounted, "training_match": trn["match"],
        "training_mismatch": trn["mismatch"], "training_crash": trn["crash"],
        "training_skipped": trn["skip"],
        "training_too_large": sum(1 for r in results.values()
                                  if r.get("training", {}).get("too_large")),
        "training_pct": pct(trn["match"], tcounted),
        "training_ill_conditioned": sum(1 for r in results.values()
                                        if r.get("training", {}).get("ill_conditioned")),
        "families": len({(k.split("/")[0], r.get("family")) for k, r in results.items()}),
        "fallback_ops": dict(fallbacks),
    }


def report(results):
    t = totals(results)
    return "\n".join([
        f"Models: {t['models']} ({t['families']} families); the CPU could not run: "
        f"{t['skipped']}; counted: {t['counted']}",
        f"Forward (evaluation mode) matched the CPU: {t['match']}/{t['counted']} "
        f"({t['match_pct']:.1f}%); mismatch: {t['mismatch']}; crash: {t['crash']}",
        f"Training ({STEPS} SGD steps: every loss, final parameter and buffer) matched the CPU: "
        f"{t['training_match']}/{t['training_counted']} ({t['training_pct']:.1f}%); mismatch: "
        f"{t['training_mismatch']}; crash: {t['training_crash']} (forward crashes included); "
        f"of the matches, {t['training_ill_conditioned']} ill-conditioned (from some step "
        "float32 training on the CPU, from the same inputs or from inputs 8 ulp away, is itself "
        "off its float64 run by more than the tolerance: tpu matched float64 before that step "
        f"and was within {ILL_CONDITIONED_FACTOR}x of that float32 error at it); "
        f"not trained: {t['training_skipped']} ({t['training_too_large']} over "
        f"{TRAIN_MAX_PARAMS // 10**6}M parameters, forward only)",
        _isolate.fallbacks_line(t["fallback_ops"], "models"),
    ])


def details(results):
    rows_ = ["| model | family | parameters | input | forward | training | fallbacks | seconds | "
             "problem |", "|---|---|---|---|---|---|---|---|---|"]
    for name in results:
        r = results[name]
        t = r.get("training", {})
        reason = r.get("reason") or t.get("reason") or t.get("note", "")
        inp = "x".join(str(d) for d in r["input"][0][2:]) if r.get("input") else "-"
        params = f"{r['params'] / 1e6:.1f}M" if "params" in r else "-"
        rows_.append(f"| {name} | {r.get('family', '-')} | {params} | {inp} | {r['status']} | "
                     f"{t.get('status', '-')} | {', '.join(sorted(r.get('fallbacks', {})))} | "
                     f"{r.get('seconds', '-')} | {reason.replace('|', '/')[:200]} |")
    return "\n".join(rows_)


def _select(table, wanted, ap):
    """Row ids for --models entries: a full id, or a bare name matching one."""
    out = []
    for w in wanted:
        hits = [k for k in table if k == w or k.rsplit("/", 1)[-1] == w]
        if not hits:
            ap.error(f"not a row of the vision zoo: {w}")
        out += [h for h in hits if h not in out]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="Vision model zoo (torchvision, timm) on tpu "
                                 "against the CPU.")
    _isolate.add_zoo_arguments(ap, "zoo_vision.json", TIMEOUT, "model")
    ap.add_argument("--all-torchvision", action="store_true",
                    help="every torchvision classifier, not one or two per family")
    ap.add_argument("--models", default="", help="comma-separated rows (torchvision/resnet18, "
                    "timm/convnext_atto, or a bare name)")
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    if args.report:
        return _write_report(args, _isolate.load_results(args.report), None)
    try:
        table = rows(args.all_torchvision)
    except RuntimeError as e:
        sys.exit(f"torchvision does not import ({_short(e)}); where its C++ extension cannot "
                 "load (PyPI's CUDA wheels beside CPU torch) set "
                 "TORCH_TPU_TORCHVISION_WITHOUT_OPS=1")
    wanted = FAST if args.fast else [m for m in args.models.split(",") if m]
    ids = _select(table, wanted, ap) if wanted else list(table)
    t0 = time.time()
    results = _drive(args, [(i, table[i]) for i in ids])
    return _write_report(args, results, time.time() - t0)


def _write_report(args, results, elapsed):
    import torch
    took = f", {elapsed / 60:.0f} min" if elapsed is not None else ""
    print(report(results) + f"\n({len(results)} models{took})")
    if args.markdown:
        try:
            import timm
            import torchvision
            versions = f"torchvision {torchvision.__version__}, timm {timm.__version__}, "
        except Exception:  # noqa: BLE001
            versions = ""
        text = [f"# Vision model zoo on tpu vs CPU ({versions}torch {torch.__version__})",
                f"Command: `python -m torch_tpu.zoo.vision {' '.join(sys.argv[1:])}`{took}",
                *report(results).splitlines(),
                "Left out: torchvision's detection models (they need torchvision's C++ "
                "operators: nms, roi_align) and its quantized models (quantized CPU kernels). "
                f"Batch {BATCH}, random weights, num_classes={NUM_CLASSES}; training: {STEPS} "
                f"SGD steps (lr {LR}, momentum {MOMENTUM}) from the same weights on both "
                "devices.", details(results)]
        with open(args.markdown, "w") as f:
            f.write("\n\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
