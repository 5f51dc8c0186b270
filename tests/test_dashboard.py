"""`matrix dashboard`: a static site over the results store, opened in a real headless
Chromium (tests/browser.py): no console error, every table holds the store's rows, every
chart draws its points, a click on a header sorts, the filter filters; screenshots of each
page in test-artifacts/. And the chart library's vendoring, and bad input in one line."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.dashboard import vendor
from orchestrator.database.results_db import ResultsDB
from orchestrator.database.url import parse_url
from tests.conftest import run_cli
from tests.store_runs import write_run

DAY = datetime(2026, 11, 10, 1, 0, tzinfo=UTC)
LSTM = {"a100-x1/torch/32": [1000.0, 1010.0, 990.0], "a100-x2/torch/32": [1900.0, 1880.0],
        "a100-x4/torch/32": [3500.0, 3550.0], "cpu/torch/32": [90.0, 91.0],
        "cpu/torch/64": [150.0, 149.0]}
GPUS = {"a100-x1/torch/32": 1, "a100-x2/torch/32": 2, "a100-x4/torch/32": 4}
GPT = {"a100-x1/torch/8": [5000.0, 5100.0], "h100/torch/8": [9e12, 9e12]}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, str, Path]:
    """A store of three nights of two workloads (priced, on 1, 2 and 4 GPUs, one row flagged
    implausible with its reason), the first night reported; its dashboard."""
    root = tmp_path_factory.mktemp("dashboard")
    url = f"sqlite:///{root / 'store.db'}"
    results = ResultsDB.open(parse_url(url))
    try:
        for night in range(3):
            drift = 1 - 0.02 * night
            results.import_run(write_run(
                root / f"night-{night}", DAY + timedelta(days=night),
                {k: [v * drift for v in vs] for k, vs in LSTM.items()}, price=2.5, gpus=GPUS,
                seed=night))
            results.import_run(write_run(
                root / f"gpt-{night}", DAY + timedelta(days=night, hours=2), GPT,
                workload="gpt_lm", run="gpt", price=4.0, seed=night,
                flags={"h100/torch/8": "implausible"},
                errors={"h100/torch/8": "achieved 9e+12 token/s is beyond the GPU's peak"}))
    finally:
        results.close()
    reported = run_cli("report", str(root / "night-0"), cwd=root)
    assert reported.returncode == 0, reported.stderr
    done = run_cli("dashboard", "-o", str(root / "site"), "--db", url, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "index.html: 9 pages (6 runs" in done.stdout, done.stdout
    return root / "site", url, root


def config_runs(url: str, workload: str) -> int:
    """What the workload's table must hold: its (configuration, run) pairs that ended ok."""
    results = ResultsDB.open(parse_url(url), create=False)
    try:
        return len(results.db.query("SELECT DISTINCT config_id, run_key FROM cells WHERE "
                                    "workload = ? AND status = 'ok'", (workload,)))
    finally:
        results.close()


def table_rows(browser, table_id: str) -> list[list[str]]:
    return browser.js("return [...document.querySelectorAll('#' + arguments[0] + ' tbody tr')]"
                      ".map(tr => [...tr.cells].map(td => td.textContent));", table_id)


def test_the_overview_lists_workloads_by_hardware_and_every_run(site, browser):
    folder, _, _ = site
    assert browser.open(folder / "index.html") == []
    rows = table_rows(browser, "overview")
    assert [(r[0], r[1]) for r in rows] == [
        ("gpt_lm", "h100"), ("gpt_lm", "a100-x1"), ("lstm_lm", "a100-x4"),
        ("lstm_lm", "a100-x2"), ("lstm_lm", "a100-x1"), ("lstm_lm", "cpu")]
    flagged = browser.js("return [...document.querySelectorAll('#overview tr.flagged')]"
                         ".map(tr => tr.cells[6].textContent);")
    assert flagged == ["implausible: achieved 9e+12 token/s is beyond the GPU's peak; left "
                       "out of the best choices"]
    assert len(table_rows(browser, "runs")) == 6
    browser.screenshot("dashboard-index")


@pytest.mark.parametrize("workload", ["lstm_lm", "gpt_lm"])
def test_a_workload_page_holds_every_row_and_draws_every_point(site, browser, workload):
    folder, url, _ = site
    assert browser.open(folder / f"workload-{workload}.html") == []
    assert len(table_rows(browser, f"rows-{workload}")) == config_runs(url, workload)
    charts = browser.js("""
        return Object.entries(window.matrixCharts).map(([id, chart]) => [id,
            chart.data.datasets.map((d, i) => [d.data.filter(p => p !== null).length,
                chart.getDatasetMeta(i).data.filter(e => !e.skip).length])]);""")
    assert [chart_id.split("-")[0] for chart_id, _ in charts] == [
        "throughput", "cost", "scaling", "history"]
    for chart_id, datasets in charts:
        assert datasets, chart_id
        for points, drawn in datasets:
            assert points > 0 and drawn == points, (chart_id, datasets)
    configs = len(LSTM) if workload == "lstm_lm" else len(GPT) - 1  # h100's is implausible
    assert charts[0][1] == [[configs, configs]]  # a bar per configuration's latest run
    labels = browser.js(f"return window.matrixCharts['throughput-{workload}'].data.labels;")
    assert not any(label.startswith("h100") for label in labels)
    tips = browser.js(f"return window.matrixCharts['throughput-{workload}']"
                      ".data.datasets[0].tips[0];")
    assert "host: box" in tips and "framework: torch" in tips
    browser.screenshot(f"dashboard-{workload}")


def test_the_scaling_chart_draws_the_ideal_line_from_the_fewest_gpus(site, browser):
    folder, _, _ = site
    browser.open(folder / "workload-lstm_lm.html")
    lines = browser.js("return window.matrixCharts['scaling-lstm_lm'].data.datasets"
                       ".map(d => [d.label, d.data.map(p => [p.x, Math.round(p.y)])]);")
    # one line per machine: the three a100 entries are one p4d.24xlarge, used more or less
    measured = dict(lines)["p4d.24xlarge/torch batch_size=32 (GPU)"]
    ideal = dict(lines)["p4d.24xlarge/torch batch_size=32 (GPU): ideal"]
    assert [x for x, _ in measured] == [1, 2, 4]
    assert ideal[0] == measured[0]  # from the fewest GPUs, linearly
    assert ideal[-1][0] == 4 and ideal[-1][1] == pytest.approx(4 * ideal[0][1], abs=4)
    cpu = dict(lines)["cpu/torch batch_size=32 (CPU)"]  # a line of its own, no ideal
    assert [x for x, _ in cpu] == [1]
    assert "cpu/torch batch_size=32 (CPU): ideal" not in dict(lines)


def test_a_click_on_a_header_sorts_and_the_filter_filters(site, browser):
    folder, _, _ = site
    browser.open(folder / "workload-lstm_lm.html")
    table = "rows-lstm_lm"

    def medians() -> list[float]:
        return [float(r[6].split()[0].replace(",", "")) for r in table_rows(browser, table)]

    header = browser.js(f"return [...document.querySelectorAll('#{table} th')]"
                        ".find(th => th.textContent === 'median');")
    header.click()
    assert medians() == sorted(medians())
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert medians() == sorted(medians(), reverse=True)
    browser.screenshot("dashboard-lstm_lm-sorted")
    box = browser.driver.find_element("css selector", f"#table-{table} input")
    box.send_keys("a100-x4")
    rows = table_rows(browser, table)
    assert len(rows) == 3 and all(r[2] == "a100-x4" for r in rows)
    count = browser.driver.find_element("css selector", f"#table-{table} .count").text
    assert count == f"3 of {len(LSTM) * 3} rows"


def test_run_pages_are_built_from_the_store_never_copied(site, browser):
    folder, _, root = site
    pages = sorted((folder / "runs").glob("*.html"))
    assert len(pages) == 6
    report = root / "night-0" / "report.html"
    assert report.exists()  # the run reported on this machine: its report is not published
    assert not any(p.read_bytes() == report.read_bytes() for p in pages)
    for page in pages:
        assert browser.open(page) == [], page
        assert "Its rows in the store" in browser.driver.page_source
    browser.screenshot("dashboard-run-rows")


def test_the_site_needs_no_network(site):
    folder, _, _ = site
    for page in folder.rglob("*.html"):
        page_text = page.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page_text), page
    script = (folder / "assets" / "chart.umd.min.js").read_bytes()
    assert hashlib.sha256(script).hexdigest() == vendor.SCRIPT_SHA256


def test_the_vendored_chart_library_is_the_pinned_one():
    assert hashlib.sha256(vendor.VENDORED.read_bytes()).hexdigest() == vendor.SCRIPT_SHA256


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "registry" / "chart.js" / "-" / f"chart.js-{vendor.VERSION}.tgz"
    fake.parent.mkdir(parents=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"alert('not chart.js')"
        member = tarfile.TarInfo(vendor.MEMBER)
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    fake.write_bytes(buffer.getvalue())
    monkeypatch.setenv("npm_config_registry", f"file://{tmp_path / 'registry'}")
    with pytest.raises(vendor.VendorError, match=r"is not the pinned chart\.js"):
        vendor.fetch(tmp_path / "out.js")
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9")
    with pytest.raises(vendor.VendorError, match="cannot fetch"):
        vendor.fetch(tmp_path / "out.js", timeout_s=5)
    assert not (tmp_path / "out.js").exists()


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("x")
    url = f"sqlite:///{tmp_path / 's.db'}"
    ResultsDB.open(parse_url(url)).close()
    for args in (["-o", str(tmp_path / "a-file" / "site"), "--db", url],
                 ["-o", str(tmp_path / "site"), "--db", "postgresql://u:pw-s3cret@127.0.0.1:9/x"],
                 ["-o", str(tmp_path / "site"), "--db", f"sqlite:///{tmp_path / 'none.db'}"]):
        done = run_cli("dashboard", *args, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and "s3cret" not in line, line


def test_an_empty_store_is_a_site_that_says_so(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    ResultsDB.open(parse_url(url)).close()
    done = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    payload = re.search(r'id="page-data" type="application/json">(.*?)</script>',
                        (tmp_path / "site" / "index.html").read_text()).group(1)
    assert json.loads(payload)["tables"][0]["rows"] == []
    assert "holds no result that ended ok yet" in (tmp_path / "site" / "index.html").read_text()


def test_a_killed_builds_leftovers_go_with_the_next_build_and_a_live_ones_stay(tmp_path):
    """A build stopped by SIGKILL or a full disk left `.site.building-PID` (and a swap's
    `.site.earlier-PID`) that no later build removed."""
    import os
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 's.db'}"
    ResultsDB.open(parse_url(url)).close()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = int(ended.stdout)  # a process that has ended
    leftovers = [tmp_path / f".site.{stage}-{dead}" for stage in ("building", "earlier")]
    live = tmp_path / f".site.building-{os.getpid()}"  # a build still running (this test)
    for folder in (*leftovers, live):
        folder.mkdir()
        (folder / "index.html").write_text("half a site")
    done = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not any(folder.exists() for folder in leftovers) and live.is_dir()
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_job_is_answered_on_its_workloads_page_as_advise_answers_it(site, browser):
    _, url, root = site
    job = ["--items", "1e9", "--workload", "lstm_lm", "--deadline", "30d"]
    done = run_cli("dashboard", "-o", str(root / "job-site"), "--db", url, *job, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    advised = run_cli("advise", "--db", url, *job, "--format", "json", cwd=root)
    projections = json.loads(advised.stdout)["projections"]
    assert browser.open(root / "job-site" / "workload-lstm_lm.html") == []
    rows = table_rows(browser, "job")
    assert [r[0] for r in rows] == [p["configuration"] for p in projections]
    assert [r[4] for r in rows] == [f"{p['cost_usd']:,.2f}" for p in projections]
    said = browser.js("return document.querySelector('#your-job ul').textContent;")
    assert "job: 1,000,000,000 tokens of lstm_lm, within 30d" in said
    assert "cheapest within the deadline: " in said
    drawn = browser.js("const img = document.querySelector('#your-job img');"
                       "return img.complete && img.naturalWidth;")
    assert drawn > 0  # the figure, drawn into the site and shown
    assert (root / "job-site" / "plots" / "job.png").is_file()
    browser.screenshot("dashboard-job")
    assert browser.open(root / "job-site" / "workload-gpt_lm.html") == []
    assert browser.js("return document.querySelector('#your-job');") is None  # its page only


def test_a_job_the_store_cannot_answer_is_one_line_and_the_site_stays(site, tmp_path):
    folder, url, _ = site
    before = (folder / "index.html").read_text()
    for args, problem in ((["--items", "10", "--workload", "nope"], "--workload nope"),
                          (["--items", "10", "--deadline", "soon"], "'soon' is not a duration"),
                          (["--budget", "5"], "give its size with --items")):
        done = run_cli("dashboard", "-o", str(folder), "--db", url, *args, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert problem in line, line
    assert (folder / "index.html").read_text() == before


def test_a_workload_page_names_advises_pick_where_the_overviews_top_row_is_another(
        tmp_path, browser):
    """Issue 54: the overview's "fastest in its latest run" is a figure beyond physics and a
    contended run; the best choices, on the overview and first on the workload's page, are
    advise's answer per million items over every run, with its tie, caveats and what it
    left out; a row of a configuration advise left out says so."""
    from tests.test_history_best import BEYOND, advised, trap_store

    url = trap_store(tmp_path)
    done = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    found, _ = advised(url)
    assert found.fastest is not None and found.fastest.label == "v100"
    assert browser.open(tmp_path / "site" / "index.html") == []
    overview = table_rows(browser, "overview")
    assert [r[1] for r in overview[:2]] == ["h100", "a100"]  # not advise's pick
    assert overview[0][6] == f"{BEYOND}; left out of the best choices"
    assert "left out" not in overview[1][6]  # flagged contended, its clean night kept
    picks = [(r[0], r[1], r[2]) for r in table_rows(browser, "choices")]
    assert picks == [("lstm_lm", "fastest", "v100"), ("lstm_lm", "cheapest", "v100"),
                     ("lstm_lm", "left out", "h100")]
    assert browser.open(tmp_path / "site" / "workload-lstm_lm.html") == []
    rows = table_rows(browser, "choices-lstm_lm")
    assert rows[0][1:3] == ["fastest", found.fastest.label]
    assert rows[0][6].split("; ") == [
        "a tie with a10 (within the noise of their repeats)", *found.notes["fastest"]]
    assert rows[2][1:3] == ["left out", "h100"] and rows[2][6] == BEYOND
    first = browser.js("return document.querySelector('main h2').textContent;")
    assert first.startswith("best choices")  # the decision before the charts and rows
    browser.screenshot("dashboard-best-choices")


def test_a_chart_names_a_drawn_rows_flags_as_its_table_marks_them(tmp_path, browser):
    """A contended row is drawn (its figure is possible) but not as a plain bar: its label
    carries its flags, as the workload's table marks the row."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    results = ResultsDB.open(parse_url(url))
    try:
        results.import_run(write_run(
            tmp_path / "run", DAY, {"cpu/torch/32": [90.0, 91.0], "cpu/torch/64": [150.0, 149.0]},
            flags={"cpu/torch/64": "contended"},
            errors={"cpu/torch/64": "contended: other processes held 0.9 of the cores"}))
    finally:
        results.close()
    done = run_cli("dashboard", "-o", str(tmp_path / "site"), "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert browser.open(tmp_path / "site" / "workload-lstm_lm.html") == []
    labels = browser.js("return window.matrixCharts['throughput-lstm_lm'].data.labels;")
    assert len(labels) == 2
    assert sum(label.endswith("[contended]") for label in labels) == 1, labels
    assert any("64" in label and label.endswith("[contended]") for label in labels), labels
    flagged = browser.js("return [...document.querySelectorAll('#rows-lstm_lm tr.flagged')]"
                         ".length;")
    assert flagged == 1
    browser.screenshot("dashboard-flagged-label")
