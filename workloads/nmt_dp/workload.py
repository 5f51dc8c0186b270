"""Seed 003: seq2seq NMT without attention, data parallel over workers inside one cell.

This process is rank 0: it times the rounds and writes the records. Ranks 1..N-1 are
spawned processes (one per further GPU or CPU worker) that run the same loop on their own
data and leave with the cell. Words are source plus target words without padding, of all
workers: every worker's sentence lengths come from (seed, rank, step), so rank 0 counts
them all without a collective in the timed loop.

`precision` is set in every rank's process before its model is built (TF32 and autocast
are per process), and checked once, before any rank starts: a half precision that the
LSTMs would not compute in on this device makes the cell `unsupported`, never fp32 timed
under a bf16 label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from orchestrator.worker.context import Context
from workloads.torch_common import (
    AUTOCAST_DTYPES,
    autocast,
    backward_and_step,
    precision_switches,
    ran_on,
    require_autocast_dtype,
    set_precision,
)
from workloads.torch_ranks import (
    Ranks,
    barrier,
    cell_ranks,
    each_rank,
    first_rank_device,
    join_group,
    leave_group,
    other_rank_device,
    rank_group,
)

PAD, BOS = 0, 1  # token ids; real words are 2..vocab-1


class CellLSTM(nn.Module):
    """A stack of LSTMCell loops with nn.LSTM's interface (batch_first, optional
    bidirectional): the unfused implementation, one small kernel per time step."""

    def __init__(self, input_size: int, hidden: int, layers: int, bidirectional: bool) -> None:
        super().__init__()
        self.directions = 2 if bidirectional else 1
        self.cells = nn.ModuleList(
            nn.LSTMCell(input_size if layer == 0 else hidden * self.directions, hidden)
            for layer in range(layers) for _ in range(self.directions))

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        h_n, c_n = [], []
        for layer in range(len(self.cells) // self.directions):
            outputs = []
            for direction in range(self.directions):
                index = layer * self.directions + direction
                h, c = (state[0][index], state[1][index]) if state is not None else (None, None)
                steps = range(x.shape[1]) if direction == 0 else reversed(range(x.shape[1]))
                out: list[torch.Tensor] = []
                for t in steps:
                    h, c = self.cells[index](x[:, t], None if h is None else (h, c))
                    out.append(h)
                if direction == 1:
                    out.reverse()
                outputs.append(torch.stack(out, dim=1))
                h_n.append(h)
                c_n.append(c)
            x = torch.cat(outputs, dim=2)
        return x, (torch.stack(h_n), torch.stack(c_n))


class Seq2Seq(nn.Module):
    """Embeddings, a bidirectional 2-layer encoder whose 4 final states (forward and
    backward of each layer) start the 4-layer decoder, a projection to the target vocab."""

    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        emb, hidden = p["emb_dim"], p["hidden"]
        lstm = nn.LSTM if p["rnn_impl"] == "fused" else CellLSTM
        self.src_embedding = nn.Embedding(p["src_vocab"], emb, padding_idx=PAD)
        self.tgt_embedding = nn.Embedding(p["tgt_vocab"], emb, padding_idx=PAD)
        self.encoder = lstm(emb, hidden, 2, bidirectional=True, **_batch_first(lstm))
        self.decoder = lstm(emb, hidden, 4, bidirectional=False, **_batch_first(lstm))
        self.projection = nn.Linear(hidden, p["tgt_vocab"])

    def forward(self, source: torch.Tensor, decoder_input: torch.Tensor) -> torch.Tensor:
        _, state = self.encoder(self.src_embedding(source))
        output, _ = self.decoder(self.tgt_embedding(decoder_input), state)
        return self.projection(output)


def _batch_first(lstm: type) -> dict[str, bool]:
    return {"batch_first": True} if lstm is nn.LSTM else {}


def require_precision(p: dict[str, Any], device: torch.device) -> None:
    """Unsupported unless the encoder's and the decoder's LSTMs (as Seq2Seq builds them)
    really compute in the cell's half precision on `device`; checked on a tiny input."""
    precision = p["precision"]
    if precision not in AUTOCAST_DTYPES:
        return
    lstm = nn.LSTM if p["rnn_impl"] == "fused" else CellLSTM
    name = "nn.LSTM" if lstm is nn.LSTM else "nn.LSTMCell loop"
    emb, hidden = p["emb_dim"], p["hidden"]
    for layers, bidirectional in ((2, True), (4, False)):
        module = lstm(emb, hidden, layers, bidirectional=bidirectional, **_batch_first(lstm))
        require_autocast_dtype(module.to(device), name, torch.zeros(1, 2, emb, device=device),
                               precision, device)


@dataclass(frozen=True)
class Batch:
    source: torch.Tensor  # (batch, src_len), PAD after each sentence's length
    decoder_input: torch.Tensor  # BOS + target[:-1]
    target: torch.Tensor  # (batch, tgt_len), PAD after each sentence's length
    words: int  # source plus target words, padding excluded


def lengths(p: dict[str, Any], rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The sentence lengths of one worker's step: a function of (seed, rank, step) only."""
    generator = torch.Generator().manual_seed(p["seed"] * 1_000_003 + rank * 10_007 + step)
    batch, src, tgt = p["batch_size"], p["src_len"], p["tgt_len"]
    return (torch.randint(max(1, src // 2), src + 1, (batch,), generator=generator),
            torch.randint(max(1, tgt // 2), tgt + 1, (batch,), generator=generator))


def words_of(p: dict[str, Any], workers: int, step: int) -> int:
    """Source plus target words of all workers' step `step`, without padding."""
    return sum(int(s.sum() + t.sum()) for s, t in (lengths(p, r, step) for r in range(workers)))


def synthetic_batch(p: dict[str, Any], rank: int, step: int, device: torch.device) -> Batch:
    src_lengths, tgt_lengths = lengths(p, rank, step)
    generator = torch.Generator().manual_seed(p["seed"] + 7919 * (rank + 1) + step)

    def padded(lens: torch.Tensor, width: int, vocab: int) -> torch.Tensor:
        tokens = torch.randint(2, vocab, (len(lens), width), generator=generator)
        return tokens.masked_fill(torch.arange(width)[None, :] >= lens[:, None], PAD)

    source = padded(src_lengths, p["src_len"], p["src_vocab"])
    target = padded(tgt_lengths, p["tgt_len"], p["tgt_vocab"])
    decoder_input = torch.cat([torch.full((len(target), 1), BOS), target[:, :-1]], dim=1)
    words = int(src_lengths.sum() + tgt_lengths.sum())
    return Batch(source.to(device), decoder_input.to(device), target.to(device), words)


class Worker:
    """One rank's model, optimiser and data, in its own process group membership."""

    def __init__(self, p: dict[str, Any], rank: int, workers: int, device: torch.device) -> None:
        self.p, self.rank, self.device = p, rank, device
        self.precision = p["precision"]
        set_precision(self.precision, device)  # before the model: TF32 is per process
        torch.manual_seed(p["seed"])  # the same initial weights on every worker
        model: nn.Module = Seq2Seq(p).to(device)
        if workers > 1 and p["dp_mode"] == "allreduce":
            model = nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None)
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=p["lr"])
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.precision == "fp16")
        self.loss = nn.CrossEntropyLoss(ignore_index=PAD)  # masked: padding counts nothing

    def batches(self, first: int, count: int) -> list[Batch]:
        """A round's batches, made before it is timed: generating them is not training."""
        return [synthetic_batch(self.p, self.rank, step, self.device)
                for step in range(first, first + count)]

    def step(self, batch: Batch) -> None:
        with autocast(self.precision, self.device):
            logits = self.model(batch.source, batch.decoder_input)
            loss = self.loss(logits.flatten(0, 1), batch.target.flatten())
        self.optimizer.zero_grad(set_to_none=True)
        backward_and_step(loss, self.model, self.optimizer, self.scaler, clip=0.0)

    def checksum(self) -> float:
        return float(sum(p.double().sum() for p in self.model.parameters()))


def run(ctx: Context) -> None:
    p = ctx.params
    ranks = cell_ranks(ctx)
    device = first_rank_device(ctx, ranks)
    precision = p["precision"]
    set_precision(precision, device)  # this rank's; every other rank sets its own (Worker)
    ctx.precision_switches.update(precision_switches(precision, device))
    require_precision(p, device)  # before any rank is spawned
    with rank_group(ctx, ranks, _other_rank, p, ctx.epochs) as ranks:
        worker = Worker(p, ranks.first, ranks.world, device)
        ran_on(ctx, worker.model)
        if ranks.node.times:
            _train(ctx, worker, ranks)
        else:  # another node's first rank: the same rounds, untimed
            _untimed_rounds(worker, p, ctx.epochs)


def _train(ctx: Context, worker: Worker, ranks: Ranks) -> None:
    """Rank 0's timed rounds (the model is dropped on return, before the group is left)."""
    p = ctx.params
    workers = ranks.world
    per_round = p["batches_per_round"]
    for epoch in ctx.epoch_range():
        first = (epoch - 1) * per_round
        batches = worker.batches(first, per_round)
        words = [words_of(p, workers, step) for step in range(first, first + per_round)]
        barrier(ranks)  # every worker starts the round together
        meter = ctx.start_epoch(warmup_steps=p["warmup_steps"])
        for index, batch in enumerate(batches):
            with meter.step(items=words[index]):
                worker.step(batch)
                if index == per_round - 1:
                    barrier(ranks)  # the round ends when the slowest worker's does
        summary = meter.summary()
        ctx.end_epoch(epoch, meter, ms_per_step=float(summary["train_s"]) * 1e3
                      / int(summary["steps"]))

def _other_rank(rank: int, ranks: Ranks, p: dict[str, Any], rounds: int) -> None:
    """Ranks 1..N-1: the same loop as rank 0, with the same barriers, untimed. Each dies
    with rank 0, so a killed cell leaves no rank waiting in a collective."""
    device = other_rank_device(rank, ranks)
    join_group(rank, ranks)
    try:
        _untimed_rounds(Worker(p, rank, ranks.world, device), p, rounds)
    finally:
        leave_group()


def _untimed_rounds(worker: Worker, p: dict[str, Any], rounds: int) -> None:
    per_round = p["batches_per_round"]
    for round_index in range(rounds):
        batches = worker.batches(round_index * per_round, per_round)
        dist.barrier()
        for batch in batches:
            worker.step(batch)
        dist.barrier()

def one_step_checksums(p: dict[str, Any], workers: int) -> list[float]:
    """Each worker's weight checksum after one step on its own data (for the tests: equal
    under allreduce, different when independent)."""
    return each_rank(_checksum_rank, workers, p)


def _checksum_rank(rank: int, ranks: Ranks, results: Any, p: dict[str, Any]) -> None:
    torch.set_num_threads(1)
    join_group(rank, ranks)
    try:
        worker = Worker(p, rank, ranks.world, torch.device("cpu"))
        worker.step(synthetic_batch(p, rank, 0, torch.device("cpu")))
        results.put((rank, worker.checksum()))
        del worker
    finally:
        leave_group()
