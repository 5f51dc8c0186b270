"""The `transformer_ft` workload for real on the CPU: its FLOP model, its data, that it learns,
and measured epochs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from orchestrator.worker.context import Unsupported
from orchestrator.workload_registry import load_workload
from tests import cells
from workloads.transformer_ft.flops import flops_per_item, forward_flops_per_item

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

INFO = load_workload("transformer_ft")
SEED = INFO.resolve({})


def tiny(**given: Any) -> dict[str, Any]:
    return INFO.resolve({"preset": "tiny", **given})


def make_cell(params: dict[str, Any], epochs: int, gpus: int = 0) -> dict[str, Any]:
    return cells.make_cell("transformer_ft", params, epochs, gpus)


def run_cell(tmp_path: Path, params: dict[str, Any], epochs: int,
             gpus: int = 0) -> list[dict[str, Any]]:
    return cells.run_workload(tmp_path, "transformer_ft", params, epochs, gpus)


def test_seed_forward_is_about_11_2_gflop_per_example() -> None:
    assert (SEED["layers"], SEED["dim"], SEED["ffn"], SEED["seq_len"]) == (6, 768, 3072, 128)
    # By hand, per layer per token: QKV + output 4*2*768^2 = 4,718,592; FFN 2*2*768*3072 =
    # 9,437,184; scores + weighted sum 2*2*128*768 = 393,216. Head: 2*768^2 + 2*768*3.
    by_hand = 6 * 128 * (4_718_592 + 9_437_184 + 393_216) + 1_179_648 + 4_608
    assert forward_flops_per_item(SEED) == by_hand == 11_174_810_112
    assert forward_flops_per_item(SEED) == pytest.approx(11.2e9, rel=0.02)
    assert flops_per_item(SEED) == 3 * by_hand


def test_flops_scale_with_the_model() -> None:
    deep = {**SEED, "layers": 12}
    assert forward_flops_per_item(deep) - forward_flops_per_item(SEED) == 6 * 128 * 14_548_992
    long = {**SEED, "seq_len": 256}  # linear parts double, attention quadruples
    layers = 6 * (256 * (4_718_592 + 9_437_184) + 256 * 2 * 2 * 256 * 768)
    assert forward_flops_per_item(long) == layers + 1_184_256
    small = tiny()
    assert forward_flops_per_item(small) == 2 * 32 * (8 * 64**2 + 4 * 64 * 128 + 4 * 32 * 64) \
        + 2 * 64 * 64 + 2 * 64 * 3


def test_the_seed_model_has_distilbert_base_cased_shape() -> None:
    from workloads.transformer_ft.workload import build_model

    torch.manual_seed(0)
    model = build_model(SEED, torch.device("cpu"))
    assert isinstance(model, transformers.DistilBertForSequenceClassification)
    assert sum(t.numel() for t in model.parameters()) == 65_783_811  # 65.8 M
    assert model.classifier.out_features == 3 and len(model.distilbert.transformer.layer) == 6


def test_synthetic_data_is_padded_and_its_labels_follow_the_first_token() -> None:
    from workloads.transformer_ft.workload import make_data

    params = tiny(examples=1001)
    data = make_data(params, torch.device("cpu"))
    assert len(data.batches) == math.ceil(1001 / 8) and data.batches[-1][0].shape == (1, 32)
    ids = torch.cat([b[0] for b in data.batches])
    mask = torch.cat([b[1] for b in data.batches])
    labels = torch.cat([b[2] for b in data.batches])
    lengths = mask.sum(1)
    assert ids.shape == mask.shape == (1001, 32)
    assert bool((ids[mask == 0] == 0).all()) and bool((ids[mask == 1] > 0).all())
    assert bool((mask[:, 1:] <= mask[:, :-1]).all())  # real tokens first, then padding
    assert int(lengths.min()) == 6 and int(lengths.max()) == 18  # around mean_tokens 12
    assert float(lengths.float().mean()) == pytest.approx(12, abs=0.5)
    assert data.real_tokens == [int(b[1].sum()) for b in data.batches]
    assert labels.tolist() == (ids[:, 0] % 3).tolist()
    assert sorted(set(labels.tolist())) == [0, 1, 2]
    again = make_data(params, torch.device("cpu"))
    assert torch.equal(again.batches[5][0], data.batches[5][0])  # seeded


def test_lengths_are_capped_at_seq_len() -> None:
    from workloads.transformer_ft.workload import make_data

    data = make_data(tiny(mean_tokens=100, examples=16), torch.device("cpu"))
    assert data.real_tokens == [8 * 32, 8 * 32]


def test_the_tiny_model_learns() -> None:
    from workloads.transformer_ft.workload import train_losses

    losses = train_losses(tiny(), steps=40)
    assert len(losses) == 40 and all(math.isfinite(loss) for loss in losses)
    first, last = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    assert first == pytest.approx(math.log(3), abs=0.15)  # chance level at the start
    assert last < 0.7 * first, losses


def test_tiny_epochs_are_measured_with_every_declared_column(tmp_path: Path) -> None:
    params = tiny()
    records = run_cell(tmp_path, params, epochs=2)
    assert [r["epoch"] for r in records] == [1, 2]
    timed = 40 - params["warmup_steps"]
    for record in records:
        assert record["record"] == "measurement" and record["item_unit"] == "sample"
        assert set(INFO.metrics) <= set(record)
        assert record["steps"] == timed and record["items"] == timed * 8
        assert record["warmup_steps"] == 2
        assert record["train_iters_per_s"] == pytest.approx(timed / record["train_s"])
        assert record["train_samples_per_s"] == record["items_per_s"]
        assert record["train_tokens_per_s"] == pytest.approx(32 * record["items_per_s"])
        ratio = record["train_real_tokens_per_s"] / record["train_tokens_per_s"]
        assert ratio == pytest.approx(12 / 32, abs=0.03)
        assert record["flops_per_item"] == flops_per_item(params)
        assert record["host_rss_peak_bytes"] > 0
        assert "mem_alloc_peak_bytes" not in record and "eval_s" not in record


def test_real_tokens_are_counted_over_the_timed_steps_only(tmp_path: Path) -> None:
    from workloads.transformer_ft.workload import make_data

    params = tiny(examples=36, warmup_steps=3)  # 5 steps, the last of 4 examples
    [record] = run_cell(tmp_path, params, epochs=1)
    real = sum(make_data(params, torch.device("cpu")).real_tokens[3:])
    assert record["steps"] == 2 and record["items"] == 8 + 4
    assert record["train_real_tokens_per_s"] == pytest.approx(real / record["train_s"])


def test_bf16_runs_on_the_cpu(tmp_path: Path) -> None:
    [record] = run_cell(tmp_path, tiny(precision="bf16", examples=64, clip=0.0), epochs=1)
    assert record["steps"] == 6 and record["train_iters_per_s"] > 0


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_gpu_only_precisions_are_unsupported_on_the_cpu(tmp_path: Path, precision: str) -> None:
    with pytest.raises(Unsupported, match=precision):
        run_cell(tmp_path, tiny(precision=precision), epochs=1)


def test_more_than_one_gpu_is_unsupported(tmp_path: Path) -> None:
    with pytest.raises(Unsupported, match="gpus=2"):
        run_cell(tmp_path, tiny(), epochs=1, gpus=2)


def test_too_few_examples_for_the_warmup_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"16 examples give 2 steps.*warmup_steps=2"):
        run_cell(tmp_path, tiny(examples=16), epochs=1)


def test_weights_load_from_a_local_directory(tmp_path: Path) -> None:
    from workloads.transformer_ft.workload import build_model

    params = tiny()
    saved = build_model(params, torch.device("cpu"))
    saved.save_pretrained(tmp_path / "model")
    loaded = build_model({**params, "weights": str(tmp_path / "model")}, torch.device("cpu"))
    assert torch.equal(loaded.distilbert.embeddings.word_embeddings.weight,
                       saved.distilbert.embeddings.word_embeddings.weight)
    with pytest.raises(ValueError, match="do not match the params"):
        build_model({**params, "weights": str(tmp_path / "model"), "layers": 3},
                    torch.device("cpu"))
    build_model({**params, "labels": 2}, torch.device("cpu")).save_pretrained(tmp_path / "two")
    rehead = build_model({**params, "weights": str(tmp_path / "two")}, torch.device("cpu"))
    assert rehead.classifier.out_features == 3  # a new head for the params' labels


def test_missing_weights_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such directory"):
        run_cell(tmp_path, tiny(weights=str(tmp_path / "nowhere")), epochs=1)


def test_the_worker_runs_a_cell_end_to_end(tmp_path: Path) -> None:
    done, written = cells.run_worker(tmp_path, make_cell(tiny(examples=80), epochs=1))
    assert done.returncode == 0, done.stderr
    records = {r["record"]: r for r in written}
    assert records["measurement"]["items"] == 8 * 8
    assert records["provenance"]["framework"] == "torch"
    assert "error" not in records
