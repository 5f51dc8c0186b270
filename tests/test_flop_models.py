"""Each workload's FLOP model (`workloads/<name>/flops.py`) against a FLOP counter run over
one real training step of the workload's own model, on a small CPU configuration.

The torch workloads: the workload's own step (model, loss, backward; the optimizer step adds
no GEMM) runs once under torch.utils.flop_counter.FlopCounterMode, and its count divided by
the items that step trains must be the model's flops_per_item within 2%. The counter counts
aten.mm/addmm/bmm/baddbmm, convolutions and the fused SDPA kernels, and nothing else, so:
- oneDNN is turned off (torch.backends.mkldnn.flags): with it, nn.LSTM on a CPU is one
  aten::mkldnn_rnn_layer call per layer, which the counter does not see (it would count 0).
  Without it aten::lstm runs ATen's own LSTM, one aten::addmm/mm per gate GEMM (the input
  and the recurrent projections), and autograd's mm backward for each operand that needs a
  gradient: the same GEMMs, of the same shapes, that the fused
  kernels compute, and only those a training step needs (see each flops.py on what fused
  kernels compute beyond them). The unfused paths (nn.LSTMCell loops) run through these ops
  anyway; both are checked.
- attention runs SDPA's math backend: on a CPU the fused flash kernel
  (aten::_scaled_dot_product_flash_attention_for_cpu) is not registered with the counter; the
  math backend does the same two batched products (Q.K^T and the weights times V) as aten.bmm.

keras_lstm (TensorFlow): no torch counter applies, so TensorFlow's own count: the MatMul
FLOPs (the MatMul statistic TensorFlow's profiler uses) of the graph of Keras' train_step
for the model the workload's run() builds (caught at fit), traced at the batch's shape.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from orchestrator.workload_registry import load_workload
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.slow  # sweeps, real training or fuzzing: not the fast tier

CPU = torch.device("cpu")
PROJECT = Path(__file__).resolve().parent.parent


def params(workload: str, preset: str = "tiny", **given: Any) -> dict[str, Any]:
    return load_workload(workload).resolve({"preset": preset, **given})


@contextlib.contextmanager
def gemms_visible() -> Iterator[None]:
    """nn.LSTM through ATen's matmuls (oneDNN off) and attention through bmm (SDPA math)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
        with torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH):
            yield


def counted(step: Callable[[], object]) -> int:
    """FLOPs FlopCounterMode counts over one call of `step`."""
    with gemms_visible(), FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


# torch workloads -----------------------------------------------------------------------------

@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_lm_model_counts_one_training_window(layers: int) -> None:
    from workloads.lstm_lm import workload
    from workloads.lstm_lm.flops import flops_per_item

    p = params("lstm_lm", dataset="synthetic", layers=layers, emb_dim=48)
    torch.manual_seed(int(p["seed"]))
    corpus = workload.load_corpus(p)
    trainer = workload.Trainer(p, corpus.vocab, CPU)
    stream = workload.batchify(corpus.train, int(p["batch_size"]))
    inputs, targets = next(workload.windows(stream, int(p["seq_len"])))
    state = trainer.model.initial_state(int(p["batch_size"]))
    flops = counted(lambda: trainer.step(inputs, targets, state))
    assert flops_per_item(p) == pytest.approx(flops / targets.numel(), rel=0.02)


def test_transformer_ft_model_counts_one_training_batch() -> None:
    from workloads.transformer_ft import workload
    from workloads.transformer_ft.flops import flops_per_item

    p = params("transformer_ft")
    trainer = workload.Trainer(p, CPU)
    batch = workload.make_data(p, CPU).batches[0]
    flops = counted(lambda: trainer.step(batch))
    assert flops_per_item(p) == pytest.approx(flops / batch[0].size(0), rel=0.02)


@pytest.mark.parametrize(("preset", "impl", "layers"), [
    ("seed", "fused", 1), ("seed", "unfused", 1),  # seed 001's first cell itself
    ("tiny", "fused", 3), ("tiny", "unfused", 3),
])
def test_rnn_micro_model_counts_one_training_step(preset: str, impl: str, layers: int) -> None:
    from workloads.rnn_micro import workload
    from workloads.rnn_micro.flops import flops_per_item

    p = params("rnn_micro", preset, rnn_impl=impl, layers=layers)
    bench = workload.setup(p, CPU)
    flops = counted(bench.train_step)
    assert flops_per_item(p) == pytest.approx(flops / int(p["batch_size"]), rel=0.02)


@pytest.mark.parametrize("impl", ["fused", "unfused"])
def test_nmt_dp_model_counts_one_training_step(impl: str) -> None:
    """Words vary per step, FLOPs do not (the padded batch is computed): the step's FLOPs are
    the model's per pair exactly, and per word within 2% at a batch large enough for its
    words to be near their mean (about 0.4% here, one sigma)."""
    from workloads.nmt_dp import workload
    from workloads.nmt_dp.flops import flops_per_item, flops_per_pair

    p = params("nmt_dp", rnn_impl=impl, batch_size=2048, src_len=12, tgt_len=9, emb_dim=24,
               hidden=32, src_vocab=300, tgt_vocab=200)
    worker = workload.Worker(p, rank=0, workers=1, device=CPU)
    batch = workload.synthetic_batch(p, rank=0, step=0, device=CPU)
    flops = counted(lambda: worker.step(batch))
    assert flops == flops_per_pair(p) * int(p["batch_size"])
    assert flops_per_item(p) == pytest.approx(flops / batch.words, rel=0.02)


# keras_lstm on TensorFlow --------------------------------------------------------------------

def test_keras_lstm_model_counts_tensorflows_train_step(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setenv("MATRIX_BENCH_DATA", str(SHARED_DATA))
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")  # before keras; run() sets it too
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip(f"keras was imported here with the {keras.backend.backend()} backend")
    tf_ops = pytest.importorskip("tensorflow.python.framework.ops")  # get_stats_for_node_def
    from tests.cells import context_for, make_cell
    from workloads.keras_lstm import workload
    from workloads.keras_lstm.flops import flops_per_item, symbols

    # tiny: the first 12,000 characters of Nietzsche, 46 symbols
    p = params("keras_lstm", dataset="nietzsche", maxlen=12, hidden=24, batch_size=16)
    caught: dict[str, Any] = {}

    def fit(model: Any, x: Any, y: Any, **_: Any) -> None:  # the model run() trains, untrained
        caught.update(model=model, x=x, y=y)

    monkeypatch.setattr(keras.Model, "fit", fit)
    workload.run(context_for(make_cell("keras_lstm", p, 1), tmp_path / "out"))
    model, x, y = caught["model"], caught["x"], caught["y"]
    assert x.shape[2] == y.shape[1] == symbols(p) == 46

    model.optimizer.build(model.trainable_variables)  # no variable is made while tracing
    batch = int(p["batch_size"])
    graph = tf.function(model.train_step).get_concrete_function(
        (tf.TensorSpec((batch, *x.shape[1:]), tf.float32),
         tf.TensorSpec((batch, *y.shape[1:]), tf.float32))).graph
    flops = sum(tf_ops.get_stats_for_node_def(graph, op.node_def, "flops").value
                for op in graph.get_operations() if op.type == "MatMul")
    assert flops_per_item(p) == pytest.approx(flops / batch, rel=0.02)


@pytest.mark.parametrize("dataset", ["nietzsche", "wikitext2"])
def test_keras_lstm_reads_the_text_the_workload_trains_on(dataset: str,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    from tests.cells import context_for, make_cell
    from workloads.keras_lstm import workload
    from workloads.keras_lstm.flops import SYMBOLS, prepared_text, symbols

    monkeypatch.setenv("MATRIX_BENCH_DATA", str(SHARED_DATA))
    ctx = context_for(make_cell("keras_lstm", {}, 1), tmp_path / "out")
    text = workload.nietzsche_text(ctx) if dataset == "nietzsche" else workload.wikitext_text(ctx)
    assert prepared_text(dataset) == text
    assert symbols({"dataset": dataset, "max_chars": 0}) == SYMBOLS[dataset] == len(set(text))
    assert symbols({"dataset": dataset, "max_chars": 5000}) == len(set(text[:5000]))
    assert symbols({"dataset": "synthetic", "features": 60, "max_chars": 5000}) == 60
    monkeypatch.setenv("MATRIX_BENCH_DATA", str(tmp_path / "empty"))  # never downloads
    with pytest.raises(ValueError, match="not in the data cache"):
        symbols({"dataset": dataset, "max_chars": 4321})


def test_the_flop_models_import_no_framework() -> None:
    """The orchestrator imports them in the lean worker: pure Python."""
    code = ("import sys, workloads.nmt_dp.flops, workloads.keras_lstm.flops, "
            "workloads.rnn_micro.flops; "
            "print(sorted(m for m in ('torch', 'tensorflow', 'keras', 'numpy') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=PROJECT)
    assert done.stdout.strip() == "[]"
