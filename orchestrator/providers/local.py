"""The `local` provider: kind `local`, the machine the sweep runs on (or, with
`--ray-address`, whichever node of that cluster offers the entry). Nothing to launch or
clean up, and no price but the one an entry declares (price_per_hour); the plan only checks
that this machine has the GPUs an entry asks for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.providers import BaseProvider

if TYPE_CHECKING:
    from orchestrator.hardware.local import LocalMachine
    from orchestrator.registry.cell_run import Cell


class LocalProvider(BaseProvider):
    launches = False

    def skip_reason(self, cell: Cell, local: LocalMachine, launch: bool) -> str | None:
        gpus = cell.hardware.gpus
        if gpus > local.gpu_count:
            return f"incompatible: needs {gpus} GPU(s), this machine has {local.gpu_count}"
        return None


PROVIDER = LocalProvider()
