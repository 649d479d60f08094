#!/usr/bin/env python3
"""Checks that no fallible body in the library calls a panicking form
(issue 35): `try_relu` must not be `Ok(x.relu())`, or an out-of-memory on a
GPU panics where the caller asked for an `Error`.

The compiler finds the calls, so that they are resolved by type and not by
name: `#[fallible]` marks every panicking form it writes as deprecated under
`--cfg devtensor_check_fallible` (see `macros/`), and this script checks the
library with that cfg (`cargo rustc --profile check`, which leaves the
dependencies and the usual build alone). Each warning is then placed in its
function. A call inside a fallible one is an error: a function whose name
starts with `try_`, one under `#[fallible]` (its body is `try_x`'s), or one
whose signature returns a `Result`. A call elsewhere (a `Neg` impl, a
`Default`, a re-export) is the panicking form's own business, and allowed;
a call that rustc places on a macro's row, outside any function, is not
(the function the macro writes cannot be seen from there).

The operators (`&a + &b`) are trait impls the marker cannot reach; a
fallible body spells them `try_add` by convention.

Usage: python3 scripts/check-fallible.py   (exit 1 with each call found)
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FN = re.compile(r"\bfn\s+(\w+)")
USE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s", re.MULTILINE)


def blank_literals(text):
    """`text` with comments, strings and char literals blanked (newlines
    kept), so that braces can be counted and lines still line up."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif (m := re.match(r'r(#*)"', text[i:])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            blank(i + 1, j - 1)
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        elif (m := re.match(r"'(\\.|[^\\'\n])'", text[i:])) or (m := re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:])):
            blank(i + 1, i + len(m.group(0)) - 1)
            i += len(m.group(0))
        else:
            i += 1
    return "".join(out)


def functions(path):
    """Each function of the file as (first line, last line, fallible?),
    lines counted from 1."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    code = blank_literals(source)
    line_at = [0] * (len(code) + 1)
    line = 1
    for k, c in enumerate(code):
        line_at[k] = line
        if c == "\n":
            line += 1
    line_at[len(code)] = line
    found = []
    for m in FN.finditer(code):
        # The signature runs to the body's `{` (or `;` for a declaration),
        # outside any parentheses or brackets.
        depth, k = 0, m.end()
        while k < len(code):
            c = code[k]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif depth == 0 and c in "{;":
                break
            k += 1
        if k >= len(code) or code[k] == ";":
            continue
        signature = code[m.start() : k]
        body_start, braces = k, 0
        while k < len(code):
            if code[k] == "{":
                braces += 1
            elif code[k] == "}":
                braces -= 1
                if braces == 0:
                    break
            k += 1
        # The attributes just above `fn` (`#[fallible]`, `#[fallible(free)]`).
        before = code[: m.start()].rstrip().splitlines()[-6:]
        marked = any(re.match(r"\s*#\[fallible\b", b) for b in before)
        name = m.group(1)
        fallible = name.startswith("try_") or marked or re.search(r"->.*\bResult\s*<", signature) is not None
        found.append((line_at[body_start], line_at[k], fallible, name))
    # Re-exports name the panicking forms without calling them.
    uses = [(line_at[m.start()], line_at[code.find(";", m.end())]) for m in USE.finditer(code)]
    return found, uses


def main():
    env = dict(os.environ)
    command = [
        "cargo", "rustc", "--quiet", "--profile", "check", "--lib", "--message-format=json",
        "--", "--cfg", "devtensor_check_fallible",
    ]
    run = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        print("check-fallible: the library did not build with --cfg devtensor_check_fallible")
        return 1
    cache = {}
    bad = []
    for text in run.stdout.splitlines():
        message = json.loads(text)
        if message.get("reason") != "compiler-message":
            continue
        diagnostic = message["message"]
        if (diagnostic.get("code") or {}).get("code") != "deprecated":
            continue
        span = next(s for s in diagnostic["spans"] if s["is_primary"])
        path, line = span["file_name"], span["line_start"]
        full = os.path.join(ROOT, path)
        if full not in cache:
            cache[full] = functions(full)
        fns, uses = cache[full]
        if any(a <= line <= b for a, b in uses):
            continue
        called = re.search(r"`([^`]+)`", diagnostic["message"])
        called = called.group(1) if called else "?"
        around = [f for f in fns if f[0] <= line <= f[1]]
        if not around:
            # A macro's row: rustc places a call that the macro spells with
            # a name from the row (`x.$method()`) on the row, not in the
            # function the macro writes. Such a body cannot be told
            # fallible or not from here, so it must call no panicking form.
            bad.append(f"{path}:{line}: a macro's row makes a call of the panicking {called}")
            continue
        # The innermost function holding the call decides.
        _, _, fallible, name = max(around, key=lambda f: f[0])
        if fallible:
            bad.append(f"{path}:{line}: `{name}` is fallible but calls the panicking {called}")
    for b in sorted(set(bad)):
        print(b)
    if bad:
        print(f"check-fallible: {len(set(bad))} call(s) of a panicking form inside a fallible body; call its try_ form with `?`")
        return 1
    print("check-fallible: no fallible body calls a panicking form")
    return 0


if __name__ == "__main__":
    sys.exit(main())
