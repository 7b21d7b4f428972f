#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (default 60 lines), files longer than 600, and
.cpp files without an opening comment (what the file is, on its first line).

    scripts/function-lengths.py [--max-function 60] [--max-file 600] PATH...

A heuristic scanner, not a parser: it tracks braces outside strings, comments and
preprocessor lines, and calls a brace block a function body when it opens at namespace or
class level after a ')'. Exit 1 when anything is over its limit, so CI can hold the line:
80 lines anywhere in src/, 60 in engine, server, control and router.
"""
import argparse
import pathlib
import re
import sys


def strip(src):
    """Blanks comments, string and char literals (keeping newlines) so braces can be counted."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == "#" and (i == 0 or src[i - 1] == "\n"):  # a preprocessor line: #if defined(X)
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        elif src.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', src[i:])
            end = src.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(" " * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    text = strip(path.read_text(encoding="utf-8", errors="replace"))
    stack = []  # (kind, start line, head)
    head_start = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            head = text[head_start:i]
            in_function = any(k == "fn" for k, _, _ in stack)
            head_flat = " ".join(head.split())
            is_fn = (not in_function and ")" in head_flat
                     and not re.match(r"^(if|for|while|switch|catch|do)\b", head_flat))
            stack.append(("fn" if is_fn else "block", line, head_flat))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, start, head = stack.pop()
                if kind == "fn":
                    name = re.sub(r"\s*\(.*", "", head).split(" ")[-1] or head[:60]
                    yield name, start, line
            head_start = i + 1
        elif c == ";":
            head_start = i + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-function", type=int, default=60)
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in map(pathlib.Path, a.paths):
        files += sorted(p.rglob("*.[ch]*")) if p.is_dir() else [p]
    over = 0
    for f in files:
        if f.suffix not in (".cpp", ".h") or f.name.endswith("_test.cpp"):
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        n = text.count("\n")
        if f.suffix == ".cpp" and not text.startswith("//"):
            print(f"{f}:1: no opening comment (say what the file is on its first line)"); over += 1
        if n > a.max_file:
            print(f"{f}: {n} lines (file limit {a.max_file})"); over += 1
        for name, start, end in functions(f):
            if end - start + 1 > a.max_function:
                print(f"{f}:{start}: {name}: {end - start + 1} lines (function limit {a.max_function})")
                over += 1
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
