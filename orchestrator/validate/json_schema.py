"""The matrix file's JSON Schema, for editors (`matrix schema`), composed from the registry:
the executors and hardware kinds registered when it is made, a hardware entry per kind with
the shared keys and that kind's own (its provider's settings model, KindSettings), a stack
per executor with its own (ExecutorSettings), flat, as users write them, and each
provider's section under its name (ProviderSection: spec/entry_settings.py). An entry of
one kind offers none of another's."""

from __future__ import annotations

import copy
from typing import Any

from orchestrator.registry.executors import executor_kind, executor_names
from orchestrator.registry.providers import hardware_kinds as registered_kinds
from orchestrator.registry.providers import provider_names, registered_for, section_of
from orchestrator.spec.model import MAX_NODES, MatrixSpec


def json_schema() -> dict[str, Any]:
    """JSON Schema of the matrix file (draft 2020-12, as pydantic writes it)."""
    schema = MatrixSpec.model_json_schema()
    schema["title"] = "matrix-bench matrix file"
    defs = schema["$defs"]
    defs["Stack"]["properties"]["executor"]["anyOf"][0]["enum"] = executor_names()
    defs["Stack"] = _stacks(defs.pop("Stack"), defs)
    shared = defs.pop("Hardware")
    defs.pop("KindSettings", None)
    shared["properties"].pop("settings")
    shared["properties"].pop("node_counts")  # written as `nodes: [1, 2]`
    count = shared["properties"]["nodes"]
    count["maximum"] = MAX_NODES
    shared["properties"]["nodes"] = {
        "anyOf": [count, {"type": "array", "items": count, "minItems": 1,
                          "uniqueItems": True}],
        "default": 1, "description": "the nodes a cell spans; a list is an axis"}
    shared["properties"]["kind"]["enum"] = registered_kinds()
    defs["Hardware"] = {"title": "Hardware", "description": shared["description"],
                        "oneOf": [_entry_of_kind(shared, kind, defs)
                                  for kind in registered_kinds()]}
    schema["properties"].pop("sections")
    defs.pop("ProviderSection", None)
    for name in provider_names():  # each provider's own section, under its name
        section = section_of(name)
        if section is not None:
            found = section.model_json_schema()
            defs.update(found.pop("$defs", {}))
            defs[section.__name__] = found
            schema["properties"][name] = {"$ref": f"#/$defs/{section.__name__}"}
    return schema


def _stacks(shared: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A stack: one of the shared keys alone (its executor's keys left out, which the
    default executors, process and docker, have none of), or a stack that names an
    executor with keys of its own, with them."""
    defs.pop("ExecutorSettings", None)
    shared["properties"].pop("settings")
    entries = [shared]
    for name in executor_names():
        settings = executor_kind(name).settings.model_json_schema()
        if not settings.get("properties"):
            continue
        defs.update(settings.pop("$defs", {}))
        entry = copy.deepcopy(shared)
        entry["title"] = f"Stack of executor {name}"
        entry["properties"]["executor"] = {"const": name}
        entry["properties"].update(settings["properties"])
        entry["required"] = sorted({*entry.get("required", []), "executor"})
        entry.pop("description", None)
        entries.append(entry)
    return {"title": "Stack", "description": shared.pop("description", ""),
            "anyOf": entries}


def _entry_of_kind(shared: dict[str, Any], kind: str, defs: dict[str, Any]) -> dict[str, Any]:
    """A hardware entry of `kind`: the shared keys with `kind` fixed, and the kind's own."""
    settings = registered_for(kind).settings_model().model_json_schema()
    defs.update(settings.pop("$defs", {}))
    entry = copy.deepcopy(shared)
    entry["title"] = f"Hardware of kind {kind}"
    entry["properties"]["kind"] = {"const": kind}
    entry["properties"].update(settings.get("properties", {}))
    entry.pop("description", None)
    return entry
