"""A real single-node Slurm for the tests: munged, slurmctld and slurmd from Debian's
packages, configured in a temporary directory on free loopback ports, as root, without
cgroups (proctrack/linuxproc, task/none). jobacct_gather/linux with OverMemoryKill makes
Slurm itself kill a job over its memory request. Accounting runs: slurmdbd stores into a
MariaDB of its own (no grant tables, loopback only), so `sacct` answers; a matrix's
`slurm.outcomes: controller` reads outcomes as where accounting is off.

Two partitions share the node: `debug` (the default) and `gpu`, which offers no GPU (for
the test that asks one of it). A third, `remote`, holds a node that is not this machine
and never comes up (for the test of a run directory its nodes cannot read). A fourth,
`pair`, holds the node and a second one, `second`: a second slurmd on this machine, at
127.0.0.2 on its own port (Debian's slurmd takes `-N NAME`), for cells across two nodes.
`python -m tests.slurm_cluster DIR` brings one up by hand and prints the SLURM_CONF to
export.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol",
                  "scancel", "sinfo", "sacct", "slurmdbd", "mariadbd", "mariadb-install-db")
NODE_CPUS = 4  # more than this machine's 2 cores (config_overrides): four sleep cells at once
NODE_MEMORY_MB = 8192
SECOND_NODE = "second"  # the pair partition's other node, at SECOND_ADDRESS
SECOND_ADDRESS = "127.0.0.2"


def slurm_missing() -> str | None:
    """Why no test Slurm can start here, or None."""
    for binary in SLURM_BINARIES:
        if shutil.which(binary) is None and not Path("/usr/sbin", binary).exists():
            return f"{binary} is not installed (apt-get install slurmctld slurmd munge)"
    return None


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class SlurmCluster:
    root: Path
    node: str
    processes: list[subprocess.Popen[bytes]]

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self) -> dict[str, str]:
        """The environment every Slurm client needs to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def scontrol(self, *args: str) -> str:
        return subprocess.run([_binary("scontrol"), *args], env={**os.environ, **self.env()},
                              capture_output=True, text=True, check=True, timeout=30).stdout

    def jobs(self) -> list[str]:
        """Every job and array task the controller still queues or runs."""
        done = subprocess.run([_binary("squeue"), "-h", "-r", "-o", "%i %T"],
                              env={**os.environ, **self.env()}, capture_output=True,
                              text=True, check=True, timeout=30)
        return done.stdout.split("\n")[:-1]

    def resume(self) -> None:
        """Put the node back in service if a test drained it (an idle node refuses)."""
        subprocess.run([_binary("scontrol"), "update", f"nodename={self.node}", "state=resume"],
                       env={**os.environ, **self.env()}, capture_output=True, timeout=30)

    def cancel_all(self) -> None:
        subprocess.run([_binary("scancel"), "--user", "root"], env={**os.environ, **self.env()},
                       capture_output=True, timeout=30)

    def stop(self) -> None:
        self.cancel_all()
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        subprocess.run(["pkill", "-f", f"munged.*{self.root}"], capture_output=True)


def start_cluster(root: Path, accounting: bool = True) -> SlurmCluster:
    """munged, slurmctld and slurmd configured under `root`, and with `accounting` MariaDB
    and slurmdbd too (so `sacct` answers); returns once the node is idle."""
    root.mkdir(parents=True, exist_ok=True)
    for folder in ("state", "spool", "log", "munge"):
        (root / folder).mkdir(exist_ok=True)
    for name in (socket.gethostname(), SECOND_NODE):
        (root / "spool" / name).mkdir(exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = root / "munge" / "munge.socket"
    subprocess.run([_binary("munged"), "--force", f"--socket={socket_path}",
                    f"--key-file={key}", f"--pid-file={root / 'munge' / 'munged.pid'}",
                    f"--log-file={root / 'log' / 'munged.log'}",
                    f"--seed-file={root / 'munge' / 'munged.seed'}"], check=True, timeout=30)
    node = socket.gethostname()
    conf = root / "slurm.conf"
    dbd_port = _free_port() if accounting else None
    conf.write_text(_config(root, node, socket_path, dbd_port), encoding="utf-8")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    processes = _accounting(root, socket_path, dbd_port, env) if dbd_port else []
    processes.append(_daemon([_binary("slurmctld"), "-D", "-i", "-f", str(conf)], env,
                             root / "log" / "slurmctld.out"))
    time.sleep(1.0)
    processes.append(_daemon([_binary("slurmd"), "-D", "-f", str(conf)], env,
                             root / "log" / "slurmd.out"))
    processes.append(_daemon([_binary("slurmd"), "-D", "-N", SECOND_NODE, "-f", str(conf)],
                             env, root / "log" / f"slurmd-{SECOND_NODE}.out"))
    cluster = SlurmCluster(root, node, processes)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if all("State=IDLE" in cluster.scontrol("show", "node", name)
                   for name in (node, SECOND_NODE)):
                return cluster
        except subprocess.SubprocessError:
            pass
        if any(p.poll() is not None for p in processes):
            break
        time.sleep(0.5)
    cluster.stop()
    logs = "".join((root / "log" / name).read_text(errors="replace")[-2000:]
                   for name in ("slurmctld.log", f"slurmd-{node}.log",
                                f"slurmd-{SECOND_NODE}.log") if (root / "log" / name).exists())
    raise RuntimeError(f"the test Slurm did not come up:\n{logs}")


def _accounting(root: Path, munge_socket: Path, dbd_port: int, env: dict[str, str]
                ) -> list[subprocess.Popen[bytes]]:
    """MariaDB in `root`/db on a free loopback port (no grant tables: nothing but slurmdbd
    can reach it), and slurmdbd storing into it."""
    db_port = _free_port()
    subprocess.run([_binary("mariadb-install-db"), f"--datadir={root / 'db'}", "--user=root",
                    "--auth-root-authentication-method=normal", "--skip-test-db"],
                   check=True, capture_output=True, timeout=120)
    database = _daemon([_binary("mariadbd"), "--no-defaults", f"--datadir={root / 'db'}",
                        f"--socket={root / 'db.sock'}", f"--port={db_port}",
                        "--bind-address=127.0.0.1", "--user=root", "--skip-grant-tables",
                        f"--pid-file={root / 'mariadb.pid'}"], env, root / "log" / "mariadb.out")
    deadline = time.monotonic() + 60
    while not (root / "db.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    dbd_conf = root / "slurmdbd.conf"
    dbd_conf.write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={munge_socket}
DbdHost=localhost
DbdPort={dbd_port}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
PidFile={root / 'slurmdbd.pid'}
LogFile={root / 'log' / 'slurmdbd.log'}
""", encoding="utf-8")
    dbd_conf.chmod(0o600)
    dbd = _daemon([_binary("slurmdbd"), "-D"], env, root / "log" / "slurmdbd.out")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", dbd_port)) == 0:
                return [database, dbd]
        time.sleep(0.3)
    raise RuntimeError("slurmdbd did not come up: "
                       + (root / "log" / "slurmdbd.log").read_text(errors="replace")[-2000:])


def _daemon(command: list[str], env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    with open(out, "wb") as log:  # the daemon keeps its own copy of the descriptor
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _config(root: Path, node: str, munge_socket: Path, dbd_port: int | None) -> str:
    second = (f"NodeName={SECOND_NODE} NodeHostname={node} NodeAddr={SECOND_ADDRESS} "
              f"Port={_free_port()} CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN")
    storage = (f"AccountingStorageType=accounting_storage/slurmdbd\n"
               f"AccountingStorageHost=localhost\nAccountingStoragePort={dbd_port}\n"
               f"AccountingStoragePass={munge_socket}"  # the munge of slurmdbd's link
               if dbd_port else "AccountingStorageType=accounting_storage/none")
    return f"""\
ClusterName=matrixtest
SlurmctldHost={node}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool' / '%n'}
SlurmctldPidFile={root / 'slurmctld.pid'}
SlurmdPidFile={root / 'slurmd-%n.pid'}
SlurmctldLogFile={root / 'log' / 'slurmctld.log'}
SlurmdLogFile={root / 'log' / 'slurmd-%n.log'}
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=1
JobAcctGatherParams=OverMemoryKill
{storage}
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MinJobAge=600
DefMemPerCPU=256
KillWait=2
InactiveLimit=0
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
NodeName={node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN
{second}
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
PartitionName=pair Nodes={node},{SECOND_NODE} MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={node} MaxTime=INFINITE State=UP
NodeName=faraway NodeHostname=faraway.invalid NodeAddr=127.0.0.9 CPUs=1 RealMemory=512 State=DOWN
PartitionName=remote Nodes=faraway MaxTime=INFINITE State=UP
"""


if __name__ == "__main__":
    up = start_cluster(Path(sys.argv[1]).resolve(), accounting="--no-accounting" not in sys.argv)
    print(f"export SLURM_CONF={up.conf}  # stop: kill {' '.join(str(p.pid) for p in up.processes)}")
