#!/usr/bin/env python3
"""Checks that the top-level modules of src/ form layers: no import cycle
between them, except inside the one layer of `tensor`, `autograd` and `ops`
(methods on `Tensor` that record autograd nodes).

A module's dependencies are the `crate::NAME` and `$crate::NAME` paths in
its files (comments stripped), with names the crate root re-exports
(`crate::Tensor`) resolved to the module that defines them.

The cycles that remain from before the layering (issue 18) are listed in
KNOWN below, each as the set of modules of one strongly connected
component. The check fails on any other cycle, and on a KNOWN cycle that
no longer exists, so that the list only ever shrinks.

Usage: python3 scripts/check-layers.py   (prints the layers; exit 1 on a new cycle)
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# One layer by design: `Tensor`'s methods live in `ops` and record nodes of `autograd`.
ONE_LAYER = {"tensor", "autograd", "ops"}
CORE = "tensor+autograd+ops"

# Cycles still to be broken (issue 18, item 3). Remove an entry when its cycle is gone.
KNOWN = [
    # `Device` gathers the kernel traits of every op family, and the ops
    # implement them for `Cpu` and `Cuda<N>`; `OnDevice` and `same_device`
    # name `Tensor`. Breaking it means a `backend/` layer below `tensor`.
    {"device", CORE},
]


def top_module(path):
    rel = os.path.relpath(path, ROOT).split(os.sep)
    name = rel[0][: -len(".rs")] if rel[0].endswith(".rs") else rel[0]
    return CORE if name in ONE_LAYER else name


def root_reexports():
    """Names the crate root re-exports, mapped to their top-level module."""
    text = open(os.path.join(ROOT, "lib.rs")).read()
    names = {}
    for m in re.finditer(r"pub use (\w+)::(?:\{([^}]*)\}|(\w+));", text):
        module = CORE if m.group(1) in ONE_LAYER else m.group(1)
        for name in (m.group(2) or m.group(3)).split(","):
            name = name.strip()
            if name:
                names[name] = module
    return names


def dependencies():
    modules = set()
    for entry in os.listdir(ROOT):
        if entry != "lib.rs" and (entry.endswith(".rs") or os.path.isdir(os.path.join(ROOT, entry))):
            modules.add(top_module(os.path.join(ROOT, entry)))
    reexports = root_reexports()
    edges = {m: set() for m in modules}
    for directory, _, files in os.walk(ROOT):
        for file in files:
            path = os.path.join(directory, file)
            if not file.endswith(".rs") or path == os.path.join(ROOT, "lib.rs"):
                continue
            source = re.sub(r"//[^\n]*", "", open(path).read())
            here = top_module(path)
            for m in re.finditer(r"\bcrate::(\w+)", source):
                name = m.group(1)
                target = CORE if name in ONE_LAYER else name
                target = reexports.get(name, target)
                if target in modules and target != here:
                    edges[here].add(target)
    return edges


def components(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    edges = dependencies()
    for module in sorted(edges):
        print(f"{module:>20} -> {', '.join(sorted(edges[module])) or '(nothing)'}")
    cycles = components(edges)
    problems = []
    for cycle in cycles:
        if cycle not in KNOWN:
            inside = sorted(f"{a} -> {b}" for a in cycle for b in edges[a] if b in cycle)
            problems.append(f"new import cycle among {sorted(cycle)}: {'; '.join(inside)}")
    for cycle in KNOWN:
        if cycle not in cycles:
            problems.append(f"the known cycle {sorted(cycle)} is gone (or changed): update KNOWN in {__file__}")
    print(f"{len(cycles)} cycle(s), {len(KNOWN)} known")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
