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

CUES_PER_LABEL = 4  # the first token is one of labels * CUES_PER_LABEL ids; label = id % labels
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # input_ids, attention_mask, labels


@dataclass
class Data:
    """The epoch's batches on the device, and the real (non-padding) tokens of each."""

    batches: list[Batch]
    real_tokens: list[int]


def make_data(p: dict[str, Any], device: torch.device) -> Data:
    """Seeded padded examples, cut into batches of batch_size (the last may be partial)."""
    generator = torch.Generator().manual_seed(p["seed"])
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

    def __init__(self, p: dict[str, Any], device: torch.device) -> None:
        self.precision, self.device = p["precision"], device
        set_precision(self.precision, device)
        torch.manual_seed(p["seed"])
        self.model = build_model(p, device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=p["lr"],
                                           weight_decay=0.0)
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
    if ctx.gpus > 1:  # single device; data parallel is another configuration, not yet here
        raise Unsupported(f"transformer_ft trains on one device; this hardware has gpus={ctx.gpus}")
    device = use_torch(ctx)
    warmup, seq_len = p["warmup_steps"], p["seq_len"]
    trainer = Trainer(p, device)
    ran_on(ctx, trainer.model)
    ctx.precision_switches.update(precision_switches(trainer.precision, device))
    data = make_data(p, device)
    if len(data.batches) < warmup + 1:
        raise ValueError(f"{p['examples']} examples give {len(data.batches)} steps of batch_size "
                         f"{p['batch_size']}, not more than warmup_steps={warmup}: use more "
                         "examples or smaller batches")

    for epoch in ctx.epoch_range():
        trainer.model.train()
        meter = ctx.start_epoch(warmup)
        for batch in data.batches:
            with meter.step(items=batch[0].size(0)):
                trainer.step(batch)
        summary = meter.summary()
        train_s, timed = float(summary["train_s"]), int(summary["steps"])
        real = sum(data.real_tokens[warmup:])
        ctx.end_epoch(epoch, meter,
                      train_iters_per_s=timed / train_s,
                      train_samples_per_s=float(summary["items_per_s"]),
                      train_tokens_per_s=float(summary["items"]) * seq_len / train_s,
                      train_real_tokens_per_s=real / train_s)
