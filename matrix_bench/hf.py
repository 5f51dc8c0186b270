"""`MatrixBenchCallback`: a Hugging Face `transformers.Trainer` reports its epochs and steps
to matrix-bench with one line, `Trainer(..., callbacks=[MatrixBenchCallback()])`.

Each optimizer step is a timed step; its items are the samples it trained on: the global
batch (per-device batch x gradient accumulation x processes), the epoch's last step only
what was left of the dataset where its length is known. The first `warmup_steps` steps of
each epoch are warm-up. Imports transformers, so only a script that uses it imports this.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from orchestrator.worker.client import Bench, attach
from orchestrator.worker.measure import EpochMeter


class MatrixBenchCallback(TrainerCallback):
    """Times a Trainer's epochs as a matrix-bench workload does (orchestrator/worker/client.py)."""

    def __init__(self, warmup_steps: int = 2) -> None:
        self.warmup_steps = warmup_steps
        self.bench: Bench | None = None
        self._meter: EpochMeter | None = None
        self._step: Any = None  # the open step's context manager
        self._left: float | None = None  # samples of the epoch not yet trained, where known

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.bench = attach(framework="torch", device=args.device)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.bench is not None
        self._meter = self.bench.start_epoch(warmup_steps=self.warmup_steps)
        loader = kwargs.get("train_dataloader")
        dataset = getattr(loader, "dataset", None)
        try:
            self._left = float(len(dataset))  # type: ignore[arg-type]
        except TypeError:  # an iterable dataset: no length
            self._left = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self._meter is not None
        batch = float(args.per_device_train_batch_size * args.gradient_accumulation_steps
                      * args.world_size)
        items = batch if self._left is None else max(min(batch, self._left), 1.0)
        if self._left is not None:
            self._left -= items
        self._step = self._meter.step(items)
        self._step.__enter__()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._step is not None:
            self._step.__exit__(None, None, None)
            self._step = None

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.bench is not None and self._meter is not None
        self.bench.end_epoch(self._meter)
        self._meter = None
