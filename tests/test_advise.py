"""`matrix advise` (issue 45, first part): a job of N items projected onto every measured
configuration. A run of known figures, answered by hand below; and a real CPU run of two
priced local hardware entries."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from orchestrator.cli.runs import local_run
from orchestrator.report import advise_text
from orchestrator.report.advise import Job, advise, duration_s
from orchestrator.report.frame import run_frame
from orchestrator.report.markdown import money
from orchestrator.results.run_directory import RunDirectory
from tests.conftest import MACHINE_REASONS, run_cli, write
from tests.report_fixtures import cell

JOB = 360_000  # samples: one hour at 100 samples/s


@pytest.fixture
def known_run(tmp_path):
    """A: 100 samples/s in each of 3 repeats at $1/h; B: 380, 400, 420 at $10/h, 2 J per
    sample on its GPU counters; C: flagged; D: 2 repeats only, at $1/h."""
    store = RunDirectory(tmp_path / "known")
    store.root.mkdir(parents=True)
    for repeat, rate in enumerate([100.0, 100.0, 100.0], start=1):
        cell(store, f"a{repeat}", "a", "sleep", "slow-cheap", {}, [rate], repeat=repeat,
             price=1.0)
    for repeat, rate in enumerate([380.0, 400.0, 420.0], start=1):
        cell(store, f"b{repeat}", "b", "sleep", "fast-dear", {}, [rate], repeat=repeat,
             price=10.0, extra={"gpu_energy_j": 2000.0})  # 1,000 samples per epoch
    cell(store, "c1", "c", "sleep", "hot-box", {}, [9000.0], price=1.0, flags=["throttled"],
         error="throttled: the GPU slowed down (thermal)")
    for repeat in (1, 2):
        cell(store, f"d{repeat}", "d", "sleep", "pair-box", {}, [50.0], repeat=repeat, price=1.0)
    return store.root


def answer(run, **job):
    return advise(run_frame(local_run(str(run), None)), Job(items=JOB, **job))


def test_each_configuration_gets_the_jobs_time_cost_and_energy(known_run):
    found = answer(known_run, grid_g_per_kwh=500)
    by = {p.label.split()[0]: p for p in found.projections}
    assert set(by) == {"slow-cheap", "fast-dear", "pair-box"}  # hot-box is left out
    a, b, d = by["slow-cheap"], by["fast-dear"], by["pair-box"]
    assert a.time_s == pytest.approx(3600) and a.cost_usd == pytest.approx(1.0)
    assert a.time_range_s == pytest.approx((3600, 3600))  # identical repeats: no spread
    assert b.time_s == pytest.approx(900) and b.cost_usd == pytest.approx(2.5)
    low, high = b.time_range_s  # a 95% t-interval over 3 repeats: wider than min to max
    logs = [math.log(r) for r in (380.0, 400.0, 420.0)]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = 4.303 * sd / math.sqrt(3)  # t(0.975, 2 df)
    assert low == pytest.approx(JOB / math.exp(mean + half))
    assert high == pytest.approx(JOB / math.exp(mean - half))
    assert low < JOB / 420 and high > JOB / 380  # the old min-max range held ~75%
    assert b.energy_kwh == pytest.approx(2 * JOB / 3.6e6) and b.co2_kg == pytest.approx(0.1)
    assert a.energy_kwh is None  # not measured: never a guess
    assert d.time_range_s is None and d.repeats == 2  # too few repeats for an interval
    assert [p.label.split()[0] for p in found.projections] == [
        "fast-dear", "slow-cheap", "pair-box"]  # fastest first
    assert found.left_out == {"hot-box": "throttled: the GPU slowed down (thermal)"}
    assert found.fastest is b and found.cheapest is a
    assert "front" in a.marks and "front" in b.marks and "front" not in d.marks


def test_a_deadline_and_a_budget_change_the_picks(known_run):
    within_budget = answer(known_run, budget_usd=2.0)
    assert within_budget.fastest.label.startswith("slow-cheap")  # fast-dear costs $2.50
    within_deadline = answer(known_run, deadline_s=duration_s("30m"))
    assert within_deadline.cheapest.label.startswith("fast-dear")  # slow-cheap takes 1 h
    nothing = answer(known_run, deadline_s=60.0)
    assert nothing.cheapest is None


def test_the_command_prints_within_80_columns_and_json_for_scripts(known_run, tmp_path):
    done = run_cli("advise", str(known_run), "--items", str(JOB), "--deadline", "30m",
                   cwd=tmp_path, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    assert "cheapest within the deadline: fast-dear" in done.stdout
    assert "left out: hot-box: throttled" in done.stdout
    assert "none: 2 repeats: no interval" in done.stdout  # pair-box
    data = run_cli("advise", str(known_run), "--items", str(JOB), "--format", "json",
                   cwd=tmp_path)
    answer_json = json.loads(data.stdout)
    rows = {r["configuration"].split()[0]: r for r in answer_json["projections"]}
    assert answer_json["job"]["items"] == JOB and answer_json["job"]["item_unit"] == "sample"
    assert answer_json["picks"]["fastest"]["configuration"].startswith("fast-dear")
    assert answer_json["picks"]["cheapest"]["configuration"].startswith("slow-cheap")
    assert answer_json["left_out"] == {"hot-box": "throttled: the GPU slowed down (thermal)"}
    assert rows["fast-dear"]["cost_usd"] == pytest.approx(2.5)
    assert rows["slow-cheap"]["marks"] == "cheapest,front"
    for args, problem in ((["--deadline", "soon"], "--deadline 'soon' is not a duration"),
                          (["--workload", "lstm_lm"], "--workload lstm_lm: the runs measured "
                                                      "none of it")):
        refused = run_cli("advise", str(known_run), "--items", "10", *args, cwd=tmp_path)
        assert refused.returncode == 2
        (line,) = refused.stderr.strip().splitlines()
        assert problem in line, line


def test_a_run_whose_every_configuration_is_flagged_gets_a_best_guess_with_its_caveat(
        tmp_path):
    store = RunDirectory(tmp_path / "crowded")
    store.root.mkdir(parents=True)
    reason = ("contended: in epoch 1, 0.99 of its threads on average waited for a CPU while "
              "other processes used 0.99 cores of the CPUs it ran on")
    cell(store, "e1", "e", "sleep", "busy-box", {}, [100.0], flags=["contended"], error=reason)
    cell(store, "i1", "i", "sleep", "liar-box", {}, [9e9], flags=["implausible"],
         error="implausible: 9e9 samples/s")
    done = run_cli("advise", str(store.root), "--items", str(JOB), cwd=tmp_path,
                   env={"COLUMNS": "200"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "best guess: every configuration was flagged (contended" in done.stdout
    assert "run again on a quiet machine" in done.stdout
    assert "fastest: busy-box, 1 h" in done.stdout  # the guess, its flags beside it
    assert "its repeats are flagged contended" in done.stdout
    assert "left out: liar-box: implausible" in done.stdout  # never even a guess
    data = json.loads(run_cli("advise", str(store.root), "--items", str(JOB), "--format",
                              "json", cwd=tmp_path).stdout)
    assert data["best_guess"].startswith("every configuration was flagged (contended")
    assert [p["configuration"] for p in data["projections"]] == ["busy-box"]
    assert data["projections"][0]["flags"] == "contended"
    assert data["left_out"] == {"liar-box": "implausible: 9e9 samples/s"}
    # asked for: the flags beside every figure, and no guess to caveat
    flagged = json.loads(run_cli("advise", str(store.root), "--items", str(JOB),
                                 "--include-flagged", "--format", "json", cwd=tmp_path).stdout)
    assert flagged["best_guess"] is None and flagged["job"]["include_flagged"] is True
    assert flagged["picks"]["fastest"]["configuration"] == "busy-box"


@pytest.mark.slow
def test_a_real_run_of_two_priced_machines_is_advised(tmp_path):
    matrix = write(tmp_path / "m.yaml", """
        name: priced
        hardware:
          - {name: cheap-box, kind: local, price_per_hour: 0.5}
          - {name: dear-box, kind: local, price_per_hour: 4.0}
        stacks: [{name: here, executor: process}]
        workloads: [{name: sleep, params: {seconds: 0.2, steps: 4}}]
        repeats: 3
        job: {items: 360000, deadline: 90d, budget: 1000}
        """)
    done = run_cli("run", str(matrix), "--no-ray", "--db", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "priced"
    found = answer(run_dir)
    cheap, dear = sorted(found.projections, key=lambda p: p.usd_per_hour or 0)
    # a repeat the loaded machine flagged (contended) is dropped, and said so; none other
    assert cheap.label.startswith("cheap-box") and cheap.repeats >= 2
    assert all(why.split(": ", 1)[1].startswith(MACHINE_REASONS)
               for why in found.dropped.values()), found.dropped
    # the same machine under two prices: the same time, costs in the ratio of the prices
    assert cheap.time_s == pytest.approx(dear.time_s, rel=0.2)
    assert cheap.cost_usd / cheap.time_s == pytest.approx(0.5 / 3600)
    assert found.cheapest is cheap
    assert (cheap.time_range_s is not None) == (cheap.repeats >= 3)
    assert_the_report_answers_the_job(run_dir, tmp_path)


def assert_the_report_answers_the_job(run_dir, tmp_path):
    """The matrix's job answered in report.md and report.html as `matrix advise` answers it,
    with the figure drawn from the same answer; again by `matrix report` in a new process."""
    from orchestrator.report.job_section import answer_job
    from orchestrator.report.plots import job_figure
    from orchestrator.spec.job import load_job

    job = load_job(run_dir)
    assert job is not None and job.items == 360000 and job.deadline == "90d"
    advised = run_cli("advise", str(run_dir), "--items", "360000", "--deadline", "90d",
                      "--budget", "1000", "--format", "json", cwd=tmp_path)
    projections = json.loads(advised.stdout)["projections"]
    for again in (False, True):
        if again:
            assert run_cli("report", str(run_dir), cwd=tmp_path).returncode == 0
        report = (run_dir / "report.md").read_text()
        section = report.split("## Your job", 1)[1].split("\n## ", 1)[0]
        assert "360,000 samples of sleep, within 90d and at most $1,000.00" in section
        for row in projections:  # each configuration's cost, as advise gives it
            line = next(text for text in section.splitlines() if text.startswith(
                f"| {row['configuration']} |"))
            assert f"| {money(row['cost_usd'])} |" in line
        assert "cheapest within the deadline: cheap-box" in section
        assert "![time to train against cost](plots/job.png)" in section
        assert "Your job" in (run_dir / "report.html").read_text()
    drawn = job_figure(answer_job(run_frame(local_run(str(run_dir), None)), job))
    points = sorted((round(line.get_xdata()[0], 6), round(line.get_ydata()[0], 6))
                    for line in drawn.axes[0].lines if line.get_marker() == "o")
    assert points == sorted((round(r["time_s"] / 3600, 6), round(r["cost_usd"], 6))
                            for r in projections)


@pytest.fixture
def factorial_run(tmp_path):
    """Hardware x stack x precision, three identical repeats each: the GPU box is 10x the
    CPU box in fp32 and 20x in bf16 (bf16 doubles the GPU, does nothing on the CPU); the
    stack `new` (torch 2.7.1) is 0.9x `old` (torch 2.6.0) everywhere. And one flagged
    configuration whose figure would pair, left out."""
    store = RunDirectory(tmp_path / "factorial")
    store.root.mkdir(parents=True)
    base = {("cpu-box", "fp32"): 100.0, ("cpu-box", "bf16"): 100.0,
            ("gpu-box", "fp32"): 1000.0, ("gpu-box", "bf16"): 2000.0}
    for (hardware, precision), rate in base.items():
        for stack, factor, version in (("old", 1.0, "2.6.0"), ("new", 0.9, "2.7.1")):
            config = f"{hardware}-{stack}-{precision}"
            for repeat in (1, 2, 3):
                cell(store, f"{config}-{repeat}", config, "sleep", hardware,
                     {"precision": precision}, [rate * factor], repeat=repeat, stack=stack,
                     pins={"framework_version": version})
    cell(store, "odd-1", "odd", "sleep", "odd-box", {"precision": "fp32"}, [1e6],
         stack="old", flags=["throttled"], error="throttled: thermal")
    return store.root


def test_explain_gives_each_factors_effect_over_matched_pairs(factorial_run):
    from orchestrator.report.explain import explain

    found = explain(run_frame(local_run(str(factorial_run), None)))
    workload, effects = found.workload, found.effects
    assert workload == "sleep"
    hardware, precision, stack = effects  # largest effect first
    assert (hardware.factor, hardware.base, hardware.other) == ("hardware", "cpu-box",
                                                                 "gpu-box")
    assert hardware.ratio == pytest.approx(15) and hardware.pairs == 4  # 10, 20, 10, 20
    assert 10 - 1e-9 <= hardware.low <= hardware.high <= 20 + 1e-9
    assert hardware.by_factor == "precision" and dict(hardware.by_level) == pytest.approx(
        {"bf16": 20.0, "fp32": 10.0})
    assert (precision.base, precision.other) == ("bf16", "fp32")
    assert dict(precision.by_level) == pytest.approx({"cpu-box": 1.0, "gpu-box": 0.5})
    assert (stack.base, stack.other) == ("new", "old")
    assert stack.ratio == pytest.approx(1 / 0.9) and stack.low == pytest.approx(1 / 0.9)
    assert stack.detail == "torch 2.7.1 -> 2.6.0" and stack.by_level == ()


def test_explain_prints_one_line_per_change_of_level(factorial_run, tmp_path):
    done = run_cli("explain", str(factorial_run), cwd=tmp_path, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = " ".join(done.stdout.split())
    assert "hardware cpu-box -> gpu-box: x15.0 [" in text and "over 4 pair(s)" in text
    assert "depends on precision: x20.0 on bf16, x10.0 on fp32" in text
    assert "stack new -> old (torch 2.7.1 -> 2.6.0): x1.11" in text
    # the flagged configuration pairs with nothing, and is listed as left out, with why
    assert [line for line in lines if "odd-box" in line] == [
        "left out: odd-box/old precision=fp32: throttled: thermal"]


def test_the_report_gives_joules_per_item_where_the_gpus_counted_them(known_run, tmp_path):
    done = run_cli("report", str(known_run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = (known_run / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| hardware"))
    column = [c.strip() for c in header.split("|")].index("J/sample")
    rows = {cells[1]: cells[column] for line in report.splitlines()
            if (cells := [c.strip() for c in line.split("|")]) and len(cells) > column
            and cells[1] in ("fast-dear", "slow-cheap")}
    assert rows == {"fast-dear": "2", "slow-cheap": ""}  # 2,000 J over 1,000 samples; a CPU


def test_history_regressions_names_what_changed_between_the_runs(tmp_path):
    """Two runs of one configuration on a GPU box: the second slower, on another torch and
    driver and fewer CPU threads. `matrix history regressions` says so beside its verdict."""
    for name, day, rates, version, driver, threads in (
            ("before", "2026-11-20", [1000.0, 1010.0, 990.0], "2.13.0", "570.86", 4),
            ("after", "2026-11-21", [700.0, 710.0, 690.0], "2.14.0", "580.65", 1)):
        store = RunDirectory(tmp_path / name)
        store.root.mkdir(parents=True)
        for repeat, rate in enumerate(rates, start=1):
            cell(store, f"{name}-{repeat}", "cfg", "sleep", "gpu-box", {}, [rate],
                 repeat=repeat, gpus=1, pins={"framework_version": version, "driver": driver,
                                              "cpu_threads": threads},
                 started_at=f"{day}T00:00:0{repeat}+00:00")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    imported = run_cli("db", "import", str(tmp_path / "before"), str(tmp_path / "after"),
                       "--db", url, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    done = run_cli("history", "regressions", "--db", url, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr  # a regression: exit code 1
    assert "changed: sleep gpu-box/here: torch 2.13.0 -> 2.14.0, driver 570.86 -> 580.65, " \
        "CPU threads 4 -> 1" in done.stdout
    data = run_cli("history", "regressions", "--db", url, "--format", "json", cwd=tmp_path)
    (row,) = json.loads(data.stdout)
    assert row["verdict"] == "regression" and row["changes"] == [
        "torch 2.13.0 -> 2.14.0", "driver 570.86 -> 580.65", "CPU threads 4 -> 1"]


def test_advise_and_explain_read_every_run_in_the_store(known_run, factorial_run, tmp_path):
    """With no run named, the results store is the source: its repeats across runs, judged
    as history judges them; the same answers as from the run directories."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    imported = run_cli("db", "import", str(known_run), str(factorial_run), "--db", url,
                       cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    done = run_cli("advise", "--items", str(JOB), "--workload", "sleep", "--db", url,
                   "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {r["configuration"]: r for r in json.loads(done.stdout)["projections"]}
    slow = next(r for label, r in rows.items() if label.startswith("slow-cheap"))
    assert slow["time_s"] == pytest.approx(3600) and slow["cost_usd"] == pytest.approx(1.0)
    fast = next(r for label, r in rows.items() if label.startswith("fast-dear"))
    assert fast["energy_kwh"] == pytest.approx(0.2) and fast["repeats"] == 3
    assert not any(label.startswith(("hot-box", "odd-box")) for label in rows)  # flagged
    explained = run_cli("explain", "--db", url, "--json", cwd=tmp_path)
    effects = json.loads(explained.stdout)["effects"]
    hardware = next(e for e in effects if (e["base"], e["other"]) == ("cpu-box", "gpu-box"))
    assert hardware["ratio"] == pytest.approx(15) and hardware["pairs"] == 4
    both = run_cli("advise", str(known_run), "--items", "10", "--db", url, cwd=tmp_path)
    assert both.returncode == 2 and "give run directories or --db, not both" in both.stderr


def test_the_figure_draws_each_priced_configuration_and_the_front(known_run, tmp_path):
    from orchestrator.report.plots import job_figure

    found = answer(known_run, deadline_s=7200.0, budget_usd=2.0)
    axes = job_figure(found).axes[0]
    (front,) = [line for line in axes.get_lines() if line.get_label() == "Pareto front"]
    assert list(front.get_xdata()) == pytest.approx([0.25, 1.0])  # fast-dear, slow-cheap
    assert list(front.get_ydata()) == pytest.approx([2.5, 1.0])
    points = sorted(text.get_text() for text in axes.texts)
    assert [p.split()[0] for p in points] == ["fast-dear", "pair-box", "slow-cheap"]
    assert "360,000 samples" in axes.get_title()  # the job, in the title
    drawn = run_cli("advise", str(known_run), "--items", str(JOB), "--figure",
                    str(tmp_path / "job.png"), cwd=tmp_path)
    assert drawn.returncode == 0 and (tmp_path / "job.png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture
def scaling_run(tmp_path):
    """One configuration at 1, 2 and 4 of the 8 GPUs of a p4d.24xlarge bought whole at
    $32.77/h: 1,000, 1,900 and 3,500 samples/s, three repeats each: a serial fraction of
    about 0.05."""
    store = RunDirectory(tmp_path / "scaling")
    store.root.mkdir(parents=True)
    for gpus, rate in ((1, 1000.0), (2, 1900.0), (4, 3500.0)):
        for repeat in (1, 2, 3):
            cell(store, f"g{gpus}-{repeat}", f"g{gpus}", "sleep", f"a100x{gpus}", {}, [rate],
                 repeat=repeat, gpus=gpus, price=32.77)
    return store.root


def test_a_deadline_beyond_the_measured_counts_is_met_by_a_projected_one(scaling_run):
    from orchestrator.report.projection import serial_fraction

    s, one = serial_fraction([1, 2, 4], [1000.0, 1900.0, 3500.0])
    assert 0.04 < s < 0.07 and one == pytest.approx(1000, rel=0.03)
    # 3,600,000 samples: 4 GPUs take 1,029 s; a 900 s deadline needs more
    found = advise(run_frame(local_run(str(scaling_run), None)),
                   Job(items=3_600_000, deadline_s=900.0))
    (projected,) = [p for p in found.projections if "projected" in p.marks]
    devices = int(projected.label.split(" at ")[1].split()[0])
    rate = one * devices / (1 + s * (devices - 1))
    assert 4 < devices <= 8 and projected.time_s <= 900  # never past twice the largest
    assert projected.items_per_s == pytest.approx(rate) and projected.time_range_s is None
    assert projected.usd_per_hour == pytest.approx(32.77)  # the whole machine, as bought
    fewer = one * (devices - 1) / (1 + s * (devices - 2))
    assert 3_600_000 / fewer > 900  # the smallest count that meets it
    assert advise(run_frame(local_run(str(scaling_run), None)),
                  Job(items=3_600_000, deadline_s=100.0)).projections[0].repeats == 3


@pytest.mark.slow
def test_spot_prices_come_from_ec2s_price_history_with_the_rework_allowed_for(
        moto_server, tmp_path):
    """--spot against moto in server mode (a real endpoint): an EC2 row is priced at its
    instance type's spot price from the price history, and the interruptions the user
    expects lengthen the job by the work they throw away."""
    import boto3

    from orchestrator.providers.aws.pricing import spot_price

    store = RunDirectory(tmp_path / "ec2")
    store.root.mkdir(parents=True)
    for repeat in (1, 2, 3):  # instance_type p4d.24xlarge, on-demand $10/h as recorded
        cell(store, f"p{repeat}", "p", "sleep", "p4d", {}, [100.0], repeat=repeat, price=10.0)
    expected = spot_price(boto3.client("ec2", region_name="us-east-1"), "p4d.24xlarge")
    assert expected is not None  # what EC2 (moto) holds for the type
    env = {"HOME": str(tmp_path)}  # an empty price cache: the history answers
    args = ["advise", str(store.root), "--items", str(JOB), "--format", "json"]
    on_demand = json.loads(run_cli(*args, cwd=tmp_path, env=env).stdout)["projections"][0]
    assert on_demand["usd_per_hour"] == 10.0 and on_demand["time_s"] == pytest.approx(3600)
    done = run_cli(*args, "--spot", "--interruptions-per-day", "4", "--checkpoint-every",
                   "1h", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    (spot,) = json.loads(done.stdout)["projections"]
    assert spot["usd_per_hour"] == pytest.approx(expected.usd_per_hour)
    assert spot["price_source"].startswith("spot-price-history")
    factor = 1 / (1 - 4 * 3600 / 2 / 86400)  # 4 a day, each losing half an hour
    assert spot["time_s"] == pytest.approx(3600 * factor)
    assert spot["cost_usd"] == pytest.approx(3600 * factor / 3600 * expected.usd_per_hour)
    table = run_cli("advise", str(store.root), "--items", str(JOB), "--spot",
                    "--interruptions-per-day", "4", "--checkpoint-every", "1h",
                    cwd=tmp_path, env=env)
    assert "9.1% more time for 4 interruptions a day" in " ".join(table.stdout.split())
    half = run_cli("advise", str(store.root), "--items", "10", "--interruptions-per-day", "4",
                   cwd=tmp_path, env=env)
    assert half.returncode == 2 and "go together, with --spot" in half.stderr


def test_recorded_start_up_is_paid_once_and_said_where_none_was_recorded(tmp_path):
    """E waited 600, 620 and 640 s in a Slurm queue on a cluster that took 300 s to boot:
    its job takes the median start-up (620 + 300 s) on top of the hour of work; F recorded
    none, and counts 0, said so."""
    store = RunDirectory(tmp_path / "startup")
    store.root.mkdir(parents=True)
    for repeat, queued in enumerate([600.0, 620.0, 640.0], start=1):
        cell(store, f"e{repeat}", "e", "sleep", "queued-box", {}, [100.0], repeat=repeat,
             price=1.0, cell_fields={"queued_s": queued, "provision_s": 300.0})
        cell(store, f"f{repeat}", "f", "sleep", "local-box", {}, [100.0], repeat=repeat,
             price=1.0)
    found = answer(store.root)
    by = {p.label.split()[0]: p for p in found.projections}
    assert by["queued-box"].startup_s == pytest.approx(920)
    assert by["queued-box"].time_s == pytest.approx(3600 + 920)
    assert by["queued-box"].time_range_s == pytest.approx((4520, 4520))
    assert by["queued-box"].cost_usd == pytest.approx(4520 / 3600)  # the wait is paid for
    assert by["local-box"].startup_s is None and by["local-box"].time_s == pytest.approx(3600)
    done = run_cli("advise", str(store.root), "--items", str(JOB), "--format", "json",
                   cwd=tmp_path)
    rows = {r["configuration"].split()[0]: r for r in json.loads(done.stdout)["projections"]}
    assert rows["queued-box"]["startup_s"] == pytest.approx(920)
    table = run_cli("advise", str(store.root), "--items", str(JOB), cwd=tmp_path,
                    env={"COLUMNS": "80"})
    assert "1 configuration(s) recorded none (counted as 0)" in " ".join(table.stdout.split())


def test_a_job_the_rows_cannot_answer_says_why_in_the_report(known_run, tmp_path):
    from orchestrator.spec.job import JobSpec, save_job

    save_job(known_run, JobSpec(items=JOB, workload="lstm_lm"))
    assert run_cli("report", str(known_run), cwd=tmp_path).returncode == 0
    section = (known_run / "report.md").read_text().split("## Your job", 1)[1]
    assert "has no answer from these rows: --workload lstm_lm: the runs measured none" \
        in " ".join(section.split())
    save_job(known_run, JobSpec(items=JOB, budget=2.0))
    assert run_cli("report", str(known_run), cwd=tmp_path).returncode == 0
    section = (known_run / "report.md").read_text().split("## Your job", 1)[1]
    assert "left out: hot-box: throttled" in section  # the judge's flags reach it too
    assert "fastest within the budget: slow-cheap" in section


def test_a_job_of_2e9_items_is_a_number_as_written():
    from orchestrator.spec.job import JobSpec

    assert JobSpec.model_validate({"items": "2e9"}).items == 2e9  # YAML's text for 2e9
    with pytest.raises(ValueError, match="valid number"):
        JobSpec.model_validate({"items": "many"})


@pytest.mark.parametrize(("job", "problem"), [
    ("{items: 0}", "job.items"),
    ("{items: 100, deadline: soon}", "'soon' is not a duration"),
    ("{items: 100, workload: lstm_lm}", "'lstm_lm' is not a workload of this matrix"),
    ("{items: 100, color: blue}", "job.color")])
def test_a_job_that_cannot_be_answered_is_one_line_at_validate(job, problem, tmp_path):
    matrix = write(tmp_path / "m.yaml", f"""
        name: bad-job
        hardware: [{{name: here, kind: local}}]
        stacks: [{{name: env, executor: process}}]
        workloads: [{{name: sleep, params: {{seconds: 0.1}}}}]
        job: {job}
        """)
    done = run_cli("validate", str(matrix), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert problem in line, line


def test_explain_says_why_it_has_nothing_where_every_configuration_is_flagged(tmp_path):
    store = RunDirectory(tmp_path / "loaded")
    store.root.mkdir(parents=True)
    for hardware, rate in (("a-box", 100.0), ("b-box", 200.0)):
        cell(store, f"{hardware}-1", hardware, "sleep", hardware, {}, [rate],
             flags=["contended"], error="contended: 0.5 of its threads waited")
    cell(store, "b-box-2", "b-box", "sleep", "b-box", {}, [200.0], repeat=2,
         flags=["contended"], error="contended: 0.4 of its threads waited")
    done = run_cli("explain", str(store.root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "every configuration was flagged contended: no clean repeat to compare" in \
        done.stdout
    assert "no factor varies" not in done.stdout
    assert "left out: b-box: contended: 0.5 of its threads waited" in done.stdout
    data = json.loads(run_cli("explain", str(store.root), "--json", cwd=tmp_path).stdout)
    assert data["effects"] == [] and data["nothing"].startswith("every configuration")
    assert set(data["left_out"]) == {"a-box", "b-box"}


def test_a_flagged_repeat_is_dropped_and_its_configuration_kept_with_the_clean_ones(
        tmp_path):
    """The issue's case: one contended repeat 0.4% off its clean ones removed a whole
    configuration, and with it the answer."""
    store = RunDirectory(tmp_path / "one-bad")
    store.root.mkdir(parents=True)
    for repeat, rate in enumerate([500.0, 501.0, 499.0], start=1):
        cell(store, f"f{repeat}", "f", "sleep", "fast-box", {}, [rate], repeat=repeat,
             price=2.0, flags=["contended"] if repeat == 2 else None,
             error="contended: 0.12 of its threads waited" if repeat == 2 else None)
    for repeat in (1, 2, 3):
        cell(store, f"s{repeat}", "s", "sleep", "slow-box", {}, [300.0], repeat=repeat,
             price=1.0)
    found = answer(store.root)
    fast = next(p for p in found.projections if p.label == "fast-box")
    assert fast.repeats == 2 and fast.items_per_s == pytest.approx(499.5)
    assert found.fastest is fast and found.left_out == {}
    assert found.dropped == {"fast-box": "1 of 3 repeats dropped, 2 clean kept: contended: "
                                         "0.12 of its threads waited"}
    # the pick was measured in the run whose other repeat the machine's state set aside
    assert any("measured in the same run as repeats set aside as contended" in note
               for note in found.notes["fastest"])
    # the store answers alike: the flag stays the repeat's own, not its siblings' in the run
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert run_cli("db", "import", str(store.root), "--db", url, cwd=tmp_path).returncode == 0
    for where in ([str(store.root)], ["--db", url]):
        done = run_cli("advise", *where, "--items", "1e6", "--format", "json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout)
        assert said["picks"]["fastest"]["configuration"] == "fast-box", where
        assert said["kept_with_fewer_repeats"] == found.dropped and said["left_out"] == {}


def test_a_two_repeat_option_within_the_noise_is_a_tie_and_named_cheaper(tmp_path):
    """The issue's case: a 2-repeat option 0.4% from the pick and 41% cheaper was never
    named (no interval, so no overlap)."""
    store = RunDirectory(tmp_path / "close")
    store.root.mkdir(parents=True)
    for repeat, rate in enumerate([1000.0, 1006.0, 994.0], start=1):
        cell(store, f"p{repeat}", "p", "sleep", "dear-box", {}, [rate], repeat=repeat,
             price=1.0)
    for repeat, rate in enumerate([999.0, 993.0], start=1):
        cell(store, f"q{repeat}", "q", "sleep", "cheap-box", {}, [rate], repeat=repeat,
             price=0.59)
    for repeat, rate in enumerate([500.0, 501.0], start=1):  # far from it: no tie
        cell(store, f"r{repeat}", "r", "sleep", "slow-box", {}, [rate], repeat=repeat,
             price=0.1)
    found = answer(store.root)
    assert found.fastest.label == "dear-box"
    assert found.ties["fastest"] == ["cheap-box"]
    line = advise_text.pick_line(found, "fastest")
    assert "a tie with cheap-box (within the noise of their repeats)" in line
    assert "cheap-box is within its noise (0.4% slower) and 41% cheaper" in line


def test_a_pick_whose_interval_crosses_the_deadline_or_budget_says_it_may_miss_it(
        known_run):
    # fast-dear: 900 s at the point, its 95% interval about 795-1,019 s; $2.50, 2.21-2.83
    found = answer(known_run, deadline_s=950.0, budget_usd=2.6)
    assert found.fastest.label == "fast-dear" and found.cheapest.label == "fast-dear"
    high_t, high_c = found.fastest.time_range_s[1], found.fastest.cost_range_usd[1]
    line = advise_text.pick_line(found, "fastest")
    assert f"it may miss the deadline: its 95% interval reaches {high_t / 60:.3g} min" in line
    assert f"it may miss the budget: its 95% interval reaches ${money(high_c)}" in line
    assert "may miss" not in advise_text.pick_line(answer(known_run, deadline_s=2000.0),
                                                   "fastest")


def test_costs_keep_their_significant_digits_and_the_job_line_names_its_units(tmp_path):
    assert [money(v) for v in (0.0645, 0.06481, 4.2, 33.75, 1234.5)] == [
        "0.0645", "0.0648", "4.20", "33.75", "1,234.50"]
    store = RunDirectory(tmp_path / "cheap")
    store.root.mkdir(parents=True)
    for repeat, rate in enumerate([1000.0, 1002.0, 998.0], start=1):
        cell(store, f"c{repeat}", "c", "sleep", "penny-box", {}, [rate], repeat=repeat,
             price=0.065)
    found = answer(store.root, budget_usd=2.0)
    (row,) = [advise_text.row(p, 60) for p in found.projections]
    assert row[3] == "0.00650" and row[4].count("0.00") == 2  # not "0.01", "0.01-0.01"
    assert advise_text.job_line(found, None) == (
        "job: 360,000 samples of sleep, at most $2.00 (USD)")


def test_only_a_spot_priced_row_pays_the_interruptions(tmp_path):
    store = RunDirectory(tmp_path / "spot")
    store.root.mkdir(parents=True)
    for repeat in (1, 2, 3):  # the fixture records p4d.24xlarge wherever there is a price
        cell(store, f"e{repeat}", "e", "sleep", "ec2-box", {}, [100.0], repeat=repeat,
             price=32.77)
        cell(store, f"l{repeat}", "l", "sleep", "own-box", {}, [100.0], repeat=repeat)
    job = Job(items=JOB, spot=True, interruptions_per_day=4, checkpoint_every_s=3600)
    found = advise(run_frame(local_run(str(store.root), None)), job,
                   spot_price=lambda kind: (10.0, "spot history") if kind else None)
    by = {p.label: p for p in found.projections}
    assert by["own-box"].time_s == pytest.approx(3600)  # never interrupted: not spot
    assert by["ec2-box"].time_s == pytest.approx(3600 * job.rework_factor)
    assert by["ec2-box"].usd_per_hour == 10.0 and job.rework_factor > 1


def test_two_versions_of_the_code_are_two_configurations_named_apart(tmp_path):
    from orchestrator.report.explain import explain

    store = RunDirectory(tmp_path / "edited")
    store.root.mkdir(parents=True)
    for config, version, rate in (("v1", "1+aaaaaaaa1111", 100.0),
                                  ("v2", "1+bbbbbbbb2222", 120.0)):
        for repeat in (1, 2, 3):
            cell(store, f"{config}-{repeat}", config, "sleep", "box", {}, [rate],
                 repeat=repeat, pins={"workload_version": version})
    rows = run_frame(local_run(str(store.root), None))
    found = advise(rows, Job(items=JOB))
    assert sorted(p.label for p in found.projections) == [
        "box (version 1+aaaaaaaa)", "box (version 1+bbbbbbbb)"]
    assert all(p.repeats == 3 for p in found.projections)  # never pooled as 6
    (effect,) = explain(rows).effects
    assert (effect.factor, effect.base, effect.other, effect.pairs) == (
        "version", "1+aaaaaaaa1111", "1+bbbbbbbb2222", 1)
    assert effect.ratio == pytest.approx(1.2)


def test_explain_of_configurations_measured_once_gives_no_interval(tmp_path):
    """One pair whose sides were each measured once gave the interval [x, x] of zero width:
    a certainty no measurement has. It says there is none, in text and in JSON."""
    store = RunDirectory(tmp_path / "once")
    store.root.mkdir(parents=True)
    for config, hardware, rate in (("a", "a-box", 100.0), ("b", "b-box", 150.0)):
        cell(store, f"{config}-1", config, "sleep", hardware, {}, [rate])
    done = run_cli("explain", str(store.root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "hardware a-box -> b-box: x1.50 [no interval: each side measured once] over 1 " \
        "pair(s)" in said, said
    data = json.loads(run_cli("explain", str(store.root), "--json", cwd=tmp_path).stdout)
    assert [(e["ratio"], e["low"], e["high"]) for e in data["effects"]] == [(1.5, None, None)]
