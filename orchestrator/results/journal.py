"""One journal line as one record: parsed, checked and migrated, or refused with a reason.

A journal is edited by people and torn by kills, so any line may be anything: not JSON,
JSON that is not an object (`42`, `null`, `[1, 2]`), JSON's `Infinity` or `NaN` (no figure
is one), a record with no usable `schema_version`, or one a newer matrix-bench wrote. Each
is a `JournalLineError`, which the reader turns into a warning that names the file and the
line, and then reads on; the line itself stays where it is. A newer version is also what
a sweep must not append beside (`newest_version`): mixing versions in one journal would make
it unreadable to both.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError

from orchestrator.results.records import MIGRATIONS, SCHEMA_VERSION, Record, parse_record


class JournalLineError(ValueError):
    """A journal line that is not a record this matrix-bench can read; says why."""


class NewerRecordError(JournalLineError):
    """A record of a schema version newer than this matrix-bench knows."""

    def __init__(self, version: int) -> None:
        super().__init__(f"schema_version {version} is newer than this matrix-bench "
                         f"({SCHEMA_VERSION}); upgrade to read it")
        self.version = version


def parse_line(line: bytes | str) -> Record:
    """The record on a journal line, migrated to SCHEMA_VERSION; JournalLineError if none."""
    try:
        raw = json.loads(line, parse_constant=_no_constant, parse_float=_finite)
    except NonFiniteNumberError as exc:
        raise JournalLineError(str(exc)) from None
    except ValueError as exc:
        raise JournalLineError(f"not JSON ({_short(exc)})") from None
    except RecursionError:  # 100,000 nested brackets: no record nests that deep
        raise JournalLineError("nested too deep to be a record") from None
    if not isinstance(raw, dict):
        raise JournalLineError(f"a JSON {_json_kind(raw)}, not a record")
    raw = migrated(raw)
    try:
        return parse_record(raw)
    except (ValueError, ValidationError) as exc:  # pydantic's errors are ValueErrors too
        raise JournalLineError(_short(exc)) from None


class NonFiniteNumberError(ValueError):
    """JSON's Infinity or NaN, or a number past a float's range (1e400): no figure this tool
    writes is one (pydantic writes null), and a browser's JSON.parse refuses them."""


def _no_constant(name: str) -> float:
    raise NonFiniteNumberError(f"holds {name}, which no measured figure is (a corrupt timer?)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumberError(f"holds {text[:40]}, past what a number can hold")
    return value


def migrated(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` upgraded, one version at a time, to SCHEMA_VERSION."""
    version = raw.get("schema_version")
    if type(version) is not int or version < 1:  # a bool is an int to Python, not here
        shown = "missing" if "schema_version" not in raw else f"{version!r}, not a version"
        raise JournalLineError(f"schema_version {shown} (1 to {SCHEMA_VERSION})")
    if version > SCHEMA_VERSION:
        raise NewerRecordError(version)
    while version < SCHEMA_VERSION:
        raw = MIGRATIONS[version](raw)
        version += 1
    return {**raw, "schema_version": SCHEMA_VERSION}


def _json_kind(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), "null")


def _short(exc: Exception) -> str:
    """One line: a validation error's first problem with its field, else the message."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where + ': ' if where else ''}{first['msg']}"[:200]
    return str(exc).splitlines()[0][:200]
