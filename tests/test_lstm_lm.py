"""The `lstm_lm` workload for real on the CPU: its FLOP model, its data, and measured epochs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from orchestrator.worker.context import Unsupported
from orchestrator.worker.datasets import catalogue
from orchestrator.workload_registry import load_workload
from tests import cells
from workloads.lstm_lm.flops import WIKITEXT2_VOCAB, flops_per_item, forward_flops_per_item

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

PROJECT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT.parent / "shared" / "data"
SEED = load_workload("lstm_lm").resolve({})


def tiny(**given: Any) -> dict[str, Any]:
    return load_workload("lstm_lm").resolve({"preset": "tiny", "dataset": "synthetic", **given})


def make_cell(params: dict[str, Any], epochs: int, gpus: int = 0) -> dict[str, Any]:
    return cells.make_cell("lstm_lm", params, epochs, gpus)


def run_cell(tmp_path: Path, params: dict[str, Any], epochs: int) -> list[dict[str, Any]]:
    return cells.run_workload(tmp_path, "lstm_lm", params, epochs, 0)


def timed_words(params: dict[str, Any]) -> int:
    """Target words of the timed steps, from the batching rule: batch_size columns of
    tokens // batch_size rows, windows of seq_len over rows - 1 targets, warm-up left out."""
    batch, seq_len = params["batch_size"], params["seq_len"]
    targets = params["synthetic_tokens"] // batch - 1
    windows = [min(seq_len, targets - start) for start in range(0, targets, seq_len)]
    return sum(windows[params["warmup_steps"]:]) * batch


def test_flops_at_the_seed_settings_are_about_255_mflop_per_word() -> None:
    assert SEED["dataset"] == "wikitext2" and SEED["hidden"] == SEED["emb_dim"] == 1024
    assert flops_per_item(SEED) == pytest.approx(2.55e8, rel=0.02)
    # by hand: 2*4*1024*(1024+1024) LSTM + 2*1024*33278 projection = 84,930,560 forward
    assert forward_flops_per_item(SEED) == 84_930_560
    assert flops_per_item(SEED) == 3 * 84_930_560


def test_flops_scale_with_the_model() -> None:
    wide = {**SEED, "hidden": 2048}
    # LSTM 2*4*h*(e+h) and projection 2*h*V, times 3 for training.
    assert flops_per_item(wide) == 3 * (2 * 4 * 2048 * (1024 + 2048) + 2 * 2048 * WIKITEXT2_VOCAB)
    assert flops_per_item(wide) > 1.9 * flops_per_item(SEED)
    deep = {**SEED, "layers": 2}
    assert flops_per_item(deep) - flops_per_item(SEED) == 3 * 2 * 4 * 1024 * 2048
    small = tiny()
    assert flops_per_item(small) == 3 * (2 * 4 * 64 * 128 + 2 * 64 * small["vocab"])


def test_real_wikitext2_loads_with_the_pytorch_examples_tokenizer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from workloads.lstm_lm.workload import load_corpus

    # The shared copy is read-only: fetch must verify it in place and write nothing.
    monkeypatch.setenv("MATRIX_BENCH_DATA", str(SHARED_DATA))
    monkeypatch.setenv("MATRIX_BENCH_DATA_URL", "http://127.0.0.1:9")
    corpus = load_corpus({**SEED, "dataset": "wikitext2"})
    assert corpus.train.numel() == 2_088_628  # the data README's count for this tokenizer
    assert corpus.valid.numel() == 217_646 == SEED["eval_tokens"]
    assert corpus.vocab == WIKITEXT2_VOCAB == 33_278
    assert corpus.train.numel() == SEED["synthetic_tokens"]
    assert int(corpus.train.max()) == corpus.vocab - 1 and int(corpus.train.min()) == 0
    pinned = catalogue()["wikitext2"]
    assert corpus.sha256 == {f"{s.dataset_dir}/{s.name}": s.sha256 for s in pinned}


def test_tokenizer_appends_eos_per_line_and_shares_one_vocabulary(tmp_path: Path) -> None:
    from workloads.lstm_lm.workload import tokenize

    (tmp_path / "a.txt").write_text(" the cat \n\nsat\n")
    (tmp_path / "b.txt").write_text("the dog\n")
    (a, b), words = tokenize([tmp_path / "a.txt", tmp_path / "b.txt"])
    assert list(words) == ["the", "cat", "<eos>", "sat", "dog"]
    assert a.tolist() == [0, 1, 2, 2, 3, 2] and b.tolist() == [0, 4, 2]


def test_tiny_synthetic_epochs_are_measured(tmp_path: Path) -> None:
    params = tiny()
    records = run_cell(tmp_path, params, epochs=2)
    assert [r["epoch"] for r in records] == [1, 2]
    words = timed_words(params)
    for record in records:
        assert record["record"] == "measurement" and record["item_unit"] == "word"
        assert record["items"] == words
        assert record["warmup_steps"] == params["warmup_steps"]
        assert record["steps"] == math.ceil((params["synthetic_tokens"] // 16 - 1) / 32) - 2
        assert record["items_per_s"] == pytest.approx(record["items"] / record["train_s"])
        assert record["train_words_per_s"] == record["items_per_s"]
        assert record["eval_words_per_s"] == record["eval_items_per_s"] > 0
        assert record["eval_s"] > 0
        assert record["host_rss_peak_bytes"] > 0
        assert record["flops_per_item"] == flops_per_item(params)
        assert "mem_alloc_peak_bytes" not in record  # no CUDA probe on the CPU


def test_options_run_on_the_cpu(tmp_path: Path) -> None:
    params = tiny(layers=2, clip=0.25, synthetic_tokens=8000, eval_tokens=0)
    [record] = run_cell(tmp_path, params, epochs=1)
    assert record["items"] == timed_words(params)
    assert "eval_words_per_s" not in record and "eval_s" not in record  # nothing to evaluate


def test_bf16_on_the_cpu_runs_where_onednn_has_bf16_kernels_and_is_unsupported_elsewhere(
        tmp_path: Path) -> None:
    params = tiny(precision="bf16", layers=2, synthetic_tokens=8000, eval_tokens=0)
    if cells.cpu_has_bf16_lstm():
        [record] = run_cell(tmp_path, params, epochs=1)
        assert record["items"] == timed_words(params)
    else:
        with pytest.raises(Unsupported, match=r"nn\.LSTM cannot run in bf16 on this CPU"):
            run_cell(tmp_path, params, epochs=1)


def test_a_cpu_without_bf16_kernels_makes_a_bf16_cell_unsupported_with_the_reason(
        tmp_path: Path) -> None:
    # oneDNN capped at AVX2 (read when torch loads, so in a worker of its own) stands for a
    # CPU without AVX-512 on a machine that has it.
    done, records = cells.run_worker(tmp_path, make_cell(tiny(precision="bf16"), epochs=1),
                                     env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert done.returncode == 1
    [error] = [r for r in records if r["record"] == "error"]
    assert error["kind"] == "unsupported"
    assert "precision bf16: nn.LSTM cannot run in bf16 on this CPU" in error["message"]
    assert not [r for r in records if r["record"] == "measurement"]  # nothing timed as bf16


def test_gpu_only_precision_is_unsupported_on_the_cpu(tmp_path: Path) -> None:
    with pytest.raises(Unsupported, match="tf32"):
        run_cell(tmp_path, tiny(precision="tf32"), epochs=1)


def test_more_than_one_gpu_is_unsupported(tmp_path: Path) -> None:
    from workloads.lstm_lm import workload

    ctx = cells.context_for(make_cell(tiny(), epochs=1, gpus=2), tmp_path / "o")
    with pytest.raises(Unsupported, match="gpus=2"):
        workload.run(ctx)


def test_too_little_data_for_the_warmup_is_a_clear_error(tmp_path: Path) -> None:
    params = tiny(synthetic_tokens=16 * 40, warmup_steps=2)  # 39 targets: 2 windows of 32
    with pytest.raises(ValueError, match=r"gives 2 steps.*warmup_steps=2"):
        run_cell(tmp_path, params, epochs=1)


def test_the_worker_runs_a_cell_end_to_end(tmp_path: Path) -> None:
    params = tiny(synthetic_tokens=8000, eval_tokens=2000)
    done, written = cells.run_worker(tmp_path, make_cell(params, epochs=1))
    assert done.returncode == 0, done.stderr
    records = {r["record"]: r for r in written}
    assert records["measurement"]["items"] == timed_words(params)
    assert records["provenance"]["framework"] == "torch"
    assert records["provenance"]["data_sha256"] == {}  # synthetic data: no files


def test_it_really_trains_on_wikitext2(monkeypatch) -> None:
    from workloads.lstm_lm.workload import train_losses

    monkeypatch.setenv("MATRIX_BENCH_DATA", str(SHARED_DATA))
    params = load_workload("lstm_lm").resolve({"preset": "tiny", "dataset": "wikitext2"})
    losses = train_losses(params, steps=40)
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert math.isfinite(last) and first > 10  # about ln(33,278) at the start
    assert last < first - 0.5, losses
