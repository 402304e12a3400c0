#!/usr/bin/env python3
"""Summarizes `perf script -F comm,tid,ip,sym` output (from `perf record --call-graph dwarf`)
as a call tree under every frame whose symbol matches ROOT: inclusive samples of each callee
(inlined frames included), to DEPTH levels, as shares of the root's samples.

    perf script -i perf.data -F comm,tid,ip,sym > out.script
    perf-tree.py out.script 'MemoryStore.*Store.*6create' 3 [ANCESTOR]

With ANCESTOR, only samples with a frame matching it above ROOT count.
"""
import re
import subprocess
import sys
from collections import Counter, defaultdict


def samples(path):
    stack = []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if stack:
                    yield stack
                stack = []
            elif line.startswith("\t") or line.startswith(" "):
                parts = line.strip().split(None, 1)
                stack.append(parts[1] if len(parts) > 1 else "?")
    if stack:
        yield stack


def short(name, cache={}):
    if name not in cache:
        try:
            out = subprocess.run(["c++filt"], input=name, capture_output=True, text=True).stdout.strip()
        except OSError:
            out = name
        out = re.sub(r"::h[0-9a-f]{16}", "", out)
        out = re.sub(r"\{\{closure\}\}|\{closure#0\}|\{async_fn#0\}|\{async_block#0\}", "{}", out)
        cache[name] = out[:150]
    return cache[name]


def main():
    path, root, depth = sys.argv[1], re.compile(sys.argv[2]), int(sys.argv[3])
    ancestor = re.compile(sys.argv[4]) if len(sys.argv) > 4 else None
    total = 0
    tree = defaultdict(Counter)  # path tuple -> Counter of child
    for stack in samples(path):
        frames = list(reversed(stack))  # root first
        at = next((i for i, f in enumerate(frames) if root.search(f)), None)
        if at is None:
            continue
        if ancestor and not any(ancestor.search(f) for f in frames[:at]):
            continue
        total += 1
        below = [short(f) for f in frames[at + 1 :]]
        # Collapse consecutive duplicates (inlined wrappers of the same name).
        path_ = ()
        for name in below[:depth]:
            tree[path_][name] += 1
            path_ = path_ + (name,)
        if len(below) == 0:
            tree[()]["<self>"] += 1

    print(f"{total} samples under /{sys.argv[2]}/")

    def show(prefix, level):
        for name, n in tree[prefix].most_common():
            share = 100.0 * n / max(total, 1)
            if share < 2.0:
                continue
            print(f"{'  ' * level}{share:5.1f}%  {name}")
            if level + 1 < depth:
                show(prefix + (name,), level + 1)

    show((), 0)


main()
