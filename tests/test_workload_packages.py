"""A workload from an installed package (entry-point group `matrix_bench.workloads`): a real
wheel, installed by pip into a temporary directory (never into .venv) that PYTHONPATH puts
on the path; the matrix names its workload like a built-in, the worker imports the package,
and its release is part of the workload's version. In an image stack the lock must pin that
release."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import assert_statuses, run_cli, write

DEFAULTS = """\
version: "2"
description: "Acme's tiny benchmark: sums a range per step."
item_unit: sample
epochs: 1
params:
  n: {type: int, default: 500, min: 1}
"""
WORKLOAD = """\
from .flops import flops_per_item


def run(ctx):
    assert flops_per_item(ctx.params) == 3.0 * ctx.params["n"]
    for epoch in ctx.epoch_range():
        meter = ctx.start_epoch(warmup_steps=1)
        for _ in range(4):
            with meter.step(items=2):
                sum(range(ctx.params["n"]))
        ctx.end_epoch(epoch, meter)
"""
FILES = {
    "acme_bench/__init__.py": "",
    "acme_bench/tiny/__init__.py": "",
    "acme_bench/tiny/defaults.yaml": DEFAULTS,
    "acme_bench/tiny/workload.py": WORKLOAD,
    "acme_bench/tiny/flops.py": "def flops_per_item(params):\n    return 3.0 * params['n']\n",
    "acme_bench/broken/__init__.py": "",  # an entry point to a package that is no workload
}
DIST_INFO = "acme_bench-0.3.1.dist-info"
META = {
    f"{DIST_INFO}/METADATA": "Metadata-Version: 2.1\nName: acme-bench\nVersion: 0.3.1\n",
    f"{DIST_INFO}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                          "Tag: py3-none-any\n",
    f"{DIST_INFO}/entry_points.txt": "[matrix_bench.workloads]\ntiny = acme_bench.tiny\n"
                                    "broken = acme_bench.broken\n",
}


def build_wheel(folder: Path) -> Path:
    """acme_bench 0.3.1 as a wheel, with its RECORD: no build backend needed."""
    wheel = folder / "acme_bench-0.3.1-py3-none-any.whl"
    files = {**FILES, **META}
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{DIST_INFO}/RECORD,,")
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{DIST_INFO}/RECORD", "\n".join(record) + "\n")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the folder pip installed the wheel into, the wheel)."""
    root = tmp_path_factory.mktemp("acme")
    wheel = build_wheel(root)
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--target", str(target), str(wheel)], check=True)
    assert (target / DIST_INFO / "entry_points.txt").is_file()
    return target, wheel


def matrix(root: Path, workload: str = "{name: tiny, params: {n: [500, 5000]}}",
           stack: str = "{name: here, executor: process}", extra: str = "") -> Path:
    return write(root / "m.yaml", f"""
        name: acme
        hardware: [{{name: box, kind: local}}]
        stacks: [{stack}]
        workloads: [{workload}]
        """ + extra)


def cli(installed: tuple[Path, Path], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={"PYTHONPATH": str(installed[0])})


def test_the_package_is_not_seen_without_its_folder_on_the_path(tmp_path):
    done = run_cli("validate", str(matrix(tmp_path)), cwd=tmp_path)
    assert done.returncode == 2 and "unknown workload 'tiny'" in done.stderr


@pytest.mark.slow
def test_a_package_workload_runs_like_a_built_in(installed, tmp_path):
    listed = cli(installed, "workloads", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("tiny "))
    assert "package acme-bench==0.3.1; counts samples;" in row
    flat = " ".join(listed.stdout.split())
    # shown with its problem, hiding nothing else
    assert "broken package acme-bench==0.3.1: cannot load the entry point broken = " \
        "'acme_bench.broken'" in flat
    assert "has no defaults.yaml" in flat
    assert "built-in" in next(line for line in listed.stdout.splitlines()
                              if line.startswith("sleep "))
    one = cli(installed, "workloads", "tiny", cwd=tmp_path)
    assert "tiny (package acme-bench==0.3.1, version 2+acme-bench-0.3.1)" in one.stdout

    done = cli(installed, "run", str(matrix(tmp_path)), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "acme"
    assert_statuses(run_dir, ["ok", "ok"])
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert sorted(rows["flops_per_item"]) == [1500.0, 15000.0]  # the package's flops.py
    assert (rows["items"] == 6).all()  # 3 timed steps of 2 items
    assert set(rows["workload_version"]) == {"2+acme-bench-0.3.1"}  # provenance
    assert "Acme's tiny benchmark" in (run_dir / "report.md").read_text()
    # the package uninstalled: the run still reports, from the declaration it recorded
    again = run_cli("report", str(run_dir), cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "workload tiny (2+acme-bench-0.3.1) is not installed here" in again.stderr
    assert "tiny" in (run_dir / "report.md").read_text()


def test_a_broken_entry_point_is_one_located_line(installed, tmp_path):
    done = cli(installed, "validate", str(matrix(tmp_path, "{name: broken}")), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'm.yaml'}:4: workloads[0].name: "), line
    assert "entry point broken = 'acme_bench.broken' of package acme-bench==0.3.1" in line
    assert line.endswith("has no defaults.yaml")


def test_a_folder_may_not_take_a_packages_name(installed, tmp_path):
    (tmp_path / "tiny").mkdir()
    done = cli(installed, "validate", str(matrix(tmp_path, "{name: tiny, path: ./tiny}")),
               cwd=tmp_path)
    assert done.returncode == 2
    assert "'tiny' is a workload of the installed package acme-bench==0.3.1: give yours " \
           "another name" in done.stderr


def lock_line(name: str, version: str) -> str:
    return f"{name}=={version} --hash=sha256:{'b' * 64}\n"


@pytest.mark.parametrize(("pins", "problem"), [
    ("", "does not pin it"),
    (lock_line("acme_bench", "0.3.0"), "pins 0.3.0"),
    (lock_line("Acme.Bench", "0.3.1"), None),  # names compare normalised
])
def test_an_image_stack_runs_a_package_only_from_its_lock(installed, tmp_path, pins, problem):
    (tmp_path / "locks").mkdir()
    write(tmp_path / "locks" / "img.txt", lock_line("torch", "2.13.0+cpu") + pins)
    path = matrix(tmp_path, stack="{name: img, framework: torch, framework_version: 2.13.0}",
                  extra="images: {locks: ./locks}\n")
    done = cli(installed, "validate", str(path), cwd=tmp_path)
    if problem is None:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}:4: workloads[0].name: tiny comes from the "
                           "installed package acme-bench==0.3.1, which stack img's lock "), line
    assert f"{problem}: add acme-bench==0.3.1 with its hash to the lock" in line
