"""How the dashboard names a configuration's parameters: those that vary between a
workload's configurations name each row; the rest are said once. A configuration's
parameters are one JSON text shared by all its rows, so each text is parsed once (a site
of 100 runs asked 10,000 times for 50 texts)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@lru_cache(maxsize=4096)
def params_of(text: str) -> Mapping[str, Any]:
    """A configuration's parameters from their stored JSON text; read, never changed."""
    found: Mapping[str, Any] = json.loads(text)
    return found


@dataclass(frozen=True)
class Settings:
    """A workload's parameters: those that vary between its configurations name them; the
    rest are said once (a label of every parameter is too long to read on a chart)."""

    varying: tuple[str, ...]
    constant: str  # "dataset=synthetic hidden=64 ..."

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Settings:
        return cls.of_params(rows["params"])

    @classmethod
    def of_params(cls, texts: Iterable[str]) -> Settings:
        values: dict[str, set[str]] = {}
        for params in set(texts):
            for key, value in params_of(params).items():
                values.setdefault(key, set()).add(str(value))
        varying = tuple(sorted(k for k, v in values.items() if len(v) > 1))
        constant = " ".join(f"{k}={next(iter(v))}" for k, v in sorted(values.items())
                            if k not in varying)
        return cls(varying, constant)

    def of_row(self, row: dict[str, Any]) -> str:
        return _named(self.varying, row["params"])

    def label(self, row: dict[str, Any]) -> str:
        return f"{row['hardware']}/{row['stack']} {self.of_row(row)}".strip()


@lru_cache(maxsize=4096)
def _named(varying: tuple[str, ...], text: str) -> str:
    """The varying parameters of a configuration's text, as its rows name them: once per
    configuration, not once per row of every page."""
    params = params_of(text)
    return " ".join(f"{k}={params[k]}" for k in varying if k in params)
