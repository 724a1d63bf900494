#!/usr/bin/env python3
"""code_shape.py: measures the shape of a source folder: long functions, the fields of a
struct, and loops in the calls between its files.

    scripts/code_shape.py [--dir src/engine] [--max-lines N] [--struct NAME[:MAX]]
                          [--acyclic]

Prints every function of the folder's .c files longer than --max-lines (default 80; the
lines from the signature to the closing brace), the number of fields of each --struct (its
definition found in the folder or include/), and the strongly connected components of the
file-level call graph (file A calls a function defined in file B) with more than one file.
Exits 1 when a limit given is exceeded (a function over --max-lines, a struct over MAX
fields, a loop with --acyclic), else 0; 2 on a usage error.  Standard library only.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layering import DEF_RE, CALL_RE, DECL_PREFIX_RE, strip_comments, strip_preprocessor  # noqa: E402


def functions(text):
    """(name, first line, line count) of each function defined at file scope."""
    out = []
    for m in DEF_RE.finditer(text):
        name = m.group(2)
        if name in ("if", "for", "while", "switch", "return"):
            continue
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        start = text.count("\n", 0, m.start(2)) + 1
        end = text.count("\n", 0, i) + 1
        out.append((name, start, end - start + 1, m.start(), i))
    return out


def struct_fields(text, name):
    """The number of fields (declarators) of struct NAME's definition in text, or None."""
    m = re.search(r"struct\s+" + re.escape(name) + r"\s*\{", text)
    if not m:
        m = re.search(r"typedef\s+struct\s*\w*\s*\{", text)
        if not m or not re.search(r"\}\s*" + re.escape(name) + r"\s*;", text[m.end():]):
            return None
    depth, i = 1, m.end()
    body_start = i
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    body = text[body_start:i - 1]
    # Flatten nested struct/union bodies into one declaration each.
    while True:
        n = re.sub(r"\{[^{}]*\}", " ", body)
        if n == body:
            break
        body = n
    count = 0
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        # int a, b[3], *c;  -> 3 fields (commas outside brackets)
        count += 1 + len(re.findall(r",(?![^\[\(]*[\]\)])", decl))
    return count


def scc(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder, max_lines, structs, acyclic = "src/engine", 80, [], False
    args = argv[1:]
    limits_given = False
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--acyclic":
            acyclic = limits_given = True
            continue
        if not args:
            print(f"code_shape: {a} needs a value", file=sys.stderr)
            return 2
        v = args.pop(0)
        if a == "--dir":
            folder = v
        elif a == "--max-lines":
            max_lines, limits_given = int(v), True
        elif a == "--struct":
            name, _, mx = v.partition(":")
            structs.append((name, int(mx) if mx else None))
            limits_given = limits_given or bool(mx)
        else:
            print(f"code_shape: unknown option {a}", file=sys.stderr)
            return 2
    base = os.path.join(root, folder)
    if not os.path.isdir(base):
        print(f"code_shape: {folder}: no such folder", file=sys.stderr)
        return 2
    texts = {}
    for f in sorted(os.listdir(base)):
        if f.endswith((".c", ".h")):
            with open(os.path.join(base, f), encoding="utf-8", errors="replace") as fh:
                texts[f] = strip_preprocessor(strip_comments(fh.read(), keep_strings=False))
    bad = 0
    defined, long_fns = {}, []
    for f, t in texts.items():
        if not f.endswith(".c"):
            continue
        for name, line, n, _, _ in functions(t):
            defined.setdefault(name, f)
            if n > max_lines:
                long_fns.append((n, f"{folder}/{f}:{line}", name))
    print(f"functions over {max_lines} lines in {folder}: {len(long_fns)}")
    for n, where, name in sorted(long_fns, reverse=True):
        print(f"  {n:4d}  {name}  ({where})")
    if long_fns and limits_given:
        bad = 1
    for name, mx in structs:
        count = None
        for f, t in texts.items():
            count = struct_fields(t, name)
            if count is not None:
                break
        if count is None:
            inc = os.path.join(root, "include")
            for dp, _, fs in os.walk(inc):
                for f in fs:
                    with open(os.path.join(dp, f), encoding="utf-8", errors="replace") as fh:
                        count = struct_fields(strip_comments(fh.read(), False), name)
                    if count is not None:
                        break
                if count is not None:
                    break
        if count is None:
            print(f"code_shape: struct {name}: no definition found", file=sys.stderr)
            return 2
        print(f"struct {name}: {count} fields" + (f" (at most {mx})" if mx else ""))
        if mx is not None and count > mx:
            bad = 1
    graph = {f: set() for f in texts if f.endswith(".c")}
    for f, t in texts.items():
        if not f.endswith(".c"):
            continue
        for line in t.split("\n"):
            for m in CALL_RE.finditer(line):
                if DECL_PREFIX_RE.match(line[:m.start()]):
                    continue
                g = defined.get(m.group(1))
                if g and g != f:
                    graph[f].add(g)
    loops = [c for c in scc(graph) if len(c) > 1]
    print(f"loops in the calls between {folder}'s files: {len(loops)}")
    for c in loops:
        print("  " + " <-> ".join(c))
    if loops and acyclic:
        bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))
