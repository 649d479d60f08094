#!/usr/bin/env python3
"""The build-time ratchet: how much of devtensor a user's program compiles.

Each program in tests/buildtime/*.rs is built as an example of this package
(`buildtime_<name>` in Cargo.toml; dev profile, so the library built for the
tests is reused), and its LLVM IR is counted the way
`cargo llvm-lines` counts it (unoptimised, one codegen unit): every line,
and the lines and copies of the functions whose path is devtensor's, which
are what devtensor's generic code instantiates in the user's crate. Counts,
not times: the same compiler gives the same figures on any machine and
under any load.

The figures are recorded in tests/buildtime/ratchet.json. The check fails
when a program's lines or devtensor lines exceed the recorded figure by
more than MARGIN: an op whose kernel, autograd rule or loop is compiled in
the user's crate again instead of once in devtensor's core shows up here
(docs/decisions/2026-12-01-typed-shell-concrete-core.md).

    python3 scripts/check-buildtime.py            # check
    python3 scripts/check-buildtime.py --update   # record the current figures

Run `--update` when an increase is deliberate (a new rustc, a shell that
must take a generic argument) and say why in the commit; a decrease can be
recorded the same way, so that the ratchet tightens.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "buildtime"
RECORD = PROGRAMS / "ratchet.json"
# Relative growth allowed over the recorded figure, and an absolute floor
# for the tiny programs, whose counts move by a few lines with the compiler.
MARGIN = 0.10
SLACK = 300


def demangle(symbol: str) -> str:
    """A legacy Rust symbol as a path (`devtensor::ops::x::y`), enough to
    tell whose function it is; other symbols are returned as they are."""
    if not symbol.startswith("_ZN"):
        return symbol
    parts, i = [], 3
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while symbol[j].isdigit():
            j += 1
        n = int(symbol[i:j])
        parts.append(symbol[j : j + n])
        i = j + n
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    codes = {"$LT$": "<", "$GT$": ">", "$u20$": " ", "$C$": ",", "$RF$": "&", "$BP$": "*", "$u7b$": "{",
             "$u7d$": "}", "$u27$": "'", "$LP$": "(", "$RP$": ")", "$SP$": "@", "$u5b$": "[", "$u5d$": "]"}
    path = "::".join(parts)
    for code, text in codes.items():
        path = path.replace(code, text)
    return path.replace("..", "::").lstrip("_")


def is_devtensor(path: str) -> bool:
    """Whether a function's path is devtensor's: `devtensor::..`, or an impl
    of a devtensor trait or for a devtensor type."""
    return path.startswith("devtensor::") or path.startswith("<devtensor::") or " as devtensor::" in path


def count(ll: Path) -> dict:
    lines = devtensor_lines = functions = 0
    current = None
    for line in ll.read_text().splitlines():
        lines += 1
        if line.startswith("define "):
            match = re.search(r'@("(?:[^"\\]|\\.)*"|[\w.$]+)\(', line)
            name = match.group(1).strip('"') if match else ""
            current = is_devtensor(demangle(name))
            functions += current
        if current:
            devtensor_lines += 1
        if line == "}":
            current = None
    return {"lines": lines, "devtensor_lines": devtensor_lines, "devtensor_functions": functions}


def build(program: Path) -> dict:
    """The counts of one program, built as the example `buildtime_<name>`
    of this package (Cargo.toml lists them), against the library the tests
    built."""
    name = "buildtime_" + program.stem
    out_dir = ROOT / "target" / "buildtime"
    out_dir.mkdir(parents=True, exist_ok=True)
    ll = out_dir / f"{name}.ll"
    ll.unlink(missing_ok=True)
    # `-Copt-level=3` for the program alone, as in a release build: below
    # opt-level 2 rustc shares generic instances with the crates upstream
    # (share-generics), so a debug build would hide exactly what this
    # counts. No LLVM pass runs (`no-prepopulate-passes`), so it stays fast;
    # no debug information, whose metadata lines would depend on the profile.
    flags = [f"--emit=llvm-ir={ll}", "-Copt-level=3", "-Cdebuginfo=0", "-Ccodegen-units=1", "-Cno-prepopulate-passes",
             "-Cpasses=name-anon-globals"]
    subprocess.run(["cargo", "rustc", "--quiet", "--example", name, "--", *flags], check=True, cwd=ROOT)
    return count(ll)


def rustc_version() -> str:
    return subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True).stdout.split()[1]


def main() -> int:
    update = "--update" in sys.argv[1:]
    figures = {p.stem: build(p) for p in sorted(PROGRAMS.glob("*.rs"))}
    rustc = rustc_version()
    if update:
        RECORD.write_text(json.dumps({"rustc": rustc, "programs": figures}, indent=2) + "\n")
        for name, f in figures.items():
            print(f"{name}: {f['lines']} lines, {f['devtensor_lines']} in {f['devtensor_functions']} devtensor functions")
        print(f"recorded in {RECORD.relative_to(ROOT)}")
        return 0
    # The count relies on legacy symbol names (`_ZN..`, rustc's default);
    # under another mangling no function would look like devtensor's and
    # the check could only pass, so that fails too.
    unread = [name for name, f in figures.items() if f["devtensor_functions"] == 0]
    if unread:
        print(f"{', '.join(unread)}: no function recognised as devtensor's; did the symbol mangling change?")
        return 1
    record = json.loads(RECORD.read_text())
    if record["rustc"] != rustc:
        print(f"note: the figures were recorded with rustc {record['rustc']}, this is {rustc}")
    failed = False
    for name, f in figures.items():
        was = record["programs"].get(name)
        if was is None:
            print(f"{name}: not recorded; run `python3 scripts/check-buildtime.py --update`")
            failed = True
            continue
        line = (f"{name}: {f['lines']} lines (recorded {was['lines']}), {f['devtensor_lines']} in "
                f"{f['devtensor_functions']} devtensor functions (recorded {was['devtensor_lines']} in "
                f"{was['devtensor_functions']})")
        over = [k for k in ("lines", "devtensor_lines") if f[k] > was[k] * (1 + MARGIN) + SLACK]
        print(("FAIL " if over else "ok   ") + line)
        failed |= bool(over)
    if failed:
        print(
            "A user's program now compiles more of devtensor than recorded: some generic code that should "
            "call the core through its table runs in the user's crate. See "
            "docs/decisions/2026-12-01-typed-shell-concrete-core.md; if the increase is deliberate, record it "
            "with `python3 scripts/check-buildtime.py --update` and say why in the commit."
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
