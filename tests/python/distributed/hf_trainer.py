"""A Hugging Face Trainer run as its users write it, on tpu: under torchrun
(DDP, 2 processes, 2 sequences each) or in one process (4 sequences), same
data order (sequential sampling), same init. Rank 0 saves the logged losses
and the final weights for the test to compare."""
import os
import sys

import torch
import transformers

mode, out = sys.argv[1], os.environ["TPU_DIST_OUT"]
torch.manual_seed(0)
config = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # no dropout: the runs must agree
model = transformers.GPT2LMHeadModel(config)
g = torch.Generator().manual_seed(1)
data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 96, (24, 16), generator=g)]
args = transformers.TrainingArguments(
    output_dir=out + ".trainer", per_device_train_batch_size=2 if mode == "ddp" else 4,
    max_steps=6, learning_rate=1e-3, logging_steps=1, report_to=[], save_strategy="no",
    train_sampling_strategy="sequential", seed=0, dataloader_num_workers=0)
trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
trainer.train()
if trainer.args.process_index == 0:
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    torch.save({"losses": losses, "device": str(trainer.args.device),
                "world": trainer.args.world_size,
                "params": {k: v.detach().cpu() for k, v in trainer.model.named_parameters()}},
               out + f".{mode}.pt")
