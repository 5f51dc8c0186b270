"""The dashboard publishes only what it built (issue 41, item 1). A run page was once the
run's report.html copied from its recorded location, verbatim, following links, and
importing a copy of a run re-pointed that location: whoever could import a run chose the
HTML (scripts included) the team's site served, and which of the builder's files it
published. Now every page is built from the store's rows, an import of a copy changes
nothing, and `-o DIR` writes the site whole."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import run_cli

IMPOSSIBLE = Path(__file__).parent / "journals" / "impossible"
SECRET = "aws_secret_access_key = not-for-the-site"
PLANTED = "<script>planted()</script>"


def site(tmp_path: Path, url: str, name: str = "site") -> Path:
    done = run_cli("dashboard", "-o", str(tmp_path / name), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / name


def published(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_no_file_from_a_runs_folder_reaches_the_site_however_it_got_there(tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text(SECRET)
    honest = shutil.copytree(IMPOSSIBLE, tmp_path / "honest")
    (honest / "report.html").symlink_to(secret)  # a link to the builder's credentials
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(honest), "--db", url, cwd=tmp_path).returncode == 0
    planted = shutil.copytree(IMPOSSIBLE, tmp_path / "copy")  # the same run, elsewhere
    (planted / "report.html").write_text(f"<html>{PLANTED}</html>")
    again = run_cli("db", "import", str(planted), "--db", url, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    trend = run_cli("history", "trend", "--db", url, "--format", "csv", cwd=tmp_path)
    assert str(honest) in trend.stdout and str(planted) not in trend.stdout  # not re-pointed
    built = published(site(tmp_path, url))
    assert SECRET not in built and "planted()" not in built
    assert all(not p.is_symlink() for p in (tmp_path / "site").rglob("*"))


def test_a_rebuild_leaves_no_page_of_the_earlier_site(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(IMPOSSIBLE), "--db", url, cwd=tmp_path).returncode == 0
    folder = site(tmp_path, url)
    stale = folder / "workload-gone.html"
    stale.write_text("<html>a workload the store no longer holds</html>")
    site(tmp_path, url)
    assert not stale.exists() and (folder / "index.html").is_file()
    assert not list(tmp_path.glob(".site.*"))  # no building or earlier folder left beside it


def test_a_folder_the_site_would_replace_is_refused_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli("db", "import", str(IMPOSSIBLE), "--db", url, cwd=tmp_path).returncode == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's own file")
    (tmp_path / "link").symlink_to(mine)
    for output, says in ((str(mine), "holds files `matrix dashboard` did not write"),
                         ("", "-o names no folder"), (str(tmp_path / "link"), "is a link"),
                         (str(mine / "notes.txt"), "is not a folder")):
        done = run_cli("dashboard", "-o", output, "--db", url, cwd=tmp_path)
        assert done.returncode == 2, (output, done.stdout, done.stderr)
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
    assert (mine / "notes.txt").read_text() == "a user's own file"
