"""The `transformer_ft` workload: seed 004's DistilBERT fine-tuning, measured per epoch.

`DistilBertForSequenceClassification` built from a `DistilBertConfig` with the params' shape
and random weights (nothing is downloaded), or loaded offline from a local directory
(`weights`). The attention implementation is transformers' default for the installed version
(`sdpa` where available; the cell log names it). Training as the seed's Trainer: AdamW at a
constant lr, weight decay 0, gradient norm clipped to `clip`, fp16 through autocast and a grad
scaler. Synthetic MNLI-like data is generated seeded, before any clock starts, and moved to the
device: each example has a random number of real tokens and is padded (id 0) to seq_len; its
label is its first token's id mod labels, the first token being drawn from a few "cue" ids, so
the task is learnable from fresh batches. Examples are visited in order (the data is i.i.d.).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import transformers
from torch import nn

from orchestrator.worker.context import Context, Unsupported
from workloads.torch_common import (
    autocast,
    backward_and_step,
    precision_switches,
    ran_on,
    set_precision,
    use_torch,
)
from workloads.torch_ranks import (
    Ranks,
    cell_ranks,
    first_rank_device,
    join_group,
    leave_group,
    other_rank_device,
    rank_group,
)

CUES_PER_LABEL = 4  # the first token is one of labels * CUES_PER_LABEL ids; label = id % labels
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # input_ids, attention_mask, labels


@dataclass
class Data:
    """The epoch's batches on the device, and the real (non-padding) tokens of each."""

    batches: list[Batch]
    real_tokens: list[int]


def make_data(p: dict[str, Any], device: torch.device, rank: int = 0) -> Data:
    """Seeded padded examples (each rank its own), cut into batches of batch_size (the last
    may be partial)."""
    generator = torch.Generator().manual_seed(p["seed"] + 1_000_003 * rank)
    count, seq_len, vocab = p["examples"], p["seq_len"], p["vocab"]
    labels, mean, batch = p["labels"], p["mean_tokens"], p["batch_size"]
    low = min(math.ceil(mean / 2), seq_len)  # uniform in [low, 2 * mean - low]: mean `mean`
    high = max(low, min(seq_len, 2 * mean - low))
    lengths = torch.randint(low, high + 1, (count,), generator=generator)
    ids = torch.randint(1, vocab, (count, seq_len), generator=generator)
    cues = min(vocab - 1, labels * CUES_PER_LABEL)
    ids[:, 0] = torch.randint(1, cues + 1, (count,), generator=generator)
    mask = (torch.arange(seq_len) < lengths[:, None]).long()
    ids *= mask
    targets = ids[:, 0] % labels
    ids, mask, targets = ids.to(device), mask.to(device), targets.to(device)
    starts = range(0, count, batch)
    return Data([(ids[s:s + batch], mask[s:s + batch], targets[s:s + batch]) for s in starts],
                [int(lengths[s:s + batch].sum()) for s in starts])


def build_model(p: dict[str, Any], device: torch.device) -> nn.Module:
    """Random weights from the params' config, or a local save_pretrained directory."""
    weights = p["weights"]
    if weights == "random":
        config = transformers.DistilBertConfig(
            vocab_size=p["vocab"], dim=p["dim"], n_layers=p["layers"],
            n_heads=p["heads"], hidden_dim=p["ffn"], num_labels=p["labels"],
            max_position_embeddings=max(512, p["seq_len"]))
        model = transformers.DistilBertForSequenceClassification(config)
    else:
        path = Path(weights).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"weights={weights!r}: no such directory (give 'random' or "
                                    "a directory written by save_pretrained)")
        model = transformers.DistilBertForSequenceClassification.from_pretrained(
            path, num_labels=p["labels"], ignore_mismatched_sizes=True,
            local_files_only=True).float()
        _check_shape(model.config, p)
    print(f"transformer_ft: transformers {transformers.__version__}, attention "
          f"{model.config._attn_implementation}, {sum(t.numel() for t in model.parameters()):,}"
          " parameters", flush=True)
    return model.to(device)


def _check_shape(config: Any, p: dict[str, Any]) -> None:
    """Loaded weights must have the params' shape, or the FLOP model would describe another."""
    expected = {"n_layers": p["layers"], "dim": p["dim"], "n_heads": p["heads"],
                "hidden_dim": p["ffn"], "vocab_size": p["vocab"]}
    wrong = {k: (getattr(config, k), v) for k, v in expected.items() if getattr(config, k) != v}
    if wrong or config.max_position_embeddings < p["seq_len"]:
        raise ValueError(f"weights {p['weights']!r} do not match the params (config vs params: "
                         f"{wrong}, max_position_embeddings {config.max_position_embeddings})")


class Trainer:
    """Model, AdamW and grad scaler; `step` is one training iteration on one batch."""

    def __init__(self, p: dict[str, Any], device: torch.device, ranks: int = 1) -> None:
        self.precision, self.device = p["precision"], device
        set_precision(self.precision, device)
        torch.manual_seed(p["seed"])  # every rank starts from the same weights
        self.model = build_model(p, device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=p["lr"],
                                           weight_decay=0.0)
        if ranks > 1:  # gradients all-reduced across the group as they are computed
            self.model = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.precision == "fp16")
        self.clip = p["clip"]

    def step(self, batch: Batch) -> torch.Tensor:
        """Forward, backward, optimizer step; the loss stays on the device (no sync)."""
        input_ids, attention_mask, labels = batch
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.precision, self.device):
            loss = self.model(input_ids=input_ids, attention_mask=attention_mask,
                              labels=labels).loss
        backward_and_step(loss, self.model, self.optimizer, self.scaler, self.clip)
        return loss.detach()


def train_losses(p: dict[str, Any], steps: int, device: str = "cpu") -> list[float]:
    """Train `steps` iterations (cycling over the epoch's batches); the loss of each.

    The same model, data and step as run(), for tests that check that it learns."""
    trainer = Trainer(p, torch.device(device))
    data = make_data(p, torch.device(device))
    trainer.model.train()
    batches = data.batches
    return [float(trainer.step(batches[i % len(batches)])) for i in range(steps)]


def run(ctx: Context) -> None:
    """Fine-tune for ctx.epochs epochs; one measurement record per epoch."""
    p = ctx.params
    if p["workers"] * ctx.node.nodes == 1 and ctx.gpus > 1:
        raise Unsupported(f"transformer_ft trains on one device; this hardware has gpus="
                          f"{ctx.gpus} (workers: 0 trains on each of them)")
    if (p["workers"] or max(ctx.gpus, 1)) * ctx.node.nodes > 1:
        _run_ranks(ctx)
        return
    device = use_torch(ctx)
    trainer = Trainer(p, device)
    data = _prepared(ctx, trainer, make_data(p, device), device)
    for epoch in ctx.epoch_range():
        _timed_epoch(ctx, epoch, trainer, data, ranks=1)


def _prepared(ctx: Context, trainer: Trainer, data: Data, device: torch.device) -> Data:
    """The epoch's data, checked, with where the model runs and its precision recorded."""
    p = ctx.params
    ran_on(ctx, getattr(trainer.model, "module", trainer.model))
    ctx.precision_switches.update(precision_switches(trainer.precision, device))
    if len(data.batches) < p["warmup_steps"] + 1:
        raise ValueError(f"{p['examples']} examples give {len(data.batches)} steps of batch_size "
                         f"{p['batch_size']}, not more than warmup_steps={p['warmup_steps']}: "
                         "use more examples or smaller batches")
    return data


def _timed_epoch(ctx: Context, epoch: int, trainer: Trainer, data: Data, ranks: int) -> None:
    """One timed epoch of every rank's batches: items and tokens count all `ranks`' (each
    rank trains as many examples; their real tokens are summed across the group)."""
    p = ctx.params
    warmup, seq_len = p["warmup_steps"], p["seq_len"]
    trainer.model.train()
    if ranks > 1:
        dist.barrier()  # every rank starts the epoch together
    meter = ctx.start_epoch(warmup)
    last = len(data.batches) - 1
    for index, batch in enumerate(data.batches):
        with meter.step(items=batch[0].size(0) * ranks):
            trainer.step(batch)
            if ranks > 1 and index == last:
                dist.barrier()  # the epoch ends with the slowest rank's step
    summary = meter.summary()
    train_s, timed = float(summary["train_s"]), int(summary["steps"])
    real = _group_sum(sum(data.real_tokens[warmup:]), trainer.device)
    ctx.end_epoch(epoch, meter,
                  train_iters_per_s=timed / train_s,
                  train_samples_per_s=float(summary["items_per_s"]),
                  train_tokens_per_s=float(summary["items"]) * seq_len / train_s,
                  train_real_tokens_per_s=real / train_s)


def _group_sum(count: int, device: torch.device) -> float:
    """`count` summed over the group's ranks (itself where there is no group: one rank)."""
    if not dist.is_initialized():
        return float(count)
    total = torch.tensor([float(count)], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return float(total.item())


def _run_ranks(ctx: Context) -> None:
    """Data parallel over the cell's ranks (torch_ranks.py), on one node or across its
    nodes: node 0's first rank times, every other rank runs the same steps untimed."""
    p = ctx.params
    ranks = cell_ranks(ctx)
    device = first_rank_device(ctx, ranks)
    with rank_group(ctx, ranks, _other_rank, p, ctx.epochs) as ranks:
        trainer = Trainer(p, device, ranks.world)
        data = _prepared(ctx, trainer, make_data(p, device, ranks.first), device)
        for epoch in ctx.epoch_range():
            if ranks.node.times:
                _timed_epoch(ctx, epoch, trainer, data, ranks.world)
            else:  # another node's first rank: the same steps, untimed
                _untimed_epoch(trainer, data, p["warmup_steps"])
        del trainer  # the DDP model is dropped before the group is left


def _other_rank(rank: int, ranks: Ranks, p: dict[str, Any], epochs: int) -> None:
    """A node's other ranks: the first rank's steps and collectives, untimed."""
    device = other_rank_device(rank, ranks)
    join_group(rank, ranks)
    try:
        trainer = Trainer(p, device, ranks.world)
        data = make_data(p, device, rank)
        for _ in range(epochs):
            _untimed_epoch(trainer, data, p["warmup_steps"])
        del trainer
    finally:
        leave_group()


def _untimed_epoch(trainer: Trainer, data: Data, warmup: int) -> None:
    """The timed epoch's steps and collectives, this rank's real tokens counted in."""
    trainer.model.train()
    dist.barrier()
    for batch in data.batches:
        trainer.step(batch)
    dist.barrier()
    _group_sum(sum(data.real_tokens[warmup:]), trainer.device)
