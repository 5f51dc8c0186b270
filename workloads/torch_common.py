"""What every PyTorch workload shares: its device as the harness must see it, and the
precision glossary (docs/ARCHITECTURE.md: parameter glossary). Not a workload (it has no
defaults.yaml)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import torch

from orchestrator.worker.context import Context, Unsupported
from orchestrator.worker.measure import TorchCudaProbe, no_sync
from orchestrator.worker.threads import usable_cpus, user_threads

AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def use_torch(ctx: Context) -> torch.device:
    """The cell's device, registered with the harness: CUDA synchronisation before every
    clock read and the allocator's peaks on a GPU; nothing to wait for on the CPU."""
    device = torch.device(ctx.device)
    if device.type == "cuda":
        ctx.uses_devices(1)  # one GPU; a workload that trains on several uses torch_ranks
        ctx.use_framework("torch", torch.__version__, sync=torch.cuda.synchronize,
                          probes=[TorchCudaProbe(device)])
    else:
        ctx.use_framework("torch", torch.__version__, sync=no_sync)
        if user_threads(os.environ) is None:  # torch follows the user's OMP_NUM_THREADS
            # torch's own default counts the affinity mask, not a cgroup's quota or a Slurm
            # task's allotment: no more threads than the CPUs the cell may use
            torch.set_num_threads(min(torch.get_num_threads(), usable_cpus()))
    return device


def ran_on(ctx: Context, model: torch.nn.Module) -> None:
    """Record where the model's parameters really are (the provenance's compute_device)."""
    ctx.ran_on(str(next(model.parameters()).device))


def set_precision(precision: str, device: torch.device) -> None:
    """fp32 is true fp32 (TF32 off, also outside autocast regions); tf32 turns TF32 on;
    fp16 and tf32 need a GPU (the workloads' declarations mark them gpu_only)."""
    if device.type != "cuda" and precision in ("tf32", "fp16"):
        raise Unsupported(f"precision {precision} needs a GPU")
    allow_tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """fp16/bf16 autocast (fp16 also needs a GradScaler); fp32 and tf32 run without it."""
    if precision in AUTOCAST_DTYPES:
        context: contextlib.AbstractContextManager[Any] = torch.autocast(
            device.type, dtype=AUTOCAST_DTYPES[precision])
        return context
    return contextlib.nullcontext()


def float32_switches() -> dict[str, str]:
    """torch's process-wide fp32 switches as torch reports them (not as they were asked for):
    TF32 in CUDA matmuls, TF32 in cuDNN (its RNNs and convolutions: torch refuses to answer
    while those two differ), and the float32 matmul precision."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    return {
        "torch.backends.cuda.matmul.allow_tf32": _read(lambda: matmul.allow_tf32),
        "torch.backends.cudnn.allow_tf32": _read(lambda: cudnn.allow_tf32),
        "torch.float32_matmul_precision": _read(torch.get_float32_matmul_precision),
    }


def precision_switches(precision: str, device: torch.device) -> dict[str, str]:
    """The switches in effect for a workload that runs its steps under
    `autocast(precision, device)`, for the provenance record: float32_switches() plus the
    dtype that autocast really computes in, read inside it ("off" without autocast)."""
    with autocast(precision, device):
        dtype = (torch.get_autocast_dtype(device.type)
                 if torch.is_autocast_enabled(device.type) else None)
    return {**float32_switches(),
            "torch.autocast_dtype": "off" if dtype is None else str(dtype).removeprefix("torch.")}


def _read(getter: Callable[[], object]) -> str:
    """A switch's value as text; provenance never fails the cell, so a switch torch will not
    read back says why instead."""
    try:
        return str(getter())
    except RuntimeError as exc:
        return f"unreadable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def require_autocast_dtype(module: torch.nn.Module, name: str, example: torch.Tensor,
                           precision: str, device: torch.device) -> None:
    """Check, before anything is timed, that `module` really computes in fp16/bf16 here.

    A cell labelled bf16 must not time fp32: CPU autocast leaves nn.LSTMCell in fp32, and
    oneDNN builds no bf16 nn.LSTM on CPUs without AVX-512 or AMX (the cell would crash
    mid-epoch). Either way the configuration is `unsupported`, with the reason (`name`: the
    module in the user's words). One call on a tiny `example`, the random streams restored
    afterwards (dropout draws from them).
    """
    if precision not in AUTOCAST_DTYPES:
        return
    wanted = AUTOCAST_DTYPES[precision]
    where = (f"this CPU (torch CPU capability {torch.backends.cpu.get_cpu_capability()})"
             if device.type == "cpu" else f"this {device.type} device")
    cuda = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=cuda), torch.no_grad(), autocast(precision, device):
            output = module(example)
    except RuntimeError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unsupported(f"precision {precision}: {name} cannot run in {precision} on {where}: "
                          f"{reason}") from exc
    output = output[0] if isinstance(output, tuple) else output
    if output.dtype != wanted:
        raise Unsupported(f"precision {precision}: autocast runs {name} in {output.dtype} on "
                          f"{where}, so this cell would time {output.dtype}, not {precision}")


def backward_and_step(loss: torch.Tensor, model: torch.nn.Module,
                      optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                      clip: float) -> None:
    """Backward through the grad scaler (a no-op unless fp16), gradient-norm clipping on
    unscaled gradients when clip > 0, then the optimizer step."""
    scaler.scale(loss).backward()
    if clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    scaler.step(optimizer)
    scaler.update()
