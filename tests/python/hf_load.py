"""tests/python/hf_load.py PKG --heldout FILE [--expect-exact-match X] [--logits-input BYTES
--logits-dump FILE]: a fetched adapter package loaded with the real Hugging Face stack, offline.

The package contract (docs/pipeline.md, "Serving"): PKG/adapter_config.json and
PKG/adapter_model.safetensors (PEFT's names, base_model.model.model.layers.{i}.self_attn.
q_proj.lora_A.weight ...), and PKG/base/ with config.json (LlamaForCausalLM), model.safetensors,
tokenizer.json (byte-level BPE, token id == byte value) and tokenizer_config.json. Checked:

1. the base with AutoModelForCausalLM.from_pretrained, the tokenizer with AutoTokenizer (id ==
   byte on a sample, and back), the adapter with peft.PeftModel.from_pretrained; every tensor of
   the adapter file is the one now in the model;
2. the held-out set (examples/finetune's format, data.c: lines of equal length, letters, one
   operator byte, the answer) scored as the C gate scores it (every scored position's argmax is
   its target: the answer bytes and the closing newline, teacher-forced) and again by plain greedy
   decoding from the prompt; the two must agree, and with --expect-exact-match the share must be
   that number exactly (verdict.json's `value`: the same double, to the last digit);
3. the model built only from base/config.json (LlamaConfig.from_json_file + LlamaForCausalLM,
   model.safetensors loaded strictly: every name present, none left over) with the adapter
   loaded by peft gives the same logits as 1;
4. with --logits-dump: the merged model (merge_and_unload) on the bytes of --logits-input against
   a raw little-endian float32 [t, 256] dump (ftl-finetune-eval's) within 1e-4.

Prints one JSON line with the figures. Exit 0 when every check holds; an AssertionError else.
"""
import argparse
import json
import os
import sys

# Offline by construction, whatever the caller's environment: nothing may come from a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from peft import PeftModel  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

VOCAB = 256
LOGITS_TOL = 1e-4


def read_heldout(path):
    """examples/finetune/data.c's format: every line the first line's length, lowercase letters,
    then the operator byte (the first other byte), then a non-empty answer. Returns
    [(line bytes, operator index)]."""
    raw = open(path, "rb").read()
    first = raw.index(b"\n")
    assert first > 0 and len(raw) % (first + 1) == 0, f"{path}: lines of unequal length"
    out = []
    for i in range(0, len(raw), first + 1):
        line = raw[i:i + first]
        assert raw[i + first] == 10 and b"\n" not in line and b"\0" not in line, f"{path}: bad line {i // (first + 1)}"
        op = next(j for j, c in enumerate(line) if not 97 <= c <= 122)
        assert 1 <= op and op + 1 < len(line), f"{path}: no letters, operator and answer in line {i // (first + 1)}"
        out.append((line, op))
    return out


def sequences(data):
    """data.c's ft_data_fill with answer_only: tokens '\\n' + line, target t = the byte after
    position t (line[t], then '\\n'), scored from the operator's position on."""
    T = len(data[0][0]) + 1
    tok = torch.tensor([[10] + list(line) for line, _ in data], dtype=torch.long)
    tgt = torch.tensor([list(line) + [10] for line, _ in data], dtype=torch.long)
    scored = torch.zeros(len(data), T, dtype=torch.bool)
    for i, (_, op) in enumerate(data):
        scored[i, op + 1:] = True
    return tok, tgt, scored


def exact_teacher_forced(model, data, batch=64):
    """The C gate's exact match: one forward per sequence, every scored argmax == its target."""
    tok, tgt, scored = sequences(data)
    exact = 0
    with torch.no_grad():
        for i in range(0, len(data), batch):
            logits = model(input_ids=tok[i:i + batch]).logits
            ok = (logits.argmax(-1) == tgt[i:i + batch]) | ~scored[i:i + batch]
            exact += int(ok.all(dim=1).sum())
    return exact


def exact_greedy(model, data, batch=64):
    """Plain greedy decoding: the prompt '\\n' + letters + operator, then as many bytes as the
    answer and its newline, each the argmax given the ones before; exact when all equal.
    Written out rather than model.generate(): on Debian's torch 1.13 under Python 3.11, generate()
    imports torch.distributed.fsdp, which fails there (a dataclass with a mutable default)."""
    exact = 0
    by_op = {}
    for line, op in data:
        by_op.setdefault(op, []).append(line)
    with torch.no_grad():
        for op, lines in sorted(by_op.items()):
            for i in range(0, len(lines), batch):
                part = lines[i:i + batch]
                prompt = torch.tensor([[10] + list(line[:op + 1]) for line in part], dtype=torch.long)
                want = len(part[0]) - op  # the answer bytes after the operator, and '\n'
                seq = prompt
                for _ in range(want):  # no KV cache: a few bytes, the whole prefix each time
                    nxt = model(input_ids=seq).logits[:, -1].argmax(-1, keepdim=True)
                    seq = torch.cat([seq, nxt], dim=1)
                got = seq[:, prompt.shape[1]:]
                expect = torch.tensor([list(line[op + 1:]) + [10] for line in part], dtype=torch.long)
                exact += int((got == expect).all(dim=1).sum())
    return exact


def check_tokenizer(base, data):
    tk = AutoTokenizer.from_pretrained(base, local_files_only=True)
    sample = b"\n".join(line for line, _ in data[:8]) + b"\n" + bytes(range(32, 127))
    ids = tk(sample.decode("ascii"), add_special_tokens=False, verbose=False)["input_ids"]
    assert ids == list(sample), f"the tokenizer's ids are not the bytes: {ids[:20]} vs {list(sample)[:20]}"
    assert tk.decode(list(sample)) == sample.decode("ascii"), "the tokenizer does not decode ids back to the bytes"
    assert len(tk) >= VOCAB, f"the tokenizer has {len(tk)} ids, fewer than {VOCAB}"
    return len(ids)


def check_adapter_loaded(model, pkg):
    """Every tensor in adapter_model.safetensors, under PEFT's names, is the one in the model."""
    params = dict(model.named_parameters())
    n = 0
    with safe_open(os.path.join(pkg, "adapter_model.safetensors"), framework="pt") as f:
        names = list(f.keys())
        assert names, "the adapter file holds no tensor"
        for name in names:
            assert name.startswith("base_model.model.model.layers.") and ".lora_" in name, f"not a PEFT Llama name: {name}"
            loaded = name.replace(".lora_A.weight", ".lora_A.default.weight").replace(".lora_B.weight",
                                                                                      ".lora_B.default.weight")
            assert loaded in params, f"{name} did not land in the model ({loaded})"
            assert torch.equal(params[loaded].detach(), f.get_tensor(name).to(params[loaded].dtype)), name
            n += 1
    b_nonzero = any(bool(p.detach().abs().sum() > 0) for k, p in params.items() if ".lora_B." in k)
    assert b_nonzero, "every lora_B is zero: the adapter changes nothing"
    return n


def build_from_config(base):
    """The model from config.json alone, its weights from model.safetensors, strictly."""
    cfg = LlamaConfig.from_json_file(os.path.join(base, "config.json"))
    assert "LlamaForCausalLM" in (cfg.architectures or []), f"config.json architectures: {cfg.architectures}"
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg)
    state = load_file(os.path.join(base, "model.safetensors"))
    if cfg.tie_word_embeddings and "lm_head.weight" not in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Non-persistent buffers (rotary inv_freq) are not in a state dict: made from the config.
    missing = [m for m in missing if not m.endswith("rotary_emb.inv_freq")]
    assert not missing and not unexpected, f"model.safetensors: missing {missing}, unexpected {unexpected}"
    return model.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pkg")
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--expect-exact-match", type=float, default=None)
    ap.add_argument("--logits-input", default=None, help="a file of bytes the dump was made on")
    ap.add_argument("--logits-dump", default=None, help="raw little-endian float32 [t, 256]")
    args = ap.parse_args()
    torch.set_num_threads(1)
    pkg, base = args.pkg, os.path.join(args.pkg, "base")
    for f in ("adapter_config.json", "adapter_model.safetensors"):
        assert os.path.isfile(os.path.join(pkg, f)), f"{pkg}/{f} is missing"
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert os.path.isfile(os.path.join(base, f)), f"{base}/{f} is missing"
    data = read_heldout(args.heldout)

    # 1. The way a researcher loads it.
    model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True, torch_dtype=torch.float32,
                                                 attn_implementation="eager")
    assert type(model).__name__ == "LlamaForCausalLM", type(model).__name__
    assert model.config.vocab_size == VOCAB, model.config.vocab_size
    n_tok = check_tokenizer(base, data)
    peft_model = PeftModel.from_pretrained(model, pkg, is_trainable=False).eval()
    n_tensors = check_adapter_loaded(peft_model, pkg)
    cfg = json.load(open(os.path.join(pkg, "adapter_config.json")))
    assert cfg["peft_type"] == "LORA", cfg["peft_type"]

    # 2. The held-out exact match, both ways.
    exact_tf = exact_teacher_forced(peft_model, data)
    exact_gr = exact_greedy(peft_model, data)
    assert exact_tf == exact_gr, f"teacher-forced exact {exact_tf} != greedy exact {exact_gr}"
    value = exact_tf / len(data)
    if args.expect_exact_match is not None:
        assert value == args.expect_exact_match, f"exact match {value!r} != the gate's {args.expect_exact_match!r}"

    # 3. From config.json alone, the adapter by peft: the same logits.
    tok, _, _ = sequences(data[:16])
    with torch.no_grad():
        ref = peft_model(input_ids=tok).logits
        alone = PeftModel.from_pretrained(build_from_config(base), pkg).eval()
        diff_cfg = (alone(input_ids=tok).logits - ref).abs().max().item()
    assert diff_cfg <= 1e-6, f"the model built from config.json differs by {diff_cfg}"

    # 4. The merged model against the C model's logits.
    diff_dump = None
    merged = peft_model.merge_and_unload().eval()
    with torch.no_grad():
        diff_merge = (merged(input_ids=tok).logits - ref).abs().max().item()
    assert diff_merge <= 1e-4, f"merge_and_unload changed the logits by {diff_merge}"
    if args.logits_dump:
        ids = list(open(args.logits_input, "rb").read())
        dump = np.fromfile(args.logits_dump, dtype="<f4")
        assert dump.size == len(ids) * VOCAB, f"the dump holds {dump.size} floats, not {len(ids)} x {VOCAB}"
        with torch.no_grad():
            got = merged(input_ids=torch.tensor([ids])).logits[0].numpy()
        diff_dump = float(np.abs(got - dump.reshape(len(ids), VOCAB)).max())
        assert diff_dump <= LOGITS_TOL, f"merged logits differ from the dump by {diff_dump} (> {LOGITS_TOL})"

    print(json.dumps({"exact": exact_tf, "examples": len(data), "exact_match": value, "adapter_tensors": n_tensors,
                      "tokenizer_sample": n_tok, "config_only_diff": diff_cfg, "merge_diff": diff_merge,
                      "dump_diff": diff_dump}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
