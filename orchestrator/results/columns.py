"""A configuration's settings as columns: its parameters as `param.<name>`, its hardware
kind's own settings as `hw.<key>` (Slurm's partition, EC2's spot) and its stack's
executor's as `stack.<key>` (a plugin executor's niceness), in cell records, the parquet,
the results store and every table made from them. The prefixes are spelled here only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PARAM_PREFIX = "param."
# whose own settings a configuration records, each under its name: `hw.<key>` the hardware
# kind's (KindSettings), `stack.<key>` the stack's executor's (ExecutorSettings)
HW, STACK = "hw", "stack"
SETTING_OWNERS = (HW, STACK)


def param_column(name: str) -> str:
    """The column of the parameter `name`."""
    return f"{PARAM_PREFIX}{name}"


def is_param_column(column: object) -> bool:
    return str(column).startswith(PARAM_PREFIX)


def param_name(column: object) -> str:
    """The parameter a column holds (`param.batch_size` -> `batch_size`); a hardware
    setting's or an executor's column as it is (`hw.partition`, `stack.niceness`), so it
    never reads as a parameter."""
    return str(column).removeprefix(PARAM_PREFIX)


def param_columns(columns: Iterable[Any]) -> list[str]:
    """The parameter columns among `columns`, in their order."""
    return [str(c) for c in columns if is_param_column(c)]


def setting_column(owner: str, key: str) -> str:
    """The column of the setting `key` of `owner` (SETTING_OWNERS)."""
    return f"{owner}.{key}"


def setting_owner(column: object) -> str | None:
    """Whose setting a column holds ("hw", "stack"), or None: it holds none."""
    owner = str(column).partition(".")[0]
    return owner if owner in SETTING_OWNERS and str(column) != owner else None


def setting_columns(columns: Iterable[Any]) -> list[str]:
    """What sets one configuration apart from another beside its hardware, stack and
    workload: the parameter columns, then the hardware's, then the executor's setting
    columns, among `columns`."""
    found = [str(c) for c in columns]
    return [c for c in found if is_param_column(c)] + [
        c for owner in SETTING_OWNERS for c in found if setting_owner(c) == owner]


def as_setting_columns(owner: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """`owner`'s recorded settings as the columns that hold them."""
    return {setting_column(owner, key): value for key, value in settings.items()}


def from_setting_columns(owner: str, row: Mapping[Any, Any]) -> dict[str, Any]:
    """`owner`'s settings among a row's columns, by key."""
    return {str(key).removeprefix(f"{owner}."): value for key, value in row.items()
            if setting_owner(key) == owner}


def as_param_columns(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as the columns that hold them."""
    return {param_column(name): value for name, value in params.items()}


def from_param_columns(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The parameters among a row's columns, by name."""
    return {param_name(key): value for key, value in row.items() if is_param_column(key)}


NODES_COLUMN = f"{HW}.nodes"  # the nodes a cell across nodes spans, recorded where above 1


def with_node_counts(frame: Any) -> Any:
    """A frame (pandas) with `hw.nodes` on every row where some row spans nodes: a cell that
    records none ran on one node, so the count varies in every table and label made from
    it ("pair hw.nodes=1" beside "pair hw.nodes=2"). A frame without it is left as it is."""
    if NODES_COLUMN in frame.columns:
        import pandas as pd

        counts = pd.to_numeric(frame[NODES_COLUMN], errors="coerce").fillna(1)
        frame = frame.assign(**{NODES_COLUMN: counts.astype(int)})
    return frame
