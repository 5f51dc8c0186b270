"""Credentials in the environment never reach the run's files, the output or the logs."""

from __future__ import annotations

import logging

import pytest

from orchestrator.redact import guard_logging
from tests.conftest import run_cli, write

ACCESS_KEY = "fake-access-key-id-for-matrix-bench-tests"
SECRET_KEY = "fake-secret-for-matrix-bench-tests-not-a-credential"


def test_log_records_are_masked_and_the_sdk_stays_above_debug(monkeypatch, caplog):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    guard_logging()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("matrix.test").warning("signed with %s", SECRET_KEY)
        logging.getLogger("botocore.endpoint").debug("headers: %s", SECRET_KEY)
    assert "signed with ***" in caplog.text and SECRET_KEY not in caplog.text
    assert logging.getLogger("botocore").getEffectiveLevel() >= logging.INFO


@pytest.mark.ray
def test_a_priced_sweep_with_credentials_leaves_them_nowhere(ray_cluster, moto_server,
                                                            tmp_path):
    write(tmp_path / "m.yaml", """
        name: secrets
        aws: {region: us-east-1, instance_profile: matrix-bench-node}
        hardware: [{name: node-a, kind: ec2, instance_type: c5.xlarge, spot: true}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.2, fault: [none, raise]}}]
        """)
    done = run_cli("run", "m.yaml", cwd=tmp_path, env={
        "RAY_ADDRESS": ray_cluster.address, "HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY})
    assert done.returncode == 0, done.stderr
    assert "price: node-a $" in done.stdout and "spot-price-history" in done.stdout  # moto
    everything = done.stdout + done.stderr + "".join(
        p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file())
    assert ACCESS_KEY not in everything and SECRET_KEY not in everything


def test_the_worker_gets_no_cloud_credentials(monkeypatch, matrix_file):
    from orchestrator.executors.process import _worker_env
    from orchestrator.matrix import expand
    from orchestrator.spec import load_spec

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    (cell,) = expand(load_spec(matrix_file("""
        name: w
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep}]
        """)))
    env = _worker_env(cell)
    assert "AWS_SECRET_ACCESS_KEY" not in env and "AWS_ACCESS_KEY_ID" not in env
    assert env["PYTHONUNBUFFERED"] == "1"
