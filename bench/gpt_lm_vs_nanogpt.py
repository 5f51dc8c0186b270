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
timed iterations, fails (peer_threads.UnfairPair).

The same timed work: ours makes a round's batches before its clock starts and reads no
loss; nanoGPT's timed iteration also samples its next batch (its `get_batch`: a fresh
`np.memmap`, `batch_size` windows copied to int64 and stacked), reads `loss.item()`,
estimates its MFU and prints its line. Its script is run unmodified, so that work is timed
apart instead (`peer_extras`): the checkout's own `get_batch` (taken from its train.py) and
`GPT.estimate_mfu`, `loss.item()` and the formatted line, in a child on the same threads and
data, and each timed interval of the peer loses that median cost. Both ratios are written:
`ratio_ours_over_peer` (the same work) and `ratio_ours_over_peer_as_printed`.

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
EXTRA_REPEATS = 200
# nanoGPT's per-iteration work besides the step, from its checkout, timed in its folder:
# argv = train.py, batch_size, block_size, repeats; prints the median seconds of each part
EXTRAS = r"""
import ast, json, os, statistics, sys, time
import numpy as np, torch
from model import GPT, GPTConfig
train_py, batch_size, block_size, repeats = sys.argv[1], *map(int, sys.argv[2:5])
tree = ast.parse(open(train_py).read())
(get_batch,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_batch"]
space = {"np": np, "torch": torch, "os": os, "data_dir": os.path.join("data", "synthetic"),
         "block_size": block_size, "batch_size": batch_size, "device": "cpu",
         "device_type": "cpu"}
exec(compile(ast.Module([get_batch], []), train_py, "exec"), space)
config = json.loads(sys.argv[5])
model = GPT(GPTConfig(**config))
X, Y = space["get_batch"]("train")
logits, loss = model(X, Y)
def timed(work):
    found = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        found.append(time.perf_counter() - start)
    return statistics.median(found)
def log_line():
    lossf = loss.item() * 1
    mfu = model.estimate_mfu(batch_size, 0.05)
    return f"iter 9: loss {lossf:.4f}, time {50.0:.2f}ms, mfu {mfu*100:.2f}%"
print(json.dumps({"get_batch_s": timed(lambda: space["get_batch"]("train")),
                  "log_s": timed(log_line)}))
"""


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


def link_peer(peer: Path, folder: Path) -> None:
    """Links in `folder` to the checkout's files that train.py reads from its working folder."""
    for name in ("configurator.py", "model.py"):
        link = folder / name
        if not link.exists():
            link.symlink_to(peer / name)


def run_peer(peer: Path, folder: Path, size: dict[str, int], warmup: int,
             steps: int, threads: int) -> dict[str, Any]:
    """nanoGPT's train.py, unmodified, in `folder` (its data and the links it reads), on
    `threads` (peer_threads.peer_command sets and reads them back)."""
    link_peer(peer, folder)
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
    timed = peer_intervals(done.stdout, warmup, steps)
    tokens = steps * size["batch_size"] * size["context"]
    return {"intervals_s": timed, "train_s_as_printed": sum(timed), "tokens": tokens,
            "tokens_per_s_as_printed": tokens / sum(timed),
            "threads": peer_threads(done.stderr)}


def peer_intervals(stdout: str, warmup: int, steps: int) -> list[float]:
    """The seconds of the timed iterations train.py printed (`iter N: ... time Xms`), after
    its `warmup` first; UnfairPair unless it printed every one of `warmup + steps`."""
    times = [float(match.group(2)) / 1000 for line in stdout.splitlines()
             if (match := ITERATION.match(line))]
    if len(times) != warmup + steps:
        raise UnfairPair(f"nanoGPT's train.py printed {len(times)} iterations, not "
                         f"{warmup + steps} ({warmup} warm-up and {steps} timed)")
    return after_warmup(times, warmup, "nanoGPT's train.py")


def peer_extras(peer: Path, folder: Path, size: dict[str, int], threads: int) -> dict[str, Any]:
    """What one of nanoGPT's timed iterations does besides the step ours times: its own
    get_batch and its log line's loss.item() and estimate_mfu, median seconds of each, in
    a child in `folder` (its data, its model.py) on `threads`."""
    config = {"n_layer": size["n_layer"], "n_head": size["n_head"], "n_embd": size["d_model"],
              "block_size": size["context"], "vocab_size": size["vocab"], "bias": True,
              "dropout": 0.0}
    link_peer(peer, folder)
    script = folder / "extras.py"
    script.write_text(EXTRAS)
    done = subprocess.run(peer_command(script, [
        str(peer / "train.py"), str(size["batch_size"]), str(size["context"]),
        str(EXTRA_REPEATS), json.dumps(config)], threads), cwd=folder, capture_output=True,
        text=True, env=thread_environment(threads))
    if done.returncode != 0:
        raise RuntimeError(f"timing nanoGPT's get_batch failed: {done.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    same_threads(threads, peer_threads(done.stderr), threads)
    return {**found, "per_iteration_s": found["get_batch_s"] + found["log_s"]}


def same_work(run: dict[str, Any], extra_s: float) -> dict[str, Any]:
    """The peer's run with each timed interval less `extra_s` (its batch sampling and log
    line, which ours does not time): its tokens/s over the work ours times."""
    if min(run["intervals_s"]) <= extra_s:
        raise UnfairPair(f"an interval of nanoGPT's ({min(run['intervals_s']):.6f} s) is not "
                         f"longer than its batch sampling and logging ({extra_s:.6f} s)")
    train_s = sum(interval - extra_s for interval in run["intervals_s"])
    return {**run, "extra_s_per_iteration": extra_s, "train_s": train_s,
            "tokens_per_s": run["tokens"] / train_s}


def summary(runs: list[dict[str, Any]], key: str = "tokens_per_s") -> dict[str, float]:
    rates = [r[key] for r in runs]
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
            extras = peer_extras(args.peer, folder, size, args.threads)
            for round_index in range(args.rounds):
                order = ["ours", "peer"] if round_index % 2 == 0 else ["peer", "ours"]
                for side in order:
                    before = load_average()
                    result = (run_ours(size, data, args.warmup, args.steps, args.threads)
                              if side == "ours" else
                              same_work(run_peer(args.peer, folder, size, args.warmup,
                                                 args.steps, args.threads),
                                        extras["per_iteration_s"]))
                    runs[side].append({**result, "round": round_index,
                                       "load_before": before, "load_after": load_average()})
                    print(f"{name} round {round_index} {side}: "
                          f"{result['tokens_per_s']:,.0f} tokens/s", file=sys.stderr)
        for mine, theirs in zip(runs["ours"], runs["peer"], strict=True):
            same_threads(mine["threads"], theirs["threads"], args.threads)
        ours, peer = summary(runs["ours"]), summary(runs["peer"])
        printed = summary(runs["peer"], "tokens_per_s_as_printed")
        results[name] = {"size": size, "ours": ours, "peer": peer, "peer_as_printed": printed,
                         "peer_extras": extras, "runs": runs,
                         "ratio_ours_over_peer": ours["tokens_per_s_median"]
                         / peer["tokens_per_s_median"],
                         "ratio_ours_over_peer_as_printed": ours["tokens_per_s_median"]
                         / printed["tokens_per_s_median"]}
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
    print(json.dumps({name: {k: r[k] for k in ("ours", "peer", "peer_as_printed",
                                                "peer_extras", "ratio_ours_over_peer",
                                                "ratio_ours_over_peer_as_printed")}
                      for name, r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
