"""Mixture-of-Experts families over routing settings, on tpu against the CPU.

    python -m torch_tpu.zoo.moe                       # every family, eagerly
    python -m torch_tpu.zoo.moe --families mixtral,afmoe --seeds 3
    python -m torch_tpu.zoo.moe --compile             # a sample of settings, compiled

Each family's default config is shrunk as the zoo shrinks it, then set to
three layers (a first dense layer where the family has one) and to each
routing setting of ``settings``: expert count, top-k, shared experts and
normalised top-k weights where the config has them. Per setting and seed it
prints max|tpu - cpu| and that over max|cpu| for:

* as built: the plain CPU. Routers that initialise to one constant (AFMoE's
  start at zero) tie every score, and which of tied experts topk returns is
  unspecified: the CPU's falls out of std::nth_element, tpu's is lowest
  index first, so this column measures tie-breaking there;
* ties: the CPU with topk ties resolved as tpu resolves them;
* untied: constant matrices redrawn (as the zoo does), the plain CPU.

Both devices take Transformers' grouped-matmul experts path (torch >= 2.10
has it on the CPU). A wrong expert, weight or offset shows at 0.1..1 of the
scale; XLA's reassociation at 1e-7..1e-6.
"""
import argparse
import contextlib
import copy

from .settings import SEED

# model types whose text model routes tokens to experts, in this
# Transformers; multimodal ones are covered by the zoo's run
FAMILIES = (
    "afmoe", "mixtral", "qwen2_moe", "qwen3_moe", "qwen3_next", "deepseek_v2", "deepseek_v3",
    "olmoe", "flex_olmo", "granitemoe", "granitemoeshared", "jamba", "dbrx", "phimoe", "gpt_oss",
    "llama4_text", "jetmoe", "minimax", "glm4_moe", "dots1", "ernie4_5_moe", "hunyuan_v1_moe",
    "lfm2_moe", "exaone_moe", "cohere2_moe", "mistral4", "solar_open", "kimi_linear",
)
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_K = ("num_experts_per_tok", "moe_top_k", "moe_k")
_SHARED = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
# every layer after the first routes, with all experts in one group
_LAYOUT = (("first_k_dense_replace", 1), ("num_dense_layers", 1), ("moe_layer_start_index", 1),
           ("decoder_sparse_step", 1), ("mlp_only_layers", []), ("n_group", 1), ("topk_group", 1),
           ("router_jitter_noise", 0.0), ("expert_layer_period", 1), ("expert_layer_offset", 0),
           ("interleave_moe_layer_step", 1))


def settings(compiled=False):
    """(experts, top-k, shared experts, norm_topk_prob); None keeps the
    family's own. Compiled runs take a sample (a minute or so each)."""
    if compiled:
        return [(4, 1, None, None), (8, 2, None, None), (8, 2, 2, None), (8, 2, None, True)]
    return [(4, 1, None, None), (4, 2, None, None), (8, 2, None, None), (4, 2, 0, None),
            (8, 2, 2, None), (8, 2, None, True), (8, 2, None, False)]


def lowest_index_topk(x, k, dim=-1, largest=True, sorted=True):
    """torch.topk with ties resolved lowest index first: the k leading
    entries of a stable sort (tpu's topk is such a slice)."""
    import torch
    v, i = torch.sort(x, dim=dim, descending=largest, stable=True)
    return torch.return_types.topk((v.narrow(dim, 0, k), i.narrow(dim, 0, k)))


@contextlib.contextmanager
def lowest_index_ties():
    """CPU runs inside break topk ties as tpu does."""
    import torch
    saved = torch.topk, torch.Tensor.topk
    torch.topk = torch.Tensor.topk = lowest_index_topk
    try:
        yield
    finally:
        torch.topk, torch.Tensor.topk = saved


def _set_first(config, names, value):
    """Sets the first of |names| the config uses (has a value for), else
    the first it has (DeepSeek-V2 leaves top-k None)."""
    have = [n for n in names if hasattr(config, n)]
    used = [n for n in have if getattr(config, n) is not None]
    if have:
        setattr(config, (used or have)[0], value)
    return bool(have)


def _routing(config, model_type, experts, top_k, shared, norm, layers):
    """Sets the layout and routing entries; False where the setting does not
    apply to the family."""
    if shared is not None and not any(hasattr(config, n) for n in _SHARED):
        return False
    if norm is not None and not hasattr(config, "norm_topk_prob"):
        return False
    config.num_hidden_layers = layers
    if model_type == "jamba":  # its layer kinds follow from these periods
        config.attn_layer_period, config.attn_layer_offset = 2, 1
    else:
        for n in ("layer_types", "mlp_layer_types"):
            kinds = getattr(config, n, None)
            if kinds is not None:
                setattr(config, n, (list(kinds) * layers)[:layers])
    if getattr(config, "mlp_layer_types", None) is not None:
        config.mlp_layer_types = ["dense"] + ["sparse"] * (layers - 1)
    if model_type == "dbrx":
        config.ffn_config.moe_num_experts, config.ffn_config.moe_top_k = experts, top_k
    elif not (_set_first(config, _EXPERTS, experts) and _set_first(config, _TOP_K, top_k)):
        raise ValueError(f"{model_type}: no expert count or top-k in its config")
    for n in _SHARED if shared is not None else ():
        if hasattr(config, n):
            setattr(config, n, shared)
    if norm is not None:
        config.norm_topk_prob = norm
    for n, v in _LAYOUT:
        if hasattr(config, n):
            setattr(config, n, v)
    return True


def build(model_type, experts, top_k, shared=None, norm=None, layers=3, seed=SEED):
    """The family's base model (random weights under ``seed``) at the
    setting, or None where the setting does not apply. The zoo's shrink
    levels are tried in turn until the model runs forward on the CPU."""
    import torch
    import transformers
    from . import configs, models
    first = None
    for level in ("basic", "consistent"):  # MLA (DeepSeek) needs consistent widths
        config = models.fit_config(configs.shrink(
            transformers.AutoConfig.for_model(model_type), level))
        if not _routing(config, model_type, experts, top_k, shared, norm, layers):
            return None
        torch.manual_seed(seed)
        try:
            model = transformers.AutoModel.from_config(config).eval()
            with torch.no_grad():
                model(input_ids=torch.zeros(1, 4, dtype=torch.long))
            return model
        except Exception as e:  # noqa: BLE001  (the next level may build)
            first = first or e
    raise first


def routed_experts(model):
    """The modules that hold a layer's routed experts."""
    return [m for n, m in model.named_modules() if n.split(".")[-1] == "experts"]


def run_tpu(model, ids, compiled=False):
    import torch
    tpu = copy.deepcopy(model).to("tpu")
    if compiled:
        torch._dynamo.reset()
        tpu = torch.compile(tpu, backend="tpu")
    with torch.no_grad():
        return tpu(input_ids=ids.to("tpu")).last_hidden_state.cpu()


def run_cpu(model, ids, ties=False):
    import torch
    with torch.no_grad(), (lowest_index_ties() if ties else contextlib.nullcontext()):
        return model(input_ids=ids).last_hidden_state


def difference(got, want):
    """(max |got - want|, that over max |want|)."""
    err = (got - want).abs().max().item()
    return err, err / max(want.abs().max().item(), 1e-12)


def check(model, ids, compiled=False):
    """{column: (max abs, max abs / scale)} for the columns of the module
    docstring; the model's constant matrices are redrawn on the way."""
    from .models import _unflatten_constant_weights
    got = run_tpu(model, ids, compiled)
    out = {"as built": difference(got, run_cpu(model, ids)),
           "ties": difference(got, run_cpu(model, ids, ties=True))}
    _unflatten_constant_weights(model)
    out["untied"] = difference(run_tpu(model, ids, compiled), run_cpu(model, ids))
    return out


def main(argv=None):
    import torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args(argv)
    worst = {}
    for family in args.families.split(","):
        for experts, top_k, shared, norm in settings(args.compile):
            tag = f"{family} experts={experts} top_k={top_k}" + \
                (f" shared={shared}" if shared is not None else "") + \
                (f" norm_topk_prob={norm}" if norm is not None else "")
            for seed in range(args.seeds):
                try:
                    model = build(family, experts, top_k, shared, norm, seed=seed)
                    if model is None:
                        break
                    if not routed_experts(model):
                        raise ValueError("no routed experts module")
                    ids = torch.randint(0, model.config.vocab_size, (2, 9),
                                        generator=torch.Generator().manual_seed(seed))
                    cols = check(model, ids, args.compile)
                except Exception as e:  # noqa: BLE001  (report and go on)
                    print(f"{tag} seed {seed}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                    break
                print(f"{tag} seed {seed}: " + " | ".join(
                    f"{k} {a:.2g} ({r:.2g})" for k, (a, r) in cols.items()), flush=True)
                worst[family] = max(worst.get(family, 0.0), cols["ties"][1], cols["untied"][1])
    print("largest max|tpu - cpu| / max|cpu|, ties and untied columns:")
    for family, r in worst.items():
        print(f"  {family}: {r:.2g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
