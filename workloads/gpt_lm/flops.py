"""FLOP model of `gpt_lm`: training FLOPs per token, the standard count that model FLOP
utilisation (MFU) is quoted with (PaLM, Chowdhery et al. 2022, appendix B):

    6N + 12 * L * H * Q * T

- N: the parameters of the matrix multiplies, 12 * L * d^2 (per block: the q, k, v and
  output projections, 4 d^2; the MLP's two 4x-wide layers, 8 d^2) plus the tied
  embedding matrix V * d, which is the output projection's weight (the lookup costs
  nothing). Each weight does a multiply-add per token forward (2 FLOPs) and two backward
  (input and weight gradients): 6 per token. Biases, norms and the position embeddings
  add under 1% at GPT-2's sizes and are left out, as the count does.
- 12 * L * H * Q * T: attention's two matrix products (scores QK^T and their weighted sum
  of V), 2 * 2 * H * Q * T per token and layer forward, x3 for training; over the whole
  T x T square, as the count does, although causal attention needs only half of it.

Activation checkpointing recomputes each block's forward: about 2N + 4 * L * H * Q * T more
per token (the forward's third of the count), 8N + 16 * L * H * Q * T in all. MFU leaves
it out, since it counts the model's FLOPs, not the hardware's. GPT-2 small at T = 1024:
N = 85.0 M + 38.6 M = 123.5 M, so 741 MFLOP + 113 MFLOP = 854 MFLOP per token. Pure Python.
"""

from __future__ import annotations

from typing import Any


def matmul_params(params: dict[str, Any]) -> int:
    """N: the weights of the model's matrix multiplies (the tied embedding included once)."""
    layers, width = int(params["n_layer"]), int(params["d_model"])
    return 12 * layers * width * width + int(params["vocab"]) * width


def attention_flops_per_token(params: dict[str, Any]) -> float:
    """12 * L * H * Q * T: training FLOPs of attention's matrix products per token."""
    layers, width = int(params["n_layer"]), int(params["d_model"])
    return 12.0 * layers * width * int(params["context"])  # H * Q = d_model


def flops_per_item(params: dict[str, Any]) -> float:
    """Training FLOPs (forward + backward) per token."""
    return 6.0 * matmul_params(params) + attention_flops_per_token(params)
