"""Imports in benchmarks/ point down, and no import goes in a circle, in autotune/ or in
benchmarks/ (issue 55).

The graph is tests/import_graph.py's (ast: every import, at module level, under TYPE_CHECKING and
inside functions), of both trees read as one. Four rules:
- no cycle between modules, within either tree or through both;
- autotune/ imports nothing of benchmarks/;
- no cycle between the packages of benchmarks/;
- a package of benchmarks/ imports only its own floor or lower ones. FLOORS is the written-down
  order (benchmarks/__init__.py says it in words); a new package gets a floor here first.
"""
from __future__ import annotations

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
GRAPH = imports(REPO / "autotune", REPO / "benchmarks")
BENCHMARKS = {a: {b for b in targets if b.split(".")[0] == "benchmarks"}
              for a, targets in GRAPH.items() if a.split(".")[0] == "benchmarks"}


def test_no_module_cycle_in_autotune_or_benchmarks():
    assert any(m.startswith("autotune.") for m in GRAPH) and any(m.startswith("benchmarks.")
                                                                 for m in GRAPH)
    assert cycles(GRAPH) == []


def test_autotune_imports_nothing_of_benchmarks():
    found = sorted(f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets
                   if a.split(".")[0] == "autotune" and b.split(".")[0] == "benchmarks")
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
