"""`executor: podman` on a real Podman (rootful here), the Docker executor's core tests on a
second container runtime: a cell in its image with the same columns as in a process, a
cell past its timeout that leaves no container, a broken stack as `image_failed`. The
executor is found by its entry point only (pyproject.toml), as a plugin's would be.

The images are the Docker tests' (the same stacks render the same tags); Podman copies the
one it needs from the Docker engine. Skipped without Podman unless MATRIX_BENCH_REQUIRE_PODMAN
is set, as CI sets it.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.executors.container import LABEL_RUN, ContainerSpec, Mount
from orchestrator.executors.podman.runner import run_arguments
from tests.conftest import ImageEnv, cell_records, journal, run_cli, write

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def podman_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the sweeps' podman reads: a containers.conf whose limits this machine allows
    (Podman asks for 1,048,576 open files by default, which a sandbox may refuse)."""
    why = None if shutil.which("podman") else "podman is not installed (apt-get install podman)"
    if why is None:
        info = subprocess.run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"],
                              capture_output=True, text=True, timeout=60, check=False)
        why = None if info.returncode == 0 else f"podman info failed: {info.stderr.strip()}"
    if why is not None:
        if os.environ.get("MATRIX_BENCH_REQUIRE_PODMAN"):
            pytest.fail(f"MATRIX_BENCH_REQUIRE_PODMAN is set but {why}")
        pytest.skip(why)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    conf.write_text(f'[containers]\ndefault_ulimits = ["nofile={soft}:{hard}", '
                    '"nproc=4096:4096"]\n')
    return {"CONTAINERS_CONF": str(conf)}


def podman_containers(label: str, env: dict[str, str]) -> list[str]:
    done = subprocess.run(["podman", "ps", "--all", "--quiet", "--filter", f"label={label}"],
                          capture_output=True, text=True, env={**os.environ, **env},
                          timeout=60, check=True)
    return done.stdout.split()


def podman_stack(image_env: ImageEnv, name: str) -> str:
    return image_env.stack(name)[:-1] + ", executor: podman}"


@pytest.fixture(scope="session")
def podman_run(image_env: ImageEnv, podman_env, tmp_path_factory) -> Path:
    """One sweep over the process stack, the torch image under Podman and a stack whose build
    fails: lstm_lm everywhere, and a cell that hangs past its timeout under Podman."""
    root = tmp_path_factory.mktemp("podded")
    matrix = write(root / "podded.yaml", f"""
        name: podded
        hardware: [{{name: box, kind: local}}]
        stacks:
          - {{name: here, executor: process}}
          - {podman_stack(image_env, "torch-cpu")}
          - {podman_stack(image_env, "broken")}
        workloads:
          - {{name: lstm_lm, preset: tiny, dataset: synthetic, epochs: 1,
              params: {{synthetic_tokens: 40000}}}}
          - {{name: sleep, params: {{seconds: 0.2, fault: hang}}, timeout_s: 8}}
        exclude:
          - {{workload: sleep, stack: [here, broken]}}
        """ + image_env.images_section())
    done = run_cli("run", str(matrix), "--no-ray", cwd=root, env=podman_env)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "reports" / "podded"


def test_podman_is_registered_by_entry_point_alone():
    (entry,) = [e for e in entry_points(group="matrix_bench.executors") if e.name == "podman"]
    assert entry.value == "orchestrator.executors.podman:KIND"
    core = Path(__file__).parent.parent / "orchestrator"
    naming = [str(p.relative_to(core)) for p in core.rglob("*.py")
              if "podman" in p.read_text() and "podman" not in p.parts]
    assert naming == []  # no core module names it: one new folder and its entry point


def test_a_cell_runs_in_podman_with_the_same_columns_as_in_a_process(podman_run):
    lstm = {c["stack"]: c for c in cell_records(podman_run) if c["workload"] == "lstm_lm"}
    assert lstm["here"]["status"] == "ok" and lstm["torch-cpu"]["status"] == "ok", lstm
    rows = pd.read_parquet(podman_run / "results.parquet")
    rows = rows[rows["workload"] == "lstm_lm"]
    here, image = rows[rows["stack"] == "here"], rows[rows["stack"] == "torch-cpu"]
    measured = [c for c in rows.columns if here[c].notna().all()
                and c not in ("image_tag", "image_id", "repo_digest")
                # an ok cell's error holds only its flags' reasons: the loaded machine's
                # `contended` on one side and not the other (CI), no column an executor fills
                and c != "error"]
    missing = [c for c in measured if image[c].isna().any()]
    assert not missing, f"columns the process executor fills but Podman's does not: {missing}"
    assert len(image) == 1 and (image.items_per_s > 0).all()
    records = journal(podman_run)
    (prov,) = [r for r in records if r["record"] == "provenance"
               and r["cell_id"] == lstm["torch-cpu"]["cell_id"]]
    assert prov["hostname"] != socket.gethostname()  # it ran in the container
    assert prov["image_id"].startswith("sha256:") and prov["framework_version"].startswith("2.13")


def test_a_cell_past_its_timeout_leaves_no_podman_container(podman_run, podman_env):
    (hung,) = [c for c in cell_records(podman_run) if c["workload"] == "sleep"]
    assert hung["status"] == "timeout", hung
    assert podman_containers(f"{LABEL_RUN}=podded", podman_env) == []


def test_a_broken_stack_under_podman_gives_image_failed_rows(podman_run):
    (broken,) = [c for c in cell_records(podman_run) if c["stack"] == "broken"]
    assert broken["status"] == "image_failed"
    assert "no-such-package-matrix-bench" in broken["log_tail"]


def test_without_podman_a_cell_is_executor_unavailable_in_one_line(image_env, tmp_path):
    """A node without podman: the cell says so, the sweep goes on."""
    matrix = write(tmp_path / "m.yaml", f"""
        name: nopodman
        hardware: [{{name: box, kind: local}}]
        stacks: [{podman_stack(image_env, "torch-cpu")}]
        workloads: [{{name: sleep, params: {{seconds: 0.1}}}}]
        """ + image_env.images_section())
    path = []  # this machine's PATH with every folder's podman left out
    for number, folder in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not (Path(folder) / "podman").exists():
            path.append(folder)
            continue
        copy = tmp_path / f"bin{number}"
        copy.mkdir()
        for tool in Path(folder).iterdir():
            if tool.name != "podman":
                (copy / tool.name).symlink_to(tool)
        path.append(str(copy))
    done = run_cli("run", str(matrix), "--no-ray", cwd=tmp_path,
                   env={"PATH": os.pathsep.join(path)})
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = cell_records(tmp_path / "reports" / "nopodman")
    assert cell["status"] == "executor_unavailable"
    assert cell["error"] == "podman is not installed on this node", cell["error"]


def test_the_container_is_said_as_an_argument_list():
    spec = ContainerSpec(image="sha256:abc", command=("python3", "-m", "orchestrator.worker",
                                                      "$(id)"),
                         mounts=(Mount("/h/cells", "/matrix/cells", False),
                                 Mount("/h/data", "/matrix/data", True)),
                         environment={"HOME": "/tmp"}, labels={LABEL_RUN: "r; rm -rf /"},
                         name="matrix-r-c", user="1000:1000", gpus=2, memory_limit_mb=512)
    args = run_arguments(spec)
    assert args[-5:] == ["sha256:abc", "python3", "-m", "orchestrator.worker", "$(id)"]
    assert ["--label", f"{LABEL_RUN}=r; rm -rf /"] == args[args.index("--label"):][:2]
    assert "/h/data:/matrix/data:ro" in args and "/h/cells:/matrix/cells:rw" in args
    assert args.count("--device") == 2 and "nvidia.com/gpu=1" in args
    assert args[args.index("--memory-swap") + 1] == "512m" and "--init" in args
    assert args[args.index("--network") + 1] == "none"
