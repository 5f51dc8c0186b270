"""The matrix file: one test per error class, each asserting file, line and field."""

from __future__ import annotations

import pytest

from orchestrator.errors import SpecError
from orchestrator.images.stack_image import image_problems
from orchestrator.validate import json_schema, load_spec
from tests.conftest import run_cli

GOOD = """
name: demo
hardware:
  - {name: box, kind: local}
stacks:
  - {name: here, executor: process}
workloads:
  - name: sleep
    params: {seconds: [0.1, 0.2]}
"""


def error_of(matrix_file, text: str) -> SpecError:
    path = matrix_file(text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:"), message
    return caught.value


def test_a_good_file_loads(matrix_file):
    spec = load_spec(matrix_file(GOOD))
    assert spec.name == "demo" and spec.workloads[0].params == {"seconds": [0.1, 0.2]}


def test_malformed_yaml_names_the_line(matrix_file):
    err = error_of(matrix_file, "name: demo\nhardware: [{name: box, kind: local}\nstacks: []\n")
    assert err.line == 3 and "malformed YAML" in str(err)


def test_top_level_must_be_a_mapping(matrix_file):
    err = error_of(matrix_file, "- name: demo\n- hardware: []\n")
    assert err.line == 1 and "must be a mapping" in err.problem


def test_empty_file(matrix_file):
    assert "empty" in error_of(matrix_file, "# nothing here\n").problem


def test_unknown_top_level_key(matrix_file):
    err = error_of(matrix_file, GOOD + "repeat: 3\n")
    assert (err.line, err.field) == (9, "repeat")
    assert "unknown key" in err.problem and "repeats" in err.problem


def test_unknown_key_in_hardware(matrix_file):
    err = error_of(matrix_file, GOOD.replace("{name: box, kind: local}",
                                             "{name: box, kind: local, gpu: 1}"))
    assert (err.line, err.field) == (3, "hardware[0].gpu")
    assert "gpus" in err.problem  # says what was expected


def test_unknown_workload(matrix_file):
    err = error_of(matrix_file, GOOD.replace("name: sleep", "name: sleeep"))
    assert (err.line, err.field) == (7, "workloads[0].name")
    assert "unknown workload 'sleeep'" in err.problem and "sleep" in err.problem


def test_unknown_parameter(matrix_file):
    err = error_of(matrix_file, GOOD.replace("seconds:", "secs:"))
    assert (err.line, err.field) == (8, "workloads[0].params.secs")
    assert "no parameter 'secs'" in err.problem and "seconds" in err.problem


def test_wrong_type_string_for_number(matrix_file):
    err = error_of(matrix_file, GOOD.replace("[0.1, 0.2]", "[0.1, fast]"))
    assert err.field == "workloads[0].params.seconds[1]"
    assert "expected float" in err.problem


def test_boolean_is_not_a_count(matrix_file):
    err = error_of(matrix_file, GOOD.replace("[0.1, 0.2]", "0.1, steps: true"))
    assert err.field == "workloads[0].params.steps" and "boolean" in err.problem


def test_value_outside_the_allowed_choices(matrix_file):
    err = error_of(matrix_file, GOOD.replace("[0.1, 0.2]", "0.1, fault: explode"))
    assert "'explode' is not one of" in err.problem and "raise" in err.problem


def test_wrong_type_of_a_spec_field(matrix_file):
    err = error_of(matrix_file, GOOD + "repeats: three\n")
    assert (err.line, err.field) == (9, "repeats") and "integer" in err.problem


def test_unknown_hardware_kind(matrix_file):
    err = error_of(matrix_file, GOOD.replace("kind: local", "kind: gpu"))
    assert (err.line, err.field) == (3, "hardware[0].kind")
    assert "'gpu' is not allowed" in err.problem and "'local' or 'ec2'" in err.problem


def test_ec2_needs_an_instance_type(matrix_file):
    err = error_of(matrix_file, GOOD.replace("kind: local", "kind: ec2"))
    assert err.field == "hardware[0]" and "instance_type" in err.problem


def test_empty_hardware_list(matrix_file):
    text = GOOD.replace("hardware:\n  - {name: box, kind: local}", "hardware: []")
    err = error_of(matrix_file, text)
    assert (err.line, err.field) == (2, "hardware") and "must not be empty" in err.problem


def test_empty_parameter_grid(matrix_file):
    err = error_of(matrix_file, GOOD.replace("[0.1, 0.2]", "[]"))
    assert (err.line, err.field) == (8, "workloads[0].params.seconds")
    assert "empty list" in err.problem


def test_duplicate_names(matrix_file):
    text = GOOD.replace("  - {name: box, kind: local}",
                        "  - {name: box, kind: local}\n  - {name: box, kind: local, gpus: 1}")
    err = error_of(matrix_file, text)
    assert (err.line, err.field) == (4, "hardware[1].name") and "duplicate name" in err.problem


def test_duplicate_yaml_keys(matrix_file):
    err = error_of(matrix_file, GOOD + "name: again\n")
    assert (err.line, err.field) == (9, "name") and "duplicate key" in err.problem


@pytest.mark.parametrize(("addition", "field"), [
    ("repeats: 0\n", "repeats"),
    ("budget_usd: -5\n", "budget_usd"),
])
def test_zero_or_negative_counts(matrix_file, addition, field):
    err = error_of(matrix_file, GOOD + addition)
    assert err.field == field and "greater than" in err.problem


def test_negative_gpus_and_zero_epochs(matrix_file):
    err = error_of(matrix_file, GOOD.replace("kind: local}", "kind: local, gpus: -1}"))
    assert err.field == "hardware[0].gpus" and "greater than or equal to 0" in err.problem
    err = error_of(matrix_file, GOOD + "    epochs: 0\n")
    assert (err.line, err.field) == (9, "workloads[0].epochs")


def test_object_tags_are_refused(matrix_file):
    err = error_of(matrix_file, GOOD + "output: !!python/object/apply:os.system ['true']\n")
    assert (err.line, err.field) == (9, "output") and "not allowed" in err.problem
    assert "python/object/apply:os.system" in err.problem


def test_dataset_given_twice(matrix_file):
    text = GOOD.replace("name: sleep\n    params: {seconds: [0.1, 0.2]}",
                        "name: lstm_lm\n    dataset: synthetic\n    params: {dataset: wikitext2}")
    err = error_of(matrix_file, text)
    assert err.field == "workloads[0].dataset" and "given twice" in err.problem


def test_rule_naming_unknown_hardware(matrix_file):
    err = error_of(matrix_file, GOOD + "exclude:\n  - {hardware: laptop}\n")
    assert (err.line, err.field) == (10, "exclude[0].hardware") and "'laptop'" in err.problem


def test_missing_required_section(matrix_file):
    err = error_of(matrix_file, GOOD.split("workloads:")[0])
    assert err.field == "workloads" and "missing" in err.problem


def test_a_cuda_stack_names_its_base_image(matrix_file):
    err = error_of(matrix_file, GOOD.replace("{name: here, executor: process}",
                                             "{name: cu121, framework: torch, cuda: '12.1'}"))
    assert err.field == "stacks[0].cuda" and "base_image" in err.problem


def test_an_image_stack_names_its_framework(matrix_file):
    err = error_of(matrix_file, GOOD.replace("{name: here, executor: process}",
                                             "{name: py, python: '3.11'}"))
    assert err.field == "stacks[0].name" and "framework" in err.problem


T2_STACK = "{name: t2, framework: torch, framework_version: '2.13.0'}"


def test_an_image_stack_without_its_lock_file_is_noted_and_cannot_render(matrix_file,
                                                                          tmp_path):
    path = matrix_file(GOOD.replace("{name: here, executor: process}", T2_STACK)
                       + "images: {locks: locks}\n")
    (problem,) = image_problems(load_spec(path))
    assert f"stack t2: no lock file {tmp_path / 'locks' / 't2.txt'} yet" in problem
    # the commands it names are ones `matrix lock` takes (once: `matrix lock WHEELHOUSE -o`)
    assert "`matrix lock MATRIX --stack t2`" in problem
    assert "`matrix lock --wheelhouse DIR -o " in problem
    done = run_cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 0 and f"note: {problem}" in done.stdout
    nothing = run_cli("lock", str(matrix_file(GOOD)), cwd=tmp_path)  # once: exit 0, silent
    assert nothing.returncode == 2 and nothing.stderr.strip().splitlines() == [
        "error: nothing to lock: no stack of matrix 'demo' runs in an image (its stacks run "
        "with process, in this Python)"], nothing.stderr


def test_image_paths_resolve_against_the_matrix_file(matrix_file, tmp_path):
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "t2.txt").write_text("torch==2.13.0 --hash=sha256:00\n")
    (tmp_path / "wheels").mkdir()
    spec = load_spec(matrix_file(GOOD.replace(
        "{name: here, executor: process}", T2_STACK)
        + "images: {locks: locks, wheelhouse: wheels}\n"))
    assert spec.images.locks == str(tmp_path / "locks")
    assert spec.images.wheelhouse == str(tmp_path / "wheels")


def test_a_missing_wheelhouse_is_a_spec_error(matrix_file):
    err = error_of(matrix_file, GOOD + "images: {wheelhouse: /no/such/folder}\n")
    assert err.field == "images.wheelhouse" and "does not exist" in err.problem


def test_json_schema_describes_the_file():
    schema = json_schema()
    assert set(schema["required"]) == {"name", "hardware", "stacks", "workloads"}
    entries = {e["properties"]["kind"]["const"]: e for e in schema["$defs"]["Hardware"]["oneOf"]}
    assert list(entries) == ["local", "ec2", "slurm"]
    # each kind's entry: the shared keys and its own, flat, and none of another kind's
    shared = {"name", "kind", "instance_type", "gpus", "gpu_model", "price_per_hour", "nodes",
              "net_gbps"}
    assert set(entries["local"]["properties"]) == shared
    assert set(entries["ec2"]["properties"]) == shared | {"spot"}
    assert set(entries["slurm"]["properties"]) == shared | {
        "partition", "cpus", "mem_gb", "time_limit", "account", "qos", "constraint"}
    assert all(e["additionalProperties"] is False for e in entries.values())


def test_the_json_schema_accepts_what_the_loader_does_and_refuses_another_kinds_key():
    import jsonschema  # Ray's dependency, so always here
    schema = json_schema()
    good = {"name": "m", "stacks": [{"name": "env", "executor": "process"}],
            "workloads": [{"name": "sleep"}],
            "hardware": [{"name": "a", "kind": "slurm", "partition": "p", "mem_gb": 4},
                         {"name": "b", "kind": "ec2", "instance_type": "p3.2xlarge",
                          "spot": True}, {"name": "c", "kind": "local"},
                         {"name": "d", "kind": "local", "nodes": [1, 2, 4]},
                         {"name": "e", "kind": "local", "nodes": 2, "net_gbps": 400}]}
    jsonschema.validate(good, schema)
    for nodes in (0, [], [1, 1], "2"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, "hardware": [{"name": "c", "kind": "local",
                                                       "nodes": nodes}]}, schema)
    bad = {**good, "hardware": [{"name": "c", "kind": "local", "partition": "p"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_exponent_floats_are_numbers(matrix_file):
    spec = load_spec(matrix_file(GOOD.replace("[0.1, 0.2]", "[1e-1, 2.5E-1, 3e0]")))
    assert spec.workloads[0].params["seconds"] == [0.1, 0.25, 3.0]
    import yaml

    assert yaml.safe_load("x: 1e-3") == {"x": "1e-3"}  # the global loader is left alone
