"""The peer comparisons (bench/*_vs_*.py) hold both sides to the same recorded threads and
to timed intervals (bench/peer_threads.py, issue 55): one series ran ours on 2 threads and
the peer on 1, and a peer run that logged one interval was read from its start-up interval."""

from __future__ import annotations

import importlib.util
import py_compile
import subprocess
from types import ModuleType

import pytest

from tests.conftest import PROJECT

BENCH = PROJECT / "bench"
PEERS = sorted(BENCH.glob("*_vs_*.py"))


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peer_threads", BENCH / "peer_threads.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer_threads = load()


def test_a_pair_on_other_threads_is_refused():
    assert peer_threads.same_threads(1, 1, 1) == 1
    with pytest.raises(peer_threads.UnfairPair, match="ours computed with 2, the peer with 1"):
        peer_threads.same_threads(2, 1, 1)
    with pytest.raises(peer_threads.UnfairPair):
        peer_threads.same_threads(None, 1, 1)  # a side that did not say


def test_a_peer_with_only_its_start_up_interval_is_refused():
    assert peer_threads.after_warmup([900.0, 100.0, 110.0], 1, "main.py") == [100.0, 110.0]
    with pytest.raises(peer_threads.UnfairPair, match=r"main\.py logged 1 interval"):
        peer_threads.after_warmup([350.0], 1, "main.py")


@pytest.mark.parametrize("threads", [1, 2])
def test_a_peers_script_runs_unmodified_on_the_threads_asked_and_says_so(tmp_path, threads):
    script = tmp_path / "train.py"
    script.write_text("import sys, torch\nprint(torch.get_num_threads(), sys.argv[1:])\n")
    done = subprocess.run(peer_threads.peer_command(script, ["--x=1"], threads),
                          env=peer_threads.thread_environment(threads), capture_output=True,
                          text=True, timeout=120, check=True, cwd=tmp_path)
    assert done.stdout.split("\n")[0] == f"{threads} ['--x=1']"  # its own argv, as run
    assert peer_threads.peer_threads(done.stderr) == threads


def test_every_peer_bench_compiles_and_sets_the_threads_on_both_sides():
    assert {p.name for p in PEERS} == {"gpt_lm_vs_hf.py", "gpt_lm_vs_nanogpt.py",
                                       "lstm_lm_vs_examples.py",
                                       "transformer_ft_vs_trainer.py"}
    for path in PEERS:
        py_compile.compile(str(path), doraise=True)
        text = path.read_text()
        assert "same_threads(" in text and "thread_environment(" in text, path.name
        assert '"--threads"' in text, path.name
