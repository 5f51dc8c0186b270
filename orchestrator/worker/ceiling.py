"""The node's own ceiling: the FLOP/s dense matrix products reach on this node, this stack
and this precision, measured as every workload is measured (issue 40).

A datasheet peak is an upper bound (on a CPU, our own estimate of one); what a node reaches
is less, and a power-capped, throttled or mislabelled card reaches much less. The worker
measures the ceiling after its workload ran, when the executor asks it to (once per node,
hardware, stack and precision in a run: executors/ceilings.py), with the framework the
workload used, so the row's "% of ceiling" compares like with like.

The probe: square products of side `n` (torch: a linear layer's, as models compute) in the
cell's precision (fp32 with TF32 off, tf32
with it allowed, bf16 and fp16 as tensors of that type, as autocast's matmuls are), on the
first of the cell's GPUs (n = 8192) or on the CPU with the threads the framework has
(n doubled from 256 until one product takes `CPU_PRODUCT_S`, at most 4096: past the caches
and enough work for every core). Products warm up first (allocation, kernel selection); then
`BLOCKS` blocks of products, each sized to about BUDGET_S / BLOCKS, the device synchronised
before every clock read. The ceiling is the best block: anything that disturbs a probe
(another process, a clock that has not ramped up) only lowers a block. Each product is
2 n^3 FLOP. Stdlib here; the framework is imported only by its probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.worker.context import Context

BUDGET_S = {"gpu": 3.0, "cpu": 1.0}  # timed seconds per precision, warm-up and sizing apart
BLOCKS = 5
GPU_N = 8192
CPU_N_START, CPU_N_MAX, CPU_PRODUCT_S = 256, 4096, 0.01
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
FRAMEWORKS = ("torch", "jax", "tensorflow")


# The probe's worst case is about this many times its budget (sizing, warm-up, compilation)
HEADROOM = 4.0


class NoCeiling(Exception):
    """No probe for this framework or precision here; the message says why."""


@dataclass(frozen=True)
class Ceiling:
    """A measured ceiling, as the provenance record carries it (`ceiling_*` fields)."""

    flops: float  # FLOP/s of one device (a GPU, or the CPU with all the cell's threads)
    precision: str
    probe: str  # what was measured: framework, precision, size, device, blocks
    cost_s: float  # what the probe cost, warm-up and sizing included

    def provenance(self) -> dict[str, Any]:
        return {f"ceiling_{key}": value for key, value in asdict(self).items()}


def ceiling_provenance(ctx: Context, elapsed_s: float) -> dict[str, Any]:
    """The `ceiling_*` fields of a cell whose executor asked for its node's ceiling (a
    framework of the cell's precision that no cell on this node measured yet in this run),
    after its workload ran; `ceiling_gap` says why none was measured where one was asked
    for. Nothing for a workload without a FLOP model: no fraction of a ceiling to show."""
    framework = ctx.framework
    if framework in ctx.cell.ceilings_measured or ctx.flops_per_item() is None:
        return {}
    precision = str(ctx.params.get("precision", "fp32"))
    budget = BUDGET_S["gpu" if ctx.gpus else "cpu"]
    if elapsed_s + HEADROOM * budget > ctx.cell.timeout_s:
        return {"ceiling_gap": f"no time left for the ceiling probe ({elapsed_s:.0f} s of the "
                               f"cell's timeout_s of {ctx.cell.timeout_s:g} s spent)"}
    try:
        found = measure(framework, precision, on_gpu=ctx.gpus > 0)
    except NoCeiling as exc:
        return {"ceiling_gap": str(exc)}
    except Exception as exc:  # a probe that fails must not fail the cell that ran
        return {"ceiling_gap": f"the ceiling probe failed: {type(exc).__name__}: {exc}"[:300]}
    print(f"matrix-bench: ceiling {found.flops / 1e12:.4g} TFLOP/s ({found.probe}) in "
          f"{found.cost_s:.2g} s", flush=True)
    return found.provenance()


# A product to time: (run it once, synchronise the device)
Product = tuple[Callable[[], object], Callable[[], None]]


def measure(framework: str | None, precision: str, on_gpu: bool) -> Ceiling:
    """The ceiling of this node at `precision`, through `framework` (the workload's);
    NoCeiling where there is no probe for them."""
    if precision not in PRECISIONS:
        raise NoCeiling(f"no ceiling probe for precision {precision!r}")
    if framework not in FRAMEWORKS:
        raise NoCeiling(f"no ceiling probe for framework {framework!r}")
    start = time.perf_counter()
    make = {"torch": _torch_product, "jax": _jax_product, "tensorflow": _tf_product}[framework]
    budget = BUDGET_S["gpu" if on_gpu else "cpu"]
    if on_gpu:
        n = GPU_N
        product = make(n, precision, on_gpu)
        seconds_each = _warm(product)
    else:
        n, product, seconds_each = _cpu_sized(make, precision)
    per_block = max(1, round(budget / BLOCKS / max(seconds_each, 1e-6)))
    best = max(_block_rate(product, per_block, n) for _ in range(BLOCKS))
    where = "GPU 0 of the cell's" if on_gpu else f"the CPU ({_threads(framework)} threads)"
    op = "linear" if framework == "torch" else "matmul"
    probe = (f"{framework} {precision} {op} {n}x{n}x{n} on {where}, best of {BLOCKS} "
             f"blocks of {per_block}")
    return Ceiling(flops=best, precision=precision, probe=probe,
                   cost_s=time.perf_counter() - start)


def _warm(product: Product, untimed: int = 2) -> float:
    """`untimed` products, then one timed: its seconds size the blocks."""
    run, sync = product
    for _ in range(untimed):
        run()
    sync()
    begin = time.perf_counter()
    run()
    sync()
    return time.perf_counter() - begin


def _cpu_sized(make: Callable[[int, str, bool], Product],
               precision: str) -> tuple[int, Product, float]:
    """The smallest side from CPU_N_START, doubling, whose product takes CPU_PRODUCT_S."""
    n = CPU_N_START
    while True:
        product = make(n, precision, False)
        seconds = _warm(product, untimed=1)
        if seconds >= CPU_PRODUCT_S or n >= CPU_N_MAX:
            _warm(product, untimed=0)  # a second product at the size chosen
            return n, product, seconds
        n *= 2


def _block_rate(product: Product, count: int, n: int) -> float:
    run, sync = product
    sync()
    begin = time.perf_counter()
    for _ in range(count):
        run()
    sync()
    return 2.0 * n ** 3 * count / (time.perf_counter() - begin)


def _torch_product(n: int, precision: str, on_gpu: bool) -> Product:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    device = "cuda:0" if on_gpu else "cpu"
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    # a linear layer's product (a @ b.T), as models compute theirs: on a CPU without bf16
    # instructions torch.matmul's bf16 path is several times slower than F.linear's
    return (lambda: torch.nn.functional.linear(a, b)), sync


def _jax_product(n: int, precision: str, on_gpu: bool) -> Product:
    import jax
    import jax.numpy as jnp

    dtype = {"bf16": jnp.bfloat16, "fp16": jnp.float16}.get(precision, jnp.float32)
    device = jax.devices("gpu" if on_gpu else "cpu")[0]
    # fp32 at full precision; tf32 as XLA's default on a GPU ("one bf16 pass" is not tf32)
    how = jax.lax.Precision.HIGHEST if precision == "fp32" else jax.lax.Precision.HIGH
    keys = jax.random.split(jax.random.PRNGKey(0))
    a = jax.device_put(jax.random.normal(keys[0], (n, n), dtype), device)
    b = jax.device_put(jax.random.normal(keys[1], (n, n), dtype), device)
    multiply = jax.jit(lambda x, y: jnp.matmul(x, y, precision=how))
    result: list[Any] = [None]

    def run() -> None:
        result[0] = multiply(a, b)

    def sync() -> None:
        if result[0] is not None:
            result[0].block_until_ready()

    return run, sync


def _tf_product(n: int, precision: str, on_gpu: bool) -> Product:
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
    dtype = {"bf16": tf.bfloat16, "fp16": tf.float16}.get(precision, tf.float32)
    with tf.device("/GPU:0" if on_gpu else "/CPU:0"):
        a = tf.cast(tf.random.normal((n, n)), dtype)
        b = tf.cast(tf.random.normal((n, n)), dtype)
    result: list[Any] = [None]

    def run() -> None:
        with tf.device("/GPU:0" if on_gpu else "/CPU:0"):
            result[0] = tf.linalg.matmul(a, b)

    def sync() -> None:
        sync_devices = getattr(tf.test.experimental, "sync_devices", None)
        if on_gpu and sync_devices is not None:
            sync_devices()  # TensorFlow's own synchronisation (2.13 on)
        elif result[0] is not None:
            result[0][0, 0].numpy()  # reading one element waits for the product

    return run, sync


def _threads(framework: str) -> str:
    """The CPU threads the framework computes with, as far as it says."""
    if framework == "torch":
        import torch

        return str(torch.get_num_threads())
    import os

    return str(len(os.sched_getaffinity(0)))
