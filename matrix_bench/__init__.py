"""matrix-bench's client for your own training script (a `command:` workload):

    import matrix_bench

    bench = matrix_bench.attach(framework="torch", device=device)
    for epoch in range(bench.epochs(default=3)):
        meter = bench.start_epoch(warmup_steps=2)
        for inputs, targets in loader:
            with meter.step(items=len(inputs)):
                train_step(inputs, targets)
        bench.end_epoch(meter)

A Hugging Face `Trainer` needs one line: `callbacks=[matrix_bench.hf.MatrixBenchCallback()]`
(matrix_bench/hf.py). Stdlib only; outside matrix-bench it times and prints, and records
nothing. The implementation is orchestrator/worker/client.py.
"""

from orchestrator.worker.client import Bench, attach

__all__ = ["Bench", "attach"]
