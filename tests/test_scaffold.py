"""`matrix new-workload NAME -o DIR`: the folder it makes runs as made, through `matrix run
DIR/example.yaml` on this machine's CPU in well under a minute, and its own test passes; a
name or folder it cannot use is one line and nothing is written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile

import pandas as pd
import pytest

from tests.conftest import assert_statuses, run_cli

pytestmark = pytest.mark.slow  # real training and a second pytest


def test_the_scaffold_runs_as_made_and_its_own_test_passes(tmp_path):
    made = run_cli("new-workload", "my_bench", "-o", str(tmp_path / "my_bench"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "my_bench"
    assert sorted(p.name for p in folder.iterdir()) == [
        "defaults.yaml", "example.yaml", "flops.py", "test_workload.py", "workload.py"]
    done = run_cli("run", str(folder / "example.yaml"), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "my_bench-example"
    assert_statuses(run_dir, ["ok", "ok"])
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert (rows["items_per_s"] > 0).all() and (rows["flops_per_item"] > 0).all()
    assert not rows["flags"].str.contains("implausible").any()

    as_a_user = {k: v for k, v in os.environ.items() if k != "MATRIX_BENCH_DB"}  # the default
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(folder)], capture_output=True, text=True, cwd=folder,
                         timeout=600, env=as_a_user)
    assert own.returncode == 0, own.stdout + own.stderr
    assert "2 passed" in own.stdout
    assert not (folder / "reports").exists()  # its test wrote into no results store


@pytest.mark.parametrize(("name", "problem"), [
    ("my-bench", "'my-bench' is not a workload name"),
    ("lstm_lm", "'lstm_lm' is a built-in workload: give yours another name"),
    ("my_bench", "already exists and is not an empty folder: nothing was written"),
])
def test_a_name_or_folder_it_cannot_use_is_one_line_and_nothing_is_written(tmp_path, name,
                                                                          problem):
    folder = tmp_path / "taken"
    folder.mkdir()
    (folder / "mine.py").write_text("# the user's file\n")
    target = folder if name == "my_bench" else tmp_path / "fresh"
    done = run_cli("new-workload", name, "-o", str(target), cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and problem in line, line
    assert sorted(p.name for p in folder.iterdir()) == ["mine.py"]
    assert not (tmp_path / "fresh").exists()


def test_the_package_scaffold_builds_a_wheel_that_carries_its_workload(tmp_path):
    """--package: a distribution whose wheel (built by setuptools, as a user's pip would)
    holds defaults.yaml and the entry point; installed (into a folder on PYTHONPATH, never
    .venv), its example runs and its own test passes."""
    folder = tmp_path / "dist"
    made = run_cli("new-workload", "my_pkg", "-o", str(folder), "--package", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert f"install it: pip install -e {folder}" in made.stdout
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "example.yaml", "my_pkg/__init__.py", "my_pkg/defaults.yaml", "my_pkg/flops.py",
        "my_pkg/workload.py", "pyproject.toml", "test_workload.py"]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # the backend from this environment where it has one (Python 3.11's venv does), else
    # from the package index
    isolation = [] if importlib.util.find_spec("setuptools") is None else [
        "--no-build-isolation"]
    built = subprocess.run([*pip, "wheel", "--no-deps", *isolation, str(folder), "-w",
                            str(tmp_path / "wheels")], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read("my_pkg-0.1.0.dist-info/entry_points.txt").decode()
    assert "my_pkg/defaults.yaml" in names
    assert "[matrix_bench.workloads]\nmy_pkg = my_pkg" in entry_points
    site = tmp_path / "site"
    installed = subprocess.run([*pip, "install", "--no-deps", "--target", str(site),
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr

    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    done = run_cli("run", str(folder / "example.yaml"), "--no-ray", "--db", "none", cwd=tmp_path,
                   env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "my_pkg-example"
    assert_statuses(run_dir, ["ok", "ok"])
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert set(rows["workload_version"]) == {"1+my-pkg-0.1.0"}  # the release is its version
    assert (rows["flops_per_item"] > 0).all()
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(folder)], capture_output=True, text=True, cwd=folder,
                         timeout=600, env={**os.environ, **env})
    assert own.returncode == 0, own.stdout + own.stderr
