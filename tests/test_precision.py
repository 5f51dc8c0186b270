"""The precision glossary's switches (docs/ARCHITECTURE.md: parameter glossary): true fp32
turns torch's TF32 off, and every workload's provenance says which switches were in effect,
as the framework reads them back after the workload set them, through the real worker and
into parquet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from orchestrator.report.frame import write_results
from orchestrator.results.records import (
    CellRecord,
    MeasurementRecord,
    ProvenanceRecord,
    Record,
    Status,
    parse_record,
)
from orchestrator.results.run_directory import RunDirectory
from orchestrator.worker.records import ENVELOPE
from orchestrator.workload_registry import load_workload
from tests import cells
from tests.conftest import SHARED_DATA
from workloads.torch_common import float32_switches, precision_switches, set_precision

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

CPU = torch.device("cpu")
TORCH_KEYS = {"torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
              "torch.float32_matmul_precision", "torch.autocast_dtype"}
TRUE_FP32 = {"torch.backends.cuda.matmul.allow_tf32": "False",
             "torch.backends.cudnn.allow_tf32": "False",
             "torch.float32_matmul_precision": "highest", "torch.autocast_dtype": "off"}


@pytest.fixture
def torch_flags() -> Iterator[None]:
    """torch's TF32 switches are global to the process: put them back as they were."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_fp32_turns_cudnn_tf32_off_which_torch_leaves_on(torch_flags: None) -> None:
    torch.backends.cudnn.allow_tf32 = True  # torch's own default
    torch.backends.cuda.matmul.allow_tf32 = True
    set_precision("fp32", CPU)
    assert torch.backends.cudnn.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"


def test_the_switches_are_read_back_from_torch_not_taken_from_the_label(
        torch_flags: None) -> None:
    set_precision("fp32", CPU)
    assert precision_switches("fp32", CPU) == TRUE_FP32
    torch.backends.cudnn.allow_tf32 = True  # flipped behind the workload's back
    assert float32_switches()["torch.backends.cudnn.allow_tf32"] == "True"
    set_precision("bf16", CPU)
    assert precision_switches("bf16", CPU) == {**TRUE_FP32, "torch.autocast_dtype": "bfloat16"}


@pytest.mark.parametrize("precision", ["tf32", "fp16"])
def test_gpu_only_precisions_are_refused_on_the_cpu_before_any_switch_is_set(
        torch_flags: None, precision: str) -> None:
    from orchestrator.worker.context import Unsupported

    torch.backends.cudnn.allow_tf32 = True
    with pytest.raises(Unsupported, match=f"precision {precision} needs a GPU"):
        set_precision(precision, CPU)
    assert torch.backends.cudnn.allow_tf32 is True


# Every workload, through the real worker -------------------------------------------------------

CELLS: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    "lstm_lm": ("lstm_lm", {"dataset": "synthetic", "synthetic_tokens": 4000, "eval_tokens": 0},
                TRUE_FP32),
    "rnn_micro": ("rnn_micro", {"timed_steps": 3}, TRUE_FP32),
    "transformer_ft": ("transformer_ft", {"examples": 40}, TRUE_FP32),
    "nmt_dp": ("nmt_dp", {"batches_per_round": 3}, TRUE_FP32),
    "keras_lstm": ("keras_lstm", {"backend": "tensorflow", "dataset": "synthetic",
                                  "samples": 512},
                   {"keras.dtype_policy": "float32", "tf.tensor_float_32_execution": "False"}),
    "sleep": ("sleep", {"seconds": 0.01, "steps": 1}, {}),
}


@pytest.mark.parametrize("name", list(CELLS))
def test_every_workload_records_its_frameworks_switches_in_provenance(
        tmp_path: Path, name: str) -> None:
    workload, given, switches = CELLS[name]
    info = load_workload(workload)
    params = info.resolve({**({"preset": "tiny"} if "tiny" in info.presets else {}), **given})
    done, records = cells.run_worker(tmp_path, cells.make_cell(workload, params, epochs=1),
                                     env={"MATRIX_BENCH_DATA": str(SHARED_DATA)})
    assert done.returncode == 0, done.stderr[-3000:]
    [provenance] = [r for r in records if r["record"] == "provenance"]
    assert provenance["precision_switches"] == switches
    assert ProvenanceRecord(run="r", cell_id="c", config_id="c", repeat=1,
                            **{k: v for k, v in provenance.items() if k not in ENVELOPE})


# The journal and parquet -------------------------------------------------------------------------

def batch(cell_id: str, **provenance: Any) -> list[Record]:
    ident: dict[str, Any] = {"run": "r", "config_id": cell_id, "repeat": 1, "cell_id": cell_id}
    return [ProvenanceRecord(**ident, **provenance),
            MeasurementRecord(**ident, epoch=1, train_s=1.0, items=10.0, item_unit="word",
                              items_per_s=10.0),
            CellRecord(**ident, status=Status.OK, started_at="2026-01-01T00:00:00+00:00",
                       wall_s=1.0, hardware="h", stack="s", workload="sleep")]


def test_the_switches_go_from_the_journal_to_parquet_as_json_text(tmp_path: Path) -> None:
    store = RunDirectory(tmp_path)
    store.append(batch("a", precision_switches=TRUE_FP32))
    store.append(batch("b"))  # no switches: a worker without a framework
    write_results(store)
    df = pd.read_parquet(store.parquet).set_index("cell_id")
    assert json.loads(df.loc["a", "precision_switches"]) == TRUE_FP32
    assert json.loads(df.loc["b", "precision_switches"]) == {}
    older = parse_record({"schema_version": 2, "run": "r", "cell_id": "c", "config_id": "c",
                          "repeat": 1, "record": "provenance", "hostname": "x"})
    assert isinstance(older, ProvenanceRecord) and older.precision_switches == {}
