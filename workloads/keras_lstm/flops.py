"""FLOP model of `keras_lstm`: training FLOPs per sample (docs/WORKLOADS.md: flops.py).

A sample is one window: `maxlen` one-hot characters (S symbols) in, the next character's
class out; the model is LSTM(H) on the window, its last state into Dense(S, softmax). Every
device of a data-parallel cell does the same work per sample of its share of the global
batch, so FLOPs per sample do not depend on `devices` or the backend (the gradient allreduce
adds O(parameters) additions per step: ignored).

Counting a multiply-add as 2 FLOPs, the LSTM does, per sample and time step, one gate GEMM
with its input, x = 2 * 4H * S = 8HS, and one with its recurrent state, h = 8H^2. Training
(forward, categorical cross-entropy, backward) runs only the GEMMs the weight gradients need:
- forward (x + h) per step, and the weight gradients (kernel, recurrent kernel) as much again;
- no input gradient: the input is the data (one-hot or synthetic), nothing to train there;
- the state gradient h per step except the first, whose state is the constant zero initial
  state: (maxlen - 1) h;
- Dense: forward 2HS, its input (the last state) and weight gradients 2HS each: 6HS.
Training per sample = maxlen (2x + 3h) - h + 6HS, the forward alone maxlen (x + h) + 2HS.
Ignored (O(H) per step, about 1% here): gate nonlinearities, bias adds and their gradients,
the cell updates, softmax and the loss, RMSprop.

S is the data's symbol count: `features` for synthetic data; the distinct characters of the
text otherwise: 57 for Nietzsche (lower-cased), 37 for the seed's WikiText-2 preprocessing
(a-z, 0-9, space), and, when `max_chars` cuts the text, those of the cut text, counted from
the data cache as the workload reads it (46 in Nietzsche's first 12,000 characters, the tiny
preset; a ValueError where the data are not in the cache). At the defaults (Nietzsche,
H = 128, maxlen 40: x = 58,368, h = 131,072) that is 40 * 509,952 - 131,072 + 43,776 =
20,310,784 FLOP per sample (about 20.3 MFLOP; a 3x-forward count, 22,776,576, would be 12%
more).

Checked in tests/test_flop_models.py against TensorFlow's own count of the MatMul FLOPs
(the MatMul statistic its profiler uses) in the graph of Keras' train_step for the model the
workload builds. Exact for the unrolled LSTM (unroll true, the default): TensorFlow's gradient
tape skips the MatMul gradients that no variable needs (and Grappler removes none of those
left). With unroll false TensorFlow runs a while loop, and the gradient body it traces holds
the input- and state-gradient MatMuls for every step: maxlen x + h more per sample (12% at the
defaults), which cuDNN's fused kernel (a GPU, unroll false) computes too. Whether they run or
not, they are not counted: this is the work a training step needs, the same for every path
and backend (the torch backend's autograd skips them as TensorFlow's unrolled graph does).
Pure Python: the orchestrator calls it without importing a framework.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from orchestrator.worker import datasets

# Distinct characters of the whole text as the workload prepares it (see the docstring).
SYMBOLS = {"nietzsche": 57, "wikitext2": 37}
TEXT_FILES = {"nietzsche": "nietzsche/nietzsche.txt", "wikitext2": "wikitext-2/train.txt"}


def prepared_text(dataset: str) -> str:
    """The workload's training text (workload.nietzsche_text / wikitext_text), read from the
    data cache, where the workload's run has fetched and sha256-checked it. Never downloads
    (a report may ask on a machine without the data): ValueError when the file is absent."""
    path = datasets.data_dir() / TEXT_FILES[dataset]
    if not path.is_file():
        raise ValueError(f"keras_lstm's FLOP model needs the symbols of {dataset} cut at "
                         f"max_chars, and {path} is not in the data cache")
    text = path.read_text(encoding="utf-8")
    if dataset == "nietzsche":
        return text.lower()
    return " ".join(" ".join(re.findall("[a-zA-Z0-9]+", line)).lower()
                    for line in text.splitlines() if line.strip())


@functools.lru_cache(maxsize=8)
def _symbols_of_cut_text(dataset: str, max_chars: int) -> int:
    return len(set(prepared_text(dataset)[:max_chars]))


def symbols(params: dict[str, Any]) -> int:
    """Input features = output classes: S in the docstring."""
    dataset = str(params["dataset"])
    if dataset == "synthetic":
        return int(params["features"])
    max_chars = int(params["max_chars"])
    return _symbols_of_cut_text(dataset, max_chars) if max_chars else SYMBOLS[dataset]


def forward_flops_per_item(params: dict[str, Any]) -> float:
    """Forward FLOPs per sample: maxlen (8HS + 8H^2) + 2HS."""
    hidden, steps, classes = int(params["hidden"]), int(params["maxlen"]), symbols(params)
    return float(steps * 8 * hidden * (classes + hidden) + 2 * hidden * classes)


def flops_per_item(params: dict[str, Any]) -> float:
    """Training FLOPs (forward + backward) per sample: maxlen (2x + 3h) - h + 6HS."""
    hidden, steps, classes = int(params["hidden"]), int(params["maxlen"]), symbols(params)
    x, h = 8 * hidden * classes, 8 * hidden * hidden
    return float(steps * (2 * x + 3 * h) - h + 6 * hidden * classes)
