"""FLOP model of `lstm_lm`: training FLOPs per target word (docs/WORKLOADS.md: flops.py).

Per token, forward, counting a multiply-add as 2 FLOPs:
- LSTM layer 1: four gates, each a (emb_dim + hidden) x hidden matrix-vector product:
  2 * 4 * hidden * (emb_dim + hidden); each further layer: 2 * 4 * hidden * (hidden + hidden).
- Output projection: 2 * hidden * vocab (untied Linear).
- Embedding lookup, gate nonlinearities, bias adds, dropout, softmax: O(hidden + vocab), ignored.
Training = forward + backward (twice the forward: gradients of inputs and of weights) = 3x forward.
At the seed's settings (emb_dim = hidden = 1024, one layer, WikiText-2 vocab 33,278) that is
3 * (16.8 M + 68.2 M) = about 255 MFLOP per trained word. Pure Python: the orchestrator calls it
without importing torch.
"""

from __future__ import annotations

from typing import Any

# Word types in train+valid+test with the pytorch/examples tokenizer (split on whitespace,
# "<eos>" appended to every line), "<eos>" included: the model's vocabulary on WikiText-2.
WIKITEXT2_VOCAB = 33278


def vocab_size(params: dict[str, Any]) -> int:
    """The model's vocabulary: fixed by the data for WikiText-2, the `vocab` param otherwise."""
    return WIKITEXT2_VOCAB if params["dataset"] == "wikitext2" else int(params["vocab"])


def forward_flops_per_item(params: dict[str, Any]) -> float:
    """Forward FLOPs per word (evaluation does this much per target word)."""
    emb, hidden, layers = int(params["emb_dim"]), int(params["hidden"]), int(params["layers"])
    lstm = 2 * 4 * hidden * (emb + hidden) + (layers - 1) * 2 * 4 * hidden * (2 * hidden)
    projection = 2 * hidden * vocab_size(params)
    return float(lstm + projection)


def flops_per_item(params: dict[str, Any]) -> float:
    """Training FLOPs (forward + backward) per target word."""
    return 3.0 * forward_flops_per_item(params)
