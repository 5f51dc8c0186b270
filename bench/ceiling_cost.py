"""What a node's ceiling probe costs and what it measures (issue 40), per framework and
precision, each in a fresh process that has already imported its framework, as a worker
has once its workload ran: the probe's own seconds (sizing, warm-up, compilation and the
timed blocks), its ceiling, and the spread of that ceiling over the repeats against this
CPU's estimated upper bound (hardware/peaks.py). Medians of several runs.
Usage: python bench/ceiling_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.hardware.peaks import cpu_peak_estimate  # noqa: E402

CASES = (("torch", "fp32"), ("torch", "bf16"), ("jax", "fp32"), ("tensorflow", "fp32"))
PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
from orchestrator.worker.ceiling import measure
found = measure(sys.argv[1], sys.argv[2], on_gpu=False)
print(json.dumps({"flops": found.flops, "cost_s": found.cost_s, "probe": found.probe}))
"""


def probe(framework: str, precision: str) -> dict[str, float | str]:
    done = subprocess.run([sys.executable, "-c", PROBE, framework, precision], cwd=ROOT,
                          capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
                               "PATH": "/usr/bin:/bin"})
    found: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/ceiling_cost.json")
    args = parser.parse_args()
    cases = []
    for framework, precision in CASES:
        runs = [probe(framework, precision) for _ in range(args.repeats)]
        flops = [float(r["flops"]) for r in runs]
        bound = cpu_peak_estimate(precision)
        cases.append({
            "framework": framework, "precision": precision,
            "cost_s_median": round(statistics.median(float(r["cost_s"]) for r in runs), 2),
            "cost_s_max": round(max(float(r["cost_s"]) for r in runs), 2),
            "ceiling_gflops_median": round(statistics.median(flops) / 1e9, 1),
            "ceiling_gflops_min": round(min(flops) / 1e9, 1),
            "ceiling_gflops_max": round(max(flops) / 1e9, 1),
            "of_estimate_median": None if bound is None else
            round(statistics.median(flops) / bound.flops, 3),
            "probe": runs[0]["probe"]})
        print(json.dumps(cases[-1]))
    import torch  # the versions the figures were measured with

    result = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": f"{platform.node()} {platform.machine()}",
              "cpu": cpu_model(), "python": platform.python_version(),
              "torch": torch.__version__, "repeats": args.repeats, "cases": cases}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


def cpu_model() -> str | None:
    from orchestrator.worker.host import cpu_model as model

    return model()


if __name__ == "__main__":
    main()
