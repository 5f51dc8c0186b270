"""Whether a value read from JSON is of the type a record declares, said as a reason: how
the worker's lines are read leniently (records.py: a field of the wrong type is left out
and named, the rest of its record kept). Stdlib only.
"""

from __future__ import annotations

import types
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin


def mismatch(value: Any, hint: Any) -> str | None:
    """Why `value` (from JSON) is not of the type `hint`, or None where it is. Types as the
    records declare them: str, int, float (an int is one), bool, an Enum, a Literal,
    `X | None`, dict[str, X], list[X]."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        whys = [mismatch(value, arg) for arg in args if arg is not type(None)]
        return None if None in whys else whys[0]
    if origin is Literal:
        return None if value in args else f"is {value!r}, not one of {', '.join(map(repr, args))}"
    if origin is dict:
        if not isinstance(value, dict):
            return f"is {_what(value)}, not an object"
        for key, item in value.items():
            if why := mismatch(item, args[1]):
                return f"has {key!r} that {why}"
        return None
    if origin is list:
        if not isinstance(value, list):
            return f"is {_what(value)}, not a list"
        for index, item in enumerate(value):
            if why := mismatch(item, args[0]):
                return f"has item {index} that {why}"
        return None
    if isinstance(hint, type) and issubclass(hint, Enum):
        allowed = [member.value for member in hint]
        return None if value in allowed else (
            f"is {value!r}, not one of {', '.join(map(repr, allowed))}")
    wanted, name = _PLAIN[hint]
    if isinstance(value, wanted) and (hint is bool or not isinstance(value, bool)):
        return None
    return f"is {_what(value)}, not {name}"


_PLAIN: dict[Any, tuple[tuple[type, ...], str]] = {
    float: ((int, float), "a number"), int: ((int,), "an integer"), str: ((str,), "text"),
    bool: ((bool,), "true or false")}


def as_declared(value: Any, hint: Any) -> Any:
    """A value that passed `mismatch` as the record holds it: an Enum's member for its value."""
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    return value


def _what(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else f"{type(value).__name__} {shown[:37]}..."
