"""Every function in autotune/ with its length in lines (end_lineno - lineno + 1), longest first.

    python3 tests/function_lengths.py [--top N]

A function a reader must hold in their head at once stays short (ARCHITECTURE.md: "Functions
are named steps"); tests/unit/test_function_lengths.py fails on any over its limit.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "autotune"


def function_lengths(root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(lines, "path:line qualified.name") of every def and async def, longest first."""
    found: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        _walk(tree, [], path.relative_to(root.parent).as_posix(), found)
    return sorted(found, key=lambda f: (-f[0], f[1]))


def _walk(node: ast.AST, names: list[str], where: str, found: list[tuple[int, str]]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = child.end_lineno - child.lineno + 1
            found.append((lines, f"{where}:{child.lineno} {'.'.join(names + [child.name])}"))
            _walk(child, names + [child.name], where, found)
        elif isinstance(child, ast.ClassDef):
            _walk(child, names + [child.name], where, found)
        else:
            _walk(child, names, where, found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=None, help="print only the N longest")
    args = parser.parse_args(argv)
    for lines, name in function_lengths()[:args.top]:
        print(f"{lines:5d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
