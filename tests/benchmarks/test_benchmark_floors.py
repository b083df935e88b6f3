"""Imports in benchmarks/ point down, and no import goes in a circle, in autotune/ or in
benchmarks/ (issue 55).

The graph is tests/import_graph.py's (ast: every import, at module level, under TYPE_CHECKING and
inside functions), read on both trees. Four rules:
- no cycle between the modules of autotune/, nor between those of benchmarks/;
- autotune/ imports nothing of benchmarks/, so no circle can run through both;
- no cycle between the packages of benchmarks/;
- a package of benchmarks/ imports only its own floor or lower ones. FLOORS is the written-down
  order (benchmarks/__init__.py says it in words); a new package gets a floor here first.
"""
from __future__ import annotations

import ast

from import_graph import cycles, imports, unit
from paths import REPO

# Lowest first.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("benchmarks", "workloads"),   # where things are, the old names; what the ranks run
    ("landscapes",),               # a machine's table and its file, recorded or modelled
    ("replay", "timed"),           # the search replayed on a table; one mechanism in real trials
    ("accuracy",),                 # the accuracy side (its results name the machine as timed's do)
    ("device",),                   # the GPU machine's run: records a landscape, times windows
)
FLOOR_OF = {name: level for level, floor in enumerate(FLOORS) for name in floor}
AUTOTUNE = imports(REPO / "autotune")
BENCHMARKS = imports(REPO / "benchmarks")


def test_no_module_cycle_in_autotune_or_benchmarks():
    assert cycles(AUTOTUNE) == []
    assert cycles(BENCHMARKS) == []


def test_autotune_imports_nothing_of_benchmarks():
    found = []
    for path in sorted((REPO / "autotune").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(REPO)}: {n}" for n in names
                      if n.split(".")[0] == "benchmarks"]
    assert not found, found


def test_every_package_has_a_floor():
    missing = sorted({unit(m) for m in BENCHMARKS} - set(FLOOR_OF))
    assert not missing, f"give these a floor (tests/benchmarks/test_benchmark_floors.py): {missing}"


def test_no_package_imports_a_higher_floor_or_goes_in_a_circle():
    up = sorted(f"{a} -> {b}" for a, targets in BENCHMARKS.items() for b in targets
                if FLOOR_OF[unit(b)] > FLOOR_OF[unit(a)])
    assert not up, "imports of a higher floor (move the shared fact down instead):\n  " + \
        "\n  ".join(up)
    packages: dict[str, set[str]] = {}
    for a, targets in BENCHMARKS.items():
        packages.setdefault(unit(a), set()).update(unit(b) for b in targets if unit(b) != unit(a))
    assert cycles(packages) == []
