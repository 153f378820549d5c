#!/usr/bin/env python3
"""tests/pipeline/read_safetensors.py: an independent reader of the PEFT export.

Written from the safetensors format description (8-byte little-endian header length, a JSON
header, a byte buffer), with numpy only: no safetensors library, nothing from ftl. Checks that
EXPORT/adapter_model.safetensors holds, under PEFT's names, exactly the tensors of the example's
FINAL/adapter.safetensors (read with the same reader), as F32 with PEFT's shapes and the same
values bit for bit; and that adapter_config.json is what PEFT itself writes (json.dumps with
indent=2, sort_keys=True) with the fields servers read.

usage: read_safetensors.py FINAL_DIR EXPORT_DIR
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32,
          "U8": np.uint8, "I8": np.int8, "BOOL": np.bool_}

# The export's module path mapping (docs/formats/peft-export.md): Llama's module paths, and the
# features in and out of each ("C" hidden, "I" intermediate).
MODULES = {"q_proj": ("self_attn", "C", "C"), "k_proj": ("self_attn", "C", "C"), "v_proj": ("self_attn", "C", "C"),
           "o_proj": ("self_attn", "C", "C"), "gate_proj": ("mlp", "C", "I"), "up_proj": ("mlp", "C", "I"),
           "down_proj": ("mlp", "I", "C")}


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read(path):
    data = open(path, "rb").read()
    if len(data) < 8:
        fail(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        fail(f"{path}: header length {n} past the end")
    raw = data[8:8 + n]
    if raw[:1] != b"{":
        fail(f"{path}: header does not start with '{{'")
    header = json.loads(raw.decode("utf-8").rstrip(" "),
                        object_pairs_hook=lambda kv: dict(kv) if len(set(k for k, _ in kv)) == len(kv)
                        else fail(f"{path}: duplicate keys"))
    buf = data[8 + n:]
    meta = header.pop("__metadata__", None)
    spans = []
    out = {}
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            fail(f"{path}: {name}: keys {sorted(info)}")
        b, e = info["data_offsets"]
        dt = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        count = int(np.prod(info["shape"], dtype=np.int64)) if info["shape"] else 1
        if e - b != count * dt.itemsize:
            fail(f"{path}: {name}: {e - b} bytes for shape {info['shape']}")
        spans.append((b, e, name))
        out[name] = (info["dtype"], list(info["shape"]), np.frombuffer(buf[b:e], dtype=dt).reshape(info["shape"]))
    at = 0
    for b, e, name in sorted(spans):
        if b != at:
            fail(f"{path}: {name} starts at {b}, expected {at}")
        at = e
    if at != len(buf):
        fail(f"{path}: tensors cover {at} of {len(buf)} bytes")
    # Canonical layout (all F32 here): data in name order, header padded to a multiple of 8.
    if [s[2] for s in sorted(spans)] != sorted(header):
        fail(f"{path}: data is not laid out in name order")
    if n % 8:
        fail(f"{path}: header length {n} is not a multiple of 8")
    return meta, out


def main():
    final_dir, export_dir = sys.argv[1], sys.argv[2]
    cfg_ours = json.load(open(f"{final_dir}/adapter.json"))
    _, ours = read(f"{final_dir}/adapter.safetensors")
    meta, theirs = read(f"{export_dir}/adapter_model.safetensors")
    if meta != {"format": "pt"}:
        fail(f"metadata is {meta}, not {{'format': 'pt'}}")
    if len(ours) != len(theirs):
        fail(f"{len(theirs)} tensors exported, {len(ours)} in the adapter")
    r = cfg_ours["r"]
    dims = {"C": cfg_ours["base_config"]["embd"], "I": cfg_ours["base_config"]["intermediate"]}
    for name, (dtype, shape, values) in ours.items():
        model, layers, layer, block, module, ab, weight = name.split(".")
        if (model, layers, weight) != ("model", "layers", "weight") or MODULES.get(module, ("",))[0] != block:
            fail(f"{name}: not a Llama LoRA tensor name")
        peft = f"base_model.model.model.layers.{layer}.{block}.{module}.{ab}.weight"
        if peft not in theirs:
            fail(f"{peft} (from {name}) is missing from the export")
        pd, ps, pv = theirs[peft]
        fin, fout = dims[MODULES[module][1]], dims[MODULES[module][2]]
        want = [r, fin] if ab == "lora_A" else [fout, r]
        if pd != "F32" or ps != want or shape != want:
            fail(f"{peft}: {pd} {ps}, expected F32 {want}")
        if not np.array_equal(values.view(np.uint32), pv.view(np.uint32)):
            fail(f"{peft}: values differ from {name}")
    text = open(f"{export_dir}/adapter_config.json").read()
    cfg = json.loads(text)
    if text != json.dumps(cfg, indent=2, sort_keys=True):
        fail("adapter_config.json is not json.dumps(indent=2, sort_keys=True) of itself")
    want = {"peft_type": "LORA", "r": r, "lora_alpha": cfg_ours["lora_alpha"], "task_type": "CAUSAL_LM",
            "bias": "none", "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True,
            "lora_dropout": 0.0, "use_dora": False, "use_rslora": False,
            "target_modules": sorted(cfg_ours["target_modules"]),
            "base_model_name_or_path": "ftl-finetune-base-" + cfg_ours["base_model_hash"]}
    for k, v in want.items():
        if cfg.get(k) != v:
            fail(f"adapter_config.json: {k} is {cfg.get(k)!r}, expected {v!r}")
    print(f"ok: {len(theirs)} tensors, names, shapes, F32 and values match; adapter_config.json as PEFT writes it")


if __name__ == "__main__":
    main()
