"""FLOP model of `rnn_micro`: FLOPs per example (Contracts: `flops_per_item`).

The network is a stack of `layers` LSTM layers whose input size equals `hidden` (the seed's
batch x seq_len x hidden input). Per example, per time step, per layer, forward, counting a
multiply-add as 2 FLOPs: four gates (i, f, g, o), each a hidden x hidden product with the
input and another with the recurrent state, so 2 * 4 * H * (H + H) = 16 H^2. Gate
nonlinearities, bias adds, the cell update and the MSE loss are O(H) per step: ignored.
Forward per example = seq_len * layers * 16 H^2; training (forward + backward, the backward
being twice the forward: gradients of inputs and of weights) = 3x that. At the seed's first
cell (seq_len 30, hidden 128, one layer) that is 7.86 MFLOP forward, 23.6 MFLOP trained.
Pure Python: the orchestrator calls it without importing torch.
"""

from __future__ import annotations

from typing import Any


def forward_flops_per_item(params: dict[str, Any]) -> float:
    """Forward FLOPs per example: seq_len * layers * 16 * hidden^2."""
    hidden = int(params["hidden"])
    return float(int(params["seq_len"]) * int(params["layers"]) * 16 * hidden * hidden)


def flops_per_item(params: dict[str, Any]) -> float:
    """Training FLOPs (forward + backward) per example: 3x the forward."""
    return 3.0 * forward_flops_per_item(params)
