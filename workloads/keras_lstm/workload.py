"""Seed 002: the Keras text-generation LSTM on a Keras 3 backend, data parallel over the
cell's devices, timed by a callback around `fit`'s training batches.

The backend is chosen before Keras is imported (KERAS_BACKEND), and so is the number of
host devices for JAX on a CPU; TensorFlow's logical CPU devices are made before its first
op. The data are built as the seed built them: one-hot windows of `maxlen` characters every
`step` characters, the next character as the target.

`precision` is applied before the model is built, on whichever backend: fp32 is true fp32
(TensorFlow's TF32 execution off, torch's matmul and cuDNN TF32 off, JAX's default matmul
precision highest), tf32 turns TF32 on, fp16 and bf16 are Keras's mixed precision policies
(the softmax kept in float32, as Keras's mixed precision guide has it). A half precision
that the LSTM layer would not compute in here is `unsupported`, checked before any timing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.worker import datasets
from orchestrator.worker.context import Context, Unsupported
from orchestrator.worker.measure import (
    JaxProbe,
    MemoryProbe,
    TorchCudaProbe,
    jax_sync,
    no_sync,
    tensorflow_probes,
    tensorflow_sync,
)

FRAMEWORK_MODULES = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax"}
GPU_ONLY_PRECISIONS = ("tf32", "fp16")
MIXED_POLICIES = {"fp16": "mixed_float16", "bf16": "mixed_bfloat16"}  # Keras dtype policies
COMPUTE_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class TextWindows:
    """The seed's training data: one-hot windows and next-character targets."""

    x: np.ndarray  # (sequences, maxlen, symbols), bool
    y: np.ndarray  # (sequences, symbols), bool
    characters: int  # of the (lower-cased) text
    symbols: int  # distinct characters


def char_windows(text: str, maxlen: int, step: int) -> TextWindows:
    """As the Keras example (and seed 002) prepared Nietzsche: sorted distinct characters,
    a window every `step` characters, the character after it as the target."""
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    codes = np.fromiter((index[c] for c in text), dtype=np.int32, count=len(text))
    starts = np.arange(0, len(text) - maxlen, step)
    windows = codes[starts[:, None] + np.arange(maxlen)]
    x = np.zeros((len(starts), maxlen, len(chars)), dtype=bool)
    np.put_along_axis(x, windows[..., None], True, axis=2)
    y = np.zeros((len(starts), len(chars)), dtype=bool)
    y[np.arange(len(starts)), codes[starts + maxlen]] = True
    return TextWindows(x=x, y=y, characters=len(text), symbols=len(chars))


def nietzsche_text(ctx: Context) -> str:
    path = datasets.fetch("nietzsche")["nietzsche/nietzsche.txt"]
    ctx.data_files["nietzsche/nietzsche.txt"] = datasets.sha256_of(path)
    return path.read_text(encoding="utf-8").lower()


def wikitext_text(ctx: Context) -> str:
    """The seed's WikiText-2 preprocessing: [a-zA-Z0-9]+ tokens, lower-cased, lines joined."""
    path = datasets.fetch("wikitext2")["wikitext-2/train.txt"]
    ctx.data_files["wikitext-2/train.txt"] = datasets.sha256_of(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    return " ".join(" ".join(re.findall("[a-zA-Z0-9]+", line)).lower() for line in lines
                    if line.strip())


def synthetic(samples: int, maxlen: int, features: int, seed: int) -> tuple[Any, Any]:
    """Random inputs and valid one-hot targets (the seed's were random multi-hot rows)."""
    rng = np.random.default_rng(seed)
    x = rng.random((samples, maxlen, features), dtype=np.float32)
    y = np.zeros((samples, features), dtype=np.float32)
    y[np.arange(samples), rng.integers(0, features, samples)] = 1.0
    return x, y


def training_data(ctx: Context) -> tuple[Any, Any]:
    p = ctx.params
    if p["dataset"] == "synthetic":
        return synthetic(p["samples"], p["maxlen"], p["features"], p["seed"])
    text = nietzsche_text(ctx) if p["dataset"] == "nietzsche" else wikitext_text(ctx)
    if p["max_chars"]:
        text = text[: p["max_chars"]]
    windows = char_windows(text, p["maxlen"], p["step"])
    return windows.x, windows.y


def device_count(ctx: Context) -> int:
    """The devices to train on (0: the cell's GPUs, or 1 on a CPU), recorded as used."""
    devices = int(ctx.params["devices"]) or max(ctx.gpus, 1)
    ctx.uses_devices(devices)
    return devices


def prepare_backend(backend: str, devices: int, on_gpu: bool) -> None:
    """What must happen before Keras (and its backend) is first imported."""
    os.environ["KERAS_BACKEND"] = backend
    if backend == "jax" and not on_gpu and devices > 1:
        flag = f"--xla_force_host_platform_device_count={devices}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()


def run(ctx: Context) -> None:
    p = ctx.params
    backend = p["backend"]
    devices = device_count(ctx)
    if backend == "torch" and devices > 1:
        raise Unsupported("keras_lstm on the torch backend trains on one device; Keras 3 has "
                          f"no data parallelism for torch (devices={devices})")
    precision = p["precision"]
    if ctx.gpus == 0 and precision in GPU_ONLY_PRECISIONS:
        raise Unsupported(f"precision {precision} needs a GPU")
    prepare_backend(backend, devices, on_gpu=ctx.gpus > 0)
    try:
        framework = __import__(FRAMEWORK_MODULES[backend])
        import keras
    except ImportError as exc:
        raise Unsupported(f"backend {backend} is not installed here ({exc.name} missing)") \
            from None
    scope, replicas = _distribution(backend, devices, ctx.gpus > 0)  # before any op runs
    set_precision(keras, backend, precision, on_gpu=ctx.gpus > 0)
    ctx.precision_switches.update(precision_switches(keras, backend))
    require_compute_dtype(keras, precision, p["hidden"], p["unroll"],
                          where=f"the {backend} backend on this {'GPU' if ctx.gpus else 'CPU'}")
    keras.utils.set_random_seed(p["seed"])  # after the check: it drew weights
    sync, probes = _harness(backend, ctx.gpus > 0, replicas)
    ctx.use_framework(backend, framework.__version__, sync=sync, probes=probes)
    x, y = training_data(ctx)
    # Whole batches only: a last, smaller batch has a new shape, which JAX and TensorFlow
    # compile anew inside the epoch, and that compilation would be timed as training.
    whole = len(x) - len(x) % p["batch_size"]
    if whole == 0:
        raise ValueError(f"{len(x)} samples make no batch of {p['batch_size']}")
    x, y = x[:whole], y[:whole]
    print(f"keras_lstm: {backend} backend, {whole} samples, data parallel over "
          f"{len(replicas) or 1} device(s): {[str(d) for d in replicas]}", flush=True)
    with scope():
        model = keras.Sequential([
            keras.Input(shape=x.shape[1:]),
            keras.layers.LSTM(p["hidden"], unroll=p["unroll"]),
            keras.layers.Dense(y.shape[1]),
            keras.layers.Activation("softmax", dtype="float32"),  # float32 under any policy
        ])
        model.compile(loss="categorical_crossentropy",
                      optimizer=keras.optimizers.RMSprop(learning_rate=p["lr"]))
    ctx.ran_on(model_device(model, backend))
    timer = epoch_timer(keras, ctx, len(x), p["batch_size"], p["warmup_steps"], sync)
    model.fit(x, y, batch_size=p["batch_size"], epochs=ctx.epochs, shuffle=True,
              verbose=0, callbacks=[timer])


def model_device(model: Any, backend: str) -> str:
    """The device the backend holds the model's first weight on, read back: "cuda:0" from
    torch, "gpu:0" from JAX (platform and id), TensorFlow's device string."""
    value = model.weights[0].value
    if backend == "jax":
        device = next(iter(value.devices()))
        return f"{device.platform}:{device.id}"
    return str(value.device)


def set_precision(keras: Any, backend: str, precision: str, on_gpu: bool) -> None:
    """The precision glossary on `backend`, before the model is built (the caller has
    refused tf32 and fp16 without a GPU): the backend's TF32 switch off unless tf32, and
    Keras's dtype policy: float32, or mixed_float16 / mixed_bfloat16 (float32 variables,
    layers computing in half; compile wraps the optimizer in a LossScaleOptimizer under
    mixed_float16, fp16's grad scaler)."""
    tf32 = precision == "tf32"
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    elif backend == "torch":
        import torch

        from workloads import torch_common

        torch_common.set_precision(precision, torch.device("cuda" if on_gpu else "cpu"))
    else:
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "highest")
    keras.config.set_dtype_policy(MIXED_POLICIES.get(precision, "float32"))


def precision_switches(keras: Any, backend: str) -> dict[str, str]:
    """The switches in effect, read back for the provenance record: Keras's dtype policy and
    the backend's fp32 switches (Keras uses no torch autocast: its policy casts)."""
    switches = {"keras.dtype_policy": str(keras.config.dtype_policy().name)}
    if backend == "tensorflow":
        import tensorflow as tf

        switches["tf.tensor_float_32_execution"] = str(
            tf.config.experimental.tensor_float_32_execution_enabled())
    elif backend == "torch":
        from workloads import torch_common

        switches.update(torch_common.float32_switches())
    else:
        import jax

        config: Any = jax.config  # its flags are attributes that type checkers cannot see
        switches["jax_default_matmul_precision"] = str(config.jax_default_matmul_precision)
    return switches


def require_compute_dtype(keras: Any, precision: str, hidden: int, unroll: bool,
                          where: str) -> None:
    """Unsupported unless Keras's LSTM layer (as the model builds it) really computes in the
    cell's half precision `where`: one call of a fresh layer on a tiny input, before
    anything is timed. A cell labelled bf16 must never time float32."""
    if precision not in COMPUTE_DTYPES:
        return
    layer = keras.layers.LSTM(hidden, unroll=unroll)
    try:
        output = layer(np.zeros((2, 2, 3), dtype="float32"))
    except Exception as exc:  # each backend has its own: tf.errors.*, XlaRuntimeError, ...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unsupported(f"precision {precision}: the Keras LSTM cannot run in {precision} on "
                          f"{where}: {reason}") from exc
    got = keras.backend.standardize_dtype(output.dtype)
    if got != COMPUTE_DTYPES[precision]:
        raise Unsupported(f"precision {precision}: Keras runs its LSTM in {got} on {where}, so "
                          f"this cell would time {got}, not {precision}")


def _distribution(backend: str, devices: int, on_gpu: bool
                  ) -> tuple[Callable[[], Any], list[Any]]:
    """(the scope to build the model in, the devices it replicates over)."""
    import contextlib

    if backend == "tensorflow":
        import tensorflow as tf

        kind = "GPU" if on_gpu else "CPU"
        if not on_gpu and devices > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
        found = tf.config.list_logical_devices(kind)
        if len(found) < devices:
            raise Unsupported(f"{devices} {kind} devices asked for, {len(found)} visible")
        if devices == 1:
            return contextlib.nullcontext, found[:1]
        strategy = tf.distribute.MirroredStrategy([d.name for d in found[:devices]])
        return strategy.scope, found[:devices]
    if backend == "jax":
        import jax
        import keras

        found = jax.devices()
        if on_gpu and all(device.platform == "cpu" for device in found):
            raise Unsupported("JAX sees no GPU here (no CUDA plugin, e.g. jax-cuda13-plugin, "
                              "is installed): this cell would train on the CPU")
        if len(found) < devices:
            raise Unsupported(f"{devices} JAX devices asked for, {len(found)} visible")
        if devices > 1:
            keras.distribution.set_distribution(
                keras.distribution.DataParallel(devices=found[:devices]))
        return contextlib.nullcontext, found[:devices]
    return contextlib.nullcontext, []


def _harness(backend: str, on_gpu: bool, replicas: list[Any]
             ) -> tuple[Callable[[], None], list[MemoryProbe]]:
    """The backend's device barrier and memory probes (the model's memory, not the card's)."""
    if backend == "tensorflow":
        return tensorflow_sync, tensorflow_probes()
    if backend == "jax":
        return jax_sync, [JaxProbe(replicas)]
    if on_gpu:
        import torch

        return torch.cuda.synchronize, [TorchCudaProbe(torch.device("cuda"))]
    return no_sync, []


def epoch_timer(keras: Any, ctx: Context, samples: int, batch_size: int, warmup_steps: int,
                sync: Callable[[], None]) -> Any:
    """A Keras callback that times `fit`'s training batches with the harness's meter (the
    device synchronised at every step boundary); the meter times the whole epoch too
    (`epoch_s`, as the seed did), from on_epoch_begin to on_epoch_end."""

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.meter = ctx.start_epoch(warmup_steps=warmup_steps)

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            size = min(batch_size, samples - batch * batch_size)
            self.step = self.meter.step(items=size)
            self.step.__enter__()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.step.__exit__(None, None, None)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            summary = self.meter.summary()
            ctx.end_epoch(epoch + 1, self.meter,
                          us_per_sample=float(summary["train_s"]) / float(summary["items"]) * 1e6,
                          ms_per_step=float(summary["train_s"]) / int(summary["steps"]) * 1e3)

    return EpochTimer()
