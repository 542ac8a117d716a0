"""TorchTitan's llama3 debug model on `tpu`: 1 process against 2 processes with
FSDP2 (torchrun, tpu_dist), same global batch, same losses.

    python bench/torchtitan_run.py [--steps 10] [--seq-len 128] [--global-batch 4]
                                   [--nproc 2] [--atol 1e-4] [--timeout 900]
                                   [--workdir DIR] [--json FILE]

Needs torchtitan installed beside torch_tpu (docs/distributed.md, "TorchTitan").
TorchTitan runs unmodified, from its own command line (`python -m
torchtitan.train --module llama3 --config llama3_debugmodel ...`): it picks the
`tpu` device and the `tpu_dist` backend by itself, as it would CUDA and NCCL.

Everything runs offline. The assets TorchTitan's debug config expects and its
wheel does not ship are made here first:

* a byte-level BPE tokenizer (vocabulary under the debug model's 2048),
  trained with `tokenizers` on generated text;
* a "c4_test"-style dataset: JSON lines of {"text": ...}, where every
  document encodes to exactly one training sample (seq_len tokens after
  TorchTitan's in-document shift), so no sample straddles two documents.

Why two copies of the dataset: TorchTitan's loader gives each data-parallel
rank a contiguous block of the documents (datasets' split_dataset_by_node), so
on 2 ranks step k trains on documents 2k, 2k+1 of the first half and of the
second half. The 1-process run reads the same documents in that order
(`ranked` as written, `merged` interleaved), so each step's global batch is the
same set of sequences in both runs.

The losses are parsed from TorchTitan's log ("step: N  loss: X", 5 decimals;
every rank logs the global loss and the ranks must agree) and must agree to
--atol, 1e-4 absolute: the runs are float32 end to end and differ only in
summation order (the 2-process gradients are reduce-scattered, each rank's
loss sum is added to the other's), which moves a loss near 5 by a few 1e-6,
growing slowly through AdamW; the printing adds up to 1e-5. Real differences
are larger: bfloat16 FSDP2 compute moves the loss by 5e-4 at step 1, a wrong
batch or a lost gradient by far more."""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"

# A small English-like grammar: text with structure a model learns within a
# few steps, so the losses fall and a wrong update would show.
_NOUNS = ("cat dog bird fish horse farmer teacher child river mountain city garden "
          "house window door table book letter song story road bridge ship train "
          "forest field market school king queen doctor baker painter sailor").split()
_VERBS = ("sees finds likes builds paints reads writes carries follows watches "
          "opens closes visits crosses remembers forgets helps calls").split()
_ADJS = ("old young small large green quiet bright dark happy tired red blue "
         "careful clever gentle brave").split()
_ADVS = "slowly quickly often never always quietly again".split()
_PLACES = ("near the river", "in the city", "by the sea", "under the bridge", "at the market",
           "after dark")


def _sentence(rng):
    def np():
        words = ["the"] + ([rng.choice(_ADJS)] if rng.random() < 0.5 else []) + [rng.choice(_NOUNS)]
        return " ".join(words)

    s = f"{np()} {rng.choice(_VERBS)} {np()}"
    if rng.random() < 0.4:
        s += f" {rng.choice(_ADVS)}"
    if rng.random() < 0.4:
        s += f" {rng.choice(_PLACES)}"
    return s[0].upper() + s[1:] + "."


def make_tokenizer(out_dir, seed, vocab_size=1024):
    """A byte-level BPE tokenizer trained on generated text, saved as
    tokenizer.json + tokenizer_config.json (what TorchTitan's
    HuggingFaceTokenizer loads)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(seed)
    corpus = [" ".join(_sentence(rng) for _ in range(8)) for _ in range(2000)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": False,
                   "add_eos_token": False}, f)
    return tok


def make_documents(tok, n_docs, seq_len, seed):
    """n_docs texts of exactly seq_len - 1 tokens each: with BOS and EOS that
    is seq_len + 1 tokens, one sample of seq_len after the shift. Byte-level
    pre-tokenization splits at spaces and punctuation, so a text's token count
    is the sum of its words'; the last tokens are filled with '.', one byte,
    one token."""
    rng = random.Random(seed + 1)
    n_text = seq_len - 1
    docs = []
    for _ in range(n_docs):
        pieces, count, full = [], 0, False
        while not full:
            for w in _sentence(rng).split(" "):
                piece = w if not pieces else " " + w
                n = len(tok.encode(piece).ids)
                if count + n > n_text:
                    full = True
                    break
                pieces.append(piece)
                count += n
        text = "".join(pieces) + "." * (n_text - count)
        got = len(tok.encode(text).ids)
        if got != n_text:
            raise RuntimeError(f"document encodes to {got} tokens, not {n_text}")
        docs.append(text)
    return docs


def write_jsonl(path, docs):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for text in docs:
            f.write(json.dumps({"text": text}) + "\n")


def make_assets(root, *, steps, seq_len, global_batch, ranks, seed=0):
    """Tokenizer and both dataset orders under root; returns their paths."""
    tok = make_tokenizer(os.path.join(root, "tokenizer"), seed)
    local = global_batch // ranks
    n_docs = steps * global_batch
    docs = make_documents(tok, n_docs, seq_len, seed)
    per_rank = n_docs // ranks
    # ranked: rank r's contiguous block is docs[r * per_rank:(r + 1) * per_rank]
    write_jsonl(os.path.join(root, "c4_ranked", "data.json"), docs)
    # merged: step k's global batch, rank 0's local batch first
    merged = [docs[r * per_rank + k * local + i]
              for k in range(steps) for r in range(ranks) for i in range(local)]
    write_jsonl(os.path.join(root, "c4_merged", "data.json"), merged)
    return {"tokenizer": os.path.join(root, "tokenizer"),
            "ranked": os.path.join(root, "c4_ranked"),
            "merged": os.path.join(root, "c4_merged")}


STEP_LINE = re.compile(
    r"\[titan\] (\S+ \S+) - root - INFO - step:\s*(\d+)\s+loss:\s*([-+0-9.eEnaif]+)")


def titan_command(nproc, assets, data, local_batch, args, dump):
    """TorchTitan's own command line; only its options choose what differs
    from the debug config's defaults."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
        "-m", "torchtitan.train", "--module", "llama3", "--config", "llama3_debugmodel",
        "--hf-assets-path", assets["tokenizer"],
        "--dataloader.dataset", "c4_test", "--dataloader.dataset-path", assets[data],
        "--training.steps", str(args.steps), "--training.seq-len", str(args.seq_len),
        "--training.local-batch-size", str(local_batch),
        # FSDP2 computes in bfloat16 by default; float32 keeps the comparison
        # exact up to summation order.
        "--training.mixed-precision-param", "float32",
        "--parallelism.data-parallel-shard-degree", str(nproc),
        # torchtitan 0.3's default, spmd_types, needs an FSDP2 that reads
        # spmd_types annotations (newer than torch 2.13); partial_dtensor
        # is the DTensor FSDP2 path that torch 2.13 has.
        "--parallelism.spmd-backend", "partial_dtensor",
        "--debug.seed", "0",
        "--checkpoint.no-enable", "--metrics.disable-color-printing",
        "--dump-folder", dump,
        # the model's forward once per step: a test of the distributed
        # step, not of activation checkpointing
        "activation-checkpoint:none",
    ]


def run_titan(nproc, assets, data, local_batch, args, workdir):
    """Launches one run under a timeout; returns (losses by step, seconds,
    seconds per step after the first, log path)."""
    log_path = os.path.join(workdir, f"titan_{nproc}proc.log")
    dump = os.path.join(workdir, f"out{nproc}")
    cmd = titan_command(nproc, assets, data, local_batch, args, dump)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONUNBUFFERED="1",
               HF_HOME=os.path.join(workdir, "hf"), WANDB_MODE="disabled")
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            rc = None
    seconds = time.monotonic() - t0
    text = open(log_path, errors="replace").read()
    if rc != 0:
        why = f"timed out after {args.timeout} s" if rc is None else f"exited with {rc}"
        raise SystemExit(f"torchtitan on {nproc} process(es) {why}; log: {log_path}\n"
                         + "\n".join(text.splitlines()[-40:]))
    losses, stamps = {}, {}
    for stamp, step, loss in STEP_LINE.findall(text):
        step, loss = int(step), float(loss)
        # every rank logs the global loss: the ranks must agree
        if step in losses and losses[step] != loss:
            raise SystemExit(f"{nproc} processes: ranks log different losses at step {step}: "
                             f"{losses[step]} and {loss}")
        losses[step] = loss
        stamps.setdefault(step, stamp)
    if sorted(losses) != list(range(1, args.steps + 1)):
        raise SystemExit(f"{nproc} process(es): logged steps {sorted(losses)}, expected "
                         f"1..{args.steps}; log: {log_path}")
    from datetime import datetime
    t = [datetime.strptime(stamps[s], "%Y-%m-%d %H:%M:%S,%f") for s in sorted(stamps)]
    per_step = (t[-1] - t[0]).total_seconds() / (len(t) - 1) if len(t) > 1 else float("nan")
    return losses, seconds, per_step, log_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--global-batch", type=int, default=4,
                    help="sequences per step, all ranks together")
    ap.add_argument("--nproc", type=int, default=2, help="processes of the FSDP2 run")
    ap.add_argument("--atol", type=float, default=1e-4,
                    help="largest allowed |1-process loss - N-process loss| per step")
    ap.add_argument("--timeout", type=float, default=900, help="seconds allowed to each run")
    ap.add_argument("--workdir", help="where assets, logs and outputs go (default: a temporary "
                                      "folder, removed on success)")
    ap.add_argument("--json", help="also write the losses and times to this file")
    args = ap.parse_args()
    if args.global_batch % args.nproc:
        ap.error("--global-batch must be a multiple of --nproc")
    try:
        import torchtitan  # noqa: F401
    except ImportError:
        raise SystemExit("torchtitan is not installed: see docs/distributed.md, 'TorchTitan', "
                         "for the install command")

    workdir = args.workdir or tempfile.mkdtemp(prefix="torchtitan_run_")
    os.makedirs(workdir, exist_ok=True)
    start = time.monotonic()
    assets = make_assets(workdir, steps=args.steps, seq_len=args.seq_len,
                         global_batch=args.global_batch, ranks=args.nproc)
    one, t_one, step_one, _ = run_titan(1, assets, "merged", args.global_batch, args, workdir)
    many, t_many, step_many, _ = run_titan(args.nproc, assets, "ranked",
                                           args.global_batch // args.nproc, args, workdir)

    n = args.nproc
    print(f"\nTorchTitan llama3 debugmodel on tpu: {args.steps} steps, seq_len {args.seq_len}, "
          f"global batch {args.global_batch} (float32, seed 0)")
    print(f"| step | 1 process | {n} processes, FSDP2 | difference |")
    print("|---|---|---|---|")
    worst = 0.0
    for s in range(1, args.steps + 1):
        d = abs(one[s] - many[s])
        worst = max(worst, d)
        print(f"| {s} | {one[s]:.5f} | {many[s]:.5f} | {d:.1e} |")
    print(f"\nwall time: 1 process {t_one:.1f} s ({step_one:.2f} s/step after the first), "
          f"{n} processes {t_many:.1f} s ({step_many:.2f} s/step after the first); "
          f"all {time.monotonic() - start:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": args.steps, "one": one, "many": many, "nproc": n,
                       "seconds_one": t_one, "seconds_many": t_many,
                       "step_seconds_one": step_one, "step_seconds_many": step_many,
                       "max_difference": worst}, f)
    ok = worst <= args.atol and one[args.steps] < one[1]
    print(f"largest difference {worst:.1e} (allowed {args.atol:.0e}); "
          f"loss {one[1]:.3f} -> {one[args.steps]:.3f}: {'MATCH' if ok else 'MISMATCH'}")
    if not ok:
        raise SystemExit(f"losses differ (or did not fall); logs in {workdir}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
