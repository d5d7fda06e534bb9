#!/usr/bin/env python3
"""Writes the settings table of the docs from core/common/settings.cc.

kSettings in settings.cc is the one list of every environment variable the
library reads, each with its default and meaning; the docs' table is made from
it at every build (conf.py runs this script), so the two cannot drift. The
hand-written page around the table (docs/reference/settings.md) adds notes;
this script fails (exit 1) if a setting of the table is not named there in
backquotes, which is also what tests/unit/core_test.cc checks.

Usage: gen_settings.py SETTINGS_CC PAGE_MD OUT_OMNICCL_MD OUT_LAUNCHER_MD
"""

import re
import sys


def c_strings(text):
    """The C string literals of text, adjacent ones concatenated, in order; one list per {...} row."""
    rows, row, pending = [], None, None
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|(\{)|(\})|(,)', text):
        lit, open_, close, comma = m.groups()
        if open_:
            row, pending = [], None
        elif lit is not None and row is not None:
            value = bytes(lit, "utf-8").decode("unicode_escape")
            if pending is None:
                pending = value
            else:
                pending += value
        elif comma and row is not None and pending is not None:
            row.append(pending)
            pending = None
        elif close and row is not None:
            if pending is not None:
                row.append(pending)
            rows.append(row)
            row, pending = None, None
    return rows


def read_table(path):
    src = open(path, encoding="utf-8").read()
    m = re.search(r"kSettings\[\]\s*=\s*\{(.*?)\n\};", src, re.S)
    if not m:
        raise SystemExit(f"gen_settings.py: no kSettings table in {path}")
    rows = c_strings(m.group(1))
    bad = [r for r in rows if len(r) != 3]
    if bad:
        raise SystemExit(f"gen_settings.py: rows that are not (name, default, meaning): {bad}")
    return rows


def cell(text):
    return text.replace("|", "\\|")


def table(rows):
    out = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for name, default, meaning in rows:
        d = "—" if default == "-" else f"`{cell(default)}`"
        out.append(f"| `{name}` | {d} | {cell(meaning)} |")
    return "\n".join(out) + "\n"


def main(argv):
    settings_cc, page, out_occl, out_launch = argv[1:5]
    rows = read_table(settings_cc)
    text = open(page, encoding="utf-8").read()
    unnamed = [r[0] for r in rows if f"`{r[0]}`" not in text]
    if unnamed:
        print(f"gen_settings.py: {page} does not name: {', '.join(unnamed)}", file=sys.stderr)
        return 1
    occl = [r for r in rows if r[0].startswith("OMNICCL_")]
    launch = [r for r in rows if not r[0].startswith("OMNICCL_")]
    with open(out_occl, "w", encoding="utf-8") as f:
        f.write(table(occl))
    with open(out_launch, "w", encoding="utf-8") as f:
        f.write(table(launch))
    print(f"gen_settings.py: {len(occl)} OMNICCL_* settings, {len(launch)} launcher variables")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
