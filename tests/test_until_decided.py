"""`matrix run --until-decided` (issue 54, item 5): repeats that decide. Once the matrix's
own repeats have ended, only the configurations the answer cannot tell apart (a pick and
its ties) get more repeats, until they separate or the limit is spent; a clear answer adds
none. Real sweeps of the `sleep` workload: its `jitter` is seeded by the repeat, so two
hardware entries of this one machine measure alike repeat by repeat and stay tied."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.conftest import journal, run_cli, write

pytestmark = pytest.mark.slow


def _repeats(run_dir, flagged=False):
    # every repeat run counts, one a loaded machine flagged too (the limit counts it);
    # flagged=True: only those the answer set aside (their cell flagged them)
    cells = [r for r in journal(run_dir) if r.get("record") == "cell" and r["status"] == "ok"
             and (not flagged or r.get("flags"))]
    return Counter((c["hardware"], c["param.steps"]) for c in cells)


def test_only_the_tied_configurations_repeat_until_the_limit(tmp_path):
    write(tmp_path / "m.yaml", """
        name: tied
        hardware: [{name: a-box, kind: local}, {name: b-box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.1, steps: [4, 8], jitter: 1.0}}]
        repeats: 2
        """)
    done = run_cli("run", "m.yaml", "--no-ray", "--db", "none", "--until-decided",
                   "--max-repeats", "4", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    ran, flagged = (_repeats(tmp_path / "reports" / "tied", f) for f in (False, True))
    assert ran[("a-box", 8)] == ran[("b-box", 8)] == 4
    # the 2x slower configurations keep their 2 repeats; one a loaded machine flagged has
    # a single clean repeat left, which no noise can tell from the pick: it runs again
    for slower in (("a-box", 4), ("b-box", 4)):
        assert ran[slower] == 2 or flagged[slower], (ran, flagged)
        assert ran[slower] - flagged[slower] <= 2, (ran, flagged)
    said = " ".join(done.stdout.split())
    assert "until decided: one more repeat of 2 configuration(s): fastest:" in said
    assert "until decided: not decided within 4 repeats (--max-repeats): fastest:" in said
    report = (tmp_path / "reports" / "tied" / "report.md").read_text()
    assert "a tie with" in report.split("## Best choices")[1].split("\n## ")[0]


def test_a_clear_answer_adds_no_repeat_and_a_limit_alone_is_refused(tmp_path):
    write(tmp_path / "m.yaml", """
        name: clear
        hardware: [{name: a-box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.1, steps: [4, 8]}}]
        repeats: 2
        """)
    done = run_cli("run", "m.yaml", "--no-ray", "--db", "none", "--until-decided",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _repeats(tmp_path / "reports" / "clear") == {("a-box", 8): 2, ("a-box", 4): 2}
    assert "until decided: decided" in done.stdout
    refused = run_cli("run", "m.yaml", "--no-ray", "--db", "none", "--max-time", "1h",
                      cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: --max-repeats and --max-time go with --until-decided"]
