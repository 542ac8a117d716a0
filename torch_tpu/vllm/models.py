"""Small random-weight checkpoints for serving tests and benchmarks: a
Hugging Face config per architecture, weights drawn from a seed, and a BPE
tokenizer trained here from a fixed text (no hub access)."""
import os

ARCHS = {
    "llama": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16),
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
    cfg = AutoConfig.for_model(spec.pop("model_type"), vocab_size=len(tok),
                               max_position_embeddings=512, initializer_range=0.2,
                               bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                               tie_word_embeddings=False, **spec)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    model.save_pretrained(path, safe_serialization=True)
    return path
