"""`matrix new-workload NAME -o DIR`: a workload folder to start from. DIR gets a small
PyTorch model on synthetic data with declared parameters and a `tiny` preset
(`defaults.yaml`, `workload.py`), its FLOP model (`flops.py`), a test (`test_workload.py`)
and `example.yaml`, which names the folder with `path: .` and runs on this machine's CPU in
seconds, as generated."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from orchestrator.errors import MatrixError
from orchestrator.workload_registry import available_workloads

TEMPLATES = Path(__file__).resolve().parent / "templates"


class ScaffoldError(MatrixError):
    """A workload name or folder the scaffold cannot use; nothing was written."""


def new_workload(name: str, folder: Path) -> list[Path]:
    """Write the workload folder; the files written. ScaffoldError, before any file is
    written, for a name that is no identifier or a built-in's, or a folder with files."""
    # an ASCII identifier that a matrix's name rule (records.Name) takes: "é" is a Python
    # identifier, and 300 characters one too, but example.yaml would then fail to load
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,79}", name):
        raise ScaffoldError(f"{name!r} is not a workload name: letters, digits and '_', "
                            "ASCII, not starting with a digit, at most 80 (e.g. my_model)")
    if name in available_workloads():
        raise ScaffoldError(f"{name!r} is a built-in workload: give yours another name")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ScaffoldError(f"{folder} already exists and is not an empty folder: nothing "
                            "was written")
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for template in sorted(TEMPLATES.glob("*.tmpl")):
            target = folder / template.name.removesuffix(".tmpl")
            text = Template(template.read_text(encoding="utf-8")).substitute(
                name=name, folder=folder)
            target.write_text(text, encoding="utf-8")
            written.append(target)
    except OSError as exc:
        for path in written:  # nothing half made
            path.unlink(missing_ok=True)
        raise ScaffoldError(f"cannot write {folder}: {exc.strerror or exc}") from None
    return written
