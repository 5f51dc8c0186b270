"""`matrix dashboard`: read the store, write the site, say where it is."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from orchestrator.errors import MatrixError

# The file that marks a folder as a site this command wrote, and so one it may replace
SITE_MARK = ".matrix-dashboard"


class DashboardError(MatrixError):
    """The site's folder cannot be written, or is not one the dashboard may replace."""


def build_dashboard(output: str, db: str | None) -> str:
    """Write the site of the store `db` names into the folder `output`, whole: built in a
    temporary folder beside it, then swapped in, so no page of an earlier build survives
    and a reader never sees half a site. The line that says what was done."""
    from orchestrator.dashboard.data import site_data
    from orchestrator.dashboard.pages import write_site
    from orchestrator.database.commands import store_url
    from orchestrator.database.schema import open_store

    started = time.perf_counter()
    out = site_folder(output)
    url = store_url(db)
    conn = open_store(url, create=False)
    try:
        data = site_data(conn, url.shown)
    finally:
        conn.close()
    building = out.parent / f".{out.name}.building-{os.getpid()}"
    try:
        shutil.rmtree(building, ignore_errors=True)
        pages = write_site(data, building)
        (building / SITE_MARK).write_text("written by `matrix dashboard`, which replaces "
                                          "this folder whole at each build\n")
        _swap_in(building, out)
    except OSError as exc:
        shutil.rmtree(building, ignore_errors=True)
        raise DashboardError(f"cannot write the dashboard into {out}: "
                             f"{exc.strerror or exc}") from None
    rows = len(data.rows) + len(data.whole)
    return (f"{out / 'index.html'}: {len(pages)} pages ({len(data.runs)} runs, {rows} "
            f"configuration-runs) in {time.perf_counter() - started:.1f} s; open it in a "
            "browser, no server needed")


def site_folder(output: str) -> Path:
    """The folder `-o` names, where the dashboard may write its site: a new or empty
    folder, or a site it wrote before (it holds SITE_MARK); never a link, a file, or a
    folder of someone else's files (it is replaced whole)."""
    if not output.strip():
        raise DashboardError("-o names no folder: give the folder to write the site into")
    out = Path(output).absolute()
    if out.is_symlink():
        raise DashboardError(f"{out} is a link: give the folder itself (the site replaces "
                             "its folder whole, and never follows a link)")
    if out.exists() and not out.is_dir():
        raise DashboardError(f"{out} is not a folder: give a new or empty one")
    if out.is_dir() and any(out.iterdir()) and not (out / SITE_MARK).is_file():
        raise DashboardError(f"{out} holds files `matrix dashboard` did not write; the site "
                             "replaces its folder whole: give a new or empty folder")
    return out


def _swap_in(built: Path, out: Path) -> None:
    """Put the built site where `out` is; the earlier one goes."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        os.rename(built, out)
        return
    earlier = out.parent / f".{out.name}.earlier-{os.getpid()}"
    os.rename(out, earlier)
    os.rename(built, out)
    shutil.rmtree(earlier, ignore_errors=True)
