"""An entry's owner's keys (a hardware kind's: Slurm's partition, a plugin's bay; a stack's
executor's: a wrapper's priority) are read with the registries' catalogues passed to the
validation, never with one a module installed when it was imported: the same dump validates
the same way in any process, whatever it imported first (spec/entry_settings.py;
registry/providers.py: validation_context)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import Field, ValidationError

from orchestrator.errors import SpecError
from orchestrator.executors import ExecutorKind, ExecutorSettings, register_executor
from orchestrator.plan.cells import expand
from orchestrator.plan.identity import model_identity
from orchestrator.providers import BaseProvider, ProviderKind, register_provider
from orchestrator.registry import executors, providers
from orchestrator.registry.providers import validation_context
from orchestrator.spec.entry_settings import (
    KindSettings,
    ProviderSection,
    SettingsCatalogue,
    settings_context,
)
from orchestrator.spec.model import Hardware, MatrixSpec, Stack
from orchestrator.validate import json_schema, load_spec
from tests.conftest import PROJECT

SLURM_ENTRY = {"name": "big", "kind": "slurm", "partition": "debug", "cpus": 2}

FRESH = """
import json, sys
from orchestrator.spec.model import Hardware
from orchestrator.plan.cells import Cell

entry = json.loads(sys.argv[1])
seen = []
def attempt(label, **context):
    try:
        hw = Hardware.model_validate(entry, **context)
    except RuntimeError as exc:
        seen.append([label, "RuntimeError", str(exc)])
    else:
        seen.append([label, type(hw.settings).__name__, hw.settings.model_dump()])

attempt("before the registry")
import orchestrator.registry.providers as registry  # imported, never asked
attempt("after the registry")
attempt("with the context", context=registry.validation_context())
hw = Hardware.model_validate(entry, context=registry.validation_context())
dump = Hardware.model_validate_json(hw.model_dump_json(), context=registry.validation_context())
seen.append(["round trip", dump == hw])
print(json.dumps(seen))
"""


def test_a_fresh_interpreter_reads_an_entry_the_same_whatever_it_imported_first():
    out = subprocess.run([sys.executable, "-c", FRESH, json.dumps(SLURM_ENTRY)], cwd=PROJECT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    before, after, given, round_trip = json.loads(out)
    # without the catalogue: one clear refusal that says how to pass it, before and after
    # the registry's import alike (it used to install itself as the catalogue on import)
    assert before[1:] == after[1:], (before, after)
    assert before[1] == "RuntimeError" and "validation_context()" in before[2]
    assert given[1] == "SlurmSettings" and given[2]["partition"] == "debug"
    assert given[2]["cpus"] == 2
    assert round_trip == ["round trip", True]


def test_the_catalogue_passed_is_the_one_read():
    class BaySettings(KindSettings):
        bay: int = 0

    own = SettingsCatalogue(settings=lambda kind: BaySettings if kind == "rack" else None,
                            owners=lambda key: ["rack"] if key == "bay" else [])
    entry = {"name": "r1", "kind": "rack", "bay": 7}
    hardware = Hardware.model_validate(entry, context=settings_context(own))
    assert isinstance(hardware.settings, BaySettings) and hardware.settings.bay == 7
    # the registry's catalogue offers no kind "rack": the same entry is not read as one
    with pytest.raises(ValidationError, match="bay"):
        Hardware.model_validate(entry, context=validation_context())
    # and the test's catalogue does not know Slurm's keys: "partition" is a typo there
    with pytest.raises(ValidationError, match="partition"):
        Hardware.model_validate({**SLURM_ENTRY, "kind": "rack"}, context=settings_context(own))


def test_an_entry_of_shared_keys_alone_needs_no_catalogue():
    # a plain local machine, as tests and plugins write it in code
    assert Hardware(name="laptop", kind="local", gpus=1).settings == KindSettings()
    typed = Hardware.model_validate(SLURM_ENTRY, context=validation_context())
    assert Hardware(**typed.model_dump() | {"settings": typed.settings}) == typed


class LowSettings(ExecutorSettings):
    niceness: int = 19
    queue: str | None = None  # where the lab books it: not what the cell ran on

    NOT_IDENTITY = frozenset({"queue"})


@pytest.fixture
def lowprio(monkeypatch):
    """An executor with its own stack keys, registered in this process (the registry as it
    was comes back after the test)."""
    monkeypatch.setattr(executors, "_REGISTRY", dict(executors._REGISTRY))
    register_executor(ExecutorKind("lowprio", image=None, load=lambda: None,
                                   settings=LowSettings))


STACKS = """name: m
hardware: [{{name: box, kind: local}}]
stacks: [{stack}]
workloads: [{{name: sleep, params: {{seconds: 0.1}}}}]
"""


def test_an_executors_own_keys_are_its_stacks_settings_and_enter_identity_once_set(
        lowprio, matrix_file):
    def stack_of(text: str, name: str = "m.yaml") -> Stack:
        return load_spec(matrix_file(STACKS.format(stack=text), name)).stacks[0]

    low = stack_of("{name: s, executor: lowprio, niceness: 12, queue: night}")
    assert isinstance(low.settings, LowSettings)
    assert (low.settings.niceness, low.settings.queue) == (12, "night")
    assert low.settings.recorded() == {"niceness": 12}
    # at its default a setting hashes as if it did not exist; set, it moves the id
    default = stack_of("{name: s, executor: lowprio}", "d.yaml")
    assert "niceness" not in model_identity(default)
    assert model_identity(low)["niceness"] == 12 and "queue" not in model_identity(low)
    booked = stack_of("{name: s, executor: lowprio, queue: day}", "b.yaml")
    ids = [expand(load_spec(matrix_file(STACKS.format(stack=s), f"{i}.yaml")))[0].config_id
           for i, s in enumerate(["{name: s, executor: lowprio}",
                                  "{name: s, executor: lowprio, queue: day}",
                                  "{name: s, executor: lowprio, niceness: 12}"])]
    assert ids[0] == ids[1] != ids[2] and booked.settings.queue == "day"
    # the dump reads back as the executor's model, with the registries' context
    assert Stack.model_validate_json(low.model_dump_json(),
                                     context=validation_context()) == low


@pytest.mark.parametrize(("stack", "says"), [
    ("{name: s, executor: process, niceness: 12}",
     "stacks[0].niceness: niceness applies to executor lowprio only"),
    ("{name: s, framework_version: '2.5', niceness: 12}",  # docker, by its pins
     "stacks[0].niceness: niceness applies to executor lowprio only"),
    ("{name: s, executor: lowprio, nicenes: 12}",
     "stacks[0].nicenes: unknown key (expected one of: name, executor, framework, "
     "framework_version, cuda, cudnn, python, base_image, index_url, niceness, queue)"),
    ("{name: s, executor: lowprio, niceness: '12'}",
     "stacks[0].niceness: expected an integer, got the text '12' (without the quotes)"),
])
def test_another_executors_key_or_a_typo_is_one_located_line(lowprio, matrix_file, stack,
                                                              says):
    with pytest.raises(SpecError) as bad:
        load_spec(matrix_file(STACKS.format(stack=stack)))
    assert str(bad.value).endswith(says), str(bad.value)


def test_the_json_schema_offers_an_executors_keys_on_its_stacks_only(lowprio):
    import jsonschema  # Ray's dependency, so always here

    schema = json_schema()
    entries = {e["title"]: e for e in schema["$defs"]["Stack"]["anyOf"]}
    assert {"niceness", "queue"} <= set(entries["Stack of executor lowprio"]["properties"])
    assert not {"niceness", "queue", "settings"} & set(entries["Stack"]["properties"])
    matrix = {"name": "m", "hardware": [{"name": "a", "kind": "local"}],
              "workloads": [{"name": "sleep"}]}
    jsonschema.validate({**matrix, "stacks": [{"name": "s", "executor": "lowprio",
                                               "niceness": 3}]}, schema)
    jsonschema.validate({**matrix, "stacks": [{"name": "s", "executor": "process"}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**matrix, "stacks": [{"name": "s", "executor": "process",
                                                   "niceness": 3}]}, schema)


class LabSection(ProviderSection):
    queue: str = "day"
    max_nodes: int = Field(default=4, ge=1)


@pytest.fixture
def lab(monkeypatch):
    """A provider with its own section of the matrix file (`lab:`), registered in this
    process (the registry as it was comes back after the test)."""
    monkeypatch.setattr(providers, "_REGISTRY", dict(providers._REGISTRY))
    register_provider(ProviderKind("lab", ("labbox",), load=BaseProvider, section=LabSection))


LAB = STACKS.format(stack="{name: s, executor: process}")


def test_a_providers_section_is_its_own_model_under_its_name(lab, matrix_file):
    spec = load_spec(matrix_file(LAB + "lab: {queue: night}\n"))
    assert spec.section("lab") == LabSection(queue="night")
    assert spec.section("aws") is None  # no aws: written, none made up
    assert load_spec(matrix_file(LAB, "none.yaml")).section("lab") is None
    schema = json_schema()
    assert schema["properties"]["lab"] == {"$ref": "#/$defs/LabSection"}
    assert set(schema["$defs"]["LabSection"]["properties"]) == {"queue", "max_nodes"}
    assert {"aws", "slurm"} <= set(schema["properties"]) and "sections" not in \
        schema["properties"]


@pytest.mark.parametrize(("written", "says"), [
    ("lab: {queu: night}", "lab.queu: unknown key (expected one of: queue, max_nodes)"),
    ("lab: {max_nodes: 0}", "lab.max_nodes: must be greater than or equal to 1, got 0"),
    ("lab: night", "lab: expected a mapping, got the text 'night'"),
    ("labs: {queue: night}", "labs: unknown key (expected one of: name, hardware, stacks, "
                             "workloads, include, exclude, repeats, output, budget_usd, "
                             "images, job, max_cells, aws, slurm, lab)"),
    ("sections: {lab: {queue: night}}", "sections: unknown key (expected one of:"),
])
def test_a_bad_section_is_one_located_line(lab, matrix_file, written, says):
    with pytest.raises(SpecError) as bad:
        load_spec(matrix_file(LAB + written + "\n"))
    assert f"m.yaml:5: {says}" in str(bad.value), str(bad.value)


def test_a_matrix_with_a_section_needs_the_catalogue_to_be_read():
    matrix = {"name": "m", "hardware": [{"name": "a", "kind": "local"}],
              "stacks": [{"name": "s"}], "workloads": [{"name": "sleep"}]}
    assert MatrixSpec.model_validate(matrix).sections == {}
    with pytest.raises(RuntimeError, match="validation_context"):
        MatrixSpec.model_validate({**matrix, "aws": {"region": "eu-west-1"}})
    read = MatrixSpec.model_validate({**matrix, "aws": {"region": "eu-west-1"}},
                                     context=validation_context())
    assert read.section("aws").region == "eu-west-1"
