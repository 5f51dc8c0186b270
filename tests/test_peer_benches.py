"""The peer comparisons' own logic (bench/*_vs_*.py, issue 55): a pair on other threads fails,
a peer run without its timed intervals fails instead of being read from its start-up, and
nanoGPT's intervals lose the batch sampling and logging that ours does not time."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import PROJECT


def bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, PROJECT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nanogpt = bench("gpt_lm_vs_nanogpt")
trainer = bench("transformer_ft_vs_trainer")
examples = bench("lstm_lm_vs_examples")
UnfairPair = sys.modules["peer_threads"].UnfairPair  # the one every bench imports


def printed(iterations: int) -> str:
    """train.py's output for `iterations` iterations: the first holds its start-up."""
    lines = ["step 0: train loss 8.3, val loss 8.3"]
    lines += [f"iter {i}: loss 8.3000, time {3500.0 if i == 0 else 50.0:.2f}ms, mfu -100.00%"
              for i in range(iterations)]
    return "\n".join(lines) + "\n"


def test_nanogpt_is_read_from_its_timed_iterations_only():
    assert nanogpt.peer_intervals(printed(5), 2, 3) == [0.05, 0.05, 0.05]


@pytest.mark.parametrize("iterations", [1, 3])
def test_a_nanogpt_run_short_of_its_iterations_is_refused_not_read_from_its_start_up(iterations):
    with pytest.raises(UnfairPair, match=f"printed {iterations} iterations, not 5"):
        nanogpt.peer_intervals(printed(iterations), 2, 3)


def test_nanogpt_is_timed_on_the_same_work_as_ours():
    run = {"intervals_s": [0.05, 0.07], "train_s_as_printed": 0.12, "tokens": 1200}
    same = nanogpt.same_work(run, 0.01)
    assert same["train_s"] == pytest.approx(0.10)
    assert same["tokens_per_s"] == pytest.approx(12_000)
    with pytest.raises(UnfairPair, match="not longer than its batch sampling"):
        nanogpt.same_work(run, 0.06)


def test_pytorch_examples_main_with_one_log_interval_is_refused():
    assert examples.peer_main_rate([3500.0, 500.0, 500.0])[
        "words_per_s_median_after_first_interval"] == pytest.approx(35 * 32 / 0.5)
    with pytest.raises(UnfairPair, match=r"main\.py logged 1 interval"):
        examples.peer_main_rate([3500.0])


def test_the_trainer_pair_on_other_threads_fails(monkeypatch):
    def side(threads: int) -> Any:
        return lambda warmup, steps, batch, asked: {"threads": threads, "samples_per_s": 1.0}

    monkeypatch.setattr(trainer, "load_average", lambda: 0.0)
    monkeypatch.setattr(trainer, "run_ours", side(1))
    monkeypatch.setattr(trainer, "run_trainer", side(1))
    assert trainer.one_round(1, 3, 12, 8, 1)["ratio"] == 1.0
    monkeypatch.setattr(trainer, "run_ours", side(2))  # as ours ran in one series
    with pytest.raises(UnfairPair, match="ours computed with 2, the peer with 1"):
        trainer.one_round(1, 3, 12, 8, 1)


def test_the_trainer_pair_runs_the_batch_asked_on_both_sides():
    assert trainer.params(3, 12, 8).items() >= {"batch_size": 8, "examples": 120,
                                                "warmup_steps": 3}.items()
    assert trainer.parse(["--batch-size", "8"]).batch_size == 8
    assert trainer.parse([]).batch_size == 32  # the seed's
