"""matrix-bench: run deep-learning training benchmarks over a matrix of hardware and stacks."""

__version__ = "0.1.0"
