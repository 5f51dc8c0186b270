"""FLOP model of `rnn_micro`: FLOPs per example (docs/WORKLOADS.md: flops.py).

The network is a stack of `layers` LSTM layers whose input size equals `hidden` (the seed's
batch x seq_len x hidden input), from a zero initial state. Counting a multiply-add as 2 FLOPs,
let G = 2 * 4 * H^2 = 8 H^2 be one gate GEMM per example and time step: the four gates (i, f,
g, o) of one H x H product, with the layer's input or with its recurrent state. Per layer and
step the forward pass does two (input and recurrent): forward per example =
seq_len * layers * 2G = 16 H^2 * seq_len * layers.

Training (forward, MSE loss, backward) runs, per layer and example, only the GEMMs autograd
needs:
- forward: 2G per step (input, recurrent);
- weight gradients (W_ih, W_hh): 2G per step;
- recurrent state gradient (into h_{t-1}): G per step except the first, whose state is the
  constant zero initial state, which needs none: (seq_len - 1) G;
- input gradient (into the layer's input): G per step for layers 2.., none for layer 1,
  whose input is the random data tensor (no requires_grad), so that GEMM never runs.
Training per example = G * [(5 seq_len - 1) + (layers - 1) (6 seq_len - 1)]
                     = 8 H^2 * (layers * (6 seq_len - 1) - seq_len).
Ignored (O(H) per step, under 1% of the GEMMs at H >= 128): gate nonlinearities, bias adds
and their gradients, the cell update, the MSE loss, the SGD step.

At the seed's first cell (seq_len 30, hidden 128, one layer; G = 131,072) the forward pass is
7,864,320 FLOP per example and training 149 G = 19,529,728 FLOP (the earlier 3x-forward count,
23,592,960 = 180 G, overcounted it by 21%). Checked against torch.utils.flop_counter on the
workload's real model in tests/test_flop_models.py.

Which paths run exactly this: the unfused and compiled loops, and nn.LSTM through ATen's
LSTM (a sequence of matmuls; a CPU with oneDNN off). The fused kernels do the same forward
GEMMs, but their backward computes the input and initial-state gradients whether needed or
not (torch's _cudnn_rnn_backward computes them unconditionally on a GPU; on a CPU,
aten::mkldnn_rnn_layer_backward has no output mask and returns them always): seq_len G +
layers G more per example, which nothing uses. They are not counted: this is the work a
training step needs, the same for every rnn_impl, so the implementations are compared on one
count (at the seed's first cell cuDNN does 180 G, 21% more than counted).
Pure Python: the orchestrator calls it without importing torch.
"""

from __future__ import annotations

from typing import Any


def forward_flops_per_item(params: dict[str, Any]) -> float:
    """Forward FLOPs per example: seq_len * layers * 16 * hidden^2."""
    hidden = int(params["hidden"])
    return float(int(params["seq_len"]) * int(params["layers"]) * 16 * hidden * hidden)


def flops_per_item(params: dict[str, Any]) -> float:
    """Training FLOPs (forward + backward) per example:
    8 * hidden^2 * (layers * (6 * seq_len - 1) - seq_len)."""
    hidden, steps, layers = int(params["hidden"]), int(params["seq_len"]), int(params["layers"])
    return float(8 * hidden * hidden * (layers * (6 * steps - 1) - steps))
