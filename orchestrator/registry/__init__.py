"""The seams' registries: what executors and providers exist, declared lightly (a name, what
it needs, how to load it) and the interfaces their implementations meet. They sit low, just
above the matrix's schema, so the plan, the images and the run ask them without importing an
implementation (orchestrator/executors/, orchestrator/providers/ sit above and register
here; installed distributions by entry point, orchestrator/plugins.py).
"""
