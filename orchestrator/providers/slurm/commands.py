"""Slurm's commands, run as argument lists with a timeout: the only place that calls them.

Each returns parsed text or raises SlurmError with Slurm's own first line. Nothing here
knows about cells; group.py and provider.py decide what the answers mean.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from orchestrator.errors import MatrixError

COMMAND_TIMEOUT_S = 60  # a controller that does not answer this fast is not answering


class SlurmError(MatrixError):
    """A Slurm command is missing or refused what it was asked."""


def run(command: str, *args: str, check: bool = True) -> str:
    """`command args...`'s standard output; SlurmError if it is missing or fails."""
    binary = shutil.which(command)
    if binary is None:
        raise SlurmError(f"{command} is not on PATH: run matrix on a Slurm login node (or "
                         "install Slurm's client commands)")
    try:
        done = subprocess.run([binary, *args], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{command} did not answer in {COMMAND_TIMEOUT_S} s") from None
    if check and done.returncode != 0:
        said = next((line for line in done.stderr.splitlines() if line.strip()),
                    f"exit code {done.returncode}")
        raise SlurmError(f"{command}: {said.strip()}")
    return done.stdout


def available() -> bool:
    return shutil.which("sbatch") is not None and shutil.which("squeue") is not None


@dataclass(frozen=True)
class Partition:
    """What `sinfo` says of a partition."""

    name: str
    hosts: tuple[str, ...]  # its nodes' host names
    gpus: int  # the most GPUs one of its nodes offers (gres gpu), 0 if none
    cpus: int = 0  # the most CPUs one of its nodes offers, 0 if sinfo did not say
    mem_mb: int = 0  # the most memory (MB) one of its nodes offers, 0 if sinfo did not say
    nodes: int = 1  # how many nodes it holds (a cell across nodes asks for that many at most)


def partition(name: str) -> Partition | None:
    """The partition as sinfo sees it, or None if there is none of that name."""
    lines = run("sinfo", "-h", "-N", "-p", name, "-o", "%N|%n|%G|%c|%m").splitlines()
    rows = [line.split("|") for line in lines if line.count("|") == 4]
    if not rows:
        return None
    return Partition(name=name, hosts=tuple(sorted({row[1] for row in rows})),
                     gpus=max(_gres_gpus(row[2]) for row in rows),
                     cpus=max(_count(row[3]) for row in rows),
                     mem_mb=max(_count(row[4]) for row in rows),
                     nodes=len({row[0] for row in rows}))


def node_address(name: str) -> str:
    """The address Slurm reaches node `name` at (its NodeAddr): where the other nodes of a
    job reach it too."""
    found = re.search(r"\bNodeAddr=(\S+)", run("scontrol", "show", "node", "-o", name))
    if found is None:
        raise SlurmError(f"scontrol show node {name} gave no NodeAddr")
    return found.group(1)


def _count(text: str) -> int:
    """A count sinfo printed ("2", "2000", "64+"), 0 where it is none."""
    digits = text.strip().rstrip("+")
    return int(digits) if digits.isdigit() else 0


def _gres_gpus(gres: str) -> int:
    """GPUs in a node's gres, e.g. "gpu:a100:4(S:0-1),shard:8" -> 4; "(null)" -> 0."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def submit(script: str, options: list[str], args: list[str]) -> str:
    """Submit `script` with `options` (sbatch's) and its own `args`; the job id."""
    out = run("sbatch", "--parsable", *options, script, *args)
    return out.strip().split(";")[0]


def cancel(*job_ids: str) -> None:
    if job_ids:
        run("scancel", *job_ids, check=False)


@dataclass(frozen=True)
class QueuedTask:
    """A job or array task squeue still lists: queued, running or completing."""

    job_id: str  # e.g. 1234_5 for a task of array 1234, 1234 for a lone job
    name: str
    comment: str
    state: str  # PENDING, RUNNING, COMPLETING, ...
    reason: str


def queued(name_prefix: str) -> list[QueuedTask]:
    """This user's jobs and array tasks whose name starts with `name_prefix`, one per task."""
    out = run("squeue", "--me", "-h", "-r", "-o", "%i|%j|%T|%r|%k")
    tasks = []
    for line in out.splitlines():
        fields = line.split("|", 4)
        if len(fields) == 5 and fields[1].startswith(name_prefix):
            tasks.append(QueuedTask(job_id=fields[0], name=fields[1], state=fields[2],
                                    reason=fields[3], comment=fields[4]))
    return tasks


def show_jobs(job_id: str) -> list[dict[str, str]]:
    """`scontrol show job` of a job (all of an array's tasks the controller still holds):
    one mapping of its fields per task. Empty once the controller has forgotten the job."""
    out = run("scontrol", "show", "job", "-o", job_id, check=False)
    return [_fields(line) for line in out.splitlines() if line.startswith("JobId=")]


def _fields(line: str) -> dict[str, str]:
    """scontrol's one-line `Key=Value Key=Value` form; values that hold spaces (Command,
    Comment) keep them, up to the next key (a capitalised word before an `=`)."""
    fields: dict[str, str] = {}
    key = None
    for word in line.split(" "):
        name, sep, value = word.partition("=")
        if sep and name[:1].isupper() and name.replace("/", "").replace(":", "").replace(
                "_", "").isalnum():  # Slurm's keys are capitalised; a comment's are not
            key = name
            fields[key] = value
        elif key is not None:
            fields[key] += " " + word
    return {k: v.strip() for k, v in fields.items()}


def accounting_on() -> bool:
    """Whether `sacct` can answer (slurmdbd runs): accounting storage is configured."""
    out = run("scontrol", "show", "config", check=False)
    for line in out.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "AccountingStorageType":
            return value.strip() not in ("", "accounting_storage/none")
    return False


def accounted(job_id: str) -> list[dict[str, str]]:
    """`sacct`'s allocation lines of a job (every task of an array): JobID, State, ExitCode,
    NodeList, Reason and Elapsed per task."""
    columns = ("JobID", "State", "ExitCode", "NodeList", "Reason", "Elapsed")
    out = run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", ",".join(columns))
    return [dict(zip(columns, line.split("|"), strict=False)) for line in out.splitlines()
            if line.strip()]
