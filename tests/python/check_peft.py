#!/usr/bin/python3
"""tests/python/check_peft.py DIR: an independent check of the PEFT adapter examples/torch-lora
writes (docs/formats/peft-export.md): adapter_model.safetensors read from the format's
description (8-byte little-endian header length, a JSON header padded with spaces to 8 bytes,
the data, tensors back to back in name order) with PEFT's names and F32 tensors of LoRA's
shapes, B not all zero after training; adapter_config.json exactly as PEFT writes it."""
import json
import struct
import sys

import numpy as np


def main(d):
    raw = open(f"{d}/adapter_model.safetensors", "rb").read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    assert hlen % 8 == 0, "header not padded to 8 bytes"
    header = json.loads(raw[8:8 + hlen])
    assert header.pop("__metadata__") == {"format": "pt"}
    data = raw[8 + hlen:]
    cfg_text = open(f"{d}/adapter_config.json").read()
    cfg = json.loads(cfg_text)
    assert cfg_text == json.dumps(cfg, indent=2, sort_keys=True), "adapter_config.json is not PEFT's form"
    assert cfg["peft_type"] == "LORA" and cfg["r"] > 0 and cfg["target_modules"] == ["fc_in", "fc_out"]
    r, off, nonzero_b = cfg["r"], 0, False
    for name in sorted(header):
        t = header[name]
        assert name.startswith("base_model.model.h.") and name.endswith((".lora_A.weight", ".lora_B.weight")), name
        assert t["dtype"] == "F32" and t["data_offsets"][0] == off, (name, t)
        n = int(np.prod(t["shape"]))
        off = t["data_offsets"][1]
        assert off - t["data_offsets"][0] == 4 * n, name
        a = np.frombuffer(data[t["data_offsets"][0]:off], dtype="<f4").reshape(t["shape"])
        assert np.isfinite(a).all(), name
        if name.endswith("lora_A.weight"):
            assert a.shape[0] == r, (name, a.shape)
        else:
            assert a.shape[1] == r, (name, a.shape)
            nonzero_b |= bool(np.any(a != 0))
    assert off == len(data), "trailing bytes after the last tensor"
    assert nonzero_b, "every lora_B is zero: nothing was trained"
    print(f"ok: {len(header)} tensors")


if __name__ == "__main__":
    main(sys.argv[1])
