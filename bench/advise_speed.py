"""How long `matrix advise`'s answer takes in-process over many rows: one judged frame of
CONFIGS configurations x 10 repeats x 10 epochs (5,000 and 50,000 rows), one repeat in
seven configurations flagged contended, three prices; answered per million items (the
report's Best choices, history best) and for a job with a deadline (projections tried).
Each answer is timed `--rounds` times; reported: the median, the load average around it,
and the pick (the same every round: the answer is deterministic).

    .venv/bin/python bench/advise_speed.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results" / "advise_speed.json"


def frame(configs: int):  # type: ignore[no-untyped-def]
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    return pd.DataFrame([
        {"config_id": f"c{c}", "cell_id": f"c{c}-{r}", "workload": "sleep",
         "hardware": f"h{c % 50}", "stack": "here", "param.steps": c // 50,
         "items_per_s": 100 + c + rng.normal(0, 1), "status": "ok", "run": "r",
         "flags": "contended" if (r == 0 and c % 7 == 0) else "", "item_unit": "sample",
         "price_per_hour_usd": 1.0 + c % 3, "epoch": e + 1}
        for c in range(configs) for r in range(10) for e in range(10)])


def load_average() -> float:
    with open("/proc/loadavg", encoding="utf-8") as handle:
        return float(handle.read().split()[0])


def main() -> None:
    from orchestrator.report.advise import PER_MILLION, Job, advise

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    found = []
    for configs in (50, 500):
        rows = frame(configs)
        for name, job in (("per million", PER_MILLION),
                          ("job with a deadline", Job(items=1e8, deadline_s=3600.0))):
            loads, times = [load_average()], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                answer = advise(rows, job)
                times.append(time.perf_counter() - start)
            loads.append(load_average())
            found.append({"rows": len(rows), "configurations": configs, "question": name,
                          "median_s": statistics.median(times), "rounds": times,
                          "load": loads, "fastest": answer.fastest.label if answer.fastest
                          else None})
            print(f"{len(rows):>6,} rows, {name}: {statistics.median(times):.2f} s "
                  f"(load {loads[0]:.1f}-{loads[1]:.1f})")
    RESULTS.write_text(json.dumps({
        "date": dt.date.today().isoformat(), "machine": platform.processor() or
        platform.machine(), "python": platform.python_version(), "results": found},
        indent=1) + "\n")


if __name__ == "__main__":
    main()
