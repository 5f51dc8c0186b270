"""A real PostgreSQL for the tests: Debian's server binaries, `initdb` and `pg_ctl` in a
temporary directory, listening on a free loopback port (and a socket in that directory),
with password authentication, so the tests' URLs carry a password that must never be shown.

PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user the
package creates. `python -m tests.postgres_server DIR` starts one by hand and prints its URL.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PASSWORD_BYTES = 12


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def postgres_missing() -> str | None:
    """Why no test PostgreSQL can start here, or None."""
    if _bin_dir() is None:
        return "PostgreSQL's server is not installed (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no postgres user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    root: Path
    port: int
    password: str
    bin_dir: Path
    user: str | None  # the system user the server runs as (None: this one)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://bench:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database; its URL."""
        self._run("psql", "-h", str(self.root), "-p", str(self.port), "-U", "bench", "-d",
                  "postgres", "-v", "ON_ERROR_STOP=1", "-c", f"CREATE DATABASE {name}")
        return self.url(name)

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([str(self.bin_dir / tool), *args], check=True, capture_output=True,
                       timeout=60, user=self.user, env={**os.environ, "PGPASSWORD": self.password})

    def stop(self) -> None:
        subprocess.run([str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m",
                        "immediate", "stop"], capture_output=True, timeout=60, user=self.user)


def start_postgres(root: Path) -> PostgresServer:
    """initdb, then pg_ctl start; the server's password is random per session."""
    bin_dir = _bin_dir()
    assert bin_dir is not None
    user = "postgres" if os.geteuid() == 0 else None
    root.mkdir(parents=True, exist_ok=True)
    if user:
        shutil.chown(root, user)
    password = secrets.token_urlsafe(PASSWORD_BYTES)
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    if user:
        shutil.chown(pwfile, user)
    pwfile.chmod(0o600)
    subprocess.run([str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", "bench",
                    "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8",
                    "--no-instructions"], check=True, capture_output=True, timeout=120, user=user)
    pwfile.unlink()
    port = _free_port()
    options = f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off"
    subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-o", options, "-l",
                    str(root / "server.log"), "-w", "-t", "60", "start"], check=True,
                   capture_output=True, timeout=90, user=user)
    server = PostgresServer(root=root, port=port, password=password, bin_dir=bin_dir, user=user)
    for _ in range(100):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.1)
    raise RuntimeError(f"PostgreSQL did not listen on {port}: {root / 'server.log'}")


if __name__ == "__main__":
    started = start_postgres(Path(sys.argv[1]))
    print(started.url())
