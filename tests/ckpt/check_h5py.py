"""tests/ckpt/check_h5py.py STEP_DIR: every shard of a step opens in h5py, and every dataset holds
exactly the bytes the manifest says it holds (same offset and size), with the documented
attributes. Run with Debian's /usr/bin/python3 (h5py, numpy)."""
import json
import os
import sys

import h5py
import numpy as np

step_dir = sys.argv[1]
with open(os.path.join(step_dir, "manifest.json")) as f:
    man = json.load(f)
items = {it["name"]: it for it in man["items"]}
checked = 0
for sh in man["shards"]:
    path = os.path.join(step_dir, sh["file"])
    raw = open(path, "rb").read()
    assert len(raw) == sh["size_bytes"], (path, len(raw))
    with h5py.File(path, "r") as f:
        assert f.attrs["ftl_format"] in (b"ftl-ckpt-shard", "ftl-ckpt-shard"), f.attrs["ftl_format"]
        assert int(f.attrs["rank"]) == sh["rank"]
        assert int(f.attrs["world_size"]) == man["world_size"]
        for pc in sh["pieces"]:
            it = items[pc["item"]]
            group = "blobs" if it["kind"].startswith("blob") else "tensors"
            ds = f[group][it["name"]]
            assert int(f.attrs["step"]) == man["step"]
            if it["shape"]:
                assert list(ds.attrs["global_shape"]) == it["shape"], (it, ds.attrs["global_shape"])
                assert int(ds.attrs["offset"][0]) == pc["row_start"]
                assert ds.shape[0] == pc["row_count"], (ds.shape, pc)
            assert ds.id.get_offset() == pc["file_offset"], (ds.id.get_offset(), pc)
            if it["dtype"] == "bf16":
                data = raw[pc["file_offset"]:pc["file_offset"] + pc["size_bytes"]]
            else:
                data = np.asarray(ds[()]).tobytes()
                if it["dtype"] == "f16":
                    assert ds.dtype == np.float16, ds.dtype
            assert data == raw[pc["file_offset"]:pc["file_offset"] + pc["size_bytes"]], (path, it["name"])
            checked += 1
print("h5py: %d datasets match the manifest" % checked)
