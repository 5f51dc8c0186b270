"""Run directories for the results store's tests and benchmark: real journals written
through RunDirectory, with the records a sweep writes, at the times and speeds asked for."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

from orchestrator.results.records import CellRecord, MeasurementRecord, ProvenanceRecord, Status
from orchestrator.results.run_directory import RunDirectory


def write_run(root: Path, started: datetime, speeds: dict[str, list[float]], *,
              run: str = "nightly", workload: str = "lstm_lm", price: float | None = None,
              epochs: int = 2, flags: dict[str, str] | None = None,
              statuses: dict[str, Status] | None = None, seed: int = 0,
              gpus: dict[str, int] | None = None,
              errors: dict[str, str] | None = None) -> RunDirectory:
    """A run whose configuration `hw-stack-bs` has one repeat per speed (items/s): each a
    cell of `epochs` measurements around that speed. Configurations are named
    `HARDWARE/STACK/BATCH`; `flags`, `statuses`, `gpus` (provenance's gpu_count) and
    `errors` (a flag's reason) apply to every repeat of one. A configuration given GPUs
    ran on a p4d.24xlarge (its provenance's instance type), so its entries at 1, 2 and 4
    GPUs are one machine: scaling twins."""
    rng = random.Random(seed)
    store = RunDirectory(root)
    store.root.mkdir(parents=True, exist_ok=True)
    clock = started
    for config, repeats in speeds.items():
        hardware, stack, batch = config.split("/")
        for repeat, speed in enumerate(repeats, start=1):
            identity = {"run": run, "cell_id": f"{config.replace('/', '-')}-r{repeat}",
                        "config_id": config.replace("/", "-"), "repeat": repeat}
            records: list = [ProvenanceRecord(**identity, hostname="box",
                                              price_per_hour_usd=price,
                                              gpu_count=(gpus or {}).get(config),
                                              instance_type="p4d.24xlarge"
                                              if config in (gpus or {}) else None,
                                              framework="torch", framework_version="2.13.0")]
            for epoch in range(1, epochs + 1):
                rate = speed * (1 + rng.uniform(-0.002, 0.002))
                records.append(MeasurementRecord(
                    **identity, epoch=epoch, train_s=10.0, items=rate * 10.0,
                    item_unit="token", items_per_s=rate, host_rss_peak_bytes=700 * 2**20))
            status = (statuses or {}).get(config, Status.OK)
            records.append(CellRecord(
                **identity, status=status, started_at=clock.isoformat(timespec="seconds"),
                wall_s=20.0 + rng.random(), hardware=hardware, stack=stack, workload=workload,
                flags=[(flags or {})[config]] if config in (flags or {}) else [],
                error=(errors or {}).get(config),
                **{"param.batch_size": int(batch)}))
            store.append(records)
            clock += timedelta(seconds=21)
    return store
