"""A field's bounds, declared once where the field is: on the worker's records and cell
file, which the driver's models take their fields from (results/records.py,
registry/cell_run.py) rather than declaring them again.

`Annotated[float | None, Bound(gt=0)]` says "a positive number, where given". The worker
reads its own lines leniently and never checks a bound; the driver's pydantic models do,
because pydantic asks each `Annotated` marker for its schema: `Bound` answers with the
type's own schema, narrowed. That hook is plain Python, so this module stays stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bound:
    """What a value of the field may be: above `gt`, at least `ge`; a text matching
    `pattern`, `min_length` to `max_length` characters long."""

    gt: float | None = None
    ge: float | None = None
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        """The schema pydantic makes for `source`, narrowed to this bound (for an optional
        type, its value when given). Called by pydantic in the driver only."""
        schema = dict(handler(source))
        if schema.get("type") == "nullable":
            schema["schema"] = self._narrowed(dict(schema["schema"]))
            return schema
        return self._narrowed(schema)

    def _narrowed(self, schema: dict[str, Any]) -> dict[str, Any]:
        set_here = {"gt": self.gt, "ge": self.ge, "pattern": self.pattern,
                    "min_length": self.min_length, "max_length": self.max_length}
        return {**schema, **{key: value for key, value in set_here.items()
                             if value is not None}}


POSITIVE = Bound(gt=0)
NOT_NEGATIVE = Bound(ge=0)
# a hardware entry's, stack's or workload's name, in a matrix and on a journal line: it
# names files and pages (the dashboard's workload-<name>.html), so never "../x"
NAME = Bound(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=80)
