#!/usr/bin/env python3
"""Include circles between the units of the C sources under user/.

A unit is DIR/foo: user/DIR/foo.c and user/DIR/foo.h together (a .c or a
.h without its pair is a unit on its own). A unit includes another when its
.c or its .h has `#include "X"` with X a project header, "dir/foo.h" style,
found under the source root (the build's -Iuser) or beside the including
file. System headers (<...>) and headers outside the root (the BPF
skeletons, include/) are not units.

The check: every strongly connected component of the unit include graph
(the units that reach each other through includes) has at most --max units,
2 by default (foo.h and bar.h may know each other; three or more in a circle
is a layer that has lost its direction). Each component over the limit is
printed with its members and the includes between them; the exit status is
1 when there is one, 0 when there is none, 2 on a usage error.

usage: tools/includes.py [--root user] [--max N] [--all] [--edges]
  --root DIR  the source root, relative to the repository (default user)
  --max N     the largest component allowed (default 2)
  --all       print every component of two or more units, not only those
              over the limit
  --edges     print the whole unit graph, one "unit -> unit" a line, and
              exit 0
Run from anywhere: paths are taken from the repository root, the parent of
tools/. tests/style.sh runs it (make test).
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def scan(root):
    """Map each unit to the set of units it includes, and each unit to its
    files."""
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith(('.c', '.h')):
                p = os.path.relpath(os.path.join(d, n), root)
                files.setdefault(os.path.splitext(p)[0], []).append(p)
    graph = {u: set() for u in files}
    edges = {}  # (from, to) -> ["file includes header", ...]
    for u, paths in files.items():
        for p in sorted(paths):
            with open(os.path.join(root, p), encoding='utf-8', errors='replace') as f:
                for line in f:
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    here = os.path.normpath(os.path.join(os.path.dirname(p), inc))
                    cands = [os.path.normpath(inc), here]
                    target = next((c for c in cands
                                   if os.path.isfile(os.path.join(root, c))), None)
                    if target is None:
                        continue
                    v = os.path.splitext(target)[0]
                    if v == u or v not in graph:
                        continue
                    graph[u].add(v)
                    edges.setdefault((u, v), []).append(f'{p} includes "{inc}"')
    return graph, edges


def components(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        epilog='A unit is DIR/foo (foo.c + foo.h); a component over --max '
        'units fails (exit 1), naming its members.')
    ap.add_argument('--root', default='user')
    ap.add_argument('--max', type=int, default=2)
    ap.add_argument('--all', action='store_true')
    ap.add_argument('--edges', action='store_true')
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', a.root)
    if not os.path.isdir(root):
        print(f'includes: no directory {a.root}', file=sys.stderr)
        return 2
    graph, edges = scan(root)
    if a.edges:
        for u in sorted(graph):
            for v in sorted(graph[u]):
                print(f'{u} -> {v}')
        return 0
    comps = sorted((c for c in components(graph) if len(c) > 1),
                   key=lambda c: (-len(c), c))
    bad = [c for c in comps if len(c) > a.max]
    for c in comps if a.all else bad:
        over = len(c) > a.max
        print(f'{"circle" if over else "pair"} of {len(c)} units: {" ".join(c)}')
        if over:
            members = set(c)
            for u in c:
                for v in sorted(graph[u] & members):
                    print(f'  {u} -> {v}: {"; ".join(edges[(u, v)])}')
    print(f'includes: {len(graph)} units, {len(bad)} circle(s) of more than '
          f'{a.max} units')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
