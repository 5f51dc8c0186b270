"""The GPU check's two probes before its sweep (bench/gpu/check.sh).

`imports`: every module the check's path imports, with the versions that matter; a node
that lacks one (or holds a typing_extensions too old for the carried pydantic_core) is told
so in one line, exit 2, before any device time is spent.

`timing OUT.json`: the harness's clock checked against the device's own. A block of bf16
matrix products is timed by the workloads' EpochMeter (a device synchronisation before
every clock read), once per step and once in blocks of ten steps, and by CUDA events
recorded around the same steps; summary.py holds the two within 5%. Without CUDA the
probe writes why it did not run.

    python bench/gpu/probes.py imports --mode gpu
    python bench/gpu/probes.py timing --mode gpu OUT.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# What the check's path imports: the tool and its report, the workloads and their
# frameworks. Never ray, docker or tensorflow (tests/test_gpu_check.py holds that).
NEEDED = ("pydantic", "yaml", "typer", "rich", "psutil", "pandas", "pyarrow", "matplotlib",
          "markdown_it", "numpy", "torch", "jax", "keras", "transformers", "accelerate")
NEEDED_ON_GPU = ("pynvml",)
VERSIONS = ("torch", "jax", "keras", "transformers", "pydantic")
TYPING_EXTENSIONS = (4, 14)  # what the carried pydantic_core needs
STEPS = 50
BLOCK = 10
SIZE = 8192


def imports(mode: str) -> int:
    """Import each needed module; one line each for the missing, and the versions."""
    missing, versions = [], {}
    # Keras imports its backend at once, TensorFlow unless told: the check's cells name theirs
    os.environ.setdefault("KERAS_BACKEND", "torch")
    for name in NEEDED + (NEEDED_ON_GPU if mode == "gpu" else ()):
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # a broken install raises what it raises, never a traceback
            missing.append(f"{name} ({type(exc).__name__}: {' '.join(str(exc).split())})")
            continue
        if name in VERSIONS:
            versions[name] = str(getattr(module, "__version__", "?"))
    old = _older_typing_extensions()
    if old:
        missing.append(old)
    if missing:  # one line, whatever is missing: the check stops on it before any cell
        print(f"probes: the check cannot run here: missing {'; '.join(missing)}")
        return 2
    print("probes: " + ", ".join(f"{name} {version}" for name, version in versions.items()))
    return 0


def _older_typing_extensions() -> str | None:
    """Why the typing_extensions found is too old for the carried pydantic_core (it needs
    4.14), or None: a node's older copy ahead of the carried one breaks pydantic at its
    first model, after device time is spent."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("typing_extensions")
    except PackageNotFoundError:
        return "typing_extensions (not installed; wheels.sh carries it)"
    parts = tuple(int(p) for p in found.split(".")[:2] if p.isdigit())
    if parts < TYPING_EXTENSIONS:
        return (f"typing_extensions >= {'.'.join(map(str, TYPING_EXTENSIONS))} (found "
                f"{found}; carry it in the wheel folder: bench/gpu/wheels.sh does)")
    return None


def timing(mode: str, out: Path) -> int:
    """Write the meter's and the CUDA events' seconds for the same steps, or why not."""
    import torch

    if mode != "gpu" or not torch.cuda.is_available():
        result = {"skipped": "no CUDA device" if mode == "gpu" else "--cpu: no GPU to time"}
    else:
        result = {"size": SIZE, "steps": STEPS, "blocks": [measure(1), measure(BLOCK)]}
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"probes: timing {json.dumps(result)}")
    return 0


def measure(block_steps: int) -> dict[str, float]:
    """STEPS bf16 products of SIZE-square matrices, by the meter and by CUDA events."""
    import torch

    a = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):  # warm-up: cuBLAS picks its kernel
        a @ b
    timed = compare(lambda: a @ b, torch.cuda.synchronize, block_steps,
                    torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    return {**timed, "tflops": 2 * SIZE**3 * STEPS / timed["events_s"] / 1e12}


def compare(step: Callable[[], object], sync: Callable[[], None], block_steps: int,
            start: Any, end: Any, steps: int = STEPS) -> dict[str, float]:
    """`steps` calls of `step` timed by the workloads' EpochMeter and by a pair of events
    recorded around the same calls (`record()`, `elapsed_time(other)` in ms: CUDA's)."""
    from orchestrator.worker.measure import EpochMeter

    meter = EpochMeter(warmup_steps=0, sync=sync, block_steps=block_steps)
    start.record()
    for _ in range(steps):
        with meter.step(items=1):
            step()
    end.record()
    summary = meter.summary()
    return {"block_steps": block_steps, "meter_s": float(summary["train_s"]),
            "events_s": start.elapsed_time(end) / 1000}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", choices=["imports", "timing"])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--mode", choices=["gpu", "cpu"], default="gpu")
    args = parser.parse_intermixed_args(argv)
    if args.probe == "imports":
        return imports(args.mode)
    if args.out is None:
        parser.error("timing needs OUT.json")
    return timing(args.mode, args.out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
