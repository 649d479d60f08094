#!/usr/bin/env python3
"""Checks that every gradient check in the test suites goes through the
shared helper, `tests/common/gradcheck.rs`, whose tolerance follows the
magnitude of the loss (issue 38).

A hand-written divided difference, `(f(x + h) - f(x - h)) / (2 * h)`, is
where a tolerance that assumes unit magnitudes hides: the helper bounds the
rounding error of the differences by the size of the loss's terms, a copy
of it would not. So this refuses, in the Rust files under tests/ outside
the helper, the two halves of one: a division by a step (a name such as
`eps`, `h`, `step`, `delta` or `dx`, or twice one) and a value nudged by
`eps` (`x + eps`, `data[j] -= EPS`). Comments are ignored. A line that does
either for another reason says so with `// not a difference quotient` at
its end.

Usage: python3 scripts/check-tests.py   (exit 1 with each place found)
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HELPER = os.path.join("tests", "common", "gradcheck.rs")
STEP = r"(?:eps|epsilon|h|step|delta|dx)"
QUOTIENT = re.compile(r"/\s*\(?\s*(?:2(?:\.0)?\s*\*\s*)?\b" + STEP + r"\b(?!\s*[(:!.])", re.IGNORECASE)
NUDGE = re.compile(r"[\w\])]\s*[+-]=?\s*\b(?:eps|epsilon)\b(?!\s*[(:!.])", re.IGNORECASE)
ALLOWED = "// not a difference quotient"


def code_of(line):
    """The line without a trailing `//` comment (outside string literals)."""
    in_string = False
    for i, c in enumerate(line):
        if c == '"' and (i == 0 or line[i - 1] != "\\"):
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            return line[:i]
    return line


def main():
    found = []
    for folder in ["tests"]:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                if not name.endswith(".rs") or rel == HELPER:
                    continue
                for number, line in enumerate(open(path, encoding="utf-8"), 1):
                    if ALLOWED in line:
                        continue
                    code = code_of(line)
                    if QUOTIENT.search(code) or NUDGE.search(code):
                        found.append(f"{rel}:{number}: {line.strip()}")
    if found:
        print("A difference quotient outside tests/common/gradcheck.rs: check gradients with")
        print("gradcheck::gradcheck, whose tolerance follows the loss's magnitude (or end the")
        print(f"line with `{ALLOWED}` if it is not one):")
        print("\n".join("  " + f for f in found))
        return 1
    print("every gradient check goes through tests/common/gradcheck.rs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
