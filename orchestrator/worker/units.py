"""What a workload's throughput counts: its item unit, any plain word (a token, an image, a
frame, a molecule), written singular where it is declared and shown in its plural.

Stdlib only: the worker, which prints its own figures, imports it.
"""

from __future__ import annotations

import re

# a plain lowercase English word: what a table heading and a column name can hold
ITEM_UNIT_PATTERN = r"^[a-z][a-z]{0,23}$"


def plural(unit: str) -> str:
    """`unit` in its plural (a regular English one): samples, images, patches, queries."""
    if re.search(r"(s|x|z|ch|sh)$", unit):
        return unit + "es"
    if re.search(r"[^aeiou]y$", unit):
        return unit[:-1] + "ies"
    return unit + "s"
