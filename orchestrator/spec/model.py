"""The matrix file's schema: strict pydantic models of its sections (hardware, stacks,
workloads, rules, repeats, images, the providers' own: spec/entry_settings.py), their
limits, and what is read off them.

Models only: loading a file and checking it against the registries is load.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationInfo,
    model_validator,
)

from orchestrator.results.records import Name as RecordName
from orchestrator.spec.entry_settings import (
    ExecutorSettings,
    KindSettings,
    ProviderSection,
    SettingsCatalogue,
    catalogue_in,
    gather_sections,
    gather_settings,
)
from orchestrator.spec.entry_settings import StrictModel as _Strict
from orchestrator.spec.job import JobSpec
from orchestrator.worker.cell_file import CellStack, HardwareFields
from orchestrator.workload_registry import ItemUnit, ParamType, Scalar

Name = RecordName  # one rule for a name in a matrix and on a journal line
ScalarOrList = Scalar | list[Scalar]
NamesOrOne = Name | list[Name]

# max_cells may be raised this far and no further: what `matrix validate` checks in seconds
# in bounded memory (100,000 cells: 11 s and 460 MB on 2 vCPUs; it grows linearly, and a
# million took minutes and gigabytes). The grid is counted from its axes, never built,
# until it is known to fit.
HARD_MAX_CELLS = 100_000
WORKER_PYTHON = (3, 11)  # the oldest Python orchestrator.worker runs on (requires-python)
MAX_TIMEOUT_S = 30 * 24 * 3600.0  # a longer cell is a slip; 1e308 overflows the timers
MAX_MEMORY_LIMIT_MB = 2**24  # 16 TiB, past any machine; passed on in bytes (64 bits)
MAX_NODES = 4096  # nodes one cell may span: past any cluster's job
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class Hardware(_Strict, HardwareFields):
    """A kind of machine cells run on; cells are pinned to it through the Ray resource hw:<name>.
    Its `kind` names the provider that offers it (registry/providers.py), whose settings
    model takes the entry's other keys into `settings`; the provider judges the rest. Its
    shared fields are the worker's (worker/cell_file.py: HardwareFields, declared once)."""

    # the kind's own keys, as its provider's model (SerializeAsAny: dumped as that model)
    settings: SerializeAsAny[KindSettings] = Field(default_factory=KindSettings)
    # `nodes: [1, 2, 4]`: an axis, one configuration per count, as a parameter's list is
    # (node_variants); each cell's hardware holds its own count in `nodes`
    node_counts: tuple[Annotated[int, Field(ge=1, le=MAX_NODES)], ...] | None = Field(
        default=None, min_length=1, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _node_axis(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("nodes"), list):
            counts = data["nodes"]
            wrong = [n for n in counts if not isinstance(n, int) or isinstance(n, bool)
                     or not 1 <= n <= MAX_NODES]
            if not counts or wrong:
                raise ValueError(f"nodes is a count or a list of counts, each a whole number "
                                 f"from 1 to {MAX_NODES}, not {counts}")
            if len(set(counts)) != len(counts):
                raise ValueError(f"nodes lists a count twice: {counts}")
            return {**data, "nodes": counts[0], "node_counts": tuple(counts)}
        return data

    def node_variants(self) -> list[Hardware]:
        """The entry once per node count it lists (itself, where it names one)."""
        if self.node_counts is None:
            return [self]
        return [self.model_copy(update={"nodes": n, "node_counts": None})
                for n in self.node_counts]

    @property
    def most_nodes(self) -> int:
        return max(self.node_counts or (self.nodes,))

    @model_validator(mode="before")
    @classmethod
    def _gather_settings(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            return data
        return gather_settings(cls, data, data["kind"], catalogue_in(info.context, "kind"),
                               "kind")

    @classmethod
    def entry_keys(cls, entry: dict[str, Any], context: object) -> list[str]:
        """The keys an entry may have: the shared ones and its kind's settings."""
        return _entry_keys(cls, entry.get("kind"), catalogue_in(context, "kind"))


def _entry_keys(model: type[BaseModel], owner: object,
                catalogue: SettingsCatalogue | None) -> list[str]:
    own = catalogue.settings(owner) if catalogue and isinstance(owner, str) else None
    return [k for k in model.model_fields if k != "settings"] + \
        list(own.model_fields if own else ())


class Stack(_Strict, CellStack):
    """A software stack: the current environment (process) or a pinned image (docker). Its
    fields are the worker's `CellStack` (worker/cell_file.py, declared once), with its
    executor's own keys."""

    # the executor's own keys, as its registration's model (SerializeAsAny: dumped as it)
    settings: SerializeAsAny[ExecutorSettings] = Field(default_factory=ExecutorSettings)

    @model_validator(mode="before")
    @classmethod
    def _gather_settings(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        executor = data.get("executor") or default_executor(data)
        if not isinstance(executor, str):
            return data
        return gather_settings(cls, data, executor, catalogue_in(info.context, "executor"),
                               "executor")

    @classmethod
    def entry_keys(cls, entry: dict[str, Any], context: object) -> list[str]:
        """The keys a stack may have: the shared ones and its executor's settings."""
        return _entry_keys(cls, entry.get("executor") or default_executor(entry),
                           catalogue_in(context, "executor"))

    @property
    def effective_executor(self) -> str:
        """A stack with pins is an image unless it says otherwise (docs/ARCHITECTURE.md:
        executors)."""
        return self.executor or default_executor(self.model_dump(include=set(PINS)))


PINS = ("framework_version", "cuda", "cudnn", "python", "base_image")


def default_executor(entry: dict[str, Any]) -> str:
    """The executor of a stack that names none: docker where it pins anything."""
    return "docker" if any(entry.get(key) for key in PINS) else "process"


class Images(_Strict):
    """How stack images are built and shared. Delivery only, never part of a cell's identity:
    the image tag is (a hash of the Dockerfile, the lock file and the worker code)."""

    locks: str | None = None  # folder of <stack>.txt lock files; default: the project's
    wheelhouse: str | None = None  # install from this folder of wheels, offline
    ca_bundle: str | None = None  # extra CA certificates (PEM) for a proxy's TLS
    registry: str | None = None  # push built images here, e.g. localhost:5000/matrix-bench


class WorkloadEntry(_Strict):
    """A workload and its parameter grid: any value in `params` may be a list (an axis).

    A workload is a built-in or an installed package's (by `name`), a folder (`path:`), or
    a training script run as it is (`command:`, orchestrator/spec/command_workloads.py)."""

    name: Name
    params: dict[str, ScalarOrList] = Field(default_factory=dict)
    epochs: int | None = Field(default=None, ge=1)  # default: the workload's own
    dataset: ScalarOrList | None = None  # shorthand for params.dataset
    preset: ScalarOrList | None = None  # shorthand for params.preset
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)  # default: workload's
    memory_limit_mb: int | None = Field(default=None, gt=0, le=MAX_MEMORY_LIMIT_MB)  # hard limit
    # your own workload's folder (defaults.yaml, workload.py), relative to the matrix file;
    # absolute once loaded. Not part of any id: the folder's code hash is (its version).
    path: str | None = None
    # your own training script, as an argument list with {param} placeholders; never a shell
    # string. It runs in `cwd` (relative to the matrix file; default: the file's folder),
    # whose code is hashed into the workload's version and carried into stack images.
    command: list[Annotated[str, Field(min_length=1)]] | None = Field(
        default=None, min_length=1)
    cwd: str | None = None
    # the script's code, as globs under cwd, which its version hashes (default: the script
    # the command names, plus the files git tracks under cwd); never the files it writes
    files: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    # false: the command's code is not part of its identity (only provenance)
    code_hash: bool = True
    item_unit: ItemUnit | None = None  # what the script's steps count; default: sample
    # a parameter's type where its values do not say it (1 for a float): int, float, bool, str
    param_types: dict[str, ParamType] = Field(default_factory=dict)
    metrics: list[Name] = Field(default_factory=list)  # the script's own epoch metrics
    # the script's training FLOPs per item: a number, or an expression of its numeric
    # parameters ("6 * 124e6 * seq_len"; flop_claims.py), judged as the workload's own claim
    flops_per_item: float | str | None = None
    # profile the last epoch with torch.profiler: a Chrome trace, cells/<cell_id>.trace.json
    # (a profiled cell is another configuration: the profiler slows what it records)
    profile: bool = False


class Rule(_Strict):
    """Matches cells: every key given must match (a list means any of its values)."""

    hardware: NamesOrOne | None = None
    stack: NamesOrOne | None = None
    workload: NamesOrOne | None = None
    params: dict[str, ScalarOrList] = Field(default_factory=dict)


class RepeatPolicy(BaseModel):
    """`repeats: {min, max, until_cv}`: each configuration runs `min` repeats, then one more
    at a time until the coefficient of variation of its per-repeat throughput is at most
    `until_cv`, or it has `max` (orchestrator/plan/repeats.py). All three keys are required."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    min: int = Field(ge=2, le=HARD_MAX_CELLS)  # a coefficient of variation needs two repeats
    max: int = Field(ge=2, le=HARD_MAX_CELLS)
    until_cv: float = Field(gt=0, lt=1)


class MatrixSpec(_Strict):
    """A whole matrix file."""

    name: Name  # the run's name and directory, reports/<name>/
    hardware: list[Hardware] = Field(min_length=1)
    stacks: list[Stack] = Field(min_length=1)
    workloads: list[WorkloadEntry] = Field(min_length=1)
    include: list[Rule] = Field(default_factory=list)  # extra cells beyond the cross product
    exclude: list[Rule] = Field(default_factory=list)  # cells removed from the cross product
    # A number: that many repeats per configuration; a mapping: repeats until the noise is
    # bounded (RepeatPolicy).
    repeats: Annotated[int, Field(ge=1)] | RepeatPolicy = 1
    output: str | None = None  # run directory; default reports/<name>
    budget_usd: float | None = Field(default=None, gt=0)
    images: Images = Field(default_factory=Images)
    # each provider's own section, under its name (aws:, slurm:), as its model
    sections: dict[str, SerializeAsAny[ProviderSection]] = Field(default_factory=dict)
    job: JobSpec | None = None  # the user's training job, answered in the report
    max_cells: int = Field(default=10_000, ge=1, le=HARD_MAX_CELLS, description=(
        "The most cells the matrix may expand to (after repeats and include rules); a "
        "bigger grid is refused as a likely slip. Raise it when you mean it."))

    @model_validator(mode="before")
    @classmethod
    def _gather_sections(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        return gather_sections(cls, data, catalogue_in(info.context, "section"))

    @classmethod
    def entry_keys(cls, entry: dict[str, Any], context: object) -> list[str]:
        """The keys a matrix may have: its own and each provider's section."""
        sections = catalogue_in(context, "section")
        return [k for k in cls.model_fields if k != "sections"] + \
            (sections.names() if sections else [])

    def section(self, provider: str) -> ProviderSection | None:
        """The provider's own section as its model (`aws:`), None where the file has none."""
        return self.sections.get(provider)

    def workload_entry(self, name: str) -> WorkloadEntry:
        return next(w for w in self.workloads if w.name == name)

    @property
    def min_repeats(self) -> int:
        """The repeats every configuration gets."""
        return self.repeats.min if isinstance(self.repeats, RepeatPolicy) else self.repeats

    @property
    def max_repeats(self) -> int:
        """The most repeats a configuration may get (what max_cells counts)."""
        return self.repeats.max if isinstance(self.repeats, RepeatPolicy) else self.repeats

    def workload_folders(self) -> dict[str, Path]:
        """Workload name -> the user's folder: a `path:` workload's, or the folder a
        `command:` workload runs in (its `cwd`, the matrix file's folder by default): what
        stack images carry of the user's code."""
        return {e.name: Path(p) for e in self.workloads
                if (p := e.path or (e.cwd if e.command else None)) is not None}

    @property
    def target_cv(self) -> float | None:
        """The coefficient of variation repeats run until, or None for a fixed number."""
        return self.repeats.until_cv if isinstance(self.repeats, RepeatPolicy) else None


def entry_grid(entry: WorkloadEntry) -> dict[str, list[Scalar]]:
    """The entry's parameter axes, with `dataset` and `preset` folded into params."""
    grid = {k: v if isinstance(v, list) else [v] for k, v in entry.params.items()}
    for key in ("dataset", "preset"):
        value = getattr(entry, key)
        if value is not None:
            grid[key] = value if isinstance(value, list) else [value]
    return grid



def resolve_image_paths(images: Images, base: Path) -> Images:
    """The images section with its paths made absolute, relative ones against `base` (the
    matrix file's folder), and the project's lock folder where none is given."""
    def absolute(path: str | None) -> str | None:
        return None if path is None else str((base / Path(path).expanduser()).resolve())

    return images.model_copy(update={
        "locks": absolute(images.locks) or str(PROJECT_ROOT / "images" / "locks"),
        "wheelhouse": absolute(images.wheelhouse), "ca_bundle": absolute(images.ca_bundle)})

