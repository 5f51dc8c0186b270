"""What every PyTorch workload shares: its device as the harness must see it, and the
precision glossary (Contracts: `precision`). Not a workload (it has no defaults.yaml)."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from orchestrator.context import Context, Unsupported
from orchestrator.measure import TorchCudaProbe, no_sync

AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def use_torch(ctx: Context) -> torch.device:
    """The cell's device, registered with the harness: CUDA synchronisation before every
    clock read and the allocator's peaks on a GPU; nothing to wait for on the CPU."""
    device = torch.device(ctx.device)
    if device.type == "cuda":
        ctx.use_framework("torch", torch.__version__, sync=torch.cuda.synchronize,
                          probes=[TorchCudaProbe(device)])
    else:
        ctx.use_framework("torch", torch.__version__, sync=no_sync)
    return device


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
        return torch.autocast(device.type, dtype=AUTOCAST_DTYPES[precision])
    return contextlib.nullcontext()


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
