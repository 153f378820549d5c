#!/usr/bin/env python3
"""tests/pipeline/tamper.py: makes a bad package out of a good one, with Python's tarfile and the
zstd command (not ftl's writer), for package_tamper.sh.

usage: tamper.py GOOD.tar.zst KIND OUT.tar.zst [ARG]
KIND, refused by the reader:
  flip extra dotdot absolute symlink hardlink fifo oversized bomb bomb_declared notfirst
  nulpath      a pax path record "MANIFEST.json<NUL>../evil" (readers that stop at the NUL see a good name)
  noend        the tar without its end-of-archive blocks
  onezero      only one of the two zero blocks
  zstd2        the package compressed again (zstd inside zstd)
  tar2         a second tar (extra.txt) after the end-of-archive, in the same zstd frame
  frame2_tar   a second zstd frame holding a tar (extra.txt) after the package
  skippable    a zstd skippable frame (a hidden payload) after the package
  skippable_first  the same, before the package
  trailing     a payload appended after the package's last zstd frame (not a frame)
  global       a pax global header (comment and path records) before MANIFEST.json
  casefold     a declared ADAPTER_CONFIG.json beside adapter_config.json (one file where case folds)
KIND, the same entries in other packaging (canonicalized back to the good bytes):
  frame2_zeros a second zstd frame of zero padding
  split        the tar split over two zstd frames
  setuid       adapter_config.json with mode 04755
  owner        every entry owned by uid 1234/gid 5678 "mallory"/"staff", mtime 1700000000
"""
import hashlib
import io
import json
import struct
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


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c", "-1"], input=data, check=True, capture_output=True).stdout


def tar_of(members):
    buf = io.BytesIO()
    t = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    for m, d in members:
        t.addfile(m, io.BytesIO(d))
    t.close()
    return buf.getvalue()


def strip_end(tar):
    """The tar without its trailing zero blocks (end-of-archive and padding)."""
    n = len(tar)
    while n >= 512 and tar[n - 512:n] == bytes(512):
        n -= 512
    return tar[:n]


good_bytes = open(good, "rb").read()
payload = b"hidden payload, not in the manifest\n" * 8
skippable = struct.pack("<II", 0x184D2A50, len(payload)) + payload
byte_forms = {
    "noend": lambda: zstd(strip_end(raw)),
    "onezero": lambda: zstd(strip_end(raw) + bytes(512)),
    "zstd2": lambda: zstd(good_bytes),
    "tar2": lambda: zstd(raw + tar_of([reg("extra.txt", b"not in the manifest\n")])),
    "frame2_tar": lambda: good_bytes + zstd(tar_of([reg("extra.txt", b"not in the manifest\n")])),
    "frame2_zeros": lambda: good_bytes + zstd(bytes(10240)),
    "split": lambda: zstd(raw[:1000]) + zstd(raw[1000:]),
    "skippable": lambda: good_bytes + skippable,
    "skippable_first": lambda: skippable + good_bytes,
    "trailing": lambda: good_bytes + payload,
}
if kind in byte_forms:
    with open(out, "wb") as f:
        f.write(byte_forms[kind]())
    sys.exit(0)

stream = None  # (TarInfo, fileobj) of a large entry
global_headers = None
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
elif kind == "nulpath":
    entries[0][0].pax_headers = {"path": "MANIFEST.json\x00../evil"}
elif kind == "casefold":
    # Declared truthfully (size and SHA-256) and in byte order: only the names' folding is wrong.
    data = b'{"peft_type": "LORA", "r": 64}\n'
    man = json.loads(entries[0][1])
    man["files"].append({"name": "ADAPTER_CONFIG.json", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    man["files"].sort(key=lambda f: f["name"])
    entries[0] = reg("MANIFEST.json", (json.dumps(man, indent=2, sort_keys=True) + "\n").encode())
    entries.insert(1, reg("ADAPTER_CONFIG.json", data))
elif kind == "global":
    global_headers = {"comment": "not in the manifest", "path": "evil"}
elif kind == "setuid":
    entries[1][0].mode = 0o4755
elif kind == "owner":
    for m, _ in entries:
        m.uid, m.gid, m.uname, m.gname, m.mtime = 1234, 5678, "mallory", "staff", 1700000000
else:
    sys.exit(f"unknown kind {kind}")

with open(out, "wb") as f:
    z = subprocess.Popen(["zstd", "-q", "-c", "-1"], stdin=subprocess.PIPE, stdout=f)
    t = tarfile.open(fileobj=z.stdin, mode="w|", format=tarfile.PAX_FORMAT, pax_headers=global_headers)
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
