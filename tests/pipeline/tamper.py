#!/usr/bin/env python3
"""tests/pipeline/tamper.py: makes a bad package out of a good one, with Python's tarfile and the
zstd command (not ftl's writer), for package_tamper.sh.

usage: tamper.py GOOD.tar.zst KIND OUT.tar.zst [ARG]
KIND: flip extra dotdot absolute symlink hardlink fifo oversized bomb bomb_declared notfirst
"""
import hashlib
import io
import json
import subprocess
import sys
import tarfile

good, kind, out = sys.argv[1], sys.argv[2], sys.argv[3]
arg = sys.argv[4] if len(sys.argv) > 4 else None
raw = subprocess.run(["zstd", "-d", "-c", "-q", good], check=True, capture_output=True).stdout
src = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
entries = [(m, src.extractfile(m).read()) for m in src.getmembers()]
names = [m.name for m, _ in entries]
assert names[0] == "MANIFEST.json", names


def reg(name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = 0o644
    return (ti, data)


def special(name, type_, linkname=""):
    ti = tarfile.TarInfo(name)
    ti.type = type_
    ti.linkname = linkname
    return (ti, b"")


class Zeros(io.RawIOBase):
    """n zero bytes, read lazily (the bomb is never held in memory)."""

    def __init__(self, n):
        self.left = n

    def readable(self):
        return True

    def readinto(self, b):
        k = min(len(b), self.left)
        b[:k] = bytes(k)
        self.left -= k
        return k


stream = None  # (TarInfo, fileobj) of a large entry
if kind == "flip":
    i = names.index("adapter_model.safetensors")
    m, d = entries[i]
    d = bytearray(d)
    d[len(d) - 3] ^= 0x01
    entries[i] = (m, bytes(d))
elif kind == "extra":
    entries.append(reg("extra.txt", b"not in the manifest\n"))
elif kind == "dotdot":
    entries.insert(1, reg("../escape.txt", b"escaped\n"))
elif kind == "absolute":
    entries.insert(1, reg(arg, b"escaped\n"))
elif kind == "symlink":
    entries[1] = special("adapter_config.json", tarfile.SYMTYPE, "/etc/passwd")
elif kind == "hardlink":
    entries[1] = special("adapter_config.json", tarfile.LNKTYPE, "/etc/passwd")
elif kind == "fifo":
    entries[1] = special("adapter_config.json", tarfile.FIFOTYPE)
elif kind == "oversized":
    m, d = entries[1]
    entries[1] = reg(m.name, d + b" " * 4096)
elif kind in ("bomb", "bomb_declared"):
    # A 128 MiB entry of zeros: a few KB once compressed.
    n = 128 << 20
    i = names.index("adapter_model.safetensors")
    if kind == "bomb_declared":
        # The manifest tells the truth about it (size and SHA-256): only the total bound stops it.
        h = hashlib.sha256()
        chunk = bytes(1 << 20)
        for _ in range(n >> 20):
            h.update(chunk)
        man = json.loads(entries[0][1])
        for f in man["files"]:
            if f["name"] == "adapter_model.safetensors":
                f["size"], f["sha256"] = n, h.hexdigest()
        entries[0] = reg("MANIFEST.json", (json.dumps(man, indent=2, sort_keys=True) + "\n").encode())
    ti = tarfile.TarInfo("adapter_model.safetensors")
    ti.size = n
    ti.mode = 0o644
    stream = (i, ti)
elif kind == "notfirst":
    entries[0], entries[1] = entries[1], entries[0]
else:
    sys.exit(f"unknown kind {kind}")

with open(out, "wb") as f:
    z = subprocess.Popen(["zstd", "-q", "-c", "-1"], stdin=subprocess.PIPE, stdout=f)
    t = tarfile.open(fileobj=z.stdin, mode="w|", format=tarfile.PAX_FORMAT)
    for i, (m, d) in enumerate(entries):
        if stream and i == stream[0]:
            t.addfile(stream[1], Zeros(stream[1].size))
        elif m.isreg():
            t.addfile(m, io.BytesIO(d))
        else:
            t.addfile(m)
    t.close()
    z.stdin.close()
    if z.wait():
        sys.exit("zstd failed")
