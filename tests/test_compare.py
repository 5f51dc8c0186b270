"""`matrix compare`: a known 20% regression among noisy unchanged configurations is found,
and only it; repeats, not epochs, are the samples; too few repeats are shown but never
concluded; a wide interval is inconclusive, never "no change"; a run compared with itself
is equivalent; the exit code says whether a regression was marked."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.report.compare import MIN_REPEATS, Verdict, compare_runs, verdict
from orchestrator.report.frame import run_frame
from orchestrator.results.run_directory import RunDirectory
from tests.conftest import run_cli
from tests.test_report import add_cell

NOISE = 0.015  # the run-to-run spread of the repo's real CPU runs is 1-4% (docs/PERFORMANCE.md)


def make_run(root, factors: dict[str, float], seed: int) -> RunDirectory:
    """Configs a, b, c: 3 repeats x 2 epochs around 1000 items/s x factor; d: 2 samples."""
    rng = np.random.default_rng(seed)
    store = RunDirectory(root)
    store.root.mkdir(parents=True)
    for config, batch in (("a", 16), ("b", 32), ("c", 64)):
        for repeat in (1, 2, 3):
            rates = (1000 * factors.get(config, 1.0) * (1 + rng.normal(0, NOISE, 2))).tolist()
            add_cell(store, f"{config}{repeat}", config, "lstm_lm", rates,
                     {"batch_size": batch}, repeat=repeat)
    add_cell(store, "d1", "d", "lstm_lm", [1000 * factors.get("d", 1.0)] * 2,
             {"batch_size": 128})
    return store


@pytest.fixture
def runs(tmp_path):
    base = make_run(tmp_path / "base", {}, seed=1)
    new = make_run(tmp_path / "new", {"a": 0.8, "d": 0.8}, seed=2)
    return base, new


def test_the_known_regression_is_found_and_only_it(runs):
    base, new = runs
    found = {c.config_id: c for c in compare_runs(run_frame(base), run_frame(new))}
    assert found["a"].verdict == Verdict.REGRESSION
    assert found["a"].ratio == pytest.approx(0.8, abs=0.03)
    assert found["a"].low < found["a"].ratio < found["a"].high < 1
    assert found["b"].verdict == found["c"].verdict == Verdict.EQUIVALENT
    assert 0.95 <= found["b"].low <= found["b"].high <= 1.05
    assert found["a"].base_repeats == found["a"].new_repeats == 3
    # one repeat a side: the 20% drop is shown, not concluded
    assert found["d"].verdict == Verdict.THIN and found["d"].ratio == pytest.approx(0.8)


def test_a_run_compared_with_itself_marks_nothing(runs):
    base, _ = runs
    found = compare_runs(run_frame(base), run_frame(base))
    assert {c.verdict for c in found} == {Verdict.EQUIVALENT, Verdict.THIN}
    assert all(c.ratio == 1 and c.low <= 1 <= c.high for c in found)


def test_the_rule_needs_both_the_threshold_and_an_interval_that_excludes_one():
    assert verdict(0.90, 0.85, 0.95, 0.05, True) == Verdict.REGRESSION
    assert verdict(0.90, 0.80, 1.02, 0.05, True) == Verdict.INCONCLUSIVE  # interval holds 1
    assert verdict(0.800, 0.47, 1.36, 0.05, True) == Verdict.INCONCLUSIVE  # never "no change"
    assert verdict(0.97, 0.96, 0.98, 0.05, True) == Verdict.EQUIVALENT  # all within 5%
    assert verdict(0.97, 0.93, 0.99, 0.05, True) == Verdict.INCONCLUSIVE  # reaches past it
    assert verdict(1.10, 1.05, 1.15, 0.05, True) == Verdict.IMPROVEMENT
    assert verdict(0.50, 0.40, 0.60, 0.05, False) == Verdict.THIN
    assert MIN_REPEATS == 3


def spread_runs(root, repeats: int, spread: float, epochs: int = 20):
    """BASE around 1000 items/s and NEW 20% slower, `repeats` repeats whose medians spread
    by `spread` about their centre, each with `epochs` tightly clustered epochs (the
    epochs of one process agree with each other far better than repeats do)."""
    runs = []
    for name, centre in (("base", 1000.0), ("new", 800.0)):
        store = RunDirectory(root / name)
        store.root.mkdir(parents=True)
        for repeat in range(1, repeats + 1):
            level = centre * (1 + spread * np.linspace(-1, 1, repeats)[repeat - 1])
            rates = (level * (1 + 0.001 * np.linspace(-1, 1, epochs))).tolist()
            add_cell(store, f"x{repeat}", "x", "lstm_lm", rates, {"batch_size": 16},
                     repeat=repeat)
        runs.append(store)
    return runs


def test_a_20_percent_drop_with_a_wide_spread_over_few_repeats_is_inconclusive(tmp_path):
    base, new = spread_runs(tmp_path, repeats=3, spread=0.4)
    (found,) = compare_runs(run_frame(base), run_frame(new))
    assert found.ratio == pytest.approx(0.8)
    assert found.low < 0.95 and found.high > 1  # 60 epochs a side would have looked certain
    assert found.verdict == Verdict.INCONCLUSIVE


def test_the_same_drop_with_more_repeats_and_a_small_spread_is_a_regression(tmp_path):
    base, new = spread_runs(tmp_path, repeats=8, spread=0.02)
    (found,) = compare_runs(run_frame(base), run_frame(new))
    assert found.ratio == pytest.approx(0.8)
    assert found.high < 0.85 and found.verdict == Verdict.REGRESSION


def test_identical_runs_are_equivalent(tmp_path):
    base, _ = spread_runs(tmp_path, repeats=4, spread=0.02)
    (found,) = compare_runs(run_frame(base), run_frame(base))
    assert found.verdict == Verdict.EQUIVALENT and found.ratio == 1


def test_the_exit_code_says_whether_a_regression_was_marked(runs, tmp_path):
    base, new = runs
    regressed = run_cli("compare", str(base.root), str(new.root), cwd=tmp_path)
    assert regressed.returncode == 1, regressed.stderr
    assert "1 regression" in regressed.stdout and "1 too few repeats" in regressed.stdout
    same = run_cli("compare", str(base.root), str(base.root), cwd=tmp_path)
    assert same.returncode == 0 and "0 regression" in same.stdout
    assert "3 equivalent" in same.stdout
    narrow = run_cli("compare", str(base.root), str(new.root), cwd=tmp_path,
                     env={"COLUMNS": "80"})
    rows = [line for line in narrow.stdout.splitlines() if "/" in line and "." in line]
    assert "…" not in narrow.stdout and rows and max(map(len, rows)) <= 80
    assert any("regression" in row and "3/3" in row for row in rows)
    missing = run_cli("compare", str(tmp_path / "nowhere"), str(base.root), cwd=tmp_path)
    assert missing.returncode == 2 and "not a run directory" in missing.stderr


def test_the_widest_rows_still_fit_80_columns():
    """Rates in the millions, ten repeats a side, shares above the ceiling on both sides and
    the longest verdict: the configuration folds and the verdict wraps, nothing is cut."""
    import io

    import pandas as pd
    from rich.console import Console

    from orchestrator.cli.compare_view import show_comparison
    from orchestrator.report.compare import Comparison

    wide = [Comparison(config_id=f"c{i}", label="lstm_lm box/here batch_size=16 hidden=1024",
                       base_repeats=10, new_repeats=10, base_median=1_234_567.0,
                       new_median=2_345_678.0, ratio=1.9, low=1.812, high=1.987,
                       verdict=verdict_, base_ceiling=12.0, new_ceiling=99.0)
            for i, verdict_ in enumerate(Verdict)]
    out = io.StringIO()
    show_comparison(wide, pd.DataFrame(), pd.DataFrame(), 0.05,  # as the CLI's console
                    Console(file=out, width=80, color_system=None, soft_wrap=True))
    text = out.getvalue()
    assert max(map(len, text.splitlines())) <= 80, text
    assert "1,234,567" in text and "2,345,678" in text and ">999%/>999%" in text
    assert "1.812-1.987" in text and " verdict" in text
    assert all(v.value.split()[0] in text for v in Verdict) and "repeats" in text
