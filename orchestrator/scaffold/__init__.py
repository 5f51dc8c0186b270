"""`matrix new-workload NAME -o DIR`: a workload folder to start from. DIR gets a small
PyTorch model on synthetic data with declared parameters and a `tiny` preset
(`defaults.yaml`, `workload.py`), its FLOP model (`flops.py`), a test (`test_workload.py`)
and `example.yaml`, which names the folder with `path: .` and runs on this machine's CPU in
seconds, as generated."""

from __future__ import annotations

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
    if not name.isidentifier():
        raise ScaffoldError(f"{name!r} is not a Python identifier, which a workload name "
                            "must be (e.g. my_model)")
    if name in available_workloads():
        raise ScaffoldError(f"{name!r} is a built-in workload: give yours another name")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ScaffoldError(f"{folder} already exists and is not an empty folder: nothing "
                            "was written")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for template in sorted(TEMPLATES.glob("*.tmpl")):
        target = folder / template.name.removesuffix(".tmpl")
        text = Template(template.read_text(encoding="utf-8")).substitute(
            name=name, folder=folder)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written
