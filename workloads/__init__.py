"""Workloads: one folder per workload, found by folder name (see orchestrator.registry)."""
