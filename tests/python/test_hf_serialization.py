"""torch.save/torch.load and safetensors round-trip tpu tensors bit-exactly.

Bit-exact means the raw bytes agree: tensors are compared through an integer
view of the same width, so NaN payloads and signed zeros count too."""
import io

import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.uint8, torch.bool]
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def sample(dtype, shape=(5, 7), seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        t = (torch.randn(shape, generator=g) * 100).to(dtype)
        special = torch.tensor([float("nan"), -0.0, float("inf"), 1e-30]).to(dtype)
        t.view(-1)[:4] = special[:t.numel()]
        return t
    return torch.randint(0, 100, shape, generator=g).to(dtype)


def assert_bits_equal(a, b):
    a, b = a.cpu(), b.cpu()
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == torch.bool:
        assert torch.equal(a, b)
    else:
        bits = _BITS[a.element_size()]
        assert torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))


def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kw)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_save_load_tpu_tensor(dtype):
    x = sample(dtype)
    t = x.to("tpu")
    back = roundtrip(t)
    assert back.device.type == "tpu"
    assert_bits_equal(back, x)
    assert_bits_equal(roundtrip(t, map_location="cpu"), x)
    assert roundtrip(t, map_location="cpu").device.type == "cpu"


def test_saved_views_keep_sharing_storage():
    base = sample(torch.float32, (6, 8)).to("tpu")
    a, b = base[1:4, ::2], base.t()
    la, lb = roundtrip([a, b])
    assert la.device.type == "tpu" and la.stride() == a.stride()
    assert_bits_equal(la, a)
    assert_bits_equal(lb, b)
    la.fill_(7.0)  # the two loaded views alias one storage, as the saved ones did
    assert_bits_equal(lb.t()[1:4, ::2], torch.full((3, 4), 7.0))


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 16))
    m[2].weight = m[0].weight  # tied, as in language models
    m.register_buffer("steps", torch.tensor([3], dtype=torch.int64))
    return m


def test_state_dict_map_location_tpu():
    sd = _model().state_dict()
    for src in ("cpu", "tpu"):
        saved = {k: v.to(src) for k, v in sd.items()}
        for loc in ("tpu", torch.device("tpu", 0), {"cpu": "tpu", "tpu:0": "tpu:0"}):
            back = roundtrip(saved, map_location=loc)
            assert set(back) == set(sd)
            for k, v in back.items():
                assert v.device.type == "tpu", (src, loc, k)
                assert_bits_equal(v, sd[k])


def test_cpu_checkpoint_into_tpu_module(tmp_path):
    path = tmp_path / "ckpt.pt"
    ref = _model()
    torch.save(ref.state_dict(), path)
    m = _model().to("tpu")
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
    m.load_state_dict(torch.load(path, map_location="tpu"))
    assert m[2].weight is m[0].weight
    for (k, v), w in zip(m.state_dict().items(), ref.state_dict().values()):
        assert v.device.type == "tpu", k
        assert_bits_equal(v, w)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_safetensors_roundtrip(tmp_path, dtype):
    st = pytest.importorskip("safetensors.torch")
    tensors = {"a": sample(dtype), "b": sample(dtype, (3,), seed=1)}
    st.save_file({k: v.to("tpu") for k, v in tensors.items()}, tmp_path / "t.safetensors")
    for device in ("tpu", "cpu"):
        back = st.load_file(tmp_path / "t.safetensors", device=device)
        for k, v in tensors.items():
            assert back[k].device.type == device
            assert_bits_equal(back[k], v)
    with st.safe_open(tmp_path / "t.safetensors", framework="pt", device="tpu") as f:
        assert_bits_equal(f.get_tensor("a"), tensors["a"])


def test_safetensors_model_with_tied_weights(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    ref = _model()
    st.save_model(ref.to("tpu"), tmp_path / "m.safetensors")
    m = _model().to("tpu")
    with torch.no_grad():
        m[1].weight.zero_()
    st.load_model(m, tmp_path / "m.safetensors", device="tpu")
    assert m[2].weight is m[0].weight
    for (k, v), w in zip(m.state_dict().items(), ref.state_dict().values()):
        assert_bits_equal(v, w)
