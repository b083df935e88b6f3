"""Every import between modules of autotune/, read with ast: module-level, under TYPE_CHECKING,
inside functions, relative or absolute.

    python3 tests/import_graph.py [--packages]

tests/unit/test_floors.py checks this graph against the floor order (no cycle, no import of a
higher floor); run this to see the arrows themselves. tests/benchmarks/test_benchmark_floors.py
reads autotune/ and benchmarks/ as one graph (`imports(autotune, benchmarks)`).
"""
from __future__ import annotations

import argparse
import ast
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "autotune"


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """{dotted module name: file}; a package is named by its __init__.py."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports(root: Path = PACKAGE, *more: Path) -> dict[str, set[str]]:
    """{module: the modules of the same trees it imports} (of `root` alone, or of it and `more`
    read as one graph). `from .pkg import name` counts as an import of pkg.name where that is a
    module, of pkg otherwise; an import of the module itself (a package naming its own submodule
    through __init__) is left out."""
    names = {n: p for r in (root, *more) for n, p in module_names(r).items()}
    tops = {r.name for r in (root, *more)}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = set()
        for node in ast.walk(tree):
            for target in _targets(node, name, path.name == "__init__.py", tops):
                while target not in names and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in names and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def _targets(node: ast.AST, module: str, is_package: bool, tops: set[str]) -> Iterable[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] in tops]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    if origin.split(".")[0] not in tops:
        return []
    return [f"{origin}.{a.name}" for a in node.names]


def unit(module: str) -> str:
    """The floor unit a module belongs to: its package below autotune/ (autotune.plan.build ->
    plan), a top-level module by its own name (autotune.config -> config), the root package
    itself as `autotune`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", action="store_true", help="arrows between floor units only")
    args = parser.parse_args(argv)
    graph = imports()
    if args.packages:
        arrows = {(unit(a), unit(b)) for a, bs in graph.items() for b in bs if unit(a) != unit(b)}
        for a, b in sorted(arrows):
            print(f"{a} -> {b}")
    else:
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f"{a} -> {b}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
