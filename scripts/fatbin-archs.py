#!/usr/bin/env python3
"""scripts/fatbin-archs.py FILE...: the GPU architectures of the machine code (cubins) embedded in
each binary's .nv_fatbin section, one line per file: "FILE sm_80 sm_90" (nothing after the name
when the file has no device code). The fallback of scripts/gpu-check.sh where the CUDA toolkit has
no cuobjdump: it reads only the fatbin container's entry headers (kind 2 = ELF machine code,
kind 1 = PTX; the architecture is a field of the header), which stay readable when the payloads
are compressed. Exit 2 when a file cannot be read or its fatbin is malformed."""
import os
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
KIND_ELF = 2


def run(cmd, cwd=None):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        raise ValueError(f"{cmd[0]}: {r.stderr.strip()}")


def section_bytes(obj, tmp):
    out = os.path.join(tmp, os.path.basename(obj) + ".fatbin")
    run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, out])
    return open(out, "rb").read() if os.path.exists(out) else b""


def fatbin_bytes(path):
    """The .nv_fatbin bytes of an executable, a shared library, an object or (each member of) a
    static library."""
    with tempfile.TemporaryDirectory() as tmp:
        if not path.endswith(".a"):
            return [section_bytes(path, tmp)]
        members = os.path.join(tmp, "members")
        os.mkdir(members)
        run(["ar", "x", os.path.abspath(path)], cwd=members)
        return [section_bytes(os.path.join(members, m), tmp) for m in sorted(os.listdir(members))]


def elf_archs(data):
    archs, off = set(), 0
    while off + 16 <= len(data):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, off)
        if magic != FATBIN_MAGIC:
            off += 8  # containers are 8-byte aligned; padding between them
            continue
        entry, end = off + header_size, off + header_size + fat_size
        if end > len(data):
            raise ValueError("fatbin container runs past the section")
        while entry + 32 <= end:
            kind, _v, entry_header, payload = struct.unpack_from("<HHII", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            if entry_header == 0:
                raise ValueError("fatbin entry with an empty header")
            if kind == KIND_ELF:
                archs.add(sm)
            entry += entry_header + payload
        off = end
    return sorted(archs)


def main():
    status = 0
    for path in sys.argv[1:]:
        try:
            archs = sorted({a for blob in fatbin_bytes(path) for a in elf_archs(blob)})
            print(path, " ".join(f"sm_{a}" for a in archs))
        except (OSError, ValueError, struct.error) as e:
            print(f"{path}: {e}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
