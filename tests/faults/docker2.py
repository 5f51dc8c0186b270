"""A second Docker engine on its own socket, data root and exec root, so that a test can
stop it for real (the machine's engine stays up for every other test) and start it again.

It gets the torch-cpu stack image (and its base) from the machine's engine by
`docker save | docker load`: about 20 s for the 1.2 GB image, where building it there
would take the base's import plus about 85 s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.images.stack_image import render
from orchestrator.validate import load_spec
from tests.conftest import ImageEnv, run_cli, write

START_TIMEOUT_S = 180  # restoring after a crash, on a busy 2-core machine
STACK = "torch-cpu"


@dataclass
class SecondEngine:
    root: Path  # short: a unix socket path holds about 100 characters
    data_root: Path  # on a file system the storage driver works on (`beside_the_first`)
    driver: str = "overlay2"
    process: subprocess.Popen | None = field(default=None, repr=False)

    @classmethod
    def beside_the_first(cls) -> SecondEngine:
        """An engine whose data root lies beside the machine's engine's, with its storage
        driver: a file system that driver is known to work on (overlay2 does not on every
        /tmp, an overlay file system inside a container among them)."""
        root = Path(tempfile.mkdtemp(prefix="mbd2-", dir="/tmp"))
        info = subprocess.run(["docker", "info", "--format", "{{.DockerRootDir}} {{.Driver}}"],
                              capture_output=True, text=True, timeout=60)
        first_root, _, driver = info.stdout.strip().partition(" ")
        if info.returncode or not first_root or not driver:
            return cls(root=root, data_root=root / "data")
        data_root = Path(tempfile.mkdtemp(prefix="matrix-bench-engine2-",
                                          dir=Path(first_root).parent))
        return cls(root=root, data_root=data_root, driver=driver)

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    def docker(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True,
                              text=True, timeout=timeout)

    def answers(self) -> bool:
        # A starting engine takes connections before it can answer them: a hang is a "no".
        try:
            return self.docker("version", "--format", "{{.Server.Version}}",
                               timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def start(self) -> None:
        self._forget_dead_containerd()
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - the engine's lifetime
        self.process = subprocess.Popen(
            ["dockerd", "-H", self.host, "--data-root", str(self.data_root),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "pid"),
             f"--storage-driver={self.driver}", "--iptables=false", "--bridge=none"],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()  # the engine holds its own copy
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop(crash=True)  # so that the next test starts it afresh
                raise RuntimeError(f"the second dockerd did not start: "
                                   f"{(self.root / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.3)

    def _forget_dead_containerd(self) -> None:
        """Remove the pid file of a containerd that died with a crashed engine.

        A restarting dockerd reuses the containerd its pid file names if that pid exists.
        This sandbox's init reaps orphans late, so a dead containerd can linger as a zombie
        (no command line), pass dockerd's check, and make it wait for a socket nobody serves
        until it gives up. On a host whose init reaps at once, the pid names no process."""
        pid_file = self.root / "exec" / "containerd" / "containerd.pid"
        try:
            cmdline = Path(f"/proc/{int(pid_file.read_text())}/cmdline").read_bytes()
        except (OSError, ValueError):  # no pid file, or no such process
            return
        if str(self.root).encode() not in cmdline:  # a zombie, or the pid reused since
            pid_file.unlink()

    def stop(self, crash: bool = False) -> None:
        """Stop the engine as `systemctl stop docker` does (SIGTERM: it stops its containers
        and exits), or as a crash (SIGKILL: the API is gone at once), and wait for it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
            self.process.wait(timeout=60)
        self.process = None

    @contextlib.contextmanager
    def hung(self) -> Iterator[None]:
        """The engine frozen (SIGSTOP): its socket takes connections, its API never
        answers, its containers run on; thawed on the way out."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.process.send_signal(signal.SIGCONT)

    def containers(self, label: str, running_only: bool = False) -> list[str]:
        listed = self.docker("ps", *(() if running_only else ("-a",)), "-q", "--filter",
                             f"label={label}")
        return listed.stdout.split()

    def load(self, *tags: str) -> None:
        """Copy images from the machine's engine into this one (shared layers once)."""
        save = subprocess.Popen(["docker", "save", *tags], stdout=subprocess.PIPE)
        loaded = subprocess.run(["docker", "-H", self.host, "load"], stdin=save.stdout,
                                capture_output=True, timeout=600)
        save.wait(timeout=600)
        if loaded.returncode or save.returncode:
            raise RuntimeError(f"docker save | load of {tags} failed: {loaded.stderr[-500:]!r}")

    def remove(self) -> None:
        """Remove its containers, stop it and delete everything it left."""
        try:
            if self.process is None:
                self.start()  # to let it remove its own containers
            for container in self.docker("ps", "-a", "-q").stdout.split():
                self.docker("rm", "-f", container)
        finally:
            self.stop()
            self._reap()
            shutil.rmtree(self.root, ignore_errors=True)
            shutil.rmtree(self.data_root, ignore_errors=True)

    def _reap(self) -> None:
        """End what a crashed engine can leave behind under its root: the shims of
        containers it lost track of (by their pids), then its mounts."""
        mine = (f"{self.root}/", f"{self.data_root}/")
        for proc in Path("/proc").iterdir():
            try:
                cmdline = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
                if any(folder.encode() in cmdline for folder in mine):
                    os.kill(int(proc.name), signal.SIGKILL)
            except OSError:  # gone already
                continue
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                  if line.split()[1].startswith(mine)  # and the engine's own bind of its root
                  or line.split()[1] in (str(self.root), str(self.data_root))]
        for mount in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)


def second_engine_or_skip() -> None:
    """Skip where no second dockerd can start here, unless CI demands the Docker tests."""
    why = ("dockerd is not installed" if shutil.which("dockerd") is None else
           "a second dockerd needs root" if os.geteuid() != 0 else None)
    if why is None:
        return
    if os.environ.get("MATRIX_BENCH_REQUIRE_DOCKER"):
        pytest.fail(f"MATRIX_BENCH_REQUIRE_DOCKER is set but {why}")
    pytest.skip(f"the Docker fault tests need a second engine: {why}")


def stack_matrix(image_env: ImageEnv, name: str, workload: str,
                 images: str | None = None) -> str:
    """A matrix of the torch-cpu stack on this machine, as the tests here run it."""
    return f"""
        name: {name}
        hardware: [{{name: box, kind: local}}]
        stacks: [{image_env.stack(STACK)}]
        workloads: [{workload}]
        """ + (images or image_env.images_section())


@pytest.fixture(scope="session", name="engine2")
def second_engine_fixture(image_env: ImageEnv, tmp_path_factory: pytest.TempPathFactory
                          ) -> Iterator[SecondEngine]:
    """The second engine, holding this code's torch-cpu stack image and its base image.

    The image is built on the machine's engine only if missing there (test_docker.py
    builds the same tag), once per session."""
    second_engine_or_skip()
    folder = tmp_path_factory.mktemp("engine2")
    matrix = write(folder / "m.yaml", stack_matrix(image_env, "image", "{name: sleep}"))
    built = run_cli("build", str(matrix), cwd=folder)
    assert built.returncode == 0, built.stdout + built.stderr
    spec = load_spec(matrix)
    tag = render(spec.stacks[0], spec.images).tag
    engine = SecondEngine.beside_the_first()
    try:
        engine.start()
        engine.load(tag, image_env.base_image)
        yield engine
    finally:
        engine.remove()
