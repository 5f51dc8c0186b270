"""What `matrix validate` refuses in a `gpt_lm` configuration, before anything runs
(docs/WORKLOADS.md: checks.py). Pure Python."""

from __future__ import annotations

from typing import Any


def problem(params: dict[str, Any], gpus: int, nodes: int = 1) -> tuple[str, str] | None:
    """(the parameter at fault, why) for a configuration that cannot be trained on `nodes`
    nodes of `gpus` GPUs each, or None."""
    if params["context"] > params["max_context"]:
        return "context", (f"context {params['context']} is longer than the model's "
                           f"{params['max_context']} positions (max_context, "
                           f"{params['preset']} preset): raise max_context to train longer "
                           "sequences")
    if params["d_model"] % params["n_head"]:
        return "n_head", (f"d_model {params['d_model']} does not divide into {params['n_head']} "
                          "heads")
    workers = params["workers"] or max(gpus, 1)
    if gpus and workers > gpus:
        return "workers", (f"{workers} ranks need a GPU each; the hardware gives the cell "
                           f"{gpus}")
    if params["dp_mode"] == "fsdp" and workers * nodes == 1:
        return "dp_mode", ("fsdp shards the model over the ranks, and this cell has one "
                           "(workers, or the hardware's GPUs, on each of its nodes): it would "
                           "time FSDP's overhead with nothing sharded; use ddp, or more "
                           "workers or nodes")
    return None
