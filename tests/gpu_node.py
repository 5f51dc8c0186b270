"""A GPU node's Python environment, as far as a CPU machine can make one offline, for the GPU
check's CPU run (tests/test_gpu_check.py).

- `node_environment`: a virtual environment holding exactly the packages a target node has
  (bench/gpu/node-packages.txt, with their dependencies, and pip), linked from this test
  environment's site-packages: so no pydantic, keras, ray, docker or tensorflow, and the
  check works only through the wheels it installs itself.
- `wheel_folder`: the wheels of what bench/gpu/needs.txt resolves to (pydantic, keras and
  their dependencies), packed again from the distributions installed here, each with the
  tags its own WHEEL file names: the package index's wheels already on this machine, so
  bench/gpu/wheels.sh can resolve from a folder (PIP_NO_INDEX, PIP_FIND_LINKS) without a
  network.
- `load_summary`: bench/gpu/summary.py as a module, to judge recorded runs.
- `IMPORT_WATCH`: a sitecustomize that logs every attempt, by any process, to import ray,
  docker or tensorflow, with the file that asked.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement

from tests.conftest import PROJECT

GPU_BENCH = PROJECT / "bench" / "gpu"
WATCHED = ("ray", "docker", "tensorflow")
IMPORT_WATCH = f'''
"""Logs attempts to import {", ".join(WATCHED)} (tests/gpu_node.py)."""
import os
import sys

_WATCHED = {WATCHED!r}


class _Watch:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _WATCHED:
            frame = sys._getframe(1)
            while frame and (frame.f_code.co_filename.startswith("<frozen")
                             or "importlib" in frame.f_code.co_filename):
                frame = frame.f_back
            where = frame.f_code.co_filename if frame else "?"
            with open(os.environ["MATRIX_BENCH_IMPORT_LOG"], "a", encoding="utf-8") as log:
                log.write(f"{{name}} from {{where}}\\n")
        return None


sys.meta_path.insert(0, _Watch())
'''


def load_summary() -> ModuleType:
    """bench/gpu/summary.py, which is a script, as a module."""
    spec = importlib.util.spec_from_file_location("gpu_summary", GPU_BENCH / "summary.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def listed(path: Path) -> list[str]:
    """The names of a list file: one a line, '#' comments."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def closure(names: Iterable[str], leaving_out: Iterable[str] = ()
            ) -> dict[str, metadata.Distribution]:
    """The installed distributions of `names` and everything they require here (markers
    evaluated for this interpreter, no extras), less `leaving_out`; names not installed
    are left out."""
    found: dict[str, metadata.Distribution] = {}
    pending = [normalised(Requirement(name).name) for name in names]
    skipped = set(leaving_out)
    while pending:
        name = pending.pop()
        if name in found or name in skipped:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found[name] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(normalised(requirement.name))
    return found


def node_environment(root: Path) -> Path:
    """A virtual environment of the node's packages and pip; returns its python.

    What the wheels bring is left out even where a newer release of a node package here
    requires it (typer requires pydantic since 0.2x; the nodes' older typer does not)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    purelib = Path(sysconfig.get_paths(vars={"base": str(root), "platbase": str(root)})
                   ["purelib"])
    here = Path(sysconfig.get_paths()["purelib"])
    has = listed(GPU_BENCH / "node-packages.txt")
    lacks = set(closure(listed(GPU_BENCH / "needs.txt"))) - set(has)
    for dist in closure([*has, "pip"], leaving_out=lacks).values():
        for top in {Path(str(f)).parts[0] for f in dist.files or []} - {"..", "__pycache__"}:
            source = here / top
            if source.exists() and not (purelib / top).exists():
                (purelib / top).symlink_to(source)
    return root / "bin" / "python"


def wheel_folder(folder: Path) -> list[str]:
    """Pack needs.txt's closure, as installed here, into wheels in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    packed = []
    for dist in closure(listed(GPU_BENCH / "needs.txt")).values():
        packed.append(repack(dist, folder).name)
    return packed


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """One installed distribution as a wheel again: its files from its RECORD, stored."""
    wheel_meta = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines()
            if line.startswith("Tag:")]
    python, abi, platform = (".".join(sorted({t.split("-")[i] for t in tags})) for i in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    target = folder / f"{name}-{dist.version}-{python}-{abi}-{platform}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for file in dist.files or []:
            path = Path(str(file))
            if path.parts[0] == ".." or "__pycache__" in path.parts:
                continue
            source = Path(str(dist.locate_file(file)))
            if source.is_file():
                wheel.write(source, str(path))
    return target
