"""The results store: every run's records in one database, SQLite by default and PostgreSQL
when a team shares it (docs/ARCHITECTURE.md: the results store).

A run's journal stays its source of truth; the store is an index over all runs that a sweep
writes as it journals and `matrix db import` rebuilds from journals at any time. It is
insert-only and keyed by the records' identity, so importing twice or writing from two
sweeps at once loses and duplicates nothing. `matrix history` queries it.
"""
