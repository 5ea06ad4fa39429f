#!/usr/bin/env python3
"""Functions longer than 80 lines in the product's C++ sources (storage/, access/, messages/,
actors/, runtime/, tools/, workload/, include/, examples/), outside the allowlist
tests/lint/long_functions.txt. Fails (exit 1) naming each one, and also when an allowlisted
function is gone or shorter: the allowlist only shrinks.

A function's length is the number of lines from its opening brace to its closing brace;
lambdas and local classes count toward the function that contains them. The scan is a
brace matcher over the source with comments, string and character literals removed: a
`{` outside any function opens a function when the text before it (since the last `;`,
`{` or `}`) ends in a parameter list, and is not a namespace, class, enum or initializer.

    usage: function_length.py [--root DIR] [--limit 80] [--list]
      --list  print every function over the limit (the allowlist's format) and exit 0
"""
import argparse
import os
import re
import sys

DIRS = ["storage", "access", "messages", "actors", "runtime", "tools", "workload", "include", "examples"]
NOT_FUNCTION = re.compile(r"\b(namespace|class|struct|union|enum)\b|=\s*$|^\s*extern\s+\"")
ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "long_functions.txt")


def strip(text):
    """The source with comments and literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == "'" and i > 0 and text[i - 1].isalnum():
            out.append(c)  # a digit separator (86'400'000), not a character literal
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length) of every function defined in `path`."""
    text = strip(open(path, encoding="utf-8").read())
    found, stack, header, line = [], [], "", 1
    for c in text:
        if c == "\n":
            line += 1
        if c == "{":
            in_function = any(kind == "function" for kind, _, _ in stack)
            head = header.strip()
            if in_function:
                kind = "block"
            elif head.endswith(")") or re.search(r"\)\s*(const|noexcept|override|final|->.*)*\s*$", head) \
                    or re.search(r"\)\s*:\s*.*$", head, re.S):
                kind = "function" if not NOT_FUNCTION.search(head.split("(")[0] + "(") else "other"
            else:
                kind = "other"
            name = ""
            if kind == "function":
                m = re.search(r"([~\w:<>]+)\s*\(", head.split(")")[0] + ")")
                name = m.group(1) if m else "?"
            stack.append((kind, line, name))
            header = ""
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    found.append((name, start, line - start + 1))
            header = ""
        elif c == ";":
            header = ""
        else:
            header += c
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.join(os.path.dirname(ALLOWLIST), "..", ".."))
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    long = {}
    for top in DIRS:
        for directory, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp")):
                    path = os.path.join(directory, f)
                    for name, start, length in functions(path):
                        if length > args.limit:
                            long[f"{os.path.relpath(path, root)} {name}"] = (start, length)
    if args.list:
        for key, (start, length) in sorted(long.items()):
            print(f"{key}  # {length} lines at line {start}")
        return 0
    allowed = {}
    for entry in open(ALLOWLIST, encoding="utf-8"):
        entry = entry.split("#")[0].strip()
        if entry:
            allowed[entry] = True
    bad = 0
    for key, (start, length) in sorted(long.items()):
        if key not in allowed:
            file, name = key.split(" ")
            print(f"{file}:{start}: {name} is {length} lines (limit {args.limit}): split it")
            bad += 1
    for key in sorted(allowed):
        if key not in long:
            print(f"{key} is allowlisted but no longer over {args.limit} lines: remove it from "
                  f"tests/lint/long_functions.txt")
            bad += 1
    print(f"{len(long)} functions over {args.limit} lines, {len(allowed)} allowlisted, "
          f"{bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
