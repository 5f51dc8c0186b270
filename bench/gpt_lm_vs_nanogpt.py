"""`gpt_lm` against nanoGPT's `train.py`: training tokens/s of the same model on this CPU.

Why: nanoGPT is the plain-PyTorch GPT-2 trainer most people start from; `gpt_lm` must not
be slower than it on the same model, optimizer, batch and data, timed the same way.

What is measured, on both sides, at each size of `SIZES`: a GPT-2 (learned positions,
pre-norm blocks, biases, tied embeddings, no dropout) trained with AdamW (lr 6e-4, betas
0.9 and 0.95, weight decay 0.1, gradient norm clipped to 1.0), fp32, no compilation, on
windows of one file of uint16 token ids that this script writes (nanoGPT's `train.bin`
layout, which `gpt_lm`'s `data:` reads too). Each run trains `warmup + steps` steps; the
first `warmup` are excluded; tokens are batch x context per step.

* ours: `matrix run FILE -o DIR --no-ray` on a one-cell matrix, the real user path; the
  figures are its measurement record (items, train_s: the clock read at step boundaries).
* peer: nanoGPT's own `train.py`, unmodified, from the checkout `--peer` names (this
  project ships none of its code), run in a scratch folder that holds the data, a
  `meta.pkl` giving the vocabulary, and links to the checkout's `configurator.py` and
  `model.py` (train.py reads both from its working folder), with its options on the
  command line: `--device=cpu --dtype=float32 --compile=False --bias=True --dropout=0.0
  --decay_lr=False --gradient_accumulation_steps=1`, no checkpoint, one evaluation batch.
  Its figure is from the `time` it prints per iteration (`time.time()` at iteration
  boundaries, so its first iteration holds its first evaluation: excluded as warm-up).

Both sides compute on `--threads` torch threads (default 1), set through OMP_NUM_THREADS and
MKL_NUM_THREADS and read back on each side (ours: the cell's provenance `cpu_threads`; the
peer: bench/peer_threads.py's launcher); a pair on other threads, or a peer run without its
timed iterations, fails (peer_threads.UnfairPair). nanoGPT's timed iteration also samples
its next batch and reads `loss.item()`, which ours does before its clock: on these sizes a
batch of uint16 windows costs microseconds against steps of tens of milliseconds.

Runs alternate in rounds whose order flips each round, so drift hits both sides alike;
each run records the 1-minute load average. Reported per size: each side's median tokens/s
over rounds and its spread, and ours / peer.

    git clone https://github.com/karpathy/nanoGPT /tmp/nanogpt   # anywhere outside this tree
    .venv/bin/python bench/gpt_lm_vs_nanogpt.py --peer /tmp/nanogpt [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pickle
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_threads import (  # bench/ is not a package: its folder is on the path
    UnfairPair,
    after_warmup,
    peer_command,
    peer_threads,
    same_threads,
    thread_environment,
)

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results" / "gpt_lm_vs_nanogpt.json"
# Two GPT-2 shapes a 2-core CPU trains in seconds a step: gpt_lm's `tiny` preset, and the
# size bench/gpt_lm_vs_hf.py uses.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"n_layer": 2, "n_head": 4, "d_model": 128, "context": 128, "vocab": 4096,
             "batch_size": 4},
    "small": {"n_layer": 4, "n_head": 4, "d_model": 256, "context": 256, "vocab": 8192,
              "batch_size": 4},
}
TOKENS_IN_FILE = 2_000_000
ITERATION = re.compile(r"^iter (\d+): loss [\d.]+, time ([\d.]+)ms")


def load_average() -> float:
    with open("/proc/loadavg", encoding="utf-8") as handle:
        return float(handle.read().split()[0])


def write_data(folder: Path, vocab: int) -> Path:
    """nanoGPT's data layout: data/synthetic/{train,val}.bin of uint16 ids, and meta.pkl."""
    data = folder / "data" / "synthetic"
    data.mkdir(parents=True, exist_ok=True)
    ids = np.random.default_rng(1337).integers(0, vocab, TOKENS_IN_FILE, dtype=np.uint16)
    ids.tofile(data / "train.bin")
    ids[: TOKENS_IN_FILE // 10].tofile(data / "val.bin")
    with open(data / "meta.pkl", "wb") as handle:
        pickle.dump({"vocab_size": vocab}, handle)
    return data / "train.bin"


def run_ours(size: dict[str, int], data: Path, warmup: int, steps: int,
             threads: int) -> dict[str, Any]:
    """`matrix run --no-ray` of one gpt_lm cell on the file's windows, on `threads`."""
    import yaml

    params = {**size, "max_context": size["context"], "precision": "fp32", "compile": False,
              "lr": 6e-4, "data": str(data), "workers": 1,
              "steps_per_epoch": warmup + steps, "warmup_steps": warmup}
    with tempfile.TemporaryDirectory() as tmp:
        matrix_file = Path(tmp) / "matrix.yaml"
        matrix_file.write_text(yaml.safe_dump({
            "name": "gpt-lm-vs-nanogpt",
            "hardware": [{"name": "local-cpu", "kind": "local"}],
            "stacks": [{"name": "here", "executor": "process"}],
            "workloads": [{"name": "gpt_lm", "epochs": 1, "params": params}],
        }, sort_keys=False))
        done = subprocess.run([str(Path(sys.executable).parent / "matrix"), "run",
                               str(matrix_file), "-o", str(Path(tmp) / "run"), "--no-ray",
                               "--db", "none"], cwd=PROJECT, capture_output=True, text=True,
                              env=thread_environment(threads))
        if done.returncode != 0:
            raise RuntimeError(f"matrix run failed: {done.stderr[-2000:]}")
        records = [json.loads(line) for line in
                   (Path(tmp) / "run" / "results.jsonl").read_text().splitlines()]
    (measured,) = [r for r in records if r["record"] == "measurement"]
    (provenance,) = [r for r in records if r["record"] == "provenance"]
    return {"train_s": measured["train_s"], "tokens": measured["items"],
            "tokens_per_s": measured["items"] / measured["train_s"],
            "threads": provenance.get("cpu_threads")}


def run_peer(peer: Path, folder: Path, size: dict[str, int], warmup: int,
             steps: int, threads: int) -> dict[str, Any]:
    """nanoGPT's train.py, unmodified, in `folder` (its data and the links it reads), on
    `threads` (peer_threads.peer_command sets and reads them back)."""
    for name in ("configurator.py", "model.py"):
        link = folder / name
        if not link.exists():
            link.symlink_to(peer / name)
    options = {"device": "cpu", "dtype": "float32", "compile": False, "bias": True,
               "dropout": 0.0, "dataset": "synthetic", "out_dir": str(folder / "out"),
               "always_save_checkpoint": False, "eval_interval": 10**9, "eval_iters": 1,
               "log_interval": 1, "max_iters": warmup + steps - 1, "decay_lr": False,
               "warmup_iters": 0, "learning_rate": 6e-4, "gradient_accumulation_steps": 1,
               "batch_size": size["batch_size"], "block_size": size["context"],
               "n_layer": size["n_layer"], "n_head": size["n_head"],
               "n_embd": size["d_model"]}
    done = subprocess.run(peer_command(peer / "train.py", [
        f"--{key}={value}" for key, value in options.items()], threads),
        cwd=folder, capture_output=True, text=True, env=thread_environment(threads))
    if done.returncode != 0:
        raise RuntimeError(f"nanoGPT's train.py failed: {done.stderr[-2000:]}")
    times = [float(match.group(2)) / 1000 for line in done.stdout.splitlines()
             if (match := ITERATION.match(line))]
    if len(times) != warmup + steps:
        raise UnfairPair(f"train.py printed {len(times)} iterations, not {warmup + steps}")
    timed = after_warmup(times, warmup, "nanoGPT's train.py")
    tokens = steps * size["batch_size"] * size["context"]
    return {"train_s": sum(timed), "tokens": tokens, "tokens_per_s": tokens / sum(timed),
            "threads": peer_threads(done.stderr)}


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    rates = [r["tokens_per_s"] for r in runs]
    median = statistics.median(rates)
    return {"tokens_per_s_median": median, "spread": (max(rates) - min(rates)) / median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, required=True,
                        help="a checkout of nanoGPT (its train.py, model.py, configurator.py)")
    parser.add_argument("--peer-commit", default="", help="recorded with the figures")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch's threads on both sides, set and recorded")
    args = parser.parse_args()
    if not (args.peer / "train.py").is_file():
        parser.error(f"{args.peer} holds no train.py: point --peer at a nanoGPT checkout")
    results: dict[str, Any] = {}
    for name, size in SIZES.items():
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            data = write_data(folder, size["vocab"])
            for round_index in range(args.rounds):
                order = ["ours", "peer"] if round_index % 2 == 0 else ["peer", "ours"]
                for side in order:
                    before = load_average()
                    result = (run_ours(size, data, args.warmup, args.steps, args.threads)
                              if side == "ours" else
                              run_peer(args.peer, folder, size, args.warmup, args.steps,
                                       args.threads))
                    runs[side].append({**result, "round": round_index,
                                       "load_before": before, "load_after": load_average()})
                    print(f"{name} round {round_index} {side}: "
                          f"{result['tokens_per_s']:,.0f} tokens/s", file=sys.stderr)
        for mine, theirs in zip(runs["ours"], runs["peer"], strict=True):
            same_threads(mine["threads"], theirs["threads"], args.threads)
        ours, peer = summary(runs["ours"]), summary(runs["peer"])
        results[name] = {"size": size, "ours": ours, "peer": peer, "runs": runs,
                         "ratio_ours_over_peer": ours["tokens_per_s_median"]
                         / peer["tokens_per_s_median"]}
    import torch

    record = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__},
        "peer": {"checkout": str(args.peer), "commit": args.peer_commit},
        "warmup": args.warmup, "steps": args.steps, "rounds": args.rounds,
        "threads": args.threads, "sizes": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({name: {k: r[k] for k in ("ours", "peer", "ratio_ours_over_peer")}
                      for name, r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
