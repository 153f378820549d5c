# tests/python/train_flops.sh: ftl.hf.train_flops, the model FLOPs of a Hugging Face training step
# (what examples/hf-lora reports, and what ftl.hf.train counts for a Trainer per micro-batch),
# against a count made by hand for a tiny Llama with LoRA on q_proj and v_proj: the linears' weights
# cost 4 FLOPs a token when frozen and 6 when trained, causal attention 6 h S (S + 1) a sequence
# and layer. Then a full fine-tune of the same model (every weight 6) and a second layer.
. "$(dirname "$0")/hf_lib.sh" || exit 1
"$HF_PY" - <<'PY' || fail "train_flops does not match the hand count"
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.join(os.environ["FTL_SOURCE_DIR"], "python"))
import ftl.hf as hf  # noqa: E402

def model(layers, lora):
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=4, vocab_size=100, tie_word_embeddings=False)
    torch.manual_seed(0)
    m = LlamaForCausalLM(cfg)
    return get_peft_model(m, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])) if lora else m

# By hand, per layer: q, k, v, o 4 x 32 x 32 = 4,096 weights; gate, up 2 x 32 x 64 = 4,096; down
# 64 x 32 = 2,048; once: lm_head 32 x 100 = 3,200 (the embedding is a lookup, not counted). LoRA r=4
# on q and v: A 4 x 32 and B 32 x 4 each, 512 weights in all, trained; the rest frozen.
frozen_1 = 4096 + 4096 + 2048 + 3200
lora = 4 * 128
batch, seq = 2, 10
attention = 6 * 32 * seq * (seq + 1)  # per sequence and layer
want = batch * (seq * (4 * frozen_1 + 6 * lora) + attention)
assert want == 1178880, want
got = hf.train_flops(model(1, True), batch, seq)
assert got == want, (got, want)
# Every weight trained (no LoRA): 6 each.
got = hf.train_flops(model(1, False), batch, seq)
assert got == batch * (seq * 6 * frozen_1 + attention), got
# Two layers: the layer's linears, LoRA and attention twice, lm_head once.
layer = 4096 + 4096 + 2048
got = hf.train_flops(model(2, True), batch, seq)
assert got == batch * (seq * (4 * (2 * layer + 3200) + 6 * 2 * lora) + 2 * attention), got
print("train_flops ok:", want)
PY
echo ok
