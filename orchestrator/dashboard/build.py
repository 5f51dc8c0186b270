"""`matrix dashboard`: read the store, write the site, say where it is."""

from __future__ import annotations

import glob
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import MatrixError

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.report.advise import Advice
    from orchestrator.spec.job import JobSpec

# The file that marks a folder as a site this command wrote, and so one it may replace
SITE_MARK = ".matrix-dashboard"


class DashboardError(MatrixError):
    """The site's folder cannot be written, or is not one the dashboard may replace."""


def build_dashboard(output: str, db: str | None, job: JobSpec | None = None) -> str:
    """Write the site of the store `db` names into the folder `output`, whole: built in a
    temporary folder beside it, then swapped in, so no page of an earlier build survives
    and a reader never sees half a site. The line that says what was done. `job`: a
    training job its workload's page answers; one the store cannot answer is refused
    before anything is written."""
    from orchestrator.dashboard.data import site_data
    from orchestrator.dashboard.pages import write_site
    from orchestrator.database.history import Filters, per_run, repeats
    from orchestrator.database.judging import judged_runs
    from orchestrator.database.schema import open_store
    from orchestrator.database.store_rows import store_rows
    from orchestrator.database.url import store_url

    started = time.perf_counter()
    out = site_folder(output)
    url = store_url(db)
    conn = open_store(url, create=False)
    try:
        # the store as `matrix advise --db` reads it: the best choices and the job's answer;
        # its repeats and judged runs read once, for those and for the pages' rows
        samples = repeats(conn, Filters())
        runs = judged_runs(conn, per_run(samples)) if not samples.empty else None
        stored = store_rows(conn, Filters(), samples, runs)
        data = site_data(conn, url.shown, stored,
                         (samples, runs) if runs is not None else None)
        answered = (_answer(stored, job), job) if job is not None else None
    finally:
        conn.close()
    building = out.parent / f".{out.name}.building-{os.getpid()}"
    try:
        _remove_leftovers(out)
        pages = write_site(data, building, answered)
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


def _answer(stored: pd.DataFrame, job: JobSpec) -> Advice:
    """The job answered from every run in the store (`stored`: store_rows'), as `matrix
    advise --db` answers it."""
    from orchestrator.report.job_section import answer_job

    found = answer_job(stored, job)
    if isinstance(found, str):
        raise DashboardError(f"--items: the store cannot answer the job: {found}")
    return found


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


def _remove_leftovers(out: Path) -> None:
    """The half-built and replaced sites of builds that were killed (SIGKILL, a full disk)
    before they could remove them: `.NAME.building-PID` and `.NAME.earlier-PID` beside `out`
    whose process is gone. A live build's are left to it."""
    from orchestrator.results.run_directory import alive

    if not out.parent.is_dir():
        return
    for leftover in out.parent.glob(f".{glob.escape(out.name)}.*-*"):
        stage, _, pid = leftover.name.removeprefix(f".{out.name}.").partition("-")
        if stage in ("building", "earlier") and pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)

