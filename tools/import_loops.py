"""Import loops among the project's modules, imports inside functions included.

Reads the source (nothing is imported) of ``shared/ctxmgmt``, ``langchain_ctxmgmt`` and
``llamaindex_ctxmgmt`` and draws an arrow A -> B for every import of B in A, wherever it
stands: at the top, inside a function or under ``if TYPE_CHECKING:``. Importing ``a.b.c``
also runs ``a/b/__init__.py``, so the arrow goes to each package on the way that A is not
itself inside (the hidden loop through a package's ``__init__``). A loop is a set of two or
more modules that reach each other (a strongly connected component).

Usage: ``python tools/import_loops.py [--top-level-only]``; prints each loop with the import
lines that close it and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"ctxmgmt": ROOT / "shared" / "ctxmgmt", "langchain_ctxmgmt": ROOT / "langchain_ctxmgmt"}
PACKAGES["llamaindex_ctxmgmt"] = ROOT / "llamaindex_ctxmgmt"


def modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    out: dict[str, Path] = {}
    for name, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(tree: ast.AST, top_level_only: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Import statements with whether each runs inside a function."""

    def walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_function
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if not (inner and top_level_only):
                yield from walk(child, inner)

    return walk(tree, False)


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict[str, Path]
) -> set[str]:
    """Modules of the project that ``node`` (in ``module``) imports by name."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor if is_package else anchor[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    out = set()
    for alias in node.names:
        full = f"{base}.{alias.name}"
        out.add(full if full in known else base)
    return out


def graph(top_level_only: bool = False) -> dict[str, dict[str, list[str]]]:
    """``{importer: {imported: [where, ...]}}`` over the project's modules."""
    known = modules()
    edges: dict[str, dict[str, list[str]]] = {m: {} for m in known}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = module.split(".")
        is_package = path.name == "__init__.py"
        for node, in_function in _imports(tree, top_level_only):
            for target in _targets(node, module, is_package, known):
                parts = target.split(".")
                # importing a.b.c runs a, a.b and a.b.c: each package the importer is not inside
                for depth in range(1, len(parts) + 1):
                    name = ".".join(parts[:depth])
                    if name not in known or name == module or own[:depth] == parts[:depth]:
                        continue
                    where = f"{path.relative_to(ROOT)}:{node.lineno}" + (
                        " (in a function)" if in_function else ""
                    )
                    edges[module].setdefault(name, []).append(where)
    return edges


def loops(edges: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top-level-only", action="store_true", help="skip imports inside functions")
    args = parser.parse_args(argv)
    edges = graph(top_level_only=args.top_level_only)
    found = loops(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} import arrows, {len(found)} loops")
    for k, component in enumerate(found, 1):
        print(f"loop {k}: {', '.join(component)}")
        members = set(component)
        for a in component:
            for b, where in sorted(edges[a].items()):
                if b in members:
                    print(f"  {a} -> {b}: {', '.join(where)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
