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
The tables in docs/reference/parity.md must match what the sources give;
--write rewrites them. Exit status 1 when the check fails, one line per problem.
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
OPS_BEGIN = "<!-- reduction table: written by scripts/check-parity.py --write; do not edit by hand -->"
OPS_END = "<!-- end of reduction table -->"
REDUCTION_TABLE = ROOT / "bindings/reduction_table.tsv"
VERDICTS = ("ok", "refused")


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


def red_ops() -> list[str]:
    """The reduce ops of the header's occl_red_op_t, without OCCL_ (SUM, ..., MINLOC), in value order."""
    header = (ROOT / "capi/include/omniccl/omniccl.h").read_text()
    body = re.search(r"typedef enum occl_red_op \{(.*?)\} occl_red_op_t;", header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    found = [(int(v), n) for n, v in re.findall(r"\bOCCL_(\w+)\s*=\s*(\d+)\b", body) if not n.endswith("_ENUM")]
    return [n for _, n in sorted(found)]


def dtypes() -> list[str]:
    """The dtypes the C ABI converts from DLPack (capi/src/dlpack.cc), named as the library names them."""
    src = (ROOT / "capi/src/dlpack.cc").read_text()
    names = []
    for code, bits in re.findall(r"case key\(kDL(\w+), (\d+)\)", src):
        code = code.lower()
        names.append(code if code == "bool" or "_" in code else f"{code}{bits}")
    return names


def reduction_rows() -> tuple[list[tuple[str, str, str]], list[str]]:
    """The rows of bindings/reduction_table.tsv and the problems of its form."""
    rows, problems = [], []
    for num, line in enumerate(REDUCTION_TABLE.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 3 or cols[2] not in VERDICTS:
            problems.append(f"bindings/reduction_table.tsv:{num}: want op<TAB>dtype<TAB>ok|refused, got {line!r}")
            continue
        rows.append((cols[0], cols[1], cols[2]))
    return rows, problems


def check_reduction_table(ops: list[str], dts: list[str], rows: list[tuple[str, str, str]]) -> list[str]:
    """Exactly one row per (op, dtype) pair of the header and the C ABI, none for anything else."""
    problems, seen = [], set()
    for op, dt, _ in rows:
        if op not in ops:
            problems.append(f"bindings/reduction_table.tsv names op {op}, which occl_red_op_t does not have")
        if dt not in dts:
            problems.append(f"bindings/reduction_table.tsv names dtype {dt}, which the C ABI does not take")
        if (op, dt) in seen:
            problems.append(f"bindings/reduction_table.tsv has ({op}, {dt}) twice")
        seen.add((op, dt))
    for op in ops:
        for dt in dts:
            if (op, dt) not in seen:
                problems.append(f"bindings/reduction_table.tsv lacks a row for ({op}, {dt})")
    return problems


def reduction_markdown(ops: list[str], rows: list[tuple[str, str, str]]) -> str:
    """One line per op: the dtypes it reduces and those it refuses, in the table's order."""
    lines = ["| op | reduces | refuses |", "|---|---|---|"]
    for op in ops:
        got = {v: ", ".join(f"`{dt}`" for o, dt, w in rows if o == op and w == v) or "none" for v in VERDICTS}
        lines.append(f"| `{op}` | {got['ok']} | {got['refused']} |")
    return "\n".join(lines)


def replace_between(text: str, begin: str, end: str, table: str) -> str | None:
    if begin not in text or end not in text:
        return None
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def check_docs(table: str, reductions: str, write: bool) -> list[str]:
    """The docs page's tables must be the ones the sources give (--write rewrites them)."""
    text = DOCS.read_text()
    fresh = replace_between(text, BEGIN, END, table)
    if fresh is None:
        return [f"{DOCS.relative_to(ROOT)} lacks the table markers"]
    fresh = replace_between(fresh, OPS_BEGIN, OPS_END, reductions)
    if fresh is None:
        return [f"{DOCS.relative_to(ROOT)} lacks the reduction table markers"]
    if fresh == text:
        return []
    if write:
        DOCS.write_text(fresh)
        return []
    return [f"{DOCS.relative_to(ROOT)}: a table is out of date; run scripts/check-parity.py --write"]


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
    ops, dts = red_ops(), dtypes()
    rows, form = reduction_rows()
    problems += form + check_reduction_table(ops, dts, rows)
    problems += check_docs(markdown_table(syms, have, via, omitted), reduction_markdown(ops, rows),
                           "--write" in sys.argv[1:])
    for p in problems:
        print("check-parity: " + p, file=sys.stderr)
    if not problems:
        counts = ", ".join(f"{lang} {len(have[lang])}" for lang in LANGS)
        print(f"check-parity: {len(syms)} entry points; wrapped: {counts}; the rest listed with reasons; "
              f"reduction table: {len(ops)} ops x {len(dts)} dtypes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
