"""A tiny, safe expression language for search spaces: parsed with `ast`, never `eval()`-ed.

Two uses share it: candidate values (`divisors(usable_cores)`, `range(1, cores_per_node)`) and
constraints (`threads * nproc <= usable_cores`). Every expression is checked once, when the file
is loaded, against the names and functions it may use and their kinds, so a typo fails before
the first trial rather than half an hour into a study.
"""
from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Any

# Kinds an expression can have. "strs"/"ints" are lists spliced into a knob's choices.
INT, INTS, STRS, STR, BOOL = "int", "ints", "strs", "str", "bool"
_KIND_WORDS = {INT: "an integer", INTS: "a list of integers", STRS: "a list of names",
               STR: "a text value", BOOL: "true/false"}


class ExprError(ValueError):
    """The expression is invalid; the message says why (callers add file and key)."""


def _divisors(n: int) -> tuple[int, ...]:
    if n < 1:
        raise ExprError(f"divisors() needs a positive integer, got {n}")
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def _range(a: int, b: int) -> tuple[int, ...]:
    return tuple(range(a, b + 1))  # inclusive: "1 to cores_per_node" is what people mean


def _powers_of_two(n: int) -> tuple[int, ...]:
    out, p = [], 1
    while p <= n:
        out.append(p)
        p *= 2
    return tuple(out)


def _splittable(batch: int, ranks: int) -> int:
    """`batch` when `ranks` can share it equally, else the next batch they can, in whole multiples
    of 16 samples (48 for 3 ranks from 32). A global batch is split evenly over the ranks, so a
    machine with 3 or 6 NUMA nodes (SNC3) has no layout using every node at 32, 64 or 128."""
    if batch < 1 or ranks < 1:
        raise ExprError(f"splittable() needs positive integers, got {batch}, {ranks}")
    if batch % ranks == 0:
        return batch
    step = 16 * ranks // math.gcd(16, ranks)
    return -(-batch // step) * step


# name -> (number of arguments, implementation, result kind); every argument is an integer.
FUNCTIONS: dict[str, tuple[int, Callable[..., Any], str]] = {
    "divisors": (1, _divisors, INTS),
    "range": (2, _range, INTS),
    "powers_of_two": (1, _powers_of_two, INTS),
    "splittable": (2, _splittable, INT),
    "min": (2, min, INT),
    "max": (2, max, INT),
}

_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
          ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b}
_COMPARE = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
            ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
            ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_OP_TEXT = {ast.Div: "/ (use // for whole numbers)", ast.Mod: "%", ast.Pow: "**",
            ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
            ast.MatMult: "@", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


def parse(text: str) -> ast.expr:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"{text!r} is not a valid expression ({exc.msg})") from None


def names_in(node: ast.AST) -> set[str]:
    """The names an expression reads (function names excluded)."""
    funcs = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in funcs}


def check(node: ast.expr, kinds: Mapping[str, str], *, text: str, compare: bool = False) -> str:
    """Return the kind of `node`, or raise ExprError naming the first thing not allowed.

    `kinds` maps every allowed name to its kind; `compare` allows comparisons, `and`/`or`/`not`
    and quoted text (constraints), which candidate values have no use for.
    """
    return _Checker(kinds, text, compare).kind(node)


class _Checker:
    """`check`'s walk: one method per kind of node."""

    def __init__(self, kinds: Mapping[str, str], text: str, compare: bool) -> None:
        self.kinds, self.text, self.compare = kinds, text, compare

    def kind(self, n: ast.expr) -> str:
        text, compare = self.text, self.compare
        if isinstance(n, ast.Constant):
            return self.constant(n)
        if isinstance(n, ast.Name):
            if n.id not in self.kinds:
                raise ExprError(f"unknown name {n.id!r} in {text!r}; valid names: "
                                f"{', '.join(self.kinds)}")
            return self.kinds[n.id]
        if isinstance(n, ast.Call):
            return self.call(n)
        if isinstance(n, ast.BinOp):
            if type(n.op) not in _ARITH:
                raise ExprError(f"operator {_OP_TEXT.get(type(n.op), '?')} is not allowed in "
                                f"{text!r}; use + - * //")
            if self.kind(n.left) != INT or self.kind(n.right) != INT:
                raise ExprError(f"arithmetic needs integers in {text!r}: {ast.unparse(n)!r}")
            return INT
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and \
                self.kind(n.operand) == INT:
            return INT
        if compare and isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            self.kind(n.operand)
            return BOOL
        if compare and isinstance(n, ast.BoolOp):
            for v in n.values:
                self.kind(v)
            return BOOL
        if compare and isinstance(n, ast.Compare):
            return self.comparison(n)
        raise ExprError(f"{ast.unparse(n)!r} is not allowed in {text!r}; use names, integers, "
                        f"+ - * //, and the functions {', '.join(FUNCTIONS)}"
                        + ("; compare with <= < == >= > != and combine with and/or/not"
                           if compare else ""))

    def constant(self, n: ast.Constant) -> str:
        if isinstance(n.value, bool) and self.compare:
            return BOOL
        if isinstance(n.value, int) and not isinstance(n.value, bool):
            return INT
        if isinstance(n.value, str) and self.compare:
            return STR
        raise ExprError(f"constant {n.value!r} is not allowed in {self.text!r}")

    def call(self, n: ast.Call) -> str:
        text = self.text
        fname = n.func.id if isinstance(n.func, ast.Name) else ast.unparse(n.func)
        if fname not in FUNCTIONS:
            raise ExprError(f"unknown function {fname!r} in {text!r}; "
                            f"valid functions: {', '.join(FUNCTIONS)}")
        nargs, _, result = FUNCTIONS[fname]
        if n.keywords or len(n.args) != nargs:
            raise ExprError(f"{fname}() takes {nargs} argument(s) in {text!r}")
        for arg in n.args:
            if self.kind(arg) != INT:
                raise ExprError(f"{fname}() needs integer arguments in {text!r}, "
                                f"got {ast.unparse(arg)!r}")
        return result

    def comparison(self, n: ast.Compare) -> str:
        left = self.kind(n.left)
        for op, comp in zip(n.ops, n.comparators):
            if type(op) not in _COMPARE:
                raise ExprError(f"comparison {_OP_TEXT.get(type(op), '?')!r} is not allowed "
                                f"in {self.text!r}; use <= < == >= > !=")
            right = self.kind(comp)
            if isinstance(op, _ORDERING) and (left != INT or right != INT):
                raise ExprError(f"<, <=, >, >= compare integers in {self.text!r}")
            left = right
        return BOOL


def evaluate(node: ast.expr, env: Mapping[str, Any]) -> Any:
    """Evaluate a node that `check` accepted; raises ExprError on runtime problems."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Call):
        _, fn, _ = FUNCTIONS[node.func.id]  # type: ignore[attr-defined]
        return fn(*(evaluate(a, env) for a in node.args))
    if isinstance(node, ast.BinOp):
        left, right = evaluate(node.left, env), evaluate(node.right, env)
        if isinstance(node.op, ast.FloorDiv) and right == 0:
            raise ExprError(f"division by zero in {ast.unparse(node)!r}")
        return _ARITH[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        value = evaluate(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else not value
    if isinstance(node, ast.BoolOp):
        values = (evaluate(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = evaluate(comp, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise ExprError(f"cannot evaluate {ast.unparse(node)!r}")  # pragma: no cover - check() bars it


def describe(kind: str) -> str:
    return _KIND_WORDS.get(kind, kind)
