"""The `pool` provider: a lab's machines of hardware kind `pool`, sized small or large and
billed by the lab's rate card. Its cells run where the sweep runs (it launches nothing):
serially, or on the sweep's embedded Ray."""

from __future__ import annotations

from typing import Any, ClassVar

from orchestrator.providers import BaseProvider, Price, ProviderKind


class PoolProvider(BaseProvider):
    RATES: ClassVar[dict[str, float]] = {"small": 0.5, "large": 2.0}

    def hardware_problem(self, hardware: Any) -> str | None:
        if hardware.instance_type not in self.RATES:
            return f"the pool has sizes {', '.join(self.RATES)}, not {hardware.instance_type!r}"
        return None

    def prices(self, spec: Any, hardware: Any, warn: Any) -> dict[str, Price]:
        return {h.name: Price(self.RATES[str(h.instance_type)], "lab-rate-card", "2026-11-01")
                for h in hardware}


KIND = ProviderKind("pool", ("pool",), load=PoolProvider)
