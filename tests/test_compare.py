"""`matrix compare`: a known 20% regression among noisy unchanged configurations is found,
and only it; too few samples are shown but never marked; a run compared with itself is
unchanged; the exit code says whether a regression was marked."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.compare import MIN_SAMPLES, Verdict, compare_runs, verdict
from orchestrator.results import ResultStore
from tests.conftest import run_cli
from tests.test_report import add_cell

NOISE = 0.015  # the run-to-run spread of the repo's real CPU runs is 1-4% (docs/PERFORMANCE.md)


def make_run(root, factors: dict[str, float], seed: int) -> ResultStore:
    """Configs a, b, c: 3 repeats x 2 epochs around 1000 items/s x factor; d: 2 samples."""
    rng = np.random.default_rng(seed)
    store = ResultStore(root)
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
    found = {c.config_id: c for c in compare_runs(base.frame(), new.frame())}
    assert found["a"].verdict == Verdict.REGRESSION
    assert found["a"].ratio == pytest.approx(0.8, abs=0.03)
    assert found["a"].low < found["a"].ratio < found["a"].high < 1
    assert found["b"].verdict == found["c"].verdict == Verdict.UNCHANGED
    assert found["b"].low < 1 < found["b"].high or abs(found["b"].ratio - 1) < 0.05
    # two samples a side: the 20% drop is shown, not marked
    assert found["d"].verdict == Verdict.THIN and found["d"].ratio == pytest.approx(0.8)


def test_a_run_compared_with_itself_marks_nothing(runs):
    base, _ = runs
    found = compare_runs(base.frame(), base.frame())
    assert {c.verdict for c in found} <= {Verdict.UNCHANGED, Verdict.THIN}
    assert all(c.ratio == 1 and c.low <= 1 <= c.high for c in found)


def test_the_rule_needs_both_the_threshold_and_an_interval_that_excludes_one():
    assert verdict(0.90, 0.85, 0.95, 0.05, True) == Verdict.REGRESSION
    assert verdict(0.90, 0.80, 1.02, 0.05, True) == Verdict.UNCHANGED  # interval holds 1
    assert verdict(0.97, 0.96, 0.98, 0.05, True) == Verdict.UNCHANGED  # within the threshold
    assert verdict(1.10, 1.05, 1.15, 0.05, True) == Verdict.IMPROVEMENT
    assert verdict(0.50, 0.40, 0.60, 0.05, False) == Verdict.THIN
    assert MIN_SAMPLES == 5


def test_the_exit_code_says_whether_a_regression_was_marked(runs, tmp_path):
    base, new = runs
    regressed = run_cli("compare", str(base.root), str(new.root), cwd=tmp_path)
    assert regressed.returncode == 1, regressed.stderr
    assert "1 regression" in regressed.stdout and "1 too few samples" in regressed.stdout
    same = run_cli("compare", str(base.root), str(base.root), cwd=tmp_path)
    assert same.returncode == 0 and "0 regression" in same.stdout
    missing = run_cli("compare", str(tmp_path / "nowhere"), str(base.root), cwd=tmp_path)
    assert missing.returncode == 2 and "not a run directory" in missing.stderr
