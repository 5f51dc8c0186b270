"""`transformer_ft` against the transformers `Trainer`: training samples/s of the same step.

Why: the workload re-implements the seed's Hugging Face `Trainer` fine-tuning loop as a plain
step (zero_grad, forward, backward, clip, AdamW step); this peer run checks that the loop is
not slower (or faster) than the Trainer it stands for, on the same model, batch, precision and
data, timed the same way.

What is measured, on both sides: DistilBertForSequenceClassification from the seed's config
(6 layers, dim 768, 12 heads, FFN 3072, vocab 28,996, 3 labels) with random weights from the
same torch seed, batch 32 (`--batch-size`), sequences padded to 128, fp32, AdamW (torch) at
a constant lr 5e-5, weight decay 0, gradient norm clipped to 1.0, on the workload's own
synthetic tensors (`make_data`, `build_model` from `workloads.transformer_ft.workload`). Each run
trains `warmup + steps` steps; the first `warmup` are excluded; step times are read with
`time.perf_counter` at step boundaries (boundary to boundary, as `EpochMeter` does: whatever
the loop does between steps counts), with nothing to synchronise on the CPU.

* ours: `matrix run FILE -o DIR --no-ray`, the real user path, on a one-cell matrix with
  `examples = (warmup + steps) * 32` and `warmup_steps = warmup`; the figures are the
  measurement record of its results.jsonl (train_s, steps, step_s_median).
* Trainer: `transformers.Trainer` with `TrainingArguments(per_device_train_batch_size=32,
  max_steps=warmup + steps, lr, weight_decay=0, max_grad_norm=1.0, constant schedule,
  adamw_torch, no logging/saving, use_cpu)` over a torch Dataset of the same tensors, in a
  fresh child process. A `TrainerCallback` reads the clock at each `on_step_end` (and at the
  first `on_step_begin`): boundary to boundary, so the Trainer's batch fetch and collation,
  which happen before `on_step_begin`, count, as our loop's batch slicing does. Its
  begin-to-end times (without the fetch) are recorded too. On a GPU the callback would have
  to call `torch.cuda.synchronize()` before each clock read; this script is CPU-only. The
  Trainer's own `train_samples_per_second` covers its whole `train()` call (start-up and
  warm-up steps included): it is reported beside, not compared.

The seed ran 3 epochs of 3,125 steps; "a few dozen steps" per run is already too slow on two
CPU cores (about 4.5 s a step), so runs are `--warmup 3 --steps 12` by default. Runs alternate
in rounds whose order flips (ours then Trainer, Trainer then ours, ...) so drift on a shared
machine hits both; each run records the 1-minute load average before and after it.

    .venv/bin/python bench/transformer_ft_vs_trainer.py [--rounds 2] [--warmup 3] [--steps 12] \
        [--batch-size 32] [--threads 1]

Both sides compute on `--threads` torch threads, set through OMP_NUM_THREADS and
MKL_NUM_THREADS and read back on each side (ours: the cell's provenance `cpu_threads`; the
Trainer: `torch.get_num_threads()` in its child); a round whose sides differ fails. On a
2-core machine that others share, one thread a side is the figure to trust: two threads of
one process stall together when anything else takes a core, which moved single runs by
1.3x to 1.8x where one thread a side moved by about 10% (docs/PERFORMANCE.md).

The Trainer needs `accelerate`, which the `nlp` extra installs (since the Trainer callback
of `matrix_bench.hf`); with an older venv, install it beside the venv and put it on
PYTHONPATH: only the Trainer's child sees it, `matrix run` (ours) runs with PYTHONPATH
removed, as a user's venv is.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_threads import same_threads, thread_environment  # bench/ is no package

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results" / "transformer_ft_vs_trainer.json"
# The seed's settings (workloads/transformer_ft/defaults.yaml) written out, so both sides
# and the record say exactly what ran.
PARAMS: dict[str, Any] = {
    "batch_size": 32, "seq_len": 128, "layers": 6, "dim": 768, "heads": 12, "ffn": 3072,
    "vocab": 28996, "labels": 3, "mean_tokens": 40, "precision": "fp32", "lr": 5e-5,
    "clip": 1.0, "seed": 1234, "dataset": "synthetic", "weights": "random",
}
QUIET_LOAD = 0.8
LOAD_POLL_S = 20.0


def load_average() -> float:
    """The 1-minute load average."""
    with open("/proc/loadavg", encoding="utf-8") as handle:
        return float(handle.read().split()[0])


def wait_for_quiet(max_wait_s: float) -> dict[str, Any]:
    """Poll until the 1-minute load is below QUIET_LOAD, or give up after max_wait_s."""
    start = time.monotonic()
    while (load := load_average()) >= QUIET_LOAD and time.monotonic() - start < max_wait_s:
        print(f"load {load:.2f}: waiting for < {QUIET_LOAD}", file=sys.stderr)
        time.sleep(LOAD_POLL_S)
    return {"waited_s": round(time.monotonic() - start, 1), "load": load,
            "quiet": load < QUIET_LOAD}


def params(warmup: int, steps: int, batch: int = PARAMS["batch_size"]) -> dict[str, Any]:
    """The cell's params: exactly warmup + steps full batches of `batch` examples."""
    return {**PARAMS, "batch_size": batch, "examples": (warmup + steps) * batch,
            "warmup_steps": warmup}


# --------------------------------------------------------------------------- ours


def matrix_yaml(warmup: int, steps: int, batch: int) -> str:
    """A one-cell, one-epoch matrix of the benchmark configuration. Written by PyYAML, not
    as JSON: JSON's `5e-05` is a string to a YAML 1.1 reader, PyYAML's `5.0e-05` a float."""
    import yaml

    return yaml.safe_dump({
        "name": "transformer-ft-vs-trainer",
        "hardware": [{"name": "local-cpu", "kind": "local", "gpus": 0}],
        "stacks": [{"name": "here", "executor": "process"}],
        "workloads": [{"name": "transformer_ft", "params": params(warmup, steps, batch),
                       "epochs": 1, "timeout_s": 3600}],
    }, sort_keys=False)


def run_ours(warmup: int, steps: int, batch: int, threads: int) -> dict[str, Any]:
    """`matrix run --no-ray` as a user runs it on `threads`; the measurement record's timing
    fields and the threads its provenance says the cell computed with."""
    with tempfile.TemporaryDirectory() as tmp:
        matrix_file = Path(tmp) / "matrix.yaml"
        matrix_file.write_text(matrix_yaml(warmup, steps, batch))
        command = [str(Path(sys.executable).parent / "matrix"), "run", str(matrix_file),
                   "-o", str(Path(tmp) / "run"), "--no-ray"]
        env = {k: v for k, v in thread_environment(threads).items()
               if k != "PYTHONPATH"}  # the user's venv
        done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"matrix run failed ({done.returncode}): {done.stderr[-2000:]}")
        lines = (Path(tmp) / "run" / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    cells = [r for r in records if r["record"] == "cell"]
    measurements = [r for r in records if r["record"] == "measurement"]
    if len(measurements) != 1:
        raise RuntimeError(f"matrix run gave no single measurement: {records}")
    m = measurements[0]
    provenance = [r for r in records if r["record"] == "provenance"]
    return {"status": cells[0]["status"] if cells else None,
            "threads": provenance[0].get("cpu_threads") if provenance else None,
            "train_s": m["train_s"], "steps": m["steps"], "warmup_steps": m["warmup_steps"],
            "warmup_s": m["warmup_s"], "items": m["items"], "step_s_median": m["step_s_median"],
            "samples_per_s": m["items"] / m["train_s"],
            "s_per_iter": m["train_s"] / m["steps"]}


# --------------------------------------------------------------------------- Trainer


def child_trainer(warmup: int, steps: int, batch: int) -> dict[str, Any]:
    """transformers.Trainer on the same model, data and hyper-parameters, timed per step."""
    import torch
    import transformers
    from torch.utils.data import Dataset

    from workloads.torch_common import set_precision
    from workloads.transformer_ft.workload import build_model, make_data

    p = params(warmup, steps, batch)
    device = torch.device("cpu")
    set_precision(p["precision"], device)
    torch.manual_seed(int(p["seed"]))  # as workload.Trainer does before build_model
    model = build_model(p, device)
    data = make_data(p, device)
    ids = torch.cat([b[0] for b in data.batches])
    mask = torch.cat([b[1] for b in data.batches])
    labels = torch.cat([b[2] for b in data.batches])

    class Examples(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return int(ids.size(0))

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": ids[i], "attention_mask": mask[i], "labels": labels[i]}

    class StepClock(transformers.TrainerCallback):
        """Clock reads at step boundaries (CPU: no sync; a GPU would need one here)."""

        def __init__(self) -> None:
            self.first_begin: float | None = None
            self.begins: list[float] = []
            self.ends: list[float] = []

        def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
            now = time.perf_counter()
            self.begins.append(now)
            if self.first_begin is None:
                self.first_begin = now

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            self.ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        args = transformers.TrainingArguments(
            output_dir=tmp, per_device_train_batch_size=int(p["batch_size"]),
            max_steps=warmup + steps, learning_rate=float(p["lr"]), weight_decay=0.0,
            max_grad_norm=float(p["clip"]), lr_scheduler_type="constant", warmup_steps=0,
            optim="adamw_torch", logging_strategy="no", save_strategy="no", report_to=[],
            dataloader_num_workers=0, use_cpu=True, seed=int(p["seed"]), disable_tqdm=True)
        clock = StepClock()
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Examples(),
                                       callbacks=[clock])
        wall = time.perf_counter()
        output = trainer.train()
        wall = time.perf_counter() - wall
    assert clock.first_begin is not None
    bounds = [clock.first_begin, *clock.ends]
    step_s = [b - a for a, b in itertools.pairwise(bounds)]
    inner_s = [e - b for b, e in zip(clock.begins, clock.ends, strict=True)]
    timed, timed_inner = step_s[warmup:], inner_s[warmup:]
    train_s = sum(timed)
    batch = int(p["batch_size"])
    return {"train_s": train_s, "steps": len(timed), "warmup_steps": warmup,
            "warmup_s": sum(step_s[:warmup]), "items": batch * len(timed),
            "step_s_median": statistics.median(timed),
            "samples_per_s": batch * len(timed) / train_s, "s_per_iter": train_s / len(timed),
            "begin_to_end_s_median": statistics.median(timed_inner),
            "begin_to_end_s_total": sum(timed_inner),
            "trainer_train_samples_per_second": output.metrics.get("train_samples_per_second"),
            "trainer_train_runtime": output.metrics.get("train_runtime"),
            "train_call_wall_s": wall, "step_s_all": step_s,
            "threads": torch.get_num_threads(),
            "attention": model.config._attn_implementation,
            "optimizer": type(trainer.optimizer.optimizer
                              if hasattr(trainer.optimizer, "optimizer")
                              else trainer.optimizer).__name__}


def run_trainer(warmup: int, steps: int, batch: int, threads: int) -> dict[str, Any]:
    """The Trainer side in a fresh process on `threads`; its last stdout line is its result
    as JSON, with the threads torch computed with there."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child",
               "--warmup", str(warmup), "--steps", str(steps), "--batch-size", str(batch)]
    extra = os.environ.get("PYTHONPATH", "")  # where accelerate is, if not in the venv
    env = dict(thread_environment(threads),
               PYTHONPATH=os.pathsep.join(filter(None, [str(PROJECT), extra])))
    done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"Trainer child failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- rounds


def machine() -> dict[str, Any]:
    """Where it ran."""
    import torch
    import transformers

    from orchestrator.worker.host import cpu_model

    return {"nproc": os.cpu_count(), "cpu_model": cpu_model(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "torch_threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def one_round(number: int, warmup: int, steps: int, batch: int,
              threads: int) -> dict[str, Any]:
    """Both sides once: ours first in odd rounds, the Trainer first in even ones."""
    order = ("ours", "trainer") if number % 2 == 1 else ("trainer", "ours")
    runners = {"ours": run_ours, "trainer": run_trainer}
    result: dict[str, Any] = {"round": number, "order": list(order)}
    for side in order:
        before = load_average()
        wall = time.monotonic()
        result[side] = runners[side](warmup, steps, batch, threads)
        result[side] |= {"load_before": before, "load_after": load_average(),
                         "run_wall_s": time.monotonic() - wall}
    same_threads(result["ours"]["threads"], result["trainer"]["threads"], threads)
    result["ratio"] = result["ours"]["samples_per_s"] / result["trainer"]["samples_per_s"]
    print(f"round {number} ({' then '.join(order)}): ours "
          f"{result['ours']['samples_per_s']:.3f}, Trainer "
          f"{result['trainer']['samples_per_s']:.3f} samples/s, ratio {result['ratio']:.3f}",
          file=sys.stderr)
    return result


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per side and the ratio ours / Trainer with its spread over the rounds."""
    ours = [r["ours"]["samples_per_s"] for r in rounds]
    theirs = [r["trainer"]["samples_per_s"] for r in rounds]
    ratios = [r["ratio"] for r in rounds]
    return {"rounds": len(rounds), "ours_samples_per_s_median": statistics.median(ours),
            "trainer_samples_per_s_median": statistics.median(theirs),
            "ours_s_per_iter_median": statistics.median(r["ours"]["s_per_iter"] for r in rounds),
            "trainer_s_per_iter_median": statistics.median(r["trainer"]["s_per_iter"]
                                                           for r in rounds),
            "ratio_of_medians": statistics.median(ours) / statistics.median(theirs),
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios)}


def bench(args: argparse.Namespace) -> dict[str, Any]:
    """Wait for a quiet machine, run the rounds, return everything for the results file."""
    started = dt.datetime.now(dt.UTC)
    quiet = wait_for_quiet(args.max_wait_s)
    rounds = [one_round(n, args.warmup, args.steps, args.batch_size, args.threads)
              for n in range(1, args.rounds + 1)]
    return {"benchmark": "transformer_ft vs transformers.Trainer, training samples/s (CPU)",
            "started_at": started.isoformat(timespec="seconds"),
            "ended_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine(), "params": params(args.warmup, args.steps, args.batch_size),
            "warmup_steps": args.warmup, "timed_steps": args.steps, "load_wait": quiet,
            "rounds": rounds, "summary": summarise(rounds)}


def print_table(result: dict[str, Any]) -> None:
    """A Markdown table of the rounds, and the summary."""
    print("| round | order | ours samples/s (s/iter) | Trainer samples/s (s/iter) | "
          "ours / Trainer | Trainer's own train_samples_per_second |")
    print("|---|---|---|---|---|---|")
    for r in result["rounds"]:
        o, t = r["ours"], r["trainer"]
        print(f"| {r['round']} | {' then '.join(r['order'])} | {o['samples_per_s']:.3f} "
              f"({o['s_per_iter']:.3f}) | {t['samples_per_s']:.3f} ({t['s_per_iter']:.3f}) | "
              f"{r['ratio']:.3f} | {t['trainer_train_samples_per_second']:.3f} |")
    print(json.dumps(result["summary"], indent=1))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=PARAMS["batch_size"],
                        help="examples per step on both sides (the seed's 32)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch's threads on both sides, set and recorded")
    parser.add_argument("--max-wait-s", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    sys.path.insert(0, str(PROJECT))
    if args.child:
        print(json.dumps(child_trainer(args.warmup, args.steps, args.batch_size)))
        return 0
    result = bench(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
