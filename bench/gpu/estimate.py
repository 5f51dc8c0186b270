"""How long the GPU check's sweep takes on one H100/H200, estimated before it starts, and
the order its phases run in (bench/gpu/check.sh).

A device machine lends 600 s a command and 15 minutes in all, its start included, so the
check must end well inside one command. Each cell is estimated from its FLOPs, not from a
guess per workload: its workload's FLOP model (workloads/*/flops.py) times the items its
epochs train on, at a plain fraction of the H100's datasheet peak for its precision
(`MFU`: what these small models reached on an H200), plus what every cell pays before its
first step (`START_S`: the interpreter, torch and CUDA; `IMPORT_S` beyond), the node's GEMM
ceiling the first cell at a precision measures (`CEILING_S`), and compilation
(`COMPILE_S`: torch.compile of GPT-2, or XLA tracing the Keras LSTM on JAX).

The phases are the matrix cut by `--only`, in the order of what matters most: the compiled
bf16 GPT (the MFU goal, and the bf16 ceiling), transformer_ft bf16, then the seeds. The
check starts a phase only while the time left holds its estimate, and stops cleanly with a
summary of what ran and what it did not reach.

    python bench/gpu/estimate.py MATRIX --budget-s 300 [--phases OUT.tsv] [--cells OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GPU_MODEL = "NVIDIA H100 80GB HBM3"  # an H200's compute peak is the H100 SXM's
# Calibrated on the first GPU run (an H200, 2026-11-29, bench/results/gpu/): each cell's wall
# time less its epochs is its start; epoch 1's warm-up less epoch 2's is its compilation
START_S = 10.0  # a fresh worker: interpreter, torch import, CUDA context (9 to 11 s)
IMPORT_S = {"transformer_ft": 7.0, "keras_lstm": 8.0}  # transformers; Keras and its backend
CEILING_S = 3.5  # the first cell at a precision measures the node's GEMM ceiling (3.0-4.6 s)
COMPILE_S = {"gpt_lm": 44.0, "keras_lstm:jax": 10.0, "keras_lstm:torch": 1.5}
EVAL_SHARE = 1 / 3  # an evaluated item costs its forward pass alone
# the fraction of the datasheet each reached there; small RNNs and the eager encoder are
# launch-bound (transformer_ft at 4.4%, its GPU at 224 W of 700)
MFU = {"gpt_lm": 0.3, "transformer_ft": 0.045, "lstm_lm": 0.3, "nmt_dp": 0.5,
       "rnn_micro": 0.003, "keras_lstm:jax": 0.001, "keras_lstm:torch": 0.0001}
REPORT_S = 45.0  # wheels, the timing probe, the report and the summary around the sweep
# each phase is its own `matrix run`: its imports, plan, and the results and report it
# writes at its end (3.6 to 6.5 s a phase beside the cells' wall times on 2 CPU cores)
PHASE_S = 4.0
# (name, --only selections), most important first; each cell falls in the first that takes it
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gpt_lm compiled", ("workload=gpt_lm", "compile=true")),
    ("transformer_ft", ("workload=transformer_ft",)),
    ("seeds 000, 001, 003", ("workload=lstm_lm,rnn_micro,nmt_dp",)),
    ("seed 002 (Keras)", ("workload=keras_lstm",)),
    ("gpt_lm eager", ("workload=gpt_lm", "compile=false")),
)


@dataclass(frozen=True)
class Estimate:
    cell: str
    cell_id: str
    start_s: float
    compile_s: float
    compute_s: float

    @property
    def total_s(self) -> float:
        return self.start_s + self.compile_s + self.compute_s


def items_per_epoch(workload: str, p: dict[str, Any]) -> tuple[float, float]:
    """(trained items, evaluated items) an epoch of the cell, from its parameters."""
    if workload == "gpt_lm":
        return float(p["steps_per_epoch"] * p["batch_size"] * p["context"]), 0.0
    if workload == "lstm_lm":
        return float(p["synthetic_tokens"]), float(p.get("eval_tokens") or 0)
    if workload in ("transformer_ft",):
        return float(p["examples"]), 0.0
    if workload == "keras_lstm":
        return float(p["samples"]), 0.0
    if workload == "rnn_micro":
        return float((p["warmup_steps"] + p["timed_steps"]) * p["batch_size"]), 0.0
    if workload == "nmt_dp":
        from workloads.nmt_dp.flops import words_per_pair

        # an epoch is a timed round of batches_per_round batches, after its warm-up
        batches = p["batches_per_round"] + p["warmup_steps"]
        return float(batches * p["batch_size"]) * words_per_pair(p), 0.0
    raise ValueError(f"no item count for {workload}")


def estimate(cell: Any, ceilings_seen: set[str]) -> Estimate:
    """One cell on one H100/H200 (`ceilings_seen`: the precisions measured before it)."""
    import importlib

    from orchestrator.hardware.peaks import datasheet_peak

    p, precision = cell.params, str(cell.params.get("precision", "fp32"))
    flops = importlib.import_module(f"workloads.{cell.workload}.flops").flops_per_item(p)
    trained, evaluated = items_per_epoch(cell.workload, p)
    peak = datasheet_peak(GPU_MODEL, precision, 1)
    rate = (peak.flops if peak else 60e12) * MFU.get(f"{cell.workload}:{p.get('backend')}",
                                                     MFU.get(cell.workload, 0.001))
    compute = cell.epochs * flops * (trained + EVAL_SHARE * evaluated) / rate
    compiled = (COMPILE_S["gpt_lm"] if cell.workload == "gpt_lm" and p.get("compile") else
                COMPILE_S.get(f"keras_lstm:{p.get('backend')}", 0.0)
                if cell.workload == "keras_lstm" else 0.0)
    start = (START_S + IMPORT_S.get(cell.workload, 0.0)
             + (CEILING_S if precision not in ceilings_seen else 0.0))
    ceilings_seen.add(precision)
    shown = " ".join(f"{k}={p[k]}" for k in ("precision", "compile", "backend", "rnn_impl")
                     if k in p)
    return Estimate(f"{cell.workload} {shown}".strip(), cell.cell_id, start, compiled, compute)


def phase_of(cell: Any) -> int:
    """The first phase whose selections take the cell."""
    for index, (_, selections) in enumerate(PHASES):
        if all(_takes(cell, selection) for selection in selections):
            return index
    raise ValueError(f"no phase takes {cell.workload} {cell.params}")


def _takes(cell: Any, selection: str) -> bool:
    key, values = selection.split("=", 1)
    have = cell.workload if key == "workload" else cell.params.get(key)
    return str(have).lower() in values.lower().split(",")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrix", type=Path)
    parser.add_argument("--budget-s", type=float, required=True)
    parser.add_argument("--phases", type=Path, help="write NAME<TAB>SECONDS<TAB>--only ARGS")
    parser.add_argument("--cells", type=Path, help="write each cell's phase, id, name and "
                        "estimate as JSON (summary.py names those the budget did not reach)")
    args = parser.parse_args(argv)
    from orchestrator.plan.cells import expand
    from orchestrator.validate.matrix import load_spec

    seen: set[str] = set()
    phases: list[list[Estimate]] = [[] for _ in PHASES]
    for cell in sorted(expand(load_spec(args.matrix)), key=phase_of):  # as they will run
        phases[phase_of(cell)].append(estimate(cell, seen))
    runs = sum(1 for phase in phases if phase)
    total = REPORT_S + PHASE_S * runs + sum(e.total_s for phase in phases for e in phase)
    print(f"estimate: {total:.0f} s on one H100/H200 ({REPORT_S:.0f} s around the sweep, "
          f"{PHASE_S:.0f} s for each of {runs} phases' runs), budget {args.budget_s:.0f} s")
    lines = []
    for (name, selections), found in zip(PHASES, phases, strict=True):
        if not found:
            continue
        seconds = PHASE_S + sum(e.total_s for e in found)
        print(f"estimate: phase {name}: {seconds:.0f} s")
        for e in found:
            print(f"estimate:   {e.cell}: {e.total_s:.0f} s (start {e.start_s:.0f}, compile "
                  f"{e.compile_s:.0f}, compute {e.compute_s:.1f})")
        lines.append("\t".join([name, f"{seconds:.0f}", *(f"--only={s}" for s in selections)]))
    if args.phases:
        args.phases.write_text("".join(line + "\n" for line in lines))
    if args.cells:
        args.cells.write_text(json.dumps([
            {"phase": name, "cell_id": e.cell_id, "cell": e.cell, "estimate_s": round(e.total_s)}
            for (name, _), found in zip(PHASES, phases, strict=True) for e in found], indent=1))
    if total > args.budget_s:
        print(f"estimate: over the budget by {total - args.budget_s:.0f} s: the phases last "
              "in the order will not be reached")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
