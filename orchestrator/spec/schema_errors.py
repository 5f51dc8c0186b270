"""A schema error as a person should read it: pydantic's first error, turned into one line
that names the file, the line and the field, says what was expected in plain words
("expected a number, got the text 'x'"), and hints at YAML's quoting traps.
"""

from __future__ import annotations

import datetime
import re

from pydantic import BaseModel, ValidationError

from orchestrator.errors import SpecError
from orchestrator.spec.entry_settings import catalogue_in
from orchestrator.spec.located_yaml import LocatedYaml, PathKey


def schema_error(doc: LocatedYaml, exc: ValidationError, model: type[BaseModel],
                 context: object = None) -> SpecError:
    """The first of pydantic's errors as one located line that says what was expected;
    `context`, the validation's, names the keys an entry may have (a hardware entry's
    kind's, a stack's executor's: spec/entry_settings.py)."""
    errors = [(_data_loc(doc.data, e["loc"]), e) for e in exc.errors()]
    # A key missing beside an unknown one is most likely that key misspelt: name the typo.
    missing = {lc[:-1] for lc, e in errors if e["type"] == "missing"}
    errors.sort(key=lambda pair: pair[1]["type"] != "extra_forbidden"
                or pair[0][:-1] not in missing)
    # The deepest error inside the first one's value: for [[1]], its item, not the list.
    loc = max((lc for lc, _ in errors if lc[:len(errors[0][0])] == errors[0][0]), key=len)
    group = [e for lc, e in errors if lc == loc]  # one per member of a union
    # Within a union (a parameter value), "not finite" says more than "not a boolean".
    err = next((e for e in group if e["type"] == "finite_number"), group[0])
    kind, given, ctx = err["type"], err.get("input"), err.get("ctx", {})
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, loc, doc.data, context)
        return doc.error(loc, f"unknown key (expected one of: {allowed})")
    if kind == "missing":
        return doc.error(loc, "required field is missing")
    if kind == "literal_error":
        return doc.error(loc, f"{given!r} is not allowed (expected {ctx['expected']})")
    if kind == "too_short":
        return doc.error(loc, "must not be empty")
    if kind == "string_pattern_mismatch" and loc and loc[-1] == "item_unit":
        return doc.error(loc, f"{given!r} is not an item unit: one plain lowercase word, "
                              "singular (e.g. image)")
    if kind == "string_pattern_mismatch":
        return doc.error(loc, f"{given!r} is not a valid name (letters, digits, '.', '_', '-')")
    if kind == "string_too_long":
        return doc.error(loc, f"is longer than {ctx['max_length']} characters")
    if kind == "finite_number":
        return doc.error(loc, f"must be a finite number, got {given!r}")
    if kind in _BOUNDS:
        bound = next(iter(ctx.values()))
        bound = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return doc.error(loc, f"must be {_BOUNDS[kind]} {bound:,}, got {given!r}")
    expected = [_EXPECTED[e["type"]] for e in group if e["type"] in _EXPECTED]
    if expected:
        return doc.error(loc, f"expected {_one_of(expected)}, got {_described(given)}"
                              f"{_quoting_hint(expected, given)}")
    if kind == "foreign_setting":  # another owner's key (spec/entry_settings.py)
        return doc.error(loc, err["msg"])
    message = err["msg"].removeprefix("Value error, ")
    suffix = f", got {given!r}" if not isinstance(given, dict | list) and given is not None else ""
    return doc.error(loc, f"{message}{suffix}")


_BOUNDS = {"greater_than": "greater than", "greater_than_equal": "greater than or equal to",
           "less_than": "less than", "less_than_equal": "less than or equal to"}
_EXPECTED = {"bool_type": "true or false", "int_type": "an integer", "float_type": "a number",
             "string_type": "text", "list_type": "a list", "dict_type": "a mapping",
             "model_type": "a mapping", "model_attributes_type": "a mapping"}


def _data_loc(data: object, loc: tuple[str | int, ...]) -> PathKey:
    """`loc` without the union members pydantic puts into it ("str", "list[...]"): only the
    parts that lead somewhere in the file's data."""
    kept: list[str | int] = []
    for part in loc:
        inside = part in data if isinstance(data, dict) else isinstance(data, list) and \
            isinstance(part, int) and 0 <= part < len(data)
        if inside:
            data = data[part]  # type: ignore[index]
        elif _is_pydantic_tag(part):
            continue
        else:  # a missing field: still the one to name
            data = None
        kept.append(part)
    return tuple(kept)


def _one_of(kinds: list[str]) -> str:
    if {"true or false", "a number", "text"} <= set(kinds):  # a parameter value
        return "a value (true or false, a number or text)" + (
            " or a list of values" if "a list" in kinds else "")
    kinds = [k for k in dict.fromkeys(kinds) if not (k == "an integer" and "a number" in kinds)]
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]


def _described(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        nested = any(isinstance(v, list | dict) for v in value)
        return "a list" + (" holding lists or mappings" if nested else "")
    if isinstance(value, bytes):
        return "binary data"
    return f"a {type(value).__name__} ({value!s:.40})"  # a date, a set


def _quoting_hint(expected: list[str], given: object) -> str:
    if expected == ["text"] and isinstance(given, float):
        return " (put it in quotes: YAML reads 12.10 as the number 12.1)"
    if "text" in expected and isinstance(given, int | datetime.date) and \
            not isinstance(given, bool):
        return " (put it in quotes)"
    if "text" not in expected and isinstance(given, str):
        try:
            float(given)
        except ValueError:
            return ""
        return " (without the quotes)"
    return ""


def _is_pydantic_tag(part: str | int) -> bool:
    """A union member's tag: a type ("str", "list[...]", "constrained-int") or a model's
    class name ("RepeatPolicy"; the file's own keys are lower case)."""
    return isinstance(part, str) and (bool(re.search(r"[\[\]-]", part)) or part in (
        "str", "int", "float", "bool") or part[:1].isupper())


def _allowed_keys(model: type[BaseModel], loc: PathKey, data: object, context: object) -> str:
    """The keys the mapping at `loc[:-1]` may have: its model's fields, or, for a model
    whose keys depend on the entry (a hardware entry: its kind's settings; a stack: its
    executor's), what it says."""
    parent, entry = model, data
    for part in loc[:-1]:
        entry = entry[part] if isinstance(entry, dict | list) else None  # type: ignore[index]
        if isinstance(part, int):
            continue
        if part not in parent.model_fields:  # a provider's section (`aws:`): its model
            sections = catalogue_in(context, "section")
            parent = (sections.settings(part) if sections else None) or parent
            continue
        annotation = parent.model_fields[part].annotation
        members = getattr(annotation, "__args__", (annotation,))  # list[X], X | None, int | X
        parent = next((m for m in members if isinstance(m, type) and issubclass(m, BaseModel)),
                      parent)
    entry_keys = getattr(parent, "entry_keys", None)
    if entry_keys is not None and isinstance(entry, dict):
        return ", ".join(entry_keys(entry, context))
    return ", ".join(parent.model_fields)
