"""The `pool` provider: a lab's machines of hardware kind `pool`, sized small or large, in
a rack, and billed by the lab's rate card. Its cells run where the sweep runs (it launches
nothing): serially, or on the sweep's embedded Ray. The rack is the kind's own key
(`PoolSettings`): a matrix writes it flat on the entry, as any built-in kind's."""

from __future__ import annotations

from typing import Any, ClassVar

from orchestrator.providers import BaseProvider, Price, ProviderKind
from orchestrator.spec.entry_settings import KindSettings


class PoolSettings(KindSettings):
    rack: str = "r1"  # where the machine stands: part of what a cell ran on
    ticket: str | None = None  # the lab's booking: never part of a cell's identity

    NOT_IDENTITY: ClassVar[frozenset[str]] = frozenset({"ticket"})


class PoolProvider(BaseProvider):
    RATES: ClassVar[dict[str, float]] = {"small": 0.5, "large": 2.0}
    RACKS = ("r1", "r7")

    def hardware_problem(self, hardware: Any) -> str | None:
        if hardware.instance_type not in self.RATES:
            return f"the pool has sizes {', '.join(self.RATES)}, not {hardware.instance_type!r}"
        if hardware.settings.rack not in self.RACKS:
            return f"the pool has racks {', '.join(self.RACKS)}, not {hardware.settings.rack!r}"
        return None

    def prices(self, spec: Any, hardware: Any, warn: Any) -> dict[str, Price]:
        return {h.name: Price(self.RATES[str(h.instance_type)], "lab-rate-card", "2026-11-01")
                for h in hardware}


KIND = ProviderKind("pool", ("pool",), load=PoolProvider, settings=PoolSettings)
