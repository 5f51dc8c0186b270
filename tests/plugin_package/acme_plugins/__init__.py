"""A user's plugins for matrix-bench, installed as a distribution (tests/test_seams.py builds
its wheel): an executor and a provider, registered by entry point only."""
