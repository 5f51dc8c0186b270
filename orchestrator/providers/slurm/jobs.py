"""A run's Slurm jobs: their names, what each submission carries, and the sbatch options of
a hardware entry.

Every job of a run is named `matrix-bench-<run>` and commented with the run directory and
its submission, so `squeue` finds a run's jobs again after its driver died, and `matrix
cleanup` finds those of runs no sweep owns. A submission is one job array for the cells of
one hardware entry: its manifest (`<run>/slurm/<submission>/manifest.json`) holds the
cells in task order, the images and the tool's provenance; task i runs cell i and writes
its records to `records/<i>.jsonl` beside it (task.py).
"""

from __future__ import annotations

import math
import os
import re
import sys
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.executors.environment import worker_environment
from orchestrator.providers.slurm.settings import slurm_settings
from orchestrator.registry.cell_run import Cell, ImageRef, ToolInfo
from orchestrator.registry.providers import validation_context
from orchestrator.spec.model import Hardware

NAME_PREFIX = "matrix-bench-"
PROJECT_ROOT = Path(__file__).resolve().parents[3]
TIME_LIMIT = re.compile(r"^(?:(?P<days>\d+)-(?P<dh>\d{1,2})"
                        r"(?::(?P<dm>\d{1,2})(?::(?P<ds>\d{1,2}))?)?"
                        r"|(?P<h>\d+):(?P<m>\d{1,2}):(?P<s>\d{1,2})"
                        r"|(?P<mm>\d+):(?P<ss>\d{1,2})"
                        r"|(?P<minutes>\d+))$")
PASSED_ON = ("DOCKER_HOST",)  # besides what a worker may see: where the node's engine is


def time_limit_s(text: str) -> int | None:
    """Seconds in a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS),
    or None if `text` is not one."""
    found = TIME_LIMIT.match(text.strip())
    if not found:
        return None
    g = {k: int(v) for k, v in found.groupdict().items() if v is not None}
    if "days" in g:
        return ((g["days"] * 24 + g["dh"]) * 60 + g.get("dm", 0)) * 60 + g.get("ds", 0)
    if "h" in g:
        return (g["h"] * 60 + g["m"]) * 60 + g["s"]
    if "mm" in g:
        return g["mm"] * 60 + g["ss"]
    return g["minutes"] * 60


def job_name(run_dir: Path) -> str:
    return NAME_PREFIX + run_dir.name


def comment(run_dir: Path, submission: str) -> str:
    return f"matrix-bench run={run_dir.resolve()} submission={submission}"


def parse_comment(text: str) -> tuple[str, str] | None:
    """(run directory, submission) from a job's comment, or None if it is not ours."""
    found = re.match(r"^matrix-bench run=(.+) submission=([0-9a-z-]+)$", text.strip())
    return (found.group(1), found.group(2)) if found else None


class Submission(BaseModel):
    """What the tasks of one array read: their cells in task order, and what runs them."""

    model_config = ConfigDict(frozen=True)

    submission: str
    run_dir: str  # absolute, on the filesystem the nodes share
    hardware: str
    cells: list[Cell]
    images: dict[str, ImageRef]  # stack name -> image, for the cells' image stacks
    tool: ToolInfo

    @property
    def folder(self) -> Path:
        return Path(self.run_dir) / "slurm" / self.submission

    def records_file(self, index: int) -> Path:
        return self.folder / "records" / f"{index}.jsonl"

    def node_records_file(self, index: int, rank: int) -> Path:
        """Where node `rank`'s step of a cell across nodes leaves its records
        (node_steps.py): beside the records the driver reads, never among them."""
        return self.folder / "nodes" / f"{index}.node{rank}.jsonl"

    def task_log(self, index: int) -> Path:
        return self.folder / f"task-{index}.log"


def new_submission(run_dir: Path, hardware: str, cells: list[Cell],
                   images: dict[str, ImageRef], tool: ToolInfo) -> Submission:
    """A submission's manifest, written into its folder with the task script."""
    submission = Submission(
        submission=f"{hardware.lower()[:40]}-{uuid.uuid4().hex[:8]}".replace(".", "-")
        .replace("_", "-"),
        run_dir=str(run_dir.resolve()), hardware=hardware, cells=cells,
        images={c.stack.name: images[c.stack.name] for c in cells if c.stack.name in images},
        tool=tool)
    (submission.folder / "records").mkdir(parents=True, exist_ok=True)
    (submission.folder / "manifest.json").write_text(submission.model_dump_json(),
                                                     encoding="utf-8")
    return submission


def read_submission(run_dir: Path, submission: str) -> Submission | None:
    path = run_dir / "slurm" / submission / "manifest.json"
    try:
        return Submission.model_validate_json(path.read_text(encoding="utf-8"),
                                              context=validation_context())
    except (OSError, ValueError):
        return None


def task_script(run_dir: Path, python: str | None) -> Path:
    """The script every array task of the run starts: the worker's Python runs task.py. A
    Python file with its interpreter in the shebang, so no shell reads anything."""
    script = run_dir / "slurm" / "task.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        f"#!{python or sys.executable}\n"
        "# A matrix-bench array task: runs the cell of SLURM_ARRAY_TASK_ID of the submission\n"
        "# whose manifest is its argument (orchestrator/providers/slurm/task.py).\n"
        "import sys\n"
        f"sys.path.insert(0, {str(PROJECT_ROOT)!r})\n"
        "from orchestrator.providers.slurm.task import main\n"
        "sys.exit(main(sys.argv[1:]))\n", encoding="utf-8")
    script.chmod(0o755)
    return script


# a node that says it has less is one whose memory Slurm does not track (RealMemory=1):
# there, what a task asks is left to the cluster
SMALLEST_TRACKED_NODE_MB = 1024


def memory_asked_mb(hardware: Hardware, node_cpus: int, node_mem_mb: int) -> int | None:
    """What a task asks Slurm for (`--mem`, MB): the entry's `mem_gb`; else its CPUs' share
    of a node (`cpus`, 1 where unset, of the node's), never the whole node. Slurm gives a
    job that asks for none every byte of its node where the cluster sets no DefMemPerCPU,
    and such a job waits PENDING while any other job holds any memory there. None where
    sinfo gave no node size."""
    asks = slurm_settings(hardware)
    if asks.mem_gb:
        return math.ceil(asks.mem_gb * 1024)
    if node_cpus <= 0 or node_mem_mb < SMALLEST_TRACKED_NODE_MB:
        return None
    return max(1, node_mem_mb * min(asks.cpus or 1, node_cpus) // node_cpus)


def sbatch_options(hardware: Hardware, submission: Submission, run_dir: Path,
                   tasks: list[int], max_parallel: int, mem_mb: int | None) -> list[str]:
    """sbatch's options for the array of `tasks` (indices into the submission's cells);
    `mem_mb`: what each task asks (memory_asked_mb)."""
    asks = slurm_settings(hardware)
    options = [f"--job-name={job_name(run_dir)}",
               f"--comment={comment(run_dir, submission.submission)}",
               f"--array={_ranges(tasks)}%{max_parallel}",
               f"--partition={asks.partition}",
               f"--output={submission.folder / 'task-%a.log'}",
               f"--chdir={run_dir.resolve()}",
               # a cell across nodes: one task a node, its steps started by the array
               # task (node_steps.py)
               f"--nodes={hardware.nodes}", f"--ntasks={hardware.nodes}",
               "--ntasks-per-node=1",
               # a lost node ends the task NODE_FAIL, and the sweep runs it once more
               # itself (group.py); Slurm's own requeue would rerun it without a limit
               "--no-requeue",
               f"--export={','.join(exported_names())}"]
    if hardware.gpus:
        options.append(f"--gres=gpu:{hardware.gpus}")
    if asks.cpus:
        options.append(f"--cpus-per-task={asks.cpus}")
    if mem_mb:
        options.append(f"--mem={mem_mb}M")
    for name, value in (("time", asks.time_limit), ("account", asks.account),
                        ("qos", asks.qos), ("constraint", asks.constraint)):
        if value:
            options.append(f"--{name}={value}")
    return options


def exported_names() -> list[str]:
    """The variables a task gets from this environment: what a worker may see (no
    credential) and where the node's container engine is. Names only: Slurm copies the
    values, and a value with a comma could not be written in the list; so a variable a
    worker sees only in part (a proxy with a password) is not exported at all, or Slurm
    would save it whole with the job."""
    names = {name for name, value in worker_environment(os.environ).items()
             if value == os.environ.get(name)} | {n for n in PASSED_ON if n in os.environ}
    return sorted(n for n in names if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)) or ["NIL"]


def _ranges(indices: list[int]) -> str:
    """Array indices as Slurm writes them: [0, 1, 2, 5] -> "0-2,5"."""
    spans: list[list[int]] = []
    for index in sorted(indices):
        if spans and index == spans[-1][1] + 1:
            spans[-1][1] = index
        else:
            spans.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
