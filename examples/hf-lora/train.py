#!/usr/bin/env python3
# examples/hf-lora/train.py: a Hugging Face PEFT LoRA fine-tune of a LlamaForCausalLM under ftl,
# as a researcher writes one (transformers + peft, an ordinary training loop), data-parallel over
# torch.distributed (gloo, from the MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE ftl sets), with its
# checkpoints, progress and stop requests through ftl.hf (python/ftl/hf.py).
#
# The base is a small byte-level Llama (vocabulary 256, token id = byte value) built from a
# LlamaConfig in code with weights from a seed, or read from a Hugging Face folder (--base DIR:
# config.json + model.safetensors, as `ftl export --base` writes for examples/finetune). The task
# is examples/finetune's (docs/finetune.md): lines "qwertyui>rxfsuzvj", the answer after the
# operator byte, scored on the answer bytes only; the lines are made in code from the seed, or
# read from --data FILE (ftl-finetune-data's train.txt). Deterministic: killed and resumed it ends
# with the same adapter bytes as an unbroken run (tests/python/hf_lora_kill.sh). At the end rank 0
# writes the adapter with peft's save_pretrained to RUNDIR/final/ (or --out), committed by ftl's
# marker (final/COMMIT), which is what the gate evaluates and `ftl publish` packages.
#
#   ftl run examples/hf-lora/job.yaml   snapshot -> train -> gate (eval.py) -> publish -> promote
#                                       (docs/python.md, docs/pipeline.md)
#
# Not here: downloading anything (no model hub: HF_HUB_OFFLINE), transformers' Trainer, a GPU.
import argparse
import os
import sys
import time

try:
    import ftl
    import ftl.hf
except ImportError:  # running from the source tree: the binding next to this example
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import ftl
    import ftl.hf

# The imports before ftl.init(): a standby gang's ranks do them while parked (docs/python.md).
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="PEFT LoRA fine-tune of a LlamaForCausalLM under ftl")
    p.add_argument("--base", default=None, metavar="DIR", help="a Hugging Face model folder (default: built in code)")
    p.add_argument("--data", default=None, metavar="FILE", help="lines 'letters OP answer' (default: made from --seed)")
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--batch", type=int, default=16, help="global batch of lines (split over the ranks)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--rank", type=int, default=8, help="LoRA rank r")
    p.add_argument("--alpha", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.05)
    p.add_argument("--targets", default="q_proj,v_proj", help="LoRA target modules")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-ms", type=float, default=0, help="sleep per step (tests: a kill lands mid-run)")
    p.add_argument("--out", default=None, help="adapter folder (default RUNDIR/final, committed for the gate)")
    return p.parse_args()


def make_lines(seed, n=4096, length=8):
    """examples/finetune's task (gen_data.c's shift: every letter moved by one, z -> a), from a
    torch generator: the same seed always gives the same lines."""
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


def encode(lines):
    """input_ids: '\\n' + line + '\\n' as bytes (token id = byte value); labels: the same with the
    prompt masked (-100), so the loss is on the answer bytes and the closing newline, as the C
    example scores (data.c, answer_only). transformers shifts the labels by one itself."""
    ids = torch.tensor([list(b"\n" + line + b"\n") for line in lines], dtype=torch.long)
    labels = ids.clone()
    for i, line in enumerate(lines):
        op = next(j for j, c in enumerate(line) if not 97 <= c <= 122)
        labels[i, :op + 2] = -100  # positions 0..op+1 hold '\n' and the prompt up to the operator
    return ids, labels


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
        model.config.name_or_path = f"ftl-hf-lora-tiny-llama-seed{args.seed}"
    torch.manual_seed(args.seed + 1)  # LoRA's A matrices: the same on every rank
    lcfg = LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=args.dropout,
                      target_modules=args.targets.split(","), bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, lcfg)


def exact_match(model, lines):
    """The share of lines whose every scored byte is the argmax (examples/finetune's metric)."""
    ids, labels = encode(lines)
    with torch.no_grad():
        pred = model(input_ids=ids).logits[:, :-1].argmax(-1)
    tgt = labels[:, 1:]
    return ((pred == tgt) | (tgt == -100)).all(dim=1).float().mean().item()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    lines = read_lines(args.data) if args.data else make_lines(args.seed)
    ctx = ftl.init()
    rank, world = ctx.rank, ctx.world_size
    if args.batch % world:
        print(f"--batch {args.batch} is not a multiple of the {world} ranks", file=sys.stderr)
        return 2
    ftl.hf.init_process_group(ctx)

    model = build_model(args)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    torch.manual_seed(args.seed * 7919 + 1 + rank)  # LoRA dropout: each rank its own stream
    state = ftl.hf.TrainingState(ctx, model, opt, total_steps=args.steps, ckpt_every=args.ckpt_every)
    done = state.restore()  # 0 on a fresh start
    if done:
        print(f"rank {rank}: resumed from step {done} at data position {state.position} (attempt {ctx.attempt})",
              flush=True)

    per = args.batch // world
    grads = torch.zeros(sum(p.numel() for p in params) + 1)
    flops = None  # this rank's model FLOPs a step (ftl.hf.train_flops: 6 per LoRA weight, 4 per frozen one)
    t0 = time.time()
    loss = None
    while done < args.steps:
        step = done + 1
        # The global batch is the next args.batch lines from the data position; this rank's rows.
        first = state.position + rank * per
        ids, labels = encode([lines[(first + k) % len(lines)] for k in range(per)])
        opt.zero_grad(set_to_none=False)
        loss = model(input_ids=ids, labels=labels).loss
        if flops is None:
            flops = ftl.hf.train_flops(model, ids.shape[0], ids.shape[1])
        loss.backward()
        # One allreduce per step: the gradients and, folded in, this rank's stop vote.
        torch.cat([p.grad.reshape(-1) for p in params] + [torch.tensor([float(ctx.stop_pending())])], out=grads)
        dist.all_reduce(grads)
        off = 0
        for p in params:
            p.grad.copy_(grads[off:off + p.numel()].view_as(p) / world)
            off += p.numel()
        opt.step()
        state.position += args.batch
        done = step
        if rank == 0 and (done % 20 == 0 or done == 1 or done == args.steps):
            print(f"step {done} loss {loss.item():.6f}", flush=True)
        if state.step_end(done, loss.item(), tokens=done * args.batch * ids.shape[1], stop=grads[-1].item() > 0,
                          flops=flops):
            print(f"rank {rank}: stop requested; checkpoint {done} committed, exiting", flush=True)
            state.close()
            dist.destroy_process_group()
            ctx.finalize()
            return 0
        if args.step_ms:
            time.sleep(args.step_ms / 1000.0)
    model.eval()  # no dropout from here: the export and the metric
    out = state.finish(model, args.out, step=done)
    if rank == 0:
        held = make_lines(args.seed + 1000, n=64) if not args.data else lines[-64:]
        print(f"done: {done} steps in {time.time() - t0:.1f} s; held-out exact match "
              f"{exact_match(model, held):.4f}; PEFT adapter in {out}", flush=True)
    state.close()
    dist.destroy_process_group()
    ctx.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
