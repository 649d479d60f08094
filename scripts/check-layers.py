#!/usr/bin/env python3
"""Checks that the top-level modules of src/ form layers: no import cycle
between them, except inside the one layer of `tensor`, `autograd` and `ops`
(methods on `Tensor` that record autograd nodes).

A module's dependencies are the `crate::NAME` and `$crate::NAME` paths in
its files (comments stripped), with names the crate root re-exports
(`crate::Tensor`) resolved to the module that defines them.

Usage: python3 scripts/check-layers.py   (prints the layers; exit 1 on a cycle)
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# One layer by design: `Tensor`'s methods live in `ops` and record nodes of `autograd`.
ONE_LAYER = {"tensor", "autograd", "ops"}
CORE = "tensor+autograd+ops"


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


def top_level_names(source, start):
    """The first path segment of each item of a `crate::{..}` group opening at `start`."""
    names, depth, expect_name = [], 1, True
    for m in re.finditer(r"\w+|[{},]", source[start:]):
        token = m.group(0)
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                break
        elif token == ",":
            expect_name = depth == 1
        elif expect_name and depth == 1:
            names.append(token)
            expect_name = False
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
            names = [m.group(1) for m in re.finditer(r"\bcrate::(\w+)", source)]
            for group in re.finditer(r"\bcrate::\{", source):
                names += top_level_names(source, group.end())
            for name in names:
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
    for cycle in cycles:
        inside = sorted(f"{a} -> {b}" for a in cycle for b in edges[a] if b in cycle)
        print(f"import cycle among {sorted(cycle)}: {'; '.join(inside)}", file=sys.stderr)
    print(f"{len(cycles)} cycle(s)")
    sys.exit(1 if cycles else 0)

if __name__ == "__main__":
    main()
