"""A training script run as it is (`command:`): real scripts in a temporary folder, run by
the real worker in a process and in a stack image, with the `matrix_bench` client and
without it; what the matrix declares wrongly is one located line and nothing runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.plan.cells import expand
from orchestrator.spec.command_workloads import substitute
from orchestrator.validate import load_spec
from tests.conftest import (
    MACHINE_FLAGS,
    PROJECT,
    assert_refused_in_one_line,
    assert_statuses,
    cell_records,
    journal,
    own_reasons,
    run_cli,
    write,
)

TRAIN = """
import argparse

import matrix_bench

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--label", default="")
args = parser.parse_args()
print("label:", repr(args.label), flush=True)
bench = matrix_bench.attach()
for epoch in range(args.epochs):
    meter = bench.start_epoch(warmup_steps=1)
    for step in range(4):
        with meter.step(items=args.batch_size if step < 3 else 5):  # a short last batch
            sum(range(5000 * args.batch_size))
    bench.end_epoch(meter)
"""
PLAIN = """
import sys
import time

hoard = bytearray(64 * 2**20)  # touched: resident
hoard[::4096] = b"x" * len(hoard[::4096])
time.sleep(float(sys.argv[1]))
sys.exit(int(sys.argv[2]))
"""
MATRIX = """
name: cmd
hardware: [{{name: box, kind: local}}]
stacks: [{stack}]
workloads:
  - name: with_client
    command: ["python", "train.py", "--batch-size", "{{batch_size}}", "--epochs", "{{epochs}}",
              "--label", "a b; rm -rf {{batch_size}}"]
    params: {{batch_size: [8, 16]}}
    epochs: 2
  - name: without_client
    command: ["python", "plain.py", "{{seconds}}", "{{code}}"]
    params: {{seconds: 0.3, code: {code}}}
{extra}"""


def make_scripts(root: Path, code: int = 0, stack: str = "{name: here, executor: process}",
                 extra: str = "") -> Path:
    write(root / "train.py", TRAIN)
    write(root / "plain.py", PLAIN)
    return write(root / "m.yaml", MATRIX.format(stack=stack, code=code, extra=extra))


def test_placeholders_are_whole_arguments():
    command = ["python", "t.py", "--x={x}", "{name}", "{{literal}}", "{epochs}"]
    assert substitute(command, {"x": 0.5, "name": "a b; rm -rf /"}, 3) == (
        "python", "t.py", "--x=0.5", "a b; rm -rf /", "{literal}", "3")


def test_the_scripts_code_moves_its_ids_and_nothing_else_does(tmp_path):
    make_scripts(tmp_path)

    def ids() -> list[str]:
        return sorted(c.config_id for c in expand(load_spec(tmp_path / "m.yaml"))
                      if c.workload == "with_client")

    first = ids()
    write(tmp_path / "data.csv", "1,2,3\n")  # data, not code
    (tmp_path / "reports" / "cmd").mkdir(parents=True)  # the runs' output
    write(tmp_path / "reports" / "cmd" / "results.json", "{}\n")
    write(tmp_path / "m.yaml", (tmp_path / "m.yaml").read_text() + "# a comment\n")
    assert ids() == first
    write(tmp_path / "train.py", TRAIN + "# a comment: no change\n")
    assert ids() == first
    write(tmp_path / "train.py", TRAIN.replace("5000", "6000"))
    assert not set(ids()) & set(first)
    changed = ids()
    write(tmp_path / "helper.py", "X = 1\n")  # a module the script may import: declared, it
    assert ids() == changed  # counts (files:, or tracked by git: tests/test_code_identity.py)


@pytest.mark.slow
def test_a_script_with_the_client_and_one_without_run_and_report(tmp_path):
    done = run_cli("run", str(make_scripts(tmp_path)), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "cmd"
    assert_statuses(run_dir, ["ok"] * 3)
    rows = pd.read_parquet(run_dir / "results.parquet")
    client = rows[rows["workload"] == "with_client"].sort_values(["param.batch_size", "epoch"])
    assert list(client["timing"]) == ["steps"] * 4 and list(client["epoch"]) == [1, 2] * 2
    # 3 timed steps: two whole batches and the short last one, warm-up left out
    assert list(client["items"]) == [8 + 8 + 5] * 2 + [16 + 16 + 5] * 2
    assert (client["items_per_s"] == client["items"] / client["train_s"]).all()
    assert (client["steps"] == 3).all() and (client["epoch_s"] >= client["train_s"]).all()

    (plain,) = rows[rows["workload"] == "without_client"].itertuples()
    assert plain.timing == "whole" and pd.isna(plain.items_per_s) and pd.isna(plain.items)
    assert 0.3 <= plain.epoch_s < 120  # its wall time, start-up included (a hang guard above)
    assert plain.host_rss_peak_bytes >= 64 * 2**20  # the script's own memory, not the worker's

    logs = "".join(p.read_text() for p in (run_dir / "logs").glob("*.log"))
    assert "label: 'a b; rm -rf 8'" in logs and "label: 'a b; rm -rf 16'" in logs
    report = (run_dir / "report.md").read_text()
    assert "## with_client" in report and "## without_client (timed as a whole)" in report
    assert "no `matrix_bench` client" in report

    (run_dir / "report.md").unlink()  # a later process knows the commands from the run
    again = run_cli("report", str(run_dir), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "## without_client (timed as a whole)" in (run_dir / "report.md").read_text()


@pytest.mark.slow
def test_a_script_that_exits_non_zero_fails_its_cell(tmp_path):
    done = run_cli("run", str(make_scripts(tmp_path, code=3)), "--no-ray",
                   "--only", "workload=without_client", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr  # a failed cell is data
    (cell,) = cell_records(tmp_path / "reports" / "cmd")
    assert cell["status"] == "failed"
    assert cell["error"] == "CommandFailed: the command exited with code 3"
    assert not [r for r in journal(tmp_path / "reports" / "cmd") if r["record"] == "measurement"]


def test_the_client_run_by_hand_prints_and_records_nothing(tmp_path):
    write(tmp_path / "train.py", TRAIN)
    done = subprocess.run([sys.executable, "train.py", "--batch-size", "4"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": str(Path(sys.executable).parent),
                               "PYTHONPATH": str(PROJECT)})
    assert done.returncode == 0, done.stderr
    assert "matrix-bench: epoch 1:" in done.stderr and "not recorded" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


@pytest.mark.parametrize(("entry", "where", "problem"), [
    ('{name: s, command: "python train.py"}', "workloads[0].command",
     "expected a list, got the text 'python train.py'"),
    ('{name: s, command: [python, train.py, "{bs}"], params: {batch_size: 8}}',
     "workloads[0].command[2]", "the placeholder {bs} names no parameter (known: batch_size, "
     "epochs)"),
    ('{name: s, command: [python, "{}"]}', "workloads[0].command[1]",
     "a placeholder names a parameter, as {batch_size}; {} does not"),
    ('{name: s, command: [python, "{a"]}', "workloads[0].command[1]", "literal braces"),
    ("{name: s, command: [python], params: {x: [1, a]}}", "workloads[0].params.x",
     "its values mix types (int, str): give its type in param_types"),
    ("{name: s, command: [python], params: {x: [1, 2]}, param_types: {x: bool}}",
     "workloads[0].params.x", "param_types says bool: expected bool, got int (1)"),
    ("{name: s, command: [python], param_types: {y: int}}", "workloads[0].param_types.y",
     "'y' is not a parameter of this workload"),
    ("{name: s, command: [python], path: ./x}", "workloads[0].command",
     "a folder (path:) or a command (command:), not both"),
    ("{name: s, command: [python], cwd: ./nowhere}", "workloads[0].cwd", "is not a folder"),
    ("{name: sleep, command: [python]}", "workloads[0].name", "'sleep' is a built-in workload"),
    ("{name: sleep, item_unit: token}", "workloads[0].item_unit",
     "only a command workload (command:) takes this"),
    ("{name: s, command: [python], shell: true}", "workloads[0].shell", "unknown key"),
    ("{name: s, command: [python], params: {bs: 8}, flops_per_item: 2 * layers}",
     "workloads[0].flops_per_item", "'layers' names no numeric parameter of this workload "
     "(numeric: bs)"),
    ("{name: s, command: [python], params: {bs: [8, 0]}, flops_per_item: 1e9 / bs}",
     "workloads[0].flops_per_item", "'1e9 / bs': float division by zero"),
    ("{name: s, command: [python], flops_per_item: __import__('os')}",
     "workloads[0].flops_per_item", "flops_per_item takes numbers, parameter names"),
    ("{name: s, command: [python], flops_per_item: -3}", "workloads[0].flops_per_item",
     "flops_per_item is -3.0: it must be a positive number"),
    # once a TypeError traceback: max() of one value
    ("{name: s, command: [python], params: {seq_len: 8}, flops_per_item: 'max(seq_len)'}",
     "workloads[0].flops_per_item", "min() and max() of two or more values"),
    # judged at the real values: (8 - 200) ** 0.5 is no real number (once a complex one)
    ("{name: s, command: [python], params: {seq_len: 8}, "
     "flops_per_item: '(seq_len - 200) ** 0.5 * 1e9'}", "workloads[0].flops_per_item",
     "'(seq_len - 200) ** 0.5' is no real number here (-192 ** 0.5)"),
    ("{name: sleep, flops_per_item: 5}", "workloads[0].flops_per_item",
     "only a command workload (command:) takes this"),
])
def test_a_command_declared_wrongly_is_one_line_and_nothing_runs(tmp_path, entry, where,
                                                                  problem):
    assert_refused_in_one_line(tmp_path, entry, where, problem)


@pytest.mark.docker
def test_a_script_runs_in_a_stack_image_that_carries_its_folder(image_env, tmp_path):
    path = make_scripts(tmp_path, stack=image_env.stack("torch-cpu"),
                        extra=image_env.images_section())
    done = run_cli("run", str(path), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "cmd"
    assert_statuses(run_dir, ["ok"] * 3)
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert set(rows["timing"]) == {"steps", "whole"}
    assert set(rows["image_tag"].str.split(":").str[0]) == {"matrix-bench"}
    cell_file = json.loads(next((run_dir / "cells").glob("*.json")).read_text())
    assert cell_file["command_cwd"] == "/opt/matrix-bench/code/user_workloads/" + \
        cell_file["workload"]


TRAINER = """
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from matrix_bench.hf import MatrixBenchCallback

torch.manual_seed(0)
config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16)
data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.tensor(i % 2)}
        for i in range(36)]  # batches of 8: 8, 8, 8, 8 and a last one of 4
args = TrainingArguments(output_dir=sys.argv[2], per_device_train_batch_size=int(sys.argv[1]),
                         num_train_epochs=2, report_to=[], save_strategy="no",
                         logging_strategy="no", use_cpu=True, dataloader_num_workers=0)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=data,
        callbacks=[MatrixBenchCallback(warmup_steps=2)]).train()
"""


@pytest.mark.slow
def test_a_trainer_script_is_one_callback_away(tmp_path):
    write(tmp_path / "trainer.py", TRAINER)
    path = write(tmp_path / "m.yaml", """
        name: hf
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads:
          - name: tiny_bert
            command: [python, trainer.py, "{batch_size}", ./out]
            params: {batch_size: 8}
        """)
    done = run_cli("run", str(path), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "reports" / "hf"
    assert_statuses(run_dir, ["ok"])
    rows = pd.read_parquet(run_dir / "results.parquet").sort_values("epoch")
    assert list(rows["epoch"]) == [1, 2] and set(rows["timing"]) == {"steps"}
    # 5 steps an epoch, 2 of them warm-up: 8 + 8 + the last 4 samples
    assert list(rows["steps"]) == [3, 3] and list(rows["items"]) == [20.0, 20.0]
    assert set(rows["framework"]) == {"torch"}
    assert set(rows["framework_version"]) == {__import__("torch").__version__}


@pytest.mark.slow
def test_a_script_past_its_timeout_is_killed_with_its_cell(tmp_path):
    marker = f"matrix-bench-test-{tmp_path.name}"
    path = write(tmp_path / "m.yaml", f"""
        name: slow
        hardware: [{{name: box, kind: local}}]
        stacks: [{{name: here, executor: process}}]
        workloads:
          - name: forever
            command: [python, -c, "import time; time.sleep(120)", {marker}]
            timeout_s: 2
        """)
    done = run_cli("run", str(path), "--no-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (cell,) = cell_records(tmp_path / "reports" / "slow")
    assert cell["status"] == "timeout"
    assert running_with(marker) == []  # the script went with its worker


def running_with(marker: str) -> list[Path]:
    """The processes whose command line holds `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(cmdline)
        except OSError:  # it ended while we looked
            pass
    return found


def run_train(root: Path, run: str, entry: str) -> Path:
    """TRAIN run by a matrix `run` of the one workload `entry` (inline YAML); its run dir."""
    write(root / "train.py", TRAIN)
    matrix = write(root / "m.yaml", f"""
        name: {run}
        hardware: [{{name: box, kind: local}}]
        stacks: [{{name: here, executor: process}}]
        workloads: [{entry}]
        """)
    done = run_cli("run", str(matrix), "--no-ray", "--db", "none", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "reports" / run


def test_a_script_that_ignores_its_epochs_is_flagged(tmp_path):
    # TRAIN's --epochs defaults to 1, and this command does not pass {epochs}
    run_dir = run_train(tmp_path, "short", "{name: deaf, command: [python, train.py, "
                                           "--batch-size, '8'], epochs: 3}")
    (cell,) = cell_records(run_dir)
    # flagged for that and nothing else of the script's
    assert cell["status"] == "ok"
    assert set(cell["flags"]) - MACHINE_FLAGS == {"fewer_epochs"}
    assert own_reasons(cell) == ["fewer_epochs: the script reported 1 of the 3 epoch(s) asked "
                                 "(does its command pass {epochs}?)"]


def test_any_plain_word_is_a_unit_and_is_shown_in_its_plural(tmp_path):
    run_dir = run_train(tmp_path, "images", "{name: vision, command: [python, train.py, "
                                            "--batch-size, '{batch_size}'], "
                                            "params: {batch_size: 8}, item_unit: image}")
    report = (run_dir / "report.md").read_text()
    assert "train images/s" in report and "sample/s" not in report
    (tmp_path / "bad").mkdir()
    assert_refused_in_one_line(tmp_path / "bad", "{name: s, command: [python, train.py], "
                                         "item_unit: two words}", "workloads[0].item_unit",
                               "'two words' is not an item unit: one plain lowercase word")


def test_a_commands_own_flop_count_gives_its_flops_judged_against_the_peak(tmp_path):
    run_dir = run_train(tmp_path, "claimed", "{name: counted, command: [python, train.py, "
                                             "--batch-size, '{batch_size}'], params: "
                                             "{batch_size: [8, 16]}, flops_per_item: "
                                             "'3e3 * batch_size'}")
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert list(rows["flops_per_item"]) == [3e3 * b for b in rows["param.batch_size"]]
    assert rows["achieved_flops"].tolist() == pytest.approx(
        (rows["flops_per_item"] * rows["items_per_s"]).tolist())
    assert rows["peak_fraction"].notna().all()
    assert set(",".join(rows["flags"]).split(",")) - MACHINE_FLAGS <= {""}
    report = (run_dir / "report.md").read_text()
    assert "the workload's own FLOP count (no model)" in report and "No FLOP" not in report

    boast = run_train(tmp_path, "boast", "{name: counted, command: [python, train.py, "
                                         "--batch-size, '8'], flops_per_item: 1e15}")
    (cell,) = cell_records(boast)
    assert "implausible" in cell["flags"], cell  # a claim is held to the device's peak
    uncounted = run_train(tmp_path, "plain", "{name: counted, command: [python, train.py, "
                                             "--batch-size, '8']}")
    assert "give the command's `flops_per_item:`" in (uncounted / "report.md").read_text()


def test_a_flop_claim_is_judged_at_the_parameters_values_not_at_stand_ins(tmp_path):
    """`(seq_len - 200) ** 0.5 * 1e9` is a real count at seq_len 256; the shape check once
    set every parameter to 1.0 and died on (1 - 200) ** 0.5, a complex number."""
    path = write(tmp_path / "m.yaml", """
        name: claim
        hardware: [{name: box, kind: local}]
        stacks: [{name: here, executor: process}]
        workloads: [{name: s, command: [python, -c, pass], params: {seq_len: [256, 300]},
                     flops_per_item: "(seq_len - 200) ** 0.5 * 1e9"}]
        """)
    done = run_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    from orchestrator.flop_claims import flops_per_item

    assert flops_per_item("(seq_len - 200) ** 0.5 * 1e9", {"seq_len": 256}) == \
        pytest.approx(56 ** 0.5 * 1e9)
