"""Small random-weight checkpoints for serving tests and benchmarks: a
Hugging Face config per architecture, weights drawn from a seed, and a BPE
tokenizer trained here from a fixed text (no hub access)."""
import os

_DENSE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16)
ARCHS = {
    "llama": dict(model_type="llama", **_DENSE),
    "qwen3": dict(model_type="qwen3", **_DENSE),
    "mistral": dict(model_type="mistral", sliding_window=None, **_DENSE),
    # every other layer local (sliding window 8), as Gemma 3 alternates them
    "gemma3": dict(model_type="gemma3_text", sliding_window=8, query_pre_attn_scalar=16,
                   layer_types=["sliding_attention", "full_attention"], **_DENSE),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, n_inner=128),
    "qwen3_moe": dict(model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=64, decoder_sparse_step=1, **_DENSE),
}

_WORDS = ("the a of to and in is it that for on with as was at by an be this from or "
          "have not are but had his they you were her which she all their there one been "
          "time would so more when will no if out up said what its about into than them "
          "can only other new some could these two may first then do any like my now over "
          "such our man me even most made after also did many before must through back years "
          "where much your way well down should because each just those people how too little "
          "state good very make world still own see men work long get here between both life "
          "being under never day same another know while last might us great old year off come "
          "since against go came right used take three").split()


def _corpus(lines=400, seed=0):
    import random

    rng = random.Random(seed)
    for _ in range(lines):
        yield " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 30))) + "."


def make_tokenizer(path, vocab_size=1000):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    fast.save_pretrained(path)
    return fast


def make(path, arch="llama", vocab_size=1000, seed=0, dtype="float32", **overrides):
    """Writes a checkpoint of |arch| with random weights to |path|; returns
    the path. Weights are drawn with std 0.2 so that greedy decoding is
    decided by clear margins, not ties."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    os.makedirs(path, exist_ok=True)
    tok = make_tokenizer(path, vocab_size)
    spec = dict(ARCHS[arch], **overrides)
    positions = {"n_positions": 512} if arch == "gpt2" else {"max_position_embeddings": 512}
    cfg = AutoConfig.for_model(spec.pop("model_type"), vocab_size=len(tok), **positions,
                               initializer_range=0.2,
                               bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                               tie_word_embeddings=False, **spec)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    model.save_pretrained(path, safe_serialization=True)
    return path
