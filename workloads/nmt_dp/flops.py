"""FLOP model of `nmt_dp`: training FLOPs per word (docs/WORKLOADS.md: flops.py).

A word is a source or target word without padding, counted over all workers; every worker
does the same work per step on its own batch, so FLOPs per word do not depend on `workers`
or `dp_mode` (the allreduce adds O(parameters) additions per step: ignored). The model
computes on the padded batch: every sentence pair costs src_len encoder steps and tgt_len
decoder steps whatever its length, so

    flops_per_item = training FLOPs per sentence pair / mean words per sentence pair,

the mean words being E[source length] + E[target length], each length uniform over the
integers [max(1, len // 2), len]: (max(1, len // 2) + len) / 2. A round counts 19 x 360
pairs per worker at the seed's settings, so its words are within about 0.2% of that mean.

Counting a multiply-add as 2 FLOPs, an LSTM layer (one direction) with input size I and H
units does, per sentence and time step, one gate GEMM with its input, x = 2 * 4H * I = 8HI,
and one with its recurrent state, h = 8H^2. Training (forward + backward) runs, per layer and
sentence, over `steps` time steps, only the GEMMs autograd needs:
- forward (x + h) * steps, and the weight gradients, as much again;
- input gradient x * steps: every layer's input needs one (the first layers' inputs are
  embedding outputs, whose weights train);
- state gradient h * steps, less one step (h) where the initial state is the constant zero
  (the encoder's four chains: two layers x two directions); the decoder starts from the
  encoder's final states, whose gradient trains the encoder, so it pays all of its steps.
So layer(I, steps) = 3 (x + h) steps, minus h for an encoder chain. The network
(E = emb_dim, H = hidden, V = tgt_vocab, S = src_len, T = tgt_len), per sentence pair:
- encoder, bidirectional: 2 x [layer(E, S) + layer(2H, S)] - 4h;
- decoder: layer(E, T) + 3 layer(H, T);
- output projection on every decoder step: 3 * 2HV * T.
Ignored (O(H) or O(V) per step, well under 1%): embedding lookups and their (scatter-add)
gradients, gate nonlinearities, bias adds, the cell updates, the softmax cross-entropy, Adam.

At the seed's settings (E = H = 512, V = 50,000, S = T = 100, lengths 50..100, mean words
75 + 75 = 150) a pair costs 6,283,067,392 (encoder) + 5,033,164,800 (decoder) +
15,360,000,000 (projection) = 26,676,232,192 FLOP, i.e. 177,841,548 FLOP (about 178 MFLOP)
per word. Checked against torch.utils.flop_counter on the workload's real model in
tests/test_flop_models.py.

This is the work a training step needs, the same for rnn_impl fused and unfused. The unfused
loop and nn.LSTM through ATen (a CPU with oneDNN off) run exactly it; the fused kernels (cuDNN
on a GPU, oneDNN on a CPU) also compute the gradients of the encoder's zero initial states
(4h per pair, 0.03% at the seed's settings), which are not counted.
Pure Python: the orchestrator calls it without importing torch.
"""

from __future__ import annotations

from typing import Any

ENCODER_LAYERS, DECODER_LAYERS = 2, 4  # the workload's fixed architecture (seed 003)


def lstm_layer_flops(inputs: int, hidden: int, steps: int, zero_initial_state: bool) -> int:
    """Training FLOPs of one LSTM layer in one direction over one sentence of `steps` steps,
    its input needing a gradient: 3 (x + h) steps, less h where the initial state is zero."""
    x, h = 8 * hidden * inputs, 8 * hidden * hidden
    return 3 * (x + h) * steps - (h if zero_initial_state else 0)


def flops_per_pair(params: dict[str, Any]) -> int:
    """Training FLOPs (forward + backward) per sentence pair, padding included."""
    emb, hidden, vocab = int(params["emb_dim"]), int(params["hidden"]), int(params["tgt_vocab"])
    src, tgt = int(params["src_len"]), int(params["tgt_len"])
    encoder = 2 * (lstm_layer_flops(emb, hidden, src, True)
                   + (ENCODER_LAYERS - 1) * lstm_layer_flops(2 * hidden, hidden, src, True))
    decoder = (lstm_layer_flops(emb, hidden, tgt, False)
               + (DECODER_LAYERS - 1) * lstm_layer_flops(hidden, hidden, tgt, False))
    projection = 3 * 2 * hidden * vocab * tgt
    return encoder + decoder + projection


def mean_length(longest: int) -> float:
    """Mean of a sentence length drawn uniformly from the integers [max(1, longest // 2),
    longest], as the workload draws them."""
    return (max(1, longest // 2) + longest) / 2


def words_per_pair(params: dict[str, Any]) -> float:
    """Mean source plus target words (no padding) per sentence pair."""
    return mean_length(int(params["src_len"])) + mean_length(int(params["tgt_len"]))


def flops_per_item(params: dict[str, Any]) -> float:
    """Training FLOPs (forward + backward) per word (source or target, padding excluded)."""
    return flops_per_pair(params) / words_per_pair(params)
