"""The `sleep` workload: sleeps for a fixed time per epoch, or injects the fault it is told to.

Its cells have a known length, so a sweep of them measures the orchestrator's own overhead;
its faults drive the tests of failure handling with real processes and real signals.
"""

from __future__ import annotations

import os
import random
import signal
import time

from orchestrator.worker.context import Context, Unsupported

OOM_CHUNK = 16 * 1024 * 1024
OOM_PAUSE_S = 0.02  # 800 MB/s at most: a memory limit is reached within seconds


def run(ctx: Context) -> None:
    fault = ctx.params["fault"]
    if ctx.params["message"]:
        print(f"message: {ctx.params['message']}", flush=True)
    _inject_before(ctx, fault)
    steps = ctx.params["steps"]
    pause = ctx.params["seconds"] / steps
    jitter = ctx.params["jitter"]
    noise = random.Random(ctx.repeat)  # the same noise for the same repeat
    for epoch in ctx.epoch_range():
        meter = ctx.start_epoch(warmup_steps=0)
        for _ in range(steps):
            with meter.step(items=1):
                time.sleep(pause * (1 + jitter * noise.random()))
        ctx.end_epoch(epoch, meter)


def _inject_before(ctx: Context, fault: str) -> None:
    if fault == "raise":
        raise RuntimeError("injected failure (fault: raise)")
    if fault == "unsupported":
        raise Unsupported("injected: this configuration is not supported (fault: unsupported)")
    if fault == "abort":
        os.abort()
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "hang":
        while True:
            time.sleep(60)
    if fault == "no_records":
        os._exit(0)
    if fault == "garbage":
        with open(ctx.out_path, "w", encoding="utf-8") as handle:
            handle.write("this is not a record\n{\"record\": \"measurement\"\n")
        os._exit(0)
    if fault == "oom":
        if ctx.memory_limit_mb is None:
            raise RuntimeError("fault oom needs the workload's memory_limit_mb, so that it "
                               "exhausts a limit and not the machine")
        hoard = []
        while True:  # until the limit: MemoryError, or a scheduler's kill
            hoard.append(b"\1" * OOM_CHUNK)  # written, so resident: what a scheduler sees
            time.sleep(OOM_PAUSE_S)  # slow enough for a scheduler's sampling to see it grow
