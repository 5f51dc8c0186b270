"""A cell's parameters as columns: `param.<name>` in cell records, the parquet, the results
store and every table made from them. The prefix is spelled here only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PARAM_PREFIX = "param."


def param_column(name: str) -> str:
    """The column of the parameter `name`."""
    return f"{PARAM_PREFIX}{name}"


def is_param_column(column: object) -> bool:
    return str(column).startswith(PARAM_PREFIX)


def param_name(column: object) -> str:
    """The parameter a column holds (`param.batch_size` -> `batch_size`)."""
    return str(column).removeprefix(PARAM_PREFIX)


def param_columns(columns: Iterable[Any]) -> list[str]:
    """The parameter columns among `columns`, in their order."""
    return [str(c) for c in columns if is_param_column(c)]


def as_param_columns(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as the columns that hold them."""
    return {param_column(name): value for name, value in params.items()}


def from_param_columns(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The parameters among a row's columns, by name."""
    return {param_name(key): value for key, value in row.items() if is_param_column(key)}
