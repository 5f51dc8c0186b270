"""`matrix dashboard`: read the store, write the site, say where it is."""

from __future__ import annotations

import time
from pathlib import Path

from orchestrator.errors import MatrixError


class DashboardError(MatrixError):
    """The site's folder cannot be written."""


def build_dashboard(out: Path, db: str | None) -> str:
    """Write the site of the store `db` names into `out`; the line that says what was done."""
    from orchestrator.dashboard.data import site_data
    from orchestrator.dashboard.pages import write_site
    from orchestrator.database.commands import store_url
    from orchestrator.database.schema import open_store

    started = time.perf_counter()
    url = store_url(db)
    conn = open_store(url, create=False)
    try:
        data = site_data(conn, url.shown)
    finally:
        conn.close()
    try:
        pages = write_site(data, out)
    except OSError as exc:
        raise DashboardError(f"cannot write the dashboard into {out}: "
                             f"{exc.strerror or exc}") from None
    rows = len(data.rows)
    return (f"{out / 'index.html'}: {len(pages)} pages ({len(data.runs)} runs, {rows} "
            f"configuration-runs) in {time.perf_counter() - started:.1f} s; open it in a "
            "browser, no server needed")
