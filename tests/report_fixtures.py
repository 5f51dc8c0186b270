"""A hand-made run for the report's tests: every workload, every status, GPU scaling,
prices, and an implausible row, with figures chosen so each table's values are known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord, Status
from orchestrator.results.run_directory import RunDirectory

UNITS = {"lstm_lm": "word", "rnn_micro": "example", "transformer_ft": "sample",
         "sleep": "sample", "nmt_dp": "word"}
GIB = 1024 ** 3


def cell(store: RunDirectory, cell_id: str, config_id: str, workload: str, hardware: str,
         params: dict[str, Any], rates: list[float], status: str = "ok", repeat: int = 1,
         stack: str = "here", gpus: int = 0, price: float | None = None,
         extra: dict[str, Any] | None = None, flags: list[str] | None = None,
         error: str | None = None, pins: dict[str, Any] | None = None,
         started_at: str = "2026-11-22T00:00:00+00:00",
         cell_fields: dict[str, Any] | None = None) -> None:
    ident = {"run": "fixture", "cell_id": cell_id, "config_id": config_id, "repeat": repeat}
    provenance = ProvenanceRecord(**{
        **ident, "hostname": hardware, "python": "3.11.7", "framework": "torch",
        "framework_version": "2.13.0", "gpu_count": gpus or None,
        "gpu_model": "NVIDIA A100-SXM4-40GB" if gpus else None,
        "driver": "570.86" if gpus else None, "cuda": "12.6" if gpus else None,
        "instance_type": "p4d.24xlarge" if price else None, "price_per_hour_usd": price,
        "price_source": "shipped-table 2025-05-01" if price else None,
        "repo_digest": f"registry/matrix-bench@sha256:{'ab' * 32}" if stack != "here" else None,
        **(pins or {})})
    measurements = [MeasurementRecord(
        **ident, epoch=i + 1, train_s=1000 / rate, items=1000.0, item_unit=UNITS[workload],
        items_per_s=rate, step_s_median=0.01, steps=max(1, round(1000 / rate / 0.01)),
        host_rss_peak_bytes=GIB,
        mem_alloc_peak_bytes=2 * GIB * gpus if gpus else None, **(extra or {}))
        for i, rate in enumerate(rates)]
    record = CellRecord(**ident, status=Status(status), started_at=started_at,
                        wall_s=10.0, hardware=hardware, stack=stack, workload=workload,
                        error=error, flags=flags or [], **(cell_fields or {}),
                        **{f"param.{k}": v for k, v in params.items()})
    store.append([provenance, *measurements, record])


def fixture_run(root: Path) -> RunDirectory:
    store = RunDirectory(root)
    store.root.mkdir(parents=True)
    # lstm_lm, seed 000's shape: one setting, three machines (two repeats on the first);
    # each epoch has 0.02 s of warm-up and 0.05 s of evaluation around its timed steps, and
    # no epoch_s (recorded before the meter measured it): the whole epoch is their sum.
    lm_extra = {"warmup_s": 0.02, "eval_s": 0.05}
    for repeat in (1, 2):
        cell(store, f"lm-a{repeat}", "lm-a", "lstm_lm", "c5.xlarge", {"batch_size": 64},
             [1000.0, 1020.0], repeat=repeat, extra=lm_extra)
    cell(store, "lm-b", "lm-b", "lstm_lm", "c5.18xlarge", {"batch_size": 64}, [4000.0, 4000.0],
         extra=lm_extra)
    cell(store, "lm-c", "lm-c", "lstm_lm", "laptop", {"batch_size": 64}, [2000.0, 2200.0],
         extra=lm_extra)
    # rnn_micro, seed 001's shape: fused vs unfused at one size; the fused round spent
    # 1.5 s warming up (compiling) and 1.6 s in all.
    for impl, train_us, fwd_us, whole in (("fused", 50.0, 20.0, {"warmup_s": 1.5,
                                                                  "epoch_s": 1.6}),
                                          ("unfused", 400.0, 150.0, {})):
        cell(store, f"rnn-{impl}", f"rnn-{impl}", "rnn_micro", "laptop",
             {"rnn_impl": impl, "layers": 1, "batch_size": 32, "seq_len": 30, "hidden": 512},
             [1e6 / train_us], extra={"us_per_example_train": train_us,
                                      "us_per_example_fwd": fwd_us, **whole})
    # transformer_ft, seed 004's shape (precision x device) on priced A100s, scaling over
    # 1, 2 and 4 GPUs at fp32 (speedups 1, 1.8, 3.2), and an implausible bf16 row.
    for gpus, rate in ((1, 100.0), (2, 180.0), (4, 320.0)):
        cell(store, f"ft-fp32-{gpus}", f"ft-fp32-{gpus}", "transformer_ft", f"p4d-{gpus}gpu",
             {"precision": "fp32"}, [rate, rate], stack="torch-cu126", gpus=gpus,
             price=32.77, extra={"train_iters_per_s": rate / 32})
    cell(store, "ft-bf16-1", "ft-bf16-1", "transformer_ft", "p4d-1gpu", {"precision": "bf16"},
         [900.0, 900.0], stack="torch-cu126", gpus=1, price=32.77,
         extra={"train_iters_per_s": 900 / 32}, flags=["implausible"],
         error="implausible: epoch 1 achieves 412 TFLOP/s, over the 312 TFLOP/s peak")
    # one cell per status that is not ok, on the sleep workload
    for status in Status:
        if status is not Status.OK:
            cell(store, f"s-{status.value}", f"s-{status.value}", "sleep", "laptop",
                 {"seconds": 1.0, "fault": status.value}, [], status=status.value,
                 error=f"the {status.value} reason")
    cell(store, "s-ok", "s-ok", "sleep", "laptop", {"seconds": 1.0, "fault": "none"}, [1.0])
    return store
