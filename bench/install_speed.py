"""pip against uv, installing the same packages into a fresh virtual environment.

Both read the same index (PyPI, or INDEX given) with an empty cache of their own, so the
downloads, the resolution and the install are all timed, as on a fresh machine; pip runs
`--isolated` (no pip.conf: no local mirror, no constraints), uv with `--no-config`. The
packages are matrix-bench's own runtime dependencies (pyproject.toml), about 0.5 GB
installed, without torch (whose 5.4 GB CUDA build would time the network alone).

    .venv/bin/python bench/install_speed.py [--index URL] [--rounds N]

Prints each round's seconds and the ratio pip/uv; rounds alternate which installer goes
first, so a warming network or disk cache favours neither.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path

from uv import find_uv_bin

PROJECT = Path(__file__).resolve().parent.parent


def requirements() -> list[str]:
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    return [r for r in project["dependencies"] if not r.startswith("uv")]


def timed_install(installer: str, index: str, packages: list[str], scratch: Path) -> float:
    """Seconds to make a venv's packages with `installer` from an empty cache (the venv
    itself is made beforehand, untimed, by the same `python -m venv`)."""
    venv, cache = scratch / f"venv-{installer}", scratch / f"cache-{installer}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    if installer == "pip":  # pip itself installed untimed: uv needs no copy in the venv
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        command = [str(python), "-m", "pip", "install", "--isolated", "-q",
                   "--disable-pip-version-check", "--cache-dir", str(cache),
                   "--index-url", index, *packages]
    else:
        command = [find_uv_bin(), "pip", "install", "--no-config", "-q", "--python",
                   str(python), "--cache-dir", str(cache), "--index-url", index, *packages]
    start = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", default="https://pypi.org/simple")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    packages = requirements()
    uv_version = subprocess.run([find_uv_bin(), "--version"], capture_output=True,
                                text=True).stdout.strip()
    print(f"# {datetime.now(UTC).isoformat(timespec='minutes')}, {platform.node()}, "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()},"
          f" {uv_version}, pip {subprocess.run([sys.executable, '-m', 'pip', '--version'], capture_output=True, text=True).stdout.split()[1]}")  # noqa: E501
    print(f"# {len(packages)} requirements from {args.index}: {', '.join(packages)}")
    times: dict[str, list[float]] = {"pip": [], "uv": []}
    for round_ in range(args.rounds):
        order = ("pip", "uv") if round_ % 2 == 0 else ("uv", "pip")
        for installer in order:
            scratch = Path(tempfile.mkdtemp(prefix=f"install-{installer}-"))
            try:
                seconds = timed_install(installer, args.index, packages, scratch)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            times[installer].append(seconds)
            print(f"round {round_ + 1}: {installer} {seconds:.1f} s", flush=True)
    pip, uv = statistics.median(times["pip"]), statistics.median(times["uv"])
    print(f"median: pip {pip:.1f} s, uv {uv:.1f} s: uv {pip / uv:.1f}x as fast")


if __name__ == "__main__":
    main()
