"""What `matrix advise` answers with, as data: the job asked (Job), each configuration's
projection (Projection) and the whole answer (Advice). Types only, so that the modules that
make an answer (advise.py, candidates.py, picks.py) and those that word it (advise_text.py)
share them without importing each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.errors import MatrixError
from orchestrator.spec.job import JobSpec

SpotPrice = Callable[[str], tuple[float, str] | None]  # instance type -> (USD/h, source)


class AdviseError(MatrixError):
    """A question `matrix advise` or `matrix explain` cannot answer (a deadline that is not
    a duration, runs of several workloads and none chosen, no throughput at all)."""


@dataclass(frozen=True)
class Job:
    items: float
    deadline_s: float | None = None
    budget_usd: float | None = None
    grid_g_per_kwh: float | None = None  # gCO2 per kWh, the user's figure
    spot: bool = False  # priced at the provider's spot price where it has one
    interruptions_per_day: float | None = None  # the user's expectation, with --spot
    checkpoint_every_s: float | None = None
    include_flagged: bool = False  # answer from flagged repeats too, their flags beside
    count_startup: bool = True  # False: a question of the rate alone (PER_MILLION)

    @classmethod
    def of(cls, spec: JobSpec) -> Job:
        """The job a matrix's `job:` names (no spot pricing: the run's recorded prices)."""
        return cls(items=spec.items, deadline_s=spec.deadline_s, budget_usd=spec.budget,
                   grid_g_per_kwh=spec.grid_intensity)

    @property
    def rework_factor(self) -> float:
        """How much longer the job runs for the work interruptions throw away: each loses,
        on average, half a checkpoint interval, so a fraction R x T / 2 of each day is done
        again (1: no allowance is made)."""
        if not (self.spot and self.interruptions_per_day and self.checkpoint_every_s):
            return 1.0
        return 1 / (1 - self.interruptions_per_day * self.checkpoint_every_s / 2 / 86400)


@dataclass(frozen=True)
class Projection:
    """One configuration's answer for the job."""

    config_id: str
    label: str
    repeats: int
    items_per_s: float
    time_s: float
    time_range_s: tuple[float, float] | None  # 95% interval; None: too few repeats
    startup_s: float | None  # recorded queue wait + cluster boot; None: none recorded (0)
    usd_per_hour: float | None
    price_source: str | None
    cost_usd: float | None
    cost_range_usd: tuple[float, float] | None
    energy_kwh: float | None  # None: not measured (no GPU energy counter)
    co2_kg: float | None
    marks: list[str] = field(default_factory=list)  # fastest..., cheapest..., front
    rates: tuple[float, ...] = ()  # each repeat's throughput: what its noise is judged on
    flags: str = ""  # the flags of the repeats it stands on (with --include-flagged)
    noise: str = ""  # "noisy: spread 8%; ..." where its figure moves (analysis.is_noisy)
    runs: tuple[str, ...] = ()  # the runs that measured it

    @property
    def projected(self) -> bool:
        return "projected" in self.marks

    def fits(self, job: Job) -> bool:
        """Within the job's deadline and budget (by the point figures; an interval that
        crosses a limit is shown, not hidden)."""
        return ((job.deadline_s is None or self.time_s <= job.deadline_s)
                and (job.budget_usd is None or (self.cost_usd is not None
                                                and self.cost_usd <= job.budget_usd)))


@dataclass(frozen=True)
class Advice:
    workload: str
    unit: str
    job: Job
    projections: list[Projection]  # fastest first
    left_out: dict[str, str]  # label -> why it is never advised
    fastest: Projection | None  # within the budget
    cheapest: Projection | None  # within the deadline
    ties: dict[str, list[str]]  # "fastest"/"cheapest" -> labels within the pick's noise
    notes: dict[str, list[str]] = field(default_factory=dict)  # question -> its caveats
    dropped: dict[str, str] = field(default_factory=dict)  # label -> repeats set aside
    guess: str | None = None  # why the picks are only a best guess

    def pick(self, question: str) -> Projection | None:
        return self.fastest if question == "fastest" else self.cheapest


PER_MILLION = Job(items=1e6, count_startup=False)  # "which is fastest, which cheapest per
# million items": the rate alone, the question of the report's Best choices and history
