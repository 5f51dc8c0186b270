"""`lstm_lm` against pytorch/examples `word_language_model`: training words/s on this CPU.

What is measured: training throughput (target words per second of timed training steps) of
the same model and step on both sides, at a CPU-sized configuration: WikiText-2, a 1-layer
LSTM with emb = hidden = 256, untied, dropout 0.2, batch 32, seq_len (bptt) 35, fp32,
Adam-family optimizer with lr 2e-4, gradient-norm clipping at 0.25, the same `--threads` on
both sides (default 1: OMP_NUM_THREADS and MKL_NUM_THREADS), each read back in its child.

* ours: the real worker (`orchestrator.worker.main`) runs the real `workloads.lstm_lm`
  `run()` on a cell that the project's own matrix expansion built from a matrix file, and the
  figure is the `items_per_s` of the measurement record it writes. One full epoch is 1,865
  steps (about 15 minutes on two cores, plus evaluation), too long to alternate several
  times, so the one change is that the workload's `windows` generator is wrapped here (in the
  child process, nothing edited) to stop after `warmup + steps` training windows (and
  `EVAL_WINDOWS` for the evaluation that follows, which is timed apart and not compared).
* theirs: pytorch/examples' own `data.Corpus` and `model.RNNModel`, imported from a checkout
  outside this project (never copied into it), trained by `peer_steps` below, which makes the
  calls of its `train()` loop body in its order (`--use-optimizer`, its AdamW path): cut the
  batch, `optimizer.zero_grad()`, detach the hidden state, forward (log_softmax inside its
  model), `NLLLoss`, backward, `clip_grad_norm_`, `optimizer.step()`, `loss.item()`. Its
  periodic log print is left out. Timed like ours: `time.perf_counter` at step boundaries,
  the first `warmup` steps excluded, `seq_len * batch` target words per step.

What differs in the math: theirs is AdamW (main.py's `--use-optimizer`; torch's default
weight_decay 0.01, an extra `param.mul_` per parameter per step), ours Adam without weight
decay; theirs applies log_softmax in the model and NLLLoss, ours CrossEntropyLoss (the same
kernels); their init is uniform(+-0.1) for the embedding and decoder, ours torch's defaults.
lr is 2e-4 on both sides (main.py's default lr of 20 is for its manual SGD update).

Both sides train on the same first `warmup + steps` windows of the same batchified stream
(the two tokenizers give identical ids; `data_check` verifies it) in separate fresh child
processes, alternated in rounds whose order flips each round (ours first, theirs first, ...)
so that drift on a shared machine hits both alike. Each run records the share of the
machine's CPU time that other processes (and VM steal) used meanwhile (`/proc/stat` minus the
child's own rusage); a round where either run saw more than DISTURBED_SHARE is kept apart as
discarded and redone, up to twice the rounds asked for, and each round starts once a 5 s
sample shows the machine idle. The reported figure is the ratio of the median words/s over
the undisturbed rounds, with the spread of their per-round ratios; the same over all rounds
is written too.

Beside it, once each: (1) the user path unpatched: `matrix run FILE --no-ray` of the same
configuration on synthetic tokens of WikiText-2's vocabulary, sized to exactly
`warmup + steps` windows, as a check that the wrapped worker measures what a user gets;
(2) pytorch/examples' own `main.py`, unmodified, for a few log intervals, with the ms/batch it
prints: the median of the intervals after the first (the first includes start-up batches
and is listed but not used; a run that logged no interval after it fails). Both run on
`--threads` too, read back (the cell's provenance; main.py through bench/peer_threads.py's
launcher), and a run on other threads fails.

    MATRIX_BENCH_DATA=/work/shared/data .venv/bin/python bench/lstm_lm_vs_examples.py \\
        --peer /tmp/peer/word_language_model --peer-commit 77f55b9 [--rounds 6] [--steps 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_threads import (  # bench/ is no package: its folder is on the path
    after_warmup,
    peer_command,
    peer_threads,
    same_threads,
    thread_environment,
)

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results" / "lstm_lm_vs_examples.json"
CONFIG: dict[str, Any] = {
    "emb": 256, "hidden": 256, "layers": 1, "batch": 32, "seq_len": 35, "dropout": 0.2,
    "clip": 0.25, "lr": 0.0002,
}
WIKITEXT2_VOCAB = 33278
EVAL_WINDOWS = 2  # evaluation windows our wrapped worker runs after training (not compared)
QUIET_LOAD = 0.6  # 1-minute load average below which the measurement starts
LOAD_POLL_S = 30.0
PEER_LOG_INTERVAL = 50  # batches per ms/batch line of the unmodified main.py
PEER_LOG_LINES = 4
DISTURBED_SHARE = 0.05  # others' share of the CPU above which a run counts as disturbed
IDLE_SAMPLE_S = 5.0


# --------------------------------------------------------------------------- our side


def matrix_yaml(warmup: int, dataset: str, steps: int = 0) -> str:
    """A one-cell matrix of the benchmark configuration; synthetic data sized to the steps."""
    c = CONFIG
    params = {
        "emb_dim": c["emb"], "hidden": c["hidden"], "layers": c["layers"],
        "batch_size": c["batch"], "seq_len": c["seq_len"], "dropout": c["dropout"],
        "clip": c["clip"], "lr": c["lr"], "precision": "fp32", "warmup_steps": warmup,
    }
    if dataset == "synthetic":  # exactly warmup + steps full windows, and EVAL_WINDOWS more
        rows = c["seq_len"] * (warmup + steps) + 1
        params |= {"vocab": WIKITEXT2_VOCAB, "synthetic_tokens": c["batch"] * rows,
                   "eval_tokens": c["batch"] * (c["seq_len"] * EVAL_WINDOWS + 1)}
    return json.dumps({  # JSON is YAML
        "name": "lstm-lm-vs-examples",
        "hardware": [{"name": "local-cpu", "kind": "local", "gpus": 0}],
        "stacks": [{"name": "here", "executor": "process"}],
        "workloads": [{"name": "lstm_lm", "dataset": dataset, "params": params, "epochs": 1,
                       "timeout_s": 3600}],
    }, indent=1)


def limit_windows(module: Any, train_windows: int) -> None:
    """Wrap `module.windows`: its first call (training) stops after `train_windows`
    windows, later calls (evaluation) after EVAL_WINDOWS. Nothing else changes."""
    original = module.windows
    calls = itertools.count()

    def limited(data: Any, seq_len: int) -> Iterator[Any]:
        limit = train_windows if next(calls) == 0 else EVAL_WINDOWS
        return itertools.islice(original(data, seq_len), limit)

    module.windows = limited


def child_ours(warmup: int, steps: int) -> dict[str, Any]:
    """The real worker on the real cell, training stopped after warmup + steps windows."""
    import workloads.lstm_lm.workload as workload
    from orchestrator.executors.outcome import cell_file_content
    from orchestrator.plan.cells import expand
    from orchestrator.validate import load_spec
    from orchestrator.worker.main import main as worker_main

    with tempfile.TemporaryDirectory() as tmp:
        matrix_file = Path(tmp) / "matrix.yaml"
        matrix_file.write_text(matrix_yaml(warmup, "wikitext2"))
        (cell,) = expand(load_spec(matrix_file))
        cell_file, out_file = Path(tmp) / "cell.json", Path(tmp) / "out.jsonl"
        cell_file.write_text(json.dumps(cell_file_content(cell)))  # as an executor writes it
        limit_windows(workload, warmup + steps)
        code = worker_main([str(cell_file), str(out_file)])
        records = [json.loads(line) for line in out_file.read_text().splitlines()]
    if code != 0:
        raise RuntimeError(f"worker failed: {records}")
    (measurement,) = [r for r in records if r["record"] == "measurement"]
    (provenance,) = [r for r in records if r["record"] == "provenance"]
    fields = ("train_s", "items", "items_per_s", "steps", "warmup_steps", "warmup_s",
              "step_s_median", "step_s_p90")
    return {**{k: measurement[k] for k in fields}, "threads": provenance.get("cpu_threads"),
            "params": dict(cell.params), "data_sha256": provenance.get("data_sha256")}


# --------------------------------------------------------------------------- their side


def import_peer(peer: Path) -> tuple[Any, Any]:
    """pytorch/examples' `data` and `model` modules, from the checkout outside the project."""
    sys.path.insert(0, str(peer))
    import data  # type: ignore[import-not-found]
    import model  # type: ignore[import-not-found]

    return data, model


def columns(tokens: Any, batch: int) -> Any:
    """The token stream as `batch` contiguous columns, tail dropped (both sides' layout)."""
    rows = tokens.size(0) // batch
    return tokens[: rows * batch].view(batch, rows).t().contiguous()


def peer_steps(model: Any, optimizer: Any, criterion: Any, source: Any, warmup: int,
               steps: int) -> tuple[list[float], list[int]]:
    """pytorch/examples' train() loop body (LSTM, --use-optimizer), timed per step."""
    import torch

    bptt, clip = CONFIG["seq_len"], CONFIG["clip"]
    model.train()
    hidden = model.init_hidden(CONFIG["batch"])
    total_loss = 0.0
    step_s: list[float] = []
    words: list[int] = []
    boundary = time.perf_counter()
    for i in range(0, bptt * (warmup + steps), bptt):
        length = min(bptt, source.size(0) - 1 - i)
        inputs, targets = source[i : i + length], source[i + 1 : i + 1 + length].view(-1)
        optimizer.zero_grad()
        hidden = tuple(h.detach() for h in hidden)
        output, hidden = model(inputs, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        total_loss += loss.item()
        now = time.perf_counter()
        step_s.append(now - boundary)
        words.append(targets.numel())
        boundary = now
    return step_s, words


def child_theirs(peer: Path, data_dir: Path, warmup: int, steps: int) -> dict[str, Any]:
    """Their corpus and model, trained by `peer_steps`; the same summary as our meter's."""
    import torch

    data, model_module = import_peer(peer)
    torch.manual_seed(1111)  # main.py's default seed
    corpus = data.Corpus(str(data_dir / "wikitext-2"))
    vocab = len(corpus.dictionary)
    c = CONFIG
    model = model_module.RNNModel("LSTM", vocab, c["emb"], c["hidden"], c["layers"],
                                  c["dropout"], False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=c["lr"])
    step_s, words = peer_steps(model, optimizer, torch.nn.NLLLoss(),
                               columns(corpus.train, c["batch"]), warmup, steps)
    timed = step_s[warmup:]
    items = float(sum(words[warmup:]))
    return {"train_s": sum(timed), "items": items, "items_per_s": items / sum(timed),
            "steps": len(timed), "warmup_steps": warmup, "warmup_s": sum(step_s[:warmup]),
            "step_s_median": statistics.median(timed),
            "step_s_p90": statistics.quantiles(timed, n=10)[-1],
            "threads": torch.get_num_threads(), "vocab": vocab,
            "optimizer": type(optimizer).__name__,
            "weight_decay": optimizer.param_groups[0]["weight_decay"]}


# --------------------------------------------------------------------------- checks


def data_check(peer: Path, data_dir: Path) -> dict[str, Any]:
    """Both tokenizers on the same files: the same vocabulary and the same training ids."""
    import torch

    from workloads.lstm_lm.workload import tokenize

    data, _ = import_peer(peer)
    names = ("train.txt", "valid.txt", "test.txt")
    (ours_train, _, _), words = tokenize([data_dir / "wikitext-2" / n for n in names])
    corpus = data.Corpus(str(data_dir / "wikitext-2"))
    return {"vocab_ours": len(words), "vocab_theirs": len(corpus.dictionary),
            "train_tokens": int(ours_train.numel()),
            "train_ids_equal": bool(torch.equal(ours_train, corpus.train)),
            "train_steps_per_epoch": len(range(0, ours_train.numel() // CONFIG["batch"] - 1,
                                               CONFIG["seq_len"]))}


def user_path(warmup: int, steps: int, threads: int) -> dict[str, Any]:
    """`matrix run --no-ray` as a user runs it, unpatched, on synthetic tokens, on
    `threads` (the threads its provenance says the cell computed with are returned)."""
    with tempfile.TemporaryDirectory() as tmp:
        matrix_file = Path(tmp) / "matrix.yaml"
        matrix_file.write_text(matrix_yaml(warmup, "synthetic", steps))
        command = [str(Path(sys.executable).parent / "matrix"), "run", str(matrix_file),
                   "-o", str(Path(tmp) / "run"), "--no-ray"]
        subprocess.run(command, check=True, cwd=PROJECT, capture_output=True,
                       env=thread_environment(threads))
        lines = (Path(tmp) / "run" / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    (measurement,) = [r for r in records if r["record"] == "measurement"]
    (cell,) = [r for r in records if r["record"] == "cell"]
    (provenance,) = [r for r in records if r["record"] == "provenance"]
    fields = ("train_s", "items", "items_per_s", "steps", "warmup_steps", "step_s_median")
    same_threads(provenance.get("cpu_threads"), threads, threads)
    return {"status": cell["status"], **{k: measurement[k] for k in fields},
            "threads": provenance.get("cpu_threads"),
            "command": "matrix run FILE -o DIR --no-ray (dataset synthetic, vocab 33278)"}


def peer_main(peer: Path, data_dir: Path, threads: int) -> dict[str, Any]:
    """Their main.py unmodified (AdamW path) on `threads` (peer_threads' launcher sets and
    reads them back), stopped after PEER_LOG_LINES log lines."""
    c = CONFIG
    with tempfile.TemporaryDirectory() as tmp:
        options = ["--data", str(data_dir / "wikitext-2"),
                   "--model", "LSTM", "--emsize", str(c["emb"]), "--nhid", str(c["hidden"]),
                   "--nlayers", str(c["layers"]), "--batch_size", str(c["batch"]),
                   "--bptt", str(c["seq_len"]), "--dropout", str(c["dropout"]),
                   "--clip", str(c["clip"]), "--lr", str(c["lr"]), "--use-optimizer",
                   "--epochs", "1", "--log-interval", str(PEER_LOG_INTERVAL),
                   "--save", str(Path(tmp) / "model.pt")]
        process = subprocess.Popen(peer_command("main.py", options, threads), cwd=peer,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env={**thread_environment(threads), "PYTHONUNBUFFERED": "1"})
        said: list[str] = []
        ms_per_batch: list[float] = []
        assert process.stdout is not None
        for line in process.stdout:
            said.append(line)
            found = re.search(r"ms/batch\s+([\d.]+)", line)
            if found:
                ms_per_batch.append(float(found.group(1)))
                if len(ms_per_batch) == PEER_LOG_LINES:
                    break
        process.terminate()
        process.wait()
    found_threads = peer_threads("".join(said))
    same_threads(threads, found_threads, threads)
    return {"command": "python main.py " + " ".join(options), "threads": found_threads,
            "log_interval": PEER_LOG_INTERVAL, "ms_per_batch": ms_per_batch,
            **peer_main_rate(ms_per_batch)}


def peer_main_rate(ms_per_batch: list[float]) -> dict[str, float]:
    """Words/s from the median ms/batch of main.py's log intervals after the first."""
    words = CONFIG["seq_len"] * CONFIG["batch"]
    timed = after_warmup(ms_per_batch, 1, "main.py")  # the first holds its start-up
    return {"words_per_s_median_after_first_interval": words / (statistics.median(timed) / 1000)}


# --------------------------------------------------------------------------- driver


def load_average() -> list[float]:
    with open("/proc/loadavg", encoding="utf-8") as handle:
        return [float(x) for x in handle.read().split()[:3]]


def wait_for_quiet(max_wait_s: float) -> dict[str, Any]:
    """Poll until the 1-minute load average is below QUIET_LOAD, or give up after max_wait_s."""
    start = time.monotonic()
    while (load := load_average())[0] >= QUIET_LOAD and time.monotonic() - start < max_wait_s:
        print(f"load {load[0]:.2f}: waiting for < {QUIET_LOAD}", file=sys.stderr)
        time.sleep(LOAD_POLL_S)
    return {"waited_s": round(time.monotonic() - start, 1), "quiet": load[0] < QUIET_LOAD}


def busy_cpu_s() -> float:
    """CPU seconds all processes have used since boot (/proc/stat; steal included)."""
    with open("/proc/stat", encoding="utf-8") as handle:
        fields = [int(x) for x in handle.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(task: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `task` (which runs a child process) and add `others_share`: the share of the
    machine's CPU time that other processes (and VM steal) used meanwhile."""
    busy, mine, wall = busy_cpu_s(), children_cpu_s(), time.monotonic()
    result = task()
    wall = time.monotonic() - wall
    others = (busy_cpu_s() - busy) - (children_cpu_s() - mine)
    share = max(0.0, others) / (wall * (os.cpu_count() or 1))
    return {**result, "wall_s": wall, "others_share": share,
            "disturbed": share > DISTURBED_SHARE}


def wait_for_idle(max_wait_s: float) -> float:
    """Before a round: wait until other processes use under DISTURBED_SHARE of the CPU over a
    short sample; the share last sampled."""
    start = time.monotonic()
    while True:
        busy = busy_cpu_s()
        time.sleep(IDLE_SAMPLE_S)
        share = (busy_cpu_s() - busy) / (IDLE_SAMPLE_S * (os.cpu_count() or 1))
        if share < DISTURBED_SHARE or time.monotonic() - start > max_wait_s:
            return share


def run_child(side: str, args: argparse.Namespace) -> dict[str, Any]:
    """One side in a fresh process; its last stdout line is its result as JSON."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", side,
               "--warmup", str(args.warmup), "--steps", str(args.steps),
               "--peer", str(args.peer), "--data", str(args.data)]
    env = dict(thread_environment(args.threads), MATRIX_BENCH_DATA=str(args.data),
               PYTHONPATH=str(PROJECT))
    done = subprocess.run(command, check=True, cwd=PROJECT, env=env, capture_output=True,
                          text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine() -> dict[str, Any]:
    import torch

    from orchestrator.worker.host import cpu_model

    return {"nproc": os.cpu_count(), "cpu_model": cpu_model(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def project_state() -> dict[str, Any]:
    """This project's commit and its uncommitted changes under the measured code's folders
    (read at the start and at the end: code edited mid-run would show as a difference)."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=PROJECT, capture_output=True, text=True)
        return done.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"),
            "dirty": git("status", "--porcelain", "--", "orchestrator", "workloads",
                         "bench/lstm_lm_vs_examples.py").splitlines()}


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    ours = [r["ours"]["items_per_s"] for r in rounds]
    theirs = [r["theirs"]["items_per_s"] for r in rounds]
    ratios = [r["ratio"] for r in rounds]
    return {"rounds": len(rounds), "ours_words_per_s_median": statistics.median(ours),
            "theirs_words_per_s_median": statistics.median(theirs),
            "ratio_of_medians": statistics.median(ours) / statistics.median(theirs),
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios)}


def one_round(number: int, args: argparse.Namespace) -> dict[str, Any]:
    """Both sides once, ours first in odd rounds and theirs first in even ones."""
    order = ("ours", "theirs") if number % 2 == 1 else ("theirs", "ours")
    result: dict[str, Any] = {"round": number, "order": list(order),
                              "idle_share_before": wait_for_idle(args.max_wait_s)}
    for side in order:
        result[side] = measured(lambda side=side: run_child(side, args))
    same_threads(result["ours"].get("threads"), result["theirs"].get("threads"),
                 args.threads)  # each child read its own back
    result["ratio"] = result["ours"]["items_per_s"] / result["theirs"]["items_per_s"]
    result["disturbed"] = result["ours"]["disturbed"] or result["theirs"]["disturbed"]
    result["load_after"] = load_average()
    print(f"round {number}: ours {result['ours']['items_per_s']:.0f} w/s, theirs "
          f"{result['theirs']['items_per_s']:.0f} w/s, ratio {result['ratio']:.3f}, others' "
          f"share {result['ours']['others_share']:.3f} / {result['theirs']['others_share']:.3f}"
          f"{' DISTURBED: redone' if result['disturbed'] else ''}", file=sys.stderr)
    return result


def extra(task: Callable[[], dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """A once-only run, repeated (up to 3 tries) while other processes disturb it."""
    for _ in range(3):
        wait_for_idle(args.max_wait_s)
        result = measured(task)
        if not result["disturbed"]:
            break
    return result


def bench(args: argparse.Namespace) -> dict[str, Any]:
    started = dt.datetime.now(dt.UTC)
    project_start = project_state()
    check = data_check(args.peer, args.data)
    print(f"data check: {check}", file=sys.stderr)
    quiet = wait_for_quiet(args.max_wait_s)
    load_start = load_average()
    rounds: list[dict[str, Any]] = []
    discarded: list[dict[str, Any]] = []
    while len(rounds) < args.rounds and len(rounds) + len(discarded) < 2 * args.rounds:
        result = one_round(len(rounds) + 1, args)
        (discarded if result["disturbed"] else rounds).append(result)
    load_end = load_average()
    extras: dict[str, Any] = {}
    if not args.skip_extras:
        extras["user_path"] = extra(lambda: user_path(args.warmup, args.steps, args.threads),
                                    args)
        extras["peer_main"] = extra(lambda: peer_main(args.peer, args.data, args.threads),
                                    args)
    return {
        "benchmark": "lstm_lm vs pytorch/examples word_language_model, training words/s",
        "started_at": started.isoformat(timespec="seconds"),
        "ended_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(), "config": CONFIG, "warmup_steps": args.warmup,
        "timed_steps": args.steps, "peer": {"dir": str(args.peer), "commit": args.peer_commit},
        "project_start": project_start, "project_end": project_state(),
        "data_check": check, "load_wait": quiet, "load_start": load_start,
        "load_end": load_end, "disturbed_share": DISTURBED_SHARE, "rounds": rounds,
        "summary": summarise(rounds) if rounds else None,
        "discarded_rounds": discarded,
        "summary_all_rounds": summarise(rounds + discarded), **extras,
    }


def print_table(result: dict[str, Any]) -> None:
    print("| round | order | ours words/s | theirs words/s | ours / theirs |")
    print("|---|---|---|---|---|")
    for r in result["rounds"]:
        print(f"| {r['round']} | {' then '.join(r['order'])} | {r['ours']['items_per_s']:,.0f} "
              f"| {r['theirs']['items_per_s']:,.0f} | {r['ratio']:.3f} |")
    for key in ("summary", "summary_all_rounds"):
        s = result[key]
        if s:
            print(f"{key}: {s['rounds']} rounds; medians: ours "
                  f"{s['ours_words_per_s_median']:,.0f}, theirs "
                  f"{s['theirs_words_per_s_median']:,.0f} words/s; ratio of medians "
                  f"{s['ratio_of_medians']:.3f} (per round {s['ratio_min']:.3f} to "
                  f"{s['ratio_max']:.3f})")
    for key in ("user_path", "peer_main"):
        if key in result:
            print(f"{key}: {json.dumps(result[key])}")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", type=Path, default=Path("/tmp/peer/word_language_model"),
                        help="pytorch/examples' word_language_model checkout (outside this repo)")
    parser.add_argument("--peer-commit", default="77f55b9")
    parser.add_argument("--data", type=Path, default=None,
                        help="the dataset cache holding wikitext-2/{train,valid,test}.txt "
                             "(default: $MATRIX_BENCH_DATA or ~/.cache/matrix-bench/data; "
                             "fetched and sha256-checked there if missing)")
    parser.add_argument("--rounds", type=int, default=6,
                        help="undisturbed rounds wanted (at most twice as many are run)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch's threads on both sides, set and recorded")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--max-wait-s", type=float, default=1200.0)
    parser.add_argument("--skip-extras", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", choices=["ours", "theirs"], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    sys.path.insert(0, str(PROJECT))
    from orchestrator.worker import datasets

    args.data = args.data or datasets.data_dir()
    os.environ["MATRIX_BENCH_DATA"] = str(args.data)
    if args.child:
        children: dict[str, Callable[[], dict[str, Any]]] = {
            "ours": lambda: child_ours(args.warmup, args.steps),
            "theirs": lambda: child_theirs(args.peer, args.data, args.warmup, args.steps),
        }
        print(json.dumps(children[args.child]()))
        return 0
    datasets.fetch("wikitext2")
    result = bench(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
