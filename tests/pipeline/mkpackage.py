#!/usr/bin/env python3
"""tests/pipeline/mkpackage.py: a package made outside ftl (Python's tarfile and the zstd command),
with whatever files the test wants, for the registry's trust and content tests: a package whose
verdict says failed or is not a verdict, whose weights are random bytes, whose config is not JSON.
Its manifest is well formed (every digest true), so only the registry's own checks can refuse it.

usage: mkpackage.py OUT.tar.zst EXPORT_DIR VERDICT [--config FILE] [--model FILE]
Prints the version id (SHA-256 of MANIFEST.json).
"""
import hashlib
import io
import json
import subprocess
import sys
import tarfile

out, export, verdict = sys.argv[1], sys.argv[2], sys.argv[3]
files = {
    "adapter_config.json": open(export + "/adapter_config.json", "rb").read(),
    "adapter_model.safetensors": open(export + "/adapter_model.safetensors", "rb").read(),
    "provenance.json": b'{\n  "tag": "outside"\n}\n',
    "verdict.json": open(verdict, "rb").read(),
}
args = sys.argv[4:]
while args:
    flag, path = args[0], args[1]
    args = args[2:]
    files["adapter_config.json" if flag == "--config" else "adapter_model.safetensors"] = open(path, "rb").read()
manifest = {
    "files": [{"name": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for n, d in sorted(files.items())],
    "format": "ftl-package",
    "version": 1,
}
man = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
buf = io.BytesIO()
t = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
for name, data in [("MANIFEST.json", man)] + sorted(files.items()):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = 0o644
    t.addfile(ti, io.BytesIO(data))
t.close()
z = subprocess.run(["zstd", "-q", "-c", "-3"], input=buf.getvalue(), check=True, capture_output=True).stdout
open(out, "wb").write(z)
print(hashlib.sha256(man).hexdigest())
