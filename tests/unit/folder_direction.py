#!/usr/bin/env python3
"""tests/unit/folder_direction.py BUILD_DIR: the library's folders run one way (docs/architecture.md,
"Folders run one way"): launcher -> eval -> pipeline -> core, and checkpoint -> rendezvous -> core
and cadence -> core below the launcher. A folder may use its own symbols and those of the folders
below it, never a folder above or beside it.

Checked twice: on the compiled objects (an object of folder A that uses a symbol an object of folder
B defines, so a declaration copied into some header cannot hide a call), and on the sources'
#include lines (a type or macro taken from a higher folder's header leaves no symbol; and the
launcher reaches checkpoint/ through its one door, checkpoint/door.h). Each breach
is printed with the file and the symbol or header. An object whose source file is gone (a build
folder older than a file's removal) is not counted."""
import glob
import os
import re
import sys

import objects

# Each folder and the folders it may use (its own always).
MAY_USE = {
    "core": set(),
    "rendezvous": {"core"},
    "checkpoint": {"rendezvous", "core"},
    "cadence": {"core"},
    "pipeline": {"core"},
    "eval": {"pipeline", "core"},
    "launcher": {"eval", "pipeline", "checkpoint", "rendezvous", "cadence", "core"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
# A folder the launcher reaches through one door: the only header of it a launcher file includes.
DOORS = {("launcher", "checkpoint"): "checkpoint/door.h"}


def object_breaches(build, source):
    defs, uses = objects.read(build, source)
    breaches = []
    for src, symbols in sorted(uses.items()):
        folder = src.split("/")[0]
        for sym in sorted(symbols):
            for where in sorted(defs.get(sym, ())):
                other = where.split("/")[0]
                if other != folder and other not in MAY_USE[folder]:
                    breaches.append(f"{src} uses {sym} from {where} ({folder} may not use {other})")
    return len(uses), breaches


def include_breaches(source):
    breaches = []
    for folder, allowed in sorted(MAY_USE.items()):
        for path in sorted(glob.glob(os.path.join(source, folder, "*.[ch]"))):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                other = m.group(1)
                header = m.group(0).split()[-1].strip('"')
                line = text.count("\n", 0, m.start()) + 1
                rel = os.path.relpath(path, source)
                if other in MAY_USE and other != folder and other not in allowed:
                    breaches.append(f"{rel}:{line} includes {header} ({folder} may not use {other})")
                door = DOORS.get((folder, other))
                if door and header != door:
                    breaches.append(f"{rel}:{line} includes {header} ({folder} reaches {other} through {door} only)")
    return breaches


def main():
    build = sys.argv[1]
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    objects, breaches = object_breaches(build, source)
    if objects < 50:
        print(f"FAIL: only {objects} objects under {build}: is it a build tree?", file=sys.stderr)
        return 1
    breaches += include_breaches(source)
    for b in breaches:
        print("FAIL:", b)
    if breaches:
        print(f"{len(breaches)} use(s) against the folders' direction (docs/architecture.md)")
        return 1
    print(f"ok: {objects} objects and every source's includes use only their own or lower folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
