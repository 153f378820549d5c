#!/usr/bin/env python3
"""tests/unit/no_call_circles.py BUILD_DIR: no circle of calls between the source files of the
library's modules (docs/architecture.md, "Folders run one way"), checked on the compiled objects so
a declaration in some third header cannot hide one. File A depends on file B when A's object uses
a symbol B's object defines; a circle is a strongly connected set of two or more files (Tarjan).
A file's static functions are its own business; only global symbols count. An object whose
source file is gone (a build folder older than a file's removal) is not counted."""
import os
import sys

import objects


def main():
    build = sys.argv[1]
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    defs, uses = objects.read(build, source)
    if len(uses) < 50:
        print(f"FAIL: only {len(uses)} objects under {build}: is it a build tree?", file=sys.stderr)
        return 1
    graph = {s: {d for u in us for d in defs.get(u, ()) if d != s} for s, us in uses.items()}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components (recursion depth: a few hundred files)
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    for c in circles:
        print("FAIL: these files call each other in a circle: " + " -> ".join(c), file=sys.stderr)
    if circles:
        return 1
    print(f"ok: {len(graph)} source files, no circle of calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
