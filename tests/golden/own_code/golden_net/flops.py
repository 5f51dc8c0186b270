"""Training FLOPs per sample of `golden_net` (pure Python): the report turns them into TFLOP/s
and a fraction of the device's peak, and flags a row that claims more than the device has."""

from __future__ import annotations

from itertools import pairwise
from typing import Any


def flops_per_item(params: dict[str, Any]) -> float:
    widths = [params["features"], *[params["hidden"]] * params["layers"], params["classes"]]
    forward = sum(2.0 * a * b for a, b in pairwise(widths))  # a multiply-add is 2
    return 3.0 * forward  # the backward pass costs about twice the forward
