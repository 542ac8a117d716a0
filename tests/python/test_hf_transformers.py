"""Hugging Face Transformers treats ``tpu`` as just another device.

Small random-weight models built from configs (no hub access). Tolerance for
float32 logits: 1e-4 absolute+relative. The models chain ~100 ops whose XLA
kernels associate sums differently from the CPU's (a few ulp each); observed
differences stay near 1e-6, and a wrong op gives O(1) errors. Token outputs
(generate) must be identical."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

TOL = dict(rtol=1e-4, atol=1e-4)


def llama_config(**kw):
    return transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **kw)


def gpt2_config(**kw):
    return transformers.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                   **kw)


def make(cls, config):
    torch.manual_seed(0)
    return cls(config).eval()


def ids(n=2, s=7, vocab=128):
    return torch.randint(3, vocab, (n, s), generator=torch.Generator().manual_seed(1))


def test_is_torch_tpu_available():
    from transformers.utils import is_torch_tpu_available
    assert is_torch_tpu_available()
    assert torch.accelerator.current_accelerator().type == "tpu"


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_model_to_tpu_matches_cpu(kind):
    cls, cfg = ((transformers.LlamaForCausalLM, llama_config()) if kind == "llama"
                else (transformers.GPT2LMHeadModel, gpt2_config()))
    model = make(cls, cfg)
    x = ids()
    with torch.no_grad():
        want = model(x).logits
        model.to("tpu")
        assert all(p.device.type == "tpu" for p in model.parameters())
        got = model(x.to("tpu")).logits
    torch.testing.assert_close(got.cpu(), want, **TOL)


def test_tied_weights_stay_tied():
    model = make(transformers.GPT2LMHeadModel, gpt2_config(tie_word_embeddings=True))
    assert model.lm_head.weight is model.transformer.wte.weight
    model.to("tpu")
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.lm_head.weight.device.type == "tpu"
    with torch.no_grad():
        model.transformer.wte.weight[0].fill_(3.0)
    assert torch.equal(model.lm_head.weight[0].cpu(), torch.full((32,), 3.0))


@pytest.fixture(scope="module")
def saved_llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    model = make(transformers.LlamaForCausalLM, llama_config())
    model.save_pretrained(path)
    with torch.no_grad():
        want = model(ids()).logits
    return path, want


@pytest.mark.parametrize("device_map", ["tpu", {"": "tpu"}, "tpu:0"])
def test_from_pretrained_device_map(saved_llama, device_map):
    path, want = saved_llama
    model = transformers.LlamaForCausalLM.from_pretrained(path, device_map=device_map)
    assert {p.device for p in model.parameters()} == {torch.device("tpu", 0)}
    with torch.no_grad():
        got = model(ids().to("tpu")).logits
    torch.testing.assert_close(got.cpu(), want, **TOL)


def test_device_map_auto_places_on_tpu(saved_llama):
    path, want = saved_llama
    model = transformers.LlamaForCausalLM.from_pretrained(path, device_map="auto")
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    with torch.no_grad():
        got = model(ids().to("tpu")).logits
    torch.testing.assert_close(got.cpu(), want, **TOL)


def test_device_map_auto_with_max_memory_splits(saved_llama):
    """A budget too small for the whole model keeps the head on tpu and offloads the rest;
    accelerate's hooks bring offloaded weights to tpu for each forward."""
    path, want = saved_llama
    model = transformers.LlamaForCausalLM.from_pretrained(
        path, device_map="auto", max_memory={0: 60_000, "cpu": 10**9})
    placed = set(model.hf_device_map.values())
    assert placed == {0, "cpu"}
    assert model.model.embed_tokens.weight.device.type == "tpu"
    with torch.no_grad():
        got = model(ids().to("tpu")).logits
    torch.testing.assert_close(got.cpu(), want, **TOL)


def _generate(model, device, **kw):
    x = ids(2, 5).to(device)
    out = model.to(device).generate(x, attention_mask=torch.ones_like(x), max_new_tokens=8,
                                    pad_token_id=0, **kw)
    return out.cpu()


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_generate_greedy_and_beam_match_cpu(kind):
    cls, cfg = ((transformers.LlamaForCausalLM, llama_config()) if kind == "llama"
                else (transformers.GPT2LMHeadModel, gpt2_config()))
    model = make(cls, cfg)
    for kw in (dict(do_sample=False), dict(do_sample=False, num_beams=3)):
        want = _generate(model, "cpu", **kw)
        got = _generate(model, "tpu", **kw)
        assert got.shape == want.shape
        assert torch.equal(got, want), kw


def test_generate_sampling_uses_kv_cache():
    """Sampling on tpu: top_k=1 must reproduce greedy; full sampling gives valid tokens."""
    model = make(transformers.LlamaForCausalLM, llama_config()).to("tpu")
    greedy = _generate(model, "tpu", do_sample=False)
    top1 = _generate(model, "tpu", do_sample=True, top_k=1)
    assert torch.equal(top1, greedy)
    torch.tpu.manual_seed(0)
    sampled = _generate(model, "tpu", do_sample=True, top_k=50, temperature=1.5)
    assert sampled.shape == greedy.shape and int(sampled.max()) < 128 and int(sampled.min()) >= 0
    assert torch.equal(sampled[:, :5], greedy[:, :5])


def test_generate_cache_matches_no_cache():
    model = make(transformers.LlamaForCausalLM, llama_config()).to("tpu")
    assert torch.equal(_generate(model, "tpu", use_cache=True),
                       _generate(model, "tpu", use_cache=False))


@pytest.mark.usefixtures("no_fallback")  # fused AdamW included
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_trainer_runs_on_tpu(tmp_path, bf16):
    from torch.utils.data import Dataset

    class Tokens(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            x = ids(8, 6)[i]
            return {"input_ids": x, "labels": x}

    def train(use_cpu):
        model = make(transformers.LlamaForCausalLM, llama_config()).train()
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / ("cpu" if use_cpu else "tpu")), max_steps=3,
            per_device_train_batch_size=2, learning_rate=1e-2, logging_steps=1, report_to=[],
            save_strategy="no", use_cpu=use_cpu, dataloader_pin_memory=False, seed=0,
            bf16=bf16)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens())
        dtypes = set()
        model.lm_head.register_forward_hook(lambda mod, inp, out: dtypes.add(out.dtype))
        trainer.train()
        assert dtypes == {torch.bfloat16 if bf16 else torch.float32}  # autocast ran
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        return trainer, losses

    trainer, got = train(False)
    assert trainer.args.device.type == "tpu"
    assert next(trainer.model.parameters()).device.type == "tpu"
    _, want = train(True)
    assert len(got) == 3
    # three AdamW steps feed the rounding differences back: 1e-3 relative;
    # under bf16 autocast (the CPU's and the tpu's cast the model's matrix
    # products alike) the losses carry bf16's rounding: 2**-7 relative
    tol = dict(rtol=2 ** -7, atol=1e-3) if bf16 else dict(rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), **tol)
