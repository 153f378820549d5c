"""tests/python/make_hf_fixture.py OUT --train FILE --heldout FILE: a package folder in the layout
`ftl registry fetch` will give once `ftl export --base` writes the base (docs/pipeline.md,
"Serving"), made here with transformers' and peft's own save_pretrained, so that
tests/python/hf_load.py's checks are proven before the C side writes such folders.

A small byte-level LlamaForCausalLM (from a LlamaConfig, weights from a seed) is trained briefly on
FILE's task (all parameters: a stand-in for the pre-trained base), then a LoRA adapter on
q_proj/v_proj briefly on top (the fine-tune). Written to OUT:
  base/                 config.json, model.safetensors, generation_config.json (save_pretrained),
                        tokenizer.json, tokenizer_config.json (byte-level BPE, token id == byte)
  adapter_config.json, adapter_model.safetensors, README.md   (peft's save_pretrained)
  verdict.json          {"metric": "exact_match", "value": ...}: the in-memory model's exact
                        match on the held-out set, as the gate's verdict carries it
  logits-input.bin, logits.bin   bytes, and the in-memory (unmerged) model's logits on them as
                        raw little-endian float32 [t, 256], as ftl-finetune-eval's dump
Deterministic for a given seed. Its exact-match code is its own (not hf_load.py's), from the
definition in examples/finetune/model.c (ft_sequence_metrics).
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402


def byte_chars():
    """The byte-level alphabet (each byte as a printable character, as GPT-2's byte-level BPE
    does): printable Latin-1 bytes stand for themselves, the others are moved to 256 and up in
    byte order. Token id i is the character of byte i."""
    keep = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def tokenizer():
    chars = byte_chars()
    tok = Tokenizer(models.BPE(vocab={chars[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=64, clean_up_tokenization_spaces=False)


def load_lines(path):
    return [line for line in open(path, "rb").read().split(b"\n") if line]


def batch_of(lines):
    """'\\n' + line as tokens; targets the next byte, -100 up to the operator (data.c)."""
    tok = torch.tensor([[10] + list(line) for line in lines], dtype=torch.long)
    tgt = torch.tensor([list(line) + [10] for line in lines], dtype=torch.long)
    for i, line in enumerate(lines):
        op = next(j for j, c in enumerate(line) if not 97 <= c <= 122)
        tgt[i, :op + 1] = -100
    return tok, tgt


def train(model, params, lines, steps, lr, batch, seed):
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(lines), (batch,), generator=g).tolist()
        tok, tgt = batch_of([lines[i] for i in idx])
        logits = model(input_ids=tok).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return loss.item()


def exact_share(model, lines):
    tok, tgt = batch_of(lines)
    with torch.no_grad():
        best = model(input_ids=tok).logits.argmax(-1)
    exact = sum(all(int(best[i, t]) == int(tgt[i, t]) for t in range(tgt.shape[1]) if tgt[i, t] >= 0)
                for i in range(len(lines)))
    return exact, exact / len(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--train", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--base-steps", type=int, default=50)
    ap.add_argument("--lora-steps", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    train_lines, held = load_lines(args.train), load_lines(args.heldout)

    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, rms_norm_eps=1e-5,
                      tie_word_embeddings=False, bos_token_id=10, eos_token_id=10, pad_token_id=0,
                      attn_implementation="eager")
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(cfg)
    base_loss = train(model, list(model.parameters()), train_lines, args.base_steps, 3e-3, 32, args.seed)
    base_dir = os.path.join(args.out, "base")
    model.save_pretrained(base_dir, safe_serialization=True)
    tokenizer().save_pretrained(base_dir)

    torch.manual_seed(args.seed + 1)
    lcfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], bias="none",
                      task_type="CAUSAL_LM")
    pm = get_peft_model(model, lcfg)
    lora_params = [p for p in pm.parameters() if p.requires_grad]
    lora_loss = train(pm, lora_params, train_lines, args.lora_steps, 1e-2, 32, args.seed + 2)
    pm.save_pretrained(args.out)

    exact, value = exact_share(pm, held)
    sample = b"\n" + b"\n".join(held[:3]) + b"\n"
    with torch.no_grad():
        logits = pm(input_ids=torch.tensor([list(sample)])).logits[0]
    open(os.path.join(args.out, "logits-input.bin"), "wb").write(sample)
    open(os.path.join(args.out, "logits.bin"), "wb").write(logits.numpy().astype("<f4").tobytes())
    with open(os.path.join(args.out, "verdict.json"), "w") as f:
        json.dump({"metric": "exact_match", "value": value, "exact": exact, "examples": len(held)}, f)
    print(json.dumps({"base_loss": base_loss, "lora_loss": lora_loss, "exact": exact, "examples": len(held),
                      "exact_match": value}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
