"""Values from a matrix stay data wherever they travel; nothing listens beyond loopback.

(Credentials: tests/faults/test_secrets.py. YAML object tags: tests/faults/bad_matrices.
Docker's argument list: tests/test_docker.py.)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from orchestrator.errors import SpecError
from orchestrator.providers.aws.ray_cluster import cluster_config, node_setup, validated
from orchestrator.validate import load_spec
from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

PAYLOAD = "$(touch PWNED); `touch PWNED`; rm -rf ~ & echo 'x' \"y\" | tee PWNED > PWNED"


def test_a_value_with_shell_metacharacters_reaches_the_process_worker_as_data(
        matrix_file, tmp_path):
    matrix = matrix_file(f"""
        name: inert
        hardware: [{{name: box, kind: local}}]
        stacks: [{{name: here, executor: process}}]
        workloads: [{{name: sleep, params: {{seconds: 0.05, message: {json.dumps(PAYLOAD)}}}}}]
        """)
    result = run_cli("run", str(matrix), "-o", "run", "--no-ray", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (log,) = (tmp_path / "run" / "logs").iterdir()
    assert f"message: {PAYLOAD}" in log.read_text()  # printed verbatim, never run
    assert not list(tmp_path.rglob("PWNED"))


def test_every_file_of_a_run_stays_inside_its_directory_and_is_named_by_hash(
        matrix_file, tmp_path):
    matrix = matrix_file("""
        name: contained
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.05, message: "../../../etc/passwd"}}]
        """)
    before = set(tmp_path.rglob("*"))
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(matrix), "-o",
                           "run", "--no-ray"], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "MATRIX_BENCH_DB"})
    assert done.returncode == 0, done.stdout + done.stderr
    created = set(tmp_path.rglob("*")) - before
    run_dir = (tmp_path / "run").resolve()
    # The one stated exception (docs/RELIABILITY.md): the results store, by default
    # reports/results.db under the working folder (SQLite's -wal and -shm while open).
    store = tmp_path / "reports" / "results.db"
    outside = {path for path in created if not path.resolve().is_relative_to(run_dir)}
    assert outside == {store.parent, store}, outside
    for path in (run_dir / "cells").iterdir():
        assert re.fullmatch(r"[0-9a-f]{16}(\.json|\.out\.jsonl)", path.name), path.name


@pytest.mark.parametrize("name", ["../escape", "a/b", "/etc", ".hidden", "a;rm -rf ~",
                                  "$(id)", "a b", "ç"])
def test_names_that_could_leave_the_output_dir_or_reach_a_shell_are_refused(
        name, matrix_file):
    for field in ("name", "hardware", "stack"):
        text = f"""
            name: {json.dumps(name) if field == "name" else "ok"}
            hardware: [{{name: {json.dumps(name) if field == "hardware" else "box"},
                         kind: local}}]
            stacks: [{{name: {json.dumps(name) if field == "stack" else "here"},
                       executor: process}}]
            workloads: [{{name: sleep}}]
            """
        with pytest.raises(SpecError):
            load_spec(matrix_file(text))


def test_the_ec2_head_dashboard_listens_on_loopback_only(tmp_path, matrix_file):
    spec = load_spec(matrix_file(f"""
        name: dash
        aws: {{region: us-east-1, instance_profile: {json.dumps(PAYLOAD)}}}
        hardware: [{{name: gpu, kind: ec2, instance_type: p3.2xlarge, gpus: 1}}]
        stacks: [{{name: here, executor: process}}]
        workloads: [{{name: sleep}}]
        """))
    config = validated(cluster_config(spec, run_id="dash", ami="ami-0123456789abcdef0",
                                      key_name="k", ssh_private_key="~/.ssh/k.pem",
                                      security_group_id="sg-0123456789abcdef0",
                                      setup_commands=node_setup()))
    head_commands = " ".join(config["head_start_ray_commands"])
    hosts = re.findall(r"--dashboard-host[= ](\S+)", head_commands)
    assert hosts == ["127.0.0.1"], head_commands
    commands = " ".join(" ".join(config[key]) for key in config if key.endswith("commands"))
    assert "0.0.0.0" not in commands
    # The instance profile is a boto3 field, never part of a command or the user data.
    shell_text = commands + "".join(
        t["node_config"].get("UserData", "") for t in config["available_node_types"].values())
    assert PAYLOAD not in shell_text and shlex.quote(PAYLOAD) not in shell_text
    node = config["available_node_types"]["hw-gpu"]["node_config"]
    assert node["IamInstanceProfile"] == {"Name": PAYLOAD}
    assert yaml.safe_load(yaml.safe_dump(config)) == config  # plain data, no tags


def test_the_embedded_ray_runs_no_dashboard(tmp_path):
    import ray

    from orchestrator.registry.cell_run import ToolInfo
    from orchestrator.run.dispatch import RayDispatcher

    dispatcher = RayDispatcher(tmp_path, ToolInfo("test", None), [])
    try:
        node = ray._private.worker.global_worker.node
        assert not node.address_info.get("webui_url"), node.address_info
    finally:
        dispatcher.close()
