"""The `lstm_lm` workload: seed 000's word-level LSTM language model, measured per epoch.

Embedding -> Dropout -> LSTM -> Dropout -> Linear (untied), Adam, cross-entropy, truncated
BPTT over a token stream batchified into `batch_size` columns (as pytorch/examples
word_language_model does), the hidden state carried across windows and detached. Data is
tokenized and moved to the device before any clock starts; each training step counts its
target words (no padding here, so all of them are real), evaluation is timed apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from orchestrator.worker import datasets
from orchestrator.worker.context import Context, Unsupported
from workloads.torch_common import (
    autocast,
    backward_and_step,
    precision_switches,
    ran_on,
    require_autocast_dtype,
    set_precision,
    use_torch,
)

Hidden = tuple[torch.Tensor, torch.Tensor]
SPLITS = ("wikitext-2/train.txt", "wikitext-2/valid.txt", "wikitext-2/test.txt")


@dataclass
class Corpus:
    """Token ids of the training and evaluation streams, and the vocabulary size."""

    train: torch.Tensor  # 1-D int64
    valid: torch.Tensor  # 1-D int64
    vocab: int
    sha256: dict[str, str] = field(default_factory=dict)  # data file -> sha256


def tokenize(paths: list[Path]) -> tuple[list[torch.Tensor], dict[str, int]]:
    """pytorch/examples' tokenizer: whitespace split, "<eos>" per line, one vocab over all."""
    words: dict[str, int] = {}
    streams = []
    for path in paths:
        ids: list[int] = []
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                for word in [*line.split(), "<eos>"]:
                    ids.append(words.setdefault(word, len(words)))
        streams.append(torch.tensor(ids, dtype=torch.int64))
    return streams, words


def load_corpus(params: dict[str, Any]) -> Corpus:
    """WikiText-2 from the dataset cache (sha256-checked), or seeded random tokens."""
    if params["dataset"] == "wikitext2":
        paths = datasets.fetch("wikitext2")
        (train, valid, _test), words = tokenize([paths[name] for name in SPLITS])
        hashes = {name: datasets.sha256_of(paths[name]) for name in SPLITS}
        return Corpus(train, valid, len(words), hashes)
    generator = torch.Generator().manual_seed(params["seed"])
    vocab = params["vocab"]
    train = torch.randint(vocab, (params["synthetic_tokens"],), generator=generator)
    valid = torch.randint(vocab, (params["eval_tokens"],), generator=generator)
    return Corpus(train, valid, vocab)


def batchify(tokens: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(rows, batch_size): the stream cut into batch_size contiguous columns, tail dropped."""
    rows = tokens.numel() // batch_size
    return tokens[: rows * batch_size].view(batch_size, rows).t().contiguous()


def windows(data: torch.Tensor, seq_len: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(inputs, targets) of up to seq_len rows; targets are the inputs shifted by one."""
    for start in range(0, data.size(0) - 1, seq_len):
        length = min(seq_len, data.size(0) - 1 - start)
        yield data[start : start + length], data[start + 1 : start + 1 + length]


class LstmLM(nn.Module):
    """The seed's model: untied embedding and output projection around an nn.LSTM."""

    def __init__(self, vocab: int, emb_dim: int, hidden: int, layers: int,
                 dropout: float) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb_dim)
        self.drop = nn.Dropout(dropout)
        self.lstm = nn.LSTM(emb_dim, hidden, layers, dropout=dropout if layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor, state: Hidden) -> tuple[torch.Tensor, Hidden]:
        output, state = self.lstm(self.drop(self.embedding(tokens)), state)
        return self.decoder(self.drop(output)), state

    def initial_state(self, batch_size: int) -> Hidden:
        weight = self.decoder.weight
        shape = (self.lstm.num_layers, batch_size, self.lstm.hidden_size)
        return weight.new_zeros(shape), weight.new_zeros(shape)


class Trainer:
    """The model, Adam and the grad scaler; `step` is one truncated-BPTT training step."""

    def __init__(self, p: dict[str, Any], vocab: int, device: torch.device) -> None:
        self.precision, self.device, self.vocab = p["precision"], device, vocab
        self.clip = p["clip"]
        self.model = LstmLM(vocab, p["emb_dim"], p["hidden"], p["layers"],
                            p["dropout"]).to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=p["lr"])
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.precision == "fp16")
        self.criterion = nn.CrossEntropyLoss()

    def step(self, inputs: torch.Tensor, targets: torch.Tensor,
             state: Hidden) -> tuple[torch.Tensor, Hidden]:
        """Train on one window; the loss stays on the device (reading it would sync)."""
        state = (state[0].detach(), state[1].detach())
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.precision, self.device):
            logits, state = self.model(inputs, state)
            loss = self.criterion(logits.view(-1, self.vocab), targets.reshape(-1))
        backward_and_step(loss, self.model, self.optimizer, self.scaler, self.clip)
        return loss.detach(), state


def train_losses(p: dict[str, Any], steps: int, device: str = "cpu") -> list[float]:
    """The losses of the first `steps` training steps, with run()'s data and step (tests)."""
    torch.manual_seed(p["seed"])
    corpus = load_corpus(p)
    trainer = Trainer(p, corpus.vocab, torch.device(device))
    train = batchify(corpus.train, p["batch_size"]).to(device)
    state = trainer.model.initial_state(p["batch_size"])
    losses = []
    for _, (inputs, targets) in zip(range(steps), windows(train, p["seq_len"]),
                                    strict=False):
        loss, state = trainer.step(inputs, targets, state)
        losses.append(float(loss))
    return losses


def run(ctx: Context) -> None:
    """Train for ctx.epochs epochs; one measurement record per epoch."""
    p = ctx.params
    if ctx.gpus > 1:  # the seed is single-GPU; idle GPUs would make the row lie about its hardware
        raise Unsupported(f"lstm_lm trains on one device; this hardware has gpus={ctx.gpus}")
    device = use_torch(ctx)
    precision = p["precision"]
    set_precision(precision, device)
    ctx.precision_switches.update(precision_switches(precision, device))
    torch.manual_seed(p["seed"])

    corpus = load_corpus(p)
    ctx.data_files.update(corpus.sha256)
    batch_size, seq_len, warmup = p["batch_size"], p["seq_len"], p["warmup_steps"]
    train = batchify(corpus.train, batch_size).to(device)
    valid = batchify(corpus.valid, batch_size).to(device)
    train_steps = len(range(0, train.size(0) - 1, seq_len))
    if train_steps < warmup + 1:
        raise ValueError(
            f"the training stream gives {train_steps} steps of batch_size {batch_size} x seq_len "
            f"{seq_len}, not more than warmup_steps={warmup}: use more tokens or smaller batches")

    trainer = Trainer(p, corpus.vocab, device)
    ran_on(ctx, trainer.model)
    lstm = trainer.model.lstm
    require_autocast_dtype(lstm, "nn.LSTM", torch.zeros(2, 1, lstm.input_size, device=device),
                           precision, device)
    for epoch in ctx.epoch_range():
        trainer.model.train()
        state = trainer.model.initial_state(batch_size)
        meter = ctx.start_epoch(warmup)
        for inputs, targets in windows(train, seq_len):
            with meter.step(items=targets.numel()):
                _, state = trainer.step(inputs, targets, state)
        if valid.size(0) > 1:
            with meter.evaluation() as ev:
                ev.items = evaluate(trainer.model, valid, seq_len, precision, device)
        summary = meter.summary()
        metrics = {"train_words_per_s": float(summary["items_per_s"])}
        if "eval_items_per_s" in summary:
            metrics["eval_words_per_s"] = float(summary["eval_items_per_s"])
        ctx.end_epoch(epoch, meter, **metrics)


def evaluate(model: LstmLM, data: torch.Tensor, seq_len: int, precision: str,
             device: torch.device) -> int:
    """Forward passes with the loss over the whole stream (as the seed); target words seen."""
    model.eval()
    criterion = nn.CrossEntropyLoss(reduction="sum")
    total = torch.zeros((), device=device)  # stays on the device: no sync per window
    words = 0
    with torch.no_grad(), autocast(precision, device):
        state = model.initial_state(data.size(1))
        for inputs, targets in windows(data, seq_len):
            logits, state = model(inputs, state)
            total += criterion(logits.view(-1, logits.size(-1)), targets.reshape(-1)).float()
            words += targets.numel()
    model.train()
    return words
