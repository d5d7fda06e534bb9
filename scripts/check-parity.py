#!/usr/bin/env python3
"""Checks that every C entry point is wrapped by each binding, or listed as omitted.

The entry points are the library's exported symbols (capi/abi/symbols.txt).
A binding wraps one when its sources call it:
  - Python: bindings/python/src/*.cc names the function;
  - Rust:   bindings/rust/omniccl/src/*.rs names the function (the -sys
            crate declares it; the safe crate must call it);
  - Java:   the SWIG interface maps it to a name (OCCL_CALL/OCCL_DONE or
            %rename) and a class under org/omniccl calls OmniCCLNative.<name>,
            or the interface's own C code calls it.
Whatever a binding does not wrap must be listed in bindings/parity.toml with
the reason; a listed omission that is in fact wrapped, or that names no entry
point, is an error too (the list would go stale otherwise).

Usage: scripts/check-parity.py [--write]
The table in docs/reference/parity.md must match what the sources give;
--write rewrites it. Exit status 1 when the check fails, one line per problem.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGS = ("python", "rust", "java")


def symbols() -> list[str]:
    lines = (ROOT / "capi/abi/symbols.txt").read_text().split()
    return sorted(s for s in lines if s.startswith("occl_"))


def macros() -> dict[str, str]:
    """Function-like macros of the header that call an entry point (OCCL_INIT_CHECK)."""
    header = (ROOT / "capi/include/omniccl/omniccl.h").read_text()
    return {fn: macro for macro, fn in re.findall(r"#define\s+(OCCL_\w+)\(\)\s+(occl_\w+)\(", header)}


def named_in(paths: list[Path], name: str) -> bool:
    names = [name] + ([MACROS[name]] if name in MACROS else [])
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
    return any(pattern.search(p.read_text()) for p in paths)


def java_helper_calls(swig: str) -> str:
    """The interface's C helper code: its text without the declarations it exports."""
    decl = re.compile(r"^\s*(?:occl_status_t|const char\*)\s+occl_\w+\(", re.M)
    return decl.sub("", swig)


def java_names() -> dict[str, str]:
    swig = (ROOT / "bindings/java/src/main/swig/omniccl.i").read_text()
    names = dict((c, j) for c, j in re.findall(r"OCCL_(?:CALL|DONE)\((occl_\w+),\s*(\w+)\)", swig))
    names.update((c, j) for j, c in re.findall(r"%rename\((\w+)\)\s+(occl_\w+);", swig))
    return names


MACROS = macros()


def wrapped() -> dict[str, set[str]]:
    py = sorted((ROOT / "bindings/python/src").glob("*.cc"))
    rs = sorted((ROOT / "bindings/rust/omniccl/src").glob("*.rs"))
    java_src = "\n".join(p.read_text() for p in sorted((ROOT / "bindings/java/src/main/java").rglob("*.java")))
    jnames = java_names()
    jhelpers = java_helper_calls((ROOT / "bindings/java/src/main/swig/omniccl.i").read_text())
    out: dict[str, set[str]] = {lang: set() for lang in LANGS}
    for sym in symbols():
        if named_in(py, sym):
            out["python"].add(sym)
        if named_in(rs, sym):
            out["rust"].add(sym)
        if sym in jnames and re.search(r"OmniCCLNative\." + re.escape(jnames[sym]) + r"\(", java_src):
            out["java"].add(sym)
        elif any(re.search(r"\b" + re.escape(n) + r"\(", jhelpers) for n in [sym] + ([MACROS[sym]] if sym in MACROS else [])):
            out["java"].add(sym)  # called by the JNI code itself (e.g. for exception messages)
    return out


def add_same_as(have: dict[str, set[str]], same_as: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """A binding has an entry point when it wraps one that does the same work; returns which, per language."""
    via: dict[str, dict[str, str]] = {lang: {} for lang in LANGS}
    for lang in LANGS:
        for _ in range(len(same_as)):  # chains (send -> send_ex -> send_tagged)
            for sym, others in same_as.items():
                found = [o for o in others if o in have[lang]]
                if sym not in have[lang] and found:
                    have[lang].add(sym)
                    via[lang][sym] = via[lang].get(found[0], found[0])
    return via


DOCS = ROOT / "docs/reference/parity.md"
BEGIN = "<!-- parity table: written by scripts/check-parity.py --write; do not edit by hand -->"
END = "<!-- end of parity table -->"


def cell(sym: str, lang: str, have: dict[str, set[str]], via: dict[str, dict[str, str]],
         omitted: dict[str, dict[str, str]]) -> str:
    if sym in via[lang]:
        return f"yes, as `{via[lang][sym]}`"
    return "yes" if sym in have[lang] else f"no: {omitted[lang].get(sym, '(not listed)')}"


def markdown_table(syms: list[str], have: dict[str, set[str]], via: dict[str, dict[str, str]],
                   omitted: dict[str, dict[str, str]]) -> str:
    rows = ["| C entry point | Python | Rust | Java |", "|---|---|---|---|"]
    for sym in syms:
        rows.append(f"| `{sym}` | " + " | ".join(cell(sym, lang, have, via, omitted) for lang in LANGS) + " |")
    return "\n".join(rows)


def check_docs(table: str, write: bool) -> list[str]:
    """The docs page's table must be the one the sources give (--write rewrites it)."""
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        return [f"{DOCS.relative_to(ROOT)} lacks the table markers"]
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    fresh = f"{head}{BEGIN}\n{table}\n{END}{tail}"
    if fresh == text:
        return []
    if write:
        DOCS.write_text(fresh)
        return []
    return [f"{DOCS.relative_to(ROOT)}: the table is out of date; run scripts/check-parity.py --write"]


def main() -> int:
    table = tomllib.loads((ROOT / "bindings/parity.toml").read_text())
    omitted = {lang: table.get("omitted", {}).get(lang, {}) for lang in LANGS}
    syms = symbols()
    have = wrapped()
    via = add_same_as(have, table.get("same_as", {}))
    problems = []
    for lang in LANGS:
        for sym in syms:
            if sym not in have[lang] and sym not in omitted[lang]:
                problems.append(f"{lang}: {sym} is neither wrapped nor listed in bindings/parity.toml [omitted.{lang}]")
            if sym in have[lang] and sym in omitted[lang]:
                problems.append(f"{lang}: {sym} is wrapped but listed as omitted in bindings/parity.toml")
        for sym, why in omitted[lang].items():
            if sym not in syms:
                problems.append(f"{lang}: bindings/parity.toml lists {sym}, which is not an entry point")
            elif not str(why).strip():
                problems.append(f"{lang}: bindings/parity.toml gives no reason for omitting {sym}")
    problems += check_docs(markdown_table(syms, have, via, omitted), "--write" in sys.argv[1:])
    for p in problems:
        print("check-parity: " + p, file=sys.stderr)
    if not problems:
        counts = ", ".join(f"{lang} {len(have[lang])}" for lang in LANGS)
        print(f"check-parity: {len(syms)} entry points; wrapped: {counts}; the rest listed with reasons")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
