"""A workload's own FLOP count where it has no FLOP model (`flops.py`): `flops_per_item:` in
a command workload's matrix entry, a number or an arithmetic expression of its numeric
parameters, such as `6 * 124e6 * seq_len` or `2 * hidden ** 2 * layers * 3`.

The expression is parsed, never run: numbers, parameter names, + - * / // % **, unary
signs, parentheses, and min() and max() of two or more values. Its shape is checked once;
its value at each cell's own parameters (never at stand-ins). The worker records its value
on every epoch row, and the report's judge treats it as the workload's own claim
(report/judge.py: flop_count), holding its FLOP/s to the device's peak like any other.
"""

from __future__ import annotations

import ast
import contextlib
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

MAX_LENGTH = 500
MAX_EXPONENT = 64  # 2 ** 1e9 would hang the parser's caller
OPERATORS: dict[type[ast.AST], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow}
FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max}


class FlopClaimError(ValueError):
    """A `flops_per_item` that is no expression of the parameters, or no positive count."""


class FlopValueError(FlopClaimError):
    """An expression of the right kind whose value at some parameters is no real number
    (a negative number to a fractional power, an exponent past MAX_EXPONENT): judged at a
    cell's own values, never at the stand-in values of its shape's check."""


def names_in(claim: float | str) -> set[str]:
    """The parameter names `claim` reads; FlopClaimError where it is not an expression of
    the kind this module evaluates."""
    if not isinstance(claim, str):
        return set()
    tree = _parsed(claim)
    with contextlib.suppress(ZeroDivisionError, OverflowError, FlopValueError):
        _walk(tree, lambda name: 1.0)  # its shape; its values are checked per cell
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} - set(FUNCTIONS)


def flops_per_item(claim: float | str, params: Mapping[str, Any]) -> float:
    """`claim`'s value for one cell's `params`: a positive, finite count of FLOPs per item;
    FlopClaimError otherwise (a parameter it names that is not a number, a division by
    zero)."""
    if isinstance(claim, str):
        def value_of(name: str) -> float:
            value = params.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise FlopClaimError(f"{name!r} is not a numeric parameter of this workload")
            return float(value)

        try:
            value = _walk(_parsed(claim), value_of)
        except (ZeroDivisionError, OverflowError) as exc:
            raise FlopClaimError(f"{claim!r}: {exc}") from None
    else:
        value = float(claim)
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise FlopClaimError(f"flops_per_item is {value!r}: it must be a positive number")
    return float(value)


def _parsed(claim: str) -> ast.expr:
    if len(claim) > MAX_LENGTH:
        raise FlopClaimError(f"flops_per_item is longer than {MAX_LENGTH} characters")
    try:
        return ast.parse(claim.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise FlopClaimError(f"{claim!r} is not an arithmetic expression") from None


def _walk(node: ast.expr, value_of: Callable[[str], float]) -> float:
    """The value of `node`, reading names through `value_of`; FlopClaimError for anything
    beyond arithmetic."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name):
        return value_of(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _walk(node.operand, value_of)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _walk(node.left, value_of), _walk(node.right, value_of)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise FlopValueError(f"an exponent of {right:g} is beyond {MAX_EXPONENT}")
        value = OPERATORS[type(node.op)](left, right)
        if isinstance(value, complex):  # (-56) ** 0.5
            raise FlopValueError(f"{ast.unparse(node)!r} is no real number here ({left:g} "
                                 f"** {right:g})")
        return float(value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in FUNCTIONS and len(node.args) >= 2 and not node.keywords:
        return float(FUNCTIONS[node.func.id](*(_walk(a, value_of) for a in node.args)))
    raise FlopClaimError(f"{ast.unparse(node)!r}: flops_per_item takes numbers, parameter names, "
                         "+ - * / // % **, parentheses, min() and max() of two or more values")
