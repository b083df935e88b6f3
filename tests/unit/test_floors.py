"""Imports in autotune/ point down (ARCHITECTURE.md, "Floors: imports point down").

Every import counts: at module level, under TYPE_CHECKING and inside functions
(tests/import_graph.py reads them with ast). Two rules:
- no cycle, neither between modules nor between the units of FLOORS;
- no unit imports a unit on a higher floor. Units on one floor may import each other (without a
  cycle); a fact that two floors need lives on the lower one.

FLOORS is the one written-down floor order (ARCHITECTURE.md mirrors it). A unit is a package
below autotune/ (plan, run, ...), a top-level module by its name (config, tune, ...), or the root
package `autotune` (its __init__.py). A new unit gets a floor here before it can be imported.
"""
from __future__ import annotations

import pytest

from import_graph import cycles, imports, unit

# Lowest first.
FLOORS: tuple[tuple[str, ...], ...] = (
    # the ground floor: errors, the knob table, the shared vocabulary, small leaf utilities
    ("errors", "config", "result", "training", "util", "client", "autotune"),
    ("probe", "comm", "bind"),                 # the machine; communication backends
    ("plan", "space", "script"),               # pure: plans, feasibility, spaces, a script's command
    ("measure",),                              # statistics and observation of what ran
    ("run", "worker"),                         # spawn and watch ranks; what runs inside one
    ("study", "progress"),                     # storage, records, attributes; progress events
    ("quality",),                              # the accuracy side: evidence, gate, verdict
    ("search",),                               # the loop, its budget and locks
    ("recommend",),                            # verified winner
    ("dashboard", "export", "reporting", "display"),  # what the user looks at, copies, reads
    ("commands",),                             # each command composed: search, launch, verify, ...
    ("tune", "workloads"),                     # the entry points, one per command; the registry
    ("cli", "__main__"),                       # parse, call, print
)

# Upward imports still to fix, as (importer, imported) modules. This list only shrinks: a fixed
# entry must be removed (test_allowances_are_still_needed), and at the end it is empty.
ALLOWED_UPWARD: set[tuple[str, str]] = set()

# Module cycles still to break (each as its set of modules); likewise only shrinks.
KNOWN_CYCLES: list[set[str]] = []

FLOOR_OF = {name: level for level, floor in enumerate(FLOORS) for name in floor}
GRAPH = imports()


def _upward() -> set[tuple[str, str]]:
    return {(a, b) for a, targets in GRAPH.items() for b in targets
            if FLOOR_OF[unit(b)] > FLOOR_OF[unit(a)]}


def _without_allowed() -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in ALLOWED_UPWARD} for a, targets in GRAPH.items()}


def test_every_unit_has_a_floor():
    missing = sorted({unit(m) for m in GRAPH} - set(FLOOR_OF))
    assert not missing, f"give these a floor in FLOORS (tests/unit/test_floors.py): {missing}"
    assert len(FLOOR_OF) == sum(len(f) for f in FLOORS), "a unit is named on two floors"


def test_no_unit_imports_a_higher_floor():
    new = sorted(_upward() - ALLOWED_UPWARD)
    assert not new, "imports of a higher floor (move the shared fact down instead):\n  " + \
        "\n  ".join(f"{a} (floor {FLOOR_OF[unit(a)]}) -> {b} (floor {FLOOR_OF[unit(b)]})"
                    for a, b in new)


def test_no_module_cycle():
    found = [set(c) for c in cycles(_without_allowed())]
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert not new, f"import cycles between modules: {new}"


def test_no_unit_cycle():
    graph = _without_allowed()
    units: dict[str, set[str]] = {}
    for a, targets in graph.items():
        units.setdefault(unit(a), set()).update(unit(b) for b in targets if unit(b) != unit(a))
    assert not cycles(units), f"import cycles between packages: {cycles(units)}"


def test_allowances_are_still_needed():
    fixed = sorted(ALLOWED_UPWARD - _upward())
    assert not fixed, f"fixed upward imports: remove them from ALLOWED_UPWARD: {fixed}"
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in [set(x) for x in cycles(GRAPH)]]
    assert not stale, f"broken cycles: remove them from KNOWN_CYCLES: {stale}"


@pytest.mark.parametrize("source, expected", [
    ("from .b import x\n", {"pkg.a": {"pkg.b"}}),
    ("def f():\n    from . import b\n", {"pkg.a": {"pkg.b"}}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.b\n", {"pkg.a": {"pkg.b"}}),
    ("from pkg import b as B\n", {"pkg.a": {"pkg.b"}}),
    ("import os\n", {"pkg.a": set()}),
])
def test_every_kind_of_import_is_read(tmp_path, source, expected):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text(source)
    (root / "b.py").write_text("x = 1\n")
    graph = imports(root)
    assert {k: v for k, v in graph.items() if k == "pkg.a"} == expected
    assert cycles({"a": {"b"}, "b": {"c", "a"}, "c": set()}) == [["a", "b"]]


# The CLI parses, calls the library's entry points and prints (ARCHITECTURE.md, "Thin CLI"): it
# reaches the library through a few modules, never the stages below them.
MAX_CLI_LIBRARY_MODULES = 6


def test_the_cli_imports_at_most_six_library_modules():
    used = sorted({b for a, targets in GRAPH.items() if unit(a) == "cli"
                   for b in targets if unit(b) != "cli"})
    assert len(used) <= MAX_CLI_LIBRARY_MODULES, (
        f"autotune/cli/ imports {len(used)} library modules (at most "
        f"{MAX_CLI_LIBRARY_MODULES}): {used}; compose the command in the library instead")
