"""How fast `matrix dashboard` writes its site over a large store. Issue 30 asks: under 10 s
over 100 runs and 50,000 rows.

The store is bench/store_speed.py's history store: 100 runs, a day apart, of the same 50
configurations x 5 repeats (25,000 cells, 50,000 measurement rows), synthetic journals
written through the real RunDirectory and imported. Timed, median of `--rounds`, each into a
new folder: the build as a function (`build_dashboard`: read the store, write 103 pages and
the assets), and `matrix dashboard -o DIR --db URL` as a user runs it (a fresh process). The
site's size is recorded too.

    .venv/bin/python bench/dashboard_speed.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_speed import history_store, load_average, machine, revision

from orchestrator.dashboard.build import build_dashboard

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results" / "dashboard_speed.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dashboard-speed-") as tmp:
        root = Path(tmp)
        url, store = history_store(root)
        function_s, cli_s = [], []
        for n in range(args.rounds):
            started = time.perf_counter()
            line = build_dashboard(root / f"site-f{n}", url)
            function_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "orchestrator.cli", "dashboard", "-o",
                            str(root / f"site-c{n}"), "--db", url], check=True,
                           capture_output=True, cwd=PROJECT)
            cli_s.append(time.perf_counter() - started)
        site = root / "site-c0"
        files = [p for p in site.rglob("*") if p.is_file()]
        record = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                  "machine": machine(), **revision(), "load_average": load_average(),
                  "store": store, "rounds": args.rounds, "output": line,
                  "function_s": statistics.median(function_s), "function_runs_s": function_s,
                  "cli_s": statistics.median(cli_s), "cli_runs_s": cli_s,
                  "site_files": len(files),
                  "site_bytes": sum(p.stat().st_size for p in files),
                  "largest_page_bytes": max(p.stat().st_size for p in files
                                            if p.suffix == ".html")}
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(f"build_dashboard: {record['function_s']:.2f} s (rounds {function_s})\n"
          f"matrix dashboard: {record['cli_s']:.2f} s (rounds {cli_s})\n"
          f"site: {record['site_files']} files, {record['site_bytes'] / 2**20:.1f} MiB, "
          f"largest page {record['largest_page_bytes'] / 2**20:.2f} MiB\n"
          f"wrote {RESULTS.relative_to(PROJECT)}")


if __name__ == "__main__":
    main()
