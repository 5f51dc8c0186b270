"""A second Docker engine on its own socket, data root and exec root, so that a test can
stop it for real (the machine's engine stays up for every other test) and start it again.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 60


@dataclass
class SecondEngine:
    root: Path  # short: a unix socket path holds about 100 characters
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    def docker(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True,
                              **kwargs)

    def answers(self) -> bool:
        return self.docker("version", "--format", "{{.Server.Version}}",
                           timeout=10).returncode == 0

    def start(self) -> None:
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - the engine's lifetime
        self.process = subprocess.Popen(
            ["dockerd", "-H", self.host, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "pid"),
             "--storage-driver=overlay2", "--iptables=false", "--bridge=none"],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the second dockerd did not start: "
                                   f"{(self.root / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.3)

    def stop(self, crash: bool = False) -> None:
        """Stop the engine as `systemctl stop docker` does (SIGTERM: it stops its running
        containers, SIGKILL after their 10 s grace, then exits), or as a crash (SIGKILL:
        the API is gone at once), and wait for it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
            self.process.wait(timeout=60)
        self.process = None

    def containers(self, label: str) -> list[str]:
        listed = self.docker("ps", "-a", "-q", "--filter", f"label={label}", text=True,
                             timeout=30)
        return listed.stdout.split()

    def load(self, tag: str) -> None:
        """Copy image `tag` from the machine's engine into this one."""
        save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
        loaded = subprocess.run(["docker", "-H", self.host, "load"], stdin=save.stdout,
                                capture_output=True, timeout=600)
        save.wait(timeout=600)
        if loaded.returncode or save.returncode:
            raise RuntimeError(f"docker save | load of {tag} failed: {loaded.stderr[-500:]!r}")


def start_second_engine() -> SecondEngine:
    engine = SecondEngine(Path(tempfile.mkdtemp(prefix="mbd2-", dir="/tmp")))
    engine.start()
    return engine


def remove_second_engine(engine: SecondEngine) -> None:
    if engine.process is None:
        engine.start()  # to let it remove its own containers
    for container in engine.docker("ps", "-a", "-q", text=True, timeout=30).stdout.split():
        engine.docker("rm", "-f", container, timeout=60)
    engine.stop()
    subprocess.run(["umount", "-R", str(engine.root / "data")], capture_output=True)
    shutil.rmtree(engine.root, ignore_errors=True)
