# tests/python/auto_peft_load.py PKG: a fetched version (`ftl registry fetch`) loads the way a PEFT
# user loads an adapter, from whatever folder they are in: AutoPeftModelForCausalLM.from_pretrained
# (PKG), which finds the base by the name adapter_config.json gives it (fetch put PKG/base in the
# Hugging Face cache under that name). The base it loaded must be PKG/base itself, weight for
# weight, and the model the one PeftModel builds on PKG/base explicitly, logit for logit. Run it
# from another folder than the training tree's, offline (HF_HUB_OFFLINE=1, HF_HOME the test's).
import json
import os
import sys

import torch
from peft import AutoPeftModelForCausalLM, PeftModel
from transformers import AutoModelForCausalLM


def main():
    pkg = os.path.abspath(sys.argv[1])
    name = json.load(open(os.path.join(pkg, "adapter_config.json")))["base_model_name_or_path"]
    assert not os.path.isabs(name) and "/" not in name, f"adapter_config.json names its base by a path: {name}"
    auto = AutoPeftModelForCausalLM.from_pretrained(pkg, torch_dtype=torch.float32).eval()
    base = AutoModelForCausalLM.from_pretrained(os.path.join(pkg, "base"), local_files_only=True,
                                                torch_dtype=torch.float32)
    explicit = PeftModel.from_pretrained(base, pkg).eval()
    a = dict(auto.named_parameters())
    e = dict(explicit.named_parameters())
    assert a.keys() == e.keys(), sorted(set(a) ^ set(e))
    for k in a:
        assert torch.equal(a[k], e[k]), f"{k} differs from the fetched base/'s"
    ids = torch.tensor([[10, 97, 98, 99, 32, 100]])
    with torch.no_grad():
        la, le = auto(input_ids=ids).logits, explicit(input_ids=ids).logits
    assert torch.equal(la, le), (la - le).abs().max()
    print(f"auto_peft ok: {name} from {os.getcwd()}: {len(a)} tensors, the logits of PeftModel on base/")


if __name__ == "__main__":
    main()
