"""Stack images and the docker executor on a real engine: build once, run cells inside,
fail a broken stack alone, kill at the timeout, keep values inert, push to a real registry.

The torch image is built once per session (by the first sweep) and reused by every test.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.images.engine import docker_client
from orchestrator.images.stack_image import find_image, push, render
from orchestrator.validate import load_spec
from tests.conftest import ImageEnv, cell_records, journal, run_cli, write

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def stacks_run(image_env: ImageEnv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One sweep of lstm_lm (tiny, synthetic tokens) over the process stack, the torch image and a
    stack whose build fails; `matrix run` builds the images first."""
    root = tmp_path_factory.mktemp("stacks")
    matrix = write(root / "stacks.yaml", f"""
        name: stacks
        hardware: [{{name: box, kind: local}}]
        stacks:
          - {{name: here, executor: process}}
          - {image_env.stack("torch-cpu")}
          - {image_env.stack("broken")}
        workloads:
          - {{name: lstm_lm, preset: tiny, dataset: synthetic, epochs: 1}}
        """ + image_env.images_section())
    done = run_cli("run", str(matrix), "--no-ray", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "reports" / "stacks"


def test_a_cell_runs_in_its_image_with_the_same_columns_as_in_a_process(stacks_run):
    status = {c["stack"]: c["status"] for c in cell_records(stacks_run)}
    assert status["here"] == "ok" and status["torch-cpu"] == "ok", status
    rows = pd.read_parquet(stacks_run / "results.parquet")
    here, image = rows[rows["stack"] == "here"], rows[rows["stack"] == "torch-cpu"]
    measured = [c for c in rows.columns if here[c].notna().all()
                and c not in ("image_tag", "image_id", "repo_digest")
                # an ok cell's error holds only its flags' reasons: the loaded machine's
                # `contended` on one side and not the other (CI), no column an executor fills
                and c != "error"]
    missing = [c for c in measured if image[c].isna().any()]
    assert not missing, f"columns the process executor fills but the container does not: {missing}"
    assert len(image) == 1 and (image.items_per_s > 0).all()


def test_container_rows_carry_the_image_and_the_stack_inside_it(stacks_run, image_env):
    records = journal(stacks_run)
    cell_of = {c["cell_id"]: c["stack"] for c in records if c["record"] == "cell"}
    (prov,) = [r for r in records if r["record"] == "provenance"
               and cell_of[r["cell_id"]] == "torch-cpu"]
    spec = load_spec(stacks_run.parent.parent / "stacks.yaml")
    tag = render(next(s for s in spec.stacks if s.name == "torch-cpu"), spec.images).tag
    assert prov["image_tag"] == tag
    assert prov["image_id"] == image_env.client.images.get(tag).id
    assert prov["framework_version"].startswith("2.13.0") and prov["python"].startswith("3.11")
    assert prov["hostname"] != socket.gethostname()  # it ran in the container


def test_a_broken_stack_gives_image_failed_rows_with_the_build_log(stacks_run):
    (broken,) = [c for c in cell_records(stacks_run) if c["stack"] == "broken"]
    assert broken["status"] == "image_failed"
    assert "no-such-package-matrix-bench" in broken["log_tail"]
    assert "no-such-package-matrix-bench" in (stacks_run / "build" / "broken.log").read_text()


def test_the_second_build_of_an_unchanged_stack_builds_nothing(stacks_run):
    matrix = stacks_run.parent.parent / "stacks.yaml"
    start = time.perf_counter()
    again = run_cli("build", str(matrix), cwd=matrix.parent)
    elapsed = time.perf_counter() - start
    assert "torch-cpu: matrix-bench:" in again.stdout and " cached," in again.stdout, again.stdout
    assert "built torch-cpu" not in again.stdout
    assert again.returncode == 1  # the broken stack still fails, and says so
    print(f"cache-hit build: {elapsed:.2f} s")


def test_one_changed_pin_changes_the_tag_and_the_same_inputs_keep_it(image_env, tmp_path):
    spec = load_spec(write(tmp_path / "m.yaml", f"""
        name: tags
        hardware: [{{name: box, kind: local}}]
        stacks: [{image_env.stack("torch-cpu")}]
        workloads: [{{name: sleep}}]
        """ + image_env.images_section()))
    (stack,) = spec.stacks
    first, second = render(stack, spec.images), render(stack, spec.images)
    assert first.tag == second.tag and first.dockerfile == second.dockerfile
    locks = tmp_path / "locks"
    shutil.copytree(image_env.locks, locks)
    lock = locks / "torch-cpu.txt"
    lock.write_text(lock.read_text().replace("numpy==", "numpy==0.0.0.dev0+", 1))
    moved = render(stack, spec.images.model_copy(update={"locks": str(locks)}))
    assert moved.tag != first.tag
    other_base = stack.model_copy(update={"base_image": "debian:bookworm"})
    assert render(other_base, spec.images).tag != first.tag


@pytest.fixture(scope="session")
def sleep_run(image_env: ImageEnv, ray_cluster, tmp_path_factory, stacks_run) -> Path:
    """Through the real Ray cluster into containers: a cell that hangs past its timeout and
    one whose parameter is full of shell metacharacters."""
    root = tmp_path_factory.mktemp("sleepers")
    matrix = write(root / "sleepers.yaml", f"""
        name: sleepers
        hardware: [{{name: node-a, kind: local}}]
        stacks: [{image_env.stack("torch-cpu")}]
        workloads:
          - name: sleep
            params: {{seconds: 0.2, fault: [hang, none], message: "{METACHARACTERS}"}}
            timeout_s: 8
        """ + image_env.images_section())
    done = run_cli("run", str(matrix), cwd=root, env={"RAY_ADDRESS": ray_cluster.address})
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "reports" / "sleepers"


METACHARACTERS = "$(touch /tmp/pwned); `id` && echo 'x' | tee /tmp/pwned2 > /dev/null; ${HOME}"


def test_a_cell_past_its_timeout_leaves_no_container(sleep_run, image_env):
    status = {c["param.fault"]: c for c in cell_records(sleep_run)}
    assert status["hang"]["status"] == "timeout"
    assert status["hang"]["node_id"] is not None
    left = image_env.client.containers.list(all=True,
                                            filters={"label": "matrix-bench.run=sleepers"})
    assert left == []


def test_a_value_with_shell_metacharacters_reaches_the_worker_as_data(sleep_run):
    (cell,) = [c for c in cell_records(sleep_run) if c["param.fault"] == "none"]
    assert cell["status"] == "ok"
    log = (sleep_run / "logs" / f"{cell['cell_id']}.log").read_text()
    assert f"message: {METACHARACTERS}" in log


def test_push_records_the_digest_and_a_pull_by_digest_gives_the_same_image(
        stacks_run, registry):
    client = docker_client()
    records = journal(stacks_run)
    tag = next(r["image_tag"] for r in records if r.get("image_tag"))
    ref = find_image(client, "torch-cpu", tag)
    pushed = push(client, ref, f"{registry}/matrix-bench")
    assert pushed.repo_digest.startswith(f"{registry}/matrix-bench@sha256:")
    request = urllib.request.Request(
        f"http://{registry}/v2/matrix-bench/manifests/{tag.split(':')[1]}", method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    with urllib.request.urlopen(request) as answer:
        assert answer.headers["Docker-Content-Digest"] == pushed.repo_digest.split("@")[1]
    pulled = client.images.pull(pushed.repo_digest)
    assert pulled.id == ref.image_id
    assert json.dumps(pulled.attrs["RepoDigests"]).count(pushed.repo_digest) == 1


def test_sigterm_mid_cell_removes_the_container(image_env, ray_cluster, stacks_run,
                                                 tmp_path):
    matrix = write(tmp_path / "stop.yaml", f"""
        name: stop-containers
        hardware: [{{name: node-a, kind: local}}]
        stacks: [{image_env.stack("torch-cpu")}]
        workloads: [{{name: sleep, params: {{seconds: 120, steps: 120}}}}]
        """ + image_env.images_section())
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(matrix),
         "--ray-address", ray_cluster.address], cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    label = {"label": "matrix-bench.run=stop-containers"}
    deadline = time.monotonic() + 120
    while not image_env.client.containers.list(filters=label):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the container never started"
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 130 and "run the same command again" in stdout
    deadline = time.monotonic() + 15  # the cancelled Ray task removes it as it unwinds
    while image_env.client.containers.list(all=True, filters=label):
        assert time.monotonic() < deadline, "a container outlived its sweep"
        time.sleep(0.2)


def test_plan_lists_the_images_with_their_tags_and_state(stacks_run):
    matrix = stacks_run.parent.parent / "stacks.yaml"
    shown = run_cli("plan", str(matrix), "--rerun", cwd=matrix.parent)
    assert shown.returncode == 0, shown.stderr
    rows = {line.split("│")[1].strip(): line for line in shown.stdout.splitlines()
            if "matrix-bench:" in line}
    assert "built" in rows["torch-cpu"] and "to build" in rows["broken"]
