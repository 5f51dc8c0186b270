"""FLOP model of `transformer_ft`: FLOPs per example (docs/WORKLOADS.md: flops.py).

An example is one sequence padded to seq_len tokens; the model computes on the padding too
(it is masked out of attention, not skipped), so every count uses seq_len, not the real length.
A multiply-add counts as 2 FLOPs. Forward, per layer and per token:
- Q, K, V and output projections: 4 * 2 * dim^2;
- FFN (lin1, lin2): 2 * 2 * dim * ffn;
- attention scores Q.K^T and the weighted sum of V: 2 * 2 * seq_len * dim (all heads together).
Times layers and seq_len; plus the classification head on the first token: pre_classifier
2 * dim^2 and classifier 2 * dim * labels. Ignored (O(dim) per token): embedding lookups, biases,
LayerNorm, GELU, softmax, dropout, the loss. Training = forward + backward = 3x forward.
At the seed's settings (6 layers, dim 768, ffn 3072, seq_len 128, 3 labels) the forward pass is
6 * 128 * (4,718,592 + 9,437,184 + 393,216) + 1,184,256 = 11,174,810,112 FLOP per example
(about 11.2 GFLOP), training 33.5 GFLOP. Pure Python: the orchestrator calls it without torch.
"""

from __future__ import annotations

from typing import Any


def forward_flops_per_item(params: dict[str, Any]) -> float:
    """Forward FLOPs per example (a sequence of seq_len tokens, padding included)."""
    dim, ffn, seq_len = int(params["dim"]), int(params["ffn"]), int(params["seq_len"])
    per_token = 4 * 2 * dim * dim + 2 * 2 * dim * ffn + 2 * 2 * seq_len * dim
    head = 2 * dim * dim + 2 * dim * int(params["labels"])
    return float(int(params["layers"]) * seq_len * per_token + head)


def flops_per_item(params: dict[str, Any]) -> float:
    """Training FLOPs (forward + backward) per example."""
    return 3.0 * forward_flops_per_item(params)
