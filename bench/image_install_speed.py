"""pip against uv, installing a stack image's lock in the image build (images/installer.py).

The Docker tests' `torch-cpu` stack (CPU torch 2.13.0, numpy and their dependencies, about
0.7 GB installed) is built on the local engine from the same base image, lock and loopback
wheelhouse, once with `MATRIX_BENCH_IMAGE_INSTALLER=pip` and once with uv, rounds
alternating which goes first; each image is removed after its round, so every build installs
from nothing. Timed: the whole build (what a sweep waits for), and the install step alone
(from its "Step N" line to the next, read off the build log's timestamps).

    .venv/bin/python bench/image_install_speed.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from orchestrator.images.engine import docker_client  # noqa: E402
from orchestrator.images.stack_image import build_image, render  # noqa: E402
from orchestrator.spec.model import Images, Stack  # noqa: E402
from tests.docker_env import BASE_TAG, ensure_base_image, torch_wheelhouse, write_locks  # noqa: E402


def timed_build(installer: str, images: Images, stack: Stack, log: Path) -> tuple[float, float]:
    """(the whole build's seconds, the install step's), from an engine without the image."""
    os.environ["MATRIX_BENCH_IMAGE_INSTALLER"] = installer
    rendered = render(stack, images)
    client = docker_client()
    stamps: list[tuple[float, str]] = []
    start = time.perf_counter()
    built = build_image(client, rendered, log,
                        lambda line: stamps.append((time.perf_counter(), line)))
    whole = time.perf_counter() - start
    steps = [(t, line) for t, line in stamps if line.startswith("Step ")]
    install = next(i for i, (_, line) in enumerate(steps) if "install" in line
                   and "--require-hashes" in line)
    step_s = steps[install + 1][0] - steps[install][0]
    client.images.remove(built.image_id, force=True)
    return whole, step_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    ensure_base_image(docker_client())
    with tempfile.TemporaryDirectory(prefix="image-install-") as scratch:
        wheelhouse = torch_wheelhouse()
        locks = write_locks(Path(scratch) / "locks", wheelhouse)
        images = Images(locks=str(locks), wheelhouse=str(wheelhouse))
        stack = Stack(name="torch-cpu", framework="torch", framework_version="2.13.0",
                      python="3.11", base_image=BASE_TAG)
        times: dict[str, list[tuple[float, float]]] = {"pip": [], "uv": []}
        for round_ in range(args.rounds):
            order = ["pip", "uv"] if round_ % 2 == 0 else ["uv", "pip"]
            for installer in order:
                whole, step = timed_build(installer, images, stack,
                                          Path(scratch) / f"{installer}-{round_}.log")
                times[installer].append((whole, step))
                print(f"round {round_ + 1} {installer}: build {whole:.1f} s, install step "
                      f"{step:.1f} s", flush=True)
    medians = {k: (statistics.median(w for w, _ in v), statistics.median(s for _, s in v))
               for k, v in times.items()}
    print(f"median build: pip {medians['pip'][0]:.1f} s, uv {medians['uv'][0]:.1f} s "
          f"(pip/uv {medians['pip'][0] / medians['uv'][0]:.2f}); install step: pip "
          f"{medians['pip'][1]:.1f} s, uv {medians['uv'][1]:.1f} s (pip/uv "
          f"{medians['pip'][1] / medians['uv'][1]:.2f})")
    print(f"{datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, Python "
          f"{platform.python_version()}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
