"""A configuration's settings as columns: its parameters as `param.<name>` and its
hardware kind's own settings as `hw.<key>` (Slurm's partition, EC2's spot), in cell
records, the parquet, the results store and every table made from them. The prefixes are
spelled here only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PARAM_PREFIX = "param."
HW_PREFIX = "hw."


def param_column(name: str) -> str:
    """The column of the parameter `name`."""
    return f"{PARAM_PREFIX}{name}"


def is_param_column(column: object) -> bool:
    return str(column).startswith(PARAM_PREFIX)


def param_name(column: object) -> str:
    """The parameter a column holds (`param.batch_size` -> `batch_size`); a hardware
    setting's column as it is (`hw.partition`), so it never reads as a parameter."""
    return str(column).removeprefix(PARAM_PREFIX)


def param_columns(columns: Iterable[Any]) -> list[str]:
    """The parameter columns among `columns`, in their order."""
    return [str(c) for c in columns if is_param_column(c)]


def hw_column(key: str) -> str:
    """The column of the hardware setting `key`."""
    return f"{HW_PREFIX}{key}"


def is_hw_column(column: object) -> bool:
    return str(column).startswith(HW_PREFIX)


def setting_columns(columns: Iterable[Any]) -> list[str]:
    """What sets one configuration apart from another beside its hardware, stack and
    workload: the parameter columns, then the hardware setting columns, among `columns`."""
    found = [str(c) for c in columns]
    return [c for c in found if is_param_column(c)] + [c for c in found if is_hw_column(c)]


def as_hw_columns(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A hardware kind's recorded settings as the columns that hold them."""
    return {hw_column(key): value for key, value in settings.items()}


def from_hw_columns(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The hardware settings among a row's columns, by key."""
    return {str(key).removeprefix(HW_PREFIX): value for key, value in row.items()
            if is_hw_column(key)}


def as_param_columns(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as the columns that hold them."""
    return {param_column(name): value for name, value in params.items()}


def from_param_columns(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The parameters among a row's columns, by name."""
    return {param_name(key): value for key, value in row.items() if is_param_column(key)}
