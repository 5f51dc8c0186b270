"""`matrix new-workload NAME -o DIR`: a workload folder to start from. DIR gets a small
PyTorch model on synthetic data with declared parameters and a `tiny` preset
(`defaults.yaml`, `workload.py`), its FLOP model (`flops.py`), a test (`test_workload.py`)
and `example.yaml`, which names the folder with `path: .` and runs on this machine's CPU in
seconds, as generated.

With `--package`, DIR is a Python distribution instead: the workload's own files in the
package DIR/NAME/ (with `__init__.py`), a `pyproject.toml` that names it in the entry-point
group `matrix_bench.workloads` and declares `defaults.yaml` as package data (setuptools
leaves it out of a wheel otherwise), and `example.yaml` and the test beside it, which name
the workload once it is installed (`pip install -e DIR`)."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from orchestrator.errors import MatrixError
from orchestrator.workload_registry import available_workloads

TEMPLATES = Path(__file__).resolve().parent / "templates"


class ScaffoldError(MatrixError):
    """A workload name or folder the scaffold cannot use; nothing was written."""


WORKLOAD_FILES = ("defaults.yaml", "workload.py", "flops.py")  # the package, with --package


def new_workload(name: str, folder: Path, package: bool = False) -> list[Path]:
    """Write the workload folder (or, `package`, the distribution); the files written.
    ScaffoldError, before any file is written, for a name that is no identifier or a
    built-in's, or a folder with files."""
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
    values = {"name": name, "folder": folder, "dist": name.replace("_", "-").lower(),
              "yaml_install": f"\n# Install it first: pip install -e {folder}" if package else "",
              "test_install": f"\n\nInstall it first: `pip install -e {folder}`.\n" if package
                              else "",
              "source": "# the installed package's (entry point matrix_bench.workloads)"
                        if package else "path: .",
              "flops_module": f"{name}.flops" if package else "flops"}
    targets = {template: folder / template.name.removesuffix(".tmpl")
               for template in sorted(TEMPLATES.glob("*.tmpl"))}
    if package:
        targets = {template: folder / name / target.name if target.name in WORKLOAD_FILES
                   else target for template, target in targets.items()}
        targets |= {template: folder / (name if template.name == "__init__.py.tmpl" else "")
                    / template.name.removesuffix(".tmpl")
                    for template in sorted((TEMPLATES / "package").glob("*.tmpl"))}
    written: list[Path] = []
    try:
        for template, target in targets.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(Template(template.read_text(encoding="utf-8")).substitute(values),
                              encoding="utf-8")
            written.append(target)
    except OSError as exc:
        for path in written:  # nothing half made
            path.unlink(missing_ok=True)
        raise ScaffoldError(f"cannot write {folder}: {exc.strerror or exc}") from None
    return written
