#!/usr/bin/env -S sh -c 'exec "${FTL_PYTHON:-${0%/*}/../../.venv/bin/python}" "$0" "$@"'
# examples/hf-lora/eval.py: the gate's evaluator of examples/hf-lora (docs/pipeline.md, "A PEFT
# adapter through the gate"), with nothing of ftl in it: the base loaded with transformers, the
# committed adapter in RUNDIR/final with peft.PeftModel.from_pretrained, the held-out lines
# (examples/finetune's format: letters, the operator byte, the answer) greedy-decoded from their
# prompts; exact match = the share of lines whose decoded answer and closing newline are right.
# Writes {"version": 1, "metrics": {"exact_match": ..., "exact": N, "examples": M}} to --metrics.
#
# It is the job's eval.program itself, so the gate pins this file's bytes (eval.program is hashed
# at submission and re-checked by the gate). The first line runs it with the project's venv
# interpreter, found next to the script (../../.venv, as scripts/setup-python.sh makes it), or
# $FTL_PYTHON when eval.env sets it; the interpreter and the venv's packages are not pinned.
#
#   eval.py --base DIR --adapter DIR --data FILE --metrics FILE
import argparse
import json
import os
import sys

# Offline by construction: nothing may come from a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from peft import PeftModel  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def read_lines(path):
    """(line bytes, operator index) for every line: lowercase letters, then the operator (the
    first other byte), then a non-empty answer. A line of another shape is an error naming it."""
    with open(path, "rb") as f:
        raw = f.read()
    out = []
    for no, line in enumerate(raw.split(b"\n"), 1):
        if not line:
            continue
        op = next((j for j, c in enumerate(line) if not 97 <= c <= 122), None)
        if op is None or op < 1 or op + 1 >= len(line):
            raise SystemExit(f"{path}:{no}: not 'letters OP answer'")
        out.append((line, op))
    if not out:
        raise SystemExit(f"{path}: no lines")
    return out


def greedy_exact(model, data, batch=64):
    """Greedy decoding, written out (model.generate() fails on Debian's torch 1.13 under Python
    3.11, docs/python.md): the prompt '\\n' + letters + operator, then one argmax byte at a time
    for as many bytes as the answer and its newline. Lines are grouped by prompt length so a
    batch needs no padding."""
    exact = 0
    groups = {}
    for line, op in data:
        groups.setdefault((op, len(line)), []).append(line)
    with torch.no_grad():
        for (op, _), lines in sorted(groups.items()):
            for i in range(0, len(lines), batch):
                part = lines[i:i + batch]
                seq = torch.tensor([[10] + list(line[:op + 1]) for line in part], dtype=torch.long)
                start = seq.shape[1]
                for _ in range(len(part[0]) - op):
                    nxt = model(input_ids=seq).logits[:, -1].argmax(-1, keepdim=True)
                    seq = torch.cat([seq, nxt], dim=1)
                want = torch.tensor([list(line[op + 1:]) + [10] for line in part], dtype=torch.long)
                exact += int((seq[:, start:] == want).all(dim=1).sum())
    return exact


def main():
    ap = argparse.ArgumentParser(description="held-out exact match of a PEFT adapter over a Hugging Face base")
    ap.add_argument("--base", required=True, help="the base model's Hugging Face folder")
    ap.add_argument("--adapter", required=True, help="the PEFT adapter folder (RUNDIR/final)")
    ap.add_argument("--data", required=True, help="held-out lines")
    ap.add_argument("--metrics", required=True, help="where the metrics file goes")
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = read_lines(args.data)
    base = AutoModelForCausalLM.from_pretrained(args.base, local_files_only=True, torch_dtype=torch.float32,
                                                attn_implementation="eager")
    model = PeftModel.from_pretrained(base, args.adapter, is_trainable=False).eval()
    exact = greedy_exact(model, data)
    value = exact / len(data)
    tmp = args.metrics + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"version": 1, "metrics": {"exact_match": value, "exact": exact, "examples": len(data)}}, f)
        f.write("\n")
    os.replace(tmp, args.metrics)
    print(f"held-out exact match {value!r} ({exact} of {len(data)} lines, greedy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
