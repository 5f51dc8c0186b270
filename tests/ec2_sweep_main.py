"""`matrix run MATRIX` as the CLI does it, with the cluster brought up by the tests'
LoopbackLauncher (moto for EC2, the test Ray cluster for the nodes):
python tests/ec2_sweep_main.py MATRIX DASHBOARD_URL"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from orchestrator.errors import MatrixError
from orchestrator.redact import guard_logging
from orchestrator.run.sweep import SweepOptions, run_sweep
from tests.aws_env import LoopbackLauncher


def main(matrix: str, dashboard_url: str) -> int:
    guard_logging()
    options = SweepOptions(provider_options={
        "launcher": LoopbackLauncher(dashboard_url), "follower_grace_s": 60})
    try:
        summary = run_sweep(Path(matrix), options, Console(highlight=False, soft_wrap=True))
    except MatrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 130 if summary.interrupted else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
