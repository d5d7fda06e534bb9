#!/usr/bin/env python3
"""Writes the C API reference from omniccl.h's doc comments.

The header is the one description of the C ABI, so the reference is made from
it at every docs build (conf.py runs this script) rather than written twice.
Each declaration becomes a Sphinx C-domain directive (c:function, c:struct,
c:enum, c:type, c:macro) with the comment in front of it as its text; a comment
in front of a run of declarations with no blank line between them (the _ex
forms) documents each of them. Section banners of the header become headings.

Fails (exit 1, naming the functions) when an occl_* function is declared without
a doc comment, or when a symbol of capi/abi/symbols.txt (the exported list CI
checks) is not declared in the header: the reference must cover the whole ABI.

Usage: gen_c_api.py HEADER SYMBOLS OUT.rst
"""

import re
import sys


def escape(text):
    """Text of a comment as reStructuredText that shows it literally."""
    text = text.replace("\\", "\\\\")
    for ch in "*`_|":
        text = text.replace(ch, "\\" + ch)
    return text


def comment_body(lines):
    """The text of a /* */ or /** */ comment, without its markers."""
    out = []
    for line in lines:
        s = line.strip()
        s = re.sub(r"^/\*\*?<?", "", s)
        s = re.sub(r"\*/$", "", s)
        s = re.sub(r"^\*(?!/)", "", s.strip())
        out.append(s.strip())
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def paragraphs(body):
    """Comment lines as RST paragraphs and bullet lists, indented by 3."""
    out, para = [], []

    def flush():
        if not para:
            return
        items, cur = [], None
        for line in para:
            if line.startswith("- "):
                cur = [line[2:]]
                items.append(cur)
            elif cur is not None:
                cur.append(line.strip())
            else:
                items.append([line.strip()])
        for item in items:
            text = escape(" ".join(x.strip() for x in item))
            bullet = "- " if len(items) > 1 and para[0].startswith("- ") else ""
            out.append("   " + bullet + text)
            if bullet == "":
                pass
        out.append("")
        para.clear()

    for line in body:
        if not line.strip():
            flush()
        else:
            if line.startswith("- ") and para and not para[0].startswith("- "):
                flush()
            para.append(line)
    flush()
    # A run of plain (non-bullet) lines is one paragraph: join them.
    joined, buf = [], []
    for line in out:
        if line.startswith("   - ") or not line:
            if buf:
                joined.append("   " + " ".join(b.strip() for b in buf))
                buf = []
            joined.append(line)
        else:
            buf.append(line)
    if buf:
        joined.append("   " + " ".join(b.strip() for b in buf))
    return joined


class Header:
    def __init__(self, text):
        self.lines = text.split("\n")
        self.items = []       # (kind, payload)
        self.undocumented = []
        self.functions = []

    def parse(self):
        lines, i, doc = self.lines, 0, None
        while i < len(lines):
            s = lines[i].strip()
            if s.startswith("/* ----"):
                title = lines[i + 1].strip().strip("/*").strip()
                i += 2
                while lines[i].strip().startswith("/* ") and lines[i].strip().endswith("*/") \
                        and not lines[i].strip().startswith("/* ----"):
                    extra = lines[i].strip()[2:-2].strip()
                    if extra:
                        title += " " + extra
                    i += 1
                if lines[i].strip().startswith("/* ----"):
                    i += 1
                prose = []
                while i < len(lines) and re.match(r"^/\* .*\*/$|^/\*\s+\*/$", lines[i].strip()):
                    prose.append(lines[i].strip()[2:-2].strip())
                    i += 1
                self.items.append(("section", (title, prose)))
                doc = None
                continue
            if s.startswith("/*"):
                start = i
                while "*/" not in lines[i]:
                    i += 1
                block = lines[start:i + 1]
                if start == 0:  # the file comment: the ABI policy
                    self.items.append(("intro", comment_body(block)))
                else:
                    doc = comment_body(block)
                i += 1
                continue
            if not s:
                doc = None
                i += 1
                continue
            i = self.declaration(i, doc)
        return self

    def declaration(self, i, doc):
        lines = self.lines
        s = lines[i].strip()
        if s.startswith("#define "):
            m = re.match(r"#define (\w+(\([^)]*\))?)", s)
            name = m.group(1)
            if name.startswith("OCCL_") or name.startswith("OMNICCL"):
                if not name.startswith("OMNICCL_OMNICCL_H"):
                    self.items.append(("macro", (name, doc)))
            while lines[i].rstrip().endswith("\\"):
                i += 1
            return i + 1
        if s.startswith("#") or s.startswith("}") or s.startswith('extern "C"'):
            return i + 1
        start = i
        depth = 0
        while True:
            depth += lines[i].count("{") - lines[i].count("}")
            if depth == 0 and lines[i].rstrip().endswith(";"):
                break
            i += 1
        decl = lines[start:i + 1]
        self.record(decl, doc)
        return i + 1

    def record(self, decl, doc):
        text = " ".join(x.strip() for x in decl)
        text = re.sub(r"/\*.*?\*/", "", text)
        text = re.sub(r"\s+", " ", text).strip()
        if text.startswith("typedef enum") or text.startswith("typedef struct") and "{" in text:
            self.compound(decl, doc)
            return
        if text.startswith("typedef"):
            m = re.search(r"\(\*(\w+)\)", text) or re.search(r"(\w+)\s*;$", text)
            self.items.append(("type", (m.group(1), text.rstrip(";"), doc)))
            return
        m = re.search(r"\b(occl_\w+)\s*\(", text)
        if m:
            name = m.group(1)
            self.functions.append(name)
            if not doc:
                self.undocumented.append(name)
            self.items.append(("function", (text.rstrip(";"), doc)))

    def compound(self, decl, doc):
        kind = "enum" if decl[0].strip().startswith("typedef enum") else "struct"
        tag = re.match(r"typedef (?:enum|struct) (\w+)", decl[0].strip()).group(1)
        tname = re.search(r"}\s*(\w+)\s*;", decl[-1]).group(1)
        members, mdoc, k = [], None, 1
        while k < len(decl) - 1:
            s = decl[k].strip()
            if s.startswith("/*"):
                start = k
                while "*/" not in decl[k]:
                    k += 1
                mdoc = comment_body(decl[start:k + 1])
                k += 1
                continue
            if s:
                trailing = re.search(r"/\*\*<(.*)\*/", s)
                code = re.sub(r"/\*.*?\*/", "", s).strip().rstrip(",;").strip()
                d = [trailing.group(1).strip()] if trailing else mdoc
                members.append((code, d))
            mdoc = None
            k += 1
        self.items.append((kind, (tag, tname, members, doc)))


def directive(out, kind, sig, doc):
    out.append(f".. c:{kind}:: {sig}")
    out.append("")
    if doc:
        out.extend(paragraphs(doc))
    out.append("")


def render(h):
    out = [".. This file is generated by docs/tools/gen_c_api.py from capi/include/omniccl/omniccl.h.", ""]
    for kind, p in h.items:
        if kind == "intro":
            out += ["Header policy", "-------------", ""]
            out += [line[3:] for line in paragraphs(p)]
        elif kind == "section":
            title, prose = p
            out += [title, "-" * len(title), ""]
            if prose:
                out += [line[3:] for line in paragraphs(prose)]
        elif kind == "macro":
            directive(out, "macro", p[0], p[1])
        elif kind == "type":
            directive(out, "type", p[0], (p[2] or []) + ([""] if p[2] else []) + ["Declared as: " + p[1]])
        elif kind == "function":
            directive(out, "function", p[0], p[1])
        elif kind in ("enum", "struct"):
            tag, tname, members, doc = p
            directive(out, "type", tname, (doc or []) + ([""] if doc else []) + [f"typedef {kind} {tag} {tname}."])
            out.append(f".. c:{kind}:: {tag}")
            out.append("")
            for code, d in members:
                if kind == "enum":
                    out.append(f"   .. c:enumerator:: {code}")
                else:
                    out.append(f"   .. c:member:: {code}")
                out.append("")
                if d:
                    out.extend("   " + line if line else "" for line in paragraphs(d))
                out.append("")
    return "\n".join(out) + "\n"


def main(argv):
    header, symbols, dest = argv[1:4]
    h = Header(open(header, encoding="utf-8").read()).parse()
    exported = [s.strip() for s in open(symbols, encoding="utf-8") if s.strip()]
    missing = [s for s in exported if s not in h.functions]
    problems = []
    if h.undocumented:
        problems.append("functions without a doc comment: " + ", ".join(h.undocumented))
    if missing:
        problems.append("exported symbols not declared in the header: " + ", ".join(missing))
    if problems:
        for p in problems:
            print(f"gen_c_api.py: {header}: {p}", file=sys.stderr)
        return 1
    with open(dest, "w", encoding="utf-8") as f:
        f.write(render(h))
    print(f"gen_c_api.py: {len(h.functions)} functions documented -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
