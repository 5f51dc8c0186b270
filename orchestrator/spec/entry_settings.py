"""The keys of a matrix entry that belong to what the entry names: a hardware entry's kind
(Slurm's partition, EC2's spot: its provider's `KindSettings`) and a stack's executor (a
plugin's wrapper options: its `ExecutorSettings`). Users write them flat on the entry,
beside the shared keys; `gather_settings` collects them into the entry's `settings` as the
owner's model, and says in one located line when a key belongs to another owner. A
provider's own section of the file (`aws:`, `slurm:`) is its `ProviderSection` model,
gathered by `gather_sections`.

Which model an owner has is the registries' answer (registry/providers.py,
registry/executors.py), passed to every validation in pydantic's context
(`settings_context`), never installed by an import: a dump reads the same in any process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from orchestrator.workload_registry import Scalar


class StrictModel(BaseModel):
    # strict: "3" is not an int and 1 is not a bool; extra="forbid": typos are errors.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class EntrySettings(StrictModel):
    """An owner's own keys of an entry. An owner with none has this empty model."""

    # what a task is allowed or billed to, not what it runs on: never in a cell's identity
    # (plan/identity.py); every other setting enters it once set to other than its default
    NOT_IDENTITY: ClassVar[frozenset[str]] = frozenset()

    def recorded(self) -> dict[str, Scalar]:
        """The settings a cell's records carry as columns (results/columns.py: `hw.<key>`),
        so two configurations that differ only there show it in every table: those that
        may enter its identity, where set; a value that is not a scalar as its JSON."""
        return {key: value if isinstance(value, str | int | float | bool)
                else json.dumps(value, sort_keys=True, default=str)
                for key, value in self.model_dump(mode="json").items()
                if key not in self.NOT_IDENTITY and value is not None}


class KindSettings(EntrySettings):
    """A hardware kind's own settings: the keys of a hardware entry that only its kind
    takes (Slurm's partition, EC2's spot). The provider that offers the kind declares its
    subclass (`ProviderKind.settings`); `Hardware` gathers them here."""

    def instance_gpu_model(self, instance_type: str) -> str | None:
        """The GPU a machine size of this kind has, where the kind's provider keeps a
        catalogue of them (EC2's instance types), for an entry that names no `gpu_model`
        of its own; None where it knows none (plan/cells.py: gpu_model_of)."""
        return None


class ProviderSection(StrictModel):
    """A provider's own section of the matrix file, under the provider's name (`aws:`,
    `slurm:`): how the sweep uses it, never part of a cell's identity. The provider's
    registration declares its subclass (`ProviderKind.section`); `MatrixSpec` gathers it
    into `spec.sections`."""


class ExecutorSettings(EntrySettings):
    """An executor's own settings: the keys of a stack that only its executor takes (the
    priority a wrapper runs the worker at, a runtime's options). The executor's
    registration declares its subclass (`ExecutorKind.settings`); `Stack` gathers them
    here. The worker never reads them: they are how the executor starts it."""


@dataclass(frozen=True)
class SettingsCatalogue:
    """Which settings model each owner has (a hardware kind, an executor, a provider's
    section), and which owners take a key, as a registry answers."""

    settings: Callable[[str], type[StrictModel] | None]  # None: no such owner
    owners: Callable[[str], list[str]]  # the owners whose settings take a key
    names: Callable[[], list[str]] = list  # every owner with settings (a matrix's sections)


Owner = Literal["kind", "executor", "section"]
_CONTEXT_KEYS: dict[Owner, str] = {"kind": "hardware_kinds", "executor": "executors",
                                   "section": "provider_sections"}


def settings_context(kinds: SettingsCatalogue, executors: SettingsCatalogue | None = None,
                     sections: SettingsCatalogue | None = None) -> dict[str, Any]:
    """The validation context that lets a hardware entry, a stack and a matrix's provider
    sections, or a model holding them (a matrix, a cell, a submission), read their owners'
    keys: `Cell.model_validate_json(text, context=settings_context(...))`;
    registry/providers.py's `validation_context()` is the registries' own."""
    given: dict[Owner, SettingsCatalogue | None] = {
        "kind": kinds, "executor": executors, "section": sections}
    return {_CONTEXT_KEYS[owner]: found for owner, found in given.items() if found is not None}


def catalogue_in(context: object, owner: Owner) -> SettingsCatalogue | None:
    found = context.get(_CONTEXT_KEYS[owner]) if isinstance(context, dict) else None
    return found if isinstance(found, SettingsCatalogue) else None


def gather_settings(model: type[BaseModel], data: dict[str, Any], owner: str,
                    catalogue: SettingsCatalogue | None, what: Owner) -> dict[str, Any]:
    """An entry as written (flat keys) with its owner's keys gathered into `settings` as
    the owner's model. A key of another owner is one located error ("partition applies to
    kind slurm only"); an unknown key is left for pydantic to refuse; an owner no registry
    knows drops the other owners' keys, for the loader to refuse the owner itself. Only an
    entry of the shared keys alone, or with its settings already a model, is read without
    the catalogue."""
    shared = set(model.model_fields) - {"settings"}
    given = data.get("settings", {})
    if catalogue is None:
        own_keys = set(data) - shared
        if own_keys and (own_keys != {"settings"} or not isinstance(given, EntrySettings)):
            raise RuntimeError(f"a {model.__name__.lower()} entry's own keys are read with "
                               f"the registries' catalogue: validate it with "
                               "context=validation_context() (registry/providers.py)")
        return data
    own = catalogue.settings(owner)
    if own is not None and isinstance(given, own):
        return data
    values = dict(given) if isinstance(given, dict) else {}
    entry, foreign = {}, []
    for key, value in data.items():
        if key in shared or key == "settings":
            entry[key] = value
        elif own is not None and key in own.model_fields:
            values[key] = value
        elif owners := catalogue.owners(key):
            foreign.append(InitErrorDetails(type=PydanticCustomError(
                "foreign_setting", "{key} applies to {what} {owners} only",
                {"key": key, "what": what, "owners": " or ".join(owners)}), loc=(key,),
                input=value))
        else:
            entry[key] = value  # a typo: pydantic names it, with the keys allowed
    if foreign and own is not None:
        raise ValidationError.from_exception_data(model.__name__, foreign)
    if own is None:
        return {k: v for k, v in entry.items() if k != "settings"}
    return {**entry, "settings": own.model_validate(values)}


def gather_sections(model: type[BaseModel], data: dict[str, Any],
                    catalogue: SettingsCatalogue | None) -> dict[str, Any]:
    """A matrix as written, with each provider's section (a top-level key named after the
    provider) validated as the provider's model into `sections`; a key no provider owns is
    left for pydantic to refuse as unknown. Errors keep the section's own location
    (`aws.region`)."""
    if catalogue is None:
        if set(data) - set(model.model_fields):
            raise RuntimeError("a matrix's provider sections are read with the registries' "
                               "catalogue: validate it with context=validation_context() "
                               "(registry/providers.py)")
        return data
    given = data.get("sections", {})
    if not isinstance(given, dict) or not all(
            isinstance(v, ProviderSection) for v in given.values()):  # a file's own key
        raise ValidationError.from_exception_data(model.__name__, [InitErrorDetails(
            type="extra_forbidden", loc=("sections",), input=given)])
    written: dict[str, Any] = dict(given)
    rest = {k: v for k, v in data.items() if k != "sections"}
    for key in [k for k in rest if k not in model.model_fields]:
        if catalogue.settings(key) is not None:
            written[key] = rest.pop(key)
    sections, errors = {}, []
    for key, value in written.items():
        own = catalogue.settings(key)
        if own is None or isinstance(value, own):
            sections[key] = value  # an unknown one: the field's own type refuses it
            continue
        try:
            sections[key] = own.model_validate(value)
        except ValidationError as exc:
            errors += [InitErrorDetails(type=error["type"], loc=(key, *error["loc"]),
                                        input=error["input"], ctx=error.get("ctx", {}))
                       for error in exc.errors()]
    if errors:
        raise ValidationError.from_exception_data(model.__name__, errors)
    return {**rest, "sections": sections}
