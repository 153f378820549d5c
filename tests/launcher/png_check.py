#!/usr/bin/env python3
"""tests/launcher/png_check.py PNG MIN_COLOURS MIN_NONWHITE_FRACTION: a screenshot is not blank.

A tiny PNG decoder (8-bit greyscale, RGB, RGBA; non-interlaced, as Chromium writes them) on the
standard library's zlib alone, so the test needs no imaging package. Prints the distinct colours and
the share of non-white pixels; exits 1 when either is below the minimum."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or interlace or ctype not in (0, 2, 6):
        raise SystemExit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
    bpp = {0: 1, 2: 3, 6: 4}[ctype]
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    path, min_colours, min_frac = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    w, h, bpp, rows = decode(path)
    colours, nonwhite = set(), 0
    for r in rows:
        for x in range(0, w * bpp, bpp):
            px = r[x:x + min(bpp, 3)]
            colours.add(px)
            if any(v < 245 for v in px):
                nonwhite += 1
    frac = nonwhite / float(w * h)
    print(f"{path}: {w}x{h}, {len(colours)} colours, {100 * frac:.1f}% non-white")
    if len(colours) < min_colours or frac < min_frac:
        sys.exit(1)


main()
