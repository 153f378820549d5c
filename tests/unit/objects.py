"""tests/unit/objects.py: the library's compiled objects read with nm, for the tests that check
docs/architecture.md's rules on them (no_call_circles.py, folder_direction.py): which source file
defines each global symbol and which symbols each file uses. An object whose source file is gone
(a build folder older than a file's removal) is not counted."""
import glob
import os
import subprocess

MODULES = ("core", "launcher", "rendezvous", "checkpoint", "cadence", "pipeline", "eval")


def read(build, source):
    """(defs, uses): defs maps a symbol to the set of "folder/file.c" that define it, uses maps a
    "folder/file.c" to the set of symbols its object leaves undefined."""
    defs, uses = {}, {}
    for obj in glob.glob(os.path.join(build, "*", "CMakeFiles", "*.dir", "*.o")):
        module = obj[len(build) + 1:].split(os.sep)[0]
        if module not in MODULES:
            continue
        src = module + "/" + os.path.basename(obj)[:-2]
        if not os.path.exists(os.path.join(source, src)):
            continue
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBRVW":
                defs.setdefault(f[2], set()).add(src)
            elif len(f) == 2 and f[0] == "U":
                uses.setdefault(src, set()).add(f[1])
    return defs, uses
