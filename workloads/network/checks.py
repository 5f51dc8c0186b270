"""What `matrix validate` refuses in a `network` configuration, before anything runs
(docs/WORKLOADS.md: checks.py). Pure Python."""

from __future__ import annotations

from typing import Any


def problem(params: dict[str, Any], gpus: int, nodes: int = 1) -> tuple[str, str] | None:
    """(the parameter at fault, why) for a group that cannot measure a network: fewer than
    two ranks, or more ranks on a node than its GPUs; else None."""
    workers = params["workers"] or max(gpus, 1)
    if gpus and workers > gpus:
        return "workers", (f"{workers} ranks need a GPU each; the hardware gives the cell "
                           f"{gpus}")
    if workers * nodes < 2:
        return "workers", ("a network is measured between 2 ranks or more, and this cell has "
                           "one: give its hardware nodes: 2 or more, or workers: 2 or more")
    return None
