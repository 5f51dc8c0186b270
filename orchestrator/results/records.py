"""The result records of the journal (docs/ARCHITECTURE.md: result records, statuses and flags).

Every journal line is one of three records sharing the identity fields. Measurements carry
workload-specific metrics as extra numeric fields whose names carry their units; cell
records carry one `param.<name>` field per resolved parameter and one `hw.<key>` field per
recorded setting of their hardware's kind.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.results.columns import (
    from_param_columns,
    from_setting_columns,
    is_param_column,
    setting_owner,
)
from orchestrator.worker.bounds import NAME
from orchestrator.worker.records import MeasurementFields, ProvenanceFields

SCHEMA_VERSION = 7
# Version history, and how a record of each older version is upgraded to the next one
# (RunDirectory.read applies them in turn, so any older journal stays readable):
#   1 -> 2: measurement records gain the NVML sampler's columns (gpu_util_mean_pct,
#           gpu_power_mean_w, gpu_sm_clock_mean_mhz, gpu_temp_max_c, gpu_energy_j,
#           throttle_reasons) and peak_source may be "estimate" (the local CPU's peak).
#           All are new and optional: a version 1 record is a valid version 2 record.
#   Within 2, provenance records gained the optional precision_switches (absent: {}),
#   workload_dir and workload_version,
#   measurement records the optional epoch_s and timing_block_steps, and cell records the
#   optional target_cv, so no version and no migration: an older version 2 record is
#   still a valid one.
#   2 -> 3: measurement records say how they were timed (`timing`): "steps", the timed
#           steps of a workload or of a script that reports them, or "whole", a command
#           workload's script that does not, timed as a whole (epoch_s, memory, NVML) with
#           no train_s, items or throughput. Every version 2 measurement was "steps".
#   3 -> 4: a cell may end `queue_timeout` (a Slurm task that waited in the queue longer
#           than slurm.queue_timeout_s and was cancelled before it started). Nothing to
#           upgrade: a version 3 record is a valid version 4 record; the version tells a
#           reader of version 3 that it may meet a status it does not know.
#   Within 4, provenance records gained the optional gpu_memory_bytes, gpu_power_limit_w
#   (from NVML, for every framework), compute_device (the model's device, read back) and
#   devices_used (absent: the workload's sets_devices parameter, else the node's GPUs),
#   so no version and no migration: an older version 4 record is still a valid one.
#   Cell records gained, within 4 too, the optional queued_s and provision_s (start-up:
#   absent, none recorded).
#   Measurement records gained, within 4 too, the contention probe's optional
#   cell_cpu_cores, cpu_wait_cores and other_cpu_cores, and cells the flag `contended`.
#   4 -> 5: a cell may end `data_unavailable` (its dataset could not be downloaded, cached
#           or verified: a failure of the run, where version 4 said `failed`). Nothing to
#           upgrade, as for 3 -> 4.
#   5 -> 6: cell records carry their hardware kind's recorded settings as `hw.<key>`
#           fields (KindSettings.recorded: Slurm's partition, EC2's spot), which version 5
#           readers refuse as unexpected. Nothing to upgrade: a version 5 cell record has
#           none recorded, and its config_id still tells its settings apart.
#   6 -> 7: cell records carry their stack's executor's recorded settings as `stack.<key>`
#           fields (ExecutorSettings.recorded: a plugin executor's niceness), which
#           version 6 readers refuse. Nothing to upgrade, as for 5 -> 6.
#   Within 7, provenance records gained the optional nodes, world_size, rank_hosts,
#   net_busbw_gbs, net_probe_bytes, net_link_gbps and rendezvous_s (a cell across nodes:
#   its group and the network between its nodes; absent: one node), so no version and no
#   migration.


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "schema_version": 2}


def _v2_to_v3(raw: dict[str, Any]) -> dict[str, Any]:
    if raw.get("record") == "measurement":
        raw = {**raw, "timing": "steps"}
    return {**raw, "schema_version": 3}


def _v3_to_v4(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "schema_version": 4}


def _v4_to_v5(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "schema_version": 5}


def _v5_to_v6(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "schema_version": 6}


def _v6_to_v7(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "schema_version": 7}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2,
                                                                      2: _v2_to_v3,
                                                                      3: _v3_to_v4,
                                                                      4: _v4_to_v5,
                                                                      5: _v5_to_v6,
                                                                      6: _v6_to_v7}
Timing = Literal["steps", "whole"]


class Status(StrEnum):
    """How a cell ended: a closed list, one per cell."""

    OK = "ok"
    FAILED = "failed"  # the workload raised
    CRASHED = "crashed"  # killed by a signal or aborted, no evidence of memory exhaustion
    OOM = "oom"  # only with evidence: MemoryError, CUDA out of memory, OOMKilled
    TIMEOUT = "timeout"
    INVALID_OUTPUT = "invalid_output"  # exit 0 without valid records
    UNSUPPORTED = "unsupported"  # the workload cannot run this configuration
    IMAGE_FAILED = "image_failed"
    STACK_MISMATCH = "stack_mismatch"  # the environment is not what the stack declares
    EXECUTOR_UNAVAILABLE = "executor_unavailable"
    NODE_LOST = "node_lost"
    BUDGET_STOPPED = "budget_stopped"
    QUEUE_TIMEOUT = "queue_timeout"  # waited in a scheduler's queue too long; never started
    DATA_UNAVAILABLE = "data_unavailable"  # its dataset could not be had (a download failed)

    def is_done(self) -> bool:
        """Whether the cell measured what it set out to: `ok` only."""
        return self is Status.OK

    def is_outcome(self) -> bool:
        """Whether this end is the configuration's own: the same inputs end the same way, so
        a resumed sweep runs it again only when they change (plan/retry.py), as Ray's
        `JobStatus.is_terminal()` marks the ends that no retry changes. The others are
        failures of the run (a crash, a timeout, a lost node, the budget, the queue, an
        executor that was not there), which a resumed sweep runs again."""
        return self in _OUTCOMES


_OUTCOMES = frozenset({Status.OK, Status.UNSUPPORTED, Status.OOM, Status.STACK_MISMATCH,
                       Status.IMAGE_FAILED, Status.FAILED, Status.INVALID_OUTPUT})

# A hardware entry's, stack's or workload's name, as a matrix may give it (spec/model.py;
# worker/bounds.py: NAME): a journal line naming "../../x" is refused where it is read, as
# every unreadable line is: a located warning.
Name = Annotated[str, NAME]


class Flag(StrEnum):
    """Remarks beside a status; any number per cell or row."""

    IMPLAUSIBLE = "implausible"  # a figure beyond physics (reason in the cell's error field)
    NOISY = "noisy"  # the configuration's spread is over the threshold
    THROTTLED = "throttled"  # NVML reported heat or a hardware slowdown while timing
    WARMUP_DOMINATED = "warmup_dominated"  # warm-up took longer than the timed steps
    OVERSUBSCRIBED = "oversubscribed"  # more CPU workers than the cores the cell had
    LEFT_PROCESSES = "left_processes"  # processes it started outlived it (ended by then)
    FEWER_EPOCHS = "fewer_epochs"  # a command's script reported fewer epochs than asked
    CONTENDED = "contended"  # its threads waited for CPUs that other processes held
    # judged from the node's measured ceiling (report/ceilings.py), never stored by a cell:
    ABOVE_CEILING = "above_ceiling"  # faster than its node's measured ceiling
    BELOW_DATASHEET = "below_datasheet"  # its node's ceiling under 60% of the datasheet


# The NVML throttle reasons that are the machine's conditions while timing (the `throttled`
# flag): heat and hardware slowdowns. The board's power cap is not one: a datacenter GPU
# under a heavy load runs at its cap by design (an H200's compiled GPT-2 at 684 of 700 W),
# so a throughput measured there is the card's own, and setting it aside made the answer
# pick the eager GPT-2 at half the compiled one's speed (bench/results/gpu/2026-11-29-h200).
CONDITION_THROTTLES = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


def condition_throttles(reasons: str | None) -> list[str]:
    """The machine's conditions among comma-separated NVML throttle reasons."""
    return [r for r in (reasons or "").split(",") if r in CONDITION_THROTTLES]


# The flags the judge decides from a row's figures (report/judge.py): a stored one is judged
# again. Every other flag is the cell's own account of its repeat, kept as it was stored.
JUDGED_FLAGS = (Flag.IMPLAUSIBLE.value, Flag.ABOVE_CEILING.value, Flag.BELOW_DATASHEET.value)


class _Identity(BaseModel, frozen=True):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run: str
    cell_id: str
    config_id: str
    repeat: int = Field(ge=1)


class MeasurementRecord(_Identity, MeasurementFields, frozen=True):
    """One measured unit of work: an epoch, or a timed round for workloads without epochs.
    Its figures and their bounds are the worker's line's (worker/records.py:
    MeasurementFields, declared once); the driver adds the FLOP rate against the node's
    peak, and the workload's metrics are its other fields."""

    model_config = ConfigDict(extra="allow")

    record: Literal["measurement"] = "measurement"
    achieved_flops: float | None = None
    peak_flops: float | None = None
    peak_source: Literal["datasheet", "measured", "estimate"] | None = None
    peak_fraction: float | None = None

    @model_validator(mode="after")
    def _timed_as_it_says(self) -> MeasurementRecord:
        rates = (self.train_s, self.items, self.items_per_s)
        if self.timing == "steps" and None in rates:
            raise ValueError("a measurement timed by steps has train_s, items and items_per_s")
        if self.timing == "whole" and (any(v is not None for v in rates)
                                         or self.epoch_s is None):
            raise ValueError("a measurement of a whole process has epoch_s and no train_s, "
                             "items or items_per_s")
        return self

    @model_validator(mode="after")
    def _extras_are_numbers(self) -> MeasurementRecord:
        # workload metrics only: every field with another type is declared above
        for key, value in (self.model_extra or {}).items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not math.isfinite(value)):
                raise ValueError(f"metric {key!r} must be a finite number, got {value!r}")
        return self


class CellRecord(_Identity, frozen=True):
    """How one cell ended; one per finished cell (per attempt that reached the journal)."""

    model_config = ConfigDict(extra="allow")

    record: Literal["cell"] = "cell"
    status: Status
    flags: list[Flag] = Field(default_factory=list)
    started_at: str  # ISO 8601, UTC
    wall_s: float = Field(ge=0)
    workload_s: float | None = None  # the worker's own time inside the cell, for overhead
    attempts: int = Field(default=1, ge=1)
    target_cv: float | None = None  # repeats: {until_cv} of the sweep that ran it
    # Start-up a job on this hardware pays once, before its first step (matrix advise): how
    # long the cell waited in its scheduler's queue (a Slurm task, not counting the sweep's
    # own max_parallel), and how long the cluster it ran on took to boot and set up (EC2,
    # the same for every cell of that cluster). None: nothing queues or boots there.
    queued_s: float | None = Field(default=None, ge=0)
    provision_s: float | None = Field(default=None, ge=0)
    node_id: str | None = None
    hardware: Name
    stack: Name
    workload: Name
    error: str | None = None
    log_tail: str | None = None
    # what shaped the end besides the ids (plan/retry.py: timeout, memory limit, the image
    # stack's lock), so a resumed sweep knows whether an outcome would be the same again
    inputs: str | None = None

    @model_validator(mode="after")
    def _extras_are_settings(self) -> CellRecord:
        for key, value in (self.model_extra or {}).items():
            if not is_param_column(key) and setting_owner(key) is None:
                raise ValueError(f"unexpected field {key!r} in a cell record")
            if setting_owner(key) and not isinstance(value, str | int | float | bool):
                raise ValueError(f"setting {key!r} must be a scalar, got {value!r}")
        return self

    def params(self) -> dict[str, Any]:
        return from_param_columns(self.model_extra or {})

    def settings(self, owner: str) -> dict[str, Any]:
        """`owner`'s own settings the cell ran with, where recorded: the hardware kind's
        (`hw.<key>`, since schema version 6) or the stack's executor's (`stack.<key>`,
        since 7)."""
        return from_setting_columns(owner, self.model_extra or {})


EMPTY_WHEN_ABSENT = ("data_sha256", "precision_switches")


class ProvenanceRecord(_Identity, ProvenanceFields, frozen=True):
    """Where and with what a cell ran: the worker's account (worker/records.py:
    ProvenanceFields, declared once) and the driver's own fields."""

    model_config = ConfigDict(extra="forbid")

    record: Literal["provenance"] = "provenance"
    node: str | None = None  # the machine the executor ran on: whose ceiling a row shares
    instance_type: str | None = None
    image_tag: str | None = None
    image_id: str | None = None
    repo_digest: str | None = None
    tool_version: str | None = None
    git_revision: str | None = None
    price_per_hour_usd: float | None = None
    price_source: str | None = None
    workload_dir: str | None = None  # a user's workload folder (`path:`), on the driver
    # the workload's version as its config_id hashed it: declared, plus a folder's code hash
    # or an installed package's release (e.g. 2+acme-bench-0.3.1)
    workload_version: str | None = None
    # the git commit of the user's workload folder or command folder, where it is in a work
    # tree ("+dirty": changed since): what `compare` names beside the code hash
    workload_revision: str | None = None
    # the hash of a user's workload's code (code_identity.py), also where it opted out of
    # its identity (code_hash: false)
    workload_code: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _none_given_is_empty(cls, data: Any) -> Any:
        """A record that names no data files or precision switches has none: {} (in the
        journal and the parquet, as since schema version 2), where the worker's line
        leaves them out."""
        if not isinstance(data, dict):
            return data
        return {**data, **{key: {} for key in EMPTY_WHEN_ABSENT if data.get(key) is None}}


Record = MeasurementRecord | CellRecord | ProvenanceRecord
RECORD_TYPES: dict[str, type[Record]] = {
    "measurement": MeasurementRecord,
    "cell": CellRecord,
    "provenance": ProvenanceRecord,
}


def parse_record(raw: dict[str, Any]) -> Record:
    """A journal line's object as its record type (pydantic ValidationError if it is not one)."""
    kind = raw.get("record")
    if kind not in RECORD_TYPES:
        raise ValueError(f"unknown record kind {kind!r}")
    return RECORD_TYPES[kind].model_validate(raw)


def with_startup(records: list[Record], *, queued_s: float | None = None,
                 provision_s: float | None = None) -> list[Record]:
    """A cell's batch with the start-up its provider measured on its cell record (the
    last); a figure not given is left as it is."""
    cell = records[-1]
    update = {k: v for k, v in (("queued_s", queued_s), ("provision_s", provision_s))
              if v is not None}
    if not isinstance(cell, CellRecord) or not update:
        return records
    return [*records[:-1], cell.model_copy(update=update)]


def with_attempts(records: list[Record], attempts: int) -> list[Record]:
    """A cell attempt's batch with its cell record (the last) counting `attempts`."""
    cell = records[-1]
    if not isinstance(cell, CellRecord) or cell.attempts == attempts:
        return records
    return [*records[:-1], cell.model_copy(update={"attempts": attempts})]
