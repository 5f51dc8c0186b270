"""Credentials in the environment never reach the run's files, the output or the logs."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.redact import guard_logging
from tests.conftest import run_cli, write

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

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


# Credentials a user may well have exported for other tools, each with a value to look for.
CREDENTIALS = {name: f"fake-{name.lower().replace('_', '-')}-7d1e9" for name in (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "HF_TOKEN",
    "WANDB_API_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY", "PGPASSWORD", "DB_PASSWORD",
    "AZURE_CLIENT_SECRET", "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_AUTH_ACCESS_TOKEN",
    "MATRIX_BENCH_API_TOKEN", "SSH_AUTH_SOCK")}
# A proxy that needs a password: a worker gets the proxy, never the password
PROXY_PASSWORD = "fake-proxy-password-7d1e9"
PROXY = {"HTTPS_PROXY": f"http://proxyuser:{PROXY_PASSWORD}@proxy.internal:3128"}
SLEEPER = """
    name: {name}
    hardware: [{{name: box, kind: local}}]
    stacks: [{stack}]
    workloads: [{{name: sleep, params: {{seconds: 2.5}}, epochs: 1}}]
    """


def test_a_worker_is_given_settings_and_never_a_credential():
    from orchestrator.executors.environment import worker_environment

    settings = {"PATH": "/usr/bin", "HOME": "/home/u", "LC_ALL": "C.UTF-8",
                "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false",
                "CUDA_VISIBLE_DEVICES": "0", "HTTPS_PROXY": "http://proxy:3128",
                "MATRIX_BENCH_DATA": "/data", "TF_ENABLE_ONEDNN_OPTS": "1"}
    others = {"DISPLAY": ":0", "RAY_ADDRESS": "10.0.0.1:6379", "AWS_REGION": "us-east-1",
              "AWS_PROFILE": "prod", "TORCH_HUB_TOKEN": "x" * 12}
    assert worker_environment({**settings, **CREDENTIALS, **others}) == settings
    store = {"MATRIX_BENCH_DB": "postgresql://bench:pa55word@db.internal/bench"}
    assert worker_environment({**settings, **store}) == settings  # it may hold a password
    assert worker_environment({**settings, **PROXY})["HTTPS_PROXY"] == \
        "http://proxy.internal:3128"
    # Terraform shares TensorFlow's prefix: its variables and credentials stay behind
    terraform = {"TF_VAR_db_pass": "hunter2", "TF_VAR_github_pat": "ghp_" + "x" * 36,
                 "TF_CLI_CONFIG_FILE": "/home/u/.terraformrc", "TF_TOKEN_app_example_io": "t"}
    tensorflow = {"TF_CPP_MIN_LOG_LEVEL": "1", "TF_FORCE_GPU_ALLOW_GROWTH": "true",
                  "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}
    assert worker_environment({**settings, **terraform, **tensorflow}) == \
        {**settings, **tensorflow}


def test_a_proxy_with_a_password_never_enters_a_slurm_jobs_saved_environment(monkeypatch):
    from orchestrator.providers.slurm.jobs import exported_names

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")  # no password: passed on
    monkeypatch.setenv("HTTPS_PROXY", PROXY["HTTPS_PROXY"])
    names = exported_names()  # Slurm copies these variables' values whole into the job
    assert "HTTP_PROXY" in names and "HTTPS_PROXY" not in names


def worker_processes(root: Path) -> list[dict[str, str]]:
    """The environments of the live `orchestrator.worker` processes working under `root`,
    as the kernel holds them (/proc/PID/environ)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"orchestrator.worker" not in argv or not Path(
                    os.readlink(proc / "cwd")).is_relative_to(root):
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # not ours, or gone meanwhile
            continue
        found.append(dict(item.decode().split("=", 1) for item in environ if b"=" in item))
    return found


def containers_of(client, run: str) -> list[dict[str, str]]:
    """The environments the engine gave the run's live containers (their Config.Env)."""
    return [dict(item.split("=", 1) for item in c.attrs["Config"]["Env"])
            for c in client.containers.list(filters={"label": f"matrix-bench.run={run}"})]


def sweep_watching(tmp_path: Path, args: list[str], watch) -> tuple[str, list[dict[str, str]]]:
    """`matrix run ARGS` with every credential set, and the worker environments `watch()`
    saw while it ran: (everything the sweep printed and wrote, the environments)."""
    env = {**os.environ, **CREDENTIALS, **PROXY, "COLUMNS": "200"}
    env.pop("RAY_ADDRESS", None)
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", *args],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    seen: list[dict[str, str]] = []
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        seen += watch()
        time.sleep(0.05)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    return out + everything_written(tmp_path), seen


def everything_written(root: Path) -> str:
    """Every file under `root` as text, the parquet's cells included (it is compressed)."""
    import pandas as pd

    texts = []
    for path in root.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
        if path.suffix == ".parquet":
            texts.append(pd.read_parquet(path).astype(str).to_csv())
    return "".join(texts)


def assert_clean(environments: list[dict[str, str]], output: str) -> None:
    assert environments, "no worker was seen running"
    for environment in environments:
        assert "PATH" in environment  # a real environment, read back
        assert set(CREDENTIALS) & set(environment) == set()
        assert "MATRIX_BENCH_DB" not in environment  # the sweep's store, set by conftest
        assert not [v for v in CREDENTIALS.values() if v in "\n".join(environment.values())]
        assert PROXY_PASSWORD not in "\n".join(environment.values())
    assert [v for v in CREDENTIALS.values() if v in output] == []
    assert PROXY_PASSWORD not in output


@pytest.mark.parametrize("dispatch", ["--no-ray", "embedded Ray"])
def test_no_credential_reaches_a_process_worker(tmp_path, dispatch):
    write(tmp_path / "m.yaml", SLEEPER.format(name="creds",
                                              stack="{name: here, executor: process}"))
    args = ["m.yaml", "--no-ray"] if dispatch == "--no-ray" else ["m.yaml"]
    output, seen = sweep_watching(tmp_path, args, lambda: worker_processes(tmp_path))
    assert_clean(seen, output)
    assert all(environment["PYTHONUNBUFFERED"] == "1" for environment in seen)  # the executor's
    assert {environment["HTTPS_PROXY"] for environment in seen} == {"http://proxy.internal:3128"}


@pytest.mark.docker
def test_no_credential_reaches_a_container(tmp_path, image_env):
    write(tmp_path / "m.yaml", SLEEPER.format(name="creds-docker",
                                              stack=image_env.stack("torch-cpu"))
          + image_env.images_section())
    output, seen = sweep_watching(tmp_path, ["m.yaml", "--no-ray"],
                                  lambda: containers_of(image_env.client, "creds-docker"))
    assert_clean(seen, output)
    assert all(environment["MATRIX_BENCH_DATA"] for environment in seen)
    # the thread count the sweep was given, as a process worker would have it (conftest's)
    assert {environment["OMP_NUM_THREADS"] for environment in seen} == \
        {os.environ["OMP_NUM_THREADS"]}
