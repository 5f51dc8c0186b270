"""Executors run one cell and return its records: `process` here, `docker` with the image builder.

Both start `python -m orchestrator.worker CELL_FILE OUT_FILE` (Contracts: worker input and
output) and hand the exit status and OUT_FILE to `outcome.records_for`, which turns them into
journal records, so every executor classifies failures the same way.
"""
