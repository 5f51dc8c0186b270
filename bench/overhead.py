"""Orchestration overhead: what `matrix run` costs beyond the workload's own time.

A sweep of N `sleep` cells of S seconds each (one configuration, `repeats: N`) is run the
way a user runs it, `matrix run FILE -o DIR ...` in a subprocess, timed from outside with
`time.perf_counter`, in three variants, each in a fresh run directory:

* `ray-cold`: no address, so `matrix run` starts (and stops) its embedded Ray;
* `ray-warm`: a Ray head started beforehand (`ray start --head`), `--ray-address` to it;
* `no-ray`:   `--no-ray`, the cells run serially in the CLI's own process.

From each run's journal (`results.jsonl`) it derives:

* executor-level overhead per cell: the cell's `wall_s` (worker start to end, as the
  executor saw it) minus the workload's own timed sleep (`train_s`);
* worker overhead per cell: `wall_s - workload_s` (interpreter start, imports, exit);
* fixed cost: the wall time of the same command on a 1-cell matrix minus that cell's
  `wall_s` (CLI start-up, planning, Ray start/connect and shutdown, parquet and report);
  median of three runs;
* marginal overhead per cell: `((wall(N) - wall(1)) - (train(N) - train(1))) / (N - 1)`,
  what each extra cell adds beyond its own sleep: the figure for the 60 ms target;
* end-to-end overhead per cell: `(wall(N) - ray_start - train(N)) / N`;
* ratio `wall(N) / (N * S + ray_start)`, where ray_start is Ray's start measured apart for
  `ray-cold` and 0 for the others (the issue's target: at most 1.05).

Measured apart, for reference:

* Ray's start in this setup: `import ray; ray.init(<the embedded dispatcher's arguments>);
  ray.shutdown()` in a fresh Python process, median of five (it varies by seconds);
* the connect to the warm cluster: `import ray; ray.init(address); ray.shutdown()`;
* baselines: a bare `subprocess.run([python, "-c", "pass"])`; the same inside a Ray task on
  the warm cluster (round trip, one task at a time); a Ray no-op task; and a 0.5 s sleeping
  subprocess waited for with `Popen.wait()` and with `Popen.wait(timeout=...)`, which
  polls (the process executor waited that way before commit 33d3d97, at a cost of ~45 ms
  per cell).

The warm cluster is started in its own process group and temp dir and stopped by killing
that group, never with `ray stop --force`, which would also kill any other Ray on the host.

    .venv/bin/python bench/overhead.py [--cells 50] [--seconds 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HW_NAME = "bench"
HW_RESOURCE = f"hw:{HW_NAME}"
PROBE_REPEATS = 3  # Ray start, connect, and 1-cell runs: median of this many
TASK_ROUND_TRIPS = 30
SLEEPER_S = 0.5  # the sleeping subprocesses of the wait() / wait(timeout) baseline ...
SLEEPER_REPEATS = 20  # ... end at phases spread evenly over Popen.wait's 50 ms poll period
POLL_PERIOD_S = 0.05  # Popen.wait(timeout) sleeps up to this long between polls (CPython)
RAY_START_REPEATS = 5  # Ray's cold start varies by seconds: more samples than the others
STOP_GRACE_S = 10.0
# The embedded dispatcher's ray.init arguments (orchestrator/run/dispatch.py).
EMBEDDED_INIT = {"include_dashboard": False, "log_to_driver": False,
                 "object_store_memory": 100 * 1024 * 1024, "configure_logging": False,
                 "namespace": "matrix-bench"}

MATRIX = """\
name: bench
hardware: [{{name: {hw}, kind: local}}]
stacks: [{{name: process, executor: process}}]
workloads: [{{name: sleep, params: {{seconds: {seconds}, steps: 1}}}}]
repeats: {repeats}
"""


# --- figures -------------------------------------------------------------------------------


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def stats_ms(values: Sequence[float]) -> dict[str, float]:
    """Median, p90 and max of values in seconds, as milliseconds."""
    ordered = sorted(values)
    p90 = (statistics.quantiles(ordered, n=10, method="inclusive")[8] if len(ordered) > 1
           else ordered[0])
    return {"median": ms(statistics.median(ordered)), "p90": ms(p90), "max": ms(ordered[-1]),
            "n": len(ordered)}


@dataclass
class RunResult:
    """One `matrix run` command and what its journal says."""

    cells: int
    wall_s: float  # the whole command, from outside
    cell_wall_s: list[float]  # per cell, the executor's wall_s
    train_s: list[float]  # per cell, the sum of its measurements' train_s
    workload_s: list[float]  # per cell, the worker's workload_s (imports included)

    @property
    def train_total_s(self) -> float:
        return sum(self.train_s)

    @property
    def fixed_s(self) -> float:
        """Everything the command did outside its cells' workers."""
        return self.wall_s - sum(self.cell_wall_s)


@dataclass
class Variant:
    name: str
    args: list[str]
    ray_start_s: float = 0.0  # subtracted in the end-to-end figure and the ratio
    one_cell: list[RunResult] = field(default_factory=list)
    sweep: RunResult | None = None
    loadavg: dict[str, list[float]] = field(default_factory=dict)

    def summary(self, seconds: float) -> dict[str, Any]:
        assert self.sweep is not None and self.one_cell
        sweep = self.sweep
        one = sorted(self.one_cell, key=lambda r: r.wall_s)[len(self.one_cell) // 2]
        n = sweep.cells
        ideal = n * seconds
        executor = [w - t for w, t in zip(sweep.cell_wall_s, sweep.train_s, strict=True)]
        worker = [w - s for w, s in zip(sweep.cell_wall_s, sweep.workload_s, strict=True)]
        marginal = ((sweep.wall_s - one.wall_s) - (sweep.train_total_s - one.train_total_s)) \
            / (n - 1) if n > 1 else float("nan")
        return {
            "cells": n,
            "seconds": seconds,
            "sweep_wall_s": round(sweep.wall_s, 3),
            "ideal_s": ideal,
            "train_total_s": round(sweep.train_total_s, 3),
            "ray_start_s": round(self.ray_start_s, 3),
            "ratio": round(sweep.wall_s / (ideal + self.ray_start_s), 4),
            "ratio_to_ideal": round(sweep.wall_s / ideal, 4),
            "fixed_s": round(statistics.median(r.fixed_s for r in self.one_cell), 3),
            "one_cell_wall_s": [round(r.wall_s, 3) for r in self.one_cell],
            "marginal_ms_per_cell": ms(marginal),
            "end_to_end_ms_per_cell": ms((sweep.wall_s - self.ray_start_s
                                          - sweep.train_total_s) / n),
            "executor_ms_per_cell": stats_ms(executor),
            "worker_ms_per_cell": stats_ms(worker),
            "sweep_fixed_s": round(sweep.fixed_s, 3),
            "loadavg": self.loadavg,
        }


# --- running things ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bench_env(token_path: Path) -> dict[str, str]:
    """Ray's token authentication for head, nodes and clients; no RAY_ADDRESS inherited."""
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path),
           "RAY_USAGE_STATS_ENABLED": "0", "COLUMNS": "120"}
    env.pop("RAY_ADDRESS", None)
    return env


def write_matrix(folder: Path, repeats: int, seconds: float) -> Path:
    path = folder / f"sleep-{repeats}.yaml"
    path.write_text(MATRIX.format(hw=HW_NAME, seconds=seconds, repeats=repeats))
    return path


def matrix_command() -> list[str]:
    found = shutil.which("matrix", path=str(BIN)) or shutil.which("matrix")
    if found is None:
        sys.exit("the matrix CLI is not installed: pip install -e . in this environment")
    return [found]


def read_journal(run_dir: Path) -> tuple[list[float], list[float], list[float]]:
    """Per cell: wall_s, sum of train_s, workload_s; every cell must have ended ok."""
    train: dict[str, float] = defaultdict(float)
    cells: dict[str, dict[str, Any]] = {}
    with open(run_dir / "results.jsonl", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["record"] == "measurement":
                train[record["cell_id"]] += record["train_s"]
            elif record["record"] == "cell":
                cells[record["cell_id"]] = record
    bad = {c["status"] for c in cells.values()} - {"ok"}
    if bad:
        raise RuntimeError(f"{run_dir}: cells ended {sorted(bad)}, not ok: see its report")
    ids = sorted(cells)
    return ([cells[i]["wall_s"] for i in ids], [train[i] for i in ids],
            [cells[i]["workload_s"] for i in ids])


def run_matrix(matrix: Path, run_dir: Path, args: Sequence[str], env: dict[str, str],
               timeout: float) -> RunResult:
    """`matrix run MATRIX -o RUN_DIR ARGS`, timed from outside."""
    command = [*matrix_command(), "run", str(matrix), "-o", str(run_dir), *args]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=matrix.parent, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    cell_wall, train, workload = read_journal(run_dir)
    return RunResult(cells=len(cell_wall), wall_s=wall, cell_wall_s=cell_wall, train_s=train,
                     workload_s=workload)


def run_probe(name: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run one of this file's probes in a fresh Python process; its last line is JSON."""
    done = subprocess.run([sys.executable, __file__, "--probe", name, *args], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"probe {name} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_of_probes(name: str, env: dict[str, str], *args: str,
                     repeats: int = PROBE_REPEATS) -> dict[str, Any]:
    runs = [run_probe(name, env, *args) for _ in range(repeats)]
    keys = runs[0].keys()
    return {"median": {k: round(statistics.median(r[k] for r in runs), 4) for k in keys},
            "runs": runs}


class RayHead:
    """A Ray head in its own process group and temp dir, stopped by killing that group."""

    def __init__(self, env: dict[str, str], temp_dir: Path) -> None:
        self.env, self.temp_dir = env, temp_dir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.pgid: int | None = None
        self.start_s = 0.0

    def start(self) -> None:
        ray = shutil.which("ray", path=str(BIN)) or "ray"
        command = [ray, "start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1",
                   "--include-dashboard=false", "--num-cpus=2",
                   f'--resources={{"{HW_RESOURCE}": 1}}', "--disable-usage-stats",
                   f"--temp-dir={self.temp_dir}"]
        start = time.perf_counter()
        process = subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.pgid = process.pid  # the daemons it starts stay in this group
        output, _ = process.communicate(timeout=180)
        self.start_s = time.perf_counter() - start
        if process.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start failed ({process.returncode}):\n{output[-4000:]}")

    def stop(self) -> None:
        if self.pgid is None:
            return
        for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _group_alive(self.pgid):
                time.sleep(0.2)
            if not _group_alive(self.pgid):
                break
        self.pgid = None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# --- probes (each runs in a fresh Python process) ------------------------------------------


def probe_ray_start() -> dict[str, float]:
    """Ray's embedded start and stop, as the dispatcher does it without an address."""
    start = time.perf_counter()
    import ray

    imported = time.perf_counter()
    # address="local": start a new instance even if a `ray start` cluster runs on this host.
    ray.init(address="local", resources={HW_RESOURCE: 1.0}, **EMBEDDED_INIT)
    started = time.perf_counter()
    ray.shutdown()
    stopped = time.perf_counter()
    return {"import_s": imported - start, "init_s": started - imported,
            "shutdown_s": stopped - started, "total_s": stopped - start}


def probe_ray_connect(address: str) -> dict[str, float]:
    start = time.perf_counter()
    import ray

    imported = time.perf_counter()
    ray.init(address=address, log_to_driver=False, configure_logging=False,
             namespace="matrix-bench")
    connected = time.perf_counter()
    ray.shutdown()
    stopped = time.perf_counter()
    return {"import_s": imported - start, "connect_s": connected - imported,
            "shutdown_s": stopped - connected, "total_s": stopped - start}


def _bare_subprocess() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def _noop() -> None:
    return None


def probe_ray_tasks(address: str) -> dict[str, dict[str, float]]:
    """Round trips of Ray tasks submitted one at a time, placed like the dispatcher's."""
    import ray

    ray.init(address=address, log_to_driver=False, configure_logging=False,
             namespace="matrix-bench")
    options = {"resources": {HW_RESOURCE: 1.0}, "num_cpus": 0}
    result = {}
    for name, function in (("noop_task", _noop), ("bare_subprocess_task", _bare_subprocess)):
        task = ray.remote(function).options(**options)
        for _ in range(3):  # warm-up: the job's worker process starts on the first
            ray.get(task.remote())
        result[name] = stats_ms(_timed(lambda t=task: ray.get(t.remote()), TASK_ROUND_TRIPS))
    ray.shutdown()
    return result


def _timed(action: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def local_baselines() -> dict[str, dict[str, float]]:
    """Subprocess costs without Ray, in this process.

    The sleepers show what waiting with a timeout costs: CPython's `Popen.wait(timeout)`
    polls with sleeps that double up to 50 ms, so a child is reaped up to 50 ms after it
    ended, depending on where its end falls in that grid; the lengths are spread over one
    period so that the median is the typical cost and not one phase's.
    """
    lengths = [SLEEPER_S + i * POLL_PERIOD_S / SLEEPER_REPEATS for i in range(SLEEPER_REPEATS)]

    def sleeper_overhead(timeout: float | None) -> list[float]:
        overheads = []
        for length in lengths:
            start = time.perf_counter()
            subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({length})"]
                             ).wait(timeout=timeout)
            overheads.append(time.perf_counter() - start - length)
        return overheads

    return {
        "bare_subprocess": stats_ms(_timed(_bare_subprocess, TASK_ROUND_TRIPS)),
        "sleeper_wait_overhead": stats_ms(sleeper_overhead(None)),
        "sleeper_wait_timeout_overhead": stats_ms(sleeper_overhead(600.0)),
    }


PROBES: dict[str, Callable[..., dict[str, Any]]] = {
    "ray-start": probe_ray_start,
    "ray-connect": probe_ray_connect,
    "ray-tasks": probe_ray_tasks,
}


# --- the benchmark -------------------------------------------------------------------------


def machine_facts() -> dict[str, Any]:
    def version(distribution: str) -> str | None:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            return None

    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    git = subprocess.run(["git", "-C", str(PROJECT), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=False).stdout.strip() or None
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "mem_total_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "ray": version("ray"),
        "torch": version("torch"),
        "matrix_bench": version("matrix-bench"),
        "git_revision": git,
        "loadavg_at_start": list(os.getloadavg()),
        "other_ray_processes_at_start": ray_processes(),
    }


def ray_processes() -> int:
    """Ray daemons already running on this host (another cluster disturbs the timing)."""
    count = 0
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            count += comm.read_text().strip() in ("gcs_server", "raylet")
        except OSError:
            continue
    return count


def run_variant(variant: Variant, folder: Path, env: dict[str, str], cells: int,
                seconds: float) -> None:
    """Three 1-cell runs (the fixed cost), then the N-cell sweep, each in a fresh run dir."""
    one = write_matrix(folder, 1, seconds)
    many = write_matrix(folder, cells, seconds)
    variant.loadavg["before"] = list(os.getloadavg())
    for i in range(PROBE_REPEATS):
        variant.one_cell.append(run_matrix(one, folder / f"{variant.name}-1cell-{i}",
                                           variant.args, env, timeout=seconds + 300))
    print(f"  {variant.name}: 1-cell runs {[round(r.wall_s, 2) for r in variant.one_cell]} s; "
          f"sweep of {cells} cells ...", flush=True)
    variant.sweep = run_matrix(many, folder / f"{variant.name}-sweep", variant.args, env,
                               timeout=cells * seconds * 3 + 300)
    variant.loadavg["after"] = list(os.getloadavg())
    print(f"  {variant.name}: sweep {variant.sweep.wall_s:.2f} s", flush=True)


def run_benchmark(cells: int, seconds: float, keep: bool) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="overhead-"))
    token = folder / "ray_token"
    token.write_text(secrets.token_hex(32))
    env = bench_env(token)
    facts = machine_facts()
    print(f"bench in {folder}: {cells} cells x {seconds} s, {facts['nproc']} CPUs, "
          f"load {facts['loadavg_at_start']}", flush=True)
    if facts["other_ray_processes_at_start"]:
        print("warning: another Ray runs on this host; its load disturbs the figures",
              flush=True)
    try:
        print("Ray start alone ...", flush=True)
        ray_start = median_of_probes("ray-start", env, repeats=RAY_START_REPEATS)
        print("local baselines ...", flush=True)
        local = local_baselines()
        cold = Variant("ray-cold", [], ray_start_s=ray_start["median"]["total_s"])
        warm = Variant("ray-warm", [])
        no_ray = Variant("no-ray", ["--no-ray"])

        print("ray-cold ...", flush=True)
        run_variant(cold, folder, env, cells, seconds)
        head = RayHead(env, Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp")))  # short: sockets
        try:
            print("ray-warm: starting a Ray head ...", flush=True)
            head.start()
            connect = median_of_probes("ray-connect", env, head.address)
            tasks = run_probe("ray-tasks", env, head.address)
            warm.args = ["--ray-address", head.address]
            run_variant(warm, folder, env, cells, seconds)
        finally:
            head.stop()
            shutil.rmtree(head.temp_dir, ignore_errors=True)
        print("no-ray ...", flush=True)
        run_variant(no_ray, folder, env, cells, seconds)
    finally:
        if keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    summaries = {v.name: v.summary(seconds) for v in (cold, warm, no_ray)}
    return {
        "benchmark": "orchestration overhead (bench/overhead.py)",
        "machine": facts,
        "parameters": {"cells": cells, "seconds": seconds, "one_cell_runs": PROBE_REPEATS,
                       "task_round_trips": TASK_ROUND_TRIPS},
        "ray_start": ray_start,
        "ray_head_start_s": round(head.start_s, 3),
        "ray_connect": connect,
        "baselines": {**local, **tasks},
        "variants": summaries,
        # Ray's cost inside the CLI, as a cross-check of the measured start: the cold
        # variant's fixed cost minus that of --no-ray.
        "ray_cost_in_cli_s": round(summaries["ray-cold"]["fixed_s"]
                                   - summaries["no-ray"]["fixed_s"], 3),
        "raw": {v.name: {"one_cell": [asdict(r) for r in v.one_cell],
                         "sweep": asdict(v.sweep) if v.sweep else None}
                for v in (cold, warm, no_ray)},
    }


def print_table(result: dict[str, Any]) -> None:
    header = (f"{'variant':<9} {'wall s':>8} {'ideal s':>8} {'start s':>8} {'ratio':>6} "
              f"{'fixed s':>8} {'marg ms':>8} {'e2e ms':>7} {'exec ms med/p90/max':>21}")
    print(header)
    print("-" * len(header))
    for name, v in result["variants"].items():
        e = v["executor_ms_per_cell"]
        print(f"{name:<9} {v['sweep_wall_s']:>8.2f} {v['ideal_s']:>8.1f} "
              f"{v['ray_start_s']:>8.2f} {v['ratio']:>6.3f} {v['fixed_s']:>8.2f} "
              f"{v['marginal_ms_per_cell']:>8.1f} {v['end_to_end_ms_per_cell']:>7.1f} "
              f"{e['median']:>7.1f}/{e['p90']:>6.1f}/{e['max']:>6.1f}")
    start, connect = result["ray_start"]["median"], result["ray_connect"]["median"]
    print(f"Ray start alone (import+init+shutdown): {start['total_s']:.2f} s "
          f"(import {start['import_s']:.2f}, init {start['init_s']:.2f}, "
          f"shutdown {start['shutdown_s']:.2f}); ray start --head: "
          f"{result['ray_head_start_s']:.2f} s; connect+shutdown: "
          f"{connect['connect_s'] + connect['shutdown_s']:.2f} s; Ray in the CLI (cold fixed "
          f"- no-ray fixed): {result['ray_cost_in_cli_s']:.2f} s")
    for name, b in result["baselines"].items():
        print(f"{name:<30} median {b['median']:7.1f} ms  p90 {b['p90']:7.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=50, help="cells in the sweep (>= 2)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per cell")
    parser.add_argument("--out", type=Path, default=PROJECT / "bench/results/overhead.json")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument("--probe", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:  # internal: one measurement in a fresh process
        name, *rest = args.probe
        print(json.dumps(PROBES[name](*rest)))
        return 0
    if args.cells < 2:
        parser.error("--cells must be at least 2 (the marginal figure compares N with 1)")
    result = run_benchmark(args.cells, args.seconds, args.keep)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print_table(result)
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
