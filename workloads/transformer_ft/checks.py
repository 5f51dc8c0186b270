"""What `matrix validate` refuses in a `transformer_ft` configuration, before anything runs
(docs/WORKLOADS.md: checks.py). Pure Python."""

from __future__ import annotations

from typing import Any


def problem(params: dict[str, Any], gpus: int, nodes: int = 1) -> tuple[str, str] | None:
    """(the parameter at fault, why) for ranks the hardware cannot give a GPU each, or
    None (`nodes`: the group spans them, each node with `gpus`)."""
    workers = params["workers"] or max(gpus, 1)
    if gpus and workers > gpus:
        return "workers", (f"{workers} ranks need a GPU each; the hardware gives the cell "
                           f"{gpus}")
    return None
