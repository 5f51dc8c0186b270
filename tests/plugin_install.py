"""The test plugin package (tests/plugin_package) installed as a user installs a plugin: a
wheel whose entry points are its only registration, put by pip where PYTHONPATH names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT
from tests.wheel_files import wheel

PLUGINS = PROJECT / "tests" / "plugin_package"
ENTRY_POINTS = ("[matrix_bench.executors]\nniced = acme_plugins.niced:KIND\n"
                "broken = acme_plugins.missing:KIND\n"
                "[matrix_bench.providers]\npool = acme_plugins.pool:KIND\n")


def build_wheel(folder: Path) -> Path:
    """tests/plugin_package as the wheel acme_plugins 1.0, its entry points the only
    registration: no build backend needed."""
    return wheel(folder, "acme-plugins", "1.0", entry_points=ENTRY_POINTS,
                 files={p.relative_to(PLUGINS).as_posix(): p.read_text()
                        for p in sorted(PLUGINS.rglob("*.py"))})


def install_plugins(root: Path) -> dict[str, str]:
    """The environment of a process that has acme_plugins installed (by pip, into a folder
    under `root` that PYTHONPATH names: never into .venv)."""
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--target", str(target), str(build_wheel(root))], check=True)
    # before this process's own path, if it has one (a work tree beside the installed one)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(target),
                                                        os.environ.get("PYTHONPATH")]))}
