"""How long the report of a large sweep takes: the journal read into the DataFrame, the
derived columns, report.md and its figures, for runs of growing size.

A synthetic journal (no workload runs) of C configurations of `lstm_lm` x 3 repeats x 5
epochs on 4 hardware entries, every tenth cell failed, written through the real
RunDirectory; then `run_frame(store)` and `write_report()` are timed in this process, median
of three. The judging of every row (orchestrator/report/judge.py, part of `frame()`) is also timed
alone, on the frame it judges. Usage: python bench/report_speed.py [--configs 10 100 400]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.report.analysis import add_scaling_columns
from orchestrator.report.frame import recorded, run_frame
from orchestrator.report.judge import judged
from orchestrator.report.writer import write_report
from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord
from orchestrator.results.run_directory import RunDirectory

HARDWARE = ("c5.xlarge", "c5.18xlarge", "p3.8xlarge-1gpu", "laptop")
# Every parameter lstm_lm's FLOP model reads, so every row is judged against a peak.
MODEL = {f"param.{k}": v for k, v in {"dataset": "synthetic", "emb_dim": 64, "hidden": 64,
                                      "layers": 1, "vocab": 1000, "precision": "fp32"}.items()}


def synthetic_run(root: Path, configs: int) -> RunDirectory:
    store = RunDirectory(root)
    root.mkdir(parents=True)
    n = 0
    for config in range(configs):
        hardware = HARDWARE[config % len(HARDWARE)]
        for repeat in (1, 2, 3):
            n += 1
            ident = {"run": "bench", "cell_id": f"c{config}-{repeat}",
                     "config_id": f"cfg{config}", "repeat": repeat}
            failed = n % 10 == 0
            rate = 1000.0 + config
            measurements = [] if failed else [
                MeasurementRecord(**ident, epoch=e, train_s=2.0, items=2 * rate,
                                  item_unit="word", items_per_s=rate * (1 + 0.01 * e),
                                  host_rss_peak_bytes=2**30) for e in range(1, 6)]
            cell = CellRecord(**ident, status="failed" if failed else "ok",
                              started_at="2026-11-22T00:00:00+00:00", wall_s=12.0,
                              hardware=hardware, stack="here", workload="lstm_lm",
                              error="RuntimeError: injected" if failed else None,
                              **{"param.batch_size": 16 * (1 + config % 8),
                                 "param.seq_len": 32 * (1 + config // 8), **MODEL})
            gpu = {"gpu_model": "Tesla V100-SXM2-16GB", "gpu_count": 1} \
                if "gpu" in hardware else {}
            store.append([ProvenanceRecord(**ident, hostname=hardware, cpu_count=2, **gpu),
                          *measurements, cell])
    return store


def timed(function, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, nargs="+", default=[10, 100, 400])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for configs in args.configs:
            store = synthetic_run(Path(tmp) / f"run{configs}", configs)
            frame_s = timed(lambda store=store: run_frame(store))
            df = run_frame(store)
            unjudged = add_scaling_columns(recorded(store))
            judge_s = timed(lambda unjudged=unjudged: judged(unjudged))
            report_s = timed(lambda df=df, store=store: write_report(store.root, df))
            rows.append({"configs": configs, "cells": configs * 3, "rows": len(df),
                         "frame_s": round(frame_s, 3), "judge_s": round(judge_s, 3),
                         "report_s": round(report_s, 3)})
            print(rows[-1], flush=True)
    result = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
              "python": platform.python_version(), "rows": rows}
    out = Path(__file__).parent / "results" / "report_speed.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
