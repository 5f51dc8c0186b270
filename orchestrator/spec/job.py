"""The matrix's `job:`: the training job the user means to run, so the run's report answers
it (time, cost and energy of the whole job on every configuration, report/advise.py) as
`matrix advise` does. It enters no identity: the same cells answer any job.

    job: {items: 2.0e9, workload: gpt_lm, deadline: 36h, budget: 800, grid_intensity: 400}

A sweep keeps its job beside the run's journal as `job.json`, so that `matrix report` in a
later process answers the same job without the matrix file; the latest sweep's job wins
(it is the user's latest question).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.errors import MatrixError, MatrixWarning

UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")


def duration_s(text: str) -> float:
    """'36h', '90m', '2d', '600s' or '600' as seconds; ValueError otherwise."""
    found = DURATION.fullmatch(text)
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration (e.g. 36h, 90m, 2d, 600s)")
    return float(found.group(1)) * UNITS_S[found.group(2) or "s"]


class JobSpec(BaseModel):
    """A training job of `items` (the workload's unit: tokens, samples, words), with the
    user's limits; `workload` is required where the matrix has several."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    items: float = Field(gt=0, le=1e18)
    workload: str | None = None
    deadline: str | None = None  # a duration: 36h, 90m, 2d, 600s
    budget: float | None = Field(default=None, ge=0)  # US$
    grid_intensity: float | None = Field(default=None, ge=0)  # gCO2 per kWh, the user's

    @field_validator("items", mode="before")
    @classmethod
    def _a_number(cls, value: object) -> object:
        """YAML reads `2e9` (no dot) as text: a number written so is still a number."""
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        return value

    @field_validator("deadline")
    @classmethod
    def _a_duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_s(value)
        return value

    @property
    def deadline_s(self) -> float | None:
        return None if self.deadline is None else duration_s(self.deadline)


class JobOptionError(MatrixError):
    """A job given on the command line that a matrix's `job:` would refuse (an `inf`, a NaN,
    more than 1e18 items, a negative budget)."""


OPTIONS = {"items": "--items", "workload": "--workload", "deadline": "--deadline",
           "budget": "--budget", "grid_intensity": "--grid-intensity"}


def job_from_options(**fields: object) -> JobSpec:
    """The job `matrix advise` and `matrix dashboard` were given (OPTIONS' fields), held to
    a matrix's `job:` bounds (one rule: JobSpec); JobOptionError in one line that names the
    option. An unbounded job once made every time and cost inf and wrote JSON's Infinity,
    which a browser refuses."""
    try:
        return JobSpec(**fields)  # type: ignore[arg-type]
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "items"
        value, bound = fields.get(field), (error.get("ctx") or {})
        why = {"finite_number": "not a finite number",
               "less_than_equal": f"a job is at most {bound.get('le', 0):g}",
               "greater_than": f"a job's figure must be above {bound.get('gt', 0):g}",
               "greater_than_equal": f"a job's figure must be at least {bound.get('ge', 0):g}"
               }.get(
                   error["type"], error["msg"])
        shown = f"{value:g}" if isinstance(value, float) else repr(value)
        raise JobOptionError(f"{OPTIONS.get(field, field)} {shown}: {why}") from None


JOB_FILE = "job.json"


def save_job(root: Path, job: JobSpec | None) -> None:
    """Keep `job` in the run directory `root`; a sweep with none removes an earlier one."""
    path = root / JOB_FILE
    if job is None:
        path.unlink(missing_ok=True)
        return
    partial = path.with_suffix(".json.partial")
    partial.write_text(job.model_dump_json(exclude_none=True, indent=1) + "\n",
                       encoding="utf-8")
    os.replace(partial, path)


def load_job(root: Path) -> JobSpec | None:
    """The job the run directory keeps, or None: none kept, or one this version cannot read
    (said in a warning; the report then has no job section, and the rest is unchanged)."""
    path = root / JOB_FILE
    try:
        return JobSpec.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        warnings.warn(f"{path}: not a job this matrix-bench can read, so the report answers "
                      f"none ({str(exc).splitlines()[0]})", MatrixWarning, stacklevel=2)
        return None


def common_job(roots: list[Path]) -> JobSpec | None:
    """The job the run directories all keep (a merged report answers it), else None."""
    jobs = {load_job(root) for root in roots}
    return jobs.pop() if len(jobs) == 1 else None
