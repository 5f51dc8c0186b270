"""Container overhead: the same cell through the process and docker executors, and the cost
of a build whose image already exists.

The cell is `lstm_lm` at its `tiny` preset on synthetic tokens (2 epochs), made by the
project's own expansion from a matrix with two stacks: `here` (this environment) and
`torch-2.13-cpu` (the shipped lock, CPU torch 2.13.0, on the given base image, installed
from the given wheelhouse). Both executors are called directly (`execute`, as a Ray task or
`--no-ray` calls them), alternated in rounds whose order flips each round, so drift on the
machine hits both alike. Per round: the cell's `wall_s` (executor start to records) and the
measured training time of the timed epoch (epoch 2, after the first epoch's warm-up), from
the measurement records. Reported: medians, and docker/process ratios of both.

Cache hit: `build_images` for the stack when its image exists (render, hash, one inspect),
median of five; and `matrix build FILE` as a user runs it (CLI start included).

    .venv/bin/python bench/container_overhead.py --base-image IMAGE --wheelhouse DIR \\
        [--rounds 6] [--out bench/results/container_overhead.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from orchestrator.executors import execute  # noqa: E402
from orchestrator.plan.cells import expand  # noqa: E402
from orchestrator.results.records import CellRecord, MeasurementRecord  # noqa: E402
from orchestrator.run.image_builds import build_images, image_stacks  # noqa: E402
from orchestrator.run.sweep import tool_info  # noqa: E402
from orchestrator.validate import load_spec  # noqa: E402

MATRIX = """name: container-overhead
hardware: [{{name: box, kind: local}}]
stacks:
  - {{name: here, executor: process}}
  - {{name: torch-2.13-cpu, framework: torch, framework_version: "2.13.0", python: "3.11",
     base_image: "{base}"}}
workloads:
  - {{name: lstm_lm, preset: tiny, dataset: synthetic, epochs: 2}}
images: {{locks: {locks}, wheelhouse: {wheelhouse}}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-image", required=True)
    parser.add_argument("--wheelhouse", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=Path,
                        default=PROJECT / "bench" / "results" / "container_overhead.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="container-overhead-"))
    matrix = work / "matrix.yaml"
    matrix.write_text(MATRIX.format(base=args.base_image, locks=PROJECT / "images" / "locks",
                                    wheelhouse=args.wheelhouse.resolve()))
    spec = load_spec(matrix)
    console = Console(quiet=True)
    built = build_images(spec, image_stacks(spec), work, console)
    assert not built.failures, built.failures
    cells = {cell.stack.name: cell for cell in expand(spec)}
    tool = tool_info()
    samples: dict[str, dict[str, list[float]]] = {
        name: {"wall_s": [], "epoch2_train_s": []} for name in cells}
    for round_index in range(args.rounds):
        order = sorted(cells) if round_index % 2 == 0 else sorted(cells, reverse=True)
        for name in order:
            records = execute(cells[name], work / f"run-{round_index}", tool, built.refs)
            cell = records[-1]
            assert isinstance(cell, CellRecord) and cell.status == "ok", cell
            epoch2 = next(r for r in records if isinstance(r, MeasurementRecord)
                          and r.epoch == 2)
            samples[name]["wall_s"].append(cell.wall_s)
            samples[name]["epoch2_train_s"].append(epoch2.train_s)
            print(f"round {round_index} {name}: wall {cell.wall_s:.2f} s, "
                  f"epoch 2 {epoch2.train_s:.3f} s", flush=True)
    medians = {name: {k: statistics.median(v) for k, v in values.items()}
               for name, values in samples.items()}
    cache_hit = []
    for _ in range(5):
        start = time.perf_counter()
        again = build_images(spec, image_stacks(spec), work, console)
        cache_hit.append(time.perf_counter() - start)
        assert not again.built
    start = time.perf_counter()
    subprocess.run([str(PROJECT / ".venv" / "bin" / "matrix"), "build", str(matrix)],
                   check=True, capture_output=True, cwd=work)
    cli_build = time.perf_counter() - start
    ref = built.refs["torch-2.13-cpu"]
    result = {
        "date": dt.date.today().isoformat(), "machine": platform.node(),
        "cpu_count": __import__("os").cpu_count(), "python": platform.python_version(),
        "docker_server": _docker_version(), "image": ref.tag,
        "image_size_gb": round(ref.size_bytes / 1e9, 3), "rounds": args.rounds,
        "samples": samples, "medians": medians,
        "ratio_wall_docker_over_process":
            medians["torch-2.13-cpu"]["wall_s"] / medians["here"]["wall_s"],
        "ratio_epoch_docker_over_process":
            medians["torch-2.13-cpu"]["epoch2_train_s"] / medians["here"]["epoch2_train_s"],
        "extra_wall_s_per_cell": medians["torch-2.13-cpu"]["wall_s"] - medians["here"]["wall_s"],
        "cache_hit_build_images_s": statistics.median(cache_hit),
        "cache_hit_matrix_build_cli_s": cli_build,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))


def _docker_version() -> str:
    done = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                          capture_output=True, text=True)
    return done.stdout.strip()


if __name__ == "__main__":
    main()
