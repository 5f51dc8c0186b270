"""A hardware entry's own keys (Slurm's partition, EC2's spot, a plugin's bay) are read with
the kinds' catalogue passed to the validation, never with one a module installed when it was
imported: the same dump validates the same way in any process, whatever it imported first
(spec/model.py: gather_settings; registry/providers.py: validation_context)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from orchestrator.registry.providers import validation_context
from orchestrator.spec.model import Hardware, KindCatalogue, KindSettings, kinds_context
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

    own = KindCatalogue(settings=lambda kind: BaySettings if kind == "rack" else None,
                        owners=lambda key: ["rack"] if key == "bay" else [])
    entry = {"name": "r1", "kind": "rack", "bay": 7}
    hardware = Hardware.model_validate(entry, context=kinds_context(own))
    assert isinstance(hardware.settings, BaySettings) and hardware.settings.bay == 7
    # the registry's catalogue offers no kind "rack": the same entry is not read as one
    with pytest.raises(ValidationError, match="bay"):
        Hardware.model_validate(entry, context=validation_context())
    # and the test's catalogue does not know Slurm's keys: "partition" is a typo there
    with pytest.raises(ValidationError, match="partition"):
        Hardware.model_validate({**SLURM_ENTRY, "kind": "rack"}, context=kinds_context(own))


def test_an_entry_of_shared_keys_alone_needs_no_catalogue():
    # a plain local machine, as tests and plugins write it in code
    assert Hardware(name="laptop", kind="local", gpus=1).settings == KindSettings()
    typed = Hardware.model_validate(SLURM_ENTRY, context=validation_context())
    assert Hardware(**typed.model_dump() | {"settings": typed.settings}) == typed
