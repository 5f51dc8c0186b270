"""`gpt_lm` against the transformers library's `GPT2LMHeadModel`: tokens/s of the same step.

Why: `gpt_lm` is a plain-PyTorch GPT-2; this peer run checks that it is not slower than the
implementation most people would reach for, on the same configuration, optimizer, batch,
precision and data, timed the same way, on this CPU.

What is measured, on both sides: a GPT-2 (learned positions, pre-norm blocks, tanh GELU,
tied embeddings, no dropout) of `CONFIG`, AdamW from `workloads.gpt_lm.model.adamw` (betas
0.9, 0.95, weight decay 0.1, fused where the device has it), gradient norm clipped to 1.0,
fp32, the workload's own synthetic token windows (`token_source`: rank 0, steps 0..N-1).
Each run trains `warmup + steps` steps; the first `warmup` are excluded; the clock
(`time.perf_counter`) is read at step boundaries, nothing to synchronise on a CPU.

* ours: `matrix run FILE -o DIR --no-ray`, the real user path, on a one-cell matrix with
  `steps_per_epoch = warmup + steps`, `warmup_steps = warmup`, one epoch; the figures are
  its measurement record (items, train_s).
* peer: `GPT2LMHeadModel(GPT2Config(..., attn_implementation="sdpa"))` in a fresh child
  process, trained by a plain loop: zero_grad, forward with `labels`, backward, clip,
  step. It gets ours' input window (`context` tokens) as both; the model shifts the labels
  inside, so its loss covers one position fewer, and its tokens are counted as ours are
  (batch x context per step: the same positions through the same layers).

Runs alternate in rounds whose order flips, so drift hits both; each run records the
1-minute load average. Reported: per side the median tokens/s over rounds and its spread
((max - min) / median, the noise), and ours / peer.

    .venv/bin/python bench/gpt_lm_vs_hf.py [--rounds 3] [--warmup 3] [--steps 15]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_threads import same_threads, thread_environment  # bench/ is no package

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results" / "gpt_lm_vs_hf.json"
# A GPT-2 small enough for two CPU cores, its shape GPT-2's.
CONFIG: dict[str, Any] = {
    "n_layer": 4, "n_head": 4, "d_model": 256, "max_context": 256, "context": 256,
    "vocab": 8192, "batch_size": 4, "precision": "fp32", "lr": 6e-4, "seed": 1337,
    "compile": False, "activation_checkpointing": False, "dp_mode": "ddp", "workers": 1,
    "data": "synthetic",
}

PEER = r"""
import json, sys, time
import torch
from transformers import GPT2Config, GPT2LMHeadModel
sys.path.insert(0, sys.argv[1])
from workloads.gpt_lm.model import adamw
from workloads.gpt_lm.workload import token_source

p, warmup, steps = json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(p["seed"])
config = GPT2Config(n_layer=p["n_layer"], n_head=p["n_head"], n_embd=p["d_model"],
                    n_positions=p["max_context"], vocab_size=p["vocab"], resid_pdrop=0.0,
                    embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
                    bos_token_id=0, eos_token_id=0, attn_implementation="sdpa")
model = GPT2LMHeadModel(config)
assert model.config._attn_implementation == "sdpa"
model.train()
optimizer = adamw(model, p["lr"], torch.device("cpu"))
tokens = token_source(p)
windows = [tokens(0, step)[:, :-1] for step in range(warmup + steps)]
times = []
boundary = time.perf_counter()
for window in windows:
    optimizer.zero_grad(set_to_none=True)
    model(input_ids=window, labels=window).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    now = time.perf_counter()
    times.append(now - boundary)
    boundary = now
timed = times[warmup:]
# the same positions through the model as ours (its loss covers context - 1 of them, the
# labels being shifted inside; one prediction in 256 is not a difference in work)
tokens_trained = steps * p["batch_size"] * p["context"]
print(json.dumps({"train_s": sum(timed), "tokens": tokens_trained,
                  "threads": torch.get_num_threads(),
                  "params": sum(x.numel() for x in model.parameters()),
                  "torch": torch.__version__,
                  "transformers": __import__("transformers").__version__}))
"""


def load_average() -> float:
    with open("/proc/loadavg", encoding="utf-8") as handle:
        return float(handle.read().split()[0])


def run_ours(warmup: int, steps: int, threads: int) -> dict[str, Any]:
    """`matrix run --no-ray` as a user runs it on `threads`; the measurement record's
    figures and the threads the cell's provenance says it computed with."""
    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        matrix_file = Path(tmp) / "matrix.yaml"
        matrix_file.write_text(yaml.safe_dump({
            "name": "gpt-lm-vs-hf",
            "hardware": [{"name": "local-cpu", "kind": "local"}],
            "stacks": [{"name": "here", "executor": "process"}],
            "workloads": [{"name": "gpt_lm", "epochs": 1, "params": {
                **CONFIG, "steps_per_epoch": warmup + steps, "warmup_steps": warmup}}],
        }, sort_keys=False))
        done = subprocess.run([str(Path(sys.executable).parent / "matrix"), "run",
                               str(matrix_file), "-o", str(Path(tmp) / "run"), "--no-ray"],
                              cwd=PROJECT, capture_output=True, text=True,
                              env=thread_environment(threads))
        if done.returncode != 0:
            raise RuntimeError(f"matrix run failed: {done.stderr[-2000:]}")
        records = [json.loads(line) for line in
                   (Path(tmp) / "run" / "results.jsonl").read_text().splitlines()]
    (m,) = [r for r in records if r["record"] == "measurement"]
    (provenance,) = [r for r in records if r["record"] == "provenance"]
    return {"train_s": m["train_s"], "tokens": m["items"],
            "tokens_per_s": m["items"] / m["train_s"], "threads": provenance.get("cpu_threads")}


def run_peer(warmup: int, steps: int, threads: int) -> dict[str, Any]:
    """The transformers model in a fresh child process on `threads`, trained by the plain
    loop; it reports the threads torch computed with."""
    done = subprocess.run([sys.executable, "-c", PEER, str(PROJECT), json.dumps(CONFIG),
                           str(warmup), str(steps)], capture_output=True, text=True,
                          env={**thread_environment(threads), "TRANSFORMERS_VERBOSITY": "error"})
    if done.returncode != 0:
        raise RuntimeError(f"peer failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "tokens_per_s": result["tokens"] / result["train_s"]}


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    rates = [r["tokens_per_s"] for r in runs]
    median = statistics.median(rates)
    return {"tokens_per_s_median": median, "spread": (max(rates) - min(rates)) / median}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch's threads on both sides, set and recorded")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
    for round_index in range(args.rounds):
        order = ["ours", "peer"] if round_index % 2 == 0 else ["peer", "ours"]
        for side in order:
            before = load_average()
            result = (run_ours if side == "ours" else run_peer)(args.warmup, args.steps,
                                                                 args.threads)
            runs[side].append({**result, "round": round_index, "load_before": before,
                               "load_after": load_average()})
            print(f"round {round_index} {side}: {result['tokens_per_s']:,.0f} tokens/s",
                  file=sys.stderr)
    for mine, theirs in zip(runs["ours"], runs["peer"], strict=True):
        same_threads(mine["threads"], theirs["threads"], args.threads)
    ours, peer = summary(runs["ours"]), summary(runs["peer"])
    import torch
    import transformers

    record = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "transformers": transformers.__version__},
        "config": CONFIG, "warmup": args.warmup, "steps": args.steps, "rounds": args.rounds,
        "threads": args.threads,
        "ours": ours, "peer": peer,
        "ratio_ours_over_peer": ours["tokens_per_s_median"] / peer["tokens_per_s_median"],
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("ours", "peer", "ratio_ours_over_peer")},
                     indent=1))


if __name__ == "__main__":
    main()
