"""Workloads: one folder per workload, found by folder name (see orchestrator.workload_registry)."""
