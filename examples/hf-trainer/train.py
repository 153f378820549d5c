#!/usr/bin/env python3
# examples/hf-trainer/train.py: a transformers Trainer LoRA fine-tune (peft) of a small
# LlamaForCausalLM, as a researcher writes one, run under ftl with two lines of ftl in it
# (python/ftl/hf_trainer.py, docs/python.md "transformers Trainer"):
#
#   ctx = ftl.hf.trainer_init()   # after the imports, before TrainingArguments: the standby parks here
#   ftl.hf.train(trainer)         # instead of trainer.train(): ftl's checkpoints, restore, stop, export
#
# The model, the task and the data are examples/hf-lora's (a byte-level Llama built from a config in
# code with weights from --seed, or read with --base DIR; lines "qwertyui>rxfsuzvj", the loss on the
# answer bytes; made from the seed or read from --data FILE), trained data-parallel on 2 ranks over
# gloo. Deterministic (one thread, torch.use_deterministic_algorithms, fixed seeds, no data-loader
# workers, the generators in the checkpoint): killed and resumed by ftl it ends with the same adapter
# bytes as an unbroken run (tests/python/hf_trainer_kill.sh). At the end rank 0 writes the adapter to
# RUNDIR/final (peft's save_pretrained under ftl's commit marker): what the gate evaluates.
#
#   ftl run examples/hf-trainer/job.yaml    snapshot -> train -> gate (hf-lora's eval.py) -> publish
#   torchrun --nproc_per_node=2 --max_restarts=3 examples/hf-trainer/train.py --output-dir DIR
#                                           without ftl: Trainer's own checkpoints every --ckpt-every
#                                           steps in DIR, and a restart resumes from the newest one
#
# --log-dir DIR (for bench/recovery): each rank appends "started TIME pid PID" once (TIME: the clock
# before `import torch`) and "step N TIME" after each optimizer step to DIR/rank-R.log.
import time

_STARTED = time.time()  # before the heavy imports: what bench/recovery measures a restart from

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

try:
    import ftl
    import ftl.hf
except ImportError:  # running from the source tree: the binding next to this example
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import ftl
    import ftl.hf

# The imports before ftl.hf.trainer_init(): a standby gang's ranks do them while parked.
import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import (LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback,  # noqa: E402
                          TrainingArguments, default_data_collator)
from transformers.trainer_utils import get_last_checkpoint  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="transformers Trainer + peft LoRA fine-tune of a LlamaForCausalLM")
    p.add_argument("--base", default=None, metavar="DIR", help="a Hugging Face model folder (default: built in code)")
    p.add_argument("--data", default=None, metavar="FILE", help="lines 'letters OP answer' (default: made from --seed)")
    p.add_argument("--lines", type=int, default=4096, help="lines made from the seed (without --data)")
    p.add_argument("--steps", type=int, default=120, help="optimizer steps (TrainingArguments.max_steps)")
    p.add_argument("--batch", type=int, default=16, help="global batch of lines (split over the ranks)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--rank", type=int, default=8, help="LoRA rank r")
    p.add_argument("--alpha", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.05, help="LoRA dropout (seeded; restored on a resume)")
    p.add_argument("--targets", default="q_proj,v_proj", help="LoRA target modules")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--scheduler", default="linear", help="TrainingArguments.lr_scheduler_type")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ckpt-every", type=int, default=10, help="steps between checkpoints (ftl's, or Trainer's)")
    p.add_argument("--step-ms", type=float, default=0, help="sleep per step (tests: a kill lands mid-run)")
    p.add_argument("--out", default=None, help="adapter folder under ftl (default RUNDIR/final, committed)")
    p.add_argument("--output-dir", default=None,
                   help="Trainer's output_dir: its checkpoints without ftl (default hf-trainer-out; "
                        "RUNDIR/trainer under ftl, where nothing is written)")
    p.add_argument("--log-dir", default=None, help="append start and step times to DIR/rank-R.log")
    args = p.parse_args()
    for name in ("steps", "batch", "lines", "ckpt_every", "hidden", "layers", "heads", "rank"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, not {getattr(args, name)}")
    return args


def make_lines(seed, n=4096, length=8):
    """examples/finetune's task (every letter moved by one, z -> a), from a torch generator."""
    g = torch.Generator().manual_seed(seed * 7 + 3)
    letters = torch.randint(0, 26, (n, length), generator=g)
    out = []
    for row in letters.tolist():
        q = "".join(chr(97 + c) for c in row)
        a = "".join(chr(97 + (c + 1) % 26) for c in row)
        out.append(f"{q}>{a}".encode())
    return out


def read_lines(path):
    with open(path, "rb") as f:
        return [line for line in f.read().split(b"\n") if line]


class LineDataset(torch.utils.data.Dataset):
    """input_ids '\\n' + line + '\\n' (token id = byte value); labels the same with the prompt
    masked (-100), so the loss is on the answer bytes and the closing newline."""

    def __init__(self, lines):
        self.ids = torch.tensor([list(b"\n" + line + b"\n") for line in lines], dtype=torch.long)
        self.labels = self.ids.clone()
        for i, line in enumerate(lines):
            op = next(j for j, c in enumerate(line) if not 97 <= c <= 122)
            self.labels[i, :op + 2] = -100

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def build_model(args):
    if args.base:
        model = LlamaForCausalLM.from_pretrained(args.base, torch_dtype=torch.float32, attn_implementation="eager")
    else:
        cfg = LlamaConfig(vocab_size=256, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                          num_hidden_layers=args.layers, num_attention_heads=args.heads,
                          num_key_value_heads=args.heads, max_position_embeddings=64, rms_norm_eps=1e-5,
                          tie_word_embeddings=False, bos_token_id=10, eos_token_id=10, pad_token_id=0,
                          attn_implementation="eager")
        torch.manual_seed(args.seed)  # the base's weights: a function of the seed
        model = LlamaForCausalLM(cfg)
        model.config.name_or_path = f"ftl-hf-trainer-tiny-llama-seed{args.seed}"
    torch.manual_seed(args.seed + 1)  # LoRA's A matrices: the same on every rank
    lcfg = LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=args.dropout,
                      target_modules=args.targets.split(","), bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, lcfg)


class StepLog(TrainerCallback):
    """--log-dir: this rank's start and step times, for bench/recovery."""

    def __init__(self, path):
        self.path = path

    def write(self, text):
        with open(self.path, "a") as f:
            f.write(text + "\n")

    def on_step_end(self, args, state, control, **kwargs):
        self.write(f"step {state.global_step} {time.time():.6f}")


class StepSleep(TrainerCallback):
    """--step-ms: a pause per step, so that a test's kill lands mid-run."""

    def __init__(self, ms):
        self.seconds = ms / 1000.0

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


def exact_match(model, dataset):
    """The share of lines whose every scored byte is the argmax (examples/finetune's metric)."""
    with torch.no_grad():
        pred = model(input_ids=dataset.ids).logits[:, :-1].argmax(-1)
    tgt = dataset.labels[:, 1:]
    return ((pred == tgt) | (tgt == -100)).all(dim=1).float().mean().item()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    lines = read_lines(args.data) if args.data else make_lines(args.seed, n=args.lines)
    # Under ftl: the gang and torch's process group, before TrainingArguments forms one. None outside.
    ctx = ftl.hf.trainer_init()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    log = None
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        log = StepLog(os.path.join(args.log_dir, f"rank-{rank}.log"))
        log.write(f"started {_STARTED:.6f} pid {os.getpid()}")
    if args.batch % world:
        print(f"--batch {args.batch} is not a multiple of the {world} ranks", file=sys.stderr)
        return 2
    output_dir = args.output_dir or (os.path.join(ctx.run_dir, "trainer") if ctx else "hf-trainer-out")
    targs = TrainingArguments(
        output_dir=output_dir, max_steps=args.steps, per_device_train_batch_size=args.batch // world,
        learning_rate=args.lr, lr_scheduler_type=args.scheduler, weight_decay=0.0, optim="adamw_torch",
        seed=args.seed, dataloader_num_workers=0, use_cpu=True, ddp_backend="gloo" if world > 1 else None,
        # Trainer's own checkpoints; under ftl, ftl's take their place at the same interval.
        save_strategy="steps", save_steps=args.ckpt_every, save_total_limit=2,
        logging_steps=10, report_to="none", disable_tqdm=True, log_level="warning")
    model = build_model(args)
    train_set = LineDataset(lines)
    callbacks = ([log] if log else []) + ([StepSleep(args.step_ms)] if args.step_ms else [])
    trainer = Trainer(model=model, args=targs, train_dataset=train_set, data_collator=default_data_collator,
                      callbacks=callbacks)
    t0 = time.time()
    # Without ftl (torchrun): Trainer's newest checkpoint in output_dir, if a previous run left one.
    last = get_last_checkpoint(output_dir) if not ctx and os.path.isdir(output_dir) else None
    ftl.hf.train(trainer, resume_from_checkpoint=last, out_dir=args.out)
    if rank == 0:
        model.eval()
        held = LineDataset(make_lines(args.seed + 1000, n=64) if not args.data else lines[-64:])
        where = args.out or (os.path.join(ctx.run_dir, "final") if ctx else "not exported (no ftl)")
        print(f"done: {trainer.state.global_step} steps in {time.time() - t0:.1f} s; held-out exact match "
              f"{exact_match(model, held):.4f}; PEFT adapter in {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
