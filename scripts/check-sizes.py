#!/usr/bin/env python3
"""Lists the functions over 80 lines and the files over 600 lines in runtime/, allocator/ and
backends/ that do not say why they are one idea.

A long function passes when the comment just above it (or above its template line) holds
"Why long:" and a reason; a long file passes when its first comment block does. Exits 1 when any
is listed, 0 otherwise (ctest runs it: layering.sizes). With --all, every long function and file
is listed, reasons or not, longest first.

With --known FILE, the long functions and files written there ("PATH NAME LINES", NAME "(file)"
for a file) pass while they grow no longer: the ones not yet split, listed so that no new one
joins them and none of them grows. An entry no longer long is reported, to be taken out.

  scripts/check-sizes.py [--root DIR] [--all] [--known FILE] [--max-function N] [--max-file N]

The C++ is read with a brace matcher, not a compiler: comments, strings and character literals
are blanked first, and a `{` opens a function body when the text before it, back to the previous
`;`, `{` or `}`, reads as a signature (a parenthesised list not led by if/for/while/switch/catch,
then optional qualifiers, a trailing return type or a constructor's initialiser list). Lambdas
and blocks inside a body count toward the body.
"""
import argparse
import os
import re
import sys

FOLDERS = ("runtime", "allocator", "backends")
MARK = "Why long:"
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof", "noexcept"}


def blank_comments_and_strings(text):
    """The text with comments, strings and char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            # A digit separator (1'000) is not a literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def signature_name(header):
    """The function's name when `header` (the code before a `{`) is a signature, else None."""
    h = " ".join(header.split())
    if not h or h.startswith("#"):
        return None
    # Strip a constructor's initialiser list: ") : a_(x), b_{y}" -> ")".
    h = re.sub(r"\)\s*:(?!:)\s*[^;]*$", ")", h)
    # Qualifiers and a trailing return type after the parameter list.
    h = re.sub(r"\)\s*(const|noexcept(\([^)]*\))?|override|final|volatile|&&|&|mutable|->\s*[\w:<>,\s*&]+|\s)*$", ")", h)
    if not h.endswith(")") or "=" in h.split("(")[0]:
        return None
    depth, k = 0, len(h) - 1
    while k >= 0:
        if h[k] == ")":
            depth += 1
        elif h[k] == "(":
            depth -= 1
            if depth == 0:
                break
        k -= 1
    m = re.search(r"([~\w:]+(?:operator\s*\S+)?)\s*$", h[:k])
    if not m:
        return None  # a lambda ("[..](..)") or a cast
    name = m.group(1)
    if name.split("::")[-1] in CONTROL or h[:k].rstrip().endswith("]"):
        return None
    return name


def functions(text):
    """(name, first line, last line) of each function body in the text, 1-based lines."""
    code = blank_comments_and_strings(text)
    found = []
    stack = []  # "scope" (namespace, class, ...), "func", "block"
    starts = []
    last_stop = 0
    for i, c in enumerate(code):
        if c == "{":
            in_func = any(s == "func" for s in stack)
            name = None if in_func else signature_name(code[last_stop:i])
            if name:
                head = last_stop + (len(code[last_stop:i]) - len(code[last_stop:i].lstrip()))
                stack.append("func")
                starts.append((name, code.count("\n", 0, head) + 1, code.count("\n", 0, i) + 1))
            else:
                stack.append("block" if in_func else "scope")
                starts.append(None)
            last_stop = i + 1
        elif c == "}":
            if stack:
                kind, start = stack.pop(), starts.pop()
                if kind == "func":
                    found.append((start[0], start[1], start[2], code.count("\n", 0, i) + 1))
            last_stop = i + 1
        elif c == ";":
            last_stop = i + 1
    return found


def has_reason(lines, first_line):
    """Whether the comment right above line `first_line` (1-based) gives a reason."""
    k = first_line - 2
    block = []
    while k >= 0 and lines[k].strip().startswith("//"):
        block.append(lines[k])
        k -= 1
    text = " ".join(block)
    at = text.find(MARK)
    return at >= 0 and len(text[at + len(MARK):].strip()) > 10


def file_reason(lines):
    block = []
    for line in lines:
        if line.strip().startswith("//"):
            block.append(line)
        elif block or line.strip():
            break
    return MARK in " ".join(block)


def read_known(path):
    known = {}
    if not path:
        return known
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or not parts[2].isdigit():
            sys.exit(f"check-sizes: {path}:{n}: expected 'PATH NAME LINES', got {line!r}")
        known[(parts[0], parts[1])] = int(parts[2])
    return known


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--all", action="store_true", help="list every long function and file, reasons or not")
    ap.add_argument("--known", help="long functions and files allowed while they grow no longer")
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-file", type=int, default=600)
    a = ap.parse_args()
    known = read_known(a.known)
    seen = set()
    listed, unexplained = [], 0

    def allowed(rel, name, length):
        seen.add((rel, name))
        return known.get((rel, name), -1) >= length

    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(a.root, folder)):
            for n in sorted(names):
                if not n.endswith((".cc", ".h", ".hpp", ".c")):
                    continue
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, a.root)
                text = open(path, encoding="utf-8", errors="replace").read()
                lines = text.split("\n")
                if len(lines) > a.max_file:
                    ok = file_reason(lines) or allowed(rel, "(file)", len(lines))
                    listed.append((len(lines), f"{rel}: file of {len(lines)} lines", ok))
                for name, sig_line, _, end in functions(text):
                    length = end - sig_line + 1
                    if length > a.max_function:
                        ok = has_reason(lines, sig_line) or allowed(rel, name, length)
                        listed.append((length, f"{rel}:{sig_line}: {name}: {length} lines", ok))
    listed.sort(key=lambda t: -t[0])
    for _, what, ok in listed:
        if not ok:
            unexplained += 1
            print(f"{what}, no '{MARK}' comment")
        elif a.all:
            print(f"{what} (with a reason)")
    for rel, name in sorted(set(known) - seen):
        print(f"check-sizes: {rel} {name} is no longer long: take it out of {a.known}", file=sys.stderr)
    if unexplained:
        print(f"check-sizes: {unexplained} long functions or files without a reason (functions over "
              f"{a.max_function} lines, files over {a.max_file}): split them, or say above them, after "
              f"'{MARK}', why each is one idea", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
