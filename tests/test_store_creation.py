"""The first creation of a PostgreSQL store is idempotent under concurrency, and a read
creates nothing (issue 41, item 3): four writers opening an empty store at once once failed
two or three times in four with `relation "store_schema" already exists`, and `matrix db
info` on an empty store created the tables."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

import pytest

from orchestrator.database.schema import SCHEMA_VERSION, open_store
from orchestrator.database.url import parse_url
from tests.conftest import PROJECT, run_cli

DATABASES = itertools.count()
WRITERS, ROUNDS = 4, 5


@pytest.fixture
def empty_store(postgres_server) -> str:
    url: str = postgres_server.create_database(f"creation_{next(DATABASES)}")
    return url


def tables(url: str) -> int:
    db = open_store(parse_url(url))  # creates them where missing: call after the check
    try:
        return int(db.query("SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = "
                            "current_schema()")[0][0])
    finally:
        db.close()


OPEN_AT = """
import sys, time
from orchestrator.database.schema import open_store, stored_version
from orchestrator.database.url import parse_url
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
db = open_store(parse_url(sys.argv[1]))
print(stored_version(db))
db.close()
"""


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_writers_opening_an_empty_store_at_once_all_find_it_made(round_, empty_store):
    at = time.time() + 3  # every process started and imported by then
    writers = [subprocess.Popen([sys.executable, "-c", OPEN_AT, empty_store, str(at)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=PROJECT) for _ in range(WRITERS)]
    outcomes = [writer.communicate(timeout=60) for writer in writers]
    assert [w.returncode for w in writers] == [0] * WRITERS, outcomes
    assert [out.strip() for out, _ in outcomes] == [str(SCHEMA_VERSION)] * WRITERS


def test_db_info_on_an_empty_store_says_so_and_creates_nothing(empty_store, tmp_path):
    import psycopg

    done = run_cli("db", "info", "--db", empty_store, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "holds no results yet" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    with psycopg.connect(empty_store) as conn:
        count = conn.execute("SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = "
                             "current_schema()").fetchone()
    assert count is not None and count[0] == 0
    assert tables(empty_store) > 0  # a writer still makes it
