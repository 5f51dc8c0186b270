"""The validation step: a matrix file read (spec/load.py) and checked against everything the
schema cannot say, the registries (executors, hardware kinds, each provider's judgement),
the images (a lock pinning an installed package's release) and the plan (a grid within
max_cells, each configuration as its workload judges it) included. It sits above spec/,
plan/ and images/, so they know nothing of it. `load_spec` is how every command takes a
matrix in; `json_schema` is the schema for editors, composed from the registries.
"""

from orchestrator.validate.json_schema import json_schema
from orchestrator.validate.matrix import load_spec

__all__ = ["json_schema", "load_spec"]
