#!/usr/bin/env python3
"""The structure of userspace/ drawn from its own includes (make layers, in make test).

Each folder is a layer, stacked as LAYERS lists them, lowest first; a file may include a
header of its own layer or of a layer below, never above. A module is a .c file and its .h;
modules that include each other's headers, directly or round a longer loop, are a circle.
Fails on an include that runs up, on more circles than ALLOWED_CIRCLES, on an include written
without its folder, on a function longer than MAX_FUNCTION_LINES (userspace and the BPF side),
and on a file that does not open with a comment on what it owns.

  scripts/layers.py [--graph]     --graph: every module's includes, by layer"""
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "userspace"
# Lowest first: each may use the ones before it.
LAYERS = ["base", "probes", "host", "symbols", "discover", "loader", "model", "analysis",
          "output", "recording", "export", "config", "views", "session", "cmd", "."]
ALLOWED_CIRCLES = 1
MAX_FUNCTION_LINES = 80
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def layer_of(path):
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else "."


def module_of(path):
    """X.c with X.h, and X_int.h: the header private to X's files."""
    rel = str(path.relative_to(SRC).with_suffix(""))
    return rel[:-4] if rel.endswith("_int") else rel


def headers():
    return {str(p.relative_to(SRC)): p for p in SRC.rglob("*.h")}


def main():
    graph = "--graph" in sys.argv
    known = headers()
    problems = []
    edges = defaultdict(set)
    files = sorted(list(SRC.rglob("*.c")) + list(SRC.rglob("*.h")))
    order = {name: i for i, name in enumerate(LAYERS)}
    for f in files:
        lay = layer_of(f)
        if lay not in order:
            problems.append(f"{f.relative_to(ROOT)}: folder {lay}/ is no layer (scripts/layers.py)")
            continue
        for inc in INCLUDE.findall(f.read_text()):
            if inc.endswith(".skel.h") or inc == "gpumem.h" or inc.startswith("gpumem"):
                continue    # the BPF side's shared header and the generated skeleton
            if inc not in known:
                problems.append(f"{f.relative_to(ROOT)}: #include \"{inc}\" names no header "
                                f"under userspace/ (write it with its folder)")
                continue
            target = known[inc]
            tl = layer_of(target)
            if order[tl] > order[lay]:
                problems.append(f"{f.relative_to(ROOT)}: #include \"{inc}\" runs up, from "
                                f"{lay}/ to {tl}/")
            if module_of(target) != module_of(f):
                edges[module_of(f)].add(module_of(target))
    circles = strongly_connected([m for m in edges], edges)
    circles = [c for c in circles if len(c) > 1]
    for c in circles:
        print(f"layers: circle: {' <-> '.join(sorted(c))}")
    if len(circles) > ALLOWED_CIRCLES:
        problems.append(f"{len(circles)} circles between modules, at most {ALLOWED_CIRCLES}")
    problems += long_functions(SRC.rglob("*.c"))
    problems += long_functions((ROOT / "bpf").glob("*.bpf.[ch]"))
    for f in files:     # what a file owns, said where it begins
        head = [l for l in f.read_text().splitlines()[:3] if "SPDX" not in l]
        if not head or not head[0].lstrip().startswith(("/*", "//")):
            problems.append(f"{f.relative_to(ROOT)}: does not open with a line on what it owns")
    if graph:
        for m in sorted(edges, key=lambda m: (order.get(m.split("/")[0], 99), m)):
            print(f"{m}: {' '.join(sorted(edges[m]))}")
    for p in problems:
        print(f"layers: FAIL: {p}")
    nmod = len({module_of(f) for f in files})
    print(f"layers: {nmod} modules in {len(LAYERS) - 1} layers and main.c; "
          f"{len(circles)} circle(s); {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


def strongly_connected(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
            out.append(comp)
    sys.setrecursionlimit(10000)
    for v in list(nodes):
        if v not in index:
            visit(v)
    return out


def long_functions(paths):
    """Kernel style: a function's body opens with "{" alone at column 0 and closes with "}"
    alone at column 0; its name is the last word before "(" on the lines above."""
    found = []
    for p in paths:
        lines = p.read_text().splitlines()
        start = None
        for i, line in enumerate(lines):
            if start is None and line == "{":
                head = " ".join(lines[max(0, i - 4):i])
                m = re.findall(r"(\w+)\s*\(", head)
                start, name = i, (m[0] if m else "?")
            elif start is not None and line == "}":
                n = i - start - 1
                if n > MAX_FUNCTION_LINES:
                    found.append(f"{p.relative_to(ROOT)}: {name}() is {n} lines, over "
                                 f"{MAX_FUNCTION_LINES}")
                start = None
    return found


if __name__ == "__main__":
    sys.exit(main())
